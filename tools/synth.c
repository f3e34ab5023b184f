/* synth.c - random-weight GGUF models with real shapes.
 *
 * Order of work: pick the shape and the file type, copy the tokenizer keys
 * from the vocab file (padding the token list to the shape's vocab size),
 * lay out the tensors with llama.cpp's per-tensor type choice, then stream
 * each tensor through the writer: rows are generated and quantized on the
 * thread pool a few MB at a time. */
#include "synth.h"

#include "error.h"
#include "ggml-type.h"
#include "gguf-write.h"
#include "gguf.h"
#include "log.h"
#include "quant.h"
#include "threadpool.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- shapes ---- */

typedef struct shape {
    const char *name;
    const char *arch;
    uint32_t n_embd, n_layer, n_head, n_head_kv, n_ff;
    uint32_t n_vocab; /* 0: as many as the vocab file has */
    uint32_t n_ctx;
    float rope_base, eps;
    /* the newer architectures (engine-svc/arch/); zero for llama/qwen2 */
    uint32_t head_dim;   /* key_length; 0: n_embd / n_head, no key written */
    int tied;            /* output tied to token_embd (no output.weight) */
    float llama3_rope;   /* Llama 3.1 rope_freqs: the scaling factor (0: none) */
    uint32_t orig_ctx;   /* ... and original_max_position_embeddings */
    uint32_t n_swa;      /* sliding window (gemma) */
    uint32_t swa_period; /* one global layer in every swa_period (gemma3 key, gemma4 array) */
    uint32_t head_dim_swa, n_head_kv_swa; /* gemma4: sliding layers' head size and KV heads */
    float rot_frac;      /* gemma4: rotated fraction of global heads (rope_freqs) */
    /* mixture of experts (qwen3moe, gpt-oss) */
    uint32_t n_expert, n_expert_used, n_ff_exp;
    float yarn;          /* gpt-oss: YaRN factor (original context: orig_ctx) */
    /* qwen35: Gated DeltaNet layers, all but one in every attn_interval */
    uint32_t attn_interval, d_state, n_group, n_v_heads, d_conv;
    uint32_t n_rot;       /* rotated dims of an attention head (partial RoPE) */
    int32_t sections[4];  /* rope.dimension_sections */
} shape_t;

/* The real models' hyperparameters; `tiny` matches the shared synth-*.gguf
 * files that llama.cpp quantized, so their tensor tables can be compared.
 * gemma4-small is a dense Gemma 4 in the layout of the 31B model (sliding
 * and global layers with their own head sizes, global layers with V from K
 * and proportional RoPE) at about 1B parameters: Gemma 4's small releases
 * (E2B, E4B) have per-layer embeddings, which lmpipe refuses.  qwen3.6-27b
 * and qwen3.5-0.8b are the Qwen3.5/3.6 dense hybrids (three Gated DeltaNet
 * layers, then one gated attention layer) with the sizes of those models'
 * published configs. */
static const shape_t shapes[] = {
    {"tinyllama-1.1b", "llama", 2048, 22, 32, 4, 5632, 32000, 2048, 10000.0f, 1e-5f, .head_dim = 0},
    {"qwen2.5-0.5b", "qwen2", 896, 24, 14, 2, 4864, 151936, 32768, 1000000.0f, 1e-6f, .head_dim = 0},
    {"tiny", "llama", 256, 4, 8, 4, 768, 0, 4096, 10000.0f, 1e-5f, .head_dim = 0},
    {"tiny", "qwen2", 128, 3, 2, 1, 384, 0, 4096, 1000000.0f, 1e-6f, .head_dim = 0},
    {"llama-3.2-1b", "llama", 2048, 16, 32, 8, 8192, 128256, 131072, 500000.0f, 1e-5f,
     .head_dim = 64, .tied = 1, .llama3_rope = 32.0f, .orig_ctx = 8192},
    {"qwen3-0.6b", "qwen3", 1024, 28, 16, 8, 3072, 151936, 40960, 1000000.0f, 1e-6f,
     .head_dim = 128, .tied = 1},
    {"qwen3-4b", "qwen3", 2560, 36, 32, 8, 9728, 151936, 40960, 1000000.0f, 1e-6f,
     .head_dim = 128, .tied = 1},
    {"gemma-3-1b", "gemma3", 1152, 26, 4, 1, 6912, 262144, 32768, 1000000.0f, 1e-6f,
     .head_dim = 256, .tied = 1, .n_swa = 512, .swa_period = 6},
    {"gemma4-small", "gemma4", 1536, 18, 8, 2, 6144, 0, 131072, 1000000.0f, 1e-6f,
     .head_dim = 256, .tied = 1, .n_swa = 512, .swa_period = 6, .head_dim_swa = 128,
     .n_head_kv_swa = 4, .rot_frac = 0.25f},
    /* the mixtures of experts: Qwen3-30B-A3B (128 experts, 8 a token) and
     * gpt-oss-20b (32 experts, 4 a token, sliding window 128 on even layers,
     * YaRN 32 over 4096); the -small ones are the same layers at a few
     * hundred MB, for tests */
    {"qwen3-30b-a3b", "qwen3moe", 2048, 48, 32, 4, 6144, 151936, 40960, 1000000.0f, 1e-6f,
     .head_dim = 128, .n_expert = 128, .n_expert_used = 8, .n_ff_exp = 768},
    {"qwen3moe-small", "qwen3moe", 1024, 8, 16, 4, 3072, 151936, 40960, 1000000.0f, 1e-6f,
     .head_dim = 128, .n_expert = 32, .n_expert_used = 4, .n_ff_exp = 512},
    {"gpt-oss-20b", "gpt-oss", 2880, 24, 64, 8, 2880, 201088, 131072, 150000.0f, 1e-5f,
     .head_dim = 64, .n_swa = 128, .swa_period = 2, .orig_ctx = 4096, .yarn = 32.0f,
     .n_expert = 32, .n_expert_used = 4, .n_ff_exp = 2880},
    {"gpt-oss-small", "gpt-oss", 1024, 4, 16, 4, 1024, 201088, 131072, 150000.0f, 1e-5f,
     .head_dim = 64, .n_swa = 128, .swa_period = 2, .orig_ctx = 4096, .yarn = 32.0f,
     .n_expert = 16, .n_expert_used = 4, .n_ff_exp = 1024},
    {"qwen3.6-27b", "qwen35", 5120, 64, 24, 4, 17408, 248320, 262144, 10000000.0f, 1e-6f,
     .head_dim = 256, .attn_interval = 4, .d_state = 128, .n_group = 16, .n_v_heads = 48,
     .d_conv = 4, .n_rot = 64, .sections = {11, 11, 10, 0}},
    {"qwen3.5-0.8b", "qwen35", 1024, 24, 8, 2, 3584, 248320, 262144, 10000000.0f, 1e-6f,
     .head_dim = 256, .tied = 1, .attn_interval = 4, .d_state = 128, .n_group = 16,
     .n_v_heads = 16, .d_conv = 4, .n_rot = 64, .sections = {11, 11, 10, 0}},
    /* the shared synth-qwen35-F32.gguf's sizes */
    {"tiny", "qwen35", 64, 4, 4, 2, 128, 0, 4096, 10000000.0f, 1e-6f, .head_dim = 32,
     .attn_interval = 4, .d_state = 16, .n_group = 2, .n_v_heads = 4, .d_conv = 4, .n_rot = 8,
     .sections = {2, 1, 1, 0}},
};
const char *const lp_synth_shape_names = "tinyllama-1.1b, llama-3.2-1b (llama), qwen2.5-0.5b "
                                         "(qwen2), qwen3-0.6b, qwen3-4b (qwen3), gemma-3-1b "
                                         "(gemma3), gemma4-small (gemma4), qwen3-30b-a3b, "
                                         "qwen3moe-small (qwen3moe), gpt-oss-20b, gpt-oss-small "
                                         "(gpt-oss), qwen3.6-27b, qwen3.5-0.8b (qwen35), tiny "
                                         "(llama, qwen2, qwen35)";

