/* qwen3.c - the qwen3 architecture (Qwen3 dense, 0.6B to 32B): the llama
 * block without biases, with a per-head RMSNorm of q and k (attn_q_norm,
 * attn_k_norm, head_dim wide, eps layer_norm_rms_epsilon) after the
 * projections and before NEOX RoPE; the head size comes from key_length
 * (128 while n_embd / n_head is 64 on Qwen3-0.6B). */
#include "arch.h"

static const char *const keys[] = {LP_ARCH_STD_KEYS, NULL};

static const lp_arch_tensor_t tensors[] = {
    LP_ARCH_STD_TENSORS(0),
    LP_ARCH_QK_NORM_TENSORS,
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
