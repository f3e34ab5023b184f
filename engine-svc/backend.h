/* backend.h - the interface a compute backend implements.
 *
 * A backend owns its copy of what it needs of the weights (none for the CPU
 * backend, which reads the mapping) and the KV caches.  engine.c validates
 * every batch before it reaches a backend, so backends may trust seq ids,
 * positions, token ids, counts and block tables.  The CPU backend is the reference; the
 * CUDA backend registers only when compiled in and a device is found. */
#ifndef LP_BACKEND_H
#define LP_BACKEND_H

#include "model.h"

/* The KV pool the engine chose for a paging backend: kv_blocks blocks of
 * kv_block positions.  Without paging the engine still passes one block of
 * n_ctx positions per seq_id (blocks = max_seqs), the contiguous layout. */
typedef struct lp_kv_pool {
    int32_t kv_block;
    int32_t kv_blocks;     /* of the full-attention layers' pool */
    int32_t kv_blocks_swa; /* of the sliding-window layers' pool (lp_batch_seq_t.swa_blocks) */
} lp_kv_pool_t;

typedef struct lp_backend_ops {
    const char *name;
    /* 1 when the backend reads KV through the entries' block tables; 0 when
     * it keeps one n_ctx stretch per seq_id (tables are then never given). */
    int paged;
    /* The model features (enum lp_feat, arch/arch.h) the backend
     * implements: engine.c refuses a model that uses another one, naming
     * the key or tensor that brings it, before create. */
    uint32_t features;
    /* 1 when the backend can run here (a device is present). */
    int (*available)(void);
    int (*create)(const lp_model_t *model, const lp_engine_params_t *params,
                  const lp_kv_pool_t *kv, void **ctx);
    void (*destroy)(void *ctx);
    /* Drop positions >= len of a sequence's cache. */
    void (*seq_truncate)(void *ctx, int32_t seq_id, int32_t len);
    /* Forward step; see lp_engine_step().  `n_tokens_total` is the sum of
     * the entries' n_tokens.  On a paged backend every entry carries its
     * block table (engine.c fills in the fallback tables), checked. */
    int (*step)(void *ctx, const lp_batch_seq_t *seqs, int32_t n_seqs, int32_t n_tokens_total,
                float *const *logits);
    /* Page-lock [ptr, ptr + len), where logit rows will be written, so that
     * the device copies into it by DMA (lp_engine_register_host).  May be
     * NULL: the CPU backend has nothing to do. */
    int (*register_host)(void *ctx, void *ptr, size_t len);
    /* Where the backend reads the weight whose mapped data starts at w, if
     * not there: the copy, and its bytes (the first rows of w's).  May be
     * NULL: every weight is read in place. */
    const void *(*weight_copy)(void *ctx, const void *w, size_t *bytes);
    /* The mixture-of-experts counters (lp_engine_moe_counts).  May be NULL. */
    void (*moe_counts)(void *ctx, lp_moe_counts_t *out);
} lp_backend_ops_t;

extern const lp_backend_ops_t lp_backend_cpu;
#ifdef LP_HAVE_CUDA
extern const lp_backend_ops_t lp_backend_cuda;
#endif

#endif
