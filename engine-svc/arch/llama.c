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
    "context_length", "embedding_length", "block_count", "feed_forward_length",
    "attention.head_count", "attention.head_count_kv", "attention.layer_norm_rms_epsilon",
    "attention.key_length", "attention.value_length", "rope.dimension_count", "rope.freq_base",
    "rope.scaling.type", "rope.scaling.factor", "rope.scale_linear",
    "vocab_size",        /* the row count of token_embd says it */
    "expert_count", "expert_used_count", /* 0, or refused */
    NULL,
};

static const lp_arch_tensor_t tensors[] = {
    LP_TENSOR_G("token_embd.weight", tok_embd, LP_T_MATRIX, LP_D_EMBD, LP_D_VOCAB, 0),
    LP_TENSOR_G("output_norm.weight", output_norm, 0, LP_D_EMBD, LP_D_NONE, 0),
    LP_TENSOR_G("output.weight", output, LP_T_MATRIX | LP_T_OPTIONAL, LP_D_EMBD, LP_D_VOCAB, 0),
    LP_TENSOR_G("rope_freqs.weight", rope_freqs, LP_T_OPTIONAL, LP_D_ROT_PAIRS, LP_D_NONE, LP_FEAT_ROPE_FREQS),
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
    const lp_fwd_ops_t *o = f->ops;
    void *c = f->ctx;
    const lp_layer_t *L = &m->layers[l];
    const int32_t nh = m->hp.n_head, nkv = L->hp.n_head_kv, hd = L->hp.head_dim;
    const lp_weight_t *qkv[3] = {&L->wq, &L->wk, &L->wv};
    const lp_weight_t *gate_up[2] = {&L->w_gate, &L->w_up};
    static const enum lp_buf qkv_out[3] = {LP_BUF_Q, LP_BUF_K, LP_BUF_V};
    static const enum lp_buf gate_up_out[2] = {LP_BUF_GATE, LP_BUF_UP};
    int rc;
    /* attention block */
    if ((rc = o->norm(c, LP_BUF_XN, LP_BUF_X, L->attn_norm, 1, m->hp.n_embd)) ||
        (rc = o->matmul(c, 3, qkv, LP_BUF_XN, qkv_out)))
        return rc;
    if ((L->bq && (rc = o->bias(c, LP_BUF_Q, L->bq, nh * hd))) ||
        (L->bk && (rc = o->bias(c, LP_BUF_K, L->bk, nkv * hd))) ||
        (L->bv && (rc = o->bias(c, LP_BUF_V, L->bv, nkv * hd))))
        return rc;
    if ((L->q_norm && (rc = o->norm(c, LP_BUF_Q, LP_BUF_Q, L->q_norm, nh, hd))) ||
        (L->k_norm && (rc = o->norm(c, LP_BUF_K, LP_BUF_K, L->k_norm, nkv, hd))))
        return rc;
    if ((rc = o->rope(c, LP_BUF_Q, nh, l)) || (rc = o->rope(c, LP_BUF_K, nkv, l)) ||
        (rc = o->attention(c, l)) || (rc = lp_fwd_mm(f, &L->wo, LP_BUF_ATT, LP_BUF_PROJ)))
        return rc;
    /* feed-forward block */
    if ((rc = o->add_norm(c, LP_BUF_XN, LP_BUF_X, LP_BUF_PROJ, L->ffn_norm)) ||
        (rc = o->matmul(c, 2, gate_up, LP_BUF_XN, gate_up_out)) ||
        (rc = o->glu(c, LP_ACT_SILU, L->hp.n_ff)) ||
        (rc = lp_fwd_mm(f, &L->w_down, LP_BUF_GATE, LP_BUF_PROJ)))
        return rc;
    return o->add(c, LP_BUF_X, LP_BUF_PROJ);
}

const lp_arch_t lp_arch_llama = {
    .name = "llama",
    .keys = keys,
    .tensors = tensors,
    .hparams = hparams,
    .check = check,
    .layer = lp_arch_llama_layer,
};
