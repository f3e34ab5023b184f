/* link.c - an edge's link to the coordinator's client API (see link.h):
 * one DEALER in the libuv loop (lib/zloop.h), the hello (retried while the
 * pipeline is not ready, and again when the coordinator has restarted and
 * no longer knows this peer), and the dispatch of replies and events by
 * Msg.id. */
#include "link.h"

#include "json.h"

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

#define N_BUCKETS (sizeof(((lp_link_t *)0)->ops) / sizeof(((lp_link_t *)0)->ops[0]))

static lp_link_op_t **bucket(lp_link_t *l, uint64_t id) { return &l->ops[id % N_BUCKETS]; }

int lp_link_send(lp_link_t *l, Lmpipe__Msg *m, lp_link_op_t *op)
{
    op->id = m->id = ++l->next_id;
    int rc = lp_frame_send(l->sock, NULL, 0, m, NULL, 0);
    lp_zsock_kick(l->zs);
    if (rc) return rc;
    lp_link_op_t **b = bucket(l, op->id);
    op->next = *b;
    *b = op;
    op->registered = true;
    return 0;
}

void lp_link_forget(lp_link_t *l, lp_link_op_t *op)
{
    if (!op->registered) return;
    for (lp_link_op_t **p = bucket(l, op->id); *p; p = &(*p)->next)
        if (*p == op) {
            *p = op->next;
            break;
        }
    op->registered = false;
}

int lp_link_cancel(lp_link_t *l, uint64_t id)
{
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    Lmpipe__Cancel cn = LMPIPE__CANCEL__INIT;
    m.id = id;
    m.body_case = LMPIPE__MSG__BODY_CANCEL;
    m.cancel = &cn;
    int rc = lp_frame_send(l->sock, NULL, 0, &m, NULL, 0);
    lp_zsock_kick(l->zs);
    return rc;
}

static void send_hello(lp_link_t *l)
{
    Lmpipe__Hello h;
    lp_hello_init(&h, LMPIPE__ROLE__ROLE_CLIENT);
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.id = l->hello_id = ++l->next_id;
    m.body_case = LMPIPE__MSG__BODY_HELLO;
    m.hello = &h;
    l->hello_sent_ms = lp_now_ms();
    if (lp_frame_send(l->sock, NULL, 0, &m, NULL, 0) != 0)
        snprintf(l->reason, sizeof(l->reason), "cannot send to the coordinator: %s", lp_error_msg());
    lp_zsock_kick(l->zs);
}

