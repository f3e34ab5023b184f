/* qwen35.c - the qwen35 architecture (Qwen3.5 and Qwen3.6 dense: 27B and
 * the small ones), a hybrid of Gated DeltaNet and gated attention layers.
 *
 * Layer l is a Gated DeltaNet layer unless (l + 1) % full_attention_interval
 * == 0 (4 by default, as llama.cpp: three recurrent layers, then one
 * attention layer).  Every block is x += mixer(attn_norm(x)); x +=
 * ffn(post_attention_norm(x)), the FFN SwiGLU.
 *
 * DeltaNet layer (ssm.* keys; d = state_size, Hk = group_count key heads,
 * Hv = time_step_rank value heads, inner_size = Hv * d): attn_qkv gives the
 * channels q (Hk * d) | k (Hk * d) | v (Hv * d), attn_gate z; a causal
 * depthwise convolution of width conv_kernel over the channels (the last
 * conv_kernel - 1 inputs of the sequence as state), SiLU; q and k
 * L2-normalised per head; beta = sigmoid(ssm_beta x), decay =
 * exp(softplus(ssm_alpha x + ssm_dt.bias) * ssm_a); the gated delta rule
 * per value head with key head h % Hk (arch.h, delta_net); the output
 * RMS-normed per head (ssm_norm) times silu(z); ssm_out.
 *
 * Attention layer: attn_q gives per head head_dim of q then head_dim of a
 * gate; q/k RMSNorm per head; RoPE on the first rope.dimension_count dims
 * of each head: llama.cpp's interleaved multi-section RoPE (IMROPE) with
 * rope.dimension_sections, which for text (the same position in the three
 * sections t, h, w) is NEOX RoPE; the attention output times
 * sigmoid(gate), then attn_output.
 *
 * Multi-token prediction layers (nextn_predict_layers) are refused until
 * implemented. */
#include "arch.h"

#include "error.h"

#include <stdlib.h>

static const char *const keys[] = {
    LP_ARCH_STD_KEYS,
    "rope.dimension_sections", "full_attention_interval",
    "ssm.conv_kernel", "ssm.state_size", "ssm.group_count", "ssm.time_step_rank",
    "ssm.inner_size",
    "nextn_predict_layers", /* 0, or refused */
    NULL,
};

#define REC(name, f, flags, d0, d1) LP_TENSOR_L(name, f, LP_T_REC | (flags), d0, d1, 0)
#define ATT(name, f, flags, d0, d1, feat) LP_TENSOR_L(name, f, LP_T_ATTN | (flags), d0, d1, feat)

static const lp_arch_tensor_t tensors[] = {
    LP_TENSOR_G("token_embd.weight", tok_embd, LP_T_MATRIX, LP_D_EMBD, LP_D_VOCAB, 0),
    LP_TENSOR_G("output_norm.weight", output_norm, 0, LP_D_EMBD, LP_D_NONE, 0),
    LP_TENSOR_G("output.weight", output, LP_T_MATRIX | LP_T_OPTIONAL, LP_D_EMBD, LP_D_VOCAB, 0),
    LP_TENSOR_L("attn_norm.weight", attn_norm, 0, LP_D_EMBD, LP_D_NONE, 0),
    /* gated attention */
    ATT("attn_q.weight", wq, LP_T_MATRIX, LP_D_EMBD, LP_D_QG, LP_FEAT_ATTN_GATE),
    ATT("attn_k.weight", wk, LP_T_MATRIX, LP_D_EMBD, LP_D_KV, 0),
    ATT("attn_v.weight", wv, LP_T_MATRIX, LP_D_EMBD, LP_D_KV, 0),
    ATT("attn_q_norm.weight", q_norm, 0, LP_D_HEAD, LP_D_NONE, LP_FEAT_QK_NORM),
    ATT("attn_k_norm.weight", k_norm, 0, LP_D_HEAD, LP_D_NONE, LP_FEAT_QK_NORM),
    ATT("attn_output.weight", wo, LP_T_MATRIX, LP_D_Q, LP_D_EMBD, 0),
    /* Gated DeltaNet */
    REC("attn_qkv.weight", w_qkv, LP_T_MATRIX, LP_D_EMBD, LP_D_SSM_CONV),
    REC("attn_gate.weight", w_z, LP_T_MATRIX, LP_D_EMBD, LP_D_SSM_INNER),
    REC("ssm_conv1d.weight", ssm_conv, 0, LP_D_SSM_KERNEL, LP_D_SSM_CONV),
    REC("ssm_dt.bias", ssm_dt, 0, LP_D_SSM_HEADS, LP_D_NONE),
    REC("ssm_a", ssm_a, 0, LP_D_SSM_HEADS, LP_D_NONE),
    REC("ssm_beta.weight", w_beta, LP_T_MATRIX, LP_D_EMBD, LP_D_SSM_HEADS),
    REC("ssm_alpha.weight", w_alpha, LP_T_MATRIX, LP_D_EMBD, LP_D_SSM_HEADS),
    REC("ssm_norm.weight", ssm_norm, 0, LP_D_SSM_STATE, LP_D_NONE),
    REC("ssm_out.weight", w_ssm_out, LP_T_MATRIX, LP_D_SSM_INNER, LP_D_EMBD),
    /* the FFN's pre-norm has the name of a post-attention norm */
    LP_TENSOR_L("post_attention_norm.weight", ffn_norm, 0, LP_D_EMBD, LP_D_NONE, 0),
    LP_TENSOR_L("ffn_gate.weight", w_gate, LP_T_MATRIX, LP_D_EMBD, LP_D_FF, 0),
    LP_TENSOR_L("ffn_up.weight", w_up, LP_T_MATRIX, LP_D_EMBD, LP_D_FF, 0),
    LP_TENSOR_L("ffn_down.weight", w_down, LP_T_MATRIX, LP_D_FF, LP_D_EMBD, 0),
    LP_TENSOR_END,
};

