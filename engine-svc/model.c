/* model.c - load: read hyperparameters from the GGUF metadata and resolve
 * every weight tensor, checking names, types and shapes. */
#include "model.h"

#include "error.h"
#include "ggml-type.h"
#include "log.h"
#include "quant.h"
#include "vocab-facts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_MAX 128

static const char *arch_name(enum lp_arch a)
{
    return a == LP_ARCH_QWEN2 ? "qwen2" : "llama";
}

/* Read "<arch>.<suffix>" as a u32; `required` turns absence into an error. */
static int arch_u32(const lp_model_t *m, const char *suffix, bool required, uint32_t *out)
{
    char key[KEY_MAX];
    snprintf(key, sizeof(key), "%s.%s", arch_name(m->hp.arch), suffix);
    int rc = lp_gguf_get_u32(m->gguf, key, out);
    if (rc == LP_ERR(ENOENT) && required)
        return lp_error_set(LP_ERR(EINVAL), "missing required key '%s'", key);
    return rc;
}

static int arch_f32(const lp_model_t *m, const char *suffix, bool required, float *out)
{
    char key[KEY_MAX];
    snprintf(key, sizeof(key), "%s.%s", arch_name(m->hp.arch), suffix);
    int rc = lp_gguf_get_f32(m->gguf, key, out);
    if (rc == LP_ERR(ENOENT) && required)
        return lp_error_set(LP_ERR(EINVAL), "missing required key '%s'", key);
    return rc;
}

static int load_hparams(lp_model_t *m)
{
    lp_hparams_t *hp = &m->hp;
    lp_gguf_str_t arch;
    int rc = lp_gguf_get_str(m->gguf, "general.architecture", &arch);
    if (rc == LP_ERR(ENOENT))
        return lp_error_set(LP_ERR(EINVAL), "missing required key 'general.architecture'");
    if (rc) return rc;
    if (arch.len == 5 && !memcmp(arch.ptr, "llama", 5)) hp->arch = LP_ARCH_LLAMA;
    else if (arch.len == 5 && !memcmp(arch.ptr, "qwen2", 5)) hp->arch = LP_ARCH_QWEN2;
    else
        return lp_error_set(LP_ERR(ENOTSUP), "key 'general.architecture': '%.*s' is not "
                            "supported (llama and qwen2 are)", (int)(arch.len > 64 ? 64 : arch.len),
                            arch.ptr);

    uint32_t v;
    if ((rc = arch_u32(m, "embedding_length", true, &v))) return rc;
    hp->n_embd = (int32_t)v;
    if ((rc = arch_u32(m, "block_count", true, &v))) return rc;
    hp->n_layer = (int32_t)v;
    if ((rc = arch_u32(m, "feed_forward_length", true, &v))) return rc;
    hp->n_ff = (int32_t)v;
    if ((rc = arch_u32(m, "attention.head_count", true, &v))) return rc;
    hp->n_head = (int32_t)v;
    rc = arch_u32(m, "attention.head_count_kv", false, &v);
    if (rc && rc != LP_ERR(ENOENT)) return rc;
    hp->n_head_kv = rc ? hp->n_head : (int32_t)v;
    if ((rc = arch_u32(m, "context_length", true, &v))) return rc;
    hp->n_ctx_train = (int32_t)v;
    if ((rc = arch_f32(m, "attention.layer_norm_rms_epsilon", true, &hp->rms_eps))) return rc;

    if (hp->n_embd <= 0 || hp->n_embd > (1 << 16) || hp->n_layer <= 0 || hp->n_layer > 1024 ||
        hp->n_ff <= 0 || hp->n_ff > (1 << 20) || hp->n_head <= 0 || hp->n_head_kv <= 0 ||
        hp->n_ctx_train <= 0)
        return lp_error_set(LP_ERR(EINVAL), "%s hyperparameters out of range (n_embd %d, "
                            "n_layer %d, n_ff %d, n_head %d, n_head_kv %d, context %d)",
                            arch_name(hp->arch), hp->n_embd, hp->n_layer, hp->n_ff,
                            hp->n_head, hp->n_head_kv, hp->n_ctx_train);
    if (hp->n_embd % hp->n_head)
        return lp_error_set(LP_ERR(EINVAL), "key '%s.attention.head_count': %d does not "
                            "divide embedding_length %d", arch_name(hp->arch), hp->n_head,
                            hp->n_embd);
    if (hp->n_head % hp->n_head_kv)
        return lp_error_set(LP_ERR(EINVAL), "key '%s.attention.head_count_kv': %d does not "
                            "divide head_count %d", arch_name(hp->arch), hp->n_head_kv,
                            hp->n_head);
    hp->head_dim = hp->n_embd / hp->n_head;
    rc = arch_u32(m, "rope.dimension_count", false, &v);
    if (rc && rc != LP_ERR(ENOENT)) return rc;
    hp->n_rot = rc ? hp->head_dim : (int32_t)v;
    if (hp->n_rot <= 0 || hp->n_rot > hp->head_dim || hp->n_rot % 2)
        return lp_error_set(LP_ERR(EINVAL), "key '%s.rope.dimension_count': %d is not an even "
                            "number up to the head size %d", arch_name(hp->arch), hp->n_rot,
                            hp->head_dim);
    rc = arch_f32(m, "rope.freq_base", false, &hp->rope_base);
    if (rc == LP_ERR(ENOENT)) hp->rope_base = 10000.0f;
    else if (rc) return rc;
    if (!(hp->rope_base > 0) || !isfinite(hp->rope_base))
        return lp_error_set(LP_ERR(EINVAL), "key '%s.rope.freq_base': %g is not positive",
                            arch_name(hp->arch), hp->rope_base);
    if (!(hp->rms_eps > 0) || !isfinite(hp->rms_eps))
        return lp_error_set(LP_ERR(EINVAL), "key '%s.attention.layer_norm_rms_epsilon': %g "
                            "is not positive", arch_name(hp->arch), hp->rms_eps);
    /* llama.cpp's rope type per architecture: qwen2 uses NEOX. */
    hp->rope_neox = hp->arch == LP_ARCH_QWEN2;

    int64_t id;
    hp->bos_id = lp_gguf_get_i64(m->gguf, "tokenizer.ggml.bos_token_id", &id) ? -1 : (int32_t)id;
    hp->eos_id = lp_gguf_get_i64(m->gguf, "tokenizer.ggml.eos_token_id", &id) ? -1 : (int32_t)id;
    return 0;
}

