/* synth-test.c - lp_synth_write(): the type mix of the real shapes (the
 * layer lists of issue #6 and llama.cpp's use_more_bits rule worked out by
 * hand), the weight distribution (std 0.02 by design, norms 1), token list
 * padding, independence from the thread count, and bad options.
 * usage: synth-test SHARED_DIR TMPDIR */
#include "error.h"
#include "ggml-type.h"
#include "gguf-write.h"
#include "gguf.h"
#include "quant.h"
#include "synth.h"
#include "gguf-test-util.h"

#include <math.h>
#include <unistd.h>

static char vocab_llama[1024], vocab_qwen2[1024], tmp[1024];

static int in_list(uint32_t l, const uint32_t *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (list[i] == l) return 1;
    return 0;
}

/* ---- the Q4_K_M mix of the full-size shapes ---- */

static void test_mix(void)
{
    /* Issue #6: for TinyLlama, attn_v and ffn_down are Q6_K in layers
     * 0, 1, 4, 7, 10, 13, 16, 19, 20, 21; everything else Q4_K, output Q6_K. */
    static const uint32_t tl[] = {0, 1, 4, 7, 10, 13, 16, 19, 20, 21};
    char name[64];
    for (uint32_t l = 0; l < 22; l++) {
        int more = in_list(l, tl, sizeof(tl) / sizeof(tl[0]));
        static const char *const t6[] = {"attn_v.weight", "ffn_down.weight"};
        static const char *const t4[] = {"attn_q.weight", "attn_k.weight", "attn_output.weight",
                                         "ffn_gate.weight", "ffn_up.weight"};
        for (int k = 0; k < 2; k++) {
            snprintf(name, sizeof(name), "blk.%u.%s", l, t6[k]);
            uint32_t t = lp_synth_tensor_type("Q4_K_M", name, 2, k ? 5632 : 2048, 0, 22);
            CHECK(t == (more ? LP_TYPE_Q6_K : LP_TYPE_Q4_K), "tinyllama %s: %s", name,
                  lp_type_name(t));
        }
        for (int k = 0; k < 5; k++) {
            snprintf(name, sizeof(name), "blk.%u.%s", l, t4[k]);
            uint32_t t = lp_synth_tensor_type("Q4_K_M", name, 2, 2048, 0, 22);
            CHECK(t == LP_TYPE_Q4_K, "tinyllama %s: %s", name, lp_type_name(t));
        }
        snprintf(name, sizeof(name), "blk.%u.attn_norm.weight", l);
        CHECK(lp_synth_tensor_type("Q4_K_M", name, 1, 2048, 0, 22) == LP_TYPE_F32, "norm F32");
    }
    CHECK(lp_synth_tensor_type("Q4_K_M", "output.weight", 2, 2048, 0, 22) == LP_TYPE_Q6_K,
          "tinyllama output Q6_K");
    CHECK(lp_synth_tensor_type("Q4_K_M", "token_embd.weight", 2, 2048, 0, 22) == LP_TYPE_Q4_K,
          "tinyllama token_embd Q4_K");

    /* Qwen2.5-0.5B, 24 layers: more bits where l < 3, l >= 21, or (l - 3) % 3 == 2,
     * i.e. 0, 1, 2, 5, 8, 11, 14, 17, 20, 21, 22, 23.  Rows of 896 are no whole
     * super-block, so Q4_K falls back to Q5_0 and Q6_K to Q8_0 there, and the
     * tied embedding, being the output, is Q8_0.  ffn_down's rows are 4864. */
    static const uint32_t qw[] = {0, 1, 2, 5, 8, 11, 14, 17, 20, 21, 22, 23};
    for (uint32_t l = 0; l < 24; l++) {
        int more = in_list(l, qw, sizeof(qw) / sizeof(qw[0]));
        snprintf(name, sizeof(name), "blk.%u.attn_v.weight", l);
        uint32_t t = lp_synth_tensor_type("Q4_K_M", name, 2, 896, 1, 24);
        CHECK(t == (more ? LP_TYPE_Q8_0 : LP_TYPE_Q5_0), "qwen %s: %s", name, lp_type_name(t));
        snprintf(name, sizeof(name), "blk.%u.ffn_down.weight", l);
        t = lp_synth_tensor_type("Q4_K_M", name, 2, 4864, 1, 24);
        CHECK(t == (more ? LP_TYPE_Q6_K : LP_TYPE_Q4_K), "qwen %s: %s", name, lp_type_name(t));
        snprintf(name, sizeof(name), "blk.%u.ffn_up.weight", l);
        t = lp_synth_tensor_type("Q4_K_M", name, 2, 896, 1, 24);
        CHECK(t == LP_TYPE_Q5_0, "qwen %s: %s", name, lp_type_name(t));
    }
    CHECK(lp_synth_tensor_type("Q4_K_M", "token_embd.weight", 2, 896, 1, 24) == LP_TYPE_Q8_0,
          "qwen tied token_embd Q8_0");

    /* Other file types: Q8_0 keeps the output at Q8_0, the legacy quants give
     * it Q6_K, F16 leaves it F16. */
    CHECK(lp_synth_tensor_type("Q8_0", "output.weight", 2, 2048, 0, 22) == LP_TYPE_Q8_0, "Q8_0");
    CHECK(lp_synth_tensor_type("Q4_0", "output.weight", 2, 2048, 0, 22) == LP_TYPE_Q6_K, "Q4_0");
    CHECK(lp_synth_tensor_type("Q4_0", "blk.0.attn_v.weight", 2, 2048, 0, 22) == LP_TYPE_Q4_0,
          "Q4_0 has no mix");
    CHECK(lp_synth_tensor_type("F16", "output.weight", 2, 2048, 0, 22) == LP_TYPE_F16, "F16");
    CHECK(lp_synth_tensor_type("Q5_K_M", "blk.1.ffn_down.weight", 2, 5632, 0, 22) ==
              LP_TYPE_Q6_K, "Q5_K_M more bits");
    CHECK(lp_synth_tensor_type("Q5_K_M", "blk.2.ffn_down.weight", 2, 5632, 0, 22) ==
              LP_TYPE_Q5_K, "Q5_K_M base");
    CHECK(lp_synth_tensor_type("Q3_K_XL", "output.weight", 2, 2048, 0, 22) == UINT32_MAX,
          "unknown type");
    /* qwen35: a fused q/k/v gets more bits in the K mixes (Q5_K in Q4_K_M,
     * Q6_K in Q5_K_M); the DeltaNet convolution is never quantized */
    CHECK(lp_synth_tensor_type("Q4_K_M", "blk.0.attn_qkv.weight", 2, 1024, 1, 24) ==
              LP_TYPE_Q5_K, "Q4_K_M attn_qkv");
    CHECK(lp_synth_tensor_type("Q5_K_M", "blk.0.attn_qkv.weight", 2, 1024, 1, 24) ==
              LP_TYPE_Q6_K, "Q5_K_M attn_qkv");
    CHECK(lp_synth_tensor_type("Q8_0", "blk.0.attn_qkv.weight", 2, 1024, 1, 24) ==
              LP_TYPE_Q8_0, "Q8_0 attn_qkv");
    CHECK(lp_synth_tensor_type("Q4_K_M", "blk.0.ssm_conv1d.weight", 2, 4, 1, 24) ==
              LP_TYPE_F32, "Q4_K_M ssm_conv1d");
    CHECK(lp_synth_tensor_type("F16", "blk.0.ssm_conv1d.weight", 2, 4, 1, 24) == LP_TYPE_F32,
          "F16 ssm_conv1d");
}

