/* links.c - the coordinator's links to its services: one DEALER each, and
 * the FIFO of operations whose replies are due (a service answers in the
 * order of the requests).  ZeroMQ reconnects a link on its own (0.5 s
 * doubling to 10 s) and heartbeats find a peer that has gone silent; a
 * socket monitor reports the disconnection, and the link is then closed
 * and reopened fresh, so that no stale message reaches a restarted
 * service. */
#include "coord-internal.h"

#include "error.h"
#include "hello.h"
#include "log.h"
#include "sysinfo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <zmq.h>

/* Heartbeats on every link: a peer silent for HB_TIMEOUT_MS (a host gone,
 * a cable pulled) is disconnected like one that closed its socket.  The
 * service's I/O thread answers them even while a step computes. */
#define HB_IVL_MS 1000
#define HB_TIMEOUT_MS 3000
#define HB_TTL_MS 6000
#define RECONNECT_MS LP__RETRY_MS
#define RECONNECT_MAX_MS 10000
/* ZeroMQ's own reconnection, while a link waits for its service: a
 * restarted service is found within 1 s of binding, whatever the outage. */
#define ZMQ_RECONNECT_MAX_MS 1000
/* A service connected for this long without answering the hello is
 * treated as dropped (its connection may be wedged). */
#define HELLO_TIMEOUT_MS 5000

static int op_push(lp__link_t *l, lp__op_t op)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        lp__op_t *n = malloc(cap * sizeof(lp__op_t));
        if (!n) return LP_ERR(ENOMEM);
        for (size_t i = 0; i < l->n; i++) n[i] = l->ops[(l->head + i) % l->cap];
        free(l->ops);
        l->ops = n;
        l->head = 0;
        l->cap = cap;
    }
    l->ops[(l->head + l->n++) % l->cap] = op;
    return 0;
}

int lp__link_send(lp__link_t *l, enum lp__opkind kind, uint64_t req, Lmpipe__Msg *m,
                  const void *raw, size_t raw_len)
{
    m->id = ++l->next_id;
    int rc = kind == OP_NONE ? 0 : op_push(l, (lp__op_t){m->id, kind, req, lp_now_ns()});
    if (rc) return rc;
    rc = lp_frame_send(l->sock, NULL, 0, m, raw, raw_len);
    lp_zsock_kick(l->zs);
    if (rc) {
        if (kind != OP_NONE) l->n--; /* never sent: forget it */
        LP_ERROR("coordinator: send to %s: %s", l->name, lp_error_msg());
    }
    return rc;
}

static void on_hello_timeout(uv_timer_t *t)
{
    lp__link_t *l = t->data;
    if (l->hello || l->down || !l->sock) return;
    LP_WARN("coordinator: %s %s: no hello reply in %d s", l->name, l->endpoint, HELLO_TIMEOUT_MS / 1000);
    lp__coord_on_link_down(l->owner, l);
}

/* The hello's deadline runs once it is sent and the link is connected. */
static void link_hello_wait(lp__link_t *l)
{
    if (!l->connected || !l->hello_sent || l->hello) return;
    if (!l->hello_timer_open) {
        uv_timer_init(lp_service_loop(l->owner->svc), &l->hello_timer);
        l->hello_timer.data = l;
        l->hello_timer_open = true;
    }
    uv_timer_start(&l->hello_timer, on_hello_timeout, HELLO_TIMEOUT_MS, 0);
}

void lp__link_hello_done(lp__link_t *l)
{
    if (l->hello_timer_open) uv_timer_stop(&l->hello_timer);
}

void lp__link_send_hello(lp_coord_t *c, lp__link_t *l)
{
    Lmpipe__Hello h;
    lp_hello_init(&h, LMPIPE__ROLE__ROLE_COORDINATOR);
    h.no_shm = c->p.no_shm;
    h.controller_epoch = c->epoch;
    /* The sampler maps the ring its engine named. */
    if (l->group && l == &l->group->samp && !c->p.no_shm) {
        const Lmpipe__Hello *e = l->group->eng.hello->hello;
        if (e->shm_name && e->shm_name[0]) h.shm_name = e->shm_name;
    }
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.body_case = LMPIPE__MSG__BODY_HELLO;
    m.hello = &h;
    lp__link_send(l, OP_HELLO, 0, &m, NULL, 0);
    l->hello_sent = true;
    link_hello_wait(l);
}

/* The operation a reply answers: the oldest pending one with its id (older
 * ones got no reply and are dropped).  False for a reply to nothing pending
 * (an Error for a quiet step). */
static bool op_pop(lp__link_t *l, const Lmpipe__Msg *msg, lp__op_t *op)
{
    bool pending = false;
    for (size_t i = 0; i < l->n && !pending; i++) pending = l->ops[(l->head + i) % l->cap].id == msg->id;
    if (!pending) {
        if (msg->body_case == LMPIPE__MSG__BODY_ERROR)
            LP_WARN("coordinator: %s: %s", l->name, msg->error->message);
        else
            LP_WARN("coordinator: %s: unexpected reply %llu", l->name, (unsigned long long)msg->id);
        return false;
    }
    while (l->n > 0) {
        *op = l->ops[l->head];
        l->head = (l->head + 1) % l->cap;
        l->n--;
        if (op->id == msg->id) return true;
        LP_WARN("coordinator: %s: no reply to message %llu", l->name, (unsigned long long)op->id);
    }
    return false;
}

