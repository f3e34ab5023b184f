/* qwen2.c - the qwen2 architecture (Qwen2, Qwen2.5): the llama block with
 * q/k/v biases and NEOX RoPE (pairs i and i + n_rot/2). */
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
    LP_TENSOR_L("attn_q.bias", bq, LP_T_OPTIONAL, LP_D_Q, LP_D_NONE, 0),
    LP_TENSOR_L("attn_k.bias", bk, LP_T_OPTIONAL, LP_D_KV, LP_D_NONE, 0),
    LP_TENSOR_L("attn_v.bias", bv, LP_T_OPTIONAL, LP_D_KV, LP_D_NONE, 0),
    LP_TENSOR_L("attn_output.weight", wo, LP_T_MATRIX, LP_D_Q, LP_D_EMBD, 0),
    LP_TENSOR_L("ffn_norm.weight", ffn_norm, 0, LP_D_EMBD, LP_D_NONE, 0),
    LP_TENSOR_L("ffn_gate.weight", w_gate, LP_T_MATRIX, LP_D_EMBD, LP_D_FF, 0),
    LP_TENSOR_L("ffn_up.weight", w_up, LP_T_MATRIX, LP_D_EMBD, LP_D_FF, 0),
    LP_TENSOR_L("ffn_down.weight", w_down, LP_T_MATRIX, LP_D_FF, LP_D_EMBD, 0),
    LP_TENSOR_END,
};

static int hparams(lp_arch_ld_t *ld) { return lp_arch_std_hparams(ld, true); }

const lp_arch_t lp_arch_qwen2 = {
    .name = "qwen2",
    .keys = keys,
    .tensors = tensors,
    .hparams = hparams,
    .layer = lp_arch_llama_layer,
};
