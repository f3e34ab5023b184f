/* arch.h - what an architecture is to the engine: data plus one file.
 *
 * Each file under engine-svc/arch/ (llama.c, qwen3.c, gemma3.c, ...) holds
 * one lp_arch_t: the GGUF keys whose meaning lmpipe implements for that
 * architecture, its tensor table, a hyperparameter function that turns the
 * keys into lp_hparams_t and per-layer lp_layer_hp_t, and a layer function
 * that writes one transformer block as calls to the backend's forward ops
 * (lp_fwd_ops_t), the way llama.cpp's src/models/ files build graphs.  The
 * loader (model.c), the forward pass (forward-cpu.c), the kernels and the KV
 * cache know no architecture by name.
 *
 * The loader refuses what it would ignore: a key under "<arch>." that is not
 * in the table, any other key outside the short harmless list (general.*,
 * tokenizer.*, quantize.*), and a tensor the table does not name are errors
 * naming the key or tensor and the file.  A key in the table is read by the
 * hyperparameter function, which refuses values it does not implement
 * (rope.scaling.type yarn, an expert count, ...) by name as well.
 *
 * What a model uses beyond the plain llama block is recorded as features
 * (lp_feat), each with the key or tensor that brought it, so that a
 * backend that lacks one refuses the model at create naming it. */
#ifndef LP_ARCH_H
#define LP_ARCH_H

#include "model.h"

#include <stddef.h>

/* ---- features: what a backend must implement to run a model ---------- */

enum lp_feat {
    LP_FEAT_ROPE_FREQS = 1u << 0,  /* rope_freqs.weight divides the RoPE angles */
    LP_FEAT_ROPE_SCALE = 1u << 1,  /* rope.scaling.type linear: positions / factor */
    LP_FEAT_HEAD_DIM = 1u << 2,    /* head size from key_length, not n_embd / n_head */
    LP_FEAT_QK_NORM = 1u << 3,     /* per-head RMSNorm of q and k */
    LP_FEAT_POST_NORM = 1u << 4,   /* RMSNorm of the attention and FFN outputs */
    LP_FEAT_GEGLU = 1u << 5,       /* gelu_tanh(gate) * up, llama.cpp's fp16 table */
    LP_FEAT_EMBD_SCALE = 1u << 6,  /* embeddings times sqrt(n_embd) */
    LP_FEAT_SWA = 1u << 7,         /* sliding-window layers */
    LP_FEAT_LAYER_SHAPES = 1u << 8, /* head size and KV heads that differ per layer */
    LP_FEAT_V_NORM = 1u << 9,      /* per-head RMSNorm of v without weight */
    LP_FEAT_K_AS_V = 1u << 10,     /* v from the k projection (no attn_v) */
    LP_FEAT_OUT_SCALE = 1u << 11,  /* layer output times a learned scalar */
    LP_FEAT_SOFTCAP = 1u << 12,    /* logits = cap * tanh(logits / cap) */
    LP_FEAT_ATTN_SCALE = 1u << 13, /* attention scale other than 1/sqrt(head_dim) */
    LP_FEAT_LAYER_ROPE = 1u << 14, /* RoPE base, scale or dims that differ per layer */
    LP_FEAT_MOE = 1u << 15,        /* mixture-of-experts feed-forward (router, 3-D experts) */
    LP_FEAT_SHARED_EXPERT = 1u << 16, /* an expert every token runs, maybe sigmoid-gated */
    LP_FEAT_ATTN_SINKS = 1u << 17, /* one learned logit per head in the softmax */
    LP_FEAT_YARN = 1u << 18,       /* rope.scaling.type yarn */
    LP_FEAT_OUT_BIAS = 1u << 19,   /* attn_output.bias */
    LP_FEAT_SWIGLU_OAI = 1u << 20, /* gpt-oss's clamped SwiGLU with expert biases */
    LP_FEAT_DELTANET = 1u << 21,   /* Gated DeltaNet layers: per-sequence recurrent state */
    LP_FEAT_ATTN_GATE = 1u << 22,  /* attention output times sigmoid(a gate from attn_q) */
};
#define LP_FEAT_COUNT 23
/* Reported first when a backend lacks several: they say what the model is. */
#define LP_FEAT_DEFINING (LP_FEAT_DELTANET | LP_FEAT_ATTN_GATE)

