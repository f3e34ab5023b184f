/* link.c - the gateway's link to the coordinator's client API: one DEALER
 * in the libuv loop (lib/zloop.h), the hello (retried while the pipeline is
 * not ready, and again when the coordinator has restarted and no longer
 * knows this peer), and the dispatch of replies and events by Msg.id. */
#include "gw.h"

#include "error.h"
#include "hello.h"
#include "log.h"
#include "sdnotify.h"
#include "service.h"
#include "sysinfo.h"
#include "zloop.h"

#include <stdlib.h>
#include <string.h>

/* Heartbeats on the link: a coordinator that goes silent (its host gone)
 * is disconnected like one that closed its socket; the monitor reports it. */
#define HB_IVL_MS 1000
#define HB_TIMEOUT_MS 3000
#define HB_TTL_MS 6000

#define N_BUCKETS (sizeof(((lp_gw_t *)0)->ops) / sizeof(((lp_gw_t *)0)->ops[0]))

static lp_gw_op_t **bucket(lp_gw_t *gw, uint64_t id) { return &gw->ops[id % N_BUCKETS]; }

int lp_gw_link_send(lp_gw_t *gw, Lmpipe__Msg *m, lp_gw_op_t *op)
{
    op->id = m->id = ++gw->next_id;
    int rc = lp_frame_send(gw->sock, NULL, 0, m, NULL, 0);
    lp_zsock_kick(gw->zs);
    if (rc) return rc;
    lp_gw_op_t **b = bucket(gw, op->id);
    op->next = *b;
    *b = op;
    op->registered = true;
    return 0;
}

void lp_gw_link_forget(lp_gw_t *gw, lp_gw_op_t *op)
{
    if (!op->registered) return;
    for (lp_gw_op_t **p = bucket(gw, op->id); *p; p = &(*p)->next)
        if (*p == op) {
            *p = op->next;
            break;
        }
    op->registered = false;
}

int lp_gw_link_cancel(lp_gw_t *gw, uint64_t id)
{
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    Lmpipe__Cancel cn = LMPIPE__CANCEL__INIT;
    m.id = id;
    m.body_case = LMPIPE__MSG__BODY_CANCEL;
    m.cancel = &cn;
    int rc = lp_frame_send(gw->sock, NULL, 0, &m, NULL, 0);
    lp_zsock_kick(gw->zs);
    return rc;
}

static void send_hello(lp_gw_t *gw)
{
    Lmpipe__Hello h;
    lp_hello_init(&h, LMPIPE__ROLE__ROLE_CLIENT);
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.id = gw->hello_id = ++gw->next_id;
    m.body_case = LMPIPE__MSG__BODY_HELLO;
    m.hello = &h;
    gw->hello_sent_ms = lp_now_ms();
    if (lp_frame_send(gw->sock, NULL, 0, &m, NULL, 0) != 0)
        snprintf(gw->reason, sizeof(gw->reason), "cannot send to the coordinator: %s", lp_error_msg());
    lp_zsock_kick(gw->zs);
}

/* Every piece of the vocabulary, for the token strings of logprobs. */
static void on_vocab(lp_gw_op_t *op, const Lmpipe__Msg *m)
{
    lp_gw_t *gw = op->arg;
    lp_gw_link_forget(gw, op);
    if (m->body_case != LMPIPE__MSG__BODY_DETOKENIZE_REPLY) {
        LP_WARN("the coordinator gave no vocabulary (%s): logprobs are not available",
                m->body_case == LMPIPE__MSG__BODY_ERROR ? m->error->message : lp_msg_body_name(m->body_case));
        gw->vocab_failed = true;
        return;
    }
    const Lmpipe__DetokenizeReply *d = m->detokenize_reply;
    char **v = calloc(d->n_pieces ? d->n_pieces : 1, sizeof(char *));
    uint32_t *lens = calloc(d->n_pieces ? d->n_pieces : 1, sizeof(uint32_t));
    if (!v || !lens) goto oom;
    for (size_t i = 0; i < d->n_pieces; i++) {
        if (!(v[i] = malloc(d->pieces[i].len + 1))) goto oom;
        memcpy(v[i], d->pieces[i].data, d->pieces[i].len);
        v[i][d->pieces[i].len] = '\0';
        lens[i] = (uint32_t)d->pieces[i].len;
    }
    gw->vocab = v;
    gw->vocab_len = lens;
    gw->vocab_n = (uint32_t)d->n_pieces;
    return;
oom:
    if (v)
        for (size_t i = 0; i < d->n_pieces; i++) free(v[i]);
    free(v);
    free(lens);
    gw->vocab_failed = true;
}

