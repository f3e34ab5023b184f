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
    LP_ARCH_STD_KEYS,
    "attention.key_length_swa", "attention.value_length_swa", "rope.dimension_count_swa",
    "rope.freq_base_swa", "attention.sliding_window", "attention.sliding_window_pattern",
    "final_logit_softcapping",
    "embedding_length_per_layer_input", "attention.shared_kv_layers", /* 0, or refused */
    "expert_count", "expert_used_count", "expert_feed_forward_length", /* no experts */
    NULL,
};

static const lp_arch_tensor_t tensors[] = {
    LP_ARCH_STD_TENSORS(LP_T_OPTIONAL), /* no attn_v: v from the k projection */
    LP_ARCH_QK_NORM_TENSORS,
    LP_ARCH_POST_NORM_TENSORS,
    LP_TENSOR_G("rope_freqs.weight", rope_freqs, LP_T_OPTIONAL, LP_D_ROT_PAIRS, LP_D_NONE,
                LP_FEAT_ROPE_FREQS),
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

    if ((rc = lp_arch_softcap(ld, 30.0f))) return rc;

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
    m->ropes[1] = (lp_rope_t){.n_rot = (int32_t)n_rot_swa, .base = base_swa,
                              .freq_scale = m->ropes[0].freq_scale, .neox = true};
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

/* Gemma 3's block with a V norm, then the layer's output scale. */
static int layer(const lp_fwd_t *f, const lp_model_t *m, int32_t l)
{
    int rc = lp_arch_attention(f, m, l, true);
    if (!rc) rc = lp_arch_ffn(f, m, l, LP_ACT_GELU_TANH);
    if (!rc && m->layers[l].out_scale) rc = f->ops->scale(f->ctx, LP_BUF_X, m->layers[l].out_scale[0]);
    return rc;
}

const lp_arch_t lp_arch_gemma4 = {
    .name = "gemma4",
    .keys = keys,
    .tensors = tensors,
    .hparams = hparams,
    .check = check,
    .layer = layer,
};