/* Resolve a matrix weight with GGUF shape {n_in, n_out}. */
static int get_matrix(lp_model_t *m, const char *name, int64_t n_in, int64_t n_out, bool optional,
                      lp_weight_t *w)
{
    const lp_gguf_tensor_t *t = lp_gguf_find_tensor(m->gguf, name);
    memset(w, 0, sizeof(*w));
    if (!t) {
        if (optional) return LP_ERR(ENOENT);
        return lp_error_set(LP_ERR(EINVAL), "missing tensor '%s'", name);
    }
    if (t->n_dims != 2 || t->ne[0] != n_in || (n_out >= 0 && t->ne[1] != n_out))
        return lp_error_set(LP_ERR(EINVAL), "tensor '%s': shape %lld x %lld x %lld, expected "
                            "%lld x %lld", name, (long long)t->ne[0], (long long)t->ne[1],
                            (long long)t->ne[2], (long long)n_in, (long long)n_out);
    const lp_type_traits_t *tr = lp_type_traits(t->type);
    if (!tr->computable)
        return lp_error_set(LP_ERR(ENOTSUP), "tensor '%s': type %s is not supported", name,
                            tr->name);
    w->name = t->name;
    w->type = t->type;
    w->data = t->data;
    w->n_in = t->ne[0];
    w->n_out = t->ne[1];
    w->row_bytes = lp_type_row_bytes(t->type, t->ne[0]);
    return 0;
}

/* A 1-D tensor of n elements, converted to a new float array. */
static int get_vector(lp_model_t *m, const char *name, int64_t n, bool optional, float **out)
{
    const lp_gguf_tensor_t *t = lp_gguf_find_tensor(m->gguf, name);
    *out = NULL;
    if (!t) {
        if (optional) return 0;
        return lp_error_set(LP_ERR(EINVAL), "missing tensor '%s'", name);
    }
    if (t->n_dims != 1 || t->ne[0] != n)
        return lp_error_set(LP_ERR(EINVAL), "tensor '%s': shape %lld x %lld, expected %lld",
                            name, (long long)t->ne[0], (long long)t->ne[1], (long long)n);
    const lp_type_traits_t *tr = lp_type_traits(t->type);
    if (!tr->computable)
        return lp_error_set(LP_ERR(ENOTSUP), "tensor '%s': type %s is not supported", name,
                            tr->name);
    *out = malloc(sizeof(float) * (size_t)n);
    if (!*out) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    lp_dequant_row(t->type, t->data, *out, n);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite((*out)[i]))
            return lp_error_set(LP_ERR(EINVAL), "tensor '%s': element %lld is not finite",
                                name, (long long)i);
    return 0;
}

