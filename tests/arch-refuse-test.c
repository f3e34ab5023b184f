/* arch-refuse-test.c - the loader refuses what it would ignore
 * (engine-svc/arch/arch.h): every supported architecture's fixture with one
 * foreign key or tensor added (or one implemented key set to a value that
 * is not implemented) must fail to load with a message naming that key or
 * tensor and the file; the untouched copy must load.  The loader runs
 * before any backend is chosen, so this holds for the CPU and the CUDA
 * backends alike.  Then the CUDA backend (when built) refuses, at create,
 * each fixture whose features it does not implement, naming the key or
 * tensor that brings the feature, and accepts a plain llama file.
 *
 * Usage: arch-refuse-test MODELS_DIR OUT_DIR (mutants are written to
 * OUT_DIR, never committed). */
#include "engine.h"
#include "error.h"
#include "ggml-type.h"
#include "gguf-write.h"
#include "gguf.h"

#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum kind { KEY_F32, KEY_U32, KEY_STR, KEY_BOOL, TENSOR };

typedef struct mutant {
    const char *fixture;
    enum kind kind;
    const char *name;  /* a key ("%s" is the arch) or a tensor name */
    double num;        /* key value, or a tensor's ne0 (ne1 from n2) */
    const char *str;
    int64_t n2;        /* a tensor's ne1 (0: 1-D) */
} mutant_t;

#define LLAMA3 "synth-llama3-F32.gguf"
#define NEMO "synth-nemo-F32.gguf"
#define QWEN3 "synth-qwen3-F32.gguf"
#define GEMMA3 "synth-gemma3-F32.gguf"
#define GEMMA4 "synth-gemma4-F32.gguf"
#define STORIES "stories260K.gguf"
#define QWEN2 "synth-qwen2-Q8_0.gguf"
#define QWEN3MOE "synth-qwen3moe-F32.gguf"
#define GPTOSS "synth-gptoss-MXFP4.gguf"
#define QWEN35 "synth-qwen35-F32.gguf"