/* A qwen35 layer is recurrent (Gated DeltaNet) unless it is the last of its
 * interval. */
static int is_rec(const shape_t *s, uint32_t l)
{
    return s->attn_interval && (l + 1) % s->attn_interval;
}

/* A gemma layer slides unless it is the last of its period. */
static int is_swa(const shape_t *s, uint32_t l)
{
    return s->n_swa && l % s->swa_period != s->swa_period - 1;
}

/* ---- file types and llama.cpp's per-tensor choice ---- */

typedef struct ftype {
    const char *name;
    uint32_t file_type; /* general.file_type (llama_ftype) */
    uint32_t base;      /* the type of most tensors */
    int quantized;      /* output gets Q6_K (or Q8_0) as llama-quantize does */
    int k_mix;          /* Q4_K_M / Q5_K_M: more bits for some attn_v, ffn_down */
} ftype_t;

static const ftype_t ftypes[] = {
    {"F32", 0, LP_TYPE_F32, 0, 0},    {"F16", 1, LP_TYPE_F16, 0, 0},
    {"BF16", 32, LP_TYPE_BF16, 0, 0}, {"Q4_0", 2, LP_TYPE_Q4_0, 1, 0},
    {"Q4_1", 3, LP_TYPE_Q4_1, 1, 0},  {"Q5_0", 8, LP_TYPE_Q5_0, 1, 0},
    {"Q5_1", 9, LP_TYPE_Q5_1, 1, 0},  {"Q8_0", 7, LP_TYPE_Q8_0, 1, 0},
    {"Q6_K", 18, LP_TYPE_Q6_K, 1, 0}, {"Q4_K_M", 15, LP_TYPE_Q4_K, 1, 1},
    {"Q5_K_M", 17, LP_TYPE_Q5_K, 1, 1},
    /* llama-quantize's MXFP4_MOE: experts MXFP4, every other matrix Q8_0 */
    {"MXFP4", 38, LP_TYPE_Q8_0, 1, 0},
};
const char *const lp_synth_type_names = "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q6_K, "
                                        "Q4_K_M, Q5_K_M, MXFP4 (mixtures of experts)";

/* llama.cpp's use_more_bits(): the first and last eighth of the layers and
 * every third one in between. */
