/* frame_test.c - framing and hello: golden frames (tests/frames), a round
 * trip with a raw frame, malformed messages of every shape, and the hello
 * checks, including the vocabulary facts of a real model. */
#include "frame.h"
#include "hello.h"
#include "vocab-facts.h"

#include "../tests/check.h"
#include "error.h"
#include "gguf.h"

#include <stdlib.h>
#include <string.h>

static const char *frames_dir;

static size_t read_hex(const char *name, uint8_t *out, size_t cap)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", frames_dir, name);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (!f) return 0;
    size_t n = 0;
    unsigned v;
    while (n < cap && fscanf(f, "%x", &v) == 1) out[n++] = (uint8_t)v;
    fclose(f);
    return n;
}

static void check_golden(const char *name, const Lmpipe__Msg *m)
{
    uint8_t want[256], got[256];
    size_t n = read_hex(name, want, sizeof(want));
    size_t len = lmpipe__msg__get_packed_size(m);
    CHECK(len == n);
    if (len != n || len > sizeof(got)) return;
    lmpipe__msg__pack(m, got);
    CHECK(memcmp(got, want, n) == 0);
    if (memcmp(got, want, n)) {
        for (size_t i = 0; i < n; i++) fprintf(stderr, "%02x ", got[i]);
        fprintf(stderr, " <- %s\n", name);
    }
}

static void test_golden(void)
{
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    Lmpipe__Hello h = LMPIPE__HELLO__INIT;
    h.protocol = "lmpipe";
    h.version = 1;
    h.role = LMPIPE__ROLE__ROLE_ENGINE;
    m.id = 1;
    m.body_case = LMPIPE__MSG__BODY_HELLO;
    m.hello = &h;
    check_golden("hello-engine.hex", &m);

    uint8_t buf[256];
    size_t n = read_hex("hello-engine.hex", buf, sizeof(buf));
    Lmpipe__Msg *u = lmpipe__msg__unpack(NULL, n, buf);
    CHECK(u && u->body_case == LMPIPE__MSG__BODY_HELLO && u->id == 1);
    if (u) {
        CHECK(!strcmp(u->hello->protocol, "lmpipe") && u->hello->role == LMPIPE__ROLE__ROLE_ENGINE);
        CHECK_RC(lp_hello_check(u->hello, LMPIPE__ROLE__ROLE_ENGINE), 0);
        CHECK_RC(lp_hello_check(u->hello, LMPIPE__ROLE__ROLE_SAMPLER), LP_ERR(EPROTO));
        lmpipe__msg__free_unpacked(u, NULL);
    }

    Lmpipe__Msg s = LMPIPE__MSG__INIT;
    Lmpipe__StepRequest step = LMPIPE__STEP_REQUEST__INIT;
    Lmpipe__StepSeq seq = LMPIPE__STEP_SEQ__INIT;
    Lmpipe__StepSeq *seqs[1] = {&seq};
    int32_t toks[2] = {1, 150};
    seq.seq_id = 2;
    seq.pos = 5;
    seq.n_tokens = 2;
    seq.tokens = toks;
    seq.n_logits = 1;
    step.n_seqs = 1;
    step.seqs = seqs;
    s.id = 300;
    s.body_case = LMPIPE__MSG__BODY_STEP;
    s.step = &step;
    check_golden("step-one.hex", &s);
}

static void test_hello(const char *model)
{
    Lmpipe__Hello a, b;
    lp_hello_init(&a, LMPIPE__ROLE__ROLE_ENGINE);
    lp_hello_init(&b, LMPIPE__ROLE__ROLE_TOKENIZER);
    CHECK(strchr(lp_host_id(), '/') != NULL);
    CHECK_RC(lp_hello_check(&a, LMPIPE__ROLE__ROLE_ENGINE), 0);
    a.version = 2;
    CHECK_RC(lp_hello_check(&a, LMPIPE__ROLE__ROLE_UNKNOWN), LP_ERR(EPROTO));
    CHECK(strstr(lp_error_msg(), "version 2") != NULL);
    a.version = 1;
    a.protocol = "http";
    CHECK_RC(lp_hello_check(&a, LMPIPE__ROLE__ROLE_UNKNOWN), LP_ERR(EPROTO));
    a.protocol = LP_PROTOCOL_NAME;

    a.model_name = "a";
    b.model_name = "b";
    a.n_tokens = 512;
    b.n_tokens = 0; /* unknown: no conflict */
    CHECK_RC(lp_hello_check_vocab(&a, &b), 0);
    b.n_tokens = 32000;
    CHECK_RC(lp_hello_check_vocab(&a, &b), LP_ERR(EPROTO));
    CHECK(strstr(lp_error_msg(), "512") && strstr(lp_error_msg(), "32000"));
    b.n_tokens = 512;
    a.vocab_hash = 1;
    b.vocab_hash = 2;
    CHECK_RC(lp_hello_check_vocab(&a, &b), LP_ERR(EPROTO));
    b.vocab_hash = 1;
    a.n_vocab = 512;
    b.n_vocab = 513;
    CHECK_RC(lp_hello_check_vocab(&a, &b), LP_ERR(EPROTO));

    /* The real model: 512 tokens; the hash is stable and not zero. */
    lp_gguf_t *g;
    CHECK_RC(lp_gguf_open(model, &g), 0);
    if (!g) return;
    uint32_t n;
    uint64_t h1, h2;
    lp_vocab_facts(g, &n, &h1);
    lp_vocab_facts(g, &n, &h2);
    CHECK(n == 512 && h1 == h2 && h1 != 0);
    lp_gguf_destroy(&g);
}

