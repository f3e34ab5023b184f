/* arch.c - the list of architectures, feature names, and the keys every
 * transformer here reads the same way (arch.h). */
#include "arch.h"

#include "error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const lp_arch_t lp_arch_llama, lp_arch_qwen2, lp_arch_qwen3, lp_arch_gemma3,
    lp_arch_gemma4, lp_arch_qwen3moe, lp_arch_gptoss, lp_arch_qwen35;

const lp_arch_t *const lp_archs[] = {
    &lp_arch_llama, &lp_arch_qwen2, &lp_arch_qwen3, &lp_arch_gemma3, &lp_arch_gemma4,
    &lp_arch_qwen3moe, &lp_arch_gptoss, &lp_arch_qwen35, NULL,
};

const char *lp_arch_names(void)
{
    static char names[256];
    if (!names[0]) {
        size_t at = 0;
        for (int i = 0; lp_archs[i] && at < sizeof(names); i++)
            at += (size_t)snprintf(names + at, sizeof(names) - at, "%s%s", i ? ", " : "",
                                   lp_archs[i]->name);
    }
    return names;
}

static const char *const feat_names[LP_FEAT_COUNT] = {
    "RoPE frequency factors",
    "linear RoPE scaling",
    "a head size other than n_embd / n_head",
    "per-head q/k RMSNorm",
    "RMSNorm of the attention and FFN outputs",
    "GELU-gated feed-forward (GEGLU)",
    "scaled token embeddings",
    "sliding-window attention",
    "head sizes and KV heads that differ per layer",
    "per-head V RMSNorm",
    "V taken from the K projection",
    "a per-layer output scale",
    "final logit soft-capping",
    "an attention scale other than 1/sqrt(head size)",
    "RoPE that differs per layer",
    "a mixture of experts",
    "a shared expert",
    "attention sinks",
    "YaRN RoPE scaling",
    "an attention output bias",
    "gpt-oss's clamped SwiGLU",
    [21] = "Gated DeltaNet layers (a recurrent state per sequence)",
    [22] = "a sigmoid gate on the attention output",
};

const char *lp_feat_name(uint32_t bit) { return bit < LP_FEAT_COUNT ? feat_names[bit] : "?"; }

const char *lp_model_missing_feature(const lp_model_t *m, uint32_t have, char *buf, size_t len)
{
    uint32_t lack = m->hp.features & ~have;
    if (lack & LP_FEAT_DEFINING) lack &= LP_FEAT_DEFINING;
    size_t at = 0;
    for (uint32_t b = 0; b < LP_FEAT_COUNT && at + 1 < len; b++) {
        if (!(lack & (1u << b))) continue;
        int k = snprintf(buf + at, len - at, "%s%s (%s)", at ? ", " : "",
                         m->feat_cause[b][0] ? m->feat_cause[b] : "the architecture", feat_names[b]);
        at += k < 0 ? 0 : (size_t)k;
    }
    return at ? buf : NULL;
}

/* ---- the keys every transformer here has ------------------------------- */

/* YaRN: rope.scaling.factor and original_context_length, beta_fast 32 and
 * beta_slow 1 (llama.cpp's defaults, no key for them in these files); the
 * ramp's pair range from ggml_rope_yarn_corr_dims, the attention factor 1
 * times 1 + 0.1 ln(factor).  Fills ropes[0]'s yarn fields (rope.freq_base
 * and dimension_count are read before: the caller finishes ropes[0]). */
