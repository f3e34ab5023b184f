/* drain.c - the coordinator's stop on SIGTERM: no new requests ("draining"),
 * the running ones finish within the grace period or end with FINISH_ERROR
 * "shutting down", and the loop stops once every final event is out. */
#include "coord-internal.h"

#include "error.h"
#include "log.h"

#include <stdio.h>

/* After the grace period, how long a request ended by the drain may still
 * wait for its sampler's answer to the close (the end of its text) before
 * its final event goes out without it. */
#define CLOSE_WAIT_MS 1000

static void stop_when_empty(lp_coord_t *c)
{
    if (c->draining && c->n_reqs == 0 && c->n_proxies == 0 && !c->drain_stopped) {
        c->drain_stopped = true;
        LP_INFO("coordinator: drained");
        lp_service_stop(c->svc);
    }
}

void lp__drain_check(lp_coord_t *c) { stop_when_empty(c); }

/* The sampler did not answer the closes in time: the final events still
 * due go out without the rest of the text, and the loop stops.  The
 * requests stay (a reply still due may name them) until lp_coord_destroy. */
static void on_close_wait(uv_timer_t *t)
{
    lp_coord_t *c = t->data;
    for (size_t i = c->n_reqs; i-- > 0;) {
        if (i >= c->n_reqs) continue; /* an earlier one's end freed more */
        lp__req_t *r = c->reqs[i];
        if (r->state != R_DONE) lp__coord_fail_retryable(c, r, E_INTERNAL, "shutting down");
        else lp__req_final_now(c, r);
    }
    if (!c->drain_stopped) {
        c->drain_stopped = true;
        lp_service_stop(c->svc);
    }
}

static void on_grace_over(uv_timer_t *t)
{
    lp_coord_t *c = t->data;
    char why[160];
    snprintf(why, sizeof(why), "shutting down: the request did not finish within the %d ms grace "
             "period of the coordinator's stop", c->drain_grace_ms);
    if (c->n_reqs) LP_WARN("coordinator: grace period over: ending %zu requests", c->n_reqs);
    /* From the newest: lp__coord_fail may free the request. */
    for (size_t i = c->n_reqs; i-- > 0;)
        if (i < c->n_reqs && c->reqs[i]->state != R_DONE) lp__coord_fail_retryable(c, c->reqs[i], E_INTERNAL, why);
    lp__coord_pump(c);
    stop_when_empty(c);
    if (!c->drain_stopped) uv_timer_start(&c->drain_timer, on_close_wait, CLOSE_WAIT_MS, 0);
}

void lp__coord_drain(void *ctx, lp_service_t *svc)
{
    lp_coord_t *c = ctx;
    (void)svc;
    c->draining = true;
    c->drain_grace_ms = c->p.drain_grace_ms == 0 ? LP_COORD_DRAIN_GRACE_MS
                        : c->p.drain_grace_ms < 0 ? 0 : c->p.drain_grace_ms;
    if (c->n_reqs) LP_INFO("coordinator: draining: %zu requests may run for %d ms more", c->n_reqs,
                           c->drain_grace_ms);
    stop_when_empty(c);
    if (c->drain_stopped) return;
    uv_timer_init(lp_service_loop(c->svc), &c->drain_timer); /* closed by the skeleton */
    c->drain_timer.data = c;
    uv_timer_start(&c->drain_timer, on_grace_over, (uint64_t)c->drain_grace_ms, 0);
}

int lp__drain_refuse(const lp_coord_t *c)
{
    if (!c->draining) return 0;
    return lp_error_set(LP_ERR(ESHUTDOWN), "draining: the coordinator is shutting down and takes "
                        "no new requests");
}