/* ---- a written model ---- */

static lp_gguf_t *synth(const char *arch, const char *type, uint32_t n_vocab, int threads,
                        uint64_t seed, const char *path)
{
    lp_synth_opts_t o = {arch, "tiny", type, !strcmp(arch, "qwen2") ? vocab_qwen2 : vocab_llama,
                         seed, n_vocab, threads, 0};
    int rc = lp_synth_write(&o, path);
    CHECK(rc == 0, "synth %s %s: %s", arch, type, lp_error_msg());
    lp_gguf_t *g = NULL;
    if (!rc && lp_gguf_open(path, &g)) {
        CHECK(0, "open %s: %s", path, lp_error_msg());
        g = NULL;
    }
    return g;
}

/* Mean and standard deviation of a tensor's dequantized values. */
static void stats(const lp_gguf_tensor_t *t, double *mean, double *std, double *amax)
{
    int64_t n0 = t->ne[0], rows = t->ne[1] * t->ne[2] * t->ne[3];
    size_t rb = lp_type_row_bytes(t->type, n0);
    float *row = malloc(sizeof(float) * (size_t)n0);
    double s = 0, s2 = 0, m = 0;
    for (int64_t r = 0; r < rows; r++) {
        lp_dequant_row(t->type, (const uint8_t *)t->data + (size_t)r * rb, row, n0);
        for (int64_t i = 0; i < n0; i++) {
            s += row[i];
            s2 += (double)row[i] * row[i];
            if (fabs(row[i]) > m) m = fabs(row[i]);
        }
    }
    double n = (double)(n0 * rows);
    *mean = s / n;
    *std = sqrt(s2 / n - *mean * *mean);
    *amax = m;
    free(row);
}