/* "RoPE frequency factors", ... for bit i. */
const char *lp_feat_name(uint32_t bit);

/* The features of the model that `have` lacks, as a message fragment:
 * "tensor 'rope_freqs.weight' (RoPE frequency factors), key ..." (each
 * one, as far as len allows); NULL when none lacks. */
const char *lp_model_missing_feature(const lp_model_t *m, uint32_t have, char *buf, size_t len);

/* ---- the tensor table ------------------------------------------------- */

/* A tensor dimension, resolved against the model (and the layer). */
enum lp_dim {
    LP_D_NONE = 0,
    LP_D_EMBD,      /* n_embd */
    LP_D_VOCAB,     /* n_vocab (rows of token_embd) */
    LP_D_Q,         /* n_head * head_dim of the layer */
    LP_D_KV,        /* n_head_kv * head_dim of the layer */
    LP_D_FF,        /* n_ff of the layer */
    LP_D_HEAD,      /* head_dim of the layer */
    LP_D_ROT_PAIRS, /* n_rot / 2 of the first global layer's RoPE */
    LP_D_ONE,       /* 1 */
    LP_D_HEADS,     /* n_head */
    LP_D_EXPERTS,   /* n_expert */
    LP_D_FF_EXP,    /* n_ff_exp: an expert's FFN width */
    LP_D_FF_SHEXP,  /* n_ff_shexp: the shared expert's FFN width */
    LP_D_QG,        /* 2 * n_head * head_dim: q and its gate, per head (gated attention) */
    LP_D_SSM_CONV,  /* DeltaNet conv channels: q, k (n_group * d_state each), v (d_inner) */
    LP_D_SSM_INNER, /* d_inner = n_v_heads * d_state */
    LP_D_SSM_HEADS, /* n_v_heads */
    LP_D_SSM_STATE, /* d_state, the head size of q, k and v */
    LP_D_SSM_KERNEL, /* d_conv, the causal convolution's width */
};

enum {
    LP_T_LAYER = 1 << 0,    /* "blk.N.<name>", one per layer; else the whole name */
    LP_T_OPTIONAL = 1 << 1, /* may be absent (the field stays empty) */
    LP_T_MATRIX = 1 << 2,   /* an lp_weight_t read in place; else floats (a vector, or
                               ne0 x ne1 floats row after row) */
    LP_T_EXPERTS = 1 << 3,  /* a third dimension of n_expert: a matrix per expert (an
                               lp_weight_t of n_mat matrices), or a float array of
                               n_expert rows (ne[1] is then LP_D_EXPERTS) */
    LP_T_ATTN = 1 << 4,     /* only on attention layers: refused on a recurrent one */
    LP_T_REC = 1 << 5,      /* only on recurrent (DeltaNet) layers: refused elsewhere */
};

/* Table rows: a layer tensor into lp_layer_t.f, a global one into lp_model_t.f. */
#define LP_TENSOR_L(name, f, flags, d0, d1, feat) \
    {name, offsetof(lp_layer_t, f), LP_T_LAYER | (flags), {d0, d1}, feat}
#define LP_TENSOR_G(name, f, flags, d0, d1, feat) \
    {name, offsetof(lp_model_t, f), (flags), {d0, d1}, feat}
#define LP_TENSOR_END {NULL, 0, 0, {0, 0}, 0}

typedef struct lp_arch_tensor {
    const char *name;   /* "attn_q.weight" (layer) or "output.weight" */
    uint16_t field;     /* offsetof(lp_layer_t, ...) or offsetof(lp_model_t, ...) */
    uint8_t flags;
    uint8_t ne[2];      /* enum lp_dim; a vector has ne[1] LP_D_NONE */
    uint32_t feat;      /* features its presence brings (enum lp_feat), or 0 */
} lp_arch_tensor_t;

