/* metrics.c - GET /metrics: the coordinator's StatsReply in the Prometheus
 * text format (0.0.4), with vLLM's metric names under the lmpipe: prefix,
 * and the gateway's own HTTP counters. */
#include "gw.h"

#include <stdlib.h>
#include <string.h>

typedef struct metrics_call {
    lp_gw_call_t base;
    lp_link_op_t op;
    lp_gw_conn_t *conn;
    lp_gw_t *gw;
} metrics_call_t;

static void metrics_abort(lp_gw_call_t *base)
{
    metrics_call_t *m = (metrics_call_t *)base;
    lp_link_forget(&m->gw->link, &m->op);
    free(m);
}

static void label_value(lp_json_buf_t *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\') lp_json_buf_puts(b, "\\\\");
        else if (*s == '"') lp_json_buf_puts(b, "\\\"");
        else if (*s == '\n') lp_json_buf_puts(b, "\\n");
        else lp_json_buf_put(b, s, 1);
    }
}

static void meta(lp_json_buf_t *b, const char *name, const char *type, const char *help)
{
    lp_json_buf_printf(b, "# HELP lmpipe:%s %s\n# TYPE lmpipe:%s %s\n", name, help, name, type);
}

static void sample(lp_json_buf_t *b, const lp_gw_t *gw, const char *name, const char *label, const char *lv,
                   double x)
{
    lp_json_buf_printf(b, "lmpipe:%s{model_name=\"", name);
    label_value(b, gw->link.model);
    lp_json_buf_puts(b, "\"");
    if (label) {
        lp_json_buf_printf(b, ",%s=\"", label);
        label_value(b, lv);
        lp_json_buf_puts(b, "\"");
    }
    lp_json_buf_puts(b, "} ");
    lp_json_buf_num(b, x);
    lp_json_buf_puts(b, "\n");
}

static const double lat_bounds[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                    0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80};
static const double step_bounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                     0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5};

static void histogram(lp_json_buf_t *b, const lp_gw_t *gw, const char *name, const char *help,
                      const Lmpipe__Histogram *h, bool step)
{
    meta(b, name, "histogram", help);
    size_t nb = h ? h->n_bounds : step ? sizeof(step_bounds) / sizeof(double) : sizeof(lat_bounds) / sizeof(double);
    const double *bounds = h ? h->bounds : step ? step_bounds : lat_bounds;
    char bucket[128], le[64];
    snprintf(bucket, sizeof(bucket), "%s_bucket", name);
    for (size_t i = 0; i < nb; i++) {
        snprintf(le, sizeof(le), "%.15g", bounds[i]);
        if (!strchr(le, '.') && !strchr(le, 'e')) strncat(le, ".0", sizeof(le) - strlen(le) - 1);
        sample(b, gw, bucket, "le", le, h && i < h->n_counts ? (double)h->counts[i] : 0);
    }
    sample(b, gw, bucket, "le", "+Inf", h ? (double)h->count : 0);
    char n[128];
    snprintf(n, sizeof(n), "%s_sum", name);
    sample(b, gw, n, NULL, NULL, h ? h->sum : 0);
    snprintf(n, sizeof(n), "%s_count", name);
    sample(b, gw, n, NULL, NULL, h ? (double)h->count : 0);
}

/* `extra` (may be NULL) is added to the first kind of `always`. */
static void kinds(lp_json_buf_t *b, const lp_gw_t *gw, const char *name, const char *help, const char *label,
                  Lmpipe__KindCount **k, size_t n, const char *const *always, uint64_t extra)
{
    meta(b, name, "counter", help);
    /* The known kinds always appear, at 0 until they happen, so that rate()
     * sees the first one. */
    for (int i = 0; always[i]; i++) {
        bool seen = false;
        for (size_t j = 0; j < n; j++) seen |= !strcmp(k[j]->kind, always[i]);
        if (!seen) sample(b, gw, name, label, always[i], i == 0 ? (double)extra : 0);
    }
    for (size_t j = 0; j < n; j++)
        sample(b, gw, name, label, k[j]->kind, (double)k[j]->n + (!strcmp(k[j]->kind, always[0]) ? (double)extra : 0));
}

/* The coordinator's engine groups: one sample per group of each, labelled
 * group="NAME". */
