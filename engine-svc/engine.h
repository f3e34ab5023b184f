/* engine.h - the compute engine: a loaded model, its KV caches, and one
 * batched forward step.  engine-svc serves this library; `lmpipe score` and
 * `lmpipe bench` call it in-process.
 *
 * Tensor layout (docs/ARCHITECTURE.md): activations are row-major
 * [token, n_embd]; Q/K/V rows are [token, head, head_dim].  The CPU
 * backend's KV cache is a pool of blocks of kv_block positions, float32,
 * [layer][block][kv_head][pos in block][head_dim], which a sequence reaches
 * through its block table ("Paged KV"); the CUDA one keeps one n_ctx stretch
 * per sequence, [layer][pos][kv_head][head_dim]. */
#ifndef LP_ENGINE_H
#define LP_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

/* ---- model ------------------------------------------------------------ */

/* Model-wide hyperparameters.  Where layers differ (Gemma's sliding and
 * global layers), the per-layer values are internal (model.h) and these
 * hold the largest or the first global layer's, as said. */
typedef struct lp_hparams {
    const char *arch;      /* general.architecture, e.g. "llama" (static string) */
    int32_t n_vocab;       /* logit row length: rows of token_embd / output */
    int32_t n_tokens_real; /* tokenizer tokens up to the last one not unused/padding */
    int32_t n_embd;
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;     /* the largest of any layer; GQA: n_head % n_head_kv == 0 */
    int32_t head_dim;      /* the largest of any layer (n_embd / n_head unless the
                              file gives attention.key_length) */
    int32_t n_ff;          /* the largest of any layer */
    int32_t n_rot;         /* rotated dims per head of the first global layer */
    int32_t n_ctx_train;   /* context_length */
    float rope_base;       /* the first global layer's; 10000 when absent */
    bool rope_neox;        /* NEOX (qwen2, qwen3, gemma): rotate pairs (i, i+n_rot/2) */
    float rms_eps;
    int32_t n_swa;         /* sliding window in positions (a query sees the last
                              n_swa); 0 when no layer slides */
    int32_t n_layer_swa;   /* layers with the window */
    int64_t kv_floats;     /* K floats per position over all layers (V the same) */
    int64_t kv_floats_swa; /* the part of kv_floats in sliding layers */
    int32_t n_layer_rec;   /* recurrent layers (Gated DeltaNet): no KV, a state per
                              sequence that a step moves on and that cannot rewind */
    int64_t rec_floats;    /* floats of that state per sequence, all layers */
    float embd_scale;      /* embeddings are multiplied by it (1: none) */
    float logit_softcap;   /* logits = cap * tanh(logits / cap); 0: none */
    uint32_t features;     /* enum lp_feat (arch/arch.h) the model uses */
    int32_t n_expert;      /* mixture of experts: experts per layer (0: dense) */
    int32_t n_expert_used; /* ... and chosen per token */
    int32_t n_ff_exp;      /* an expert's FFN width */
    int32_t n_ff_shexp;    /* the shared expert's FFN width (0: none) */
    int32_t bos_id, eos_id; /* -1 when absent */
} lp_hparams_t;

typedef struct lp_model lp_model_t;

/* Map a GGUF file and resolve every weight.  Fails with a message naming
 * the key or tensor at fault. */
int lp_model_load(const char *path, lp_model_t **out);
void lp_model_destroy(lp_model_t **self_p);
const lp_hparams_t *lp_model_hparams(const lp_model_t *m);
/* Borrowed, valid for the model's life. */
const lp_gguf_t *lp_model_gguf(const lp_model_t *m);
/* n_vocab bytes: 1 where a token must never be sampled (unused, padding,
 * or at/after n_tokens_real).  Borrowed. */
const uint8_t *lp_model_token_mask(const lp_model_t *m);

/* ---- engine ----------------------------------------------------------- */

/* lp_engine_params_t.kv_block: one n_ctx stretch per sequence, no paging. */
#define LP_ENGINE_KV_CONTIGUOUS (-1)

typedef struct lp_engine_params {
    int32_t n_ctx;            /* per-sequence KV capacity; 0 = min(n_ctx_train, 4096) */
    int32_t max_seqs;         /* sequence slots; 0 = 16 */
    int32_t max_batch_tokens; /* tokens per step; 0 = 512 */
    int32_t n_threads;        /* 0 = all cores */
    bool exact;               /* reference arithmetic: dequantize, dot in float */
    bool no_pack;             /* CPU: read the matrices in the file's layout, not
                                 packed at load (lp_matmul_pack) */
    const char *backend;      /* "cpu", "cuda" or NULL for the best available */
    /* Paged KV (the CPU backend; others keep one stretch per sequence). */
    int32_t kv_block;         /* positions per block; 0 = 16 (at most n_ctx);
                                 LP_ENGINE_KV_CONTIGUOUS: no paging */
    int64_t kv_pool_tokens;   /* pool size in positions, rounded up to blocks; 0 = default */
    int64_t kv_pool_mb;       /* pool size in MiB, rounded down to blocks; 0 = default.
                                 Default (both 0): max_seqs * n_ctx positions, which
                                 gives each seq_id its own fallback table */
    int64_t kv_pool_swa_tokens; /* the sliding-window layers' pool (models with
                                 n_swa), rounded up to blocks; 0 = default: per seq_id
                                 the blocks of a window and of the longest step */
} lp_engine_params_t;

typedef struct lp_engine lp_engine_t;

/* `model` is borrowed and must outlive the engine. */
int lp_engine_new(lp_model_t *model, const lp_engine_params_t *params, lp_engine_t **out);
void lp_engine_destroy(lp_engine_t **self_p);
const char *lp_engine_backend_name(const lp_engine_t *e);