static void ask_vocab(lp_gw_t *gw)
{
    if (gw->vocab || gw->vocab_op.registered || !gw->n_vocab) return;
    Lmpipe__DetokenizeRequest d = LMPIPE__DETOKENIZE_REQUEST__INIT;
    int32_t *ids = malloc(gw->n_vocab * sizeof(int32_t));
    if (!ids) return;
    for (uint32_t i = 0; i < gw->n_vocab; i++) ids[i] = (int32_t)i;
    d.ids = ids;
    d.n_ids = gw->n_vocab;
    d.special = true;
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.body_case = LMPIPE__MSG__BODY_DETOKENIZE;
    m.detokenize = &d;
    gw->vocab_op.on_msg = on_vocab;
    gw->vocab_op.arg = gw;
    lp_gw_link_send(gw, &m, &gw->vocab_op);
    free(ids);
}

static void on_hello_reply(lp_gw_t *gw, const Lmpipe__Msg *m)
{
    if (m->body_case == LMPIPE__MSG__BODY_HELLO) {
        if (lp_hello_check(m->hello, LMPIPE__ROLE__ROLE_COORDINATOR) != 0) {
            snprintf(gw->reason, sizeof(gw->reason), "%s", lp_error_msg());
            return;
        }
        const Lmpipe__Hello *h = m->hello;
        snprintf(gw->model, sizeof(gw->model), "%s",
                 gw->o.model_name ? gw->o.model_name : (h->model_name && h->model_name[0] ? h->model_name : "lmpipe"));
        gw->n_ctx = h->n_ctx;
        gw->max_seqs = h->max_seqs;
        if (gw->vocab && gw->vocab_n != h->n_tokens) { /* another model behind a restarted coordinator */
            for (uint32_t i = 0; i < gw->vocab_n; i++) free(gw->vocab[i]);
            free(gw->vocab);
            free(gw->vocab_len);
            gw->vocab = NULL;
            gw->vocab_n = 0;
        }
        gw->n_vocab = h->n_tokens ? h->n_tokens : h->n_vocab;
        gw->ready = true;
        gw->reason[0] = '\0';
        gw->vocab_failed = false;
        LP_INFO("connected to the coordinator (model %s, context %u)", gw->model, gw->n_ctx);
        /* The edge has been serving since start (lmpipe-http listening,
         * lmpipe-nats subscribed) and the coordinator's pipeline answers:
         * ready for systemd (again after a coordinator restart: harmless). */
        if (lp_sdnotify_sendf("READY=1\nSTATUS=connected to the coordinator at %s", gw->o.coordinator))
            LP_WARN("%s", lp_error_msg());
        ask_vocab(gw);
    } else if (m->body_case == LMPIPE__MSG__BODY_ERROR) {
        snprintf(gw->reason, sizeof(gw->reason), "%s", m->error->message);
    }
}

static void on_pong(lp_gw_op_t *op, const Lmpipe__Msg *m)
{
    lp_gw_t *gw = op->arg;
    lp_gw_link_forget(gw, op);
    if (m->body_case != LMPIPE__MSG__BODY_STATS_REPLY) return;
    const Lmpipe__StatsReply *s = m->stats_reply;
    gw->draining = s->draining;
    gw->degraded = s->n_links_down > 0;
    /* A coordinator without the field says nothing is down: serving. */
    gw->unserving = !s->can_serve && s->n_links_down > 0;
    lp_sb_t b = {0};
    lp_sb_puts(&b, "[");
    for (size_t i = 0; i < s->n_links_down; i++) {
        if (i) lp_sb_puts(&b, ",");
        lp_sb_json_str(&b, s->links_down[i], strlen(s->links_down[i]));
    }
    lp_sb_puts(&b, "]");
    snprintf(gw->down_json, sizeof(gw->down_json), "%s", !b.oom && b.len < sizeof(gw->down_json) ? b.p : "[]");
    lp_sb_free(&b);
}

