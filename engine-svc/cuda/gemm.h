/* gemm.h - the prefill matrix product on cuBLAS, for row-major GGUF
 * weights and row-major activations (the layout mapping is in gemm.c). */
#ifndef LP_CUDA_GEMM_H
#define LP_CUDA_GEMM_H

#include <stdbool.h>
#include <stdint.h>

#include <cublas_v2.h>

/* Y[t][o] = sum_i W[o][i] * X[t][i]  (+ Y[t][o] when accumulate), for
 * t < n_tok, o < n_out, on the handle's stream.  W is n_out rows of n_in
 * floats (row-major, GGUF ne0 = n_in innermost, rows n_in apart); X rows
 * are x_stride floats apart, Y rows y_stride apart.  float32 in, out and
 * compute (no TF32).  Returns 0 or LP_ERR(EIO) with the cuBLAS status. */
int lp_cuda_gemm(cublasHandle_t h, const float *d_w, int64_t n_in, int64_t n_out,
                 const float *d_x, int64_t x_stride, int64_t n_tok, float *d_y,
                 int64_t y_stride, bool accumulate);

#endif
