/* attn-kern.h - internal: the blocked attention kernel of one instruction
 * set (scalar, avx2, avx512); attn.c picks the one that matches the
 * current matmul kernel set (lp__kern_current()).
 *
 * One call is one tile: nr query rows that share one KV head, each with its
 * own number of visible keys, over keys 0 .. max(n_keys) - 1.  The SIMD
 * kernels keep the rows in vector lanes (row r is lane r % W of vector
 * r / W), so the causal mask, the running maximum and sum of the online
 * softmax and the rescaling of the output are all lane-wise. */
#ifndef LP_ATTN_KERN_H
#define LP_ATTN_KERN_H

#include <stddef.h>
#include <stdint.h>

/* out[r] = softmax_{k_lo[r] <= j < n_keys[r]}(scale * q[r] . k_j) . v_j for
 * r < nr (k_lo NULL: from 0); sink (NULL: none): one more logit sink[r]
 * per row in the softmax's denominator, with no value (attention sinks).
 * q[r], out[r]: head_dim floats (borrowed); key j's k and v rows are
 * head_dim floats at k + off[j] and v + off[j] (off: one entry per key up
 * to max(n_keys), so a paged cache's rows may lie anywhere; keys below
 * min(k_lo) are never read).  A row that sees no key gets zeros.  nr is at most the kernel's `rows`; scratch is
 * lp__attn_scratch_floats(rows, head_dim) floats, 64-byte aligned, owned
 * by the calling thread. */
typedef void (*lp__attn_tile_fn)(int32_t nr, const float *const *q, float *const *out,
                                 const int32_t *k_lo, const int32_t *n_keys, const float *k,
                                 const float *v,
                                 const int64_t *off, int32_t head_dim, float scale,
                                 const float *sink, float *scratch);

typedef struct lp__attn_kern {
    const char *name;
    int32_t rows; /* most query rows per tile */
    lp__attn_tile_fn tile;
} lp__attn_kern_t;

#define LP_ATTN_KB 32       /* keys per block of the online softmax */
#define LP_ATTN_ROWS_MAX 32 /* the largest `rows` of any kernel */

/* Scratch of one tile: q transposed and scaled (head_dim x rows), the
 * output transposed (head_dim x rows), one block of scores (LP_ATTN_KB x
 * rows), in floats, rounded to a 64-byte multiple. */
static inline size_t lp__attn_scratch_floats(int32_t rows, int32_t head_dim)
{
    size_t n = (size_t)rows * (2 * (size_t)head_dim + LP_ATTN_KB) + (size_t)head_dim;
    return (n + 15) & ~(size_t)15;
}

extern const lp__attn_kern_t lp__attn_scalar;
#if defined(LP_HAVE_X86_KERNELS)
extern const lp__attn_kern_t lp__attn_avx2;
extern const lp__attn_kern_t lp__attn_avx512;
#endif

#endif
