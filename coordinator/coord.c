/* coord.c - the coordinator (see coord.h and coord-internal.h for its
 * layers): readiness, the dispatch of service replies, start and stop. */
#include "coord-internal.h"

#include "error.h"
#include "hello.h"
#include "log.h"
#include "sdnotify.h"
#include "sysinfo.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

void lp__coord_fail_pipeline(lp_coord_t *c, const char *msg)
{
    if (!c->failed) LP_ERROR("coordinator: %s", msg);
    c->failed = true;
    snprintf(c->fail_msg, sizeof(c->fail_msg), "%s", msg);
}

/* The client's view of the pipeline (vocabulary, end-of-generation tokens)
 * from the first tokenizer and the first group that are ready; groups
 * that come later are checked against it. */
static int init_shape(lp_coord_t *c, const Lmpipe__Hello *t, lp__group_t *g)
{
    const Lmpipe__Hello *e = g->eng.hello->hello;
    c->n_vocab = (int32_t)e->n_vocab;
    c->n_ctx = g->s.n_ctx;
    c->max_seqs = g->s.max_seqs;
    c->max_batch_tokens = g->s.max_batch_tokens;
    c->bos_id = t->bos_id >= 0 ? t->bos_id : e->bos_id;
    c->eos_id = t->eos_id >= 0 ? t->eos_id : e->eos_id;
    c->eog = calloc((size_t)c->n_vocab, 1);
    if (c->eog && c->eos_id >= 0 && c->eos_id < c->n_vocab) c->eog[c->eos_id] = 1;
    for (size_t i = 0; c->eog && i < t->n_eog_ids; i++)
        if (t->eog_ids[i] >= 0 && t->eog_ids[i] < c->n_vocab) c->eog[t->eog_ids[i]] = 1;
    for (int32_t i = 0; c->eog && i < c->n_vocab; i++) c->n_eog_ids += c->eog[i];
    c->eog_ids = calloc(c->n_eog_ids ? c->n_eog_ids : 1, sizeof(int32_t));
    for (int32_t i = 0, k = 0; c->eog && c->eog_ids && i < c->n_vocab; i++)
        if (c->eog[i]) c->eog_ids[k++] = i;
    if (!c->eog || !c->eog_ids) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    c->ready = true;
    LP_INFO("coordinator: pipeline ready: %s, %d seqs, %d tokens a step, logits %s",
            e->model_name, c->max_seqs, c->max_batch_tokens,
            g->s.ring ? "in shared memory" : "inline");
    if (lp_sdnotify_sendf("READY=1\nSTATUS=coordinator: pipeline ready: %s", e->model_name))
        LP_WARN("coordinator: %s", lp_error_msg());
    return 0;
}

/* Every pair of services that said hello must serve the same vocabulary;
 * a group whose two hellos are in becomes ready once a tokenizer is. */
static void check_ready(lp_coord_t *c)
{
    const Lmpipe__Hello *t = NULL, *e0 = NULL;
    /* A tokenizer that comes back later is checked against a group too. */
    for (size_t i = 0; i < c->n_groups && !e0; i++)
        if (c->groups[i].state == G_READY) e0 = c->groups[i].eng.hello->hello;
    for (size_t i = 0; i < c->n_toks; i++) {
        if (!c->toks[i].hello) continue;
        if ((t && lp_hello_check_vocab(t, c->toks[i].hello->hello)) ||
            (e0 && lp_hello_check_vocab(c->toks[i].hello->hello, e0))) {
            lp__coord_fail_pipeline(c, lp_error_msg());
            return;
        }
        if (!t) t = c->toks[i].hello->hello;
    }
    for (size_t i = 0; i < c->n_groups; i++) {
        lp__group_t *g = &c->groups[i];
        if (g->state != G_CONNECTING || !g->eng.hello || !g->samp.hello) continue;
        const Lmpipe__Hello *e = g->eng.hello->hello, *s = g->samp.hello->hello;
        if (lp_hello_check_vocab(s, e) || (t && (lp_hello_check_vocab(t, e) || lp_hello_check_vocab(t, s)))) {
            lp__coord_fail_pipeline(c, lp_error_msg());
            return;
        }
        if (!t) continue;
        if (lp__group_ready(c, g) || (!c->ready && init_shape(c, t, g))) {
            lp__coord_fail_pipeline(c, lp_error_msg());
            return;
        }
    }
}

/* A service that answers with another pid than last time was restarted
 * (by lmpipe up's supervision, systemd or a person): counted per stage. */
