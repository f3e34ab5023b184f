/* model.h - the loaded model: hyperparameters and weights resolved against
 * the GGUF mapping.  Internal to the engine library and its backends.
 *
 * lp_weight_t.data points into the mapping (the CPU backend packs a copy of
 * most matrices at load and lets the mapped pages go; matmul.h).  A
 * matrix weight with GGUF ne = {n_in, n_out} is n_out rows of n_in elements
 * (row-major, ne0 innermost), so y = W x computes one dot product per row.
 * Norm weights and biases are small and are converted to float at load. */
#ifndef LP_MODEL_H
#define LP_MODEL_H

#include "engine.h"

typedef struct lp_weight {
    const char *name;  /* tensor name, borrowed from the reader */
    uint32_t type;     /* enum lp_type */
    const void *data;  /* in the mapping */
    int64_t n_in;      /* ne0: elements per row */
    int64_t n_out;     /* ne1: rows */
    size_t row_bytes;
    int64_t n_mat;     /* ne2: matrices stacked one after another (a 3-D expert
                          tensor: one per expert); 1 for a plain matrix */
    size_t mat_bytes;  /* bytes of one matrix: n_out * row_bytes */
} lp_weight_t;

/* Matrix e of a stacked weight (an expert's), as a plain weight: a view
 * into the same mapping, nothing copied. */
static inline lp_weight_t lp_weight_mat(const lp_weight_t *w, int64_t e)
{
    lp_weight_t v = *w;
    v.data = (const uint8_t *)w->data + (size_t)e * w->mat_bytes;
    v.n_mat = 1;
    return v;
}

/* One RoPE: theta_i = pos * freq_scale * base^(-2i/n_rot) / freq_factors[i]
 * for the pairs i < n_rot/2, computed as llama.cpp does (in float, the
 * powers by repeated multiplication). */
typedef struct lp_rope {
    int32_t n_rot;
    float base;
    float freq_scale;          /* 1 / rope.scaling.factor (linear); 1 otherwise */
    const float *freq_factors; /* (n_rot/2) divisors, or NULL; the model's rope_freqs */
    bool neox;                 /* pairs (i, i + n_rot/2); else (2i, 2i+1) */
    /* YaRN (rope.scaling.type yarn; yarn_ext 0: none), as ggml's rope_yarn:
     * pair i's angle mixes the scaled and unscaled ones by ramp(i) *
     * yarn_ext (ramp 1 below pair yarn_lo, 0 above yarn_hi); cos and sin
     * are multiplied by yarn_mscale. */
    float yarn_ext, yarn_lo, yarn_hi, yarn_mscale;
} lp_rope_t;

#define LP_MAX_ROPES 4

/* What mixes a layer's tokens. */
enum lp_mixer {
    LP_MIXER_ATTN = 0,     /* attention over the KV cache */
    LP_MIXER_DELTANET = 1, /* Gated DeltaNet: a recurrence, state per sequence, no KV */
};

/* A layer's hyperparameters (lp_hparams_t holds the model-wide ones). */
typedef struct lp_layer_hp {
    int32_t mixer;        /* enum lp_mixer; the fields below down to kv_group are
                             the attention layers' */
    int32_t n_head_kv;
    int32_t head_dim;     /* of q, k and v */
    int32_t n_ff;
    int32_t n_swa;        /* a query sees the last n_swa positions; 0: all */
    int32_t rope;         /* index into lp_model_t.ropes */
    float attn_scale;     /* applied to q.k */
    int32_t kv_group;     /* KV pool: 0 full attention, 1 sliding window */
    bool moe;             /* the FFN is a mixture of experts (ffn_gate_inp present) */
    bool attn_gate;       /* attn_q gives q and a gate per head; ATT *= sigmoid(gate) */
} lp_layer_hp_t;

/* The Gated DeltaNet layers' sizes (ssm.* keys). */
typedef struct lp_ssm {
    int32_t d_conv;     /* ssm.conv_kernel: the causal convolution's width */
    int32_t d_state;    /* ssm.state_size: head size of q, k and v */
    int32_t n_group;    /* ssm.group_count: key heads */
    int32_t n_v_heads;  /* ssm.time_step_rank: value heads (a multiple of n_group) */
    int32_t d_inner;    /* ssm.inner_size = n_v_heads * d_state */
    int32_t n_channels; /* conv channels: 2 * n_group * d_state + d_inner */
} lp_ssm_t;

