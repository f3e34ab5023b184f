/* sampler_wire_test.c - sampler-svc (and engine-svc) over a real ipc://
 * socket, driven by hand by this test as their coordinator, for the cases
 * the coordinator itself never produces on purpose:
 *
 *   sampler_wire_test detok-end SAMPLER_SVC MODEL
 *       a session with detok and detok_end_ids = {EOS} samples the byte
 *       token <0xE2> (the lead byte of a three-byte character), then EOS,
 *       then (a row chained past the end) <0x41> "A".  The text of the
 *       tokens up to EOS plus SamplerClose.flushed must be U+FFFD (the
 *       unfinished character, as the decoder's contract says), and the
 *       token after EOS must bring no text: fed to the decoder, it would
 *       flush the held-back byte into its own piece, which the coordinator
 *       drops, and the text would end without the U+FFFD.
 *   sampler_wire_test refused-step SAMPLER_SVC ENGINE_SVC MODEL
 *       the sampler waits (SampleRequest.wait) on a ring slot that a quiet
 *       step is to fill; the engine refuses that step before its checks
 *       (rows given, but inline_rows set).  The sampler must answer within
 *       5 s with the item failed (the engine fails the named slots), not
 *       after its 300 s limit.  A SampleRequest naming another ring is
 *       refused at once with that ring's name.  Then a good quiet step on
 *       the same slot is sampled: the slot was handed back.
 *
 * MODEL is stories260K.gguf: a llama SPM vocabulary with byte tokens. */
#include "error.h"
#include "frame.h"
#include "gguf.h"
#include "hello.h"

#include "check.h"
#include "sp-json.h"
#include "svc-test-util.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#define REPLY_MS 5000 /* far below the sampler's 300 s ring wait */

/* ---- services and sockets ------------------------------------------------- */

/* Send m (and a raw frame, may be NULL) as message `id`; wait up to
 * timeout_ms for the answer with that id.  0 and *f set, or -1 (*f
 * cleared) when none came. */
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

/* Say hello as ROLE_COORDINATOR (the services' controller), naming the
 * ring to a sampler when shm_name is given; retries while the service
 * loads.  The service's hello stays in *f. */