static void note_restart(lp_coord_t *c, lp__link_t *l, const Lmpipe__Hello *h)
{
    uint32_t pid = h->pid;
    if (l->last_pid && pid && pid != l->last_pid) {
        int k = l->role == LMPIPE__ROLE__ROLE_TOKENIZER ? 0 : l->role == LMPIPE__ROLE__ROLE_ENGINE ? 1 : 2;
        c->restarts[k]++;
        LP_INFO("coordinator: %s %s is back (pid %u, was %u)", l->name, l->endpoint, pid, l->last_pid);
    }
    if (pid) l->last_pid = pid;
}

static void on_hello_reply(lp_coord_t *c, lp__link_t *l, lp_frame_t *f)
{
    const Lmpipe__Msg *m = f->msg;
    char msg[700];
    if (m->body_case == LMPIPE__MSG__BODY_ERROR) {
        snprintf(msg, sizeof(msg), "%s refused the hello: %s", l->name, m->error->message);
        lp__coord_fail_pipeline(c, msg);
        return;
    }
    if (m->body_case != LMPIPE__MSG__BODY_HELLO || lp_hello_check(m->hello, l->role)) {
        snprintf(msg, sizeof(msg), "%s: bad hello reply: %s", l->name,
                 m->body_case == LMPIPE__MSG__BODY_HELLO ? lp_error_msg() : lp_msg_body_name(m->body_case));
        lp__coord_fail_pipeline(c, msg);
        return;
    }
    lp__link_hello_done(l);
    note_restart(c, l, m->hello);
    if (l->hello) lmpipe__msg__free_unpacked(l->hello, NULL);
    l->hello = f->msg; /* keep it */
    f->msg = NULL;
    if (l->group && l == &l->group->samp) lp__proxy_replay(c, l, l->hello->hello->strategy_version);
    if (!l->group) {
        l->backoff_ms = LP__RETRY_MS;
        if (c->ready) LP_INFO("coordinator: %s %s ready", l->name, l->endpoint);
    }
    /* The sampler's hello names the ring its engine's hello gave. */
    if (l->group && l == &l->group->eng) lp__link_send_hello(c, &l->group->samp);
    check_ready(c);
}

void lp__coord_on_link_down(lp_coord_t *c, lp__link_t *l)
{
    char why[600];
    snprintf(why, sizeof(why), "%s %s dropped out", l->name, l->endpoint);
    lp__poison_on_death(c, l);
    if (l->group) {
        lp__group_down(c, l->group, why);
    } else {
        LP_WARN("coordinator: %s", why);
        l->down = true;
        /* Its tokenizations go to another tokenizer, or wait for one. */
        for (size_t i = 0; i < c->n_reqs; i++)
            if (c->reqs[i]->tok == l) c->reqs[i]->tok = NULL;
        if (l->hello) lmpipe__msg__free_unpacked(l->hello, NULL);
        l->hello = NULL;
        lp__link_abort(c, l, why);
        lp__link_retry_later(c, l);
    }
    lp__coord_pump(c);
}

void lp__coord_on_reply(lp_coord_t *c, lp__link_t *l, const lp__op_t *op, lp_frame_t *f)
{
    lp__req_t *r = op->req && op->kind != OP_STEP && op->kind != OP_SAMPLE && op->kind != OP_PROXY ? lp__req_find(c, op->req) : NULL;
    switch (op->kind) {
    case OP_NONE: break;
    case OP_NONE_REPLY:
        if (f->msg->body_case == LMPIPE__MSG__BODY_ERROR)
            LP_WARN("coordinator: %s: %s", l->name, f->msg->error->message);
        break;
    case OP_HELLO: on_hello_reply(c, l, f); break;
    case OP_TOKENIZE: if (r && r->tok == l) lp__coord_on_tokenized(c, r, f->msg); break;
    case OP_STEP: lp__steps_on_stepped(c, l->group, op->req, f); break;
    case OP_SOPEN: if (r) lp__steps_on_opened(c, r, f->msg); break;
    case OP_SCLOSE: lp__text_on_closed(c, r, f->msg); break;
    case OP_PROXY: lp__proxy_on_reply(c, op->req, f); break;
    case OP_SAMPLE:
        lp__steps_on_sampled(c, l->group, op->req, f->msg);
        lp__coord_pump(c);            /* the next step first ... */
        lp__text_send(c, l->group);   /* ... then the token events */
        break;
    }
}

static void on_overdue(uv_timer_t *t) { lp__links_check_overdue(t->data); }