static void groups(lp_json_buf_t *b, const lp_gw_t *gw, const Lmpipe__StatsReply *s)
{
    static const struct { const char *name, *type, *help; } g[] = {
        {"group_ready", "gauge", "1 when the engine group is ready for new requests."},
        {"group_slots_used", "gauge", "Engine sequence slots in use, by group."},
        {"group_slots_total", "gauge", "Engine sequence slots, by group (0 until it has been ready)."},
        {"group_requests_running", "gauge", "Requests in the group's steps."},
        {"group_requests_waiting", "gauge", "Requests placed on the group waiting for a slot."},
        {"group_steps_total", "counter", "Steps sent to the group's engine."},
        {"group_requests_total", "counter", "Requests placed on the group."},
        {"group_dropped_total", "counter", "Times the group dropped out."},
        {"group_kv_blocks_used", "gauge", "KV blocks held by running requests, by group."},
        {"group_kv_blocks_total", "gauge", "KV blocks in the group's pool (0: its engine does not page)."},
        {"group_kv_blocks_cached", "gauge", "Unreferenced KV blocks kept for their prefix, by group."},
        {"group_prefix_cache_hits_total", "counter", "Prompt tokens taken from the group's prefix cache."},
    };
    for (size_t k = 0; k < sizeof(g) / sizeof(g[0]); k++) {
        meta(b, g[k].name, g[k].type, g[k].help);
        for (size_t i = 0; i < s->n_groups; i++) {
            const Lmpipe__GroupStats *q = s->groups[i];
            double v[] = {q->ready, q->slots_used, q->slots_total, (double)q->n_running,
                          (double)q->n_waiting, (double)q->steps, (double)q->n_requests,
                          (double)q->n_dropped, q->kv_blocks_used, q->kv_blocks_total,
                          q->kv_blocks_cached, (double)q->prefix_cache_hits};
            sample(b, gw, g[k].name, "group", q->name, v[k]);
        }
    }
    /* off for a reason: configured, not_paged, recurrent_state (docs) */
    meta(b, "group_prefix_cache_enabled", "gauge", "1 when the group's prefix cache is on; "
         "0 with the reason it is off (configured, not_paged, recurrent_state).");
    for (size_t i = 0; i < s->n_groups; i++) {
        const Lmpipe__GroupStats *q = s->groups[i];
        if (!q->ready) continue;
        const char *off = q->prefix_cache_off ? q->prefix_cache_off : "";
        lp_json_buf_puts(b, "lmpipe:group_prefix_cache_enabled{model_name=\"");
        label_value(b, gw->link.model);
        lp_json_buf_puts(b, "\",group=\"");
        label_value(b, q->name);
        lp_json_buf_puts(b, "\",reason=\"");
        label_value(b, off);
        lp_json_buf_printf(b, "\"} %d\n", off[0] ? 0 : 1);
    }
}

