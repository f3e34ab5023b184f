/* attn.h - blocked causal attention over KV caches, the CPU backend's fast
 * path (the `exact` path keeps lp_op_attn_head, in ops.h).
 *
 * Query rows that share one KV head (a GQA group) and come from
 * consecutive tokens of one sequence form a tile; a tile's scores against a
 * block of keys are computed at once with SIMD FMAs, softmax is online
 * (running maximum and sum, rescaled output), and P.V is accumulated with
 * SIMD.  Tiles are handed to the pool's threads one at a time, costliest
 * first.  The kernels follow the matmul kernel set in use (LMPIPE_ISA,
 * lp_matmul_set_isa): scalar, avx2, avx512 (vnni uses avx512's). */
#ifndef LP_ATTN_H
#define LP_ATTN_H

#include <stdint.h>

#include "threadpool.h"

typedef struct lp_attn_batch {
    float *out;             /* (n_tok, n_head, head_dim), written */
    const float *q;         /* (n_tok, n_head, head_dim) */
    const int32_t *tok_seq; /* (n_tok) index into k and v of the cache each token reads */
    const int32_t *tok_pos; /* (n_tok) position: token t sees cache positions 0 .. tok_pos[t] */
    const int32_t *tok_lo;  /* (n_tok) or NULL: token t sees only positions from tok_lo[t] on
                             * (a sliding window); positions below the lowest tok_lo of a
                             * cache's tokens are never read */
    const float *const *k;  /* per cache: KV head g, position j of one layer at
                             * g * head_stride + j * key_stride, head_dim floats
                             * (with key_off: g * head_stride + key_off[i][j]); borrowed */
    const float *const *v;  /* likewise */
    int64_t key_stride, head_stride; /* floats */
    /* May be NULL (every cache one stretch of key_stride apart rows).  A
     * paged cache's rows: per cache i, the offset in floats from k[i] and
     * v[i] of position j, for j up to the largest tok_pos of its tokens;
     * borrowed.  key_stride must still be at least head_dim. */
    const int64_t *const *key_off;
    int32_t n_tok, n_head, n_head_kv, head_dim;
    float scale;            /* applied to q . k before the softmax */
    const float *sinks;     /* (n_head) or NULL: head h's softmax has one more logit,
                             * sinks[h], with no value (attention sinks); borrowed */
} lp_attn_batch_t;

/* out[t][h] = softmax_{lo_t <= j <= tok_pos[t]}(scale * q[t][h] . k_j) . v_j (lo_t
 * tok_lo[t], or 0), with
 * k_j, v_j the rows of KV head h / (n_head / n_head_kv) at position j of
 * cache tok_seq[t].  Head h of the output is computed in float with an
 * exp accurate to about 2^-23 (not bit-equal to lp_op_attn_head).  Runs on
 * the pool (its scratch buffer holds the work list and each thread's tile
 * buffers).  The result does not depend on where the rows lie (key_off or
 * strides): the same keys give the same bits.  Returns 0, -EINVAL when a
 * stride is below head_dim, or
 * -ENOMEM when the scratch buffer cannot grow, with a message. */
int lp_attn_run(lp_threadpool_t *pool, const lp_attn_batch_t *b);

#endif