static void test_weights(void)
{
    char path[1100];
    snprintf(path, sizeof(path), "%s/synth-test-%d-f32.gguf", tmp, (int)getpid());
    lp_gguf_t *g = synth("qwen2", "F32", 0, 2, 7, path);
    if (!g) return;
    /* The design: std 0.02 for matrices and biases (four-uniform sums, so
     * bounded by 0.02 * 2 * sqrt(3) = 0.0693), exactly 1 for norms. */
    for (int64_t i = 0; i < lp_gguf_n_tensors(g); i++) {
        const lp_gguf_tensor_t *t = lp_gguf_tensor_at(g, i);
        double mean, std, amax;
        stats(t, &mean, &std, &amax);
        if (strstr(t->name, "norm")) {
            CHECK(mean == 1.0 && std == 0.0, "%s: norm is not all ones", t->name);
            continue;
        }
        double n = (double)(t->ne[0] * t->ne[1]);
        double tol = 5 * 0.02 / sqrt(n); /* five standard errors of the mean */
        CHECK(fabs(mean) < tol, "%s: mean %g (tolerance %g)", t->name, mean, tol);
        double stol = 0.02 * 4 / sqrt(2 * n); /* four standard errors of the std */
        CHECK(fabs(std - 0.02) < stol, "%s: std %g (tolerance %g)", t->name, std, stol);
        CHECK(amax <= 0.02 * 2 * sqrt(3.0) + 1e-9, "%s: max |w| %g", t->name, amax);
    }
    /* Different tensors get different streams. */
    const lp_gguf_tensor_t *a = lp_gguf_find_tensor(g, "blk.0.attn_q.weight");
    const lp_gguf_tensor_t *b = lp_gguf_find_tensor(g, "blk.1.attn_q.weight");
    CHECK(a && b && memcmp(a->data, b->data, a->nbytes), "layers 0 and 1 share weights");
    lp_gguf_destroy(&g);
    unlink(path);

    /* Quantized: the dequantized spread stays close to the design. */
    g = synth("llama", "Q4_K_M", 0, 2, 7, path);
    if (!g) return;
    const char *names[] = {"token_embd.weight", "output.weight", "blk.3.ffn_down.weight"};
    for (int i = 0; i < 3; i++) {
        const lp_gguf_tensor_t *t = lp_gguf_find_tensor(g, names[i]);
        double mean, std, amax;
        if (!t) continue;
        stats(t, &mean, &std, &amax);
        CHECK(fabs(std - 0.02) < 0.002 && fabs(mean) < 0.001, "%s (%s): mean %g std %g",
              names[i], lp_type_name(t->type), mean, std);
    }
    lp_gguf_destroy(&g);
    unlink(path);
}

