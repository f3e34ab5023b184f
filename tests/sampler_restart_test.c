/* sampler_restart_test.c - sampler-svc killed in the middle of generations
 * and started again: each session reopened with SamplerOpen.generated_ids
 * (and mirostat_mu) goes on with the tokens and the text pieces an
 * undisturbed session gives.
 *
 *   sampler_restart_test SAMPLER_SVC MODEL
 *
 * This test is the coordinator, over a real ipc:// socket, rows inline.
 * A live swap comes first (so the restarted sampler must also bring back
 * its strategy, from --state-file).  Then, for greedy, seeded temperature
 * with top-k/top-p/min-p, penalties and DRY, XTC, mirostat v1 and v2:
 * sessions opened fresh and sampled N times (the reference); sessions
 * sampled k times (k differs per session, 0 included), the sampler
 * SIGKILLed and started again, the sessions reopened with their first k
 * tokens and sampled N - k times.  Tokens, pieces and strategy versions
 * must be the reference's.  The rows depend on each session's history,
 * and three of them force the bytes of U+2019 (E2 80 99), so that a kill
 * between them leaves a character half-decoded: the reopened decoder must
 * hold the first bytes back without sending them again.
 *
 * MODEL is stories260K.gguf: a llama SPM vocabulary with byte tokens. */
#include "error.h"
#include "frame.h"
#include "gguf.h"
#include "hello.h"

#include "check.h"
#include "sp-json.h"
#include "svc-test-util.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#define REPLY_MS 10000
#define N 24          /* tokens per session */
#define N_SESS 14     /* sessions of each run */
#define BYTE_AT 6     /* the steps that force E2, 80, 99 */

/* ---- services and sockets ------------------------------------------------- */

static int ask(void *sock, Lmpipe__Msg *m, uint64_t id, const void *raw, size_t raw_len,
               int timeout_ms, lp_frame_t *f)
{
    memset(f, 0, sizeof(*f));
    m->id = id;
    if (lp_frame_send(sock, NULL, 0, m, raw, raw_len)) return -1;
    zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
    while (zmq_poll(&it, 1, timeout_ms) == 1) {
        if (lp_frame_recv(sock, false, f) == 0 && f->msg->id == id) return 0;
        lp_frame_clear(f);
    }
    return -1;
}

static uint64_t next_id = 1;

/* Say hello as ROLE_COORDINATOR; retries while the service loads. */
static int hello(void *sock, uint32_t *n_vocab)
{
    Lmpipe__Hello h;
    lp_hello_init(&h, LMPIPE__ROLE__ROLE_COORDINATOR);
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.body_case = LMPIPE__MSG__BODY_HELLO;
    m.hello = &h;
    for (int i = 0; i < 100; i++) {
        lp_frame_t f;
        if (ask(sock, &m, next_id++, NULL, 0, 200, &f) == 0) {
            int rc = f.msg->body_case == LMPIPE__MSG__BODY_HELLO ? 0 : -1;
            if (!rc) *n_vocab = f.msg->hello->n_vocab;
            lp_frame_clear(&f);
            return rc;
        }
    }
    return -1;
}

static void *connect_to(void *ctx, const char *ep)
{
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_connect(s, ep);
    return s;
}

static const char *err_of(const lp_frame_t *f)
{
    return f->msg->body_case == LMPIPE__MSG__BODY_ERROR ? f->msg->error->message : "other answer";
}

/* ---- sessions -------------------------------------------------------------- */

