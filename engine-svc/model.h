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
} lp_weight_t;

typedef struct lp_layer {
    float *attn_norm;  /* (n_embd) */
    lp_weight_t wq;    /* (n_embd -> n_head*head_dim) */
    lp_weight_t wk;    /* (n_embd -> n_head_kv*head_dim) */
    lp_weight_t wv;    /* (n_embd -> n_head_kv*head_dim) */
    float *bq;         /* (n_head*head_dim), may be NULL */
    float *bk;         /* (n_head_kv*head_dim), may be NULL */
    float *bv;         /* (n_head_kv*head_dim), may be NULL */
    lp_weight_t wo;    /* (n_head*head_dim -> n_embd) */
    float *ffn_norm;   /* (n_embd) */
    lp_weight_t w_gate; /* (n_embd -> n_ff) */
    lp_weight_t w_up;   /* (n_embd -> n_ff) */
    lp_weight_t w_down; /* (n_ff -> n_embd) */
} lp_layer_t;

struct lp_model {
    lp_gguf_t *gguf;       /* owns the mapping */
    lp_hparams_t hp;
    lp_weight_t tok_embd;  /* (n_vocab rows of n_embd) */
    float *output_norm;    /* (n_embd) */
    lp_weight_t output;    /* (n_embd -> n_vocab); token_embd when tied */
    bool tied_output;
    lp_layer_t *layers;    /* (n_layer) */
    uint8_t *token_mask;   /* (n_vocab) 1 = never sample */
};

#endif