/* Every piece of the vocabulary, for the token strings of logprobs. */
static void on_vocab(lp_link_op_t *op, const Lmpipe__Msg *m)
{
    lp_link_t *l = op->arg;
    lp_link_forget(l, op);
    if (m->body_case != LMPIPE__MSG__BODY_DETOKENIZE_REPLY) {
        LP_WARN("the coordinator gave no vocabulary (%s): logprobs are not available",
                m->body_case == LMPIPE__MSG__BODY_ERROR ? m->error->message : lp_msg_body_name(m->body_case));
        l->vocab_failed = true;
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
    l->vocab = v;
    l->vocab_len = lens;
    l->vocab_n = (uint32_t)d->n_pieces;
    return;
oom:
    if (v)
        for (size_t i = 0; i < d->n_pieces; i++) free(v[i]);
    free(v);
    free(lens);
    l->vocab_failed = true;
}

static void ask_vocab(lp_link_t *l)
{
    if (l->vocab || l->vocab_op.registered || !l->n_vocab) return;
    Lmpipe__DetokenizeRequest d = LMPIPE__DETOKENIZE_REQUEST__INIT;
    int32_t *ids = malloc(l->n_vocab * sizeof(int32_t));
    if (!ids) return;
    for (uint32_t i = 0; i < l->n_vocab; i++) ids[i] = (int32_t)i;
    d.ids = ids;
    d.n_ids = l->n_vocab;
    d.special = true;
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.body_case = LMPIPE__MSG__BODY_DETOKENIZE;
    m.detokenize = &d;
    l->vocab_op.on_msg = on_vocab;
    l->vocab_op.arg = l;
    lp_link_send(l, &m, &l->vocab_op);
    free(ids);
}

static void on_hello_reply(lp_link_t *l, const Lmpipe__Msg *m)
{
    if (m->body_case == LMPIPE__MSG__BODY_HELLO) {
        if (lp_hello_check(m->hello, LMPIPE__ROLE__ROLE_COORDINATOR) != 0) {
            snprintf(l->reason, sizeof(l->reason), "%s", lp_error_msg());
            return;
        }
        const Lmpipe__Hello *h = m->hello;
        snprintf(l->model, sizeof(l->model), "%s",
                 l->model_name ? l->model_name : (h->model_name && h->model_name[0] ? h->model_name : "lmpipe"));
        l->n_ctx = h->n_ctx;
        l->max_seqs = h->max_seqs;
        if (l->vocab && l->vocab_n != h->n_tokens) { /* another model behind a restarted coordinator */
            for (uint32_t i = 0; i < l->vocab_n; i++) free(l->vocab[i]);
            free(l->vocab);
            free(l->vocab_len);
            l->vocab = NULL;
            l->vocab_n = 0;
        }
        l->n_vocab = h->n_tokens ? h->n_tokens : h->n_vocab;
        l->ready = true;
        l->reason[0] = '\0';
        l->vocab_failed = false;
        LP_INFO("connected to the coordinator (model %s, context %u)", l->model, l->n_ctx);
        /* The edge has been serving since start (lmpipe-http listening,
         * lmpipe-nats subscribed) and the coordinator's pipeline answers:
         * ready for systemd (again after a coordinator restart: harmless). */
        if (lp_sdnotify_sendf("READY=1\nSTATUS=connected to the coordinator at %s", l->coordinator))
            LP_WARN("%s", lp_error_msg());
        ask_vocab(l);
    } else if (m->body_case == LMPIPE__MSG__BODY_ERROR) {
        snprintf(l->reason, sizeof(l->reason), "%s", m->error->message);
    }
}

static void on_pong(lp_link_op_t *op, const Lmpipe__Msg *m)
{
    lp_link_t *l = op->arg;
    lp_link_forget(l, op);
    if (m->body_case != LMPIPE__MSG__BODY_STATS_REPLY) return;
    const Lmpipe__StatsReply *s = m->stats_reply;
    l->draining = s->draining;
    l->degraded = s->n_links_down > 0;
    /* A coordinator without the field says nothing is down: serving. */
    l->unserving = !s->can_serve && s->n_links_down > 0;
    lp_json_buf_t b = {0};
    lp_json_buf_puts(&b, "[");
    for (size_t i = 0; i < s->n_links_down; i++) {
        if (i) lp_json_buf_puts(&b, ",");
        lp_json_buf_str(&b, s->links_down[i], strlen(s->links_down[i]));
    }
    lp_json_buf_puts(&b, "]");
    snprintf(l->down_json, sizeof(l->down_json), "%s", !b.oom && b.n < sizeof(l->down_json) ? b.p : "[]");
    lp_json_buf_free(&b);
}

/* Answer every outstanding request with an Error: the coordinator is gone. */
static void fail_all(lp_link_t *l, const char *why)
{
    size_t n = 0, cap = 0;
    lp_link_op_t **all = NULL;
    for (size_t b = 0; b < N_BUCKETS; b++)
        for (lp_link_op_t *op = l->ops[b]; op; op = op->next) {
            if (n == cap) {
                lp_link_op_t **a = realloc(all, (cap = cap ? 2 * cap : 64) * sizeof(*a));
                if (!a) break;
                all = a;
            }
            all[n++] = op;
        }
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    Lmpipe__Error e = LMPIPE__ERROR__INIT;
    e.code = LP_ERR(EHOSTUNREACH);
    e.message = (char *)why;
    e.kind = LMPIPE__ERROR_KIND__ERROR_KIND_UNAVAILABLE;
    m.body_case = LMPIPE__MSG__BODY_ERROR;
    m.error = &e;
    /* Each handler forgets its own op (and may free others of its call, so
     * each is looked up again before it is called). */
    for (size_t i = 0; i < n; i++) {
        bool still = false;
        for (lp_link_op_t *op = *bucket(l, all[i]->id); op && !still; op = op->next) still = op == all[i];
        if (!still) continue;
        m.id = all[i]->id;
        all[i]->on_msg(all[i], &m); /* it forgets the op */
    }
    free(all);
}

static void on_msg(lp_zsock_t *zs, void *sock, void *arg)
{
    lp_link_t *l = arg;
    lp_frame_t f;
    int rc = lp_frame_recv(sock, false, &f);
    if (rc) {
        lp_frame_clear(&f);
        return;
    }
    l->last_rx_ms = lp_now_ms();
    const Lmpipe__Msg *m = f.msg;
    if (m->id == l->hello_id) {
        on_hello_reply(l, m);
        lp_frame_clear(&f);
        return;
    }
    /* A restarted coordinator does not know this peer: say hello again. */
    if (m->body_case == LMPIPE__MSG__BODY_ERROR && m->error->message &&
        !strncmp(m->error->message, "no hello yet", 12) && l->ready) {
        l->ready = false;
        snprintf(l->reason, sizeof(l->reason), "reconnecting to the coordinator");
        send_hello(l);
    }
    for (lp_link_op_t *op = *bucket(l, m->id); op; op = op->next)
        if (op->id == m->id) {
            op->on_msg(op, m);
            break;
        }
    lp_frame_clear(&f);
}

/* The coordinator is gone: its requests fail now, and the hello is said
 * again until a coordinator answers (ZeroMQ reconnects the socket). */
static void link_lost(lp_link_t *l, const char *why)
{
    LP_WARN("%s: failing its requests", why);
    l->ready = false;
    l->degraded = l->unserving = l->draining = false;
    snprintf(l->reason, sizeof(l->reason), "%s", why);
    lp_link_forget(l, &l->ping_op);
    fail_all(l, l->reason);
    send_hello(l);
}

/* The link's socket monitor: a lost connection fails what is in flight. */
static void on_monitor(lp_zsock_t *zs, void *sock, void *arg)
{
    lp_link_t *l = arg;
    (void)zs;
    int event = lp_zmq_monitor_event(sock);
    if (event == ZMQ_EVENT_DISCONNECTED && l->ready) {
        char why[sizeof(l->reason)];
        snprintf(why, sizeof(why), "lost the connection to the coordinator at %s (it stopped or crashed)",
                 l->coordinator);
        link_lost(l, why);
    }
}

static void on_hello_timer(uv_timer_t *t)
{
    lp_link_t *l = t->data;
    uint64_t now = lp_now_ms();
    if (l->ready) {
        if (!l->vocab && !l->vocab_failed) ask_vocab(l);
        if (l->ping_op.registered && now - l->ping_sent_ms > 5000 && now - l->last_rx_ms > 5000) {
            /* Connected but silent: its loop is wedged. */
            char why[sizeof(l->reason)];
            snprintf(why, sizeof(why), "the coordinator at %s does not answer", l->coordinator);
            link_lost(l, why);
        } else if (!l->ping_op.registered && now - l->ping_sent_ms >= 2000) {
            Lmpipe__Msg m = LMPIPE__MSG__INIT;
            Lmpipe__StatsRequest sr = LMPIPE__STATS_REQUEST__INIT;
            m.body_case = LMPIPE__MSG__BODY_STATS;
            m.stats = &sr;
            l->ping_op.on_msg = on_pong;
            l->ping_op.arg = l;
            l->ping_sent_ms = now;
            lp_link_send(l, &m, &l->ping_op);
        }
        return;
    }
    if (lp_now_ms() - l->hello_sent_ms >= 500) send_hello(l);
}

int lp_link_start(lp_link_t *l)
{
    snprintf(l->reason, sizeof(l->reason), "waiting for the coordinator at %s", l->coordinator);
    l->zctx = zmq_ctx_new();
    l->sock = zmq_socket(l->zctx, ZMQ_DEALER);
    lp_service_sockopts(l->sock);
    int hb[][2] = {{ZMQ_HEARTBEAT_IVL, HB_IVL_MS}, {ZMQ_HEARTBEAT_TIMEOUT, HB_TIMEOUT_MS},
                   {ZMQ_HEARTBEAT_TTL, HB_TTL_MS}};
    for (size_t i = 0; i < sizeof(hb) / sizeof(hb[0]); i++) zmq_setsockopt(l->sock, hb[i][0], &hb[i][1], sizeof(int));
    char mon_ep[64];
    snprintf(mon_ep, sizeof(mon_ep), "inproc://lp-link-mon-%p", (void *)l);
    if (zmq_socket_monitor(l->sock, mon_ep, ZMQ_EVENT_DISCONNECTED) != 0 ||
        !(l->mon = zmq_socket(l->zctx, ZMQ_PAIR)) || zmq_connect(l->mon, mon_ep) != 0 ||
        lp_zsock_new(l->loop, l->mon, on_monitor, l, &l->mzs) != 0) {
        int e = zmq_errno();
        if (l->mon) zmq_close(l->mon);
        zmq_close(l->sock);
        zmq_ctx_term(l->zctx);
        return lp_error_set(LP_ERR(e), "the coordinator link's socket monitor: %s", zmq_strerror(e));
    }
    lp_curve_opts_t co = {.key = l->curve_key};
    lp_curve_t cv;
    int rc = lp_curve_load(&co, &cv);
    /* A client side: a coordinator on plain tcp:// decides that for itself. */
    if (!rc) rc = lp_curve_connect(l->sock, l->coordinator, &cv, l->server_key, true, "--coordinator");
    lp_curve_clear(&cv);
    if (!rc) rc = lp_zsock_new(l->loop, l->sock, on_msg, l, &l->zs);
    if (rc) {
        lp_zsock_destroy(&l->mzs);
        zmq_socket_monitor(l->sock, NULL, 0);
        zmq_close(l->mon);
        zmq_close(l->sock);
        zmq_ctx_term(l->zctx);
        return rc;
    }
    uv_timer_init(l->loop, &l->hello_timer);
    l->hello_timer.data = l;
    send_hello(l);
    uv_timer_start(&l->hello_timer, on_hello_timer, 250, 250);
    return 0;
}

void lp_link_stop(lp_link_t *l)
{
    uv_close((uv_handle_t *)&l->hello_timer, NULL);
    lp_zsock_destroy(&l->zs);
    lp_zsock_destroy(&l->mzs);
    uv_run(l->loop, UV_RUN_NOWAIT);
    zmq_socket_monitor(l->sock, NULL, 0);
    zmq_close(l->mon);
    zmq_close(l->sock);
    zmq_ctx_term(l->zctx);
}

void lp_link_clear(lp_link_t *l)
{
    for (uint32_t i = 0; l->vocab && i < l->vocab_n; i++) free(l->vocab[i]);
    free(l->vocab);
    free(l->vocab_len);
    l->vocab = NULL;
    l->vocab_len = NULL;
    l->vocab_n = 0;
}

const char *lp_link_token_text(const lp_link_t *l, int32_t id, size_t *len)
{
    if (l->vocab && id >= 0 && (uint32_t)id < l->vocab_n) {
        *len = l->vocab_len[id];
        return l->vocab[id];
    }
    *len = 0;
    return "";
}