static const char *const params[] = {
    "{\"temperature\":0}",
    "{\"seed\":5,\"temperature\":0.9,\"top_k\":40,\"top_p\":0.9,\"min_p\":0.02}",
    "{\"seed\":6,\"temperature\":1.1,\"repeat_penalty\":1.3,\"repeat_last_n\":16,"
    "\"frequency_penalty\":0.4,\"presence_penalty\":0.3,\"dry_multiplier\":0.8,"
    "\"dry_allowed_length\":1}",
    "{\"seed\":7,\"temperature\":1,\"xtc_probability\":0.5,\"xtc_threshold\":0.05}",
    "{\"seed\":8,\"temperature\":1,\"mirostat\":1,\"mirostat_tau\":4,\"mirostat_eta\":0.3}",
    "{\"seed\":9,\"temperature\":1,\"mirostat\":2,\"mirostat_tau\":3,\"mirostat_eta\":0.2}",
    "{\"seed\":10,\"temperature\":0.8}", /* the swapped default: top_k 30 */
};
#define N_PARAMS (sizeof(params) / sizeof(params[0]))
/* tokens before the kill, per session: around the forced bytes, and 0 */
static const int ks[N_SESS] = {0, 1, BYTE_AT, BYTE_AT + 1, BYTE_AT + 2, 13, N - 1,
                               BYTE_AT + 1, 3, BYTE_AT + 2, 9, BYTE_AT + 1, BYTE_AT, 20};

static const int32_t prompt[] = {1, 300, 263, 411}; /* BOS and three pieces */

typedef struct sess {
    const char *params;
    int32_t tok[N];
    char piece[N][16];
    size_t n_piece[N];
    uint64_t version[N];
    bool has_mu[N];
    float mu[N];
    int n; /* sampled so far */
} sess_t;

static int32_t byte_tok[3]; /* <0xE2> <0x80> <0x99> */

/* The row of a session's next step: a shape of its last tokens, plus the
 * forced bytes. */
static void make_row(const sess_t *s, float *row, int32_t nv)
{
    int32_t a = s->n ? s->tok[s->n - 1] : prompt[3], b = s->n > 1 ? s->tok[s->n - 2] : prompt[2];
    for (int32_t i = 0; i < nv; i++)
        row[i] = 2.5f * sinf(0.37f * (float)i + 0.11f * (float)(a * 7 + b)) -
                 0.02f * (float)((i * 13 + a) % 29);
    row[(a * 5 + 3) % nv] += 2.0f;
    row[b % nv] += 1.5f; /* repeats, for the penalties and DRY */
    /* byte tokens only where forced: a stray lead byte would swallow them */
    for (int32_t i = 3; i < 259 && i < nv; i++) row[i] -= 30.0f;
    if (s->n >= BYTE_AT && s->n < BYTE_AT + 3) row[byte_tok[s->n - BYTE_AT]] += 60.0f;
}

static int open_session(void *sock, uint64_t session, const sess_t *s, bool reopen)
{
    Lmpipe__SamplerOpen o = LMPIPE__SAMPLER_OPEN__INIT;
    o.session = session;
    o.params = sp_json(s->params);
    o.prompt_ids = (int32_t *)prompt;
    o.n_prompt_ids = sizeof(prompt) / sizeof(prompt[0]);
    o.detok = true;
    if (reopen) {
        o.generated_ids = (int32_t *)s->tok;
        o.n_generated_ids = (size_t)s->n;
        if (s->n > 0 && s->has_mu[s->n - 1]) {
            o.has_mirostat_mu = true;
            o.mirostat_mu = s->mu[s->n - 1];
        }
    }
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.body_case = LMPIPE__MSG__BODY_SAMPLER_OPEN;
    m.sampler_open = &o;
    lp_frame_t f;
    int rc = ask(sock, &m, next_id++, NULL, 0, REPLY_MS, &f);
    if (!rc && f.msg->body_case != LMPIPE__MSG__BODY_SAMPLER_OPEN) {
        fprintf(stderr, "sampler_open %llu: %s\n", (unsigned long long)session, err_of(&f));
        rc = -1;
    }
    lp_frame_clear(&f);
    return rc;
}