static void metrics_reply(lp_link_op_t *op, const Lmpipe__Msg *m)
{
    metrics_call_t *mc = op->arg;
    lp_gw_conn_t *conn = mc->conn;
    lp_gw_t *gw = mc->gw;
    lp_link_forget(&gw->link, &mc->op);
    lp_gw_conn_set_call(conn, NULL);
    free(mc);
    if (m->body_case != LMPIPE__MSG__BODY_STATS_REPLY) {
        lp_gw_error(conn, 503, "server_error", NULL, NULL, "the coordinator gave no stats: %s",
                    m->body_case == LMPIPE__MSG__BODY_ERROR ? m->error->message : lp_msg_body_name(m->body_case));
        return;
    }
    const Lmpipe__StatsReply *s = m->stats_reply;
    lp_json_buf_t b = {0};
    meta(&b, "num_requests_running", "gauge", "Requests in the engine's steps.");
    sample(&b, gw, "num_requests_running", NULL, NULL, (double)s->n_running);
    meta(&b, "num_requests_waiting", "gauge", "Requests tokenizing or waiting for a sequence slot.");
    sample(&b, gw, "num_requests_waiting", NULL, NULL, (double)s->n_waiting);
    meta(&b, "prompt_tokens_total", "counter", "Prompt tokens of the requests admitted.");
    sample(&b, gw, "prompt_tokens_total", NULL, NULL, (double)s->prompt_tokens);
    meta(&b, "generation_tokens_total", "counter", "Tokens generated.");
    sample(&b, gw, "generation_tokens_total", NULL, NULL, (double)s->generation_tokens);
    histogram(&b, gw, "time_to_first_token_seconds", "From arrival to the first token.", s->ttft_s, false);
    histogram(&b, gw, "inter_token_latency_seconds", "Between two tokens of a request.", s->itl_s, true);
    histogram(&b, gw, "e2e_request_latency_seconds", "From arrival to the final event.", s->e2e_s, false);
    histogram(&b, gw, "request_queue_time_seconds", "From arrival to the request's first step.", s->queue_s,
              false);
    histogram(&b, gw, "engine_step_seconds", "Engine compute of one step.", s->engine_step_s, true);
    histogram(&b, gw, "sampler_step_seconds", "Sampler time for one step's rows.", s->sampler_step_s, true);
    histogram(&b, gw, "pipeline_overhead_step_seconds", "A step's wall time less engine and sampler time.",
              s->overhead_step_s, true);
    meta(&b, "shm_ring_slots", "gauge", "Slots in the engine's shared-memory logits ring (0: rows go inline).");
    sample(&b, gw, "shm_ring_slots", NULL, NULL, s->ring_slots);
    meta(&b, "shm_ring_slots_used", "gauge", "Ring slots holding rows of steps in flight.");
    sample(&b, gw, "shm_ring_slots_used", NULL, NULL, s->ring_used);
    /* Prefix cache and KV pool (paged engines; 0 where the engines do not
     * page): vLLM's prefix_cache_queries/hits count prompt tokens, and its
     * kv_cache_usage_perc is a fraction. */
    meta(&b, "prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.");
    sample(&b, gw, "prefix_cache_queries_total", NULL, NULL, (double)s->prefix_cache_queries);
    meta(&b, "prefix_cache_hits_total", "counter", "Prompt tokens taken from the prefix cache (not prefilled).");
    sample(&b, gw, "prefix_cache_hits_total", NULL, NULL, (double)s->prefix_cache_hits);
    meta(&b, "prefix_cache_hit_rate", "gauge", "Prompt tokens taken from the prefix cache over those looked up, "
                                               "since the coordinator started (0..1).");
    sample(&b, gw, "prefix_cache_hit_rate", NULL, NULL,
           s->prefix_cache_queries ? (double)s->prefix_cache_hits / (double)s->prefix_cache_queries : 0);
    meta(&b, "kv_cache_usage_perc", "gauge", "Fraction of the KV blocks held by running requests (0..1).");
    sample(&b, gw, "kv_cache_usage_perc", NULL, NULL,
           s->kv_blocks_total ? (double)s->kv_blocks_used / s->kv_blocks_total : 0);
    meta(&b, "kv_cache_blocks_used", "gauge", "KV blocks held by running requests.");
    sample(&b, gw, "kv_cache_blocks_used", NULL, NULL, s->kv_blocks_used);
    meta(&b, "kv_cache_blocks_total", "gauge", "KV blocks in the engines' pools (0: the engines do not page).");
    sample(&b, gw, "kv_cache_blocks_total", NULL, NULL, s->kv_blocks_total);
    meta(&b, "kv_cache_blocks_cached", "gauge", "Unreferenced KV blocks kept for their prefix (evictable).");
    sample(&b, gw, "kv_cache_blocks_cached", NULL, NULL, s->kv_blocks_cached);
    meta(&b, "kv_cache_swa_blocks_used", "gauge", "Sliding-window layers' KV blocks held by running requests.");
    sample(&b, gw, "kv_cache_swa_blocks_used", NULL, NULL, s->kv_swa_blocks_used);
    meta(&b, "kv_cache_swa_blocks_total", "gauge", "KV blocks in the sliding-window layers' pools (0: none).");
    sample(&b, gw, "kv_cache_swa_blocks_total", NULL, NULL, s->kv_swa_blocks_total);
    meta(&b, "num_preemptions_total", "counter", "Requests preempted for KV blocks and recomputed later.");
    sample(&b, gw, "num_preemptions_total", NULL, NULL, (double)s->kv_preemptions);
    meta(&b, "sampler_strategy_version", "gauge", "The sampler's strategy version, as last seen.");
    sample(&b, gw, "sampler_strategy_version", NULL, NULL, (double)s->strategy_version);
    static const char *const reasons[] = {"stop", "length", "context", "cancelled", "error", NULL};
    kinds(&b, gw, "request_success_total", "Requests ended, by finish reason.", "finished_reason",
          s->finish_reasons, s->n_finish_reasons, reasons, 0);
    static const char *const errs[] = {"bad_request", "tokenizer", "engine", "sampler", "internal", NULL};
    /* bad requests: the coordinator's, and those this gateway refused
     * itself through the request schema (they never reach it) */
    kinds(&b, gw, "errors_total", "Errors, by kind.", "kind", s->error_kinds, s->n_error_kinds, errs, gw->n_bad_requests);
    static const char *const stages[] = {"tokenizer", "engine", "sampler", NULL};
    kinds(&b, gw, "stage_restarts_total", "Services back with a new process, by stage.", "stage",
          s->stage_restarts, s->n_stage_restarts, stages, 0);
    meta(&b, "requests_redriven_total", "counter", "Requests prefilled again from prompt and tokens so far "
         "after a stage died.");
    sample(&b, gw, "requests_redriven_total", NULL, NULL, (double)s->requests_redriven);
    meta(&b, "requests_poisoned_total", "counter", "Requests failed for having been in flight each of the "
         "last 2 times a stage died (\"crashed the sampler twice\"), not re-driven again.");
    sample(&b, gw, "requests_poisoned_total", NULL, NULL, (double)s->requests_poisoned);
    meta(&b, "sampler_plugin_fallbacks_total", "counter", "Times a sampler started on the last strategy "
         "without a plugin that it had died or hung in.");
    sample(&b, gw, "sampler_plugin_fallbacks_total", NULL, NULL, (double)s->sampler_plugin_fallbacks);
    groups(&b, gw, s);
    meta(&b, "http_requests_total", "counter", "HTTP responses of this gateway, by status code.");
    /* This response counts too: it is 200 unless it fails to build. */
    gw->n_http[0]++;
    for (int i = 0; i < LP_GW_N_CODES; i++) {
        char code[8];
        snprintf(code, sizeof(code), "%d", lp_gw_codes[i]);
        sample(&b, gw, "http_requests_total", "code", code, (double)gw->n_http[i]);
    }
    gw->n_http[0]--;
    meta(&b, "http_connections", "gauge", "Open HTTP connections of this gateway (the health reserve's too).");
    sample(&b, gw, "http_connections", NULL, NULL, gw->n_conns + gw->n_reserve);
    meta(&b, "http_connections_evicted_total", "counter", "Connections closed to make room for a new one: "
         "still in their headers, or idle between requests, when --max-connections were open.");
    sample(&b, gw, "http_connections_evicted_total", NULL, NULL, (double)gw->n_evicted);
    meta(&b, "http_connections_refused_total", "counter", "Connections turned away with 503: over "
         "--max-connections-per-address, or no room even on the health reserve.");
    sample(&b, gw, "http_connections_refused_total", NULL, NULL, (double)gw->n_refused);
    if (b.oom) lp_gw_error(conn, 500, "server_error", NULL, NULL, "out of memory");
    else lp_gw_respond(conn, 200, "text/plain; version=0.0.4; charset=utf-8", b.p, b.n, NULL);
    lp_json_buf_free(&b);
}

void lp_gw_metrics(lp_gw_conn_t *conn)
{
    lp_gw_t *gw = lp_gw_conn_gw(conn);
    metrics_call_t *mc = calloc(1, sizeof(*mc));
    if (!mc) {
        lp_gw_error(conn, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    mc->base.abort = metrics_abort;
    mc->conn = conn;
    mc->gw = gw;
    mc->op.arg = mc;
    mc->op.on_msg = metrics_reply;
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    Lmpipe__StatsRequest sr = LMPIPE__STATS_REQUEST__INIT;
    m.body_case = LMPIPE__MSG__BODY_STATS;
    m.stats = &sr;
    if (lp_link_send(&gw->link, &m, &mc->op) != 0) {
        free(mc);
        lp_gw_error(conn, 503, "server_error", NULL, NULL, "cannot send to the coordinator");
        return;
    }
    lp_gw_conn_set_call(conn, &mc->base);
}