/* Answer every outstanding request with an Error: the coordinator is gone. */
static void fail_all(lp_gw_t *gw, const char *why)
{
    size_t n = 0, cap = 0;
    lp_gw_op_t **all = NULL;
    for (size_t b = 0; b < N_BUCKETS; b++)
        for (lp_gw_op_t *op = gw->ops[b]; op; op = op->next) {
            if (n == cap) {
                lp_gw_op_t **a = realloc(all, (cap = cap ? 2 * cap : 64) * sizeof(*a));
                if (!a) break;
                all = a;
            }
            all[n++] = op;
        }
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    Lmpipe__Error e = LMPIPE__ERROR__INIT;
    e.code = LP_ERR(EHOSTUNREACH);
    e.message = (char *)why;
    m.body_case = LMPIPE__MSG__BODY_ERROR;
    m.error = &e;
    /* Each handler forgets its own op (and may free others of its call, so
     * each is looked up again before it is called). */
    for (size_t i = 0; i < n; i++) {
        bool still = false;
        for (lp_gw_op_t *op = *bucket(gw, all[i]->id); op && !still; op = op->next) still = op == all[i];
        if (!still) continue;
        m.id = all[i]->id;
        all[i]->on_msg(all[i], &m); /* it forgets the op */
    }
    free(all);
}

static void on_msg(lp_zsock_t *zs, void *sock, void *arg)
{
    lp_gw_t *gw = arg;
    lp_frame_t f;
    int rc = lp_frame_recv(sock, false, &f);
    if (rc) {
        lp_frame_clear(&f);
        return;
    }
    gw->last_rx_ms = lp_now_ms();
    const Lmpipe__Msg *m = f.msg;
    if (m->id == gw->hello_id) {
        on_hello_reply(gw, m);
        lp_frame_clear(&f);
        return;
    }
    /* A restarted coordinator does not know this peer: say hello again. */
    if (m->body_case == LMPIPE__MSG__BODY_ERROR && m->error->message &&
        !strncmp(m->error->message, "no hello yet", 12) && gw->ready) {
        gw->ready = false;
        snprintf(gw->reason, sizeof(gw->reason), "reconnecting to the coordinator");
        send_hello(gw);
    }
    for (lp_gw_op_t *op = *bucket(gw, m->id); op; op = op->next)
        if (op->id == m->id) {
            op->on_msg(op, m);
            break;
        }
    lp_frame_clear(&f);
}

/* The coordinator is gone: its requests fail now, and the hello is said
 * again until a coordinator answers (ZeroMQ reconnects the socket). */
static void link_lost(lp_gw_t *gw, const char *why)
{
    LP_WARN("%s: failing its requests", why);
    gw->ready = false;
    gw->degraded = gw->unserving = gw->draining = false;
    snprintf(gw->reason, sizeof(gw->reason), "%s", why);
    lp_gw_link_forget(gw, &gw->ping_op);
    fail_all(gw, gw->reason);
    send_hello(gw);
}

/* The link's socket monitor: a lost connection fails what is in flight. */
static void on_monitor(lp_zsock_t *zs, void *sock, void *arg)
{
    lp_gw_t *gw = arg;
    (void)zs;
    int event = lp_zmq_monitor_event(sock);
    if (event == ZMQ_EVENT_DISCONNECTED && gw->ready) {
        char why[sizeof(gw->reason)];
        snprintf(why, sizeof(why), "lost the connection to the coordinator at %s (it stopped or crashed)",
                 gw->o.coordinator);
        link_lost(gw, why);
    }
}