static int yarn_scaling(lp_arch_ld_t *ld, float *scale)
{
    float factor = 0;
    uint32_t orig = 0;
    int rc;
    if ((rc = lp_ld_f32(ld, "rope.scaling.factor", true, &factor)) ||
        (rc = lp_ld_u32(ld, "rope.scaling.original_context_length", true, &orig)))
        return rc;
    if (!(factor >= 1) || factor > 1024)
        return lp_ld_refuse(ld, "rope.scaling.factor", "%g is not a YaRN factor in 1..1024", factor);
    if (orig < 1 || orig > (1u << 24))
        return lp_ld_refuse(ld, "rope.scaling.original_context_length", "%u is out of range", orig);
    *scale = 1.0f / factor;
    lp_rope_t *r = &lp_ld_model(ld)->ropes[0];
    r->yarn_ext = 1.0f;
    r->yarn_lo = (float)orig; /* the caller turns these into the ramp's pairs */
    r->yarn_hi = 0;
    r->yarn_mscale = factor == 1 ? 1.0f : 1.0f + 0.1f * logf(factor);
    lp_ld_feature(ld, LP_FEAT_YARN, "rope.scaling.type");
    return 0;
}

/* ggml_rope_yarn_corr_dim: the pair index where `rot` rotations fit the
 * original context. */
static float yarn_corr_dim(int32_t n_dims, float orig, float rot, float base)
{
    return (float)n_dims * logf(orig / (rot * 2 * (float)M_PI)) / (2 * logf(base));
}

/* rope.scaling.type none or linear with rope.scaling.factor (also the old
 * rope.scale_linear); llama.cpp takes a factor without a type as linear.
 * *scale gets 1 / factor. */
static int rope_scaling(lp_arch_ld_t *ld, float *scale)
{
    lp_gguf_str_t type = {"linear", 6};
    float factor = 0;
    int rc;
    *scale = 1.0f;
    const bool has_type = lp_ld_has(ld, "rope.scaling.type");
    if (has_type && (rc = lp_ld_str(ld, "rope.scaling.type", false, &type))) return rc;
    if (type.len == 4 && !memcmp(type.ptr, "none", 4)) {
        if (lp_ld_has(ld, "rope.scaling.factor")) {
            /* read and ignored, as llama.cpp does with type none */
            if ((rc = lp_ld_f32(ld, "rope.scaling.factor", false, &factor))) return rc;
        }
        return 0;
    }
    const bool yarn = type.len == 4 && !memcmp(type.ptr, "yarn", 4) &&
                      lp_ld_knows(ld, "rope.scaling.original_context_length");
    if (!(type.len == 6 && !memcmp(type.ptr, "linear", 6)) && !yarn)
        return lp_ld_refuse(ld, "rope.scaling.type", "'%.*s' is not implemented (%s are)",
                            (int)(type.len > 32 ? 32 : type.len), type.ptr,
                            lp_ld_knows(ld, "rope.scaling.original_context_length")
                                ? "none, linear and yarn" : "none and linear");
    if (yarn) return yarn_scaling(ld, scale);
    rc = lp_ld_f32(ld, "rope.scaling.factor", false, &factor);
    if (rc == LP_ERR(ENOENT) && lp_ld_has(ld, "rope.scale_linear"))
        rc = lp_ld_f32(ld, "rope.scale_linear", false, &factor);
    if (rc == LP_ERR(ENOENT)) return 0;
    if (rc) return rc;
    if (factor < 0)
        return lp_ld_refuse(ld, "rope.scaling.factor", "%g is negative", factor);
    if (factor == 0 || factor == 1) return 0;
    *scale = 1.0f / factor;
    lp_ld_feature(ld, LP_FEAT_ROPE_SCALE, has_type ? "rope.scaling.type" : "rope.scaling.factor");
    return 0;
}

int lp_arch_softcap(lp_arch_ld_t *ld, float dflt)
{
    float cap = dflt;
    int rc = lp_ld_f32(ld, "final_logit_softcapping", false, &cap);
    if (rc && rc != LP_ERR(ENOENT)) return rc;
    if (cap < 0) return lp_ld_refuse(ld, "final_logit_softcapping", "%g is negative", cap);
    if (cap > 0) {
        lp_ld_model(ld)->hp.logit_softcap = cap;
        lp_ld_feature(ld, LP_FEAT_SOFTCAP, "final_logit_softcapping");
    }
    return 0;
}