static void test_padding(void)
{
    char path[1100];
    snprintf(path, sizeof(path), "%s/synth-test-%d-pad.gguf", tmp, (int)getpid());
    lp_gguf_t *g = synth("llama", "Q8_0", 32010, 1, 1, path);
    if (!g) return;
    lp_gguf_t *v;
    if (lp_gguf_open(vocab_llama, &v)) {
        CHECK(0, "%s", lp_error_msg());
        lp_gguf_destroy(&g);
        return;
    }
    const lp_gguf_str_t *toks, *vt;
    uint64_t n, vn;
    CHECK(!lp_gguf_get_str_arr(g, "tokenizer.ggml.tokens", &toks, &n) && n == 32010, "tokens");
    CHECK(!lp_gguf_get_str_arr(v, "tokenizer.ggml.tokens", &vt, &vn) && vn == 32000, "vocab");
    if (n == 32010 && vn == 32000) {
        int same = 1;
        for (uint64_t i = 0; i < vn; i++)
            same &= toks[i].len == vt[i].len && !memcmp(toks[i].ptr, vt[i].ptr, vt[i].len);
        CHECK(same, "the vocab's tokens are copied unchanged");
        CHECK(toks[32000].len == 10 && !memcmp(toks[32000].ptr, "[PAD32000]", 10), "pad 32000");
        CHECK(toks[32009].len == 10 && !memcmp(toks[32009].ptr, "[PAD32009]", 10), "pad 32009");
    }
    const void *d;
    CHECK(!lp_gguf_get_arr(g, "tokenizer.ggml.token_type", LP_GGUF_INT32, &d, &n) && n == 32010 &&
              lp_gguf_num_at(LP_GGUF_INT32, d, 32005) == 5 &&
              lp_gguf_num_at(LP_GGUF_INT32, d, 1) == 3, "token types");
    CHECK(!lp_gguf_get_arr(g, "tokenizer.ggml.scores", LP_GGUF_FLOAT32, &d, &n) && n == 32010 &&
              lp_gguf_num_at(LP_GGUF_FLOAT32, d, 32009) == -1000, "scores");
    const lp_gguf_tensor_t *t = lp_gguf_find_tensor(g, "token_embd.weight");
    CHECK(t && t->ne[0] == 256 && t->ne[1] == 32010, "token_embd rows");
    t = lp_gguf_find_tensor(g, "output.weight");
    CHECK(t && t->ne[1] == 32010, "output rows");
    /* Every other tokenizer key is copied. */
    int n_tok_keys = 0, n_copied = 0;
    for (int64_t i = 0; i < lp_gguf_n_kv(v); i++) {
        const lp_gguf_kv_t *kv = lp_gguf_kv_at(v, i);
        if (strncmp(kv->key, "tokenizer.", 10)) continue;
        n_tok_keys++;
        n_copied += lp_gguf_find(g, kv->key) != NULL;
    }
    CHECK(n_tok_keys == 10 && n_copied == n_tok_keys, "%d of %d tokenizer keys", n_copied,
          n_tok_keys);
    lp_gguf_destroy(&v);
    lp_gguf_destroy(&g);
    unlink(path);
}

