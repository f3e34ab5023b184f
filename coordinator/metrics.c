/* metrics.c - the coordinator's request and step metrics, as StatsReply
 * fields 5-20 and 24-29 (the HTTP gateway's /metrics; docs/PIPELINE.md defines each).
 * Observations are counts in fixed buckets: no allocation and no syscall
 * beyond the clock readings the callers already make. */
#include "coord-internal.h"

#include "sysinfo.h"

#include <string.h>

/* Prometheus-style bounds, seconds: request latencies, then step times. */
static const double request_bounds[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                        0.75,  1,     2.5,  5,    7.5,  10,   20,   40,   80};
static const double step_bounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                     0.05,   0.075,   0.1,    0.25,  0.5,    1,     2.5};
_Static_assert(sizeof(request_bounds) / sizeof(double) <= LP__HIST_MAX, "request bounds fit");
_Static_assert(sizeof(step_bounds) / sizeof(double) <= LP__HIST_MAX, "step bounds fit");

static const char *const fin_names[F_COUNT] = {"stop", "length", "context", "cancelled", "error"};
static const char *const err_names[E_COUNT] = {"bad_request", "tokenizer", "engine", "sampler", "internal"};

void lp__metrics_init(lp__metrics_t *m)
{
    memset(m, 0, sizeof(*m));
    for (int i = 0; i < H_COUNT; i++) {
        bool req = i == H_TTFT || i == H_E2E || i == H_QUEUE;
        m->h[i].bounds = req ? request_bounds : step_bounds;
        m->h[i].n = req ? sizeof(request_bounds) / sizeof(double) : sizeof(step_bounds) / sizeof(double);
        lmpipe__histogram__init(&m->h[i].msg);
        m->hp[i] = &m->h[i].msg;
    }
    for (int i = 0; i < F_COUNT; i++) {
        lmpipe__kind_count__init(&m->kc_fin[i]);
        m->kc_fin[i].kind = (char *)fin_names[i];
        m->kcp_fin[i] = &m->kc_fin[i];
    }
    for (int i = 0; i < E_COUNT; i++) {
        lmpipe__kind_count__init(&m->kc_err[i]);
        m->kc_err[i].kind = (char *)err_names[i];
        m->kcp_err[i] = &m->kc_err[i];
    }
}

void lp__metrics_observe(lp__hist_t *h, uint64_t ns)
{
    double s = (double)ns * 1e-9;
    size_t i = 0;
    while (i < h->n && s > h->bounds[i]) i++;
    if (i < h->n) h->in[i]++;
    h->sum += s;
    h->count++;
}

void lp__metrics_queued(lp_coord_t *c, lp__req_t *r, uint64_t now)
{
    r->t_queue = now;
    r->queue_pending = false;
    r->group->n_queue_pending--;
    lp__metrics_observe(&c->m.h[H_QUEUE], now - r->t_start);
}

/* The step's wall time runs from when it went out, or from the group's
 * previous SampleReply if that came later (with the ring the next step is
 * out before the previous one is back); the overhead is what of it neither
 * the engine's compute nor the sampler covers. */
void lp__metrics_step(lp_coord_t *c, lp__group_t *g, const lp__sched_step_t *st,
                      const Lmpipe__SampleReply *rep)
{
    uint64_t now = lp_now_ns();
    uint64_t start = st->t_sent > g->t_sampled ? st->t_sent : g->t_sampled;
    g->t_sampled = now;
    uint64_t eng = rep->engine_ns ? rep->engine_ns : st->engine_ns, smp = rep->sample_ns;
    uint64_t wall = now > start ? now - start : 0;
    lp__metrics_observe(&c->m.h[H_ENGINE], eng);
    lp__metrics_observe(&c->m.h[H_SAMPLER], smp);
    lp__metrics_observe(&c->m.h[H_OVERHEAD], wall > eng + smp ? wall - eng - smp : 0);
}

