/* gemma4.c - the gemma4 architecture, dense layout (Gemma 4 31B style).
 *
 * Gemma 3's block (scaled embeddings, q/k norms, sandwich norms, GEGLU,
 * NEOX RoPE) with:
 * - a sliding-window pattern given per layer (attention.sliding_window_
 *   pattern, an array of bools, true = sliding) and per-layer head sizes:
 *   sliding layers key_length_swa and rope.dimension_count_swa, global
 *   layers key_length and rope.dimension_count; head_count_kv per layer;
 * - rope.freq_base_swa on sliding layers, rope.freq_base on global ones,
 *   which also divide their angles by rope_freqs.weight (proportional
 *   RoPE: the converter writes 1e30 for the pairs left unrotated);
 * - global layers may lack attn_v: v is then the k projection, taken
 *   before k's norm and RoPE;
 * - an RMSNorm without weight on every head of v;
 * - attention scale 1 (the q/k norms carry the scale);
 * - layer_output_scale.weight, one float, times the block's output;
 * - final_logit_softcapping, 30 when the key is absent (as llama.cpp).
 * Per-layer embeddings, KV sharing between layers and the MoE variant are
 * refused by name until implemented. */
#include "arch.h"

#include "error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const keys[] = {
    "context_length", "embedding_length", "block_count", "feed_forward_length",
    "attention.head_count", "attention.head_count_kv", "attention.layer_norm_rms_epsilon",
    "attention.key_length", "attention.value_length", "attention.key_length_swa",
    "attention.value_length_swa", "rope.dimension_count", "rope.dimension_count_swa",
    "rope.freq_base", "rope.freq_base_swa", "rope.scaling.type", "rope.scaling.factor",
    "attention.sliding_window", "attention.sliding_window_pattern", "final_logit_softcapping",
    "embedding_length_per_layer_input", "attention.shared_kv_layers", /* 0, or refused */
    "expert_count", "expert_used_count", "expert_feed_forward_length", /* no experts */
    NULL,
};

static const lp_arch_tensor_t tensors[] = {
    LP_TENSOR_G("token_embd.weight", tok_embd, LP_T_MATRIX, LP_D_EMBD, LP_D_VOCAB, 0),
    LP_TENSOR_G("output_norm.weight", output_norm, 0, LP_D_EMBD, LP_D_NONE, 0),
    LP_TENSOR_G("output.weight", output, LP_T_MATRIX | LP_T_OPTIONAL, LP_D_EMBD, LP_D_VOCAB, 0),
    LP_TENSOR_G("rope_freqs.weight", rope_freqs, LP_T_OPTIONAL, LP_D_ROT_PAIRS, LP_D_NONE,
                LP_FEAT_ROPE_FREQS),
    LP_TENSOR_L("attn_norm.weight", attn_norm, 0, LP_D_EMBD, LP_D_NONE, 0),
    LP_TENSOR_L("attn_q.weight", wq, LP_T_MATRIX, LP_D_EMBD, LP_D_Q, 0),
    LP_TENSOR_L("attn_k.weight", wk, LP_T_MATRIX, LP_D_EMBD, LP_D_KV, 0),
    LP_TENSOR_L("attn_v.weight", wv, LP_T_MATRIX | LP_T_OPTIONAL, LP_D_EMBD, LP_D_KV, 0),
    LP_TENSOR_L("attn_q_norm.weight", q_norm, 0, LP_D_HEAD, LP_D_NONE, LP_FEAT_QK_NORM),
    LP_TENSOR_L("attn_k_norm.weight", k_norm, 0, LP_D_HEAD, LP_D_NONE, LP_FEAT_QK_NORM),
    LP_TENSOR_L("attn_output.weight", wo, LP_T_MATRIX, LP_D_Q, LP_D_EMBD, 0),
    LP_TENSOR_L("post_attention_norm.weight", post_attn_norm, 0, LP_D_EMBD, LP_D_NONE,
                LP_FEAT_POST_NORM),
    LP_TENSOR_L("ffn_norm.weight", ffn_norm, 0, LP_D_EMBD, LP_D_NONE, 0),
    LP_TENSOR_L("ffn_gate.weight", w_gate, LP_T_MATRIX, LP_D_EMBD, LP_D_FF, 0),
    LP_TENSOR_L("ffn_up.weight", w_up, LP_T_MATRIX, LP_D_EMBD, LP_D_FF, 0),
    LP_TENSOR_L("ffn_down.weight", w_down, LP_T_MATRIX, LP_D_FF, LP_D_EMBD, 0),
    LP_TENSOR_L("post_ffw_norm.weight", post_ffn_norm, 0, LP_D_EMBD, LP_D_NONE, LP_FEAT_POST_NORM),
    LP_TENSOR_L("layer_output_scale.weight", out_scale, LP_T_OPTIONAL, LP_D_ONE, LP_D_NONE,
                LP_FEAT_OUT_SCALE),
    LP_TENSOR_END,
};