int lp_arch_no_experts(lp_arch_ld_t *ld)
{
    static const char *const keys[] = {"expert_count", "expert_used_count"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        uint32_t n = 0;
        int rc = lp_ld_u32(ld, keys[i], false, &n);
        if (rc && rc != LP_ERR(ENOENT)) return rc;
        if (n)
            return lp_ld_refuse(ld, keys[i], "%u experts: mixture-of-experts %s models%s are "
                                "not implemented yet", n, lp_ld_arch(ld),
                                strcmp(lp_ld_arch(ld), "llama") ? "" : " (Mixtral)");
    }
    return 0;
}

int lp_arch_moe_hparams(lp_arch_ld_t *ld, bool shared)
{
    lp_hparams_t *hp = &lp_ld_model(ld)->hp;
    uint32_t n = 0, used = 0, ff = 0, ff_sh = 0;
    int rc;
    if ((rc = lp_ld_u32(ld, "expert_count", true, &n)) ||
        (rc = lp_ld_u32(ld, "expert_used_count", true, &used)) ||
        (rc = lp_ld_u32(ld, "expert_feed_forward_length", true, &ff)))
        return rc;
    if (shared && (rc = lp_ld_u32(ld, "expert_shared_feed_forward_length", false, &ff_sh)) &&
        rc != LP_ERR(ENOENT))
        return rc;
    if (n < 1 || n > 4096)
        return lp_ld_refuse(ld, "expert_count", "%u is not a number of experts in 1..4096", n);
    if (used < 1 || used > n || used > 64)
        return lp_ld_refuse(ld, "expert_used_count", "%u is not in 1..%u", used, n < 64 ? n : 64);
    if (ff < 1 || ff > (1u << 20))
        return lp_ld_refuse(ld, "expert_feed_forward_length", "%u is out of range", ff);
    if (ff_sh > (1u << 20))
        return lp_ld_refuse(ld, "expert_shared_feed_forward_length", "%u is out of range", ff_sh);
    hp->n_expert = (int32_t)n;
    hp->n_expert_used = (int32_t)used;
    hp->n_ff_exp = (int32_t)ff;
    hp->n_ff_shexp = (int32_t)ff_sh;
    lp_ld_feature(ld, LP_FEAT_MOE, "expert_count");
    return 0;
}

