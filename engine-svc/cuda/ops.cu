/* ops.cu - the element-wise and per-row operations of the forward pass:
 * RMSNorm, RoPE with the KV-cache store, SwiGLU, bias and residual adds.
 * Each mirrors its reference in ops.c; explicit __f*_rn intrinsics keep
 * nvcc from contracting a multiply and an add that the CPU rounds apart. */
#include <cstdint>

#include "kernels.h"
#include "launch.cuh"

/* ---- RMSNorm: one block per row -------------------------------------- */

#define NORM_THREADS 256

__global__ void __launch_bounds__(NORM_THREADS)
rmsnorm_kernel(float *__restrict__ y, const float *__restrict__ x, const float *__restrict__ w,
               int64_t n, const int32_t *__restrict__ rows, float eps)
{
    __shared__ double part[NORM_THREADS / 32];
    __shared__ float scale_s;
    const int64_t r = blockIdx.x;
    const float *xr = x + (rows ? rows[r] : r) * n;
    double sum = 0;
    for (int64_t i = threadIdx.x; i < n; i += NORM_THREADS) sum += (double)xr[i] * xr[i];
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = sum;
    __syncthreads();
    if (threadIdx.x == 0) {
        double s = 0;
        for (int i = 0; i < NORM_THREADS / 32; i++) s += part[i];
        scale_s = (float)(1.0 / sqrt(s / (double)n + eps));
    }
    __syncthreads();
    const float scale = scale_s;
    float *yr = y + r * n;
    for (int64_t i = threadIdx.x; i < n; i += NORM_THREADS)
        yr[i] = __fmul_rn(__fmul_rn(xr[i], scale), w[i]);
}

extern "C" int lp_cuda_rmsnorm(cudaStream_t stream, float *d_y, const float *d_x,
                               const float *d_w, int64_t n, int32_t n_rows, const int32_t *d_rows,
                               float eps)
{
    if (n_rows <= 0) return 0;
    rmsnorm_kernel<<<n_rows, NORM_THREADS, 0, stream>>>(d_y, d_x, d_w, n, d_rows, eps);
    return lp_cuda_launched("rmsnorm");
}

/* ---- RoPE and the KV-cache store ------------------------------------- */

/* One thread per rotated pair (blockIdx.y is the token), so that the
 * serial chain of theta products is one pair long; the thread that rotates
 * a K pair also stores it, and V and the unrotated K values are stored by
 * thread index, so no block waits for another. */
__global__ void rope_store_kernel(float *q, float *k, const float *__restrict__ v,
                                  const lp_cuda_tok_t *__restrict__ tok, int n_head,
                                  int n_head_kv, int head_dim, int n_rot, float theta_scale,
                                  bool neox, int layer)
{
    const int64_t t = blockIdx.y;
    const int pos = tok[t].pos, half = n_rot / 2;
    const int64_t q_dim = (int64_t)n_head * head_dim, kv_dim = (int64_t)n_head_kv * head_dim;
    const int n_pairs = (n_head + n_head_kv) * half;
    const int64_t w = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t off =
        layer >= 0 ? ((size_t)layer * (size_t)tok[t].cap + (size_t)pos) * (size_t)kv_dim : 0;
    if (w < n_pairs) {
        const int hh = (int)w / half, i = (int)w % half;
        float *xh = NULL;
        if (hh < n_head) {
            if (q) xh = q + t * q_dim + (int64_t)hh * head_dim;
        } else if (k) {
            xh = k + t * kv_dim + (int64_t)(hh - n_head) * head_dim;
        }
        if (xh) {
            /* theta_i = pos * theta_scale^i by repeated products, as lp_op_rope */
            float theta = (float)pos;
            for (int j = 0; j < i; j++) theta = __fmul_rn(theta, theta_scale);
            const float c = cosf(theta), s = sinf(theta);
            const int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
            const float x0 = xh[a], x1 = xh[b];
            const float r0 = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
            const float r1 = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
            xh[a] = r0;
            xh[b] = r1;
            if (hh >= n_head && layer >= 0) {
                float *kc = tok[t].k + off + (size_t)(hh - n_head) * head_dim;
                kc[a] = r0;
                kc[b] = r1;
            }
        }
    }
    if (layer < 0) return;
    for (int64_t i = w; i < kv_dim; i += (int64_t)gridDim.x * blockDim.x) {
        tok[t].v[off + i] = v[t * kv_dim + i];
        if (i % head_dim >= 2 * half) tok[t].k[off + i] = k[t * kv_dim + i];
    }
}

extern "C" int lp_cuda_rope_store(cudaStream_t stream, float *d_q, float *d_k, const float *d_v,
                                  const lp_cuda_tok_t *d_tok, int32_t n_tok, int32_t n_head,
                                  int32_t n_head_kv, int32_t head_dim, int32_t n_rot,
                                  float theta_scale, bool neox, int32_t layer)
{
    if (n_tok <= 0) return 0;
    if (layer >= 0 && (!d_k || !d_v))
        return lp_error_set(LP_ERR(EINVAL), "CUDA rope: storing into the cache needs k and v");
    if (n_tok > 65535) return lp_error_set(LP_ERR(EINVAL), "CUDA rope: %d tokens in one launch", n_tok);
    const int64_t n_pairs = (int64_t)(n_head + n_head_kv) * (n_rot / 2);
    const int64_t kv_dim = (int64_t)n_head_kv * head_dim;
    const int64_t work = n_pairs > kv_dim ? n_pairs : kv_dim;
    const dim3 grid(lp_cuda_blocks(work, 128), (unsigned)n_tok);
    rope_store_kernel<<<grid, 128, 0, stream>>>(d_q, d_k, d_v, d_tok, n_head, n_head_kv,
                                                head_dim, n_rot, theta_scale, neox, layer);
    return lp_cuda_launched("rope_store");
}

/* ---- SwiGLU and adds -------------------------------------------------- */

__global__ void swiglu_kernel(float *out, const float *g, const float *__restrict__ u, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const float gi = g[i];
        out[i] = __fmul_rn(__fdiv_rn(gi, __fadd_rn(1.0f, expf(-gi))), u[i]);
    }
}

extern "C" int lp_cuda_swiglu(cudaStream_t stream, float *d_out, const float *d_g,
                              const float *d_u, int64_t n)
{
    if (n <= 0) return 0;
    swiglu_kernel<<<lp_cuda_blocks(n, 256), 256, 0, stream>>>(d_out, d_g, d_u, n);
    return lp_cuda_launched("swiglu");
}

__global__ void add_rows_kernel(float *y, int64_t y_stride, const float *__restrict__ b,
                                int64_t n_rows, int64_t n)
{
    const int64_t total = n_rows * n;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        float *yi = y + i / n * y_stride + i % n;
        *yi = __fadd_rn(*yi, b[i % n]);
    }
}

extern "C" int lp_cuda_add_rows(cudaStream_t stream, float *d_y, int64_t y_stride,
                                const float *d_b, int64_t n_rows, int64_t n)
{
    if (n_rows <= 0 || n <= 0) return 0;
    add_rows_kernel<<<lp_cuda_blocks(n_rows * n, 256), 256, 0, stream>>>(d_y, y_stride, d_b,
                                                                          n_rows, n);
    return lp_cuda_launched("add_rows");
}
