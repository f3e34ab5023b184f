/* zloop_test.c - ZeroMQ sockets in a libuv loop: an echo ROUTER and a
 * DEALER in one loop pass 20000 messages in bursts.  Losing one wakeup (the
 * ZMQ_FD edge consumed by a send) would stall the loop; a timer fails the
 * test after 20 s instead of hanging. */
#include "zloop.h"

#include "../tests/check.h"
#include "error.h"

#include <unistd.h>
#include <zmq.h>

enum { TOTAL = 20000, BURST = 100 };

static int sent, received;
static lp_zsock_t *zr, *zd;
static uv_timer_t timer;

static void send_burst(void *dealer)
{
    for (int i = 0; i < BURST && sent < TOTAL; i++, sent++) zmq_send(dealer, &sent, sizeof(sent), 0);
    lp_zsock_kick(zd);
}

static void on_router(lp_zsock_t *zs, void *sock, void *arg)
{
    zmq_msg_t id, body;
    zmq_msg_init(&id);
    zmq_msg_init(&body);
    if (zmq_msg_recv(&id, sock, ZMQ_DONTWAIT) >= 0 && zmq_msg_recv(&body, sock, ZMQ_DONTWAIT) >= 0) {
        zmq_msg_send(&id, sock, ZMQ_SNDMORE);
        zmq_msg_send(&body, sock, 0);
        lp_zsock_kick(zs);
    }
    zmq_msg_close(&id);
    zmq_msg_close(&body);
}

static void on_dealer(lp_zsock_t *zs, void *sock, void *arg)
{
    int v;
    if (zmq_recv(sock, &v, sizeof(v), ZMQ_DONTWAIT) != sizeof(v)) return;
    CHECK(v == received);
    received++;
    if (received == sent && sent < TOTAL) send_burst(sock);
    if (received == TOTAL) uv_stop(uv_default_loop());
}

static void on_timeout(uv_timer_t *t)
{
    fprintf(stderr, "stalled after %d of %d messages\n", received, TOTAL);
    lp_check_failures++;
    uv_stop(t->loop);
}

int main(void)
{
    uv_loop_t *loop = uv_default_loop();
    void *ctx = zmq_ctx_new();
    void *router = zmq_socket(ctx, ZMQ_ROUTER), *dealer = zmq_socket(ctx, ZMQ_DEALER);
    char ep[128];
    snprintf(ep, sizeof(ep), "ipc:///tmp/lmpipe-zloop-test-%d", (int)getpid());
    CHECK(zmq_bind(router, ep) == 0);
    CHECK(zmq_connect(dealer, ep) == 0);
    CHECK_RC(lp_zsock_new(loop, router, on_router, NULL, &zr), 0);
    CHECK_RC(lp_zsock_new(loop, dealer, on_dealer, NULL, &zd), 0);
    uv_timer_init(loop, &timer);
    uv_timer_start(&timer, on_timeout, 20000, 0);
    send_burst(dealer);
    uv_run(loop, UV_RUN_DEFAULT);
    CHECK(received == TOTAL);
    lp_zsock_destroy(&zr);
    lp_zsock_destroy(&zd);
    uv_close((uv_handle_t *)&timer, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    CHECK(uv_loop_close(loop) == 0);
    int zero = 0;
    zmq_setsockopt(router, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_setsockopt(dealer, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_close(router);
    zmq_close(dealer);
    zmq_ctx_term(ctx);
    unlink(ep + 6); /* ZeroMQ leaves the ipc:// file behind */
    return CHECK_DONE();
}
