/* dequant.cu - expand quantized weight rows to float32: the scratch of a
 * cuBLAS prefill GEMM, and the token-embedding lookup. */
#include "dequant.cuh"
#include "kernels.h"
#include "launch.cuh"

using namespace lp_cuda;

/* One thread per (row, block, part); rows come from `rows` when given. */
template <typename Q>
__global__ void dequant_kernel(const uint8_t *__restrict__ w, size_t row_bytes, int64_t n_in,
                               int64_t n_rows, const int32_t *__restrict__ rows,
                               float *__restrict__ out)
{
    const int64_t per_row = n_in / Q::QK * Q::PARTS;
    const int64_t n = n_rows * per_row;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / per_row, j = i % per_row;
        const int64_t blk = j / Q::PARTS;
        const int p = (int)(j % Q::PARTS);
        const int64_t src_row = rows ? rows[r] : r;
        float v[Q::NV];
        Q::part(w + src_row * row_bytes + blk * Q::BYTES, p, v);
        float *o = out + r * n_in + blk * Q::QK;
#pragma unroll
        for (int k = 0; k < Q::NV; k++) o[Q::elem(p, k)] = v[k];
    }
}

extern "C" bool lp_cuda_type_supported(uint32_t type)
{
    return lp_cuda_dispatch(type, false, [&]<typename Q>() {});
}

extern "C" int lp_cuda_dequant(cudaStream_t stream, uint32_t type, const void *d_w,
                               size_t row_bytes, int64_t n_in, int64_t n_rows,
                               const int32_t *d_rows, float *d_out)
{
    if (n_rows <= 0) return 0;
    const bool vec8 = n_in % 8 == 0 && row_bytes % 16 == 0 && (uintptr_t)d_w % 16 == 0;
    bool ok = lp_cuda_dispatch(type, vec8, [&]<typename Q>() {
        const int64_t n = n_rows * (n_in / Q::QK) * Q::PARTS;
        dequant_kernel<Q><<<lp_cuda_blocks(n, 256), 256, 0, stream>>>(
            (const uint8_t *)d_w, row_bytes, n_in, n_rows, d_rows, d_out);
    });
    if (!ok)
        return lp_error_set(LP_ERR(ENOTSUP), "CUDA dequantize: unsupported type %s (%u)",
                            lp_type_name(type), type);
    return lp_cuda_launched("dequantize");
}
