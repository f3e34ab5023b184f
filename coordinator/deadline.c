/* deadline.c - GenerateRequest.deadline_ms: a request not finished in time
 * ends with FINISH_ERROR "deadline: ...", whatever it waits for (a slot, a
 * stage that is restarting), so that its client always hears of it. */
#include "coord-internal.h"

#include "sysinfo.h"

#include <stdio.h>

#define TICK_MS 100

static void on_tick(uv_timer_t *t)
{
    lp_coord_t *c = t->data;
    uint64_t now = lp_now_ns();
    bool any = false;
    /* From the newest: lp__coord_fail may free the request. */
    for (size_t i = c->n_reqs; i-- > 0;) {
        if (i >= c->n_reqs) continue;
        lp__req_t *r = c->reqs[i];
        if (!r->t_deadline || r->state == R_DONE) continue;
        if (now < r->t_deadline) {
            any = true;
            continue;
        }
        char why[160];
        snprintf(why, sizeof(why), "deadline: not finished within deadline_ms = %llu",
                 (unsigned long long)((r->t_deadline - r->t_start) / 1000000));
        lp__coord_fail_kind(c, r, E_INTERNAL, LP_EK_DEADLINE, "deadline_ms", why);
    }
    if (!any) uv_timer_stop(t);
    lp__coord_pump(c);
}

void lp__deadline_set(lp_coord_t *c, lp__req_t *r, uint32_t ms)
{
    if (!ms) return;
    r->t_deadline = r->t_start + (uint64_t)ms * 1000000;
    if (!c->deadline_timer_open) {
        uv_timer_init(lp_service_loop(c->svc), &c->deadline_timer); /* closed by the skeleton */
        c->deadline_timer.data = c;
        c->deadline_timer_open = true;
    }
    if (!uv_is_active((uv_handle_t *)&c->deadline_timer))
        uv_timer_start(&c->deadline_timer, on_tick, TICK_MS, TICK_MS);
}
