/* engine_kv_wire_test.c - engine-svc's paged KV over a real ipc:// socket,
 * driven by hand by this test as its coordinator:
 *   - the hello announces kv_block and kv_blocks (16 and 2 x 4 here; 0 and
 *     0 with --kv-block 0);
 *   - a step whose block table has an index out of the pool, is too short
 *     for pos + tokens, or names a block twice gets an Error naming the
 *     field, also beside a good seq in the same step, and a following good
 *     step gives the logits it gave before the refusals, bit for bit;
 *   - a step without blocks uses the seq_id's fallback table (default pool)
 *     and is refused, naming blocks, when the pool was sized smaller
 *     (--kv-pool-tokens); blocks given to an engine that does not page are
 *     refused;
 *   - bad --kv-* flags exit with a message naming the flag.
 * Usage: engine_kv_wire_test ENGINE_SVC MODEL (stories260K.gguf) */
#include "error.h"
#include "frame.h"
#include "hello.h"

#include "check.h"
#include "svc-test-util.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#define REPLY_MS 10000

/* Send m as message `id` and wait for the answer with that id. */
static int ask(void *sock, Lmpipe__Msg *m, uint64_t id, int timeout_ms, lp_frame_t *f)
{
    memset(f, 0, sizeof(*f));
    m->id = id;
    if (lp_frame_send(sock, NULL, 0, m, NULL, 0)) return -1;
    zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
    while (zmq_poll(&it, 1, timeout_ms) == 1) {
        if (lp_frame_recv(sock, false, f) == 0 && f->msg->id == id) return 0;
        lp_frame_clear(f);
    }
    return -1;
}

/* Hello as ROLE_COORDINATOR, retried while the engine loads. */
static int hello(void *sock, lp_frame_t *f)
{
    Lmpipe__Hello h;
    lp_hello_init(&h, LMPIPE__ROLE__ROLE_COORDINATOR);
    h.no_shm = true;
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.body_case = LMPIPE__MSG__BODY_HELLO;
    m.hello = &h;
    for (int i = 0; i < 100; i++)
        if (ask(sock, &m, 1, 200, f) == 0) {
            if (f->msg->body_case == LMPIPE__MSG__BODY_HELLO) return 0;
            lp_frame_clear(f);
            return -1;
        }
    return -1;
}

typedef struct seq {
    int32_t seq_id, pos, n_tokens;
    const uint32_t *blocks;
    size_t n_blocks;
} seq_t;

static const int32_t toks[40] = {1, 403, 407, 261, 378, 432, 383, 500, 310, 289, 271, 280, 300,
                                 301, 302, 303, 304, 305, 306, 307, 308, 309, 311, 312, 313, 314,
                                 315, 316, 317, 318, 319, 320, 321, 322, 323, 324, 325, 326, 327,
                                 328};

/* One inline step of n seqs (one logit row each).  Returns 0 with the rows
 * in `rows` (n x n_vocab floats, may be NULL), or -1 with the Error's
 * message in err. */
static int step(void *sock, uint64_t id, const seq_t *s, int n, float *rows, size_t row_floats,
                char *err, size_t err_len)
{
    Lmpipe__StepSeq q[4], *qs[4];
    for (int i = 0; i < n; i++) {
        lmpipe__step_seq__init(&q[i]);
        q[i].seq_id = s[i].seq_id;
        q[i].pos = s[i].pos;
        q[i].tokens = (int32_t *)toks + s[i].pos;
        q[i].n_tokens = (size_t)s[i].n_tokens;
        q[i].n_logits = 1;
        q[i].blocks = (uint32_t *)s[i].blocks;
        q[i].n_blocks = s[i].n_blocks;
        qs[i] = &q[i];
    }
    Lmpipe__StepRequest sr = LMPIPE__STEP_REQUEST__INIT;
    sr.seqs = qs;
    sr.n_seqs = (size_t)n;
    sr.inline_rows = true;
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.body_case = LMPIPE__MSG__BODY_STEP;
    m.step = &sr;
    lp_frame_t f;
    err[0] = 0;
    if (ask(sock, &m, id, REPLY_MS, &f)) {
        snprintf(err, err_len, "no answer");
        return -1;
    }
    int rc = -1;
    if (f.msg->body_case == LMPIPE__MSG__BODY_ERROR) {
        snprintf(err, err_len, "%s", f.msg->error->message);
    } else if (f.msg->body_case == LMPIPE__MSG__BODY_STEP_REPLY && f.has_raw &&
               zmq_msg_size(&f.raw) == (size_t)n * row_floats * sizeof(float)) {
        if (rows) memcpy(rows, zmq_msg_data(&f.raw), zmq_msg_size(&f.raw));
        rc = 0;
    } else {
        snprintf(err, err_len, "an answer that is neither an Error nor %d inline rows", n);
    }
    lp_frame_clear(&f);
    return rc;
}

