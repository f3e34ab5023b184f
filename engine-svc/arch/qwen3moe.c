/* qwen3moe.c - the qwen3moe architecture (Qwen3-30B-A3B, Qwen3-235B-A22B):
 * Qwen3's attention (per-head q/k RMSNorm before NEOX RoPE, head size from
 * key_length, no biases) and a mixture of experts in every FFN, without a
 * shared expert.
 *
 * Routing as llama.cpp's qwen3moe graph: p = softmax of the router logits
 * (ffn_gate_inp) over all expert_count experts; the expert_used_count
 * largest p, divided by their sum; each chosen expert a SwiGLU of
 * expert_feed_forward_length (ffn_{gate,up,down}_exps, one matrix per
 * expert).  feed_forward_length is in real files but no tensor uses it. */
#include "arch.h"

static const char *const keys[] = {LP_ARCH_STD_KEYS, LP_ARCH_MOE_KEYS, NULL};

static const lp_arch_tensor_t tensors[] = {
    LP_TENSOR_G("token_embd.weight", tok_embd, LP_T_MATRIX, LP_D_EMBD, LP_D_VOCAB, 0),
    LP_TENSOR_G("output_norm.weight", output_norm, 0, LP_D_EMBD, LP_D_NONE, 0),
    LP_TENSOR_G("output.weight", output, LP_T_MATRIX | LP_T_OPTIONAL, LP_D_EMBD, LP_D_VOCAB, 0),
    LP_TENSOR_L("attn_norm.weight", attn_norm, 0, LP_D_EMBD, LP_D_NONE, 0),
    LP_TENSOR_L("attn_q.weight", wq, LP_T_MATRIX, LP_D_EMBD, LP_D_Q, 0),
    LP_TENSOR_L("attn_k.weight", wk, LP_T_MATRIX, LP_D_EMBD, LP_D_KV, 0),
    LP_TENSOR_L("attn_v.weight", wv, LP_T_MATRIX, LP_D_EMBD, LP_D_KV, 0),
    LP_TENSOR_L("attn_output.weight", wo, LP_T_MATRIX, LP_D_Q, LP_D_EMBD, 0),
    LP_ARCH_QK_NORM_TENSORS,
    LP_TENSOR_L("ffn_norm.weight", ffn_norm, 0, LP_D_EMBD, LP_D_NONE, 0),
    LP_ARCH_MOE_TENSORS,
    LP_TENSOR_END,
};

static int hparams(lp_arch_ld_t *ld)
{
    int rc = lp_arch_std_hparams(ld, true);
    return rc ? rc : lp_arch_moe_hparams(ld, false);
}

static int layer(const lp_fwd_t *f, const lp_model_t *m, int32_t l)
{
    int rc = lp_arch_attention(f, m, l, false);
    return rc ? rc : lp_arch_moe_ffn(f, m, l, LP_MOE_SOFTMAX, true, LP_ACT_SILU);
}

const lp_arch_t lp_arch_qwen3moe = {
    .name = "qwen3moe",
    .keys = keys,
    .tensors = tensors,
    .hparams = hparams,
    .layer = layer,
};
