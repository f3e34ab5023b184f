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
#include <sys/random.h>

static void fail_pipeline(lp_coord_t *c, const char *msg)
{
    if (!c->failed) LP_ERROR("coordinator: %s", msg);
    c->failed = true;
    snprintf(c->fail_msg, sizeof(c->fail_msg), "%s", msg);
}

/* A group's capacity from its engine's hello and the flags. */
static int group_ready(lp_coord_t *c, lp__group_t *g)
{
    const Lmpipe__Hello *e = g->eng.hello->hello, *s = g->samp.hello->hello;
    if (!s->detok)
        return lp_error_set(LP_ERR(ENOTSUP), "sampler-svc gives no token text (its model has "
                            "no tokenizer)");
    int32_t ems = e->max_seqs ? (int32_t)e->max_seqs : 16;
    int32_t ebt = e->max_batch_tokens ? (int32_t)e->max_batch_tokens : 512;
    g->s.max_seqs = c->p.max_seqs > 0 && c->p.max_seqs < ems ? c->p.max_seqs : ems;
    g->s.max_batch_tokens = c->p.max_batch_tokens > 0 && c->p.max_batch_tokens < ebt
                                ? c->p.max_batch_tokens : ebt;
    g->s.n_ctx = e->n_ctx ? (int32_t)e->n_ctx : 4096;
    g->s.ring = !c->p.no_shm && e->shm_name && e->shm_name[0] && s->shm_ok &&
                !strcmp(e->host_id, s->host_id);
    g->ring = g->s.ring ? e->shm_name : NULL;
    g->s.ring_slots = e->shm_slots;
    /* Slot sequence numbers start at a random point (see shm-ring.h). */
    if (getrandom(&g->s.ring_seq, sizeof(g->s.ring_seq), 0) != (ssize_t)sizeof(g->s.ring_seq))
        g->s.ring_seq = lp_now_ns();
    g->s.ring_seq >>= 1;
    g->texts = calloc((size_t)g->s.max_seqs, sizeof(*g->texts));
    int rc = lp__sched_group_init(&g->s);
    if (!rc && !g->texts) rc = lp_error_set(LP_ERR(ENOMEM), "coordinator: out of memory");
    return rc;
}

static void check_ready(lp_coord_t *c)
{
    if (!c->tok.hello) return;
    for (size_t i = 0; i < c->n_groups; i++)
        if (!c->groups[i].eng.hello || !c->groups[i].samp.hello) return;
    const Lmpipe__Hello *t = c->tok.hello->hello;
    for (size_t i = 0; i < c->n_groups; i++) {
        const Lmpipe__Hello *e = c->groups[i].eng.hello->hello, *s = c->groups[i].samp.hello->hello;
        if (lp_hello_check_vocab(t, e) || lp_hello_check_vocab(s, e) || lp_hello_check_vocab(t, s) ||
            group_ready(c, &c->groups[i])) {
            fail_pipeline(c, lp_error_msg());
            return;
        }
    }
    /* The client sees the first group's shape (one group for now). */
    const Lmpipe__Hello *e = c->groups[0].eng.hello->hello;
    c->n_vocab = (int32_t)e->n_vocab;
    c->n_ctx = c->groups[0].s.n_ctx;
    c->max_seqs = c->groups[0].s.max_seqs;
    c->max_batch_tokens = c->groups[0].s.max_batch_tokens;
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
    if (!c->eog || !c->eog_ids) {
        fail_pipeline(c, "out of memory");
        return;
    }
    c->ready = true;
    LP_INFO("coordinator: pipeline ready: %s, %d seqs, %d tokens a step, logits %s",
            e->model_name, c->max_seqs, c->max_batch_tokens,
            c->groups[0].s.ring ? "in shared memory" : "inline");
    if (lp_sdnotify_sendf("READY=1\nSTATUS=coordinator: pipeline ready: %s", e->model_name))
        LP_WARN("coordinator: %s", lp_error_msg());
}