static int on_start(void *ctx, lp_service_t *svc)
{
    lp_coord_t *c = ctx;
    c->svc = svc;
    uv_timer_init(lp_service_loop(svc), &c->overdue);
    c->overdue.data = c;
    uv_timer_start(&c->overdue, on_overdue, 1000, 1000);
    int rc = 0;
    for (size_t i = 0; !rc && i < c->n_toks; i++) {
        rc = lp__link_open(c, &c->toks[i]);
        if (!rc) lp__link_send_hello(c, &c->toks[i]);
    }
    for (size_t i = 0; !rc && i < c->n_groups; i++) rc = lp__group_connect(c, &c->groups[i]);
    return rc;
}

static void stop_link(lp__link_t *l)
{
    lp__link_close(l);
    lp__link_hello_done(l);
    if (l->timer_open) uv_timer_stop(&l->timer); /* closed by the skeleton */
}

static void on_stop(void *ctx, lp_service_t *svc)
{
    lp_coord_t *c = ctx;
    uv_timer_stop(&c->overdue); /* closed by the skeleton */
    for (size_t i = 0; i < c->n_toks; i++) stop_link(&c->toks[i]);
    for (size_t i = 0; i < c->n_groups; i++) {
        stop_link(&c->groups[i].eng);
        stop_link(&c->groups[i].samp);
    }
    (void)svc;
}

