/* gemm.c - row-major GGUF matrix products on column-major cuBLAS.
 *
 * The mapping, once.  We want, row-major,
 *     Y[T][n_out] = X[T][n_in] . W[n_out][n_in]^T
 * cuBLAS reads every matrix column-major: a row-major R x C array with row
 * stride ld is, to cuBLAS, the C x R column-major matrix with leading
 * dimension ld, i.e. its transpose.  So the buffers hold, to cuBLAS,
 *     W buffer: W^T, n_in x n_out, ld = n_in   (GGUF rows of n_in elements)
 *     X buffer: X^T, n_in x T,     ld = x_stride
 *     Y buffer: Y^T, n_out x T,    ld = y_stride
 * and Y^T = W . X^T = (W^T)^T . X^T, which is
 *     C (m x n) = op(A) (m x k) . op(B) (k x n)
 * with m = n_out, n = T, k = n_in, A = the W buffer with op T (it holds
 * W^T, and op(A) = W is n_out x n_in), lda = n_in; B = the X buffer with
 * op N, ldb = x_stride; C = the Y buffer, ldc = y_stride:
 *     cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n_out, T, n_in,
 *                  &one, W, F32, n_in, X, F32, x_stride,
 *                  &beta, Y, F32, y_stride, CUBLAS_COMPUTE_32F, ...)
 * Element check: C[o + t*ldc] = sum_i A[i + o*lda] * B[i + t*ldb]
 *              = sum_i W[o][i] * X[t][i] = Y[t][o].
 * The gpu test checks this against the CPU lp_matmul on shapes where
 * n_out, T and n_in all differ and the strides are padded. */
#include "gemm.h"

#include "error.h"

#include <cublas_v2.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- loading cuBLAS ----------------------------------------------------- */

static struct {
    __typeof__(cublasCreate_v2) *create;
    __typeof__(cublasDestroy_v2) *destroy;
    __typeof__(cublasSetStream_v2) *set_stream;
    __typeof__(cublasSetMathMode) *set_math_mode;
    __typeof__(cublasGemmEx) *gemm_ex;
    __typeof__(cublasGetStatusString) *status_string;
    char error[512];    /* why loading failed; empty when it worked */
} blas;

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static void *sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p && !blas.error[0])
        snprintf(blas.error, sizeof(blas.error), "cuBLAS: no symbol %s", name);
    return p;
}

static void blas_load(void)
{
    /* the soname of the toolkit we were built with, then any */
    char soname[64];
    snprintf(soname, sizeof(soname), "libcublas.so.%d", CUBLAS_VER_MAJOR);
    void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libcublas.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(blas.error, sizeof(blas.error), "cannot load %s: %s", soname, dlerror());
        return;
    }
    /* never closed: cuBLAS keeps state for the life of the process */
    blas.create = (__typeof__(blas.create))sym(lib, "cublasCreate_v2");
    blas.destroy = (__typeof__(blas.destroy))sym(lib, "cublasDestroy_v2");
    blas.set_stream = (__typeof__(blas.set_stream))sym(lib, "cublasSetStream_v2");
    blas.set_math_mode = (__typeof__(blas.set_math_mode))sym(lib, "cublasSetMathMode");
    blas.gemm_ex = (__typeof__(blas.gemm_ex))sym(lib, "cublasGemmEx");
    blas.status_string = (__typeof__(blas.status_string))sym(lib, "cublasGetStatusString");
}

struct lp_cuda_blas {
    cublasHandle_t h;
};

static int blas_check(cublasStatus_t st, const char *what)
{
    if (st == CUBLAS_STATUS_SUCCESS) return 0;
    return lp_error_set(LP_ERR(EIO), "cuBLAS %s: %s", what, blas.status_string(st));
}

int lp_cuda_blas_new(cudaStream_t stream, lp_cuda_blas_t **out)
{
    *out = NULL;
    pthread_once(&blas_once, blas_load);
    if (blas.error[0]) return lp_error_set(LP_ERR(ENOSYS), "%s", blas.error);
    lp_cuda_blas_t *b = calloc(1, sizeof(*b));
    if (!b) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    int rc = blas_check(blas.create(&b->h), "creating a handle");
    if (rc) {
        free(b);
        return rc;
    }
    rc = blas_check(blas.set_stream(b->h, stream), "setting the stream");
    /* float32 products stay float32: no TF32 tensor-op rounding */
    if (!rc) rc = blas_check(blas.set_math_mode(b->h, CUBLAS_DEFAULT_MATH), "math mode");
    if (rc) {
        lp_cuda_blas_destroy(&b);
        return rc;
    }
    *out = b;
    return 0;
}

void lp_cuda_blas_destroy(lp_cuda_blas_t **self_p)
{
    lp_cuda_blas_t *b = self_p ? *self_p : NULL;
    if (!b) return;
    blas.destroy(b->h);
    free(b);
    *self_p = NULL;
}

/* ---- the product ------------------------------------------------------- */

int lp_cuda_gemm(lp_cuda_blas_t *b, const float *d_w, int64_t n_in, int64_t n_out,
                 const float *d_x, int64_t x_stride, int64_t n_tok, float *d_y,
                 int64_t y_stride, bool accumulate)
{
    if (n_in <= 0 || n_out <= 0 || n_tok <= 0 || n_in > INT_MAX || n_out > INT_MAX ||
        n_tok > INT_MAX || x_stride < n_in || x_stride > INT_MAX || y_stride < n_out ||
        y_stride > INT_MAX)
        return lp_error_set(LP_ERR(EINVAL), "cuBLAS GEMM: bad shape n_in %lld n_out %lld "
                            "n_tok %lld x_stride %lld y_stride %lld", (long long)n_in,
                            (long long)n_out, (long long)n_tok, (long long)x_stride,
                            (long long)y_stride);
    const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    cublasStatus_t st = blas.gemm_ex(b->h, CUBLAS_OP_T, CUBLAS_OP_N, (int)n_out, (int)n_tok,
                                     (int)n_in, &one, d_w, CUDA_R_32F, (int)n_in, d_x,
                                     CUDA_R_32F, (int)x_stride, &beta, d_y, CUDA_R_32F,
                                     (int)y_stride, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS)
        return lp_error_set(LP_ERR(EIO), "cuBLAS GEMM (%lld x %lld x %lld): %s",
                            (long long)n_out, (long long)n_tok, (long long)n_in,
                            blas.status_string(st));
    return 0;
}