static const mutant_t mutants[] = {
    /* a key no arch here implements (Gemma 2's attention soft-capping) */
    {LLAMA3, KEY_F32, "%s.attn_logit_softcapping", 50, NULL, 0},
    {NEMO, KEY_F32, "%s.attn_logit_softcapping", 50, NULL, 0},
    {QWEN3, KEY_F32, "%s.attn_logit_softcapping", 50, NULL, 0},
    {GEMMA3, KEY_F32, "%s.attn_logit_softcapping", 50, NULL, 0},
    {GEMMA4, KEY_F32, "%s.attn_logit_softcapping", 50, NULL, 0},
    {STORIES, KEY_F32, "%s.attn_logit_softcapping", 50, NULL, 0},
    {QWEN2, KEY_F32, "%s.attention.layer_norm_epsilon", 1e-5, NULL, 0},
    /* a tensor no table names */
    {LLAMA3, TENSOR, "blk.0.attn_output.bias", 64, NULL, 0},
    {NEMO, TENSOR, "blk.1.attn_output.bias", 96, NULL, 0},
    {QWEN3, TENSOR, "blk.0.attn_output.bias", 64, NULL, 0},
    {GEMMA3, TENSOR, "blk.5.attn_output.bias", 64, NULL, 0},
    {GEMMA4, TENSOR, "blk.2.attn_output.bias", 64, NULL, 0},
    {STORIES, TENSOR, "blk.0.ffn_gate.bias", 768, NULL, 0},
    /* a key of another family, outside the arch's prefix */
    {LLAMA3, KEY_BOOL, "clip.has_vision_encoder", 1, NULL, 0},
    {GEMMA3, KEY_U32, "gemma3.mm.tokens_per_image", 256, NULL, 0},
    /* RoPE scaling lmpipe does not implement */
    {LLAMA3, KEY_STR, "%s.rope.scaling.type", 0, "yarn", 0},
    {QWEN3, KEY_STR, "%s.rope.scaling.type", 0, "yarn", 0},
    {GEMMA3, KEY_STR, "%s.rope.scaling.type", 0, "longrope", 0},
    {GEMMA4, KEY_STR, "%s.rope.scaling.type", 0, "yarn", 0},
    {LLAMA3, KEY_F32, "%s.rope.scaling.attn_factor", 1.2, NULL, 0},
    /* RoPE frequency factors where the arch has none */
    {QWEN3, TENSOR, "rope_freqs.weight", 16, NULL, 0},
    {GEMMA3, TENSOR, "rope_freqs.weight", 16, NULL, 0},
    /* experts: Mixtral-style llama, Gemma 4 MoE */
    {LLAMA3, KEY_U32, "%s.expert_count", 8, NULL, 0},
    {LLAMA3, TENSOR, "blk.0.ffn_gate_inp.weight", 64, NULL, 8},
    {GEMMA4, KEY_U32, "%s.expert_count", 4, NULL, 0},
    {GEMMA4, TENSOR, "blk.0.ffn_gate_inp.weight", 64, NULL, 4},
    /* Gemma 4's per-layer embeddings and KV sharing */
    {GEMMA4, KEY_U32, "%s.embedding_length_per_layer_input", 256, NULL, 0},
    {GEMMA4, KEY_U32, "%s.attention.shared_kv_layers", 2, NULL, 0},
    {GEMMA4, TENSOR, "per_layer_token_embd.weight", 64, NULL, 512},
    /* keys llama.cpp ignores for this arch, and so would we */
    {GEMMA3, KEY_F32, "%s.attention.scale", 0.5, NULL, 0},
    {QWEN3, KEY_U32, "%s.attention.sliding_window", 16, NULL, 0},
    {LLAMA3, KEY_F32, "%s.final_logit_softcapping", 30, NULL, 0},
    /* mixture of experts: routing keys lmpipe does not implement, a shared
     * expert qwen3moe has not, expert counts out of range */
    {QWEN3MOE, KEY_U32, "%s.expert_gating_func", 2, NULL, 0},
    {QWEN3MOE, KEY_F32, "%s.expert_weights_scale", 2.5, NULL, 0},
    {QWEN3MOE, TENSOR, "blk.1.ffn_gate_inp_shexp.weight", 64, NULL, 0},
    {QWEN3MOE, TENSOR, "blk.0.exp_probs_b.bias", 8, NULL, 0},
    {QWEN3MOE, KEY_U32, "%s.expert_used_count", 9, NULL, 0},
    {QWEN3MOE, KEY_U32, "%s.expert_count", 0, NULL, 0},
    /* gpt-oss: YaRN keys llama.cpp reads that lmpipe does not, a q/k norm it
     * has not, RoPE scaling other than yarn, the YaRN key in an arch without
     * YaRN */
    {GPTOSS, KEY_F32, "%s.rope.scaling.yarn_beta_fast", 16, NULL, 0},
    {GPTOSS, KEY_F32, "%s.rope.scaling.attn_factor", 1.2, NULL, 0},
    {GPTOSS, TENSOR, "blk.0.attn_q_norm.weight", 32, NULL, 0},
    {GPTOSS, KEY_STR, "%s.rope.scaling.type", 0, "longrope", 0},
    {QWEN3MOE, KEY_U32, "%s.rope.scaling.original_context_length", 4096, NULL, 0},
    /* a tensor of a layer the file does not have */
    {QWEN3, TENSOR, "blk.2.attn_norm.weight", 64, NULL, 0},
    /* qwen35: a tensor of the other kind of layer (0-2 DeltaNet, 3 attention) */
    {QWEN35, TENSOR, "blk.0.attn_q.weight", 64, NULL, 256},
    {QWEN35, TENSOR, "blk.3.ssm_a", 4, NULL, 0},
    {QWEN35, TENSOR, "blk.3.attn_qkv.weight", 64, NULL, 128},
    {QWEN35, TENSOR, "blk.1.ffn_gate_inp.weight", 64, NULL, 8},
    {QWEN35, KEY_F32, "%s.attn_logit_softcapping", 50, NULL, 0},
    /* qwen35: values that are not implemented */
    {QWEN35, KEY_U32, "%s.nextn_predict_layers", 1, NULL, 0},
    {QWEN35, KEY_U32, "%s.ssm.inner_size", 96, NULL, 0},
    {QWEN35, KEY_U32, "%s.ssm.group_count", 3, NULL, 0},
    {QWEN35, KEY_U32, "%s.rope.dimension_sections", 1, NULL, 0}, /* pair 3 in the 4th section */
    {QWEN35, KEY_U32, "%s.expert_count", 8, NULL, 0},
    {QWEN35, KEY_STR, "%s.rope.scaling.type", 0, "yarn", 0},
};