int lp_arch_std_hparams(lp_arch_ld_t *ld, bool neox)
{
    lp_model_t *m = lp_ld_model(ld);
    lp_hparams_t *hp = &m->hp;
    const char *a = lp_ld_arch(ld);
    uint32_t v;
    int rc;
    if ((rc = lp_ld_u32(ld, "embedding_length", true, &v))) return rc;
    hp->n_embd = (int32_t)(v > INT32_MAX ? 0 : v);
    if ((rc = lp_ld_u32(ld, "block_count", true, &v))) return rc;
    hp->n_layer = (int32_t)(v > INT32_MAX ? 0 : v);
    if ((rc = lp_ld_u32(ld, "attention.head_count", true, &v))) return rc;
    hp->n_head = (int32_t)(v > INT32_MAX ? 0 : v);
    if ((rc = lp_ld_u32(ld, "context_length", true, &v))) return rc;
    hp->n_ctx_train = (int32_t)(v > INT32_MAX ? 0 : v);
    if ((rc = lp_ld_f32(ld, "attention.layer_norm_rms_epsilon", true, &hp->rms_eps))) return rc;
    if (hp->n_embd <= 0 || hp->n_embd > (1 << 16) || hp->n_layer <= 0 || hp->n_layer > 1024 ||
        hp->n_head <= 0 || hp->n_head > 1024 || hp->n_ctx_train <= 0)
        return lp_error_set(LP_ERR(EINVAL), "%s hyperparameters out of range (n_embd %d, "
                            "n_layer %d, n_head %d, context %d)", a, hp->n_embd, hp->n_layer,
                            hp->n_head, hp->n_ctx_train);
    if (!(hp->rms_eps > 0))
        return lp_error_set(LP_ERR(EINVAL), "key '%s.attention.layer_norm_rms_epsilon': %g is "
                            "not positive", a, hp->rms_eps);
    if (!(m->layers = calloc((size_t)hp->n_layer, sizeof(*m->layers))))
        return lp_error_set(LP_ERR(ENOMEM), "out of memory");

    int32_t *per = malloc(sizeof(int32_t) * (size_t)hp->n_layer);
    if (!per) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    rc = lp_ld_layers(ld, "feed_forward_length", true, per);
    for (int32_t l = 0; !rc && l < hp->n_layer; l++) m->layers[l].hp.n_ff = per[l];
    if (!rc) {
        rc = lp_ld_layers(ld, "attention.head_count_kv", false, per);
        for (int32_t l = 0; rc == LP_ERR(ENOENT) && l < hp->n_layer; l++) per[l] = hp->n_head;
        if (rc == LP_ERR(ENOENT)) rc = 0;
        for (int32_t l = 0; !rc && l < hp->n_layer; l++) m->layers[l].hp.n_head_kv = per[l];
    }
    free(per);
    if (rc) return rc;

    /* head size: key_length, else n_embd / n_head */
    uint32_t kl = 0, vl = 0;
    rc = lp_ld_u32(ld, "attention.key_length", false, &kl);
    if (rc && rc != LP_ERR(ENOENT)) return rc;
    rc = lp_ld_u32(ld, "attention.value_length", false, &vl);
    if (rc && rc != LP_ERR(ENOENT)) return rc;
    if (!kl && vl) kl = vl;
    if (!vl) vl = kl;
    if (kl != vl)
        return lp_ld_refuse(ld, "attention.value_length", "%u differs from key_length %u: "
                            "different K and V head sizes are not implemented", vl, kl);
    int32_t hd;
    if (kl) {
        if (kl > 1024) return lp_ld_refuse(ld, "attention.key_length", "%u is too large", kl);
        hd = (int32_t)kl;
    } else {
        if (hp->n_embd % hp->n_head)
            return lp_error_set(LP_ERR(EINVAL), "key '%s.attention.head_count': %d does not "
                                "divide embedding_length %d", a, hp->n_head, hp->n_embd);
        hd = hp->n_embd / hp->n_head;
    }
    if ((int64_t)hd * hp->n_head != hp->n_embd)
        lp_ld_feature(ld, LP_FEAT_HEAD_DIM, "attention.key_length");

    uint32_t n_rot = (uint32_t)hd;
    rc = lp_ld_u32(ld, "rope.dimension_count", false, &n_rot);
    if (rc && rc != LP_ERR(ENOENT)) return rc;
    if (n_rot == 0 || n_rot > (uint32_t)hd || n_rot % 2)
        return lp_error_set(LP_ERR(EINVAL), "key '%s.rope.dimension_count': %u is not an even "
                            "number up to the head size %d", a, n_rot, hd);
    float base = 10000.0f;
    rc = lp_ld_f32(ld, "rope.freq_base", false, &base);
    if (rc && rc != LP_ERR(ENOENT)) return rc;
    if (!(base > 0))
        return lp_error_set(LP_ERR(EINVAL), "key '%s.rope.freq_base': %g is not positive", a,
                            base);
    float scale;
    if ((rc = rope_scaling(ld, &scale))) return rc;
    const lp_rope_t y = m->ropes[0]; /* yarn_scaling's fields */
    m->ropes[0] = (lp_rope_t){.n_rot = (int32_t)n_rot, .base = base, .freq_scale = scale, .neox = neox};
    if (y.yarn_ext != 0) {
        const float lo = floorf(yarn_corr_dim((int32_t)n_rot, y.yarn_lo, 32.0f, base));
        const float hi = ceilf(yarn_corr_dim((int32_t)n_rot, y.yarn_lo, 1.0f, base));
        m->ropes[0].yarn_ext = y.yarn_ext;
        m->ropes[0].yarn_lo = lo > 0 ? lo : 0;
        m->ropes[0].yarn_hi = hi < (float)n_rot - 1 ? hi : (float)n_rot - 1;
        m->ropes[0].yarn_mscale = y.yarn_mscale;
    }
    m->n_ropes = 1;
    for (int32_t l = 0; l < hp->n_layer; l++) {
        lp_layer_hp_t *L = &m->layers[l].hp;
        L->head_dim = hd;
        L->n_swa = 0;
        L->rope = 0;
        L->kv_group = 0;
        L->attn_scale = 1.0f / sqrtf((float)hd);
    }
    return 0;
}