static int sample(void *sock, uint64_t session, sess_t *s, float *row, int32_t nv)
{
    make_row(s, row, nv);
    Lmpipe__SampleItem it = LMPIPE__SAMPLE_ITEM__INIT, *its[] = {&it};
    it.session = session;
    Lmpipe__SampleRequest sr = LMPIPE__SAMPLE_REQUEST__INIT;
    sr.items = its;
    sr.n_items = 1;
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.body_case = LMPIPE__MSG__BODY_SAMPLE;
    m.sample = &sr;
    lp_frame_t f;
    if (ask(sock, &m, next_id++, row, (size_t)nv * sizeof(float), REPLY_MS, &f)) return -1;
    int rc = -1;
    if (f.msg->body_case == LMPIPE__MSG__BODY_SAMPLE_REPLY && f.msg->sample_reply->n_results == 1) {
        const Lmpipe__SampleResult *r = f.msg->sample_reply->results[0];
        if (r->token >= 0 && r->piece.len < sizeof(s->piece[0])) {
            int t = s->n++;
            s->tok[t] = r->token;
            memcpy(s->piece[t], r->piece.data, r->piece.len);
            s->n_piece[t] = r->piece.len;
            s->version[t] = r->strategy_version;
            s->has_mu[t] = r->has_mirostat_mu;
            s->mu[t] = r->mirostat_mu;
            rc = 0;
        } else {
            fprintf(stderr, "session %llu: %s\n", (unsigned long long)session,
                    r->error ? r->error : "piece too long");
        }
    } else {
        fprintf(stderr, "session %llu: %s\n", (unsigned long long)session, err_of(&f));
    }
    lp_frame_clear(&f);
    return rc;
}

static int control(void *sock, const char *json)
{
    Lmpipe__SamplerControl c = LMPIPE__SAMPLER_CONTROL__INIT;
    c.json = (char *)json;
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.body_case = LMPIPE__MSG__BODY_SAMPLER_CONTROL;
    m.sampler_control = &c;
    lp_frame_t f;
    if (ask(sock, &m, next_id++, NULL, 0, REPLY_MS, &f)) return -1;
    int rc = f.msg->body_case == LMPIPE__MSG__BODY_SAMPLER_CONTROL_REPLY &&
                     f.msg->sampler_control_reply->ok ? 0 : -1;
    lp_frame_clear(&f);
    return rc;
}

static int32_t token_id(const lp_gguf_t *g, const char *text)
{
    const lp_gguf_str_t *s;
    uint64_t n;
    if (lp_gguf_get_str_arr(g, "tokenizer.ggml.tokens", &s, &n)) return -1;
    for (uint64_t i = 0; i < n; i++)
        if (s[i].len == strlen(text) && !memcmp(s[i].ptr, text, s[i].len)) return (int32_t)i;
    return -1;
}