/* A key that must be 0 (or absent): what it turns on is not implemented. */
static int must_be_zero(lp_arch_ld_t *ld, const char *suffix, const char *what)
{
    uint32_t v = 0;
    int rc = lp_ld_u32(ld, suffix, false, &v);
    if (rc && rc != LP_ERR(ENOENT)) return rc;
    return v ? lp_ld_refuse(ld, suffix, "%u: %s not implemented yet", v, what) : 0;
}

/* A head size key pair; 0 when absent. */
static int head_size(lp_arch_ld_t *ld, const char *k, const char *v, uint32_t *out)
{
    uint32_t kl = 0, vl = 0;
    int rc = lp_ld_u32(ld, k, false, &kl);
    if (rc && rc != LP_ERR(ENOENT)) return rc;
    if ((rc = lp_ld_u32(ld, v, false, &vl)) && rc != LP_ERR(ENOENT)) return rc;
    if (kl && vl && kl != vl)
        return lp_ld_refuse(ld, v, "%u differs from %u: different K and V head sizes are not "
                            "implemented", vl, kl);
    *out = kl ? kl : vl;
    if (*out > 1024 || *out % 2) return lp_ld_refuse(ld, k, "%u is not an even size up to 1024", *out);
    return 0;
}

static int hparams(lp_arch_ld_t *ld)
{
    lp_model_t *m = lp_ld_model(ld);
    lp_hparams_t *hp = &m->hp;
    int rc = lp_arch_std_hparams(ld, true);
    if (!rc) rc = must_be_zero(ld, "embedding_length_per_layer_input",
                               "per-layer embeddings (Gemma 4 E2B/E4B) are");
    if (!rc) rc = must_be_zero(ld, "attention.shared_kv_layers", "KV sharing between layers is");
    if (!rc) rc = lp_arch_no_experts(ld);
    uint32_t n_ff_exp;
    if (!rc && (rc = lp_ld_u32(ld, "expert_feed_forward_length", false, &n_ff_exp)) == LP_ERR(ENOENT))
        rc = 0; /* meaningless without experts */
    if (rc) return rc;
    hp->embd_scale = sqrtf((float)hp->n_embd);
    lp_ld_feature(ld, LP_FEAT_EMBD_SCALE | LP_FEAT_GEGLU | LP_FEAT_V_NORM | LP_FEAT_ATTN_SCALE,
                  "!the gemma4 architecture");

    float cap = 30.0f;
    if ((rc = lp_ld_f32(ld, "final_logit_softcapping", false, &cap)) && rc != LP_ERR(ENOENT))
        return rc;
    if (cap < 0) return lp_ld_refuse(ld, "final_logit_softcapping", "%g is negative", cap);
    if (cap > 0) {
        hp->logit_softcap = cap;
        lp_ld_feature(ld, LP_FEAT_SOFTCAP, "final_logit_softcapping");
    }

    uint32_t n_swa = 0, hd_swa = 0, n_rot_swa = 0;
    if ((rc = lp_ld_u32(ld, "attention.sliding_window", true, &n_swa))) return rc;
    if (!n_swa || n_swa > (1u << 30))
        return lp_ld_refuse(ld, "attention.sliding_window", "%u is not a window size", n_swa);
    if ((rc = head_size(ld, "attention.key_length_swa", "attention.value_length_swa", &hd_swa)))
        return rc;
    if (!hd_swa) hd_swa = (uint32_t)m->layers[0].hp.head_dim;
    n_rot_swa = hd_swa;
    if ((rc = lp_ld_u32(ld, "rope.dimension_count_swa", false, &n_rot_swa)) && rc != LP_ERR(ENOENT))
        return rc;
    if (!n_rot_swa || n_rot_swa > hd_swa || n_rot_swa % 2)
        return lp_ld_refuse(ld, "rope.dimension_count_swa", "%u is not an even number up to the "
                            "head size %u", n_rot_swa, hd_swa);
    float base_swa = m->ropes[0].base;
    if ((rc = lp_ld_f32(ld, "rope.freq_base_swa", false, &base_swa)) && rc != LP_ERR(ENOENT))
        return rc;
    if (!(base_swa > 0))
        return lp_ld_refuse(ld, "rope.freq_base_swa", "%g is not positive", base_swa);
    m->ropes[1] = (lp_rope_t){(int32_t)n_rot_swa, base_swa, m->ropes[0].freq_scale, NULL, true};
    m->n_ropes = 2;

    int32_t *swa = malloc(sizeof(int32_t) * (size_t)hp->n_layer);
    if (!swa) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    rc = lp_ld_layers(ld, "attention.sliding_window_pattern", true, swa);
    for (int32_t l = 0; !rc && l < hp->n_layer; l++) {
        lp_layer_hp_t *L = &m->layers[l].hp;
        L->attn_scale = 1.0f;
        if (!swa[l]) continue;
        L->head_dim = (int32_t)hd_swa;
        L->n_swa = (int32_t)n_swa;
        L->rope = 1;
        L->kv_group = 1;
    }
    free(swa);
    if (!rc) lp_ld_feature(ld, LP_FEAT_SWA, "attention.sliding_window");
    return rc;
}

