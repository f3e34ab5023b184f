/* kernels.h - the CUDA backend's device kernels, callable from C.
 *
 * Every function enqueues work on `stream` and returns 0, or a negative
 * errno-style code with lp_error_set() naming the kernel when the launch
 * failed (cudaGetLastError after the launch).  Pointers named d_* are
 * device memory; nothing here synchronizes.  Shapes follow the CPU
 * reference (forward-cpu.c, ops.h): activations are row-major
 * [token][n_embd], q is [token][head][head_dim], k and v are
 * [token][kv_head][head_dim]; a sequence's KV cache differs from the
 * CPU's (head-major): it is [layer][pos][kv_head][head_dim] float32 with
 * `cap` positions per layer.
 *
 * The weight types are those of quant.h (F32, F16, BF16, Q4_0, Q4_1, Q5_0,
 * Q5_1, Q8_0, Q4_K, Q5_K, Q6_K); a weight is n_out rows of n_in elements,
 * row_bytes apart, exactly as in the GGUF file. */
#ifndef LP_CUDA_KERNELS_H
#define LP_CUDA_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Per-token facts the attention and cache kernels read from device memory,
 * so that a step's launches do not depend on positions (graph-friendly). */
typedef struct lp_cuda_tok {
    float *k;      /* the token's sequence: K cache, (n_layer, cap, kv_dim) */
    float *v;      /* V cache, same shape */
    int32_t cap;   /* positions per layer in that cache */
    int32_t pos;   /* this token's position; it attends to 0..pos */
} lp_cuda_tok_t;

/* Positions handled by one block of the split-K attention kernel. */
#define LP_CUDA_ATTN_SPLIT 256
/* Largest head_dim the attention kernel handles (8 values per lane). */
#define LP_CUDA_MAX_HEAD_DIM 256
/* Tokens one quantized matrix-vector launch handles; larger batches run
 * in several launches or on cuBLAS. */
#define LP_CUDA_MMV_MAX_TOKENS 8

/* True when the kernels handle weights of `type`. */
bool lp_cuda_type_supported(uint32_t type);

/* out[r][0..n_in) = dequantized row rows[r] (or row r when rows is NULL) of
 * the weight, for r < n_rows.  d_rows is device memory. */
int lp_cuda_dequant(cudaStream_t stream, uint32_t type, const void *d_w, size_t row_bytes,
                    int64_t n_in, int64_t n_rows, const int32_t *d_rows, float *d_out);

/* y[t][o] (+)= sum_i w[o][i] * x[t][i] (+ bias[o]) for t < n_tok <=
 * LP_CUDA_MMV_MAX_TOKENS, reading the quantized weight directly (two warps
 * per output row).  accumulate adds into y (a fused residual add); bias may
 * be NULL.  Floats are accumulated in float, in a fixed order. */
int lp_cuda_matvec(cudaStream_t stream, uint32_t type, const void *d_w, size_t row_bytes,
                   int64_t n_in, int64_t n_out, const float *d_x, int64_t x_stride,
                   int32_t n_tok, const float *d_bias, float *d_y, int64_t y_stride,
                   bool accumulate);

/* One output of lp_cuda_matvec_multi: n_out rows of the weight at w,
 * y[t][o] (+)= row o . x[t] (+ bias[o]), y rows y_stride apart. */
typedef struct lp_cuda_mv_out {
    const void *w;
    size_t row_bytes;
    int64_t n_out;
    const float *bias;  /* may be NULL */
    float *y;
    int64_t y_stride;
} lp_cuda_mv_out_t;

#define LP_CUDA_MV_MAX_OUTS 3

/* lp_cuda_matvec for up to LP_CUDA_MV_MAX_OUTS weights of one type and
 * width that read the same x (q, k and v), in one launch. */
int lp_cuda_matvec_multi(cudaStream_t stream, uint32_t type, int64_t n_in, const float *d_x,
                         int64_t x_stride, int32_t n_tok, const lp_cuda_mv_out_t *outs,
                         int n_outs, bool accumulate);

/* y[t][o] = silu(g) * u with g = Wg[o] . x[t], u = Wu[o] . x[t]: the gate
 * and up products of the feed-forward block and SwiGLU in one launch, each
 * sum as lp_cuda_matvec's and the SwiGLU rounding as lp_cuda_swiglu's.  Both
 * weights have one type and shape. */
int lp_cuda_matvec_glu(cudaStream_t stream, uint32_t type, const void *d_wg, const void *d_wu,
                       size_t row_bytes, int64_t n_in, int64_t n_out, const float *d_x,
                       int64_t x_stride, int32_t n_tok, float *d_y, int64_t y_stride);

/* y[r] = rmsnorm(x[rows[r]]) * w for r < n_rows (rows NULL: row r), rows of
 * n floats; the sum of squares is taken in double as in lp_op_rmsnorm. */
int lp_cuda_rmsnorm(cudaStream_t stream, float *d_y, const float *d_x, const float *d_w,
                    int64_t n, int32_t n_rows, const int32_t *d_rows, float eps);

/* RoPE in place on q (n_tok, n_head, head_dim) and k (n_tok, n_head_kv,
 * head_dim) at each token's tok[t].pos, as lp_op_rope: pairs (2i, 2i+1),
 * or (i, i + n_rot/2) when neox; theta_i = pos * theta_scale^i computed by
 * repeated multiplication in float, theta_scale = powf(base, -2/n_rot)
 * given by the caller.  q or k may be NULL.  Then, when `layer` >= 0, the
 * roped k row and the v row of every token are stored into its sequence's
 * cache at (layer, pos). */
int lp_cuda_rope_store(cudaStream_t stream, float *d_q, float *d_k, const float *d_v,
                       const lp_cuda_tok_t *d_tok, int32_t n_tok, int32_t n_head,
                       int32_t n_head_kv, int32_t head_dim, int32_t n_rot, float theta_scale,
                       bool neox, int32_t layer);

/* Scratch floats lp_cuda_attention needs for n_tok tokens whose positions
 * are below max_pos + 1. */
size_t lp_cuda_attention_scratch(int32_t n_tok, int32_t n_head, int32_t head_dim,
                                 int32_t max_pos);

/* Causal GQA attention of every (token, head) over its sequence's cached
 * positions 0..tok[t].pos of `layer`, as lp_op_attn_head with scale:
 * flash-decoding, split into blocks of LP_CUDA_ATTN_SPLIT positions whose
 * partial (max, sum, weighted V) are then combined.  mask, when not NULL,
 * holds mask_stride bytes per token, 1 = position masked (tests); a fully
 * masked row gives zeros, never NaN.  max_pos bounds every tok[t].pos. */
int lp_cuda_attention(cudaStream_t stream, float *d_out, const float *d_q,
                      const lp_cuda_tok_t *d_tok, int32_t n_tok, int32_t n_head,
                      int32_t n_head_kv, int32_t head_dim, float scale, int32_t layer,
                      int32_t max_pos, const uint8_t *d_mask, int64_t mask_stride,
                      float *d_scratch);

/* out = silu(g) * u, element-wise; out may alias g. */
int lp_cuda_swiglu(cudaStream_t stream, float *d_out, const float *d_g, const float *d_u,
                   int64_t n);

/* y[r][i] += b[i] for i < n, r < n_rows, y rows y_stride floats apart (a
 * bias); with n_rows 1 it is the element-wise y += b (a residual add). */
int lp_cuda_add_rows(cudaStream_t stream, float *d_y, int64_t y_stride, const float *d_b,
                     int64_t n_rows, int64_t n);

#ifdef __cplusplus
}
#endif

#endif