typedef struct lp_layer {
    lp_layer_hp_t hp;
    float *attn_norm;  /* (n_embd) */
    lp_weight_t wq;    /* (n_embd -> n_head*head_dim) */
    lp_weight_t wk;    /* (n_embd -> n_head_kv*head_dim) */
    lp_weight_t wv;    /* (n_embd -> n_head_kv*head_dim); empty (data NULL) when v
                          comes from the k projection */
    float *bq;         /* (n_head*head_dim), may be NULL */
    float *bk;         /* (n_head_kv*head_dim), may be NULL */
    float *bv;         /* (n_head_kv*head_dim), may be NULL */
    float *q_norm;     /* (head_dim) per-head RMSNorm of q, may be NULL */
    float *k_norm;     /* (head_dim) per-head RMSNorm of k, may be NULL */
    lp_weight_t wo;    /* (n_head*head_dim -> n_embd) */
    float *bo;         /* (n_embd) attn_output.bias, may be NULL */
    float *attn_sinks; /* (n_head) one logit per head in the softmax, may be NULL */
    float *post_attn_norm; /* (n_embd) RMSNorm of the attention output, may be NULL */
    float *ffn_norm;   /* (n_embd) */
    lp_weight_t w_gate; /* (n_embd -> n_ff) */
    lp_weight_t w_up;   /* (n_embd -> n_ff) */
    lp_weight_t w_down; /* (n_ff -> n_embd) */
    float *post_ffn_norm; /* (n_embd) RMSNorm of the FFN output, may be NULL */
    /* mixture of experts (hp.moe) */
    lp_weight_t ffn_gate_inp;  /* (n_embd -> n_expert) the router */
    float *ffn_gate_inp_b;     /* (n_expert) may be NULL */
    lp_weight_t ffn_gate_exps; /* (n_expert x (n_embd -> n_ff_exp)) */
    lp_weight_t ffn_up_exps;   /* (n_expert x (n_embd -> n_ff_exp)) */
    lp_weight_t ffn_down_exps; /* (n_expert x (n_ff_exp -> n_embd)) */
    float *ffn_gate_exps_b;    /* (n_expert, n_ff_exp) may be NULL */
    float *ffn_up_exps_b;      /* (n_expert, n_ff_exp) may be NULL */
    float *ffn_down_exps_b;    /* (n_expert, n_embd) may be NULL */
    lp_weight_t ffn_gate_shexp; /* (n_embd -> n_ff_shexp) shared expert, may be empty */
    lp_weight_t ffn_up_shexp;   /* (n_embd -> n_ff_shexp) */
    lp_weight_t ffn_down_shexp; /* (n_ff_shexp -> n_embd) */
    float *ffn_gate_inp_shexp;  /* (n_embd) the shared expert's sigmoid gate, may be NULL */
    float *out_scale;  /* (1) the block's output times this, may be NULL */
    /* Gated DeltaNet layers (hp.mixer LP_MIXER_DELTANET) */
    lp_weight_t w_qkv;    /* attn_qkv (n_embd -> n_channels): q | k | v */
    lp_weight_t w_z;      /* attn_gate (n_embd -> d_inner) */
    float *ssm_conv;      /* (n_channels, d_conv) ssm_conv1d: channel c's kernel, oldest first */
    float *ssm_dt;        /* (n_v_heads) ssm_dt.bias */
    float *ssm_a;         /* (n_v_heads) -exp(A_log) */
    lp_weight_t w_beta;   /* ssm_beta (n_embd -> n_v_heads) */
    lp_weight_t w_alpha;  /* ssm_alpha (n_embd -> n_v_heads) */
    float *ssm_norm;      /* (d_state) per-head RMSNorm of the output */
    lp_weight_t w_ssm_out; /* ssm_out (d_inner -> n_embd) */
} lp_layer_t;

struct lp_arch;

/* A feature's cause, for messages: the key or tensor that brought it. */
#define LP_FEAT_CAUSE_MAX 96

struct lp_model {
    lp_gguf_t *gguf;       /* owns the mapping */
    const struct lp_arch *arch; /* static */
    lp_hparams_t hp;
    lp_weight_t tok_embd;  /* (n_vocab rows of n_embd) */
    float *output_norm;    /* (n_embd) */
    lp_weight_t output;    /* (n_embd -> n_vocab); token_embd when tied */
    bool tied_output;
    float *rope_freqs;     /* (n_rot/2) RoPE frequency divisors, may be NULL */
    lp_rope_t ropes[LP_MAX_ROPES]; /* the RoPEs layers use (lp_layer_hp_t.rope) */
    int32_t n_ropes;
    lp_ssm_t ssm;          /* DeltaNet sizes (hp.n_layer_rec > 0) */
    lp_layer_t *layers;    /* (n_layer) */
    uint8_t *token_mask;   /* (n_vocab) 1 = never sample */
    char feat_cause[32][LP_FEAT_CAUSE_MAX]; /* per enum lp_feat bit */
};

#endif