static const char *arch_of(const lp_gguf_t *g)
{
    static char buf[64];
    lp_gguf_str_t s;
    if (lp_gguf_get_str(g, "general.architecture", &s) || s.len >= sizeof(buf)) return "?";
    memcpy(buf, s.ptr, s.len);
    buf[s.len] = 0;
    return buf;
}

/* A copy of `src` with the mutation applied (m NULL: a plain copy). */
static int write_mutant(const char *src, const mutant_t *m, const char *out, char *what,
                        size_t what_len)
{
    lp_gguf_t *g = NULL;
    lp_gguf_writer_t *w = NULL;
    int rc = lp_gguf_open(src, &g);
    if (!rc) rc = lp_gguf_writer_new(&w);
    if (rc) {
        lp_gguf_destroy(&g);
        return rc;
    }
    what[0] = 0;
    if (m && m->kind != TENSOR) snprintf(what, what_len, m->name, arch_of(g));
    else if (m) snprintf(what, what_len, "%s", m->name);
    for (int64_t i = 0; !rc && i < lp_gguf_n_kv(g); i++) {
        const lp_gguf_kv_t *kv = lp_gguf_kv_at(g, i);
        if (m && m->kind != TENSOR && !strcmp(kv->key, what)) continue; /* replaced below */
        if (!strcmp(kv->key, "general.alignment")) rc = lp_gguf_writer_set_alignment(w, lp_gguf_alignment(g));
        else rc = lp_gguf_writer_add_kv(w, kv);
    }
    if (!rc && m) {
        switch (m->kind) {
        case KEY_F32: rc = lp_gguf_writer_add_f32(w, what, (float)m->num); break;
        case KEY_U32: rc = lp_gguf_writer_add_u32(w, what, (uint32_t)m->num); break;
        case KEY_STR: rc = lp_gguf_writer_add_cstr(w, what, m->str); break;
        case KEY_BOOL: rc = lp_gguf_writer_add_bool(w, what, m->num != 0); break;
        case TENSOR: break;
        }
    }
    for (int64_t i = 0; !rc && i < lp_gguf_n_tensors(g); i++) {
        const lp_gguf_tensor_t *t = lp_gguf_tensor_at(g, i);
        rc = lp_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
    }
    float *zeros = NULL;
    if (!rc && m && m->kind == TENSOR) {
        int64_t ne[2] = {(int64_t)m->num, m->n2 ? m->n2 : 1};
        zeros = calloc((size_t)(ne[0] * ne[1]), sizeof(float));
        rc = lp_gguf_writer_add_tensor(w, what, LP_TYPE_F32, m->n2 ? 2 : 1, ne, zeros);
    }
    if (!rc) rc = lp_gguf_writer_write_file(w, out);
    free(zeros);
    lp_gguf_writer_destroy(&w);
    lp_gguf_destroy(&g);
    return rc;
}

