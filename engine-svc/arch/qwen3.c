/* qwen3.c - the qwen3 architecture (Qwen3 dense, 0.6B to 32B): the llama
 * block without biases, with a per-head RMSNorm of q and k (attn_q_norm,
 * attn_k_norm, head_dim wide, eps layer_norm_rms_epsilon) after the
 * projections and before NEOX RoPE; the head size comes from key_length
 * (128 while n_embd / n_head is 64 on Qwen3-0.6B). */
#include "arch.h"

static const char *const keys[] = {
    "context_length", "embedding_length", "block_count", "feed_forward_length",
    "attention.head_count", "attention.head_count_kv", "attention.layer_norm_rms_epsilon",
    "attention.key_length", "attention.value_length", "rope.dimension_count", "rope.freq_base",
    "rope.scaling.type", "rope.scaling.factor",
    NULL,
};

static const lp_arch_tensor_t tensors[] = {
    LP_TENSOR_G("token_embd.weight", tok_embd, LP_T_MATRIX, LP_D_EMBD, LP_D_VOCAB, 0),
    LP_TENSOR_G("output_norm.weight", output_norm, 0, LP_D_EMBD, LP_D_NONE, 0),
    LP_TENSOR_G("output.weight", output, LP_T_MATRIX | LP_T_OPTIONAL, LP_D_EMBD, LP_D_VOCAB, 0),
    LP_TENSOR_L("attn_norm.weight", attn_norm, 0, LP_D_EMBD, LP_D_NONE, 0),
    LP_TENSOR_L("attn_q.weight", wq, LP_T_MATRIX, LP_D_EMBD, LP_D_Q, 0),
    LP_TENSOR_L("attn_k.weight", wk, LP_T_MATRIX, LP_D_EMBD, LP_D_KV, 0),
    LP_TENSOR_L("attn_v.weight", wv, LP_T_MATRIX, LP_D_EMBD, LP_D_KV, 0),
    LP_TENSOR_L("attn_q_norm.weight", q_norm, 0, LP_D_HEAD, LP_D_NONE, LP_FEAT_QK_NORM),
    LP_TENSOR_L("attn_k_norm.weight", k_norm, 0, LP_D_HEAD, LP_D_NONE, LP_FEAT_QK_NORM),
    LP_TENSOR_L("attn_output.weight", wo, LP_T_MATRIX, LP_D_Q, LP_D_EMBD, 0),
    LP_TENSOR_L("ffn_norm.weight", ffn_norm, 0, LP_D_EMBD, LP_D_NONE, 0),
    LP_TENSOR_L("ffn_gate.weight", w_gate, LP_T_MATRIX, LP_D_EMBD, LP_D_FF, 0),
    LP_TENSOR_L("ffn_up.weight", w_up, LP_T_MATRIX, LP_D_EMBD, LP_D_FF, 0),
    LP_TENSOR_L("ffn_down.weight", w_down, LP_T_MATRIX, LP_D_FF, LP_D_EMBD, 0),
    LP_TENSOR_END,
};

static int hparams(lp_arch_ld_t *ld) { return lp_arch_std_hparams(ld, true); }

const lp_arch_t lp_arch_qwen3 = {
    .name = "qwen3",
    .keys = keys,
    .tensors = tensors,
    .hparams = hparams,
    .layer = lp_arch_llama_layer,
};
