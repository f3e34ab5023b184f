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

template <typename Q>
__global__ void __launch_bounds__(32 * ROWS_PER_BLOCK)
matvec_kernel(const uint8_t *__restrict__ w, size_t row_bytes, int64_t n_in, int64_t n_out,
              const float *__restrict__ x, int64_t x_stride, int n_tok,
              const float *__restrict__ bias, float *y, int64_t y_stride, bool accumulate)
{
    const int lane = threadIdx.x % 32;
    const int64_t row = (int64_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    if (row >= n_out) return;
    float acc[LP_CUDA_MMV_MAX_TOKENS];
    matvec_lane<Q>(w + row * row_bytes, n_in, x, x_stride, n_tok, lane, acc);
#pragma unroll
    for (int t = 0; t < LP_CUDA_MMV_MAX_TOKENS; t++) {
        if (t < n_tok) {
            float s = acc[t];
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
            if (lane == t) {
                /* same order as the CPU: W x, then the bias, then the residual */
                float r = bias ? s + bias[row] : s;
                float *yp = y + t * y_stride + row;
                *yp = accumulate ? *yp + r : r;
            }
        }
    }
}

extern "C" int lp_cuda_matvec(cudaStream_t stream, uint32_t type, const void *d_w,
                              size_t row_bytes, int64_t n_in, int64_t n_out, const float *d_x,
                              int64_t x_stride, int32_t n_tok, const float *d_bias, float *d_y,
                              int64_t y_stride, bool accumulate)
{
    if (n_tok < 1 || n_tok > LP_CUDA_MMV_MAX_TOKENS)
        return lp_error_set(LP_ERR(EINVAL), "CUDA matvec: %d tokens, expected 1..%d", n_tok,
                            LP_CUDA_MMV_MAX_TOKENS);
    const bool vec8 = n_in % 8 == 0 && row_bytes % 16 == 0 && (uintptr_t)d_w % 16 == 0;
    const unsigned blocks = (unsigned)((n_out + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
    bool ok = lp_cuda_dispatch(type, vec8, [&]<typename Q>() {
        matvec_kernel<Q><<<blocks, 32 * ROWS_PER_BLOCK, 0, stream>>>(
            (const uint8_t *)d_w, row_bytes, n_in, n_out, d_x, x_stride, n_tok, d_bias, d_y,
            y_stride, accumulate);
    });
    if (!ok)
        return lp_error_set(LP_ERR(ENOTSUP), "CUDA matvec: unsupported type %s (%u)",
                            lp_type_name(type), type);
    return lp_cuda_launched("matvec");
}