static void *start(void *ctx, char *const argv[], pid_t *pid, lp_frame_t *hf)
{
    *pid = test_spawn(argv);
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_connect(s, argv[4]);
    if (hello(s, hf)) {
        CHECK(0, "no hello from engine-svc");
        zmq_close(s);
        return NULL;
    }
    return s;
}

/* Expect an Error holding `want` for these seqs. */
static void refused(void *sock, uint64_t id, const seq_t *s, int n, const char *want)
{
    char err[512];
    CHECK(step(sock, id, s, n, NULL, 0, err, sizeof err) == -1 && strstr(err, want),
          "step %llu: want an Error with '%s', got '%s'", (unsigned long long)id, want, err);
}

static void test_paged(const char *engine, const char *model, const char *dir, void *ctx)
{
    char ep[256];
    snprintf(ep, sizeof(ep), "ipc://%s/eng", dir);
    char *argv[] = {(char *)engine, "--model", (char *)model, "--endpoint", ep, "--threads", "1",
                    "--no-shm", "--n-ctx", "64", "--max-seqs", "2", "--kv-block", "16", NULL};
    pid_t pid;
    lp_frame_t hf;
    void *s = start(ctx, argv, &pid, &hf);
    if (!s) { test_stop(pid, "engine-svc"); return; }
    const Lmpipe__Hello *h = hf.msg->hello;
    CHECK(h->kv_block == 16 && h->kv_blocks == 8, "hello: kv_block %u kv_blocks %u (want 16, 8)",
          h->kv_block, h->kv_blocks);
    const size_t nv = h->n_vocab;
    lp_frame_clear(&hf);
    float *good = malloc(sizeof(float) * nv * 2), *again = malloc(sizeof(float) * nv * 2);
    char err[512];

    static const uint32_t t_good[] = {5, 2}, t_range[] = {5, 8}, t_short[] = {5},
                          t_dup[] = {5, 2, 5}, t_other[] = {6, 1};
    const seq_t good_seq = {0, 0, 20, t_good, 2};
    CHECK(step(s, 10, &good_seq, 1, good, nv, err, sizeof err) == 0, "good step: %s", err);

    const seq_t range = {0, 0, 20, t_range, 2}, shortt = {0, 0, 20, t_short, 1},
                dup = {0, 0, 20, t_dup, 3};
    refused(s, 11, &range, 1, "seqs[0]: blocks[1] = 8 is not in 0..7");
    refused(s, 12, &shortt, 1, "seqs[0]: blocks: 1 blocks of 16 positions do not cover positions 0..19");
    refused(s, 13, &dup, 1, "seqs[0]: blocks[2] = 5 repeats blocks[0]");
    /* a bad seq beside a good one fails the step, naming the bad one */
    const seq_t pair[2] = {{1, 0, 20, t_other, 2}, {0, 0, 20, t_dup, 3}};
    refused(s, 14, pair, 2, "seqs[1]: blocks[2] = 5 repeats blocks[0]");

    /* the good step again, and seq 1 beside it: nothing was harmed */
    const seq_t both[2] = {good_seq, {1, 0, 20, t_other, 2}};
    CHECK(step(s, 15, both, 2, again, nv, err, sizeof err) == 0, "good step after refusals: %s",
          err);
    CHECK(memcmp(again, good, sizeof(float) * nv) == 0 &&
              memcmp(again + nv, good, sizeof(float) * nv) == 0,
          "the good step's logits changed after the refused steps");
    /* a decode through the same table, then the fallback table of seq 1 */
    const seq_t dec = {0, 20, 1, t_good, 2}, fb = {1, 0, 20, NULL, 0};
    CHECK(step(s, 16, &dec, 1, NULL, nv, err, sizeof err) == 0, "decode: %s", err);
    CHECK(step(s, 17, &fb, 1, again, nv, err, sizeof err) == 0, "fallback table: %s", err);
    CHECK(memcmp(again, good, sizeof(float) * nv) == 0, "the fallback table's logits differ");
    zmq_close(s);
    test_stop(pid, "engine-svc");
    free(good);
    free(again);
}

