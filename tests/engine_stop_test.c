/* engine_stop_test.c - engine-svc blocked on a full logits ring still stops
 * at once on SIGTERM (issue #19).
 *
 *   engine_stop_test ENGINE_SVC MODEL
 *
 * The test is the engine's coordinator: with a ring of one slot, a quiet
 * step fills slot 0 (no sampler ever releases it), and a second step names
 * the same slot, so the engine waits for it (its ring_wait_ms is 10 s).
 * SIGTERM must end the engine cleanly within 2 s, not after that wait. */
#include "error.h"
#include "frame.h"
#include "hello.h"
#include "shm-ring.h"
#include "sysinfo.h"

#include "check.h"
#include "svc-test-util.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#define STOP_MS 2000

/* The answer with this id within timeout_ms: 0 and *f set, or -1. */
static int answer(void *sock, uint64_t id, int timeout_ms, lp_frame_t *f)
{
    memset(f, 0, sizeof(*f));
    zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
    while (zmq_poll(&it, 1, timeout_ms) == 1) {
        if (lp_frame_recv(sock, false, f) == 0 && f->msg->id == id) return 0;
        lp_frame_clear(f);
    }
    return -1;
}

/* Hello as the engine's controller, retried while it loads; the ring's
 * name in ring. */
static int hello(void *sock, char *ring, size_t cap)
{
    Lmpipe__Hello h;
    lp_hello_init(&h, LMPIPE__ROLE__ROLE_COORDINATOR);
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.id = 1;
    m.body_case = LMPIPE__MSG__BODY_HELLO;
    m.hello = &h;
    for (int i = 0; i < 100; i++) {
        lp_frame_t f;
        if (lp_frame_send(sock, NULL, 0, &m, NULL, 0) == 0 && answer(sock, 1, 200, &f) == 0) {
            int rc = f.msg->body_case == LMPIPE__MSG__BODY_HELLO && f.msg->hello->shm_name ? 0 : -1;
            if (!rc) snprintf(ring, cap, "%s", f.msg->hello->shm_name);
            lp_frame_clear(&f);
            return rc;
        }
    }
    return -1;
}

/* A quiet one-token step of sequence 0 at `pos` whose row goes to {slot 0, seq}. */
static void send_step(void *sock, uint64_t id, const char *ring, int32_t pos, uint64_t seq)
{
    Lmpipe__RowRef ref = LMPIPE__ROW_REF__INIT, *refs[] = {&ref};
    ref.slot = 0;
    ref.seq = seq;
    int32_t tok = 1;
    Lmpipe__StepSeq q = LMPIPE__STEP_SEQ__INIT, *qs[] = {&q};
    q.seq_id = 0;
    q.pos = pos;
    q.tokens = &tok;
    q.n_tokens = 1;
    q.n_logits = 1;
    Lmpipe__StepRequest sr = LMPIPE__STEP_REQUEST__INIT;
    sr.seqs = qs;
    sr.n_seqs = 1;
    sr.ring = (char *)ring;
    sr.rows = refs;
    sr.n_rows = 1;
    sr.quiet = true;
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.id = id;
    m.body_case = LMPIPE__MSG__BODY_STEP;
    m.step = &sr;
    lp_frame_send(sock, NULL, 0, &m, NULL, 0);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: engine_stop_test ENGINE_SVC MODEL\n");
        return 2;
    }
    char dir[] = "/tmp/lmpipe-engstop-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char ep[128];
    snprintf(ep, sizeof(ep), "ipc://%s/eng", dir);
    char *eargv[] = {argv[1], "--model", argv[2], "--endpoint", ep, "--threads", "1", "--shm-slots", "1", NULL};
    pid_t pid = test_spawn(eargv);
    void *ctx = zmq_ctx_new(), *sock = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_connect(sock, ep);
    char ring[128] = "";
    CHECK(hello(sock, ring, sizeof(ring)) == 0, "no hello from engine-svc with a ring");
    if (ring[0]) {
        lp_frame_t f;
        lp_shm_ring_t *r = NULL;
        CHECK_RC(lp_shm_ring_open(ring, &r), 0);
        send_step(sock, 10, ring, 0, 0x5eed0001);
        CHECK(r && lp_shm_ring_wait(r, 0, 0x5eed0001, 5000) == 0, "the first step's row was not published");
        /* Slot 0 stays READY (nobody releases it): the second step waits for it. */
        send_step(sock, 11, ring, 1, 0x5eed0002);
        CHECK(answer(sock, 11, 500, &f) != 0, "the second step did not wait for the taken slot: %s",
              f.msg && f.msg->body_case == LMPIPE__MSG__BODY_ERROR ? f.msg->error->message : "");
        lp_frame_clear(&f);
        CHECK(r && lp_shm_ring_wait(r, 0, 0x5eed0002, 100) == LP_ERR(ETIMEDOUT), "the second step ran");
        lp_shm_ring_destroy(&r);
    }
    uint64_t t0 = lp_now_ms();
    kill(pid, SIGTERM);
    int st = 0;
    while (waitpid(pid, &st, WNOHANG) == 0 && lp_now_ms() - t0 < STOP_MS) usleep(10000);
    uint64_t took = lp_now_ms() - t0;
    if (waitpid(pid, &st, WNOHANG) == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        CHECK(0, "engine-svc waiting on the ring did not stop within %d ms of SIGTERM", STOP_MS);
    } else {
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "engine-svc did not stop cleanly (status %d)", st);
        printf("engine-svc waiting on the ring stopped %llu ms after SIGTERM\n", (unsigned long long)took);
    }
    zmq_close(sock);
    zmq_ctx_term(ctx);
    char cmd[64];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return CHECK_DONE();
}