static void on_link(lp_zsock_t *zs, void *sock, void *arg)
{
    lp__link_t *l = arg;
    lp_coord_t *c = l->owner;
    lp_frame_t f;
    int rc = lp_frame_recv(sock, false, &f);
    if (rc == LP_ERR(EAGAIN)) return;
    if (rc) {
        lp_service_count_malformed(c->svc);
        LP_WARN("coordinator: malformed reply from %s: %s", l->name, lp_error_msg());
        lp_frame_clear(&f);
        return;
    }
    lp__op_t op;
    bool found = op_pop(l, f.msg, &op);
    if (found) lp__coord_on_reply(c, l, &op, &f);
    lp_frame_clear(&f);
    if (found) lp__coord_pump(c);
    (void)zs;
}

void lp__link_init(lp_coord_t *c, lp__link_t *l, const char *name, Lmpipe__Role role,
                   const char *endpoint, const char *server_key, lp__group_t *group)
{
    l->name = name;
    l->role = role;
    l->endpoint = endpoint;
    l->server_key = server_key && server_key[0] ? server_key : NULL;
    l->owner = c;
    l->group = group;
    l->backoff_ms = RECONNECT_MS;
    /* A routing id of its own that survives reconnection: a service that
     * stayed up still sees its controller when the link comes back. */
    uint8_t rnd[8] = {0};
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
        uint64_t t = lp_now_ns() ^ (uint64_t)(uintptr_t)l;
        memcpy(rnd, &t, sizeof(rnd));
    }
    int n = snprintf(l->routing_id, sizeof(l->routing_id), "lpc-");
    for (size_t i = 0; i < sizeof(rnd); i++)
        n += snprintf(l->routing_id + n, sizeof(l->routing_id) - (size_t)n, "%02x", rnd[i]);
}

/* The one place where a link's socket connects: over CURVE with the
 * service's key; a service on tcp:// without keys only with
 * allow_insecure_tcp. */
static int link_connect(lp__link_t *l)
{
    int rc = lp_curve_connect(l->sock, l->endpoint, lp_service_curve(l->owner->svc), l->server_key,
                              false, l->name);
    if (rc) lp_error_prefix("coordinator: ");
    return rc;
}

/* The link's socket monitor: the handshake done, or the connection lost. */
static void on_monitor(lp_zsock_t *zs, void *sock, void *arg)
{
    lp__link_t *l = arg;
    (void)zs;
    int event = lp_zmq_monitor_event(sock);
    if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
        l->connected = true;
        link_hello_wait(l);
    } else if (event == ZMQ_EVENT_DISCONNECTED) {
        l->connected = false;
        if (!l->down) lp__coord_on_link_down(l->owner, l);
    }
}

int lp__link_open(lp_coord_t *c, lp__link_t *l)
{
    l->down = false;
    l->connected = l->hello_sent = false;
    l->sock = zmq_socket(lp_service_zmq_ctx(c->svc), ZMQ_DEALER);
    if (!l->sock)
        return lp_error_set(LP_ERR(zmq_errno()), "coordinator: socket for %s: %s", l->name,
                            zmq_strerror(zmq_errno()));
    lp_service_sockopts(l->sock);
    int opts[][2] = {{ZMQ_HEARTBEAT_IVL, HB_IVL_MS}, {ZMQ_HEARTBEAT_TIMEOUT, HB_TIMEOUT_MS},
                     {ZMQ_HEARTBEAT_TTL, HB_TTL_MS}, {ZMQ_RECONNECT_IVL, RECONNECT_MS},
                     {ZMQ_RECONNECT_IVL_MAX, ZMQ_RECONNECT_MAX_MS}};
    for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
        zmq_setsockopt(l->sock, opts[i][0], &opts[i][1], sizeof(int));
    zmq_setsockopt(l->sock, ZMQ_ROUTING_ID, l->routing_id, strlen(l->routing_id));
    /* A fresh name each time: the previous monitor's may still be bound
     * while ZeroMQ closes it. */
    char mon_ep[80];
    snprintf(mon_ep, sizeof(mon_ep), "inproc://lp-coord-mon-%p-%u", (void *)l, l->n_opens++);
    if (zmq_socket_monitor(l->sock, mon_ep, ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED) != 0 ||
        !(l->mon = zmq_socket(lp_service_zmq_ctx(c->svc), ZMQ_PAIR)) || zmq_connect(l->mon, mon_ep) != 0)
        return lp_error_set(LP_ERR(zmq_errno()), "coordinator: monitor for %s: %s", l->name,
                            zmq_strerror(zmq_errno()));
    int rc = lp_zsock_new(lp_service_loop(c->svc), l->mon, on_monitor, l, &l->mzs);
    if (!rc) rc = link_connect(l);
    if (!rc) rc = lp_zsock_new(lp_service_loop(c->svc), l->sock, on_link, l, &l->zs);
    return rc;
}

