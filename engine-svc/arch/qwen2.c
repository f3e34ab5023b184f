/* qwen2.c - the qwen2 architecture (Qwen2, Qwen2.5): the llama block with
 * q/k/v biases and NEOX RoPE (pairs i and i + n_rot/2). */
#include "arch.h"

static const char *const keys[] = {LP_ARCH_STD_KEYS, NULL};

static const lp_arch_tensor_t tensors[] = {
    LP_ARCH_STD_TENSORS(0),
    LP_ARCH_BIAS_TENSORS,
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
