/* zloop.c - ZeroMQ sockets in a libuv loop (see zloop.h). */
#include "zloop.h"

#include "error.h"
#include "log.h"

#include <stdlib.h>
#include <string.h>
#include <zmq.h>

struct lp_zsock {
    uv_poll_t poll;
    uv_idle_t idle;
    uv_prepare_t prep;
    void *sock;
    lp_zsock_cb on_msg;
    void *arg;
    int n_open;   /* handles not yet closed */
    bool closing;
    bool in_drain;
};

static void drain(lp_zsock_t *zs)
{
    if (zs->in_drain) return; /* a callback sent and kicked: the outer loop re-checks */
    zs->in_drain = true;
    for (;;) {
        if (zs->closing) break;
        int events = 0;
        size_t len = sizeof(events);
        if (zmq_getsockopt(zs->sock, ZMQ_EVENTS, &events, &len) != 0) {
            if (zmq_errno() != EINTR) {
                LP_WARN("zmq ZMQ_EVENTS: %s", zmq_strerror(zmq_errno()));
                break;
            }
            continue;
        }
        if (!(events & ZMQ_POLLIN)) break;
        zs->on_msg(zs, zs->sock, zs->arg);
    }
    zs->in_drain = false;
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events;
    drain(h->data);
}

/* Right before the loop blocks: one more look, so that an edge consumed by
 * anything since the last drain cannot leave a message waiting. */
static void on_prepare(uv_prepare_t *h)
{
    drain(h->data);
}

static void on_idle(uv_idle_t *h)
{
    lp_zsock_t *zs = h->data;
    uv_idle_stop(h);
    drain(zs);
}

int lp_zsock_new(uv_loop_t *loop, void *sock, lp_zsock_cb on_msg, void *arg, lp_zsock_t **out)
{
    *out = NULL;
    int fd;
    size_t len = sizeof(fd);
    if (zmq_getsockopt(sock, ZMQ_FD, &fd, &len) != 0)
        return lp_error_set(LP_ERR(zmq_errno()), "zmq ZMQ_FD: %s", zmq_strerror(zmq_errno()));
    lp_zsock_t *zs = calloc(1, sizeof(*zs));
    if (!zs) return LP_ERR(ENOMEM);
    zs->sock = sock;
    zs->on_msg = on_msg;
    zs->arg = arg;
    int rc = uv_poll_init(loop, &zs->poll, fd);
    if (rc) {
        free(zs);
        return lp_error_set(rc, "uv_poll_init: %s", uv_strerror(rc));
    }
    zs->poll.data = zs;
    uv_idle_init(loop, &zs->idle);
    zs->idle.data = zs;
    uv_prepare_init(loop, &zs->prep);
    zs->prep.data = zs;
    uv_prepare_start(&zs->prep, on_prepare);
    zs->n_open = 3;
    uv_poll_start(&zs->poll, UV_READABLE, on_poll);
    lp_zsock_kick(zs); /* messages may already wait: no edge will come for them */
    *out = zs;
    return 0;
}

void lp_zsock_kick(lp_zsock_t *zs)
{
    if (zs && !zs->closing) uv_idle_start(&zs->idle, on_idle);
}

void *lp_zsock_socket(const lp_zsock_t *zs) { return zs->sock; }

static void on_close(uv_handle_t *h)
{
    lp_zsock_t *zs = h->data;
    if (--zs->n_open == 0) free(zs);
}

void lp_zsock_destroy(lp_zsock_t **self_p)
{
    if (!self_p || !*self_p) return;
    lp_zsock_t *zs = *self_p;
    *self_p = NULL;
    zs->closing = true;
    uv_close((uv_handle_t *)&zs->poll, on_close);
    uv_close((uv_handle_t *)&zs->idle, on_close);
    uv_close((uv_handle_t *)&zs->prep, on_close);
}

int lp_zmq_monitor_event(void *mon)
{
    uint16_t event = 0;
    bool more = true;
    for (int part = 0; more; part++) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, mon, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            return part == 0 ? -1 : event;
        }
        if (part == 0 && zmq_msg_size(&m) >= 2) memcpy(&event, zmq_msg_data(&m), 2);
        more = zmq_msg_more(&m);
        zmq_msg_close(&m);
    }
    return event;
}
