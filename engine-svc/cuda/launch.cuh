/* launch.cuh - launch checks shared by the .cu files: a failed launch
 * becomes an lp_error_set() message naming the kernel. */
#ifndef LP_CUDA_LAUNCH_CUH
#define LP_CUDA_LAUNCH_CUH

#include <cuda_runtime.h>

extern "C" {
#include "error.h"
}

/* 0 when the last launch went through, else a message naming `what`. */
static inline int lp_cuda_launched(const char *what)
{
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess) return 0;
    return lp_error_set(LP_ERR(EIO), "CUDA kernel %s: %s", what, cudaGetErrorString(err));
}

/* Blocks of `per` threads to cover n items, capped for grid-stride loops. */
static inline unsigned lp_cuda_blocks(int64_t n, int per)
{
    int64_t b = (n + per - 1) / per;
    if (b < 1) b = 1;
    return (unsigned)(b > 65535 * 16 ? 65535 * 16 : b);
}

#endif