static void test_mutants(const char *models, const char *out_dir)
{
    char src[4096], out[4096], what[256];
    /* untouched copies load: the copy itself changes nothing */
    static const char *const fixtures[] = {LLAMA3, NEMO, QWEN3, GEMMA3, GEMMA4, STORIES, QWEN2,
                                           QWEN3MOE, QWEN35};
    for (size_t i = 0; i < sizeof(fixtures) / sizeof(fixtures[0]); i++) {
        snprintf(src, sizeof(src), "%s/%s", models, fixtures[i]);
        snprintf(out, sizeof(out), "%s/arch-refuse-copy.gguf", out_dir);
        CHECK_RC(write_mutant(src, NULL, out, what, sizeof(what)), 0);
        lp_model_t *model = NULL;
        CHECK(lp_model_load(out, &model) == 0, "copy of %s: %s", fixtures[i], lp_error_msg());
        lp_model_destroy(&model);
    }
    for (size_t i = 0; i < sizeof(mutants) / sizeof(mutants[0]); i++) {
        const mutant_t *m = &mutants[i];
        snprintf(src, sizeof(src), "%s/%s", models, m->fixture);
        snprintf(out, sizeof(out), "%s/arch-refuse-%zu.gguf", out_dir, i);
        if (write_mutant(src, m, out, what, sizeof(what))) {
            CHECK(0, "writing mutant %zu: %s", i, lp_error_msg());
            continue;
        }
        lp_model_t *model = NULL;
        int rc = lp_model_load(out, &model);
        const char *msg = lp_error_msg();
        CHECK(rc < 0, "%s with %s: loaded", m->fixture, what);
        CHECK(rc >= 0 || (strstr(msg, what) && strstr(msg, out)),
              "%s with %s: the message names neither it nor the file: %s", m->fixture, what, msg);
        if (rc < 0) printf("refused: %s\n", msg);
        lp_model_destroy(&model);
        remove(out);
    }
    snprintf(out, sizeof(out), "%s/arch-refuse-copy.gguf", out_dir);
    remove(out);
}

/* The CUDA backend names the first feature it lacks; a plain llama file
 * passes that check (and then needs a device). */
static void test_cuda(const char *models)
{
#ifdef LP_HAVE_CUDA
    static const struct {
        const char *fixture, *cause;
    } cases[] = {
        {LLAMA3, "rope_freqs.weight"},
        {NEMO, "llama.attention.key_length"},
        {QWEN3, "qwen3.attention.key_length"},
        {GEMMA3, "gemma3.rope.scaling.type"},
        {"synth-gemma3-nofeat-F32.gguf", "gemma3.rope.scaling.type"},
        {GEMMA4, "rope_freqs.weight"},
        {QWEN3MOE, "qwen3moe.expert_count' (a mixture of experts)"},
        {GPTOSS, "attn_sinks.weight' (attention sinks)"},
        {QWEN35, "qwen35.ssm.state_size"}, /* Gated DeltaNet, named before its other features */
        {"synth-llama3-nofeat-F32.gguf", NULL},
        {STORIES, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", models, cases[i].fixture);
        lp_model_t *m = NULL;
        if (lp_model_load(path, &m)) {
            CHECK(0, "%s: %s", path, lp_error_msg());
            continue;
        }
        lp_engine_params_t p = {.n_ctx = 64, .max_seqs = 1, .max_batch_tokens = 16,
                                .n_threads = 1, .backend = "cuda"};
        lp_engine_t *e = NULL;
        int rc = lp_engine_new(m, &p, &e);
        if (cases[i].cause) {
            CHECK(rc == LP_ERR(ENOTSUP) && strstr(lp_error_msg(), cases[i].cause) &&
                      strstr(lp_error_msg(), "cuda backend does not implement"),
                  "%s on cuda: rc %d, %s", cases[i].fixture, rc, lp_error_msg());
            printf("cuda refuses %s: %s\n", cases[i].fixture, lp_error_msg());
        } else {
            /* no feature lacking: created where a GPU is, else "not available" */
            CHECK(rc == 0 || rc == LP_ERR(ENODEV), "%s on cuda: %s", cases[i].fixture,
                  lp_error_msg());
        }
        lp_engine_destroy(&e);
        lp_model_destroy(&m);
    }
#else
    (void)models;
    printf("CUDA backend not built: its refusals not checked\n");
#endif
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: arch-refuse-test MODELS_DIR OUT_DIR\n");
        return 2;
    }
    test_mutants(argv[1], argv[2]);
    test_cuda(argv[1]);
    if (!lp_check_failures) printf("arch-refuse: all passed\n");
    return CHECK_DONE();
}