static void on_hello_reply(lp_coord_t *c, lp__link_t *l, lp_frame_t *f)
{
    const Lmpipe__Msg *m = f->msg;
    char msg[700];
    if (m->body_case == LMPIPE__MSG__BODY_ERROR) {
        snprintf(msg, sizeof(msg), "%s refused the hello: %s", l->name, m->error->message);
        fail_pipeline(c, msg);
        return;
    }
    if (m->body_case != LMPIPE__MSG__BODY_HELLO || lp_hello_check(m->hello, l->role)) {
        snprintf(msg, sizeof(msg), "%s: bad hello reply: %s", l->name,
                 m->body_case == LMPIPE__MSG__BODY_HELLO ? lp_error_msg() : lp_msg_body_name(m->body_case));
        fail_pipeline(c, msg);
        return;
    }
    l->hello = f->msg; /* keep it */
    f->msg = NULL;
    /* The sampler's hello names the ring its engine's hello gave. */
    if (l->group && l == &l->group->eng) lp__link_send_hello(c, &l->group->samp);
    check_ready(c);
}

void lp__coord_on_reply(lp_coord_t *c, lp__link_t *l, const lp__op_t *op, lp_frame_t *f)
{
    lp__req_t *r = op->req && op->kind != OP_STEP && op->kind != OP_SAMPLE && op->kind != OP_PROXY ? lp__req_find(c, op->req) : NULL;
    switch (op->kind) {
    case OP_NONE: break;
    case OP_HELLO: on_hello_reply(c, l, f); break;
    case OP_TOKENIZE: if (r) lp__coord_on_tokenized(c, r, f->msg); break;
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

static int on_start(void *ctx, lp_service_t *svc)
{
    lp_coord_t *c = ctx;
    c->svc = svc;
    int rc = lp__link_open(c, &c->tok, "tokenizer-svc", LMPIPE__ROLE__ROLE_TOKENIZER,
                           c->p.tokenizer_endpoint, c->p.tokenizer_key, NULL);
    for (size_t i = 0; !rc && i < c->n_groups; i++) {
        lp__group_t *g = &c->groups[i];
        rc = lp__link_open(c, &g->eng, "engine-svc", LMPIPE__ROLE__ROLE_ENGINE, c->p.engine_endpoint,
                           c->p.engine_key, g);
        if (!rc)
            rc = lp__link_open(c, &g->samp, "sampler-svc", LMPIPE__ROLE__ROLE_SAMPLER,
                               c->p.sampler_endpoint, c->p.sampler_key, g);
    }
    if (rc) return rc;
    lp__link_send_hello(c, &c->tok);
    for (size_t i = 0; i < c->n_groups; i++) lp__link_send_hello(c, &c->groups[i].eng);
    return 0;
}

static void on_stop(void *ctx, lp_service_t *svc)
{
    lp_coord_t *c = ctx;
    lp__link_close(&c->tok);
    for (size_t i = 0; i < c->n_groups; i++) {
        lp__link_close(&c->groups[i].eng);
        lp__link_close(&c->groups[i].samp);
    }
    (void)svc;
}

int lp_coord_new(const lp_coord_params_t *p, lp_coord_t **out)
{
    *out = NULL;
    if (!p->tokenizer_endpoint || !p->engine_endpoint || !p->sampler_endpoint)
        return lp_error_set(LP_ERR(EINVAL), "coordinator: the three service endpoints are required");
    lp_coord_t *c = calloc(1, sizeof(*c));
    if (!c) return LP_ERR(ENOMEM);
    c->p = *p;
    lp__metrics_init(&c->m);
    c->n_groups = 1;
    if (!(c->groups = calloc(c->n_groups, sizeof(lp__group_t)))) {
        free(c);
        return LP_ERR(ENOMEM);
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
    lp__link_free(&c->tok);
    for (size_t i = 0; i < c->n_groups; i++) {
        lp__group_t *g = &c->groups[i];
        lp__link_free(&g->eng);
        lp__link_free(&g->samp);
        lp__sched_group_free(&g->s);
        free(g->seqs);
        free(g->texts);
    }
    free(c->groups);
    free(c->eog);
    free(c->eog_ids);
    free(c);
    *self_p = NULL;
}

static void on_stats(void *ctx, Lmpipe__StatsReply *out)
{
    lp_coord_t *c = ctx;
    out->n_active = c->n_reqs;
    lp__metrics_fill(c, out);
}

const lp_service_ops_t lp_coord_ops = {
    .name = "coordinator",
    .role = LMPIPE__ROLE__ROLE_COORDINATOR,
    .hello = lp__coord_client_hello,
    .handle = lp__coord_client,
    .start = on_start,
    .stop = on_stop,
    .stats = on_stats,
    .ready_later = true, /* READY=1 once the hello checks pass (check_ready) */
};