static void test_wire(void)
{
    void *ctx = zmq_ctx_new();
    void *router = zmq_socket(ctx, ZMQ_ROUTER), *dealer = zmq_socket(ctx, ZMQ_DEALER);
    CHECK(zmq_bind(router, "inproc://frame-test") == 0);
    CHECK(zmq_connect(dealer, "inproc://frame-test") == 0);
    int timeout = 2000;
    zmq_setsockopt(router, ZMQ_RCVTIMEO, &timeout, sizeof(timeout));
    zmq_setsockopt(dealer, ZMQ_RCVTIMEO, &timeout, sizeof(timeout));
    zmq_pollitem_t pr = {router, 0, ZMQ_POLLIN, 0}, pd = {dealer, 0, ZMQ_POLLIN, 0};

    /* A Msg with a raw frame, both ways. */
    float rows[6] = {1, 2, 3, 4, 5, 6};
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    Lmpipe__StatsRequest st = LMPIPE__STATS_REQUEST__INIT;
    m.id = 77;
    m.body_case = LMPIPE__MSG__BODY_STATS;
    m.stats = &st;
    CHECK_RC(lp_frame_send(dealer, NULL, 0, &m, rows, sizeof(rows)), 0);
    zmq_poll(&pr, 1, 2000);
    lp_frame_t f;
    CHECK_RC(lp_frame_recv(router, true, &f), 0);
    CHECK(f.msg && f.msg->id == 77 && f.msg->body_case == LMPIPE__MSG__BODY_STATS);
    size_t rl;
    const float *r = lp_frame_raw(&f, &rl);
    CHECK(rl == sizeof(rows) && r && r[5] == 6.0f);
    CHECK(f.peer_len > 0);
    CHECK_RC(lp_frame_send_error(router, f.peer, f.peer_len, 77, LP_ERR(EINVAL), "bad %s", "x"), 0);
    lp_frame_clear(&f);
    zmq_poll(&pd, 1, 2000);
    CHECK_RC(lp_frame_recv(dealer, false, &f), 0);
    CHECK(f.msg && f.msg->body_case == LMPIPE__MSG__BODY_ERROR && !strcmp(f.msg->error->message, "bad x"));
    CHECK(!f.has_raw);
    lp_frame_clear(&f);
    CHECK_RC(lp_frame_recv(dealer, false, &f), LP_ERR(EAGAIN));

    /* Malformed: garbage body, three frames, an empty body is a valid empty
     * Msg (proto3) and so not malformed. */
    zmq_send(dealer, "\xff\xff\xff", 3, 0);
    zmq_poll(&pr, 1, 2000);
    CHECK_RC(lp_frame_recv(router, true, &f), LP_ERR(EPROTO));
    CHECK(f.peer_len > 0 && f.msg == NULL);
    lp_frame_clear(&f);
    zmq_send(dealer, "", 0, ZMQ_SNDMORE);
    zmq_send(dealer, "a", 1, ZMQ_SNDMORE);
    zmq_send(dealer, "b", 1, 0);
    zmq_poll(&pr, 1, 2000);
    CHECK_RC(lp_frame_recv(router, true, &f), LP_ERR(EPROTO));
    lp_frame_clear(&f);
    /* A truncated length-delimited field. */
    zmq_send(dealer, "\x12\x0c\x0a", 3, 0);
    zmq_poll(&pr, 1, 2000);
    CHECK_RC(lp_frame_recv(router, true, &f), LP_ERR(EPROTO));
    lp_frame_clear(&f);
    /* A hello frame as another implementation could send it, with role 99
     * (not in the enum) and then 0 (ROLE_UNKNOWN): refused, naming the role. */
    static const char hello99[] = "\x08\x01\x12\x0c\x0a\x06lmpipe\x10\x01\x18\x63";
    static const char hello0[] = "\x08\x01\x12\x0a\x0a\x06lmpipe\x10\x01";
    const char *hellos[2] = {hello99, hello0};
    size_t hello_lens[2] = {sizeof(hello99) - 1, sizeof(hello0) - 1};
    for (int i = 0; i < 2; i++) {
        zmq_send(dealer, hellos[i], hello_lens[i], 0);
        zmq_poll(&pr, 1, 2000);
        CHECK_RC(lp_frame_recv(router, true, &f), 0);
        CHECK(f.msg && f.msg->body_case == LMPIPE__MSG__BODY_HELLO);
        if (f.msg && f.msg->body_case == LMPIPE__MSG__BODY_HELLO) {
            CHECK((int)f.msg->hello->role == (i ? 0 : 99));
            CHECK_RC(lp_hello_check(f.msg->hello, LMPIPE__ROLE__ROLE_UNKNOWN), LP_ERR(EPROTO));
            CHECK(strstr(lp_error_msg(), i ? "role 0" : "role 99") != NULL, "%s", lp_error_msg());
        }
        lp_frame_clear(&f);
    }
    /* Nothing left over. */
    CHECK_RC(lp_frame_recv(router, true, &f), LP_ERR(EAGAIN));
    lp_frame_clear(&f);
    CHECK(!strcmp(lp_msg_body_name(LMPIPE__MSG__BODY_STEP), "step"));

    zmq_close(router);
    zmq_close(dealer);
    zmq_ctx_term(ctx);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: frame_test FRAMES_DIR MODEL.gguf\n");
        return 2;
    }
    frames_dir = argv[1];
    test_golden();
    test_hello(argv[2]);
    test_wire();
    return CHECK_DONE();
}