/* ---- hyperparameters: the load context ------------------------------- */

typedef struct lp_arch_ld lp_arch_ld_t; /* model.c's; the readers below mark what they read */

/* Read "<arch>.<suffix>".  The suffix must be in the arch's key table (a
 * programmer error otherwise, reported as such).  0, LP_ERR(ENOENT) when
 * absent and not required, or an error naming the key. */
int lp_ld_u32(lp_arch_ld_t *ld, const char *suffix, bool required, uint32_t *out);
int lp_ld_f32(lp_arch_ld_t *ld, const char *suffix, bool required, float *out);
int lp_ld_str(lp_arch_ld_t *ld, const char *suffix, bool required, lp_gguf_str_t *out);
/* A per-layer value: a scalar for every layer, or an array of n_layer
 * numbers (bools read as 0/1).  out has n_layer entries. */
int lp_ld_layers(lp_arch_ld_t *ld, const char *suffix, bool required, int32_t *out);
/* Up to n integers: an array of at most n (the rest 0), or a scalar for
 * all n (llama.cpp's get_key_or_arr). */
int lp_ld_ints(lp_arch_ld_t *ld, const char *suffix, bool required, int32_t *out, int32_t n);
/* True when the file has the key (not marked read: the caller reads it). */
bool lp_ld_has(const lp_arch_ld_t *ld, const char *suffix);
/* True when the suffix is in the arch's key table. */
bool lp_ld_knows(const lp_arch_ld_t *ld, const char *suffix);
/* True when the file has the tensor (a global name, or a layer's "blk.N.x"). */
bool lp_ld_has_tensor(const lp_arch_ld_t *ld, const char *name);
/* Record that the model uses features `feats`, brought by `cause`: a key
 * suffix ("<arch>." is prefixed), a tensor name after a '@', or words
 * after a '!' ("!the gemma3 architecture"). */