/* ---- the test ------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: sampler_restart_test SAMPLER_SVC MODEL\n");
        return 2;
    }
    const char *svc = argv[1], *model = argv[2];
    lp_gguf_t *g;
    if (lp_gguf_open(model, &g)) {
        fprintf(stderr, "%s\n", lp_error_msg());
        return 1;
    }
    byte_tok[0] = token_id(g, "<0xE2>");
    byte_tok[1] = token_id(g, "<0x80>");
    byte_tok[2] = token_id(g, "<0x99>");
    lp_gguf_destroy(&g);
    if (byte_tok[0] < 0 || byte_tok[1] < 0 || byte_tok[2] < 0) {
        fprintf(stderr, "%s: no byte tokens <0xE2> <0x80> <0x99>\n", model);
        return 1;
    }
    char dir[] = "/tmp/lmpipe-restart-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char ep[128], state[128];
    snprintf(ep, sizeof(ep), "ipc://%s/sampler.sock", dir);
    snprintf(state, sizeof(state), "%s/state.json", dir);
    char *args[] = {(char *)svc, "--model", (char *)model, "--endpoint", ep, "--no-shm",
                    "--state-file", state, NULL};
    pid_t pid = test_spawn(args);
    void *ctx = zmq_ctx_new();
    void *sock = connect_to(ctx, ep);
    uint32_t nv = 0;
    float *row = NULL;
    static sess_t ref[N_SESS], got[N_SESS];
    if (hello(sock, &nv) || nv == 0 || !(row = malloc(nv * sizeof(float)))) {
        CHECK(0, "no hello from %s", svc);
        goto out;
    }
    CHECK(control(sock, "{\"op\":\"set\",\"params\":{\"top_k\":30}}") == 0, "live swap refused");

    /* the reference: undisturbed sessions 1..N_SESS */
    for (int i = 0; i < N_SESS; i++) {
        ref[i].params = got[i].params = params[i % N_PARAMS];
        if (open_session(sock, 1 + (uint64_t)i, &ref[i], false)) {
            CHECK(0, "open %d", i);
            goto out;
        }
        for (int t = 0; t < N; t++)
            if (sample(sock, 1 + (uint64_t)i, &ref[i], row, (int32_t)nv)) {
                CHECK(0, "reference session %d, token %d", i, t);
                goto out;
            }
    }
    /* k tokens each, then SIGKILL and a new sampler */
    for (int i = 0; i < N_SESS; i++) {
        if (open_session(sock, 100 + (uint64_t)i, &got[i], false)) {
            CHECK(0, "open %d", i);
            goto out;
        }
        for (int t = 0; t < ks[i]; t++)
            if (sample(sock, 100 + (uint64_t)i, &got[i], row, (int32_t)nv)) {
                CHECK(0, "session %d, token %d before the kill", i, t);
                goto out;
            }
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    pid = test_spawn(args);
    if (hello(sock, &nv)) {
        CHECK(0, "no hello from the restarted sampler");
        goto out;
    }
    for (int i = 0; i < N_SESS; i++) {
        if (open_session(sock, 100 + (uint64_t)i, &got[i], true)) {
            CHECK(0, "reopen %d", i);
            goto out;
        }
        while (got[i].n < N)
            if (sample(sock, 100 + (uint64_t)i, &got[i], row, (int32_t)nv)) {
                CHECK(0, "session %d, token %d after the restart", i, got[i].n);
                goto out;
            }
    }

    /* the same tokens, pieces and versions as the undisturbed sessions */
    int n_diff_tok = 0, n_diff_piece = 0, n_held = 0;
    for (int i = 0; i < N_SESS; i++) {
        for (int t = 0; t < N; t++) {
            bool same = got[i].tok[t] == ref[i].tok[t];
            n_diff_tok += !same;
            CHECK(same, "%s, killed after %d: token %d is %d, not %d", ref[i].params, ks[i], t,
                  got[i].tok[t], ref[i].tok[t]);
            if (!same) break;
            same = got[i].n_piece[t] == ref[i].n_piece[t] &&
                   !memcmp(got[i].piece[t], ref[i].piece[t], ref[i].n_piece[t]);
            n_diff_piece += !same;
            CHECK(same, "%s, killed after %d: piece %d is \"%.*s\", not \"%.*s\"", ref[i].params,
                  ks[i], t, (int)got[i].n_piece[t], got[i].piece[t], (int)ref[i].n_piece[t],
                  ref[i].piece[t]);
            CHECK(got[i].version[t] == ref[i].version[t] && ref[i].version[t] == 2,
                  "%s: token %d of strategy version %llu, the reference's %llu (the swap made 2)",
                  ref[i].params, t, (unsigned long long)got[i].version[t],
                  (unsigned long long)ref[i].version[t]);
        }
        /* the forced bytes came, as one character after the last of them */
        bool bytes = ref[i].tok[BYTE_AT] == byte_tok[0] && ref[i].tok[BYTE_AT + 2] == byte_tok[2];
        CHECK(bytes && ref[i].n_piece[BYTE_AT] == 0 &&
                  !strcmp(ref[i].piece[BYTE_AT + 2], "\xE2\x80\x99"),
              "%s: the forced bytes did not make U+2019 (the test's rows are wrong)", ref[i].params);
        n_held += ks[i] > BYTE_AT && ks[i] < BYTE_AT + 3;
    }
    CHECK(n_held >= 4, "too few kills inside the character");
    printf("%d sessions reopened after a SIGKILL (%d inside U+2019): %d tokens and %d pieces "
           "differ\n", N_SESS, n_held, n_diff_tok, n_diff_piece);
out:
    free(row);
    zmq_close(sock);
    zmq_ctx_term(ctx);
    if (pid > 0) {
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
    }
    char cmd[64];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    sp_free_all();
    return CHECK_DONE();
}
