/* matvec.cu - y = W x for a few tokens, reading the quantized weights
 * directly: the decode path, which is bound by the bytes of W.
 *
 * One warp per output row, four rows per block; each lane accumulates its
 * share of the row (matvec_lane, matvec.cuh), reading the weight row once
 * for every token of the launch (up to LP_CUDA_MMV_MAX_TOKENS); the lanes'
 * sums are then added with shuffles.  The activations (a few rows of
 * floats) stay in L1/L2. */
#include "kernels.h"
#include "launch.cuh"
#include "matvec.cuh"

using namespace lp_cuda;

#define ROWS_PER_BLOCK 4

/* Up to three products of one input in one launch (q, k and v): the
 * segments' rows are numbered one after the other. */
struct mv_segs {
    lp_cuda_mv_out_t seg[LP_CUDA_MV_MAX_OUTS];
};

template <typename Q>
__global__ void __launch_bounds__(32 * ROWS_PER_BLOCK)
matvec_kernel(const mv_segs segs, int n_segs, int64_t n_in, const float *__restrict__ x,
              int64_t x_stride, int n_tok, bool accumulate)
{
    const int lane = threadIdx.x % 32;
    int64_t row = (int64_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    int si = 0;
    while (si < n_segs && row >= segs.seg[si].n_out) row -= segs.seg[si++].n_out;
    if (si == n_segs) return;
    const lp_cuda_mv_out_t &sg = segs.seg[si];
    float acc[LP_CUDA_MMV_MAX_TOKENS];
    matvec_lane<Q>((const uint8_t *)sg.w + row * sg.row_bytes, n_in, x, x_stride, n_tok, lane,
                   acc);
#pragma unroll
    for (int t = 0; t < LP_CUDA_MMV_MAX_TOKENS; t++) {
        if (t < n_tok) {
            float s = acc[t];
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
            if (lane == t) {
                /* same order as the CPU: W x, then the bias, then the residual */
                float r = sg.bias ? s + sg.bias[row] : s;
                float *yp = sg.y + t * sg.y_stride + row;
                *yp = accumulate ? *yp + r : r;
            }
        }
    }
}

extern "C" int lp_cuda_matvec_multi(cudaStream_t stream, uint32_t type, int64_t n_in,
                                    const float *d_x, int64_t x_stride, int32_t n_tok,
                                    const lp_cuda_mv_out_t *outs, int n_outs, bool accumulate)
{
    if (n_tok < 1 || n_tok > LP_CUDA_MMV_MAX_TOKENS)
        return lp_error_set(LP_ERR(EINVAL), "CUDA matvec: %d tokens, expected 1..%d", n_tok,
                            LP_CUDA_MMV_MAX_TOKENS);
    if (n_outs < 1 || n_outs > LP_CUDA_MV_MAX_OUTS)
        return lp_error_set(LP_ERR(EINVAL), "CUDA matvec: %d outputs, expected 1..%d", n_outs,
                            LP_CUDA_MV_MAX_OUTS);
    mv_segs segs = {};
    bool vec8 = n_in % 8 == 0;
    int64_t rows = 0;
    for (int i = 0; i < n_outs; i++) {
        segs.seg[i] = outs[i];
        rows += outs[i].n_out;
        vec8 = vec8 && outs[i].row_bytes % 16 == 0 && (uintptr_t)outs[i].w % 16 == 0;
    }
    const unsigned blocks = (unsigned)((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
    bool ok = lp_cuda_dispatch(type, vec8, [&]<typename Q>() {
        matvec_kernel<Q><<<blocks, 32 * ROWS_PER_BLOCK, 0, stream>>>(segs, n_outs, n_in, d_x,
                                                                     x_stride, n_tok, accumulate);
    });
    if (!ok)
        return lp_error_set(LP_ERR(ENOTSUP), "CUDA matvec: unsupported type %s (%u)",
                            lp_type_name(type), type);
    return lp_cuda_launched("matvec");
}

extern "C" int lp_cuda_matvec(cudaStream_t stream, uint32_t type, const void *d_w,
                              size_t row_bytes, int64_t n_in, int64_t n_out, const float *d_x,
                              int64_t x_stride, int32_t n_tok, const float *d_bias, float *d_y,
                              int64_t y_stride, bool accumulate)
{
    const lp_cuda_mv_out_t out = {d_w, row_bytes, n_out, d_bias, d_y, y_stride};
    return lp_cuda_matvec_multi(stream, type, n_in, d_x, x_stride, n_tok, &out, 1, accumulate);
}

/* ---- gate, up and SwiGLU in one pass ---------------------------------- */

/* Warp per row o: the gate and up rows o are dotted with x like the plain
 * kernel, then y = silu(g) * u with the rounding of lp_cuda_swiglu. */
template <typename Q>
__global__ void __launch_bounds__(32 * ROWS_PER_BLOCK)
matvec_glu_kernel(const uint8_t *__restrict__ wg, const uint8_t *__restrict__ wu,
                  size_t row_bytes, int64_t n_in, int64_t n_out, const float *__restrict__ x,
                  int64_t x_stride, int n_tok, float *__restrict__ y, int64_t y_stride)
{
    const int lane = threadIdx.x % 32;
    const int64_t row = (int64_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    if (row >= n_out) return;
    float acc_g[LP_CUDA_MMV_MAX_TOKENS], acc_u[LP_CUDA_MMV_MAX_TOKENS];
    matvec_lane<Q>(wg + row * row_bytes, n_in, x, x_stride, n_tok, lane, acc_g);
    matvec_lane<Q>(wu + row * row_bytes, n_in, x, x_stride, n_tok, lane, acc_u);
#pragma unroll
    for (int t = 0; t < LP_CUDA_MMV_MAX_TOKENS; t++) {
        if (t < n_tok) {
            float g = acc_g[t], u = acc_u[t];
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) {
                g += __shfl_xor_sync(0xffffffffu, g, off);
                u += __shfl_xor_sync(0xffffffffu, u, off);
            }
            if (lane == t)
                y[t * y_stride + row] = __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u);
        }
    }
}

extern "C" int lp_cuda_matvec_glu(cudaStream_t stream, uint32_t type, const void *d_wg,
                                  const void *d_wu, size_t row_bytes, int64_t n_in,
                                  int64_t n_out, const float *d_x, int64_t x_stride,
                                  int32_t n_tok, float *d_y, int64_t y_stride)
{
    if (n_tok < 1 || n_tok > LP_CUDA_MMV_MAX_TOKENS)
        return lp_error_set(LP_ERR(EINVAL), "CUDA matvec_glu: %d tokens, expected 1..%d", n_tok,
                            LP_CUDA_MMV_MAX_TOKENS);
    const bool vec8 = n_in % 8 == 0 && row_bytes % 16 == 0 && (uintptr_t)d_wg % 16 == 0 &&
                      (uintptr_t)d_wu % 16 == 0;
    const unsigned blocks = (unsigned)((n_out + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
    bool ok = lp_cuda_dispatch(type, vec8, [&]<typename Q>() {
        matvec_glu_kernel<Q><<<blocks, 32 * ROWS_PER_BLOCK, 0, stream>>>(
            (const uint8_t *)d_wg, (const uint8_t *)d_wu, row_bytes, n_in, n_out, d_x, x_stride,
            n_tok, d_y, y_stride);
    });
    if (!ok)
        return lp_error_set(LP_ERR(ENOTSUP), "CUDA matvec_glu: unsupported type %s (%u)",
                            lp_type_name(type), type);
    return lp_cuda_launched("matvec_glu");
}