void lp__link_close(lp__link_t *l)
{
    lp_zsock_destroy(&l->zs);
    lp_zsock_destroy(&l->mzs);
    if (l->sock) {
        zmq_socket_monitor(l->sock, NULL, 0);
        zmq_close(l->sock);
    }
    if (l->mon) zmq_close(l->mon);
    l->sock = l->mon = NULL;
    l->head = l->n = 0;
    l->connected = false;
    lp__link_hello_done(l);
}

void lp__link_free(lp__link_t *l)
{
    lp__link_close(l);
    if (l->hello) lmpipe__msg__free_unpacked(l->hello, NULL);
    l->hello = NULL;
    free(l->ops);
    l->ops = NULL;
}

void lp__link_abort(lp_coord_t *c, lp__link_t *l, const char *why)
{
    Lmpipe__Error e = LMPIPE__ERROR__INIT;
    e.code = LP_ERR(EPIPE);
    e.message = (char *)why;
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.body_case = LMPIPE__MSG__BODY_ERROR;
    m.error = &e;
    m.id = UINT64_MAX; /* the longest id: the buffer fits every one */
    size_t len = lmpipe__msg__get_packed_size(&m);
    uint8_t *buf = malloc(len);
    while (l->n > 0) {
        lp__op_t op = l->ops[l->head];
        l->head = (l->head + 1) % l->cap;
        l->n--;
        if (op.kind == OP_HELLO || !buf) continue;
        /* A reply of the kind a service sends, so that every handler runs
         * its usual failure path (and may keep the message). */
        m.id = op.id;
        size_t n = lmpipe__msg__pack(&m, buf);
        lp_frame_t f = {0};
        f.msg = lmpipe__msg__unpack(NULL, n, buf);
        if (f.msg) lp__coord_on_reply(c, l, &op, &f);
        lp_frame_clear(&f);
    }
    free(buf);
}

static void on_retry(uv_timer_t *t)
{
    lp__link_t *l = t->data;
    lp_coord_t *c = l->owner;
    if (l->group) {
        if (lp__group_connect(c, l->group) != 0) lp__coord_fail_pipeline(c, lp_error_msg());
        return;
    }
    if (lp__link_open(c, l) != 0) {
        lp__coord_fail_pipeline(c, lp_error_msg());
        return;
    }
    lp__link_send_hello(c, l);
}

void lp__link_retry_later(lp_coord_t *c, lp__link_t *l)
{
    l->down = true;
    /* Closed now, reopened later: a service that stayed up sees this
     * connection gone well before the new one (same routing id) comes. */
    lp__link_close(l);
    if (!l->timer_open) {
        uv_timer_init(lp_service_loop(c->svc), &l->timer);
        l->timer.data = l;
        l->timer_open = true;
    }
    LP_WARN("coordinator: %s %s: retrying in %.1f s", l->name, l->endpoint, l->backoff_ms / 1000.0);
    uv_timer_start(&l->timer, on_retry, l->backoff_ms, 0);
    l->backoff_ms = l->backoff_ms * 2 > RECONNECT_MAX_MS ? RECONNECT_MAX_MS : l->backoff_ms * 2;
}

static bool overdue(const lp__link_t *l, uint64_t now)
{
    return l->sock && !l->down && l->n > 0 &&
           now - l->ops[l->head].t_sent > (uint64_t)LP__OP_TIMEOUT_MS * 1000000ull;
}

static void drop_overdue(lp_coord_t *c, lp__link_t *l)
{
    LP_WARN("coordinator: %s %s: no reply to message %llu in %d s; treating it as dropped out", l->name,
            l->endpoint, (unsigned long long)l->ops[l->head].id, LP__OP_TIMEOUT_MS / 1000);
    lp__coord_on_link_down(c, l);
}

void lp__links_check_overdue(lp_coord_t *c)
{
    uint64_t now = lp_now_ns();
    for (size_t i = 0; i < c->n_toks; i++)
        if (overdue(&c->toks[i], now)) drop_overdue(c, &c->toks[i]);
    for (size_t i = 0; i < c->n_groups; i++) {
        lp__group_t *g = &c->groups[i];
        if (overdue(&g->eng, now)) drop_overdue(c, &g->eng);
        else if (overdue(&g->samp, now)) drop_overdue(c, &g->samp);
    }
}

lp__link_t *lp__tok_pick(lp_coord_t *c)
{
    lp__link_t *best = NULL;
    /* Fewest pending; ties go round the list. */
    for (size_t k = 0; k < c->n_toks; k++) {
        lp__link_t *l = &c->toks[(c->tok_rr + k) % c->n_toks];
        if (!l->hello || l->down) continue;
        if (!best || l->n < best->n) best = l;
    }
    if (best) c->tok_rr = (size_t)(best - c->toks) + 1;
    return best;
}