static int load_weights(lp_model_t *m)
{
    const lp_hparams_t *hp = &m->hp;
    int64_t n_embd = hp->n_embd, qdim = (int64_t)hp->n_head * hp->head_dim;
    int64_t kvdim = (int64_t)hp->n_head_kv * hp->head_dim;
    int rc = get_matrix(m, "token_embd.weight", n_embd, -1, false, &m->tok_embd);
    if (rc) return rc;
    /* the row length, real tokens and mask, as every service computes them */
    lp_vocab_facts_t vf;
    if ((rc = lp_vocab_facts_load(m->gguf, &vf))) return rc;
    m->hp.n_vocab = vf.n_vocab;
    m->hp.n_tokens_real = vf.n_tokens_real;
    m->token_mask = vf.token_mask; /* the model takes the mask */
    if ((rc = get_vector(m, "output_norm.weight", n_embd, false, &m->output_norm))) return rc;
    rc = get_matrix(m, "output.weight", n_embd, m->hp.n_vocab, true, &m->output);
    if (rc == LP_ERR(ENOENT)) {
        m->output = m->tok_embd;
        m->tied_output = true;
    } else if (rc) {
        return rc;
    }

    m->layers = calloc((size_t)hp->n_layer, sizeof(*m->layers));
    if (!m->layers) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    for (int32_t l = 0; l < hp->n_layer; l++) {
        lp_layer_t *L = &m->layers[l];
        char name[KEY_MAX];
#define NAME(s) (snprintf(name, sizeof(name), "blk.%d." s, l), name)
        if ((rc = get_vector(m, NAME("attn_norm.weight"), n_embd, false, &L->attn_norm)) ||
            (rc = get_matrix(m, NAME("attn_q.weight"), n_embd, qdim, false, &L->wq)) ||
            (rc = get_matrix(m, NAME("attn_k.weight"), n_embd, kvdim, false, &L->wk)) ||
            (rc = get_matrix(m, NAME("attn_v.weight"), n_embd, kvdim, false, &L->wv)) ||
            (rc = get_vector(m, NAME("attn_q.bias"), qdim, true, &L->bq)) ||
            (rc = get_vector(m, NAME("attn_k.bias"), kvdim, true, &L->bk)) ||
            (rc = get_vector(m, NAME("attn_v.bias"), kvdim, true, &L->bv)) ||
            (rc = get_matrix(m, NAME("attn_output.weight"), qdim, n_embd, false, &L->wo)) ||
            (rc = get_vector(m, NAME("ffn_norm.weight"), n_embd, false, &L->ffn_norm)) ||
            (rc = get_matrix(m, NAME("ffn_gate.weight"), n_embd, hp->n_ff, false, &L->w_gate)) ||
            (rc = get_matrix(m, NAME("ffn_up.weight"), n_embd, hp->n_ff, false, &L->w_up)) ||
            (rc = get_matrix(m, NAME("ffn_down.weight"), hp->n_ff, n_embd, false, &L->w_down)))
            return rc;
#undef NAME
    }
    return 0;
}

int lp_model_load(const char *path, lp_model_t **out)
{
    *out = NULL;
    lp_model_t *m = calloc(1, sizeof(*m));
    if (!m) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    int rc = lp_gguf_open(path, &m->gguf);
    if (!rc && (rc = load_hparams(m)) == 0) rc = load_weights(m);
    if (rc) {
        if (m->gguf) lp_error_prefix("%s: ", path);
        lp_model_destroy(&m);
        return rc;
    }
    LP_INFO("%s: %s, %d layers, n_embd %d, %d heads (%d kv), vocab %d (%d real)%s", path,
            arch_name(m->hp.arch), m->hp.n_layer, m->hp.n_embd, m->hp.n_head, m->hp.n_head_kv,
            m->hp.n_vocab, m->hp.n_tokens_real, m->tied_output ? ", tied output" : "");
    *out = m;
    return 0;
}

void lp_model_destroy(lp_model_t **self_p)
{
    lp_model_t *m = self_p ? *self_p : NULL;
    if (!m) return;
    for (int32_t l = 0; m->layers && l < m->hp.n_layer; l++) {
        lp_layer_t *L = &m->layers[l];
        free(L->attn_norm);
        free(L->ffn_norm);
        free(L->bq);
        free(L->bk);
        free(L->bv);
    }
    free(m->layers);
    free(m->output_norm);
    free(m->token_mask);
    lp_gguf_destroy(&m->gguf);
    free(m);
    *self_p = NULL;
}

const lp_hparams_t *lp_model_hparams(const lp_model_t *m) { return &m->hp; }
const lp_gguf_t *lp_model_gguf(const lp_model_t *m) { return m->gguf; }
const uint8_t *lp_model_token_mask(const lp_model_t *m) { return m->token_mask; }