static void test_threads(void)
{
    char p1[1100], p2[1100], p3[1100];
    snprintf(p1, sizeof(p1), "%s/synth-test-%d-t1.gguf", tmp, (int)getpid());
    snprintf(p2, sizeof(p2), "%s/synth-test-%d-t3.gguf", tmp, (int)getpid());
    snprintf(p3, sizeof(p3), "%s/synth-test-%d-s2.gguf", tmp, (int)getpid());
    lp_gguf_t *a = synth("qwen2", "Q4_K_M", 0, 1, 42, p1);
    lp_gguf_t *b = synth("qwen2", "Q4_K_M", 0, 3, 42, p2);
    lp_gguf_t *c = synth("qwen2", "Q4_K_M", 0, 3, 43, p3);
    if (a && b && c) {
        size_t la, lb, lc;
        uint8_t *ba = test_load(p1, &la), *bb = test_load(p2, &lb), *bc = test_load(p3, &lc);
        CHECK(la == lb && !memcmp(ba, bb, la), "1 and 3 threads give different files");
        const lp_gguf_tensor_t *ta = lp_gguf_find_tensor(a, "blk.0.ffn_up.weight");
        const lp_gguf_tensor_t *tc = lp_gguf_find_tensor(c, "blk.0.ffn_up.weight");
        CHECK(la == lc && ta && tc && memcmp(ta->data, tc->data, ta->nbytes),
              "seeds 42 and 43 give the same weights");
        free(ba);
        free(bb);
        free(bc);
    }
    lp_gguf_destroy(&a);
    lp_gguf_destroy(&b);
    lp_gguf_destroy(&c);
    unlink(p1);
    unlink(p2);
    unlink(p3);
}

static void expect_fail(lp_synth_opts_t o, const char *path, const char *a, const char *b)
{
    int rc = lp_synth_write(&o, path);
    const char *msg = lp_error_msg();
    CHECK(rc < 0, "expected a failure naming '%s'", a);
    CHECK(strstr(msg, a) && (!b || strstr(msg, b)), "message '%s' lacks '%s' / '%s'", msg, a,
          b ? b : "");
    CHECK(access(path, F_OK) != 0, "a failed synth left %s", path);
}

/* ---- the mixtures of experts: 3-D experts, llama-quantize's choices ---- */

static void test_moe(void)
{
    static const struct {
        const char *arch, *shape, *type;
        uint32_t router, experts, down0, attn;
        int64_t n_expert, n_embd, n_ff;
    } cases[] = {
        /* one layer of 1: use_more_bits gives ffn_down_exps Q6_K there */
        {"qwen3moe", "qwen3moe-small", "Q4_K_M", LP_TYPE_F32, LP_TYPE_Q4_K, LP_TYPE_Q6_K,
         LP_TYPE_Q4_K, 32, 1024, 512},
        {"gpt-oss", "gpt-oss-small", "MXFP4", LP_TYPE_F32, LP_TYPE_MXFP4, LP_TYPE_MXFP4,
         LP_TYPE_Q8_0, 16, 1024, 1024},
    };
    char path[1100];
    snprintf(path, sizeof(path), "%s/synth-test-%d-moe.gguf", tmp, (int)getpid());
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        lp_synth_opts_t o = {cases[i].arch, cases[i].shape, cases[i].type, vocab_llama, 1, 32000,
                             2, 1};
        int rc = lp_synth_write(&o, path);
        CHECK(rc == 0, "synth %s: %s", cases[i].shape, lp_error_msg());
        lp_gguf_t *g = NULL;
        if (rc || lp_gguf_open(path, &g)) continue;
        const lp_gguf_tensor_t *r = lp_gguf_find_tensor(g, "blk.0.ffn_gate_inp.weight");
        const lp_gguf_tensor_t *up = lp_gguf_find_tensor(g, "blk.0.ffn_up_exps.weight");
        const lp_gguf_tensor_t *dn = lp_gguf_find_tensor(g, "blk.0.ffn_down_exps.weight");
        const lp_gguf_tensor_t *q = lp_gguf_find_tensor(g, "blk.0.attn_q.weight");
        CHECK(r && r->type == cases[i].router, "%s: router type", cases[i].shape);
        CHECK(up && up->type == cases[i].experts && up->n_dims == 3 &&
                  up->ne[0] == cases[i].n_embd && up->ne[1] == cases[i].n_ff &&
                  up->ne[2] == cases[i].n_expert,
              "%s: ffn_up_exps type or shape", cases[i].shape);
        CHECK(dn && dn->type == cases[i].down0 && dn->ne[0] == cases[i].n_ff &&
                  dn->ne[1] == cases[i].n_embd && dn->ne[2] == cases[i].n_expert,
              "%s: ffn_down_exps type or shape", cases[i].shape);
        CHECK(q && q->type == cases[i].attn, "%s: attn_q type", cases[i].shape);
        CHECK(!lp_gguf_find_tensor(g, "blk.1.attn_q.weight"), "%s: --layers 1", cases[i].shape);
        if (!strcmp(cases[i].arch, "gpt-oss")) {
            const lp_gguf_tensor_t *b = lp_gguf_find_tensor(g, "blk.0.ffn_up_exps.bias");
            CHECK(b && b->type == LP_TYPE_F32 && b->n_dims == 2 && b->ne[1] == cases[i].n_expert,
                  "gpt-oss: expert biases F32, one row per expert");
            CHECK(lp_gguf_find_tensor(g, "blk.0.attn_sinks.weight") != NULL, "gpt-oss: sinks");
        }
        lp_gguf_destroy(&g);
    }
    unlink(path);
    lp_synth_opts_t x = {"llama", "tiny", "MXFP4", vocab_llama, 1, 0, 1, 0};
    expect_fail(x, path, "MXFP4", "mixture of experts");
    x = (lp_synth_opts_t){"qwen3moe", "qwen3moe-small", "Q8_0", vocab_llama, 1, 32000, 1, 9};
    expect_fail(x, path, "--layers 9", "8");
}