/* ---- the blocks of layer functions ---------------------------------------- */

int lp_arch_attention(const lp_fwd_t *f, const lp_model_t *m, int32_t l, bool v_norm)
{
    const lp_fwd_ops_t *o = f->ops;
    void *c = f->ctx;
    const lp_layer_t *L = &m->layers[l];
    const int32_t nh = m->hp.n_head, nkv = L->hp.n_head_kv, hd = L->hp.head_dim;
    const bool gated = L->hp.attn_gate;
    const lp_weight_t *qkv[3] = {&L->wq, &L->wk, &L->wv};
    const enum lp_buf qkv_out[3] = {gated ? LP_BUF_QG : LP_BUF_Q, LP_BUF_K, LP_BUF_V};
    int rc;
    if ((rc = o->norm(c, LP_BUF_XN, LP_BUF_X, L->attn_norm, 1, m->hp.n_embd)) ||
        (rc = o->matmul(c, L->wv.data ? 3 : 2, qkv, LP_BUF_XN, qkv_out)) ||
        (!L->wv.data && (rc = o->copy(c, LP_BUF_V, LP_BUF_K, nkv * hd))) ||
        (gated && (rc = o->split(c, LP_BUF_Q, LP_BUF_AGATE, LP_BUF_QG, nh, hd))))
        return rc;
    if ((L->bq && (rc = o->bias(c, LP_BUF_Q, L->bq, nh * hd))) ||
        (L->bk && (rc = o->bias(c, LP_BUF_K, L->bk, nkv * hd))) ||
        (L->bv && (rc = o->bias(c, LP_BUF_V, L->bv, nkv * hd))))
        return rc;
    if ((L->q_norm && (rc = o->norm(c, LP_BUF_Q, LP_BUF_Q, L->q_norm, nh, hd))) ||
        (L->k_norm && (rc = o->norm(c, LP_BUF_K, LP_BUF_K, L->k_norm, nkv, hd))) ||
        (v_norm && (rc = o->norm(c, LP_BUF_V, LP_BUF_V, NULL, nkv, hd))))
        return rc;
    if ((rc = o->rope(c, LP_BUF_Q, nh, l)) || (rc = o->rope(c, LP_BUF_K, nkv, l)) ||
        (rc = o->attention(c, l)) ||
        (gated && (rc = o->gate(c, LP_BUF_ATT, LP_BUF_AGATE, LP_ACT_SIGMOID, nh * hd))) ||
        (rc = lp_fwd_mm(f, &L->wo, LP_BUF_ATT, LP_BUF_PROJ)) ||
        (L->bo && (rc = o->bias(c, LP_BUF_PROJ, L->bo, m->hp.n_embd))))
        return rc;
    return L->post_attn_norm
               ? o->norm(c, LP_BUF_PROJ, LP_BUF_PROJ, L->post_attn_norm, 1, m->hp.n_embd)
               : 0;
}

