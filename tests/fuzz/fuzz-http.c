/* fuzz-http.c - arbitrary bytes as an HTTP connection to the gateway: llhttp,
 * routing, keys, JSON bodies and every endpoint's field checks.  The
 * gateway runs in-process, marked ready, with its coordinator link cut, so
 * that a request which passes every check ends in "cannot send" (503)
 * instead of waiting for a reply. */
#include "gw.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

static uv_loop_t loop;
static lp_gw_t *gw;

static void setup(void)
{
    uv_loop_init(&loop);
    lp_gw_opts_t o = {.coordinator = "inproc://lp-fuzz-http", .listen = "127.0.0.1:0",
                      .api_keys = {"key"}, .n_api_keys = 1, .admin_keys = {"admin"}, .n_admin_keys = 1,
                      .max_body = 4096, .max_connections = 8, .max_per_address = 8,
                      .header_timeout_ms = 60000, .body_timeout_ms = 60000,
                      .idle_timeout_ms = 60000};
    if (lp_gw_start(&loop, &o, &gw) != 0) abort();
    zmq_disconnect(gw->link.sock, o.coordinator); /* sends now fail at once */
    gw->link.ready = true;
    strcpy(gw->link.model, "m");
    gw->link.n_ctx = 64;
    gw->link.n_vocab = 4;
    static char *vocab[4] = {"a", "b", "\xff", ""};
    static uint32_t lens[4] = {1, 1, 1, 0};
    gw->link.vocab = malloc(sizeof(vocab)); /* lp_gw_destroy would free; never called */
    memcpy(gw->link.vocab, vocab, sizeof(vocab));
    gw->link.vocab_len = lens;
    gw->link.vocab_n = 4;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!gw) setup();
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) abort();
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    if (lp__gw_conn_adopt(gw, sv[0]) != 0) abort();
    size_t off = 0;
    char buf[65536];
    bool shut = false;
    for (int spins = 0; spins < 100000; spins++) {
        if (off < size) {
            ssize_t w = write(sv[1], data + off, size - off);
            if (w > 0) off += (size_t)w;
        } else if (!shut) {
            shutdown(sv[1], SHUT_WR);
            shut = true;
        }
        uv_run(&loop, UV_RUN_NOWAIT);
        ssize_t r = read(sv[1], buf, sizeof(buf));
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) break; /* closed: done */
    }
    close(sv[1]);
    for (int i = 0; i < 4; i++) uv_run(&loop, UV_RUN_NOWAIT);
    return 0;
}
