/* attention.cu - causal GQA attention over the KV cache, flash-decoding
 * style: every (token, head) query is split into blocks of
 * LP_CUDA_ATTN_SPLIT cached positions; each block keeps an online softmax
 * (running max m, sum l, and the l-weighted sum of V rows) per warp, merges
 * its warps, and writes the partial (m, l, acc[head_dim]); a second kernel
 * merges the splits: out = sum_s acc_s e^(m_s - M) / sum_s l_s e^(m_s - M).
 * With a single split (max_pos < LP_CUDA_ATTN_SPLIT) the block normalises
 * its own result and there is no merge launch.
 *
 * Prefill uses the same kernels: token t of a batch attends to positions
 * 0..tok[t].pos of its own sequence, which the cache already holds (the
 * step stores every token's K and V before attention), so the causal mask
 * is the loop bound.  A split or a row with every position masked has
 * m = -inf and contributes nothing; a fully masked row is all zeros, as in
 * lp_op_attn_head, and never NaN (no 0/0, no exp(-inf - -inf)). */
#include <cmath>
#include <cstdint>

#include "kernels.h"
#include "launch.cuh"

#define ATTN_WARPS 4
#define ATTN_PER_LANE (LP_CUDA_MAX_HEAD_DIM / 32)

__global__ void __launch_bounds__(32 * ATTN_WARPS)
attn_split_kernel(const float *__restrict__ q, const lp_cuda_tok_t *__restrict__ tok, int n_head,
                  int n_head_kv, int hd, float scale, int layer, const uint8_t *__restrict__ mask,
                  int64_t mask_stride, float *__restrict__ part, int n_splits,
                  float *__restrict__ out)
{
    __shared__ float qs[LP_CUDA_MAX_HEAD_DIM];
    __shared__ float wm[ATTN_WARPS], wl[ATTN_WARPS];
    __shared__ float wacc[ATTN_WARPS][LP_CUDA_MAX_HEAD_DIM];
    const int64_t th = blockIdx.x;
    const int64_t t = th / n_head;
    const int h = (int)(th % n_head), s = blockIdx.y;
    const int n_pos = tok[t].pos + 1;
    const int start = s * LP_CUDA_ATTN_SPLIT;
    if (start >= n_pos) return; /* the merge reads only the splits in use */
    const int end = min(start + LP_CUDA_ATTN_SPLIT, n_pos);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t kv_dim = (int64_t)n_head_kv * hd;
    const int64_t q_dim = (int64_t)n_head * hd;
    const size_t base = (size_t)layer * (size_t)tok[t].cap * (size_t)kv_dim +
                        (size_t)(h / (n_head / n_head_kv)) * (size_t)hd;
    const float *kb = tok[t].k + base, *vb = tok[t].v + base;
    const uint8_t *mrow = mask ? mask + t * mask_stride : nullptr;

    for (int d = threadIdx.x; d < hd; d += blockDim.x) qs[d] = q[t * q_dim + (int64_t)h * hd + d];
    __syncthreads();

    float m = -INFINITY, l = 0.0f, acc[ATTN_PER_LANE];
#pragma unroll
    for (int i = 0; i < ATTN_PER_LANE; i++) acc[i] = 0.0f;
    for (int j = start + warp; j < end; j += ATTN_WARPS) {
        if (mrow && mrow[j]) continue;
        const float *kj = kb + (int64_t)j * kv_dim;
        float dot = 0.0f;
        for (int d = lane; d < hd; d += 32) dot += qs[d] * kj[d];
        for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
        const float sc = dot * scale;
        const float m_new = fmaxf(m, sc);
        const float corr = expf(m - m_new); /* m = -inf at first: 0 */
        const float p = expf(sc - m_new);
        l = l * corr + p;
        const float *vj = vb + (int64_t)j * kv_dim;
#pragma unroll
        for (int i = 0; i < ATTN_PER_LANE; i++) {
            const int d = lane + 32 * i;
            if (d < hd) acc[i] = acc[i] * corr + p * vj[d];
        }
        m = m_new;
    }
    if (lane == 0) {
        wm[warp] = m;
        wl[warp] = l;
    }
#pragma unroll
    for (int i = 0; i < ATTN_PER_LANE; i++) {
        const int d = lane + 32 * i;
        if (d < hd) wacc[warp][d] = acc[i];
    }
    __syncthreads();

    float M = -INFINITY;
    for (int w = 0; w < ATTN_WARPS; w++) M = fmaxf(M, wm[w]);
    float f[ATTN_WARPS];
    float L = 0.0f;
    for (int w = 0; w < ATTN_WARPS; w++) {
        f[w] = wm[w] == -INFINITY ? 0.0f : expf(wm[w] - M);
        L += wl[w] * f[w];
    }
    if (out) {
        /* the only split: normalise here, exactly as the merge would
         * (its factor e^(m - M) is 1) */
        float *o = out + th * hd;
        const float inv = 1.0f / L;
        for (int d = threadIdx.x; d < hd; d += blockDim.x) {
            float a = 0.0f;
            for (int w = 0; w < ATTN_WARPS; w++) a += wacc[w][d] * f[w];
            o[d] = M == -INFINITY ? 0.0f : a * inv;
        }
        return;
    }
    float *pp = part + ((size_t)th * (size_t)n_splits + (size_t)s) * (size_t)(hd + 2);
    if (threadIdx.x == 0) {
        pp[0] = M;
        pp[1] = L;
    }
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float a = 0.0f;
        for (int w = 0; w < ATTN_WARPS; w++) a += wacc[w][d] * f[w];
        pp[2 + d] = a;
    }
}