void lp__metrics_fill(lp_coord_t *c, Lmpipe__StatsReply *out)
{
    lp__metrics_t *m = &c->m;
    for (size_t i = 0; i < c->n_reqs; i++) {
        enum lp__rstate st = c->reqs[i]->state;
        if (st == R_TOKENIZING || st == R_WAIT_SLOT) out->n_waiting++;
        else if (st == R_OPENING || st == R_RUNNING) out->n_running++;
    }
    out->prompt_tokens = m->prompt_tokens;
    out->generation_tokens = m->generation_tokens;
    for (int i = 0; i < H_COUNT; i++) {
        lp__hist_t *h = &m->h[i];
        uint64_t run = 0;
        for (size_t k = 0; k < h->n; k++) h->cum[k] = run += h->in[k];
        h->msg.bounds = (double *)h->bounds;
        h->msg.n_bounds = h->n;
        h->msg.counts = h->cum;
        h->msg.n_counts = h->n;
        h->msg.sum = h->sum;
        h->msg.count = h->count;
    }
    out->ttft_s = m->hp[H_TTFT];
    out->itl_s = m->hp[H_ITL];
    out->e2e_s = m->hp[H_E2E];
    out->queue_s = m->hp[H_QUEUE];
    out->engine_step_s = m->hp[H_ENGINE];
    out->sampler_step_s = m->hp[H_SAMPLER];
    out->overhead_step_s = m->hp[H_OVERHEAD];
    /* Ring occupancy: the rows of the steps in flight (one group today). */
    for (size_t i = 0; i < c->n_groups; i++) {
        const lp__sched_group_t *g = &c->groups[i].s;
        if (!g->ring) continue;
        out->ring_slots += (uint32_t)g->ring_slots;
        for (int k = 0; k < LP__SCHED_MAX_STEPS; k++)
            if (g->steps[k].no) out->ring_used += (uint32_t)g->steps[k].n_rows;
    }
    out->strategy_version = m->strategy_version;
    out->prefix_cache_queries = m->prefix_queries;
    out->prefix_cache_hits = m->prefix_hits;
    for (size_t i = 0; i < c->n_groups; i++) {
        const lp__group_t *g = &c->groups[i];
        if (g->state != G_READY || !g->s.paged) continue;
        out->kv_blocks_used += (uint32_t)g->s.kv.n_used;
        out->kv_blocks_total += (uint32_t)g->s.kv.n_blocks;
        out->kv_blocks_cached += (uint32_t)g->s.kv.n_cached;
        out->kv_blocks_peak += (uint32_t)g->s.peak_used;
        if (!g->s.swa) continue;
        out->kv_swa_blocks_used += (uint32_t)g->s.kv_swa.n_used;
        out->kv_swa_blocks_total += (uint32_t)g->s.kv_swa.n_blocks;
        out->kv_swa_blocks_cached += (uint32_t)g->s.kv_swa.n_cached;
        out->kv_swa_blocks_peak += (uint32_t)g->s.peak_swa_used;
    }
    out->kv_preemptions = m->preemptions;
    for (int i = 0; i < F_COUNT; i++) m->kc_fin[i].n = m->finished[i];
    for (int i = 0; i < E_COUNT; i++) m->kc_err[i].n = m->errors[i];
    out->n_finish_reasons = F_COUNT;
    out->finish_reasons = m->kcp_fin;
    out->n_error_kinds = E_COUNT;
    out->error_kinds = m->kcp_err;
    static const char *const stages[3] = {"tokenizer", "engine", "sampler"};
    for (int i = 0; i < 3; i++) {
        lmpipe__kind_count__init(&c->kc_restarts[i]);
        c->kc_restarts[i].kind = (char *)stages[i];
        c->kc_restarts[i].n = c->restarts[i];
        c->kcp_restarts[i] = &c->kc_restarts[i];
    }
    out->n_stage_restarts = 3;
    out->stage_restarts = c->kcp_restarts;
    out->requests_redriven = c->n_redriven;
    out->requests_poisoned = c->n_poisoned;
    for (size_t i = 0; i < c->n_groups; i++) {
        const lp__link_t *l = &c->groups[i].samp;
        if (l->hello && l->hello->hello) out->sampler_plugin_fallbacks += l->hello->hello->plugin_fallbacks;
    }
}
