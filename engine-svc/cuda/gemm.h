/* gemm.h - the prefill matrix product on cuBLAS, for row-major GGUF
 * weights and row-major activations (the layout mapping is in gemm.c).
 *
 * cuBLAS is loaded with dlopen when the first handle is made, not linked:
 * mapping libcublasLt costs a process about 150 MB of resident memory at
 * start, which every program linking the engine would pay even where no
 * GPU is present. */
#ifndef LP_CUDA_GEMM_H
#define LP_CUDA_GEMM_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

typedef struct lp_cuda_blas lp_cuda_blas_t;

/* Load cuBLAS (once per process) and make a handle whose work goes on
 * `stream`, in float32 math (no TF32).  Returns 0, or a negative code with a
 * message naming the library or call that failed.  Caller destroys. */
int lp_cuda_blas_new(cudaStream_t stream, lp_cuda_blas_t **out);
/* Frees the handle, sets *self_p = NULL; NULL-safe.  The library stays. */
void lp_cuda_blas_destroy(lp_cuda_blas_t **self_p);

/* Y[t][o] = sum_i W[o][i] * X[t][i]  (+ Y[t][o] when accumulate), for
 * t < n_tok, o < n_out, on the handle's stream.  W is n_out rows of n_in
 * floats (row-major, GGUF ne0 = n_in innermost, rows n_in apart); X rows
 * are x_stride floats apart, Y rows y_stride apart.  float32 in, out and
 * compute.  Returns 0 or LP_ERR(EINVAL/EIO) with the cuBLAS status. */
int lp_cuda_gemm(lp_cuda_blas_t *b, const float *d_w, int64_t n_in, int64_t n_out,
                 const float *d_x, int64_t x_stride, int64_t n_tok, float *d_y,
                 int64_t y_stride, bool accumulate);

#endif