int lp_arch_delta_net(const lp_fwd_t *f, const lp_model_t *m, int32_t l)
{
    const lp_fwd_ops_t *o = f->ops;
    void *c = f->ctx;
    const lp_layer_t *L = &m->layers[l];
    const lp_ssm_t *s = &m->ssm;
    const lp_weight_t *in[4] = {&L->w_qkv, &L->w_z, &L->w_beta, &L->w_alpha};
    static const enum lp_buf in_out[4] = {LP_BUF_MIX, LP_BUF_Z, LP_BUF_BETA, LP_BUF_ALPHA};
    int rc;
    if ((rc = o->norm(c, LP_BUF_XN, LP_BUF_X, L->attn_norm, 1, m->hp.n_embd)) ||
        (rc = o->matmul(c, 4, in, LP_BUF_XN, in_out)) || (rc = o->conv(c, l)) ||
        (rc = o->delta_net(c, l)) ||
        (rc = o->norm(c, LP_BUF_ATT, LP_BUF_ATT, L->ssm_norm, s->n_v_heads, s->d_state)) ||
        (rc = o->gate(c, LP_BUF_ATT, LP_BUF_Z, LP_ACT_SILU, s->d_inner)))
        return rc;
    return lp_fwd_mm(f, &L->w_ssm_out, LP_BUF_ATT, LP_BUF_PROJ);
}

int lp_arch_ffn(const lp_fwd_t *f, const lp_model_t *m, int32_t l, enum lp_act act)
{
    const lp_fwd_ops_t *o = f->ops;
    void *c = f->ctx;
    const lp_layer_t *L = &m->layers[l];
    const lp_weight_t *gate_up[2] = {&L->w_gate, &L->w_up};
    static const enum lp_buf gate_up_out[2] = {LP_BUF_GATE, LP_BUF_UP};
    int rc;
    if ((rc = o->add_norm(c, LP_BUF_XN, LP_BUF_X, LP_BUF_PROJ, L->ffn_norm)) ||
        (rc = o->matmul(c, 2, gate_up, LP_BUF_XN, gate_up_out)) ||
        (rc = o->glu(c, act, L->hp.n_ff)) ||
        (rc = lp_fwd_mm(f, &L->w_down, LP_BUF_GATE, LP_BUF_PROJ)) ||
        (L->post_ffn_norm &&
         (rc = o->norm(c, LP_BUF_PROJ, LP_BUF_PROJ, L->post_ffn_norm, 1, m->hp.n_embd))))
        return rc;
    return o->add(c, LP_BUF_X, LP_BUF_PROJ);
}

int lp_arch_moe_ffn(const lp_fwd_t *f, const lp_model_t *m, int32_t l, enum lp_moe_gating gating,
                    bool norm, enum lp_act act)
{
    const lp_fwd_ops_t *o = f->ops;
    void *c = f->ctx;
    const lp_layer_t *L = &m->layers[l];
    const lp_hparams_t *hp = &m->hp;
    const lp_moe_t moe = {
        .n_expert = hp->n_expert, .n_used = hp->n_expert_used, .n_ff = hp->n_ff_exp,
        .gating = gating, .norm = norm, .act = act,
        .router = &L->ffn_gate_inp, .router_b = L->ffn_gate_inp_b,
        .gate = &L->ffn_gate_exps, .up = &L->ffn_up_exps, .down = &L->ffn_down_exps,
        .gate_b = L->ffn_gate_exps_b, .up_b = L->ffn_up_exps_b, .down_b = L->ffn_down_exps_b,
        .sh_gate = L->ffn_gate_shexp.data ? &L->ffn_gate_shexp : NULL,
        .sh_up = &L->ffn_up_shexp, .sh_down = &L->ffn_down_shexp,
        .sh_gate_inp = L->ffn_gate_inp_shexp, .n_ff_sh = hp->n_ff_shexp,
    };
    int rc;
    if ((rc = o->add_norm(c, LP_BUF_XN, LP_BUF_X, LP_BUF_PROJ, L->ffn_norm)) ||
        (rc = o->moe(c, LP_BUF_PROJ, LP_BUF_XN, &moe)) ||
        (L->post_ffn_norm &&
         (rc = o->norm(c, LP_BUF_PROJ, LP_BUF_PROJ, L->post_ffn_norm, 1, hp->n_embd))))
        return rc;
    return o->add(c, LP_BUF_X, LP_BUF_PROJ);
}
