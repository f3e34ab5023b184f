/* matvec.cu - y = W x for a few tokens, reading the quantized weights
 * directly: the decode path.
 *
 * Two warps per output row, two rows per block: the exact decode is a long
 * chain of instructions per weight, so the kernel is bound by latency, and
 * more warps on fewer items each keep more of it in flight.  Each lane
 * accumulates its share of the row (matvec_lane_n, matvec.cuh), reading the
 * weight row once for every token of the launch (up to
 * LP_CUDA_MMV_MAX_TOKENS); each warp adds its lanes' sums with shuffles and
 * the two warps' sums meet in shared memory.  A launch of one token is
 * compiled on its own (NT = 1), without the other tokens' branches.  The
 * activations (a few rows of floats) stay in L1/L2. */
#include "kernels.h"
#include "launch.cuh"
#include "matvec.cuh"

using namespace lp_cuda;

#define ROWS_PER_BLOCK 2
#define WARPS_PER_ROW 2
#define ROW_THREADS (32 * WARPS_PER_ROW)

/* Adds a row's per-warp sums: acc[t] of every lane of the row's threads in,
 * the row's total for token t out in lane t of its first warp (others get
 * garbage).  All threads of the block must call it. */
template <int N>
__device__ __forceinline__ void row_sums(float (&acc)[N][LP_CUDA_MMV_MAX_TOKENS], int n_tok,
                                         float (*part)[WARPS_PER_ROW][N][LP_CUDA_MMV_MAX_TOKENS])
{
    const int lane = threadIdx.x % ROW_THREADS, rib = threadIdx.x / ROW_THREADS;
#pragma unroll
    for (int r = 0; r < N; r++)
#pragma unroll
        for (int t = 0; t < LP_CUDA_MMV_MAX_TOKENS; t++) {
            if (t < n_tok) {
                float s = acc[r][t];
#pragma unroll
                for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
                if (lane % 32 == 0) part[rib][lane / 32][r][t] = s;
            }
        }
    __syncthreads();
    if (lane < n_tok)
#pragma unroll
        for (int r = 0; r < N; r++) {
            float s = part[rib][0][r][lane];
#pragma unroll
            for (int w = 1; w < WARPS_PER_ROW; w++) s += part[rib][w][r][lane];
            acc[r][0] = s;
        }
}

/* Up to three products of one input in one launch (q, k and v): the
 * segments' rows are numbered one after the other. */
struct mv_segs {
    lp_cuda_mv_out_t seg[LP_CUDA_MV_MAX_OUTS];
};

template <typename Q, int NT>
__global__ void __launch_bounds__(ROW_THREADS * ROWS_PER_BLOCK)
matvec_kernel(const mv_segs segs, int n_segs, int64_t n_in, const float *__restrict__ x,
              int64_t x_stride, int n_tok_rt, bool accumulate)
{
    __shared__ float part[ROWS_PER_BLOCK][WARPS_PER_ROW][1][LP_CUDA_MMV_MAX_TOKENS];
    const int n_tok = NT ? NT : n_tok_rt;
    const int lane = threadIdx.x % ROW_THREADS;
    int64_t row = (int64_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / ROW_THREADS;
    int si = 0;
    while (si < n_segs && row >= segs.seg[si].n_out) row -= segs.seg[si++].n_out;
    const bool valid = si < n_segs;  /* the last block's spare row still meets the barrier */
    float acc[1][LP_CUDA_MMV_MAX_TOKENS] = {};
    if (valid)
        matvec_lane_n<Q>((const uint8_t *)segs.seg[si].w + row * segs.seg[si].row_bytes, n_in,
                         x, x_stride, n_tok, lane, ROW_THREADS, acc[0]);
    row_sums<1>(acc, n_tok, part);
    if (valid && lane < n_tok) {
        const lp_cuda_mv_out_t &sg = segs.seg[si];
        /* same order as the CPU: W x, then the bias, then the residual */
        const float s = acc[0][0];
        const float r = sg.bias ? s + sg.bias[row] : s;
        float *yp = sg.y + lane * sg.y_stride + row;
        *yp = accumulate ? *yp + r : r;
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
        if (n_tok == 1)
            matvec_kernel<Q, 1><<<blocks, ROW_THREADS * ROWS_PER_BLOCK, 0, stream>>>(
                segs, n_outs, n_in, d_x, x_stride, n_tok, accumulate);
        else
            matvec_kernel<Q, 0><<<blocks, ROW_THREADS * ROWS_PER_BLOCK, 0, stream>>>(
                segs, n_outs, n_in, d_x, x_stride, n_tok, accumulate);
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

/* Row o: the gate and up rows o are dotted with x like the plain kernel,
 * then y = silu(g) * u with the rounding of lp_cuda_swiglu. */
template <typename Q, int NT>
__global__ void __launch_bounds__(ROW_THREADS * ROWS_PER_BLOCK)
matvec_glu_kernel(const uint8_t *__restrict__ wg, const uint8_t *__restrict__ wu,
                  size_t row_bytes, int64_t n_in, int64_t n_out, const float *__restrict__ x,
                  int64_t x_stride, int n_tok_rt, float *__restrict__ y, int64_t y_stride)
{
    __shared__ float part[ROWS_PER_BLOCK][WARPS_PER_ROW][2][LP_CUDA_MMV_MAX_TOKENS];
    const int n_tok = NT ? NT : n_tok_rt;
    const int lane = threadIdx.x % ROW_THREADS;
    const int64_t row = (int64_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / ROW_THREADS;
    const bool valid = row < n_out;
    float acc[2][LP_CUDA_MMV_MAX_TOKENS] = {};
    if (valid) {
        matvec_lane_n<Q>(wg + row * row_bytes, n_in, x, x_stride, n_tok, lane, ROW_THREADS,
                         acc[0]);
        matvec_lane_n<Q>(wu + row * row_bytes, n_in, x, x_stride, n_tok, lane, ROW_THREADS,
                         acc[1]);
    }
    row_sums<2>(acc, n_tok, part);
    if (valid && lane < n_tok) {
        const float g = acc[0][0], u = acc[1][0];
        y[lane * y_stride + row] = __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u);
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
        if (n_tok == 1)
            matvec_glu_kernel<Q, 1><<<blocks, ROW_THREADS * ROWS_PER_BLOCK, 0, stream>>>(
                (const uint8_t *)d_wg, (const uint8_t *)d_wu, row_bytes, n_in, n_out, d_x,
                x_stride, n_tok, d_y, y_stride);
        else
            matvec_glu_kernel<Q, 0><<<blocks, ROW_THREADS * ROWS_PER_BLOCK, 0, stream>>>(
                (const uint8_t *)d_wg, (const uint8_t *)d_wu, row_bytes, n_in, n_out, d_x,
                x_stride, n_tok, d_y, y_stride);
    });
    if (!ok)
        return lp_error_set(LP_ERR(ENOTSUP), "CUDA matvec_glu: unsupported type %s (%u)",
                            lp_type_name(type), type);
    return lp_cuda_launched("matvec_glu");
}
