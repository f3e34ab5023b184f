/* client.c - a client of the coordinator (see client.h). */
#include "client.h"
#include "zloop.h"

#include "curve.h"
#include "error.h"
#include "hello.h"
#include "sysinfo.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Heartbeats on the client's connection: a server that goes silent (its
 * host gone, a cable pulled) is disconnected like one that closed its
 * socket, and the monitor below reports either to the caller. */
#define HB_IVL_MS 1000
#define HB_TIMEOUT_MS 3000
#define HB_TTL_MS 6000

struct lp_client {
    void *ctx, *sock;
    void *mon;          /* PAIR reading the socket's monitor events */
    Lmpipe__Msg *hello; /* the server's Hello reply; owned */
    uint64_t next_hello;
    bool linked;        /* a hello was answered and no disconnection came since */
};

/* Read the monitor's pending events; true when one was a disconnection. */
static bool drain_monitor(lp_client_t *c)
{
    bool lost = false;
    int event;
    while ((event = lp_zmq_monitor_event(c->mon)) >= 0) lost |= event == ZMQ_EVENT_DISCONNECTED;
    return lost;
}

int lp_client_new(const char *endpoint, lp_client_t **out)
{
    return lp_client_new_curve(endpoint, NULL, NULL, out);
}

int lp_client_new_curve(const char *endpoint, const char *key_path, const char *server_key,
                        lp_client_t **out)
{
    *out = NULL;
    lp_client_t *c = calloc(1, sizeof(*c));
    if (!c) return LP_ERR(ENOMEM);
    c->ctx = zmq_ctx_new();
    c->sock = zmq_socket(c->ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(c->sock, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_setsockopt(c->sock, ZMQ_SNDHWM, &zero, sizeof(zero));
    zmq_setsockopt(c->sock, ZMQ_RCVHWM, &zero, sizeof(zero));
    int hb[][2] = {{ZMQ_HEARTBEAT_IVL, HB_IVL_MS}, {ZMQ_HEARTBEAT_TIMEOUT, HB_TIMEOUT_MS},
                   {ZMQ_HEARTBEAT_TTL, HB_TTL_MS}};
    for (size_t i = 0; i < sizeof(hb) / sizeof(hb[0]); i++) zmq_setsockopt(c->sock, hb[i][0], &hb[i][1], sizeof(int));
    char mon_ep[64];
    snprintf(mon_ep, sizeof(mon_ep), "inproc://lp-client-mon-%p", (void *)c);
    if (zmq_socket_monitor(c->sock, mon_ep, ZMQ_EVENT_DISCONNECTED) != 0 ||
        !(c->mon = zmq_socket(c->ctx, ZMQ_PAIR)) || zmq_connect(c->mon, mon_ep) != 0) {
        int e = zmq_errno();
        lp_client_destroy(&c);
        return lp_error_set(LP_ERR(e), "client: socket monitor: %s", zmq_strerror(e));
    }
    lp_curve_opts_t co = {.key = key_path};
    lp_curve_t cv;
    int rc = lp_curve_load(&co, &cv);
    if (!rc) rc = lp_curve_connect(c->sock, endpoint, &cv, server_key, true, "client");
    lp_curve_clear(&cv);
    if (rc) {
        lp_client_destroy(&c);
        return rc;
    }
    *out = c;
    return 0;
}

void lp_client_destroy(lp_client_t **self_p)
{
    if (!self_p || !*self_p) return;
    lp_client_t *c = *self_p;
    if (c->hello) lmpipe__msg__free_unpacked(c->hello, NULL);
    if (c->sock) zmq_socket_monitor(c->sock, NULL, 0);
    if (c->mon) zmq_close(c->mon);
    zmq_close(c->sock);
    zmq_ctx_term(c->ctx);
    free(c);
    *self_p = NULL;
}

void *lp_client_socket(lp_client_t *c) { return c->sock; }
const Lmpipe__Hello *lp_client_server_hello(const lp_client_t *c) { return c->hello ? c->hello->hello : NULL; }

bool lp_client_linked(const lp_client_t *c) { return c->linked; }

int lp_client_recv(lp_client_t *c, int timeout_ms, lp_frame_t *f)
{
    int64_t deadline = timeout_ms < 0 ? -1 : (int64_t)lp_now_ms() + timeout_ms;
    for (;;) {
        int rc = lp_frame_recv(c->sock, false, f);
        if (rc != LP_ERR(EAGAIN)) return rc;
        /* What was received before the disconnection is read first. */
        if (drain_monitor(c) && c->linked) {
            c->linked = false;
            const char *who = c->hello && c->hello->hello->role == LMPIPE__ROLE__ROLE_COORDINATOR
                                  ? "coordinator" : "service";
            return lp_error_set(LP_ERR(ECONNRESET), "lost the connection to the %s (it stopped or "
                                "crashed); requests in flight have no result", who);
        }
        int wait = deadline < 0 ? -1 : (int)(deadline - (int64_t)lp_now_ms());
        if (deadline >= 0 && wait <= 0) return lp_error_set(LP_ERR(ETIMEDOUT), "no reply in %d ms", timeout_ms);
        zmq_pollitem_t it[2] = {{c->sock, 0, ZMQ_POLLIN, 0}, {c->mon, 0, ZMQ_POLLIN, 0}};
        if (zmq_poll(it, 2, wait) < 0 && zmq_errno() != EINTR)
            return lp_error_set(LP_ERR(zmq_errno()), "zmq_poll: %s", zmq_strerror(zmq_errno()));
    }
}

int lp_client_hello(lp_client_t *c, int timeout_ms)
{
    return lp_client_hello_as(c, LMPIPE__ROLE__ROLE_COORDINATOR, timeout_ms);
}

int lp_client_hello_as(lp_client_t *c, Lmpipe__Role role, int timeout_ms)
{
    int64_t deadline = (int64_t)lp_now_ms() + timeout_ms;
    char last[512] = "no reply";
    while ((int64_t)lp_now_ms() < deadline) {
        Lmpipe__Hello h;
        lp_hello_init(&h, LMPIPE__ROLE__ROLE_CLIENT);
        Lmpipe__Msg m = LMPIPE__MSG__INIT;
        m.id = ++c->next_hello;
        m.body_case = LMPIPE__MSG__BODY_HELLO;
        m.hello = &h;
        int rc = lp_frame_send(c->sock, NULL, 0, &m, NULL, 0);
        if (rc == LP_ERR(EAGAIN)) {
            /* No connection yet, or the server refused the handshake (a
             * CURVE server sends nothing back): try again until the end. */
            snprintf(last, sizeof(last), "no connection: not listening, or refused our keys");
            struct timespec ts = {0, 100 * 1000000};
            nanosleep(&ts, NULL);
            continue;
        }
        if (rc) return rc;
        int64_t until = (int64_t)lp_now_ms() + 1000;
        while ((int64_t)lp_now_ms() < until) {
            lp_frame_t f;
            rc = lp_client_recv(c, (int)(until - (int64_t)lp_now_ms()), &f);
            if (rc == LP_ERR(ETIMEDOUT)) break;
            if (rc) {
                lp_frame_clear(&f);
                continue;
            }
            if (f.msg->id != m.id) { /* a late reply to an earlier hello */
                lp_frame_clear(&f);
                continue;
            }
            if (f.msg->body_case == LMPIPE__MSG__BODY_HELLO) {
                rc = lp_hello_check(f.msg->hello, role);
                if (rc) {
                    lp_frame_clear(&f);
                    return rc;
                }
                if (c->hello) lmpipe__msg__free_unpacked(c->hello, NULL);
                c->hello = f.msg;
                f.msg = NULL;
                lp_frame_clear(&f);
                /* A disconnection reported before this answer was of an
                 * earlier connection. */
                drain_monitor(c);
                c->linked = true;
                return 0;
            }
            if (f.msg->body_case == LMPIPE__MSG__BODY_ERROR) {
                snprintf(last, sizeof(last), "%s", f.msg->error->message);
                int code = f.msg->error->code;
                lp_frame_clear(&f);
                if (code != LP_ERR(EAGAIN)) return lp_error_set(code ? code : LP_ERR(EPROTO), "%s", last);
                struct timespec ts = {0, 50 * 1000000};
                nanosleep(&ts, NULL);
                break;
            }
            lp_frame_clear(&f);
        }
    }
    return lp_error_set(LP_ERR(ETIMEDOUT), "the pipeline was not ready in %d ms (%s)", timeout_ms, last);
}

int lp_client_send_generate(lp_client_t *c, uint64_t id, const Lmpipe__GenerateRequest *g)
{
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.id = id;
    m.body_case = LMPIPE__MSG__BODY_GENERATE;
    m.generate = (Lmpipe__GenerateRequest *)g;
    return lp_frame_send(c->sock, NULL, 0, &m, NULL, 0);
}

int lp_client_send_cancel(lp_client_t *c, uint64_t id)
{
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    Lmpipe__Cancel cn = LMPIPE__CANCEL__INIT;
    m.id = id;
    m.body_case = LMPIPE__MSG__BODY_CANCEL;
    m.cancel = &cn;
    return lp_frame_send(c->sock, NULL, 0, &m, NULL, 0);
}

static int append(char **buf, size_t *len, const void *data, size_t n)
{
    char *b = realloc(*buf, *len + n + 1);
    if (!b) return LP_ERR(ENOMEM);
    if (n) memcpy(b + *len, data, n); /* data may be NULL when n is 0 */
    *len += n;
    b[*len] = '\0';
    *buf = b;
    return 0;
}

int lp_generation_add(lp_generation_t *out, const Lmpipe__Msg *m)
{
    if (m->body_case == LMPIPE__MSG__BODY_TOKEN) {
        const Lmpipe__TokenEvent *t = m->token;
        int32_t *ids = realloc(out->ids, (out->n_ids + 1) * sizeof(int32_t));
        if (ids) out->ids = ids;
        uint64_t *vs = realloc(out->versions, (out->n_ids + 1) * sizeof(uint64_t));
        if (vs) out->versions = vs;
        if (ids && vs) {
            out->ids[out->n_ids] = t->id;
            out->versions[out->n_ids] = t->strategy_version;
            out->n_ids++;
        }
        append(&out->text, &out->text_len, t->piece.data, t->piece.len);
        return 0;
    }
    if (m->body_case == LMPIPE__MSG__BODY_FINAL) {
        const Lmpipe__FinalEvent *f = m->final;
        append(&out->text, &out->text_len, f->tail.data, f->tail.len);
        out->reason = f->reason;
        out->prompt_ms = f->prompt_ms;
        out->queue_ms = f->queue_ms;
        out->generate_ms = f->generate_ms;
        out->n_prompt = f->n_prompt;
        out->n_generated = f->n_generated;
        if (f->error && f->error[0]) snprintf(out->error, sizeof(out->error), "%s", f->error);
        return 1;
    }
    if (m->body_case == LMPIPE__MSG__BODY_ERROR) {
        out->reason = LMPIPE__FINISH_REASON__FINISH_ERROR;
        snprintf(out->error, sizeof(out->error), "%s", m->error->message);
        return 1;
    }
    return 0;
}

void lp_generation_clear(lp_generation_t *g)
{
    free(g->ids);
    free(g->versions);
    free(g->text);
    memset(g, 0, sizeof(*g));
}

int lp_client_generate(lp_client_t *c, uint64_t id, const Lmpipe__GenerateRequest *g,
                       int timeout_ms, lp_client_token_cb cb, void *arg, lp_generation_t *out)
{
    memset(out, 0, sizeof(*out));
    if (c->hello && c->hello->body_case == LMPIPE__MSG__BODY_HELLO)
        out->n_ctx = c->hello->hello->n_ctx;
    append(&out->text, &out->text_len, "", 0);
    int rc = lp_client_send_generate(c, id, g);
    if (rc) return rc;
    for (;;) {
        lp_frame_t f;
        rc = lp_client_recv(c, timeout_ms, &f);
        if (rc) {
            lp_frame_clear(&f);
            if (rc == LP_ERR(EPROTO)) continue;
            return rc;
        }
        if (f.msg->id != id) {
            lp_frame_clear(&f);
            continue;
        }
        if (cb && f.msg->body_case == LMPIPE__MSG__BODY_TOKEN)
            cb(arg, f.msg->token->id, f.msg->token->piece.data, f.msg->token->piece.len);
        int done = lp_generation_add(out, f.msg);
        lp_frame_clear(&f);
        if (done) return 0;
    }
}