static void test_errors(void)
{
    char path[1100], novocab[1100];
    snprintf(path, sizeof(path), "%s/synth-test-%d-bad.gguf", tmp, (int)getpid());
    lp_synth_opts_t o = {"llama", "tiny", "Q8_0", vocab_llama, 1, 0, 1, 0};
    lp_synth_opts_t x = o;
    x.arch = "gpt2";
    expect_fail(x, path, "--arch 'gpt2'", NULL);
    x = o;
    x.shape = "huge";
    expect_fail(x, path, "--shape 'huge'", "unknown");
    x.shape = "qwen2.5-0.5b";
    expect_fail(x, path, "--shape 'qwen2.5-0.5b'", "not a llama shape");
    x = o;
    x.type = "Q4_K_S";
    expect_fail(x, path, "--type 'Q4_K_S'", NULL);
    x = o;
    x.n_vocab = 1000;
    expect_fail(x, path, "32000 tokens", "1000");
    x = o;
    x.vocab = "/nonexistent/vocab.gguf";
    expect_fail(x, path, "/nonexistent/vocab.gguf", NULL);

    /* A GGUF without a token list. */
    snprintf(novocab, sizeof(novocab), "%s/synth-test-%d-novocab.gguf", tmp, (int)getpid());
    lp_gguf_writer_t *w;
    lp_gguf_writer_new(&w);
    lp_gguf_writer_add_cstr(w, "general.architecture", "llama");
    CHECK(lp_gguf_writer_write_file(w, novocab) == 0, "write %s", novocab);
    lp_gguf_writer_destroy(&w);
    x = o;
    x.vocab = novocab;
    expect_fail(x, path, novocab, "tokenizer.ggml.tokens");
    unlink(novocab);

    x = o;
    expect_fail(x, "/nonexistent-dir/out.gguf", "/nonexistent-dir/out.gguf", NULL);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s SHARED_DIR TMPDIR\n", argv[0]);
        return 2;
    }
    snprintf(vocab_llama, sizeof(vocab_llama), "%s/vocab/ggml-vocab-llama-spm.gguf", argv[1]);
    snprintf(vocab_qwen2, sizeof(vocab_qwen2), "%s/vocab/ggml-vocab-qwen2.gguf", argv[1]);
    snprintf(tmp, sizeof(tmp), "%s", argv[2]);
    test_mix();
    test_weights();
    test_padding();
    test_threads();
    test_errors();
    test_moe();
    return CHECK_DONE();
}
