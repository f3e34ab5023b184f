/* gemma3.c - the gemma3 architecture (Gemma 3 text, 1B to 27B).
 *
 * Embeddings times sqrt(n_embd); per-head q/k RMSNorm before NEOX RoPE;
 * sandwich norms (post_attention_norm on the attention output,
 * post_ffw_norm on the FFN output, each before its residual add; the
 * converter already added 1 to every norm weight); GEGLU with llama.cpp's
 * fp16 GELU table; tied output.
 *
 * Sliding window: attention.sliding_window W (a query at p sees p-W+1..p)
 * on the layers of llama.cpp's pattern, period attention.sliding_window_
 * pattern (default 6: five sliding layers, then a global one).  Sliding
 * layers use rope.freq_base_swa (default 10000) without scaling; global
 * layers rope.freq_base with rope.scaling.  Without the window key every
 * layer is global.  The attention scale is llama.cpp's: 1/sqrt(head_dim),
 * 1/sqrt(n_embd / n_head) on the 62-layer 27B. */
#include "arch.h"

#include "error.h"

#include <math.h>

static const char *const keys[] = {
    "context_length", "embedding_length", "block_count", "feed_forward_length",
    "attention.head_count", "attention.head_count_kv", "attention.layer_norm_rms_epsilon",
    "attention.key_length", "attention.value_length", "rope.dimension_count", "rope.freq_base",
    "rope.scaling.type", "rope.scaling.factor",
    "attention.sliding_window", "attention.sliding_window_pattern", "rope.freq_base_swa",
    "final_logit_softcapping",
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
    LP_TENSOR_L("post_attention_norm.weight", post_attn_norm, 0, LP_D_EMBD, LP_D_NONE,
                LP_FEAT_POST_NORM),
    LP_TENSOR_L("ffn_norm.weight", ffn_norm, 0, LP_D_EMBD, LP_D_NONE, 0),
    LP_TENSOR_L("ffn_gate.weight", w_gate, LP_T_MATRIX, LP_D_EMBD, LP_D_FF, 0),
    LP_TENSOR_L("ffn_up.weight", w_up, LP_T_MATRIX, LP_D_EMBD, LP_D_FF, 0),
    LP_TENSOR_L("ffn_down.weight", w_down, LP_T_MATRIX, LP_D_FF, LP_D_EMBD, 0),
    LP_TENSOR_L("post_ffw_norm.weight", post_ffn_norm, 0, LP_D_EMBD, LP_D_NONE, LP_FEAT_POST_NORM),
    LP_TENSOR_END,
};

static int hparams(lp_arch_ld_t *ld)
{
    lp_model_t *m = lp_ld_model(ld);
    lp_hparams_t *hp = &m->hp;
    int rc = lp_arch_std_hparams(ld, true);
    if (rc) return rc;
    hp->embd_scale = sqrtf((float)hp->n_embd);
    lp_ld_feature(ld, LP_FEAT_EMBD_SCALE | LP_FEAT_GEGLU, "!the gemma3 architecture");

    const float scale = hp->n_layer == 62 ? 1.0f / sqrtf((float)(hp->n_embd / hp->n_head))
                                          : 1.0f / sqrtf((float)m->layers[0].hp.head_dim);
    if (scale != m->layers[0].hp.attn_scale)
        lp_ld_feature(ld, LP_FEAT_ATTN_SCALE, "!the 62-layer gemma3 (27B)");
    for (int32_t l = 0; l < hp->n_layer; l++) m->layers[l].hp.attn_scale = scale;

    float cap = 0;
    if ((rc = lp_ld_f32(ld, "final_logit_softcapping", false, &cap)) && rc != LP_ERR(ENOENT))
        return rc;
    if (cap < 0) return lp_ld_refuse(ld, "final_logit_softcapping", "%g is negative", cap);
    if (cap > 0) {
        hp->logit_softcap = cap;
        lp_ld_feature(ld, LP_FEAT_SOFTCAP, "final_logit_softcapping");
    }

    uint32_t n_swa = 0, period = 6;
    if ((rc = lp_ld_u32(ld, "attention.sliding_window", false, &n_swa)) && rc != LP_ERR(ENOENT))
        return rc;
    if ((rc = lp_ld_u32(ld, "attention.sliding_window_pattern", false, &period)) &&
        rc != LP_ERR(ENOENT))
        return rc;
    float base_swa = 10000.0f;
    if ((rc = lp_ld_f32(ld, "rope.freq_base_swa", false, &base_swa)) && rc != LP_ERR(ENOENT))
        return rc;
    if (!n_swa) return 0; /* every layer global */
    if (n_swa > (1u << 30)) return lp_ld_refuse(ld, "attention.sliding_window", "%u is too large", n_swa);
    if (!(base_swa > 0))
        return lp_error_set(LP_ERR(EINVAL), "key 'gemma3.rope.freq_base_swa': %g is not positive",
                            base_swa);
    m->ropes[1] = (lp_rope_t){m->ropes[0].n_rot, base_swa, 1.0f, NULL, true};
    m->n_ropes = 2;
    for (int32_t l = 0; l < hp->n_layer; l++) {
        /* llama.cpp's set_swa_pattern: period 0 slides everywhere */
        if (period && (uint32_t)l % period >= period - 1) continue;
        lp_layer_hp_t *L = &m->layers[l].hp;
        L->n_swa = (int32_t)n_swa;
        L->rope = 1;
        L->kv_group = 1;
    }
    lp_ld_feature(ld, LP_FEAT_SWA, "attention.sliding_window");
    return 0;
}

static int layer(const lp_fwd_t *f, const lp_model_t *m, int32_t l)
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
    /* attention block, its output normalised before the residual add */
    if ((rc = o->norm(c, LP_BUF_XN, LP_BUF_X, L->attn_norm, 1, m->hp.n_embd)) ||
        (rc = o->matmul(c, 3, qkv, LP_BUF_XN, qkv_out)) ||
        (rc = o->norm(c, LP_BUF_Q, LP_BUF_Q, L->q_norm, nh, hd)) ||
        (rc = o->norm(c, LP_BUF_K, LP_BUF_K, L->k_norm, nkv, hd)) ||
        (rc = o->rope(c, LP_BUF_Q, nh, l)) || (rc = o->rope(c, LP_BUF_K, nkv, l)) ||
        (rc = o->attention(c, l)) || (rc = lp_fwd_mm(f, &L->wo, LP_BUF_ATT, LP_BUF_PROJ)) ||
        (rc = o->norm(c, LP_BUF_PROJ, LP_BUF_PROJ, L->post_attn_norm, 1, m->hp.n_embd)))
        return rc;
    /* feed-forward block (GEGLU), likewise */
    if ((rc = o->add_norm(c, LP_BUF_XN, LP_BUF_X, LP_BUF_PROJ, L->ffn_norm)) ||
        (rc = o->matmul(c, 2, gate_up, LP_BUF_XN, gate_up_out)) ||
        (rc = o->glu(c, LP_ACT_GELU_TANH, L->hp.n_ff)) ||
        (rc = lp_fwd_mm(f, &L->w_down, LP_BUF_GATE, LP_BUF_PROJ)) ||
        (rc = o->norm(c, LP_BUF_PROJ, LP_BUF_PROJ, L->post_ffn_norm, 1, m->hp.n_embd)))
        return rc;
    return o->add(c, LP_BUF_X, LP_BUF_PROJ);
}

const lp_arch_t lp_arch_gemma3 = {
    .name = "gemma3",
    .keys = keys,
    .tensors = tensors,
    .hparams = hparams,
    .layer = layer,
};