/* Declare that logit rows passed to lp_engine_step may lie in
 * [ptr, ptr + len), e.g. engine-svc's shared-memory ring.  The CUDA backend
 * page-locks the range (cudaHostRegister) so that logits go from the device
 * straight into it by DMA; other backends ignore it.  The range must stay
 * mapped until lp_engine_destroy.  Returns 0 or a negative code. */
int lp_engine_register_host(lp_engine_t *e, void *ptr, size_t len);

/* Where the engine reads the host-memory weight whose data in the mapping
 * starts at w, when it reads a copy instead (the CPU backend's packed
 * matrices): the copy, standing for the first *bytes bytes of the
 * tensor's data (the rest is still read in place).  NULL: read in place. */
const void *lp_engine_weight_copy(const lp_engine_t *e, const void *w, size_t *bytes);

/* The KV pool: positions per block (0 when the engine does not page: the
 * CUDA backend, or kv_block LP_ENGINE_KV_CONTIGUOUS) and the number of
 * blocks (0 when it does not page). */
int32_t lp_engine_kv_block(const lp_engine_t *e);
int32_t lp_engine_kv_blocks(const lp_engine_t *e);
/* The sliding-window layers' pool (lp_batch_seq_t.swa_blocks): blocks, and
 * the window in positions; both 0 when the engine does not page or the
 * model has no sliding layers. */
int32_t lp_engine_kv_blocks_swa(const lp_engine_t *e);
int32_t lp_engine_kv_swa_window(const lp_engine_t *e);

/* What the mixture-of-experts layers have read since the engine began
 * (all zero for a dense model, or a backend that does not count). */
typedef struct lp_moe_counts {
    uint64_t calls;          /* layer steps (one per MoE layer per step) */
    uint64_t tokens;         /* tokens routed, summed over the calls */
    uint64_t pairs;          /* (token, expert) choices: tokens * expert_used_count */
    uint64_t expert_reads;   /* experts run: each once per call however many tokens chose it */
    uint64_t expert_bytes;   /* bytes of expert matrices those runs read */
} lp_moe_counts_t;
void lp_engine_moe_counts(const lp_engine_t *e, lp_moe_counts_t *out);

/* Forget a sequence's KV cache (a new request can then use the slot).  On a
 * paged engine this is the seq_id's fallback table (below). */
void lp_engine_seq_reset(lp_engine_t *e, int32_t seq_id);
int32_t lp_engine_seq_len(const lp_engine_t *e, int32_t seq_id);
/* Models with recurrent layers (lp_hparams_t.n_layer_rec): the position a
 * seq_id's state has reached (the next step's pos must be that or 0; -1
 * after a failed step, when only 0 is), -1 for other models. */
int32_t lp_engine_seq_state_pos(const lp_engine_t *e, int32_t seq_id);

/* One entry of a batch: a prefill chunk or a single decode token.
 *
 * Block tables (paged engines only): blocks[k] holds positions
 * k * kv_block .. (k + 1) * kv_block - 1 of the sequence, and the table
 * covers every position up to the last of `tokens`; the KV of positions
 * below pos must already be in its blocks (the caller owns allocation and
 * may share full blocks between sequences).  The step writes only the
 * blocks of positions pos .. pos + n_tokens - 1, which no other entry of the
 * batch may name.  Without a table (blocks NULL) the entry uses its seq_id's
 * fallback table, blocks seq_id * per_seq .. (seq_id + 1) * per_seq - 1 with
 * per_seq = ceil(n_ctx / kv_block): only when the pool holds that many
 * (max_seqs * per_seq blocks, the default size); then pos may not pass the
 * length the engine tracks for the seq_id.  A step with a table moves no
 * seq_id's tracked length, except that it cuts the length of a seq_id whose
 * fallback blocks it writes into. */
typedef struct lp_batch_seq {
    int32_t seq_id;        /* 0 .. max_seqs-1; each at most once per batch */
    int32_t pos;           /* position of tokens[0]; without a table <= the
                              sequence's length (a smaller value drops the
                              cache after it) */
    int32_t n_tokens;
    const int32_t *tokens; /* borrowed for the call */
    int32_t n_logits;      /* logits for the last n_logits tokens (0..n_tokens) */
    const uint32_t *blocks; /* (n_blocks) block table, or NULL; borrowed for the call */
    int32_t n_blocks;
    /* The sliding-window layers' table (models with lp_hparams_t.n_swa),
     * in their own pool: NULL to use `blocks` for them too. */
    const uint32_t *swa_blocks;
    int32_t n_swa_blocks;
} lp_batch_seq_t;

/* Check an entry's KV addressing as lp_engine_step will: its block table
 * (paged engine, every index < kv_blocks, long enough for pos + n_tokens,
 * no longer than the context needs, no block twice) and, for a model with
 * sliding layers, its swa_blocks table (required with a table, as long,
 * the same rules for the entries from the block of pos - n_swa + 1 on, the
 * ones before not read) or, without tables, that the fallback tables exist
 * and pos is within the seq_id's length.  The
 * message names the field ("blocks[3] = 70 is not in 0..63") without the
 * entry; the caller prefixes it.  seq_id must be in range. */
int lp_engine_check_kv(lp_engine_t *e, const lp_batch_seq_t *s);

/* Run one forward step over every entry.  `logits` holds one row pointer
 * (n_vocab floats each) per requested row, in batch order: entry 0's rows
 * first, oldest token first.  Rows may point into shared memory. */
int lp_engine_step(lp_engine_t *e, const lp_batch_seq_t *seqs, int32_t n_seqs,
                   float *const *logits);

#endif