static bool name_ok(const char *n)
{
    if (!n || !n[0] || strlen(n) > 64) return false;
    for (const char *p = n; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-')) return false;
    return true;
}

/* The groups from the parameters: the list, or one named "default" from
 * the engine and sampler endpoints. */
static int set_groups(lp_coord_t *c, const lp_coord_params_t *p)
{
    lp_coord_group_params_t one = {"default", p->engine_endpoint, p->sampler_endpoint, p->engine_key,
                                   p->sampler_key};
    const lp_coord_group_params_t *gp = p->n_groups ? p->groups : &one;
    size_t n = p->n_groups ? p->n_groups : 1;
    if (p->n_groups && (p->engine_endpoint || p->sampler_endpoint))
        return lp_error_set(LP_ERR(EINVAL), "coordinator: give groups or the engine and sampler "
                            "endpoints, not both");
    if (n > LP_COORD_MAX_GROUPS)
        return lp_error_set(LP_ERR(EINVAL), "coordinator: %zu groups (at most %d)", n, LP_COORD_MAX_GROUPS);
    for (size_t i = 0; i < n; i++) {
        const lp_coord_group_params_t *g = &gp[i];
        if (!name_ok(g->name))
            return lp_error_set(LP_ERR(EINVAL), "coordinator: group name '%s': use 1-64 of a-z 0-9 _ -",
                                g->name ? g->name : "");
        if (!g->engine || !g->engine[0] || !g->sampler || !g->sampler[0])
            return lp_error_set(LP_ERR(EINVAL), "coordinator: group %s: an engine and a sampler "
                                "endpoint are required", g->name);
        for (size_t j = 0; j < i; j++)
            if (!strcmp(gp[j].name, g->name))
                return lp_error_set(LP_ERR(EINVAL), "coordinator: group %s: named twice", g->name);
    }
    if (!(c->groups = calloc(n, sizeof(lp__group_t))) ||
        !(c->group_stats = calloc(n, sizeof(Lmpipe__GroupStats *))))
        return LP_ERR(ENOMEM);
    c->n_groups = n;
    for (size_t i = 0; i < n; i++) {
        lp__group_t *g = &c->groups[i];
        const lp_coord_group_params_t *q = &gp[i];
        g->name = q == &one ? "default" : q->name;
        g->state = G_DOWN;
        g->eng_ep = q == &one ? p->engine_endpoint : q->engine;
        g->samp_ep = q == &one ? p->sampler_endpoint : q->sampler;
        const char *skey = q->sampler_key && q->sampler_key[0] ? q->sampler_key : q->server_key;
        lp__link_init(c, &g->eng, "engine-svc", LMPIPE__ROLE__ROLE_ENGINE, g->eng_ep, q->server_key, g);
        lp__link_init(c, &g->samp, "sampler-svc", LMPIPE__ROLE__ROLE_SAMPLER, g->samp_ep, skey, g);
    }
    return 0;
}

/* The tokenizers: a comma-separated list of endpoints. */
static int set_tokenizers(lp_coord_t *c, const lp_coord_params_t *p)
{
    if (!(c->tok_eps = strdup(p->tokenizer_endpoint))) return LP_ERR(ENOMEM);
    size_t n = 1;
    for (const char *q = c->tok_eps; *q; q++) n += *q == ',';
    if (n > LP_COORD_MAX_TOKENIZERS)
        return lp_error_set(LP_ERR(EINVAL), "coordinator: %zu tokenizer endpoints (at most %d)", n,
                            LP_COORD_MAX_TOKENIZERS);
    if (!(c->toks = calloc(n, sizeof(lp__link_t)))) return LP_ERR(ENOMEM);
    /* One server key for every tokenizer, or one per endpoint in order
     * (tokenizers on hosts with key pairs of their own). */
    const char *keys[LP_COORD_MAX_TOKENIZERS] = {0};
    size_t n_keys = 0;
    if (p->tokenizer_key && p->tokenizer_key[0]) {
        if (!(c->tok_keys = strdup(p->tokenizer_key))) return LP_ERR(ENOMEM);
        char *ks = NULL;
        for (char *k = strtok_r(c->tok_keys, ",", &ks); k; k = strtok_r(NULL, ",", &ks))
            if (n_keys < LP_COORD_MAX_TOKENIZERS) keys[n_keys++] = k;
            else n_keys++;
        if (n_keys != 1 && n_keys != n)
            return lp_error_set(LP_ERR(EINVAL), "coordinator: %zu tokenizer server keys for %zu "
                                "tokenizer endpoints (give one for all, or one per endpoint)",
                                n_keys, n);
    }
    char *save = NULL;
    for (char *ep = strtok_r(c->tok_eps, ",", &save); ep; ep = strtok_r(NULL, ",", &save)) {
        size_t i = c->n_toks++;
        lp__link_init(c, &c->toks[i], "tokenizer-svc", LMPIPE__ROLE__ROLE_TOKENIZER, ep,
                      n_keys ? keys[n_keys == 1 ? 0 : i] : NULL, NULL);
    }
    if (c->n_toks == 0 || c->n_toks != n)
        return lp_error_set(LP_ERR(EINVAL), "coordinator: tokenizer endpoints '%s': an empty entry",
                            p->tokenizer_endpoint);
    return 0;
}

int lp_coord_new(const lp_coord_params_t *p, lp_coord_t **out)
{
    *out = NULL;
    if (!p->tokenizer_endpoint || !p->tokenizer_endpoint[0] ||
        (!p->n_groups && (!p->engine_endpoint || !p->sampler_endpoint)))
        return lp_error_set(LP_ERR(EINVAL), "coordinator: a tokenizer endpoint and an engine group "
                            "(or the engine and sampler endpoints) are required");
    lp_coord_t *c = calloc(1, sizeof(*c));
    if (!c) return LP_ERR(ENOMEM);
    c->p = *p;
    lp__metrics_init(&c->m);
    /* The controller lease's epoch: the wall clock, so that a coordinator
     * started later (a restart) has a higher one.  Request keys start from
     * it too, so that a new coordinator's sampler sessions never meet the
     * old one's on a sampler that stayed up. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    c->epoch = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    c->next_key = (c->epoch / 1000000ull) << 20;
    int rc = set_tokenizers(c, p);
    if (!rc) rc = set_groups(c, p);
    if (rc) {
        lp_coord_destroy(&c);
        return rc;
    }
    *out = c;
    return 0;
}

void lp_coord_destroy(lp_coord_t **self_p)
{
    if (!self_p || !*self_p) return;
    lp_coord_t *c = *self_p;
    for (size_t i = 0; i < c->n_reqs; i++) lp__req_free(c->reqs[i]);
    free(c->reqs);
    lp__proxy_free_all(c);
    for (size_t i = 0; i < c->n_toks; i++) lp__link_free(&c->toks[i]);
    free(c->toks);
    free(c->tok_eps);
    free(c->tok_keys);
    for (size_t i = 0; i < c->n_groups; i++) {
        lp__group_t *g = &c->groups[i];
        lp__link_free(&g->eng);
        lp__link_free(&g->samp);
        lp__sched_group_free(&g->s);
        free(g->seqs);
        free(g->texts);
        free(g->stale);
    }
    free(c->groups);
    free(c->group_stats);
    free(c->eog);
    free(c->eog_ids);
    free(c->down_names);
    free(c->down_ptrs);
    free(c);
    *self_p = NULL;
}

static void on_stats(void *ctx, Lmpipe__StatsReply *out)
{
    lp_coord_t *c = ctx;
    out->n_active = c->n_reqs;
    lp__metrics_fill(c, out);
    lp__groups_stats(c, out, c->group_stats);
    lp__health_fill(c, out);
}

const lp_service_ops_t lp_coord_ops = {
    .name = "coordinator",
    .role = LMPIPE__ROLE__ROLE_COORDINATOR,
    .hello = lp__coord_client_hello,
    .handle = lp__coord_client,
    .start = on_start,
    .stop = on_stop,
    .stats = on_stats,
    .drain = lp__coord_drain,
    .heartbeat_ms = 1000, /* a client whose host is gone is noticed: its requests are cancelled */
    .ready_later = true, /* READY=1 once the hello checks pass (check_ready) */
};