static void test_small_pool_and_contiguous(const char *engine, const char *model, const char *dir,
                                           void *ctx)
{
    char ep[256];
    snprintf(ep, sizeof(ep), "ipc://%s/eng2", dir);
    char *argv[] = {(char *)engine, "--model", (char *)model, "--endpoint", ep, "--threads", "1",
                    "--no-shm", "--n-ctx", "64", "--max-seqs", "2", "--kv-pool-tokens", "40", NULL};
    pid_t pid;
    lp_frame_t hf;
    char err[512];
    void *s = start(ctx, argv, &pid, &hf);
    if (s) {
        CHECK(hf.msg->hello->kv_block == 16 && hf.msg->hello->kv_blocks == 3,
              "hello with --kv-pool-tokens 40: %u x %u", hf.msg->hello->kv_blocks,
              hf.msg->hello->kv_block);
        const size_t nv = hf.msg->hello->n_vocab;
        lp_frame_clear(&hf);
        const seq_t fb = {0, 0, 20, NULL, 0};
        refused(s, 20, &fb, 1, "seqs[0]: blocks: no block table");
        static const uint32_t t[] = {2, 0};
        const seq_t ok = {0, 0, 20, t, 2};
        CHECK(step(s, 21, &ok, 1, NULL, nv, err, sizeof err) == 0, "table step in a small pool: "
              "%s", err);
        zmq_close(s);
    }
    test_stop(pid, "engine-svc");

    snprintf(ep, sizeof(ep), "ipc://%s/eng3", dir);
    char *argv0[] = {(char *)engine, "--model", (char *)model, "--endpoint", ep, "--threads", "1",
                     "--no-shm", "--n-ctx", "64", "--max-seqs", "2", "--kv-block", "0", NULL};
    s = start(ctx, argv0, &pid, &hf);
    if (s) {
        CHECK(hf.msg->hello->kv_block == 0 && hf.msg->hello->kv_blocks == 0,
              "hello with --kv-block 0: %u x %u", hf.msg->hello->kv_blocks,
              hf.msg->hello->kv_block);
        const size_t nv = hf.msg->hello->n_vocab;
        lp_frame_clear(&hf);
        static const uint32_t t[] = {0, 1};
        const seq_t with = {0, 0, 20, t, 2}, without = {0, 0, 20, NULL, 0};
        refused(s, 30, &with, 1, "seqs[0]: blocks: a block table given, but this engine does not "
                "page");
        CHECK(step(s, 31, &without, 1, NULL, nv, err, sizeof err) == 0, "contiguous step: %s",
              err);
        zmq_close(s);
    }
    test_stop(pid, "engine-svc");
}

/* engine-svc with these flags exits 2 or 1 with `want` on stderr. */
static void bad_flags(const char *engine, const char *model, const char *flags, const char *want)
{
    char cmd[2048], out[1024] = "";
    snprintf(cmd, sizeof(cmd), "%s --model %s --endpoint ipc:///nonexistent/x %s 2>&1", engine,
             model, flags);
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(out, 1, sizeof(out) - 1, p) : 0;
    out[n] = 0;
    int st = p ? pclose(p) : -1;
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) != 0 && strstr(out, want), "engine-svc %s: status %d, "
          "want '%s' in: %s", flags, st, want, out);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: engine_kv_wire_test ENGINE_SVC MODEL\n");
        return 2;
    }
    char dir[] = "/tmp/lmpipe-kvwire-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    void *ctx = zmq_ctx_new();
    test_paged(argv[1], argv[2], dir, ctx);
    test_small_pool_and_contiguous(argv[1], argv[2], dir, ctx);
    zmq_ctx_term(ctx);
    bad_flags(argv[1], argv[2], "--kv-block -1", "--kv-block: '-1' is not an integer");
    bad_flags(argv[1], argv[2], "--kv-pool-tokens 0", "--kv-pool-tokens: '0' is not an integer");
    bad_flags(argv[1], argv[2], "--kv-pool-tokens 64 --kv-pool-mb 1",
              "--kv-pool-tokens 64 and --kv-pool-mb 1 both size the KV pool");
    bad_flags(argv[1], argv[2], "--kv-block 0 --kv-pool-mb 1", "not paged (--kv-block 0)");
    char cmd[64];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    if (!lp_check_failures) printf("engine kv wire: all passed\n");
    return CHECK_DONE();
}