__global__ void attn_merge_kernel(float *__restrict__ out, const lp_cuda_tok_t *__restrict__ tok,
                                  int n_head, int hd, const float *__restrict__ part, int n_splits)
{
    const int64_t th = blockIdx.x, t = th / n_head;
    const int used = (tok[t].pos + 1 + LP_CUDA_ATTN_SPLIT - 1) / LP_CUDA_ATTN_SPLIT;
    const float *pp = part + (size_t)th * (size_t)n_splits * (size_t)(hd + 2);
    float M = -INFINITY;
    for (int s = 0; s < used; s++) M = fmaxf(M, pp[(size_t)s * (hd + 2)]);
    float *o = out + th * hd; /* [token][head][dim] = th * hd */
    if (M == -INFINITY) { /* every position masked */
        for (int d = threadIdx.x; d < hd; d += blockDim.x) o[d] = 0.0f;
        return;
    }
    float L = 0.0f;
    for (int s = 0; s < used; s++) {
        const float ms = pp[(size_t)s * (hd + 2)];
        if (ms != -INFINITY) L += pp[(size_t)s * (hd + 2) + 1] * expf(ms - M);
    }
    const float inv = 1.0f / L;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float a = 0.0f;
        for (int s = 0; s < used; s++) {
            const float ms = pp[(size_t)s * (hd + 2)];
            if (ms != -INFINITY) a += pp[(size_t)s * (hd + 2) + 2 + d] * expf(ms - M);
        }
        o[d] = a * inv;
    }
}

static int n_splits_for(int32_t max_pos) { return max_pos / LP_CUDA_ATTN_SPLIT + 1; }

extern "C" size_t lp_cuda_attention_scratch(int32_t n_tok, int32_t n_head, int32_t head_dim,
                                            int32_t max_pos)
{
    return (size_t)n_tok * (size_t)n_head * (size_t)n_splits_for(max_pos) *
           (size_t)(head_dim + 2);
}

extern "C" int lp_cuda_attention(cudaStream_t stream, float *d_out, const float *d_q,
                                 const lp_cuda_tok_t *d_tok, int32_t n_tok, int32_t n_head,
                                 int32_t n_head_kv, int32_t head_dim, float scale, int32_t layer,
                                 int32_t max_pos, const uint8_t *d_mask, int64_t mask_stride,
                                 float *d_scratch)
{
    if (n_tok <= 0) return 0;
    if (head_dim < 1 || head_dim > LP_CUDA_MAX_HEAD_DIM)
        return lp_error_set(LP_ERR(ENOTSUP), "CUDA attention: head_dim %d is outside 1..%d",
                            head_dim, LP_CUDA_MAX_HEAD_DIM);
    if (n_head_kv < 1 || n_head % n_head_kv)
        return lp_error_set(LP_ERR(EINVAL), "CUDA attention: %d heads over %d KV heads", n_head,
                            n_head_kv);
    const int n_splits = n_splits_for(max_pos);
    const dim3 grid((unsigned)((int64_t)n_tok * n_head), (unsigned)n_splits);
    /* one split (contexts up to LP_CUDA_ATTN_SPLIT): no merge launch */
    attn_split_kernel<<<grid, 32 * ATTN_WARPS, 0, stream>>>(
        d_q, d_tok, n_head, n_head_kv, head_dim, scale, layer, d_mask, mask_stride, d_scratch,
        n_splits, n_splits == 1 ? d_out : nullptr);
    int rc = lp_cuda_launched("attention");
    if (rc || n_splits == 1) return rc;
    attn_merge_kernel<<<(unsigned)((int64_t)n_tok * n_head), 128, 0, stream>>>(
        d_out, d_tok, n_head, head_dim, d_scratch, n_splits);
    return lp_cuda_launched("attention merge");
}
