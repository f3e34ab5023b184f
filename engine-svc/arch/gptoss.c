/* gptoss.c - the gpt-oss architecture (gpt-oss-20b, gpt-oss-120b).
 *
 * Attention with q/k/v and output biases, NEOX RoPE with YaRN
 * (rope.scaling.*), head size from key_length (64, apart from n_embd) and
 * one learned sink logit per head (attn_sinks) in every softmax; layers
 * 0, 2, 4, ... see a sliding window of attention.sliding_window positions,
 * the others everything.  The FFN is a mixture of experts as llama.cpp's
 * gpt-oss graph: post_attention_norm is its pre-norm; router logits plus
 * ffn_gate_inp.bias, the expert_used_count largest, softmax over those
 * only (no renormalisation); each expert's gate and up plus their biases,
 * SwiGLU-OAI (clamp 7, alpha 1.702, up + 1), down plus its bias.  The
 * experts are MXFP4 in real files. */
#include "arch.h"

#include "error.h"

static const char *const keys[] = {
    LP_ARCH_STD_KEYS, LP_ARCH_MOE_KEYS, "attention.sliding_window",
    "rope.scaling.original_context_length", NULL,
};

static const lp_arch_tensor_t tensors[] = {
    LP_TENSOR_G("token_embd.weight", tok_embd, LP_T_MATRIX, LP_D_EMBD, LP_D_VOCAB, 0),
    LP_TENSOR_G("output_norm.weight", output_norm, 0, LP_D_EMBD, LP_D_NONE, 0),
    LP_TENSOR_G("output.weight", output, LP_T_MATRIX | LP_T_OPTIONAL, LP_D_EMBD, LP_D_VOCAB, 0),
    LP_TENSOR_L("attn_norm.weight", attn_norm, 0, LP_D_EMBD, LP_D_NONE, 0),
    LP_TENSOR_L("attn_q.weight", wq, LP_T_MATRIX, LP_D_EMBD, LP_D_Q, 0),
    LP_TENSOR_L("attn_k.weight", wk, LP_T_MATRIX, LP_D_EMBD, LP_D_KV, 0),
    LP_TENSOR_L("attn_v.weight", wv, LP_T_MATRIX, LP_D_EMBD, LP_D_KV, 0),
    LP_TENSOR_L("attn_output.weight", wo, LP_T_MATRIX, LP_D_Q, LP_D_EMBD, 0),
    LP_ARCH_BIAS_TENSORS,
    LP_TENSOR_L("attn_output.bias", bo, LP_T_OPTIONAL, LP_D_EMBD, LP_D_NONE, LP_FEAT_OUT_BIAS),
    LP_TENSOR_L("attn_sinks.weight", attn_sinks, 0, LP_D_HEADS, LP_D_NONE, LP_FEAT_ATTN_SINKS),
    /* the norm before the experts */
    LP_TENSOR_L("post_attention_norm.weight", ffn_norm, 0, LP_D_EMBD, LP_D_NONE, 0),
    LP_ARCH_MOE_TENSORS,
    LP_TENSOR_L("ffn_gate_inp.bias", ffn_gate_inp_b, LP_T_OPTIONAL, LP_D_EXPERTS, LP_D_NONE,
                LP_FEAT_MOE),
    LP_TENSOR_L("ffn_gate_exps.bias", ffn_gate_exps_b, LP_T_OPTIONAL | LP_T_EXPERTS, LP_D_FF_EXP,
                LP_D_EXPERTS, LP_FEAT_MOE),
    LP_TENSOR_L("ffn_up_exps.bias", ffn_up_exps_b, LP_T_OPTIONAL | LP_T_EXPERTS, LP_D_FF_EXP,
                LP_D_EXPERTS, LP_FEAT_MOE),
    LP_TENSOR_L("ffn_down_exps.bias", ffn_down_exps_b, LP_T_OPTIONAL | LP_T_EXPERTS, LP_D_EMBD,
                LP_D_EXPERTS, LP_FEAT_MOE),
    LP_TENSOR_END,
};

static int hparams(lp_arch_ld_t *ld)
{
    lp_model_t *m = lp_ld_model(ld);
    int rc;
    if ((rc = lp_arch_std_hparams(ld, true)) || (rc = lp_arch_moe_hparams(ld, false))) return rc;
    lp_ld_feature(ld, LP_FEAT_SWIGLU_OAI, "!the gpt-oss architecture");
    uint32_t n_swa = 0;
    if ((rc = lp_ld_u32(ld, "attention.sliding_window", false, &n_swa)) && rc != LP_ERR(ENOENT))
        return rc;
    if (!n_swa) return 0;
    if (n_swa > (1u << 30))
        return lp_ld_refuse(ld, "attention.sliding_window", "%u is too large", n_swa);
    /* llama.cpp's swa pattern 2: even layers slide, odd ones see everything */
    for (int32_t l = 0; l < m->hp.n_layer; l += 2) {
        m->layers[l].hp.n_swa = (int32_t)n_swa;
        m->layers[l].hp.kv_group = 1;
    }
    lp_ld_feature(ld, LP_FEAT_SWA, "attention.sliding_window");
    return 0;
}

static int layer(const lp_fwd_t *f, const lp_model_t *m, int32_t l)
{
    int rc = lp_arch_attention(f, m, l, false);
    return rc ? rc : lp_arch_moe_ffn(f, m, l, LP_MOE_TOPK_SOFTMAX, false, LP_ACT_SWIGLU_OAI);
}

const lp_arch_t lp_arch_gptoss = {
    .name = "gpt-oss",
    .keys = keys,
    .tensors = tensors,
    .hparams = hparams,
    .layer = layer,
};