void lp_ld_feature(lp_arch_ld_t *ld, uint32_t feats, const char *cause);
/* A refusal naming the key: "key 'gemma4.expert_count' = 8: <why>". */
int lp_ld_refuse(lp_arch_ld_t *ld, const char *suffix, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
lp_model_t *lp_ld_model(lp_arch_ld_t *ld);
const char *lp_ld_arch(const lp_arch_ld_t *ld);

/* The keys every transformer here has: sizes, norms' epsilon, context,
 * head counts (head_count_kv per layer), head size from key_length /
 * value_length (refused when they differ), rope.dimension_count,
 * rope.freq_base (default 10000) and rope.scaling.type none/linear with
 * its factor.  Fills hp and every layer's hp with one RoPE (ropes[0]) and
 * full attention at scale 1/sqrt(head_dim). */
int lp_arch_std_hparams(lp_arch_ld_t *ld, bool neox);
/* final_logit_softcapping, `dflt` when absent (0: none). */
int lp_arch_softcap(lp_arch_ld_t *ld, float dflt);
/* expert_count / expert_used_count are 0 or absent: no MoE in this arch. */
int lp_arch_no_experts(lp_arch_ld_t *ld);
/* expert_count, expert_used_count (1 .. count), expert_feed_forward_length
 * and, with `shared`, expert_shared_feed_forward_length (absent: 0) into
 * hp; records LP_FEAT_MOE. */
int lp_arch_moe_hparams(lp_arch_ld_t *ld, bool shared);

/* ---- the forward ops a layer function calls ------------------------- */

/* Activation buffers, each n_tok rows.  A row's width is whatever the op
 * that wrote it made it (n_embd, a layer's q or kv width, n_ff). */
enum lp_buf {
    LP_BUF_X,     /* residual stream (n_embd) */
    LP_BUF_XN,    /* normalised input of a block (n_embd) */
    LP_BUF_Q,     /* (n_head * head_dim) */
    LP_BUF_K,     /* (n_head_kv * head_dim) */
    LP_BUF_V,     /* (n_head_kv * head_dim) */
    LP_BUF_ATT,   /* attention output (n_head * head_dim) */
    LP_BUF_PROJ,  /* output of attn_output / ffn_down (n_embd) */
    LP_BUF_GATE,  /* (n_ff) */
    LP_BUF_UP,    /* (n_ff) */
    LP_BUF_QG,    /* gated attention's q projection: per head, head_dim of q then of its gate */
    LP_BUF_AGATE, /* the attention output's gate (n_head * head_dim) */
    LP_BUF_MIX,   /* DeltaNet: the conv channels, q | k | v (LP_D_SSM_CONV) */
    LP_BUF_Z,     /* DeltaNet: the output gate (d_inner) */
    LP_BUF_BETA,  /* DeltaNet: per value head, the write strength (n_v_heads) */
    LP_BUF_ALPHA, /* DeltaNet: per value head, the decay's input (n_v_heads) */
    LP_BUF_COUNT,
};

enum lp_act {
    LP_ACT_SILU,       /* silu(gate) * up (SwiGLU) */
    LP_ACT_GELU_TANH,  /* gelu_tanh(gate) * up through llama.cpp's fp16 table */
    LP_ACT_SWIGLU_OAI, /* gpt-oss: g = min(gate, 7), u = clamp(up, -7, 7),
                          g * sigmoid(1.702 g) * (u + 1) */
    LP_ACT_SIGMOID,    /* sigmoid(gate) * x (the gate op only) */
};

/* How a router's logits become the weights of the chosen experts. */
enum lp_moe_gating {
    LP_MOE_SOFTMAX,      /* p = softmax over all experts; the k largest p (Qwen3-MoE) */
    LP_MOE_TOPK_SOFTMAX, /* the k largest logits; p = softmax over those k (gpt-oss) */
};

/* One mixture-of-experts feed-forward, as a layer function describes it to
 * the backend.  Every pointer is borrowed from the model.  A token's output
 * is sum over its k chosen experts e (in the order of their weights,
 * largest first) of p_e * (down_e(act(gate_e x + gate_b_e, up_e x +
 * up_b_e)) + down_b_e), plus the shared expert's output, times
 * sigmoid(x . sh_gate_inp) where the arch has that gate. */
typedef struct lp_moe {
    int32_t n_expert, n_used;     /* experts, and chosen per token */
    int32_t n_ff;                 /* an expert's FFN width */
    enum lp_moe_gating gating;
    bool norm;                    /* the k weights divided by their sum */
    enum lp_act act;
    const lp_weight_t *router;    /* (n_embd -> n_expert) */
    const float *router_b;        /* (n_expert), may be NULL */
    const lp_weight_t *gate, *up; /* n_expert matrices (n_embd -> n_ff) */
    const lp_weight_t *down;      /* n_expert matrices (n_ff -> n_embd) */
    const float *gate_b, *up_b;   /* (n_expert, n_ff), may be NULL */
    const float *down_b;          /* (n_expert, n_embd), may be NULL */
    /* the shared expert: sh_gate NULL when there is none */
    const lp_weight_t *sh_gate, *sh_up, *sh_down; /* (n_embd -> n_ff_sh), (n_ff_sh -> n_embd) */
    const float *sh_gate_inp;     /* (n_embd): output times sigmoid(x . it); NULL: times 1 */
    int32_t n_ff_sh;
} lp_moe_t;

/* A backend's forward ops.  Every op works on the step's n_tok rows and
 * returns 0 or a negative code with a message.  Widths are in floats. */
typedef struct lp_fwd_ops {
    /* dst = rmsnorm(src) * w over groups of `width` floats, n_groups per
     * row (a per-head norm: n_groups heads of head_dim); w (width floats)
     * may be NULL for no weight; dst may be src. */
    int (*norm)(void *ctx, enum lp_buf dst, enum lp_buf src, const float *w, int32_t n_groups,
                int32_t width);
    /* x += r (n_embd), then dst = rmsnorm(x) * w. */
    int (*add_norm)(void *ctx, enum lp_buf dst, enum lp_buf x, enum lp_buf r, const float *w);
    /* x += r, n_embd. */
    int (*add)(void *ctx, enum lp_buf x, enum lp_buf r);
    /* x *= s, n_embd. */
    int (*scale)(void *ctx, enum lp_buf x, float s);
    /* dst[i] = w[i] src for i < n (n <= 4), src rows w[0]->n_in wide: the
     * products of one input in one pass over the pool. */
    int (*matmul)(void *ctx, int n, const lp_weight_t *const *w, enum lp_buf src,
                  const enum lp_buf *dst);
    /* x += b per row, width floats. */
    int (*bias)(void *ctx, enum lp_buf x, const float *b, int32_t width);
    /* dst = src, width floats per row. */
    int (*copy)(void *ctx, enum lp_buf dst, enum lp_buf src, int32_t width);
    /* RoPE of n_heads heads of layer l's head_dim at each token's position,
     * with layer l's RoPE. */
    int (*rope)(void *ctx, enum lp_buf x, int32_t n_heads, int32_t layer);
    /* K and V rows of layer l into the KV cache at each token's position,
     * then ATT = softmax(scale q.k) v over the positions the layer sees
     * (causal, within its window). */
    int (*attention)(void *ctx, int32_t layer);
    /* GATE = act(GATE) * UP, width floats. */
    int (*glu)(void *ctx, enum lp_act act, int32_t width);
    /* dst = the mixture of experts `moe` on src (n_embd wide): route each
     * token, run each chosen expert once for all the tokens that chose it,
     * add up.  dst may not be src. */
    int (*moe)(void *ctx, enum lp_buf dst, enum lp_buf src, const lp_moe_t *moe);
    /* src rows of n_groups groups of 2 * width floats: the first width of
     * each group into dst_a, the second into dst_b (n_groups * width). */
    int (*split)(void *ctx, enum lp_buf dst_a, enum lp_buf dst_b, enum lp_buf src,
                 int32_t n_groups, int32_t width);
    /* x = act(g) * x, width floats (act SILU or SIGMOID). */
    int (*gate)(void *ctx, enum lp_buf x, enum lp_buf g, enum lp_act act, int32_t width);
    /* DeltaNet layer l, the short convolution: MIX = silu(causal depthwise
     * conv of MIX over each sequence's tokens), the sequence's last
     * d_conv - 1 inputs before them (zeros at position 0) as its state,
     * which the op then moves on. */
    int (*conv)(void *ctx, int32_t layer);
    /* DeltaNet layer l, the gated delta rule: q and k of MIX L2-normalised
     * per head, beta = sigmoid(BETA), decay = exp(softplus(ALPHA + dt) * a);
     * per value head h (key head h % n_group), on the sequence's state S
     * (d_state x d_state, zero at position 0): S = decay S; S += k (beta
     * (v - S^T k))^T; ATT = S^T q / sqrt(d_state) (n_v_heads * d_state). */
    int (*delta_net)(void *ctx, int32_t layer);
} lp_fwd_ops_t;

typedef struct lp_fwd {
    const lp_fwd_ops_t *ops;
    void *ctx;
} lp_fwd_t;

/* ---- the architecture ------------------------------------------------ */

typedef struct lp_arch {
    const char *name;                 /* general.architecture */
    const char *const *keys;          /* implemented "<arch>." suffixes, NULL-terminated */
    const lp_arch_tensor_t *tensors;  /* the tensor table, ended by a NULL name */
    /* Fill lp_ld_model(ld)->hp, ->ropes and each layer's hp from the keys
     * (the tensor table is resolved after it, against these sizes). */
    int (*hparams)(lp_arch_ld_t *ld);
    /* After the tensors: settle what depends on which are present (K as V,
     * output scales, ...).  May be NULL. */
    int (*check)(lp_arch_ld_t *ld);
    /* One block of layer l on the step's tokens: reads LP_BUF_X, leaves the
     * block's output in LP_BUF_X. */
    int (*layer)(const lp_fwd_t *f, const lp_model_t *m, int32_t l);
} lp_arch_t;

/* One product: dst = w src. */
static inline int lp_fwd_mm(const lp_fwd_t *f, const lp_weight_t *w, enum lp_buf src,
                            enum lp_buf dst)
{
    return f->ops->matmul(f->ctx, 1, &w, src, &dst);
}

/* The architectures lmpipe implements; NULL-terminated. */
extern const lp_arch_t *const lp_archs[];
/* "llama, qwen2, ..." */
const char *lp_arch_names(void);

/* The blocks layer functions are made of; what a layer has (biases, q/k
 * norms, post norms, attn_v) decides what runs. */

/* Attention: x stays, PROJ = attention output (through post_attn_norm when
 * the layer has it).  Pre-norm; q, k, v (v = k when the layer has no attn_v,
 * before k's norm; with hp.attn_gate attn_q gives q and the output's gate);
 * biases; per-head q/k norms; v_norm: a per-head RMSNorm of v without
 * weight; RoPE; the cache and attention; times sigmoid(gate); attn_output. */
int lp_arch_attention(const lp_fwd_t *f, const lp_model_t *m, int32_t l, bool v_norm);
/* Gated DeltaNet: x stays, PROJ = the mixer's output.  Pre-norm; qkv, z,
 * beta, alpha; conv; delta rule; per-head RMSNorm (ssm_norm) times
 * silu(z); ssm_out. */
int lp_arch_delta_net(const lp_fwd_t *f, const lp_model_t *m, int32_t l);
/* Feed-forward: x += PROJ; pre-norm; gate, up; act; down (through
 * post_ffn_norm when the layer has it); x += PROJ. */
int lp_arch_ffn(const lp_fwd_t *f, const lp_model_t *m, int32_t l, enum lp_act act);

/* Feed-forward through a mixture of experts: x += PROJ; pre-norm (ffn_norm);
 * the layer's experts (and shared expert) with this gating and activation;
 * x += PROJ. */
int lp_arch_moe_ffn(const lp_fwd_t *f, const lp_model_t *m, int32_t l, enum lp_moe_gating gating,
                    bool norm, enum lp_act act);

/* The llama block, which llama, qwen2 and qwen3 share. */
int lp_arch_llama_layer(const lp_fwd_t *f, const lp_model_t *m, int32_t l);

/* The keys and tensors most tables share. */
#define LP_ARCH_STD_KEYS                                                                      \
    "context_length", "embedding_length", "block_count", "feed_forward_length",             \
        "attention.head_count", "attention.head_count_kv", "attention.layer_norm_rms_epsilon", \
        "attention.key_length", "attention.value_length", "rope.dimension_count",             \
        "rope.freq_base", "rope.scaling.type", "rope.scaling.factor"
#define LP_ARCH_STD_TENSORS(v_flags)                                                          \
    LP_TENSOR_G("token_embd.weight", tok_embd, LP_T_MATRIX, LP_D_EMBD, LP_D_VOCAB, 0),        \
    LP_TENSOR_G("output_norm.weight", output_norm, 0, LP_D_EMBD, LP_D_NONE, 0),               \
    LP_TENSOR_G("output.weight", output, LP_T_MATRIX | LP_T_OPTIONAL, LP_D_EMBD, LP_D_VOCAB, 0), \
    LP_TENSOR_L("attn_norm.weight", attn_norm, 0, LP_D_EMBD, LP_D_NONE, 0),                   \
    LP_TENSOR_L("attn_q.weight", wq, LP_T_MATRIX, LP_D_EMBD, LP_D_Q, 0),                      \
    LP_TENSOR_L("attn_k.weight", wk, LP_T_MATRIX, LP_D_EMBD, LP_D_KV, 0),                     \
    LP_TENSOR_L("attn_v.weight", wv, LP_T_MATRIX | (v_flags), LP_D_EMBD, LP_D_KV, 0),         \
    LP_TENSOR_L("attn_output.weight", wo, LP_T_MATRIX, LP_D_Q, LP_D_EMBD, 0),                 \
    LP_TENSOR_L("ffn_norm.weight", ffn_norm, 0, LP_D_EMBD, LP_D_NONE, 0),                     \
    LP_TENSOR_L("ffn_gate.weight", w_gate, LP_T_MATRIX, LP_D_EMBD, LP_D_FF, 0),               \
    LP_TENSOR_L("ffn_up.weight", w_up, LP_T_MATRIX, LP_D_EMBD, LP_D_FF, 0),                   \
    LP_TENSOR_L("ffn_down.weight", w_down, LP_T_MATRIX, LP_D_FF, LP_D_EMBD, 0)
#define LP_ARCH_BIAS_TENSORS                                                                  \
    LP_TENSOR_L("attn_q.bias", bq, LP_T_OPTIONAL, LP_D_Q, LP_D_NONE, 0),                      \
    LP_TENSOR_L("attn_k.bias", bk, LP_T_OPTIONAL, LP_D_KV, LP_D_NONE, 0),                     \
    LP_TENSOR_L("attn_v.bias", bv, LP_T_OPTIONAL, LP_D_KV, LP_D_NONE, 0)
#define LP_ARCH_QK_NORM_TENSORS                                                               \
    LP_TENSOR_L("attn_q_norm.weight", q_norm, 0, LP_D_HEAD, LP_D_NONE, LP_FEAT_QK_NORM),      \
    LP_TENSOR_L("attn_k_norm.weight", k_norm, 0, LP_D_HEAD, LP_D_NONE, LP_FEAT_QK_NORM)
#define LP_ARCH_MOE_KEYS "expert_count", "expert_used_count", "expert_feed_forward_length"
#define LP_ARCH_MOE_TENSORS                                                                   \
    LP_TENSOR_L("ffn_gate_inp.weight", ffn_gate_inp, LP_T_MATRIX, LP_D_EMBD, LP_D_EXPERTS,     \
                LP_FEAT_MOE),                                                                 \
    LP_TENSOR_L("ffn_gate_exps.weight", ffn_gate_exps, LP_T_MATRIX | LP_T_EXPERTS, LP_D_EMBD,  \
                LP_D_FF_EXP, LP_FEAT_MOE),                                                    \
    LP_TENSOR_L("ffn_up_exps.weight", ffn_up_exps, LP_T_MATRIX | LP_T_EXPERTS, LP_D_EMBD,      \
                LP_D_FF_EXP, LP_FEAT_MOE),                                                    \
    LP_TENSOR_L("ffn_down_exps.weight", ffn_down_exps, LP_T_MATRIX | LP_T_EXPERTS, LP_D_FF_EXP, \
                LP_D_EMBD, LP_FEAT_MOE)
/* A shared expert beside the routed ones (Qwen3.5-MoE's, gated). */
#define LP_ARCH_SHARED_EXPERT_TENSORS                                                         \
    LP_TENSOR_L("ffn_gate_shexp.weight", ffn_gate_shexp, LP_T_MATRIX, LP_D_EMBD, LP_D_FF_SHEXP, \
                LP_FEAT_SHARED_EXPERT),                                                       \
    LP_TENSOR_L("ffn_up_shexp.weight", ffn_up_shexp, LP_T_MATRIX, LP_D_EMBD, LP_D_FF_SHEXP,    \
                LP_FEAT_SHARED_EXPERT),                                                       \
    LP_TENSOR_L("ffn_down_shexp.weight", ffn_down_shexp, LP_T_MATRIX, LP_D_FF_SHEXP, LP_D_EMBD, \
                LP_FEAT_SHARED_EXPERT),                                                       \
    LP_TENSOR_L("ffn_gate_inp_shexp.weight", ffn_gate_inp_shexp, LP_T_OPTIONAL, LP_D_EMBD,     \
                LP_D_NONE, LP_FEAT_SHARED_EXPERT)
#define LP_ARCH_POST_NORM_TENSORS                                                             \
    LP_TENSOR_L("post_attention_norm.weight", post_attn_norm, 0, LP_D_EMBD, LP_D_NONE,        \
                LP_FEAT_POST_NORM),                                                           \
    LP_TENSOR_L("post_ffw_norm.weight", post_ffn_norm, 0, LP_D_EMBD, LP_D_NONE, LP_FEAT_POST_NORM)

#endif