/* A positive size key, at most `max`. */
static int size_key(lp_arch_ld_t *ld, const char *suffix, uint32_t max, int32_t *out)
{
    uint32_t v = 0;
    int rc = lp_ld_u32(ld, suffix, true, &v);
    if (rc) return rc;
    if (v == 0 || v > max) return lp_ld_refuse(ld, suffix, "%u is not in 1..%u", v, max);
    *out = (int32_t)v;
    return 0;
}

/* IMROPE: pair i of the rotated dims takes the position of section t, h or
 * w by its sector i % sum(sections) (sector % 3 picks the section while it
 * is below 3 * its size); a pair left to the fourth section rotates by a
 * position of its own, 0 for text, which is not implemented. */
static int rope_sections(lp_arch_ld_t *ld, int32_t n_rot)
{
    int32_t sec[4] = {0, 0, 0, 0};
    int rc = lp_ld_ints(ld, "rope.dimension_sections", false, sec, 4);
    if (rc == LP_ERR(ENOENT)) return 0; /* plain NEOX */
    if (rc) return rc;
    int64_t dims = (int64_t)sec[0] + sec[1] + sec[2] + sec[3];
    if (dims <= 0 || dims > 4096)
        return lp_ld_refuse(ld, "rope.dimension_sections", "[%d, %d, %d, %d] has no dimension "
                            "or too many", sec[0], sec[1], sec[2], sec[3]);
    for (int32_t i = 0; i < n_rot / 2; i++) {
        const int64_t s = i % dims;
        const bool t = s % 3 == 0 && s < 3 * (int64_t)sec[0];
        const bool h = s % 3 == 1 && s < 3 * (int64_t)sec[1];
        const bool w = s % 3 == 2 && s < 3 * (int64_t)sec[2];
        if (!t && !h && !w)
            return lp_ld_refuse(ld, "rope.dimension_sections", "[%d, %d, %d, %d] leaves rotated "
                                "pair %d to the fourth section, which is not implemented",
                                sec[0], sec[1], sec[2], sec[3], i);
    }
    return 0;
}

static int hparams(lp_arch_ld_t *ld)
{
    lp_model_t *m = lp_ld_model(ld);
    lp_hparams_t *hp = &m->hp;
    lp_ssm_t *s = &m->ssm;
    int rc = lp_arch_std_hparams(ld, true);
    if (!rc) rc = rope_sections(ld, m->ropes[0].n_rot);
    uint32_t nextn = 0;
    if (!rc && (rc = lp_ld_u32(ld, "nextn_predict_layers", false, &nextn)) == LP_ERR(ENOENT)) rc = 0;
    if (!rc && nextn)
        rc = lp_ld_refuse(ld, "nextn_predict_layers", "%u: multi-token prediction layers are "
                          "not implemented", nextn);
    if (rc) return rc;
    if ((rc = size_key(ld, "ssm.conv_kernel", 64, &s->d_conv)) ||
        (rc = size_key(ld, "ssm.state_size", 1024, &s->d_state)) ||
        (rc = size_key(ld, "ssm.group_count", 1024, &s->n_group)) ||
        (rc = size_key(ld, "ssm.time_step_rank", 1024, &s->n_v_heads)) ||
        (rc = size_key(ld, "ssm.inner_size", 1u << 20, &s->d_inner)))
        return rc;
    if (s->n_v_heads % s->n_group)
        return lp_ld_refuse(ld, "ssm.group_count", "%d key heads do not divide the %d value "
                            "heads (ssm.time_step_rank)", s->n_group, s->n_v_heads);
    if ((int64_t)s->n_v_heads * s->d_state != s->d_inner)
        return lp_ld_refuse(ld, "ssm.inner_size", "%d is not time_step_rank %d x state_size %d: "
                            "value heads of another size are not implemented", s->d_inner,
                            s->n_v_heads, s->d_state);
    s->n_channels = 2 * s->n_group * s->d_state + s->d_inner;

    uint32_t interval = 4;
    if ((rc = lp_ld_u32(ld, "full_attention_interval", false, &interval)) && rc != LP_ERR(ENOENT))
        return rc;
    if (interval == 0 || interval > (uint32_t)hp->n_layer)
        return lp_ld_refuse(ld, "full_attention_interval", "%u is not in 1..%d", interval,
                            hp->n_layer);
    bool rec = false;
    for (int32_t l = 0; l < hp->n_layer; l++) {
        lp_layer_hp_t *L = &m->layers[l].hp;
        if ((l + 1) % (int32_t)interval) {
            L->mixer = LP_MIXER_DELTANET;
            rec = true;
        } else {
            L->attn_gate = true;
        }
    }
    if (rec) lp_ld_feature(ld, LP_FEAT_DELTANET, "ssm.state_size");
    return 0;
}

static int layer(const lp_fwd_t *f, const lp_model_t *m, int32_t l)
{
    int rc = m->layers[l].hp.mixer == LP_MIXER_DELTANET ? lp_arch_delta_net(f, m, l)
                                                        : lp_arch_attention(f, m, l, false);
    return rc ? rc : lp_arch_ffn(f, m, l, LP_ACT_SILU);
}

const lp_arch_t lp_arch_qwen35 = {
    .name = "qwen35",
    .keys = keys,
    .tensors = tensors,
    .hparams = hparams,
    .layer = layer,
};
