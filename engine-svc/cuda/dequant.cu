/* dequant.cu - expand quantized weight rows to float32: the scratch of a
 * cuBLAS prefill GEMM, and the token-embedding lookup. */
#include "dequant.cuh"
#include "kernels.h"
#include "launch.cuh"

using namespace lp_cuda;

/* One thread per (row, block, part): dequant_item (dequant.cuh). */
template <typename Q>
__global__ void dequant_kernel(const uint8_t *__restrict__ w, size_t row_bytes, int64_t n_in,
                               int64_t n_rows, const int32_t *__restrict__ rows,
                               float *__restrict__ out)
{
    const int64_t n = n_rows * (n_in / Q::QK * Q::PARTS);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        dequant_item<Q>(w, row_bytes, n_in, rows, out, i);
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
