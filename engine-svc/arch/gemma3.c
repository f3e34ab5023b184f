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
    LP_ARCH_STD_KEYS,
    "attention.sliding_window", "attention.sliding_window_pattern", "rope.freq_base_swa",
    "final_logit_softcapping",
    NULL,
};

static const lp_arch_tensor_t tensors[] = {
    LP_ARCH_STD_TENSORS(0),
    LP_ARCH_QK_NORM_TENSORS,
    LP_ARCH_POST_NORM_TENSORS,
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

    if ((rc = lp_arch_softcap(ld, 0))) return rc;

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
    m->ropes[1] = (lp_rope_t){.n_rot = m->ropes[0].n_rot, .base = base_swa, .freq_scale = 1.0f, .neox = true};
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

/* Attention and GEGLU, each output normalised before its residual add. */
static int layer(const lp_fwd_t *f, const lp_model_t *m, int32_t l)
{
    int rc = lp_arch_attention(f, m, l, false);
    return rc ? rc : lp_arch_ffn(f, m, l, LP_ACT_GELU_TANH);
}

const lp_arch_t lp_arch_gemma3 = {
    .name = "gemma3",
    .keys = keys,
    .tensors = tensors,
    .hparams = hparams,
    .layer = layer,
};