static int use_more_bits(uint32_t i, uint32_t n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* The type llama-quantize gives a 2-D tensor (llama_tensor_get_type, for the
 * file types above).  `what` is the name without "blk.N.". */
static uint32_t pick_type(const ftype_t *ft, const char *what, int64_t ne0, int is_output,
                          uint32_t layer, uint32_t n_layer)
{
    uint32_t t = ft->base;
    /* the router stays F32, as the converter writes it and llama-quantize keeps it */
    if (!strcmp(what, "ffn_gate_inp.weight")) return LP_TYPE_F32;
    if (!strcmp(what, "ssm_conv1d.weight")) return LP_TYPE_F32; /* never converted or quantized */
    if (!ft->quantized) return t;
    if (ft->file_type == 38) /* MXFP4_MOE */
        return strstr(what, "_exps.weight") ? LP_TYPE_MXFP4 : LP_TYPE_Q8_0;
    if (is_output) {
        if (ne0 % LP_QK_K) return LP_TYPE_Q8_0;
        return t == LP_TYPE_Q8_0 ? t : LP_TYPE_Q6_K;
    }
    if (ft->k_mix && (!strcmp(what, "attn_v.weight") || !strcmp(what, "ffn_down.weight") ||
                      !strcmp(what, "ffn_down_exps.weight")) &&
        use_more_bits(layer, n_layer))
        t = LP_TYPE_Q6_K;
    else if (ft->k_mix && !strcmp(what, "attn_qkv.weight")) /* a fused q/k/v */
        t = t == LP_TYPE_Q4_K ? LP_TYPE_Q5_K : LP_TYPE_Q6_K;
    if (ne0 % LP_QK_K) { /* rows that are no whole K-quant super-block */
        if (t == LP_TYPE_Q4_K) t = LP_TYPE_Q5_0;
        else if (t == LP_TYPE_Q5_K) t = LP_TYPE_Q5_1;
        else if (t == LP_TYPE_Q6_K) t = LP_TYPE_Q8_0;
    }
    return t;
}

uint32_t lp_synth_tensor_type(const char *type_name, const char *name, uint32_t n_dims,
                              int64_t ne0, int tied, uint32_t n_layer)
{
    const ftype_t *ft = NULL;
    for (size_t i = 0; i < sizeof(ftypes) / sizeof(ftypes[0]); i++)
        if (!strcmp(type_name, ftypes[i].name)) ft = &ftypes[i];
    if (!ft) return UINT32_MAX;
    if (n_dims < 2) return LP_TYPE_F32; /* norms and biases */
    const size_t nl = strlen(name);
    if (nl > 5 && !strcmp(name + nl - 5, ".bias")) return LP_TYPE_F32; /* 2-D expert biases */
    int is_output = !strcmp(name, "output.weight") || (tied && !strcmp(name, "token_embd.weight"));
    uint32_t layer = 0;
    const char *what = name;
    if (!strncmp(name, "blk.", 4)) {
        char *end;
        layer = (uint32_t)strtoul(name + 4, &end, 10);
        what = *end == '.' ? end + 1 : end;
    }
    return pick_type(ft, what, ne0, is_output, layer, n_layer);
}

/* ---- the weights ---- */

enum fill { FILL_NORMAL, FILL_ONE, FILL_ROPE_LLAMA3, FILL_ROPE_PARTIAL, FILL_SSM_A };
#define WEIGHT_STD 0.02

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t hash_name(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

/* Element i of a tensor: the sum of four 16-bit uniforms from one hash of
 * (tensor key + i), centred and scaled to unit variance (Irwin-Hall, n = 4:
 * close to normal, bounded at 3.46 sigma).  Integer work and one rounding
 * per value, so the same seed gives the same bits on every machine, and any
 * row can be made on any thread. */
static float normal_at(uint64_t key, uint64_t i)
{
    uint64_t h = splitmix64(key + i);
    uint32_t s = (uint32_t)(h & 0xffff) + (uint32_t)((h >> 16) & 0xffff) +
                 (uint32_t)((h >> 32) & 0xffff) + (uint32_t)(h >> 48);
    /* (s + 2) / 65536 is the sum of the four uniforms, mean 2, variance 1/3 */
    return (float)(((double)s + 2.0 - 131072.0) * (1.7320508075688772 / 65536.0));
}

typedef struct synth_tensor {
    char name[64];
    uint32_t type;
    uint32_t n_dims;
    int64_t ne[3];
    enum fill fill;
    uint64_t key;
    const shape_t *shape;  /* for the RoPE factors */
    struct synth_run *run; /* borrowed */
} synth_tensor_t;

typedef struct synth_run {
    lp_threadpool_t *pool;
    float *scratch;        /* n_threads rows of max_ne0 floats */
    int64_t max_ne0;
    /* the current callback call */
    const synth_tensor_t *t;
    int64_t row0, n_rows;
    uint8_t *dst;
    int rc;
} synth_run_t;

/* Element i of rope_freqs.weight: the Llama 3.1 recipe's divisor of pair i
 * (low_freq_factor 1, high_freq_factor 4, as the converter writes it), or
 * Gemma 4's proportional RoPE (1 for the rotated pairs, 1e30 for the rest). */
static float rope_factor(const synth_tensor_t *t, int64_t i)
{
    const shape_t *s = t->shape;
    const int64_t n_pairs = t->ne[0];
    if (t->fill == FILL_ROPE_PARTIAL)
        return i < (int64_t)((float)(2 * n_pairs) * s->rot_frac / 2) ? 1.0f : 1e30f;
    const double dim = 2.0 * (double)n_pairs, pi = 3.14159265358979323846;
    const double lo_wavelen = s->orig_ctx / 1.0, hi_wavelen = s->orig_ctx / 4.0;
    const double freq = 1.0 / pow(s->rope_base, (double)(2 * i) / dim), wavelen = 2 * pi / freq;
    if (wavelen < hi_wavelen) return 1.0f;
    if (wavelen > lo_wavelen) return s->llama3_rope;
    const double smooth = (s->orig_ctx / wavelen - 1.0) / (4.0 - 1.0);
    return (float)(1.0 / ((1 - smooth) / s->llama3_rope + smooth));
}

static void gen_rows(void *ctx, int ith, int nth)
{
    synth_run_t *run = ctx;
    const synth_tensor_t *t = run->t;
    int64_t ne0 = t->ne[0];
    size_t row_bytes = lp_type_row_bytes(t->type, ne0);
    float *row = run->scratch + (size_t)ith * (size_t)run->max_ne0;
    int64_t a = run->n_rows * ith / nth, b = run->n_rows * (ith + 1) / nth;
    for (int64_t r = a; r < b; r++) {
        uint64_t first = (uint64_t)(run->row0 + r) * (uint64_t)ne0;
        for (int64_t i = 0; i < ne0; i++)
            row[i] = t->fill == FILL_ONE      ? 1.0f
                     : t->fill == FILL_NORMAL ? (float)WEIGHT_STD * normal_at(t->key, first + (uint64_t)i)
                     /* DeltaNet's -exp(A_log): negative, so the state decays */
                     : t->fill == FILL_SSM_A  ? -1.0f - (float)(i % 16) / 4.0f
                                              : rope_factor(t, i);
        if (lp_quant_row(t->type, row, run->dst + (size_t)r * row_bytes, ne0)) run->rc = -1;
    }
}

static int rows_cb(void *ctx, int64_t row0, int64_t n_rows, void *dst)
{
    synth_tensor_t *t = ctx;
    synth_run_t *run = t->run;
    run->t = t;
    run->row0 = row0;
    run->n_rows = n_rows;
    run->dst = dst;
    run->rc = 0;
    lp_threadpool_run(run->pool, gen_rows, run);
    if (run->rc)
        return lp_error_set(LP_ERR(EINVAL), "tensor '%s': cannot quantize to %s", t->name,
                            lp_type_name(t->type));
    return 0;
}

/* ---- the tokenizer ---- */

static int is_token_array(const char *key)
{
    return !strcmp(key, "tokenizer.ggml.tokens") || !strcmp(key, "tokenizer.ggml.token_type") ||
           !strcmp(key, "tokenizer.ggml.scores");
}

/* A per-token array padded from n to n_vocab entries: tokens "[PADi]",
 * token type 5 (unused), score -1000, as llama.cpp's converter pads. */
static int add_padded(lp_gguf_writer_t *w, const lp_gguf_kv_t *kv, uint64_t n_vocab,
                      const char *vocab)
{
    uint64_t n = kv->arr_n;
    int rc = 0;
    if (kv->arr_type == LP_GGUF_STRING) {
        lp_gguf_str_t *s = malloc(sizeof(*s) * n_vocab);
        char *names = malloc((n_vocab - n) * 24 + 1);
        if (!s || !names) rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
        size_t at = 0;
        for (uint64_t i = 0; i < n_vocab && !rc; i++) {
            if (i < n) {
                s[i] = kv->strs[i];
                continue;
            }
            int len = snprintf(names + at, 24, "[PAD%llu]", (unsigned long long)i);
            s[i] = (lp_gguf_str_t){names + at, (uint64_t)len};
            at += (size_t)len + 1;
        }
        if (!rc) rc = lp_gguf_writer_add_str_arr(w, kv->key, s, n_vocab);
        free(s);
        free(names);
        return rc;
    }
    if (kv->arr_type != LP_GGUF_INT32 && kv->arr_type != LP_GGUF_UINT32 &&
        kv->arr_type != LP_GGUF_FLOAT32)
        return lp_error_set(LP_ERR(EINVAL), "%s: key '%s': cannot pad an array of %s", vocab,
                            kv->key, lp_gguf_vtype_name(kv->arr_type));
    uint32_t *v = malloc(4 * n_vocab);
    if (!v) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    memcpy(v, kv->data, 4 * n);
    float score = -1000.0f;
    uint32_t pad = 5; /* LLAMA_TOKEN_TYPE_UNUSED */
    if (kv->arr_type == LP_GGUF_FLOAT32) memcpy(&pad, &score, 4);
    for (uint64_t i = n; i < n_vocab; i++) v[i] = pad;
    rc = lp_gguf_writer_add_arr(w, kv->key, kv->arr_type, v, n_vocab);
    free(v);
    return rc;
}

/* Copies every tokenizer.* key; *n_vocab is the shape's size (0: take the
 * vocab's).  Returns the final size in *n_vocab. */
static int add_tokenizer(lp_gguf_writer_t *w, const char *vocab, uint32_t *n_vocab)
{
    lp_gguf_t *g;
    int rc = lp_gguf_open(vocab, &g);
    if (rc) return rc;
    const lp_gguf_str_t *toks;
    uint64_t n;
    rc = lp_gguf_get_str_arr(g, "tokenizer.ggml.tokens", &toks, &n);
    if (rc == LP_ERR(ENOENT))
        rc = lp_error_set(LP_ERR(EINVAL), "%s: no tokenizer.ggml.tokens: not a vocab file", vocab);
    else if (rc) lp_error_prefix("%s: ", vocab);
    if (!rc && (n == 0 || n > UINT32_MAX))
        rc = lp_error_set(LP_ERR(EINVAL), "%s: tokenizer.ggml.tokens holds %llu tokens", vocab,
                          (unsigned long long)n);
    if (!rc && *n_vocab && n > *n_vocab)
        rc = lp_error_set(LP_ERR(EINVAL), "%s: %llu tokens, more than the vocab size %u", vocab,
                          (unsigned long long)n, *n_vocab);
    if (!rc && !*n_vocab) *n_vocab = (uint32_t)n;
    for (int64_t i = 0; i < lp_gguf_n_kv(g) && !rc; i++) {
        const lp_gguf_kv_t *kv = lp_gguf_kv_at(g, i);
        if (strncmp(kv->key, "tokenizer.", 10)) continue;
        if (!is_token_array(kv->key)) {
            rc = lp_gguf_writer_add_kv(w, kv);
            continue;
        }
        if (kv->type != LP_GGUF_ARRAY || kv->arr_n != n)
            rc = lp_error_set(LP_ERR(EINVAL), "%s: key '%s' is not an array of %llu entries",
                              vocab, kv->key, (unsigned long long)n);
        else if (n == *n_vocab) rc = lp_gguf_writer_add_kv(w, kv);
        else rc = add_padded(w, kv, *n_vocab, vocab);
    }
    lp_gguf_destroy(&g);
    return rc;
}

/* ---- the model ---- */

static int find_options(const lp_synth_opts_t *o, const shape_t **shape, const ftype_t **ft)
{
    static const char *const archs[] = {"llama", "qwen2", "qwen3", "gemma3", "gemma4", "qwen3moe",
                                        "gpt-oss", "qwen35"};
    bool arch_ok = false;
    for (size_t i = 0; o->arch && i < sizeof(archs) / sizeof(archs[0]); i++)
        arch_ok |= !strcmp(o->arch, archs[i]);
    if (!arch_ok)
        return lp_error_set(LP_ERR(EINVAL), "--arch '%s': unknown (llama, qwen2, qwen3, gemma3, "
                            "gemma4, qwen3moe, gpt-oss, qwen35)", o->arch ? o->arch : "");
    *shape = NULL;
    int known = 0;
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        if (!o->shape || strcmp(o->shape, shapes[i].name)) continue;
        known = 1;
        if (!strcmp(o->arch, shapes[i].arch)) *shape = &shapes[i];
    }
    if (!*shape && known)
        return lp_error_set(LP_ERR(EINVAL), "--shape '%s': not a %s shape (%s)", o->shape,
                            o->arch, lp_synth_shape_names);
    if (!*shape)
        return lp_error_set(LP_ERR(EINVAL), "--shape '%s': unknown (%s)",
                            o->shape ? o->shape : "", lp_synth_shape_names);
    *ft = NULL;
    for (size_t i = 0; i < sizeof(ftypes) / sizeof(ftypes[0]); i++)
        if (o->type && !strcmp(o->type, ftypes[i].name)) *ft = &ftypes[i];
    if (!*ft)
        return lp_error_set(LP_ERR(EINVAL), "--type '%s': unknown (%s)", o->type ? o->type : "",
                            lp_synth_type_names);
    if (!o->vocab) return lp_error_set(LP_ERR(EINVAL), "--vocab: missing");
    return 0;
}

static int add_hparams(lp_gguf_writer_t *w, const char *arch, const shape_t *s, const char *type)
{
    char key[96], name[96];
    int rc = lp_gguf_writer_add_cstr(w, "general.architecture", arch);
    snprintf(name, sizeof(name), "synthetic-%s-%s-%s", arch, s->name, type);
    if (!rc) rc = lp_gguf_writer_add_cstr(w, "general.name", name);
    if (!rc) rc = lp_gguf_writer_set_alignment(w, 32);
#define U32(k, v) \
    if (!rc) { snprintf(key, sizeof(key), "%s." k, arch); rc = lp_gguf_writer_add_u32(w, key, v); }
#define F32(k, v) \
    if (!rc) { snprintf(key, sizeof(key), "%s." k, arch); rc = lp_gguf_writer_add_f32(w, key, v); }
    U32("context_length", s->n_ctx)
    U32("embedding_length", s->n_embd)
    U32("block_count", s->n_layer)
    U32("feed_forward_length", s->n_ff)
    U32("attention.head_count", s->n_head)
    if (strcmp(arch, "gemma4")) U32("attention.head_count_kv", s->n_head_kv)
    if (!s->head_dim) U32("rope.dimension_count", s->n_embd / s->n_head)
    F32("attention.layer_norm_rms_epsilon", s->eps)
    F32("rope.freq_base", s->rope_base)
    if (s->head_dim) {
        U32("attention.key_length", s->head_dim)
        U32("attention.value_length", s->head_dim)
        if (strcmp(arch, "qwen3") && strcmp(arch, "qwen3moe") && strcmp(arch, "gpt-oss"))
            U32("rope.dimension_count", s->n_rot ? s->n_rot : s->head_dim)
    }
    if (s->attn_interval) {
        U32("ssm.conv_kernel", s->d_conv)
        U32("ssm.state_size", s->d_state)
        U32("ssm.group_count", s->n_group)
        U32("ssm.time_step_rank", s->n_v_heads)
        U32("ssm.inner_size", s->n_v_heads * s->d_state)
        U32("full_attention_interval", s->attn_interval)
        if (!rc) {
            snprintf(key, sizeof(key), "%s.rope.dimension_sections", arch);
            rc = lp_gguf_writer_add_arr(w, key, LP_GGUF_INT32, s->sections, 4);
        }
    }
    if (s->n_swa) U32("attention.sliding_window", s->n_swa)
    if (s->n_expert) {
        U32("expert_count", s->n_expert)
        U32("expert_used_count", s->n_expert_used)
        U32("expert_feed_forward_length", s->n_ff_exp)
    }
    if (s->yarn > 0) {
        if (!rc) {
            snprintf(key, sizeof(key), "%s.rope.scaling.type", arch);
            rc = lp_gguf_writer_add_cstr(w, key, "yarn");
        }
        F32("rope.scaling.factor", s->yarn)
        U32("rope.scaling.original_context_length", s->orig_ctx)
    }
    if (!strcmp(arch, "gemma4")) {
        U32("attention.key_length_swa", s->head_dim_swa)
        U32("attention.value_length_swa", s->head_dim_swa)
        U32("rope.dimension_count_swa", s->head_dim_swa)
        F32("rope.freq_base_swa", 10000.0f)
        F32("final_logit_softcapping", 30.0f)
        U32("embedding_length_per_layer_input", 0)
        U32("attention.shared_kv_layers", 0)
        uint32_t kv[1024];
        bool pat[1024];
        for (uint32_t l = 0; l < s->n_layer && l < 1024; l++) {
            pat[l] = is_swa(s, l);
            kv[l] = pat[l] ? s->n_head_kv_swa : s->n_head_kv;
        }
        if (!rc) {
            snprintf(key, sizeof(key), "%s.attention.sliding_window_pattern", arch);
            rc = lp_gguf_writer_add_arr(w, key, LP_GGUF_BOOL, pat, s->n_layer);
        }
        if (!rc) { /* per layer, where the other shapes have one value */
            snprintf(key, sizeof(key), "%s.attention.head_count_kv", arch);
            rc = lp_gguf_writer_add_arr(w, key, LP_GGUF_UINT32, kv, s->n_layer);
        }
    }
#undef U32
#undef F32
    return rc;
}

/* One tensor of the plan: its name ("blk.N." prefixed for a layer's), dims,
 * fill and llama-quantize's type for it. */
static void add_tensor(synth_tensor_t *t, const shape_t *s, const ftype_t *ft, int tied,
                       const char *name, int layer, enum fill fill, uint32_t n_dims, int64_t ne0,
                       int64_t ne1)
{
    t->ne[2] = 1;
    if (layer < 0) snprintf(t->name, sizeof(t->name), "%s", name);
    else snprintf(t->name, sizeof(t->name), "blk.%d.%s", layer, name);
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->fill = fill;
    t->shape = s;
    t->type = lp_synth_tensor_type(ft->name, t->name, n_dims, ne0, tied, s->n_layer);
}

/* The tensor list, in the order of the shared llama.cpp-made files: output,
 * output_norm, token_embd, then each layer's tensors by name. */
static int plan_tensors(const shape_t *s, const ftype_t *ft, int qwen2, uint32_t n_vocab,
                        synth_tensor_t **out, int *n_out)
{
    int per_layer = qwen2 ? 12 : 9;
    int cap = 3 + per_layer * (int)s->n_layer;
    synth_tensor_t *ts = calloc((size_t)cap, sizeof(*ts));
    if (!ts) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    int n = 0;
    int64_t E = s->n_embd, hd = s->n_embd / s->n_head;
    int64_t q = hd * s->n_head, kv = hd * s->n_head_kv;
    int tied = qwen2; /* Qwen2.5-0.5B ties the output to the embedding */
#define ADD(nm, layer, fl, nd, a, b) add_tensor(&ts[n++], s, ft, tied, nm, layer, fl, nd, a, b)
    if (!tied) ADD("output.weight", -1, FILL_NORMAL, 2, E, n_vocab);
    ADD("output_norm.weight", -1, FILL_ONE, 1, E, 1);
    ADD("token_embd.weight", -1, FILL_NORMAL, 2, E, n_vocab);
    for (int l = 0; l < (int)s->n_layer; l++) {
        if (qwen2) ADD("attn_k.bias", l, FILL_NORMAL, 1, kv, 1);
        ADD("attn_k.weight", l, FILL_NORMAL, 2, E, kv);
        ADD("attn_norm.weight", l, FILL_ONE, 1, E, 1);
        ADD("attn_output.weight", l, FILL_NORMAL, 2, q, E);
        if (qwen2) ADD("attn_q.bias", l, FILL_NORMAL, 1, q, 1);
        ADD("attn_q.weight", l, FILL_NORMAL, 2, E, q);
        if (qwen2) ADD("attn_v.bias", l, FILL_NORMAL, 1, kv, 1);
        ADD("attn_v.weight", l, FILL_NORMAL, 2, E, kv);
        ADD("ffn_down.weight", l, FILL_NORMAL, 2, (int64_t)s->n_ff, E);
        ADD("ffn_gate.weight", l, FILL_NORMAL, 2, E, (int64_t)s->n_ff);
        ADD("ffn_norm.weight", l, FILL_ONE, 1, E, 1);
        ADD("ffn_up.weight", l, FILL_NORMAL, 2, E, (int64_t)s->n_ff);
    }
#undef ADD
    *out = ts;
    *n_out = n;
    return 0;
}

/* The newer shapes (head size from key_length): every tensor of the arch's
 * table in engine-svc/arch/, each layer's in name order. */
static int plan_tensors_arch(const shape_t *s, const ftype_t *ft, const char *arch,
                             uint32_t n_vocab, synth_tensor_t **out, int *n_out)
{
    const int gemma = !strncmp(arch, "gemma", 5), gemma4 = !strcmp(arch, "gemma4");
    const int qk_norm = gemma || !strcmp(arch, "qwen3");
    int cap = 4 + 16 * (int)s->n_layer;
    synth_tensor_t *ts = calloc((size_t)cap, sizeof(*ts));
    if (!ts) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    int n = 0;
    const int64_t E = s->n_embd, F = s->n_ff;
#define ADD(nm, layer, fl, nd, a, b) add_tensor(&ts[n++], s, ft, s->tied, nm, layer, fl, nd, a, b)
    if (!s->tied) ADD("output.weight", -1, FILL_NORMAL, 2, E, n_vocab);
    ADD("output_norm.weight", -1, FILL_ONE, 1, E, 1);
    if (s->llama3_rope) ADD("rope_freqs.weight", -1, FILL_ROPE_LLAMA3, 1, s->head_dim / 2, 1);
    if (gemma4) ADD("rope_freqs.weight", -1, FILL_ROPE_PARTIAL, 1, s->head_dim / 2, 1);
    ADD("token_embd.weight", -1, FILL_NORMAL, 2, E, n_vocab);
    for (int l = 0; l < (int)s->n_layer && s->attn_interval; l++) {
        /* qwen35: each layer's tensors in name order; attn_v's extra bits
         * counted over the attention layers (docs/GGUF.md: unchecked
         * against a llama-quantize file of a hybrid) */
        const int64_t q = (int64_t)s->head_dim * s->n_head, kv = (int64_t)s->head_dim * s->n_head_kv;
        const int64_t hd = s->head_dim, di = (int64_t)s->n_v_heads * s->d_state, Hv = s->n_v_heads;
        const int64_t ch = 2 * (int64_t)s->n_group * s->d_state + di;
        if (is_rec(s, (uint32_t)l)) {
            ADD("attn_gate.weight", l, FILL_NORMAL, 2, E, di);
            ADD("attn_norm.weight", l, FILL_ONE, 1, E, 1);
            ADD("attn_qkv.weight", l, FILL_NORMAL, 2, E, ch);
        } else {
            ADD("attn_k.weight", l, FILL_NORMAL, 2, E, kv);
            ADD("attn_k_norm.weight", l, FILL_ONE, 1, hd, 1);
            ADD("attn_norm.weight", l, FILL_ONE, 1, E, 1);
            ADD("attn_output.weight", l, FILL_NORMAL, 2, q, E);
            ADD("attn_q.weight", l, FILL_NORMAL, 2, E, 2 * q); /* q and its gate */
            ADD("attn_q_norm.weight", l, FILL_ONE, 1, hd, 1);
            ADD("attn_v.weight", l, FILL_NORMAL, 2, E, kv);
            ts[n - 1].type = ft->quantized ? pick_type(ft, "attn_v.weight", E, 0,
                                                        (uint32_t)l / s->attn_interval,
                                                        s->n_layer / s->attn_interval)
                                           : ft->base;
        }
        ADD("ffn_down.weight", l, FILL_NORMAL, 2, F, E);
        ADD("ffn_gate.weight", l, FILL_NORMAL, 2, E, F);
        ADD("ffn_up.weight", l, FILL_NORMAL, 2, E, F);
        ADD("post_attention_norm.weight", l, FILL_ONE, 1, E, 1);
        if (is_rec(s, (uint32_t)l)) {
            ADD("ssm_a", l, FILL_SSM_A, 1, Hv, 1);
            ADD("ssm_alpha.weight", l, FILL_NORMAL, 2, E, Hv);
            ADD("ssm_beta.weight", l, FILL_NORMAL, 2, E, Hv);
            ADD("ssm_conv1d.weight", l, FILL_NORMAL, 2, s->d_conv, ch);
            ADD("ssm_dt.bias", l, FILL_NORMAL, 1, Hv, 1);
            ADD("ssm_norm.weight", l, FILL_ONE, 1, s->d_state, 1);
            ADD("ssm_out.weight", l, FILL_NORMAL, 2, di, E);
        }
    }
    for (int l = 0; l < (int)s->n_layer && !s->attn_interval; l++) {
        const int swa = gemma4 && is_swa(s, (uint32_t)l);
        const int64_t hd = swa ? s->head_dim_swa : s->head_dim;
        const int64_t q = hd * s->n_head, kv = hd * (swa ? s->n_head_kv_swa : s->n_head_kv);
        ADD("attn_k.weight", l, FILL_NORMAL, 2, E, kv);
        if (qk_norm) ADD("attn_k_norm.weight", l, FILL_ONE, 1, hd, 1);
        ADD("attn_norm.weight", l, FILL_ONE, 1, E, 1);
        ADD("attn_output.weight", l, FILL_NORMAL, 2, q, E);
        ADD("attn_q.weight", l, FILL_NORMAL, 2, E, q);
        if (qk_norm) ADD("attn_q_norm.weight", l, FILL_ONE, 1, hd, 1);
        /* Gemma 4's global layers take V from the K projection */
        if (!gemma4 || swa) ADD("attn_v.weight", l, FILL_NORMAL, 2, E, kv);
        ADD("ffn_down.weight", l, FILL_NORMAL, 2, F, E);
        ADD("ffn_gate.weight", l, FILL_NORMAL, 2, E, F);
        ADD("ffn_norm.weight", l, FILL_ONE, 1, E, 1);
        ADD("ffn_up.weight", l, FILL_NORMAL, 2, E, F);
        if (gemma4) ADD("layer_output_scale.weight", l, FILL_ONE, 1, 1, 1);
        if (gemma) ADD("post_attention_norm.weight", l, FILL_ONE, 1, E, 1);
        if (gemma) ADD("post_ffw_norm.weight", l, FILL_ONE, 1, E, 1);
    }
#undef ADD
    *out = ts;
    *n_out = n;
    return 0;
}

/* The mixtures of experts (qwen3moe, gpt-oss): the arch's table, each
 * layer's in name order; expert tensors 3-D (ne2 = n_expert). */
static int plan_tensors_moe(const shape_t *s, const ftype_t *ft, const char *arch,
                            uint32_t n_vocab, synth_tensor_t **out, int *n_out)
{
    const int oss = !strcmp(arch, "gpt-oss");
    synth_tensor_t *ts = calloc((size_t)(4 + 24 * s->n_layer), sizeof(*ts));
    if (!ts) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    int n = 0;
    const int64_t E = s->n_embd, F = s->n_ff_exp, X = s->n_expert, hd = s->head_dim;
    const int64_t q = hd * s->n_head, kv = hd * s->n_head_kv;
#define ADD(nm, layer, fl, nd, a, b) add_tensor(&ts[n++], s, ft, 0, nm, layer, fl, nd, a, b)
#define ADD3(nm, layer, a, b) (ADD(nm, layer, FILL_NORMAL, 3, a, b), ts[n - 1].ne[2] = X)
    ADD("output.weight", -1, FILL_NORMAL, 2, E, n_vocab);
    ADD("output_norm.weight", -1, FILL_ONE, 1, E, 1);
    ADD("token_embd.weight", -1, FILL_NORMAL, 2, E, n_vocab);
    for (int l = 0; l < (int)s->n_layer; l++) {
        if (oss) ADD("attn_k.bias", l, FILL_NORMAL, 1, kv, 1);
        ADD("attn_k.weight", l, FILL_NORMAL, 2, E, kv);
        if (!oss) ADD("attn_k_norm.weight", l, FILL_ONE, 1, hd, 1);
        ADD("attn_norm.weight", l, FILL_ONE, 1, E, 1);
        if (oss) ADD("attn_output.bias", l, FILL_NORMAL, 1, E, 1);
        ADD("attn_output.weight", l, FILL_NORMAL, 2, q, E);
        if (oss) ADD("attn_q.bias", l, FILL_NORMAL, 1, q, 1);
        ADD("attn_q.weight", l, FILL_NORMAL, 2, E, q);
        if (!oss) ADD("attn_q_norm.weight", l, FILL_ONE, 1, hd, 1);
        if (oss) ADD("attn_sinks.weight", l, FILL_NORMAL, 1, s->n_head, 1);
        if (oss) ADD("attn_v.bias", l, FILL_NORMAL, 1, kv, 1);
        ADD("attn_v.weight", l, FILL_NORMAL, 2, E, kv);
        if (oss) ADD("ffn_down_exps.bias", l, FILL_NORMAL, 2, E, X);
        ADD3("ffn_down_exps.weight", l, F, E);
        if (oss) ADD("ffn_gate_exps.bias", l, FILL_NORMAL, 2, F, X);
        ADD3("ffn_gate_exps.weight", l, E, F);
        if (oss) ADD("ffn_gate_inp.bias", l, FILL_NORMAL, 1, X, 1);
        ADD("ffn_gate_inp.weight", l, FILL_NORMAL, 2, E, X);
        if (!oss) ADD("ffn_norm.weight", l, FILL_ONE, 1, E, 1);
        if (oss) ADD("ffn_up_exps.bias", l, FILL_NORMAL, 2, F, X);
        ADD3("ffn_up_exps.weight", l, E, F);
        if (oss) ADD("post_attention_norm.weight", l, FILL_ONE, 1, E, 1);
    }
#undef ADD3
#undef ADD
    *out = ts;
    *n_out = n;
    return 0;
}

int lp_synth_write(const lp_synth_opts_t *o, const char *path)
{
    const shape_t *s = NULL;
    const ftype_t *ft = NULL;
    int rc = find_options(o, &s, &ft);
    if (rc) return rc;
    shape_t cut = *s;
    if (o->n_layer > s->n_layer)
        return lp_error_set(LP_ERR(EINVAL), "--layers %u: the shape has %u", o->n_layer, s->n_layer);
    if (o->n_layer) cut.n_layer = o->n_layer;
    s = &cut;
    int qwen2 = !strcmp(o->arch, "qwen2");

    lp_gguf_writer_t *w = NULL;
    synth_tensor_t *ts = NULL;
    int n_t = 0;
    synth_run_t run = {0};
    uint32_t n_vocab = o->n_vocab ? o->n_vocab : s->n_vocab;
    rc = lp_gguf_writer_new(&w);
    if (!rc) rc = add_hparams(w, o->arch, s, ft->name);
    if (!rc) rc = add_tokenizer(w, o->vocab, &n_vocab);
    if (!rc) rc = lp_gguf_writer_add_u32(w, "general.quantization_version", 2);
    if (!rc) rc = lp_gguf_writer_add_u32(w, "general.file_type", ft->file_type);
    if (!rc && ft->file_type == 38 && !s->n_expert)
        rc = lp_error_set(LP_ERR(EINVAL), "--type MXFP4: only for a mixture of experts "
                          "(qwen3moe, gpt-oss)");
    if (!rc) rc = s->n_expert   ? plan_tensors_moe(s, ft, o->arch, n_vocab, &ts, &n_t)
                  : s->head_dim ? plan_tensors_arch(s, ft, o->arch, n_vocab, &ts, &n_t)
                                : plan_tensors(s, ft, qwen2, n_vocab, &ts, &n_t);
    if (!rc && !(run.pool = lp_threadpool_new(o->n_threads))) rc = LP_ERR(ENOMEM);
    if (!rc) {
        for (int i = 0; i < n_t; i++)
            if (ts[i].ne[0] > run.max_ne0) run.max_ne0 = ts[i].ne[0];
        size_t nth = (size_t)lp_threadpool_n_threads(run.pool);
        run.scratch = malloc(sizeof(float) * nth * (size_t)run.max_ne0);
        if (!run.scratch) rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
    }
    for (int i = 0; i < n_t && !rc; i++) {
        synth_tensor_t *t = &ts[i];
        if (!lp_quant_supported(t->type))
            rc = lp_error_set(LP_ERR(ENOTSUP), "tensor '%s': no quantizer for %s", t->name,
                              lp_type_name(t->type));
        t->key = splitmix64(o->seed ^ hash_name(t->name));
        t->run = &run;
        if (!rc) rc = lp_gguf_writer_add_tensor_cb(w, t->name, t->type, t->n_dims, t->ne, rows_cb, t);
        LP_DEBUG("synth: %s %s %lld x %lld", t->name, lp_type_name(t->type), (long long)t->ne[0],
                 (long long)t->ne[1]);
    }
    if (!rc) rc = lp_gguf_writer_write_file(w, path);
    free(run.scratch);
    lp_threadpool_destroy(&run.pool);
    free(ts);
    lp_gguf_writer_destroy(&w);
    return rc;
}
