/* llama.c - the llama architecture (Llama 2/3.x, TinyLlama, Mistral Nemo
 * style head sizes): pre-norm attention with normal (adjacent-pair) RoPE,
 * SwiGLU.  Also the block that qwen2 and qwen3 reuse.
 *
 * Llama 3.1+ files carry rope_freqs.weight, the per-pair divisors of the
 * "llama3" rope_scaling recipe, which every layer's RoPE applies.  Files
 * with experts (Mixtral) are refused until MoE exists. */
#include "arch.h"

#include "error.h"

static const char *const keys[] = {
    LP_ARCH_STD_KEYS, "rope.scale_linear",
    "vocab_size",        /* the row count of token_embd says it */
    "expert_count", "expert_used_count", /* 0, or refused */
    NULL,
};

static const lp_arch_tensor_t tensors[] = {
    LP_ARCH_STD_TENSORS(0),
    LP_ARCH_BIAS_TENSORS,
    LP_TENSOR_G("rope_freqs.weight", rope_freqs, LP_T_OPTIONAL, LP_D_ROT_PAIRS, LP_D_NONE, LP_FEAT_ROPE_FREQS),
    LP_TENSOR_END,
};

static int hparams(lp_arch_ld_t *ld)
{
    int rc = lp_arch_std_hparams(ld, false);
    if (!rc) rc = lp_arch_no_experts(ld);
    uint32_t n;
    if (!rc && (rc = lp_ld_u32(ld, "vocab_size", false, &n)) == LP_ERR(ENOENT)) rc = 0;
    return rc;
}

static int check(lp_arch_ld_t *ld)
{
    lp_model_t *m = lp_ld_model(ld);
    m->ropes[0].freq_factors = m->rope_freqs;
    return 0;
}

int lp_arch_llama_layer(const lp_fwd_t *f, const lp_model_t *m, int32_t l)
{
    int rc = lp_arch_attention(f, m, l, false);
    return rc ? rc : lp_arch_ffn(f, m, l, LP_ACT_SILU);
}

const lp_arch_t lp_arch_llama = {
    .name = "llama",
    .keys = keys,
    .tensors = tensors,
    .hparams = hparams,
    .check = check,
    .layer = lp_arch_llama_layer,
};