static void on_hello_timer(uv_timer_t *t)
{
    lp_gw_t *gw = t->data;
    uint64_t now = lp_now_ms();
    if (gw->ready) {
        if (!gw->vocab && !gw->vocab_failed) ask_vocab(gw);
        if (gw->ping_op.registered && now - gw->ping_sent_ms > 5000 && now - gw->last_rx_ms > 5000) {
            /* Connected but silent: its loop is wedged. */
            char why[sizeof(gw->reason)];
            snprintf(why, sizeof(why), "the coordinator at %s does not answer", gw->o.coordinator);
            link_lost(gw, why);
        } else if (!gw->ping_op.registered && now - gw->ping_sent_ms >= 2000) {
            Lmpipe__Msg m = LMPIPE__MSG__INIT;
            Lmpipe__StatsRequest sr = LMPIPE__STATS_REQUEST__INIT;
            m.body_case = LMPIPE__MSG__BODY_STATS;
            m.stats = &sr;
            gw->ping_op.on_msg = on_pong;
            gw->ping_op.arg = gw;
            gw->ping_sent_ms = now;
            lp_gw_link_send(gw, &m, &gw->ping_op);
        }
        return;
    }
    if (lp_now_ms() - gw->hello_sent_ms >= 500) send_hello(gw);
}

int lp_gw_link_start(lp_gw_t *gw)
{
    snprintf(gw->reason, sizeof(gw->reason), "waiting for the coordinator at %s", gw->o.coordinator);
    gw->zctx = zmq_ctx_new();
    gw->sock = zmq_socket(gw->zctx, ZMQ_DEALER);
    lp_service_sockopts(gw->sock);
    int hb[][2] = {{ZMQ_HEARTBEAT_IVL, HB_IVL_MS}, {ZMQ_HEARTBEAT_TIMEOUT, HB_TIMEOUT_MS},
                   {ZMQ_HEARTBEAT_TTL, HB_TTL_MS}};
    for (size_t i = 0; i < sizeof(hb) / sizeof(hb[0]); i++) zmq_setsockopt(gw->sock, hb[i][0], &hb[i][1], sizeof(int));
    char mon_ep[64];
    snprintf(mon_ep, sizeof(mon_ep), "inproc://lp-gw-mon-%p", (void *)gw);
    if (zmq_socket_monitor(gw->sock, mon_ep, ZMQ_EVENT_DISCONNECTED) != 0 ||
        !(gw->mon = zmq_socket(gw->zctx, ZMQ_PAIR)) || zmq_connect(gw->mon, mon_ep) != 0 ||
        lp_zsock_new(gw->loop, gw->mon, on_monitor, gw, &gw->mzs) != 0) {
        int e = zmq_errno();
        if (gw->mon) zmq_close(gw->mon);
        zmq_close(gw->sock);
        zmq_ctx_term(gw->zctx);
        return lp_error_set(LP_ERR(e), "the coordinator link's socket monitor: %s", zmq_strerror(e));
    }
    lp_curve_opts_t co = {.key = gw->o.curve_key};
    lp_curve_t cv;
    int rc = lp_curve_load(&co, &cv);
    /* A client side: a coordinator on plain tcp:// decides that for itself. */
    if (!rc) rc = lp_curve_connect(gw->sock, gw->o.coordinator, &cv, gw->o.server_key, true, "--coordinator");
    lp_curve_clear(&cv);
    if (!rc) rc = lp_zsock_new(gw->loop, gw->sock, on_msg, gw, &gw->zs);
    if (rc) {
        lp_zsock_destroy(&gw->mzs);
        zmq_socket_monitor(gw->sock, NULL, 0);
        zmq_close(gw->mon);
        zmq_close(gw->sock);
        zmq_ctx_term(gw->zctx);
        return rc;
    }
    uv_timer_init(gw->loop, &gw->hello_timer);
    gw->hello_timer.data = gw;
    send_hello(gw);
    uv_timer_start(&gw->hello_timer, on_hello_timer, 250, 250);
    return 0;
}

void lp_gw_link_stop(lp_gw_t *gw)
{
    uv_close((uv_handle_t *)&gw->hello_timer, NULL);
    lp_zsock_destroy(&gw->zs);
    lp_zsock_destroy(&gw->mzs);
    uv_run(gw->loop, UV_RUN_NOWAIT);
    zmq_socket_monitor(gw->sock, NULL, 0);
    zmq_close(gw->mon);
    zmq_close(gw->sock);
    zmq_ctx_term(gw->zctx);
}