static int hello(void *sock, const char *shm_name, lp_frame_t *f)
{
    Lmpipe__Hello h;
    lp_hello_init(&h, LMPIPE__ROLE__ROLE_COORDINATOR);
    if (shm_name) h.shm_name = (char *)shm_name;
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.body_case = LMPIPE__MSG__BODY_HELLO;
    m.hello = &h;
    for (int i = 0; i < 100; i++) {
        if (ask(sock, &m, 1, NULL, 0, 200, f) == 0) {
            if (f->msg->body_case == LMPIPE__MSG__BODY_HELLO) return 0;
            fprintf(stderr, "hello: %s\n", f->msg->body_case == LMPIPE__MSG__BODY_ERROR
                                               ? f->msg->error->message : "not a hello");
            lp_frame_clear(f);
            return -1;
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

/* ---- sampler messages ------------------------------------------------------ */

static int open_session(void *sock, uint64_t session, bool detok, int32_t *end_ids, size_t n_end)
{
    Lmpipe__SamplerOpen o = LMPIPE__SAMPLER_OPEN__INIT;
    o.session = session;
    o.params = sp_json("{\"temperature\": 0}"); /* greedy: the row's maximum */
    o.detok = detok;
    o.detok_end_ids = end_ids;
    o.n_detok_end_ids = n_end;
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.body_case = LMPIPE__MSG__BODY_SAMPLER_OPEN;
    m.sampler_open = &o;
    lp_frame_t f;
    int rc = ask(sock, &m, 100 + session, NULL, 0, REPLY_MS, &f);
    if (!rc && f.msg->body_case != LMPIPE__MSG__BODY_SAMPLER_OPEN) {
        fprintf(stderr, "sampler_open: %s\n", f.msg->body_case == LMPIPE__MSG__BODY_ERROR
                                                  ? f.msg->error->message : "other answer");
        rc = -1;
    }
    lp_frame_clear(&f);
    return rc;
}

/* A token id by its text in the model's vocabulary; -1 when absent. */
static int32_t token_id(const lp_gguf_t *g, const char *text)
{
    const lp_gguf_str_t *s;
    uint64_t n;
    if (lp_gguf_get_str_arr(g, "tokenizer.ggml.tokens", &s, &n)) return -1;
    for (uint64_t i = 0; i < n; i++)
        if (s[i].len == strlen(text) && !memcmp(s[i].ptr, text, s[i].len)) return (int32_t)i;
    return -1;
}

/* ---- detok-end ----------------------------------------------------------- */

/* Sample one inline row whose maximum is `want`; the piece goes to
 * piece/n_piece (NUL-terminated, at most cap - 1 bytes). */
static void sample_inline(void *sock, uint64_t id, float *row, int32_t n_vocab, int32_t want,
                          char *piece, size_t cap, size_t *n_piece)
{
    for (int32_t i = 0; i < n_vocab; i++) row[i] = 0.0f;
    row[want] = 10.0f;
    Lmpipe__SampleItem it = LMPIPE__SAMPLE_ITEM__INIT, *its[] = {&it};
    it.session = 1;
    it.row = 0;
    Lmpipe__SampleRequest sr = LMPIPE__SAMPLE_REQUEST__INIT;
    sr.items = its;
    sr.n_items = 1;
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.body_case = LMPIPE__MSG__BODY_SAMPLE;
    m.sample = &sr;
    lp_frame_t f;
    *n_piece = 0;
    piece[0] = 0;
    if (ask(sock, &m, id, row, (size_t)n_vocab * sizeof(float), REPLY_MS, &f)) {
        CHECK(0, "token %d: no SampleReply", want);
        return;
    }
    if (f.msg->body_case != LMPIPE__MSG__BODY_SAMPLE_REPLY || f.msg->sample_reply->n_results != 1) {
        CHECK(0, "token %d: answer %s", want, f.msg->body_case == LMPIPE__MSG__BODY_ERROR
                                                 ? f.msg->error->message : "not one result");
    } else {
        const Lmpipe__SampleResult *r = f.msg->sample_reply->results[0];
        CHECK(r->token == want, "sampled %d, the row's maximum is %d (%s)", r->token, want,
              r->error ? r->error : "");
        *n_piece = r->piece.len < cap - 1 ? r->piece.len : cap - 1;
        if (*n_piece) memcpy(piece, r->piece.data, *n_piece);
        piece[*n_piece] = 0;
    }
    lp_frame_clear(&f);
}

static void test_detok_end(const char *sampler, const char *model, const char *dir)
{
    lp_gguf_t *g;
    if (lp_gguf_open(model, &g)) {
        CHECK(0, "open %s", model);
        return;
    }
    uint32_t eos;
    CHECK_RC(lp_gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &eos), 0);
    int32_t lead = token_id(g, "<0xE2>"), after = token_id(g, "<0x41>");
    lp_gguf_destroy(&g);
    CHECK(lead >= 0 && after >= 0, "byte tokens <0xE2> %d, <0x41> %d", lead, after);
    if (lead < 0 || after < 0) return;

    char ep[256];
    snprintf(ep, sizeof(ep), "ipc://%s/samp", dir);
    char *argv[] = {(char *)sampler, "--model", (char *)model, "--endpoint", ep, "--no-shm", NULL};
    pid_t pid = test_spawn(argv);
    void *ctx = zmq_ctx_new(), *sock = connect_to(ctx, ep);
    lp_frame_t hf;
    int rc = hello(sock, NULL, &hf);
    CHECK(rc == 0, "no hello from sampler-svc");
    int32_t n_vocab = rc ? 0 : (int32_t)hf.msg->hello->n_vocab;
    CHECK(rc || hf.msg->hello->detok, "the sampler offers no detok");
    if (!rc) lp_frame_clear(&hf);
    float *row = n_vocab > 0 ? malloc((size_t)n_vocab * sizeof(float)) : NULL;
    int32_t end_ids[] = {(int32_t)eos};
    if (row && open_session(sock, 1, true, end_ids, 1) == 0) {
        char text[64] = "", piece[64];
        size_t n_text = 0, n;
        sample_inline(sock, 10, row, n_vocab, lead, piece, sizeof(piece), &n);
        CHECK(n == 0, "<0xE2> alone gave %zu bytes of text", n);
        memcpy(text + n_text, piece, n);
        n_text += n;
        sample_inline(sock, 11, row, n_vocab, (int32_t)eos, piece, sizeof(piece), &n);
        memcpy(text + n_text, piece, n);
        n_text += n;
        /* past the end: a chained step's row */
        sample_inline(sock, 12, row, n_vocab, after, piece, sizeof(piece), &n);
        CHECK(n == 0, "the token after EOS brought text: '%s'", piece);

        Lmpipe__SamplerClose c = LMPIPE__SAMPLER_CLOSE__INIT;
        c.session = 1;
        c.flush = true;
        Lmpipe__Msg m = LMPIPE__MSG__INIT;
        m.body_case = LMPIPE__MSG__BODY_SAMPLER_CLOSE;
        m.sampler_close = &c;
        lp_frame_t f;
        if (ask(sock, &m, 13, NULL, 0, REPLY_MS, &f) == 0 &&
            f.msg->body_case == LMPIPE__MSG__BODY_SAMPLER_CLOSE) {
            const ProtobufCBinaryData *fl = &f.msg->sampler_close->flushed;
            if (fl->len < sizeof(text) - n_text) {
                memcpy(text + n_text, fl->data, fl->len);
                n_text += fl->len;
            }
        } else {
            CHECK(0, "no SamplerClose answer");
        }
        lp_frame_clear(&f);
        /* the text ends with the unfinished character: U+FFFD, EF BF BD */
        CHECK(n_text == 3 && !memcmp(text, "\xEF\xBF\xBD", 3),
              "text of <0xE2> EOS is %zu bytes '%.*s', want U+FFFD", n_text, (int)n_text, text);
    } else {
        CHECK(0, "no session");
    }
    free(row);
    zmq_close(sock);
    zmq_ctx_term(ctx);
    test_stop(pid, "sampler-svc");
}

/* ---- refused-step ---------------------------------------------------------- */

/* A SampleRequest that waits on ring row {slot, seq} of `ring`. */
static void send_wait(void *sock, uint64_t id, const char *ring, uint32_t slot, uint64_t seq)
{
    Lmpipe__RowRef ref = LMPIPE__ROW_REF__INIT;
    ref.slot = slot;
    ref.seq = seq;
    Lmpipe__SampleItem it = LMPIPE__SAMPLE_ITEM__INIT, *its[] = {&it};
    it.session = 1;
    it.ref = &ref;
    Lmpipe__SampleRequest sr = LMPIPE__SAMPLE_REQUEST__INIT;
    sr.items = its;
    sr.n_items = 1;
    sr.wait = true;
    sr.ring = (char *)ring;
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.id = id;
    m.body_case = LMPIPE__MSG__BODY_SAMPLE;
    m.sample = &sr;
    lp_frame_send(sock, NULL, 0, &m, NULL, 0);
}

/* A quiet one-token step of sequence 0 from position 0 whose one row goes
 * to {slot, seq} of `ring`; with inline_rows the engine must refuse it. */
static void send_step(void *sock, uint64_t id, const char *ring, uint32_t slot, uint64_t seq,
                      bool inline_rows)
{
    Lmpipe__RowRef ref = LMPIPE__ROW_REF__INIT, *refs[] = {&ref};
    ref.slot = slot;
    ref.seq = seq;
    int32_t tok = 1; /* BOS */
    Lmpipe__StepSeq q = LMPIPE__STEP_SEQ__INIT, *qs[] = {&q};
    q.seq_id = 0;
    q.pos = 0;
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
    sr.inline_rows = inline_rows;
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.id = id;
    m.body_case = LMPIPE__MSG__BODY_STEP;
    m.step = &sr;
    lp_frame_send(sock, NULL, 0, &m, NULL, 0);
}

/* The answer with this id within REPLY_MS; 0 and *f set, or -1. */
static int answer(void *sock, uint64_t id, lp_frame_t *f)
{
    memset(f, 0, sizeof(*f));
    zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
    while (zmq_poll(&it, 1, REPLY_MS) == 1) {
        if (lp_frame_recv(sock, false, f) == 0 && f->msg->id == id) return 0;
        lp_frame_clear(f);
    }
    return -1;
}

static void test_refused_step(const char *sampler, const char *engine, const char *model,
                              const char *dir)
{
    char eep[256], sep[256];
    snprintf(eep, sizeof(eep), "ipc://%s/eng", dir);
    snprintf(sep, sizeof(sep), "ipc://%s/samp", dir);
    char *eargv[] = {(char *)engine, "--model", (char *)model, "--endpoint", eep, "--threads", "1",
                     "--shm-slots", "4", NULL};
    char *sargv[] = {(char *)sampler, "--model", (char *)model, "--endpoint", sep, NULL};
    pid_t epid = test_spawn(eargv), spid = test_spawn(sargv);
    void *ctx = zmq_ctx_new(), *es = connect_to(ctx, eep), *ss = connect_to(ctx, sep);
    char ring[128] = "";
    lp_frame_t f;
    if (hello(es, NULL, &f) == 0) {
        if (f.msg->hello->shm_name) snprintf(ring, sizeof(ring), "%s", f.msg->hello->shm_name);
        lp_frame_clear(&f);
    }
    CHECK(ring[0], "the engine's hello names no ring");
    bool shm_ok = false;
    if (ring[0] && hello(ss, ring, &f) == 0) {
        shm_ok = f.msg->hello->shm_ok;
        lp_frame_clear(&f);
    }
    CHECK(shm_ok, "the sampler did not open ring %s", ring);
    if (!shm_ok || open_session(ss, 1, false, NULL, 0) != 0) goto out;

    /* A wait on another ring than the open one: refused at once, naming it. */
    send_wait(ss, 20, "/lmpipe-not-this-ring", 0, 77);
    if (answer(ss, 20, &f) == 0) {
        CHECK(f.msg->body_case == LMPIPE__MSG__BODY_ERROR && strstr(f.msg->error->message,
                                                                    "/lmpipe-not-this-ring"),
              "a wait on another ring: %s", f.msg->body_case == LMPIPE__MSG__BODY_ERROR
                                                ? f.msg->error->message : "not an Error");
        lp_frame_clear(&f);
    } else {
        CHECK(0, "no answer within %d ms to a wait on another ring", REPLY_MS);
    }

    /* The refused quiet step: the sampler's wait must end with the item
     * failed, at once. */
    uint64_t seq = 0x5eed0001;
    send_wait(ss, 21, ring, 0, seq);
    send_step(es, 22, ring, 0, seq, true);
    if (answer(es, 22, &f) == 0) {
        CHECK(f.msg->body_case == LMPIPE__MSG__BODY_ERROR, "the step with rows and inline_rows "
              "was not refused");
        lp_frame_clear(&f);
    } else {
        CHECK(0, "no answer from the engine to the refused step");
    }
    if (answer(ss, 21, &f) == 0) {
        const Lmpipe__SampleReply *r = f.msg->sample_reply;
        CHECK(f.msg->body_case == LMPIPE__MSG__BODY_SAMPLE_REPLY && r->n_results == 1 &&
                  r->results[0]->token == -1 && r->results[0]->error && r->results[0]->error[0] &&
                  !r->results[0]->engine_lost,
              "the wait on the refused step's slot did not fail (or said the engine was lost)");
        lp_frame_clear(&f);
    } else {
        CHECK(0, "the sampler still waits on the refused step's slot after %d ms", REPLY_MS);
    }

    /* The same slot in a good quiet step: sampled (the failed slot was
     * handed back). */
    send_wait(ss, 23, ring, 0, seq + 1);
    send_step(es, 24, ring, 0, seq + 1, false);
    if (answer(ss, 23, &f) == 0) {
        const Lmpipe__SampleReply *r = f.msg->sample_reply;
        CHECK(f.msg->body_case == LMPIPE__MSG__BODY_SAMPLE_REPLY && r->n_results == 1 &&
                  r->results[0]->token >= 0,
              "the good step's row was not sampled: %s",
              f.msg->body_case == LMPIPE__MSG__BODY_SAMPLE_REPLY && r->n_results == 1 &&
                      r->results[0]->error ? r->results[0]->error : "");
        lp_frame_clear(&f);
    } else {
        CHECK(0, "no sample of the good step's row");
    }

    /* The engine dies while the sampler waits on a row it was to write:
     * the item fails at once, marked engine_lost, so that the coordinator
     * re-drives the request instead of failing it. */
    send_wait(ss, 25, ring, 1, seq + 2);
    usleep(100000);
    kill(epid, SIGKILL);
    waitpid(epid, NULL, 0);
    epid = -1;
    if (answer(ss, 25, &f) == 0) {
        const Lmpipe__SampleReply *r = f.msg->sample_reply;
        CHECK(f.msg->body_case == LMPIPE__MSG__BODY_SAMPLE_REPLY && r->n_results == 1 &&
                  r->results[0]->token == -1 && r->results[0]->engine_lost && r->results[0]->error &&
                  strstr(r->results[0]->error, "has exited"),
              "a wait on a dead engine's row: %s",
              f.msg->body_case == LMPIPE__MSG__BODY_SAMPLE_REPLY && r->n_results == 1 && r->results[0]->error
                  ? r->results[0]->error : "no item error");
        lp_frame_clear(&f);
    } else {
        CHECK(0, "the sampler still waits on a dead engine's row after %d ms", REPLY_MS);
    }
out:
    zmq_close(es);
    zmq_close(ss);
    zmq_ctx_term(ctx);
    test_stop(spid, "sampler-svc");
    test_stop(epid, "engine-svc");
}

int main(int argc, char **argv)
{
    bool detok = argc == 4 && !strcmp(argv[1], "detok-end");
    bool step = argc == 5 && !strcmp(argv[1], "refused-step");
    if (!detok && !step) {
        fprintf(stderr, "usage: sampler_wire_test detok-end SAMPLER_SVC MODEL\n"
                        "       sampler_wire_test refused-step SAMPLER_SVC ENGINE_SVC MODEL\n");
        return 2;
    }
    char dir[] = "/tmp/lmpipe-wire-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    if (detok) test_detok_end(argv[2], argv[3], dir);
    else test_refused_step(argv[2], argv[3], argv[4], dir);
    char cmd[64];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    sp_free_all();
    return CHECK_DONE();
}