static int check(lp_arch_ld_t *ld)
{
    lp_model_t *m = lp_ld_model(ld);
    m->ropes[0].freq_factors = m->rope_freqs;
    for (int32_t l = 0; l < m->hp.n_layer; l++)
        if (!m->layers[l].wv.data) {
            char cause[64];
            snprintf(cause, sizeof(cause), "!no tensor 'blk.%d.attn_v.weight'", l);
            lp_ld_feature(ld, LP_FEAT_K_AS_V, cause);
        }
    return 0;
}

static int layer(const lp_fwd_t *f, const lp_model_t *m, int32_t l)
{
    const lp_fwd_ops_t *o = f->ops;
    void *c = f->ctx;
    const lp_layer_t *L = &m->layers[l];
    const int32_t nh = m->hp.n_head, nkv = L->hp.n_head_kv, hd = L->hp.head_dim;
    const lp_weight_t *qkv[3] = {&L->wq, &L->wk, &L->wv};
    const lp_weight_t *gate_up[2] = {&L->w_gate, &L->w_up};
    static const enum lp_buf qkv_out[3] = {LP_BUF_Q, LP_BUF_K, LP_BUF_V};
    static const enum lp_buf gate_up_out[2] = {LP_BUF_GATE, LP_BUF_UP};
    int rc;
    /* attention block; without attn_v, v is k before its norm and RoPE */
    if ((rc = o->norm(c, LP_BUF_XN, LP_BUF_X, L->attn_norm, 1, m->hp.n_embd)) ||
        (rc = o->matmul(c, L->wv.data ? 3 : 2, qkv, LP_BUF_XN, qkv_out)) ||
        (!L->wv.data && (rc = o->copy(c, LP_BUF_V, LP_BUF_K, nkv * hd))) ||
        (rc = o->norm(c, LP_BUF_Q, LP_BUF_Q, L->q_norm, nh, hd)) ||
        (rc = o->norm(c, LP_BUF_K, LP_BUF_K, L->k_norm, nkv, hd)) ||
        (rc = o->norm(c, LP_BUF_V, LP_BUF_V, NULL, nkv, hd)) ||
        (rc = o->rope(c, LP_BUF_Q, nh, l)) || (rc = o->rope(c, LP_BUF_K, nkv, l)) ||
        (rc = o->attention(c, l)) || (rc = lp_fwd_mm(f, &L->wo, LP_BUF_ATT, LP_BUF_PROJ)) ||
        (rc = o->norm(c, LP_BUF_PROJ, LP_BUF_PROJ, L->post_attn_norm, 1, m->hp.n_embd)))
        return rc;
    /* feed-forward block (GEGLU) */
    if ((rc = o->add_norm(c, LP_BUF_XN, LP_BUF_X, LP_BUF_PROJ, L->ffn_norm)) ||
        (rc = o->matmul(c, 2, gate_up, LP_BUF_XN, gate_up_out)) ||
        (rc = o->glu(c, LP_ACT_GELU_TANH, L->hp.n_ff)) ||
        (rc = lp_fwd_mm(f, &L->w_down, LP_BUF_GATE, LP_BUF_PROJ)) ||
        (rc = o->norm(c, LP_BUF_PROJ, LP_BUF_PROJ, L->post_ffn_norm, 1, m->hp.n_embd)) ||
        (rc = o->add(c, LP_BUF_X, LP_BUF_PROJ)))
        return rc;
    return L->out_scale ? o->scale(c, LP_BUF_X, L->out_scale[0]) : 0;
}

const lp_arch_t lp_arch_gemma4 = {
    .name = "gemma4",
    .keys = keys,
    .tensors = tensors,
    .hparams = hparams,
    .check = check,
    .layer = layer,
};
