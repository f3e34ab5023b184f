/* cuda-backend-test.c - the CUDA backend against the CPU reference, op by
 * op and as a whole forward pass (ggml's test-backend-ops idea).
 * Usage: cuda-backend-test MODELS_DIR
 *
 * Where no CUDA device is present it says why and exits 77 (meson: skipped).
 * Inputs are random, from a seed printed at the start (LP_TEST_SEED
 * overrides it), so every run checks fresh data.
 *
 * Tolerances, and why:
 *  - dequantize: the device decoders do the reference's operations with
 *    every product and sum rounded separately (no FMA contraction), so the
 *    values agree to the bit; we allow 2^-20 of the row's largest magnitude
 *    in case a compiler contracts the CPU side (one rounding, 2^-24).
 *  - products (matvec, GEMM): the CPU exact path sums in double and rounds
 *    once; the device sums n float products in some order.  Any order obeys
 *    |error| <= gamma_n * sum_i |w_i x_i|, gamma_n = n u / (1 - n u),
 *    u = 2^-24 (Higham, Accuracy and Stability, 3.1), plus u of the CPU's
 *    final rounding.  We check exactly that bound; a layout or block error
 *    is of the order of sum |w x| itself.
 *  - rmsnorm: both sum squares in double; the scale can differ by one
 *    float rounding: 4 u-ish (8 FLT_EPSILON) relative.
 *  - rope: same angles (same float products); CUDA's cosf/sinf are within
 *    2 ulp (CUDA C Programming Guide, table of maximum ulp errors): 8 eps
 *    of |x0| + |x1|.
 *  - attention: outputs are convex combinations of V rows; a score error
 *    ds = gamma_hd * scale * sum|q k| changes each weight by about 2 ds
 *    relatively, and expf adds 2 ulp: tolerance max|v| (4 ds + 1e-5).
 *  - swiglu: expf within 2 ulp, one division, one product: 8 eps relative.
 *  - gate/up/SwiGLU in one kernel: the product bounds dg, du carried through
 *    silu(g) * u (|silu'| < 1.1), plus SwiGLU's 8 eps.
 *  - whole forward pass: every logit row's log-softmax within 2e-3 of the
 *    CPU backend in exact mode, the eps of ../shared/goldens/exact, which
 *    both backends must meet against the float64 reference anyway. */
#include "engine.h"
#include "error.h"
#include "gemm.h"
#include "kernels.h"
#include "matmul.h"
#include "ops.h"
#include "quant.h"
#include "../check.h"

#include <cuda_runtime_api.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

/* A CUDA call that must work; a failure ends the test (the device is gone). */
#define CU(call)                                                                  \
    do {                                                                          \
        cudaError_t e_ = (call);                                                  \
        if (e_ != cudaSuccess) {                                                  \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,         \
                    cudaGetErrorString(e_));                                      \
            exit(1);                                                              \
        }                                                                         \
    } while (0)

/* A kernel launcher returning 0 / LP_ERR. */
#define OK(call)                                                                  \
    do {                                                                          \
        int rc_ = (call);                                                         \
        if (rc_) {                                                                \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,         \
                    lp_error_msg());                                              \
            exit(1);                                                              \
        }                                                                         \
    } while (0)

static uint64_t rng; /* seeded in main */

static void fill(float *x, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++) x[i] = lp_check_frand(&rng) * scale;
}

static void *dev_from(const void *h, size_t bytes)
{
    void *d;
    CU(cudaMalloc(&d, bytes ? bytes : 1));
    if (h) CU(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return d;
}

/* Device buffer of n floats, every byte 0xff (NaN) so that an element the
 * kernel forgets shows up. */
static float *dev_poison(size_t n)
{
    float *d;
    CU(cudaMalloc((void **)&d, n * sizeof(float) + 1));
    CU(cudaMemset(d, 0xff, n * sizeof(float)));
    return d;
}

static float *host_of(const float *d, size_t n)
{
    float *h = malloc(n * sizeof(float));
    CU(cudaDeviceSynchronize());
    CU(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
}

static const float U = FLT_EPSILON / 2; /* unit roundoff, 2^-24 */

static double gamma_n(int64_t n) { return (double)n * U / (1.0 - (double)n * U); }

static const uint32_t types[] = {
    LP_TYPE_F32, LP_TYPE_F16, LP_TYPE_BF16, LP_TYPE_Q8_0, LP_TYPE_Q4_0, LP_TYPE_Q4_1,
    LP_TYPE_Q5_0, LP_TYPE_Q5_1, LP_TYPE_Q4_K, LP_TYPE_Q5_K, LP_TYPE_Q6_K,
};
#define N_TYPES (sizeof(types) / sizeof(types[0]))

/* A random weight of `type`: n_out rows of n_in, quantized by the reference
 * quantizer; *ref gets its dequantized values (the reference decoder). */
static uint8_t *make_weight(uint32_t type, int64_t n_in, int64_t n_out, size_t *row_bytes,
                            float **ref)
{
    *row_bytes = lp_type_row_bytes(type, n_in);
    uint8_t *w = malloc(*row_bytes * (size_t)n_out);
    float *src = malloc(sizeof(float) * (size_t)n_in);
    *ref = malloc(sizeof(float) * (size_t)(n_in * n_out));
    for (int64_t o = 0; o < n_out; o++) {
        fill(src, (size_t)n_in, 1.0f);
        if (lp_quant_row(type, src, w + (size_t)o * *row_bytes, n_in)) {
            fprintf(stderr, "quantize %s: %s\n", lp_type_name(type), lp_error_msg());
            exit(1);
        }
        lp_dequant_row(type, w + (size_t)o * *row_bytes, *ref + o * n_in, n_in);
    }
    free(src);
    return w;
}

/* ---- dequantize ------------------------------------------------------- */

static void test_dequant(cudaStream_t st)
{
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        const uint32_t type = types[ti];
        /* float types also in a width that is not a multiple of 8 (the
         * scalar decoders) */
        const int64_t widths[] = {512, type == LP_TYPE_F32 || type == LP_TYPE_F16 ||
                                        type == LP_TYPE_BF16 ? 36 : 768};
        for (int wi = 0; wi < 2; wi++) {
            const int64_t n_in = widths[wi], n_out = 9;
            size_t rb;
            float *ref;
            uint8_t *w = make_weight(type, n_in, n_out, &rb, &ref);
            void *dw = dev_from(w, rb * (size_t)n_out);
            /* gather rows in a scrambled order, with a repeat */
            const int32_t rows[] = {8, 0, 3, 3, 7, 1};
            const int32_t n_rows = 6;
            int32_t *drows = dev_from(rows, sizeof(rows));
            float *dout = dev_poison((size_t)(n_rows * n_in));
            OK(lp_cuda_dequant(st, type, dw, rb, n_in, n_rows, drows, dout));
            float *got = host_of(dout, (size_t)(n_rows * n_in));
            int bad = 0;
            for (int32_t r = 0; r < n_rows; r++) {
                const float *e = ref + rows[r] * n_in;
                float amax = 0;
                for (int64_t i = 0; i < n_in; i++) amax = fmaxf(amax, fabsf(e[i]));
                for (int64_t i = 0; i < n_in; i++)
                    if (!(fabsf(got[r * n_in + i] - e[i]) <= amax * 0x1p-20f) && bad++ < 3)
                        fprintf(stderr, "  %s row %d elem %lld: %g, reference %g\n",
                                lp_type_name(type), rows[r], (long long)i, got[r * n_in + i],
                                e[i]);
            }
            CHECK(!bad, "dequantize %s (n_in %lld): %d values differ", lp_type_name(type),
                  (long long)n_in, bad);
            free(got); free(w); free(ref);
            cudaFree(dw); cudaFree(drows); cudaFree(dout);
        }
    }
}

/* ---- matrix products -------------------------------------------------- */

/* Compare y (n_tok rows, y_stride apart, n_out used) with the CPU exact
 * product plus bias/previous y, within gamma_{n_in+1} sum|w x| + u |ref|. */
static int check_product(const char *what, const float *got, const float *y0, const float *wref,
                         const float *x, const float *bias, int64_t n_in, int64_t n_out,
                         int64_t n_tok, int64_t x_stride, int64_t y_stride, bool accumulate)
{
    int bad = 0;
    float *cpu = malloc(sizeof(float) * (size_t)n_out * (size_t)n_tok);
    /* the reference product: lp_matmul's exact path over the F32 copy */
    lp_matmul_t mm = {.type = LP_TYPE_F32, .w = wref, .n_in = n_in, .n_out = n_out, .x = x,
                      .x_stride = x_stride, .n_tok = n_tok, .y = cpu, .y_stride = n_out};
    CHECK_RC(lp_matmul(NULL, &mm, true), 0);
    for (int64_t t = 0; t < n_tok; t++) {
        for (int64_t o = 0; o < n_out; o++) {
            double mag = 0;
            for (int64_t i = 0; i < n_in; i++) mag += fabs((double)wref[o * n_in + i] * x[t * x_stride + i]);
            double ref = cpu[t * n_out + o], extra = 0;
            if (bias) { ref += bias[o]; extra += fabs(bias[o]); }
            if (accumulate) { ref += y0[t * y_stride + o]; extra += fabs(y0[t * y_stride + o]); }
            double tol = gamma_n(n_in + 3) * (mag + extra) + 2 * U * fabs(ref);
            double g = got[t * y_stride + o];
            if (!(fabs(g - ref) <= tol) && bad++ < 3)
                fprintf(stderr, "  %s: y[%lld][%lld] = %.9g, reference %.9g (tol %.3g)\n", what,
                        (long long)t, (long long)o, g, ref, tol);
        }
        /* the padding between rows is left alone */
        for (int64_t o = n_out; t + 1 < n_tok && o < y_stride; o++)
            if (memcmp(&got[t * y_stride + o], &y0[t * y_stride + o], sizeof(float)) && bad++ < 3)
                fprintf(stderr, "  %s: padding y[%lld][%lld] was written\n", what, (long long)t,
                        (long long)o);
    }
    free(cpu);
    return bad;
}

/* Quantized matvec for 1..8 tokens, with bias and with accumulate. */
static void test_matvec(cudaStream_t st)
{
    const int32_t toks[] = {1, 3, 8};
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        const uint32_t type = types[ti];
        const int64_t n_in = type == LP_TYPE_F32 ? 260 : 512, n_out = 37; /* 37: partial block of rows */
        size_t rb;
        float *wref;
        uint8_t *w = make_weight(type, n_in, n_out, &rb, &wref);
        void *dw = dev_from(w, rb * (size_t)n_out);
        for (int k = 0; k < 3; k++) {
            const int32_t n_tok = toks[k];
            const int64_t x_stride = n_in, y_stride = n_out + 3;
            const bool acc = k == 1, use_bias = k != 0;
            float *x = malloc(sizeof(float) * (size_t)(n_tok * x_stride));
            float *y0 = malloc(sizeof(float) * (size_t)(n_tok * y_stride));
            float *bias = malloc(sizeof(float) * (size_t)n_out);
            fill(x, (size_t)(n_tok * x_stride), 1.0f);
            fill(y0, (size_t)(n_tok * y_stride), 4.0f);
            fill(bias, (size_t)n_out, 0.5f);
            float *dx = dev_from(x, sizeof(float) * (size_t)(n_tok * x_stride));
            float *dy = dev_from(y0, sizeof(float) * (size_t)(n_tok * y_stride));
            float *db = dev_from(bias, sizeof(float) * (size_t)n_out);
            OK(lp_cuda_matvec(st, type, dw, rb, n_in, n_out, dx, x_stride, n_tok,
                              use_bias ? db : NULL, dy, y_stride, acc));
            float *got = host_of(dy, (size_t)(n_tok * y_stride));
            char what[64];
            snprintf(what, sizeof(what), "matvec %s x%d", lp_type_name(type), n_tok);
            int bad = check_product(what, got, y0, wref, x, use_bias ? bias : NULL, n_in, n_out,
                                    n_tok, x_stride, y_stride, acc);
            CHECK(!bad, "%s%s%s: %d values out of tolerance", what, use_bias ? " +bias" : "",
                  acc ? " +accumulate" : "", bad);
            free(x); free(y0); free(bias); free(got);
            cudaFree(dx); cudaFree(dy); cudaFree(db);
        }
        CHECK(lp_cuda_matvec(st, type, dw, rb, n_in, n_out, NULL, n_in,
                             LP_CUDA_MMV_MAX_TOKENS + 1, NULL, NULL, n_out, false) < 0,
              "matvec accepted %d tokens", LP_CUDA_MMV_MAX_TOKENS + 1);
        free(w); free(wref);
        cudaFree(dw);
    }
}

/* Three products of one input in one launch (q, k, v): different row
 * counts and strides, a bias on two of them. */
static void test_matvec_multi(cudaStream_t st)
{
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        const uint32_t type = types[ti];
        const int64_t n_in = 256, n_outs[3] = {37, 20, 9};
        const int32_t n_tok = 2;
        float *x = malloc(sizeof(float) * (size_t)(n_tok * n_in));
        fill(x, (size_t)(n_tok * n_in), 1.0f);
        float *dx = dev_from(x, sizeof(float) * (size_t)(n_tok * n_in));
        lp_cuda_mv_out_t outs[3];
        uint8_t *w[3];
        float *wref[3], *bias[3], *y0[3], *dw[3], *db[3], *dy[3];
        for (int k = 0; k < 3; k++) {
            size_t rb;
            const int64_t ys = n_outs[k] + k;
            w[k] = make_weight(type, n_in, n_outs[k], &rb, &wref[k]);
            bias[k] = malloc(sizeof(float) * (size_t)n_outs[k]);
            y0[k] = malloc(sizeof(float) * (size_t)(n_tok * ys));
            fill(bias[k], (size_t)n_outs[k], 0.5f);
            fill(y0[k], (size_t)(n_tok * ys), 1.0f);
            dw[k] = dev_from(w[k], rb * (size_t)n_outs[k]);
            db[k] = dev_from(bias[k], sizeof(float) * (size_t)n_outs[k]);
            dy[k] = dev_from(y0[k], sizeof(float) * (size_t)(n_tok * ys));
            outs[k] = (lp_cuda_mv_out_t){dw[k], rb, n_outs[k], k == 1 ? NULL : db[k], dy[k], ys};
        }
        OK(lp_cuda_matvec_multi(st, type, n_in, dx, n_in, n_tok, outs, 3, false));
        int bad = 0;
        for (int k = 0; k < 3; k++) {
            float *got = host_of(dy[k], (size_t)(n_tok * outs[k].y_stride));
            char what[64];
            snprintf(what, sizeof(what), "matvec_multi %s out %d", lp_type_name(type), k);
            bad += check_product(what, got, y0[k], wref[k], x, k == 1 ? NULL : bias[k], n_in,
                                 n_outs[k], n_tok, n_in, outs[k].y_stride, false);
            free(got); free(w[k]); free(wref[k]); free(bias[k]); free(y0[k]);
            cudaFree(dw[k]); cudaFree(db[k]); cudaFree(dy[k]);
        }
        CHECK(!bad, "matvec_multi %s: %d values out of tolerance", lp_type_name(type), bad);
        free(x);
        cudaFree(dx);
    }
}

/* Gate, up and SwiGLU in one launch, per type, against lp_matmul twice and
 * lp_op_swiglu: the error of silu(g) * u is at most |silu'(g)| dg |u| +
 * |silu(g)| du plus SwiGLU's own 8 eps, with |silu'| < 1.1 and dg, du the
 * product bounds above. */
static void test_matvec_glu(cudaStream_t st)
{
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        const uint32_t type = types[ti];
        const int64_t n_in = 512, n_out = 45;
        const int32_t n_tok = ti % 2 ? 1 : 5;
        size_t rb;
        float *gref, *uref;
        uint8_t *wg = make_weight(type, n_in, n_out, &rb, &gref);
        uint8_t *wu = make_weight(type, n_in, n_out, &rb, &uref);
        float *x = malloc(sizeof(float) * (size_t)(n_tok * n_in));
        fill(x, (size_t)(n_tok * n_in), 1.0f);
        void *dwg = dev_from(wg, rb * (size_t)n_out), *dwu = dev_from(wu, rb * (size_t)n_out);
        float *dx = dev_from(x, sizeof(float) * (size_t)(n_tok * n_in));
        float *dy = dev_poison((size_t)(n_tok * n_out));
        OK(lp_cuda_matvec_glu(st, type, dwg, dwu, rb, n_in, n_out, dx, n_in, n_tok, dy, n_out));
        float *got = host_of(dy, (size_t)(n_tok * n_out));
        float *g = malloc(sizeof(float) * (size_t)(n_tok * n_out));
        float *u = malloc(sizeof(float) * (size_t)(n_tok * n_out));
        float *ref = malloc(sizeof(float) * (size_t)(n_tok * n_out));
        lp_matmul_t mg = {.type = LP_TYPE_F32, .w = gref, .n_in = n_in, .n_out = n_out, .x = x,
                          .x_stride = n_in, .n_tok = n_tok, .y = g, .y_stride = n_out};
        lp_matmul_t mu = mg;
        mu.w = uref;
        mu.y = u;
        CHECK_RC(lp_matmul(NULL, &mg, true), 0);
        CHECK_RC(lp_matmul(NULL, &mu, true), 0);
        lp_op_swiglu(ref, g, u, (int64_t)n_tok * n_out);
        int bad = 0;
        for (int32_t t = 0; t < n_tok; t++) {
            for (int64_t o = 0; o < n_out; o++) {
                double mg_ = 0, mu_ = 0;
                for (int64_t i = 0; i < n_in; i++) {
                    mg_ += fabs((double)gref[o * n_in + i] * x[t * n_in + i]);
                    mu_ += fabs((double)uref[o * n_in + i] * x[t * n_in + i]);
                }
                const double dg = gamma_n(n_in + 1) * mg_, du = gamma_n(n_in + 1) * mu_;
                const double gv = g[t * n_out + o], uv = u[t * n_out + o];
                const double silu = gv / (1 + exp(-gv));
                const double tol = 1.1 * dg * (fabs(uv) + du) + fabs(silu) * du +
                                   8 * FLT_EPSILON * fabs(ref[t * n_out + o]);
                if (!(fabs(got[t * n_out + o] - ref[t * n_out + o]) <= tol) && bad++ < 3)
                    fprintf(stderr, "  matvec_glu %s y[%d][%lld] = %.9g, reference %.9g\n",
                            lp_type_name(type), t, (long long)o, got[t * n_out + o],
                            ref[t * n_out + o]);
            }
        }
        CHECK(!bad, "matvec_glu %s x%d: %d values out of tolerance", lp_type_name(type), n_tok,
              bad);
        free(wg); free(wu); free(gref); free(uref); free(x); free(got); free(g); free(u);
        free(ref);
        cudaFree(dwg); cudaFree(dwu); cudaFree(dx); cudaFree(dy);
    }
}

/* The cuBLAS layout mapping of gemm.c: a non-square product with padded
 * strides against lp_matmul, plain and accumulating; then the prefill
 * path (dequantize, then GEMM) for every type. */
static void test_gemm(cudaStream_t st, lp_cuda_blas_t *h)
{
    {
        const int64_t n_in = 96, n_out = 80, n_tok = 24, x_stride = 100, y_stride = 90;
        float *w = malloc(sizeof(float) * (size_t)(n_in * n_out));
        float *x = malloc(sizeof(float) * (size_t)(n_tok * x_stride));
        float *y0 = malloc(sizeof(float) * (size_t)(n_tok * y_stride));
        fill(w, (size_t)(n_in * n_out), 1.0f);
        fill(x, (size_t)(n_tok * x_stride), 1.0f);
        fill(y0, (size_t)(n_tok * y_stride), 4.0f);
        float *dw = dev_from(w, sizeof(float) * (size_t)(n_in * n_out));
        float *dx = dev_from(x, sizeof(float) * (size_t)(n_tok * x_stride));
        for (int acc = 0; acc < 2; acc++) {
            float *dy = dev_from(y0, sizeof(float) * (size_t)(n_tok * y_stride));
            OK(lp_cuda_gemm(h, dw, n_in, n_out, dx, x_stride, n_tok, dy, y_stride, acc));
            float *got = host_of(dy, (size_t)(n_tok * y_stride));
            int bad = check_product("gemm f32", got, y0, w, x, NULL, n_in, n_out, n_tok,
                                    x_stride, y_stride, acc);
            CHECK(!bad, "cuBLAS GEMM layout (accumulate %d): %d values out of tolerance", acc,
                  bad);
            free(got);
            cudaFree(dy);
        }
        CHECK(lp_cuda_gemm(h, dw, n_in, n_out, dx, n_in - 1, n_tok, dx, y_stride, false) < 0,
              "GEMM accepted x_stride < n_in");
        free(w); free(x); free(y0);
        cudaFree(dw); cudaFree(dx);
    }
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        const uint32_t type = types[ti];
        const int64_t n_in = 512, n_out = 70, n_tok = 19;
        size_t rb;
        float *wref;
        uint8_t *w = make_weight(type, n_in, n_out, &rb, &wref);
        void *dw = dev_from(w, rb * (size_t)n_out);
        float *dwf = dev_poison((size_t)(n_in * n_out));
        float *x = malloc(sizeof(float) * (size_t)(n_tok * n_in));
        float *y0 = malloc(sizeof(float) * (size_t)(n_tok * n_out));
        fill(x, (size_t)(n_tok * n_in), 1.0f);
        memset(y0, 0, sizeof(float) * (size_t)(n_tok * n_out));
        float *dx = dev_from(x, sizeof(float) * (size_t)(n_tok * n_in));
        float *dy = dev_poison((size_t)(n_tok * n_out));
        OK(lp_cuda_dequant(st, type, dw, rb, n_in, n_out, NULL, dwf));
        OK(lp_cuda_gemm(h, dwf, n_in, n_out, dx, n_in, n_tok, dy, n_out, false));
        float *got = host_of(dy, (size_t)(n_tok * n_out));
        char what[64];
        snprintf(what, sizeof(what), "dequant+gemm %s", lp_type_name(type));
        int bad = check_product(what, got, y0, wref, x, NULL, n_in, n_out, n_tok, n_in, n_out,
                                false);
        CHECK(!bad, "%s: %d values out of tolerance", what, bad);
        free(got); free(w); free(wref); free(x); free(y0);
        cudaFree(dw); cudaFree(dwf); cudaFree(dx); cudaFree(dy);
    }
}

/* ---- element-wise and per-row ops ------------------------------------- */

static void test_rmsnorm(cudaStream_t st)
{
    const int64_t n = 300, n_src = 7;
    const int32_t rows[] = {6, 2, 2, 0};
    const int32_t n_rows = 4;
    float *x = malloc(sizeof(float) * (size_t)(n * n_src)), *w = malloc(sizeof(float) * n);
    fill(x, (size_t)(n * n_src), 3.0f);
    fill(w, (size_t)n, 1.5f);
    float *dx = dev_from(x, sizeof(float) * (size_t)(n * n_src));
    float *dw = dev_from(w, sizeof(float) * (size_t)n);
    int32_t *dr = dev_from(rows, sizeof(rows));
    float *dy = dev_poison((size_t)(n * n_rows));
    OK(lp_cuda_rmsnorm(st, dy, dx, dw, n, n_rows, dr, 1e-5f));
    float *got = host_of(dy, (size_t)(n * n_rows)), *ref = malloc(sizeof(float) * n);
    int bad = 0;
    for (int32_t r = 0; r < n_rows; r++) {
        lp_op_rmsnorm(ref, x + rows[r] * n, w, n, 1e-5f);
        for (int64_t i = 0; i < n; i++)
            if (!(fabsf(got[r * n + i] - ref[i]) <= 8 * FLT_EPSILON * fabsf(ref[i])) && bad++ < 3)
                fprintf(stderr, "  rmsnorm row %d [%lld]: %g, reference %g\n", rows[r],
                        (long long)i, got[r * n + i], ref[i]);
    }
    CHECK(!bad, "rmsnorm: %d values out of tolerance", bad);
    free(x); free(w); free(got); free(ref);
    cudaFree(dx); cudaFree(dw); cudaFree(dr); cudaFree(dy);
}

static void test_rope(cudaStream_t st)
{
    const int32_t n_head = 4, n_head_kv = 2, hd = 64, n_tok = 5, cap = 4100;
    const int32_t pos[] = {0, 1, 17, 1000, 4095};
    const int64_t q_dim = n_head * hd, kv_dim = n_head_kv * hd;
    for (int mode = 0; mode < 4; mode++) {
        const bool neox = mode & 1;
        const int32_t n_rot = mode & 2 ? 32 : hd; /* partial rotation too */
        const float base = neox ? 1e6f : 10000.0f;
        float *q = malloc(sizeof(float) * (size_t)(n_tok * q_dim));
        float *k = malloc(sizeof(float) * (size_t)(n_tok * kv_dim));
        float *v = malloc(sizeof(float) * (size_t)(n_tok * kv_dim));
        fill(q, (size_t)(n_tok * q_dim), 2.0f);
        fill(k, (size_t)(n_tok * kv_dim), 2.0f);
        fill(v, (size_t)(n_tok * kv_dim), 2.0f);
        float *dq = dev_from(q, sizeof(float) * (size_t)(n_tok * q_dim));
        float *dk = dev_from(k, sizeof(float) * (size_t)(n_tok * kv_dim));
        float *dv = dev_from(v, sizeof(float) * (size_t)(n_tok * kv_dim));
        /* a two-layer cache; the store goes to layer 1 */
        const size_t cache_n = (size_t)2 * cap * kv_dim;
        float *dkc = dev_poison(cache_n), *dvc = dev_poison(cache_n);
        lp_cuda_tok_t tok[5];
        for (int t = 0; t < n_tok; t++) tok[t] = (lp_cuda_tok_t){dkc, dvc, cap, pos[t]};
        lp_cuda_tok_t *dtok = dev_from(tok, sizeof(tok));
        const float theta_scale = powf(base, -2.0f / (float)n_rot);
        OK(lp_cuda_rope_store(st, dq, dk, dv, dtok, n_tok, n_head, n_head_kv, hd, n_rot,
                              theta_scale, neox, 1));
        float *gq = host_of(dq, (size_t)(n_tok * q_dim)), *gk = host_of(dk, (size_t)(n_tok * kv_dim));
        float *gkc = host_of(dkc, cache_n), *gvc = host_of(dvc, cache_n);
        int bad = 0, bad_store = 0;
        for (int t = 0; t < n_tok; t++) {
            float *rq = q + t * q_dim, *rk = k + t * kv_dim;
            float in_q[256], in_k[128];
            memcpy(in_q, rq, sizeof(float) * (size_t)q_dim);
            memcpy(in_k, rk, sizeof(float) * (size_t)kv_dim);
            lp_op_rope(rq, n_head, hd, n_rot, pos[t], base, neox);
            lp_op_rope(rk, n_head_kv, hd, n_rot, pos[t], base, neox);
            for (int two = 0; two < 2; two++) {
                const float *ref = two ? rk : rq, *in = two ? in_k : in_q;
                const float *got = two ? gk + t * kv_dim : gq + t * q_dim;
                const int64_t n = two ? kv_dim : q_dim;
                for (int64_t i = 0; i < n; i++) {
                    /* the pair partner of i within its head */
                    const int64_t h0 = i / hd * hd, d = i % hd;
                    int64_t pd = d;
                    if (d < n_rot) pd = neox ? (d < n_rot / 2 ? d + n_rot / 2 : d - n_rot / 2)
                                             : (d ^ 1);
                    const float tol = 8 * FLT_EPSILON * (fabsf(in[i]) + fabsf(in[h0 + pd]));
                    if (!(fabsf(got[i] - ref[i]) <= tol) && bad++ < 3)
                        fprintf(stderr, "  rope neox %d n_rot %d pos %d %s[%lld]: %.9g, "
                                "reference %.9g\n", neox, n_rot, pos[t], two ? "k" : "q",
                                (long long)i, got[i], ref[i]);
                }
            }
            /* the cache holds the device's roped k and the v row, at layer 1 */
            const size_t off = ((size_t)1 * cap + (size_t)pos[t]) * (size_t)kv_dim;
            if (memcmp(gkc + off, gk + t * kv_dim, sizeof(float) * (size_t)kv_dim) ||
                memcmp(gvc + off, v + t * kv_dim, sizeof(float) * (size_t)kv_dim))
                bad_store++;
        }
        /* nothing else of the cache was written: count non-poison words */
        size_t written = 0;
        for (size_t i = 0; i < cache_n; i++) written += !isnan(gkc[i]);
        CHECK(written == (size_t)n_tok * (size_t)kv_dim, "rope store wrote %zu K values, "
              "expected %lld", written, (long long)(n_tok * kv_dim));
        CHECK(!bad, "rope (neox %d, n_rot %d): %d values out of tolerance", neox, n_rot, bad);
        CHECK(!bad_store, "rope store: %d tokens' cache rows differ", bad_store);
        free(q); free(k); free(v); free(gq); free(gk); free(gkc); free(gvc);
        cudaFree(dq); cudaFree(dk); cudaFree(dv); cudaFree(dkc); cudaFree(dvc); cudaFree(dtok);
    }
}

/* GQA attention over a filled cache: short rows, rows over several splits,
 * a random mask, a fully masked row, and a row whose first split is fully
 * masked. */
static void test_attention(cudaStream_t st)
{
    const int32_t hds[] = {64, 128, 64};
    /* several splits, then every row within one split (no merge launch) */
    const int32_t pos_long[] = {0, 5, 300, 700, 640, 513}, pos_short[] = {0, 5, 200, 255, 30, 7};
    for (int hi = 0; hi < 3; hi++) {
        const int32_t n_head = 8, n_head_kv = 2, hd = hds[hi], n_layer = 2, cap = 800;
        const int64_t kv_dim = (int64_t)n_head_kv * hd, q_dim = (int64_t)n_head * hd;
        const int32_t *pos = hi < 2 ? pos_long : pos_short, max_pos = hi < 2 ? 700 : 255;
        const int32_t n_tok = 6, layer = 1;
        const float scale = 1.0f / sqrtf((float)hd);
        const size_t cache_n = (size_t)n_layer * cap * (size_t)kv_dim;
        float *kc = malloc(sizeof(float) * cache_n), *vc = malloc(sizeof(float) * cache_n);
        fill(kc, cache_n, 1.0f);
        fill(vc, cache_n, 1.0f);
        float *q = malloc(sizeof(float) * (size_t)(n_tok * q_dim));
        fill(q, (size_t)(n_tok * q_dim), 2.0f);
        uint8_t *mask = calloc((size_t)n_tok, cap);
        for (int32_t j = 0; j <= pos[2]; j++) mask[2 * cap + j] = lp_check_frand(&rng) > 0.3f;
        mask[2 * cap] = 0;                                   /* never empty by chance */
        memset(mask + 3 * cap, 1, (size_t)pos[3] + 1);       /* all masked */
        memset(mask + 4 * cap, 1, (size_t)(pos[4] < LP_CUDA_ATTN_SPLIT ? pos[4] / 2
                                           : LP_CUDA_ATTN_SPLIT)); /* first split masked */
        float *dkc = dev_from(kc, sizeof(float) * cache_n), *dvc = dev_from(vc, sizeof(float) * cache_n);
        float *dq = dev_from(q, sizeof(float) * (size_t)(n_tok * q_dim));
        uint8_t *dmask = dev_from(mask, (size_t)n_tok * cap);
        lp_cuda_tok_t tok[6];
        for (int t = 0; t < n_tok; t++) tok[t] = (lp_cuda_tok_t){dkc, dvc, cap, pos[t]};
        lp_cuda_tok_t *dtok = dev_from(tok, sizeof(tok));
        float *dscr = dev_poison(lp_cuda_attention_scratch(n_tok, n_head, hd, max_pos));
        float *dout = dev_poison((size_t)(n_tok * q_dim));
        float *got;
        for (int masked = 0; masked < 2; masked++) {
            OK(lp_cuda_attention(st, dout, dq, dtok, n_tok, n_head, n_head_kv, hd, scale, layer,
                                 max_pos, masked ? dmask : NULL, cap, dscr));
            got = host_of(dout, (size_t)(n_tok * q_dim));
            int bad = 0;
            float ref[128], scores[800];
            for (int t = 0; t < n_tok; t++) {
                for (int h = 0; h < n_head; h++) {
                    const size_t off = (size_t)layer * cap * (size_t)kv_dim +
                                       (size_t)(h / (n_head / n_head_kv)) * (size_t)hd;
                    const float *qh = q + t * q_dim + (int64_t)h * hd;
                    lp_op_attn_head(ref, qh, kc + off, vc + off, kv_dim, pos[t] + 1, hd, scale,
                                    masked ? mask + (size_t)t * cap : NULL, scores);
                    double qk = 0, vmax = 0;
                    for (int32_t j = 0; j <= pos[t]; j++) {
                        double s = 0;
                        for (int d = 0; d < hd; d++) {
                            s += fabs((double)qh[d] * kc[off + (size_t)j * kv_dim + d]);
                            vmax = fmax(vmax, fabs(vc[off + (size_t)j * kv_dim + d]));
                        }
                        qk = fmax(qk, s);
                    }
                    const double ds = gamma_n(hd + 2) * scale * qk;
                    const double tol = vmax * (4 * ds + 1e-5);
                    const float *g = got + t * q_dim + (int64_t)h * hd;
                    for (int d = 0; d < hd; d++)
                        if (!(fabs(g[d] - ref[d]) <= tol) && bad++ < 3)
                            fprintf(stderr, "  attention hd %d masked %d pos %d head %d [%d]: "
                                    "%.9g, reference %.9g (tol %.3g)\n", hd, masked, pos[t], h,
                                    d, g[d], ref[d], tol);
                    if (masked && t == 3)
                        for (int d = 0; d < hd; d++)
                            if (g[d] != 0.0f && bad++ < 3)
                                fprintf(stderr, "  fully masked row is not zero: %g\n", g[d]);
                }
            }
            CHECK(!bad, "attention (head_dim %d, masked %d): %d values out of tolerance", hd,
                  masked, bad);
            free(got);
        }
        free(kc); free(vc); free(q); free(mask);
        cudaFree(dkc); cudaFree(dvc); cudaFree(dq); cudaFree(dmask); cudaFree(dtok);
        cudaFree(dscr); cudaFree(dout);
    }
    CHECK(lp_cuda_attention(st, NULL, NULL, NULL, 1, 2, 1, LP_CUDA_MAX_HEAD_DIM + 1, 1.0f, 0, 0,
                            NULL, 0, NULL) < 0, "attention accepted head_dim %d",
          LP_CUDA_MAX_HEAD_DIM + 1);
}

static void test_swiglu_add(cudaStream_t st)
{
    const int64_t n = 1000, n_rows = 3;
    float *g = malloc(sizeof(float) * (size_t)n), *u = malloc(sizeof(float) * (size_t)n);
    fill(g, (size_t)n, 12.0f); /* both tails of silu */
    fill(u, (size_t)n, 2.0f);
    float *dg = dev_from(g, sizeof(float) * (size_t)n), *du = dev_from(u, sizeof(float) * (size_t)n);
    float *dout = dev_poison((size_t)n);
    OK(lp_cuda_swiglu(st, dout, dg, du, n));
    OK(lp_cuda_swiglu(st, dg, dg, du, n)); /* in place */
    float *got = host_of(dout, (size_t)n), *got2 = host_of(dg, (size_t)n);
    float *ref = malloc(sizeof(float) * (size_t)n);
    lp_op_swiglu(ref, g, u, n);
    int bad = 0;
    for (int64_t i = 0; i < n; i++)
        if ((!(fabsf(got[i] - ref[i]) <= 8 * FLT_EPSILON * fabsf(ref[i])) || got2[i] != got[i]) &&
            bad++ < 3)
            fprintf(stderr, "  swiglu [%lld]: %g (in place %g), reference %g\n", (long long)i,
                    got[i], got2[i], ref[i]);
    CHECK(!bad, "swiglu: %d values out of tolerance", bad);

    /* rows with padding: the padding is left alone */
    const int64_t ys = n + 5;
    float *y = malloc(sizeof(float) * (size_t)(ys * n_rows));
    fill(y, (size_t)(ys * n_rows), 5.0f);
    float *dy = dev_from(y, sizeof(float) * (size_t)(ys * n_rows));
    OK(lp_cuda_add_rows(st, dy, ys, du, n_rows, n));
    float *gy = host_of(dy, (size_t)(ys * n_rows));
    bad = 0;
    for (int64_t i = 0; i < ys * n_rows; i++)
        bad += i % ys < n ? gy[i] != y[i] + u[i % ys] : gy[i] != y[i];
    CHECK(!bad, "add_rows: %d values differ from the float sum", bad);
    free(g); free(u); free(got); free(got2); free(ref); free(y); free(gy);
    cudaFree(dg); cudaFree(du); cudaFree(dout); cudaFree(dy);
}

/* ---- the whole forward pass ------------------------------------------ */

static double max_logprob_diff(const float *a, const float *b, int32_t n)
{
    double ma = -INFINITY, mb = -INFINITY, sa = 0, sb = 0, worst = 0;
    for (int32_t i = 0; i < n; i++) { ma = fmax(ma, a[i]); mb = fmax(mb, b[i]); }
    for (int32_t i = 0; i < n; i++) { sa += exp(a[i] - ma); sb += exp(b[i] - mb); }
    const double la = ma + log(sa), lb = mb + log(sb);
    for (int32_t i = 0; i < n; i++) {
        double d = fabs((a[i] - la) - (b[i] - lb));
        if (!(d <= worst)) worst = d; /* NaN sticks */
    }
    return worst;
}

/* One schedule of steps on both backends: two prefills in one batch (one
 * over the matvec limit, so on cuBLAS), then batched decode steps (the same
 * decode graph replayed at new positions), then a rewind, then a sequence
 * growing past 256 positions (a new attention split, a larger cache).  Every logit row of the CUDA backend within 2e-3 in log-softmax. */
static void test_forward(const char *dir, const char *file, bool graphs)
{
    /* read by the CUDA backend at create */
    setenv("LMPIPE_CUDA_GRAPHS", graphs ? "1" : "0", 1);
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    lp_model_t *m;
    if (lp_model_load(path, &m)) { CHECK(0, "%s", lp_error_msg()); return; }
    const int32_t nv = lp_model_hparams(m)->n_vocab;
    lp_engine_t *e[2];
    const char *names[2] = {"cpu", "cuda"};
    for (int b = 0; b < 2; b++) {
        lp_engine_params_t p = {.n_ctx = 512, .max_seqs = 3, .max_batch_tokens = 64,
                                .exact = true, .backend = names[b]};
        if (lp_engine_new(m, &p, &e[b])) {
            CHECK(0, "%s: %s backend: %s", file, names[b], lp_error_msg());
            if (b) lp_engine_destroy(&e[0]);
            lp_model_destroy(&m);
            return;
        }
    }
    /* logits land in an anonymous shared mapping, registered with the
     * engine as engine-svc registers its ring */
    const size_t n_rows_max = 8, bytes = sizeof(float) * (size_t)nv * n_rows_max * 2;
    float *seg = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (seg == MAP_FAILED) { CHECK(0, "mmap"); return; }
    CHECK(lp_engine_register_host(e[1], seg, bytes) == 0, "register_host: %s", lp_error_msg());
    CHECK(lp_engine_register_host(e[0], seg, bytes) == 0, "cpu register_host: %s", lp_error_msg());
    float *out[2] = {seg, seg + (size_t)nv * n_rows_max};

    int32_t a[320], bq[6];
    for (int i = 0; i < 320; i++) a[i] = lp_check_irand(&rng, nv);
    for (int i = 0; i < 6; i++) bq[i] = lp_check_irand(&rng, nv);
    double worst = 0;
    int step_no = 0;
    /* step 1: seq 0 prefills 30 tokens (cuBLAS path), seq 1 prefills 6;
     * logits for a's last 3 rows (scattered) and b's last row */
    for (int b = 0; b < 2; b++) {
        lp_batch_seq_t batch[2] = {{0, 0, 30, a, 3, NULL, 0, NULL, 0}, {1, 0, 6, bq, 1, NULL, 0, NULL, 0}};
        float *rows[4] = {out[b] + 2 * nv, out[b], out[b] + 5 * nv, out[b] + 3 * nv};
        CHECK(lp_engine_step(e[b], batch, 2, rows) == 0, "%s %s prefill: %s", file, names[b],
              lp_error_msg());
    }
    for (int r = 0; r < 6; r++) worst = fmax(worst, r == 1 || r == 4 ? 0 : max_logprob_diff(out[0] + r * nv, out[1] + r * nv, nv));
    step_no++;
    /* steps 2..6: both decode one token each (matvec path), contiguous rows */
    for (int s = 0; s < 5; s++, step_no++) {
        for (int b = 0; b < 2; b++) {
            lp_batch_seq_t batch[2] = {{0, 30 + s, 1, a + 30 + s, 1, NULL, 0, NULL, 0}, {1, 6 + s, 1, a + s, 1, NULL, 0, NULL, 0}};
            float *rows[2] = {out[b], out[b] + nv};
            CHECK(lp_engine_step(e[b], batch, 2, rows) == 0, "%s %s decode: %s", file,
                  names[b], lp_error_msg());
        }
        for (int r = 0; r < 2; r++) worst = fmax(worst, max_logprob_diff(out[0] + r * nv, out[1] + r * nv, nv));
    }
    /* step 7: rewind seq 0 to position 20 and feed 7 tokens, all rows, while
     * seq 2 starts with 1 token: 8 tokens, the matvec limit */
    for (int b = 0; b < 2; b++) {
        lp_batch_seq_t batch[2] = {{0, 20, 7, a + 100, 7, NULL, 0, NULL, 0}, {2, 0, 1, a, 1, NULL, 0, NULL, 0}};
        float *rows[8];
        for (int r = 0; r < 8; r++) rows[r] = out[b] + (size_t)r * nv;
        CHECK(lp_engine_step(e[b], batch, 2, rows) == 0, "%s %s rewind: %s", file, names[b],
              lp_error_msg());
    }
    for (int r = 0; r < 8; r++) worst = fmax(worst, max_logprob_diff(out[0] + r * nv, out[1] + r * nv, nv));
    step_no++;
    /* steps 8..12: seq 2 grows past one attention split (256 positions)
     * and past the device cache's first capacity, 60 tokens a step */
    for (int s = 0; s < 5; s++, step_no++) {
        for (int b = 0; b < 2; b++) {
            lp_batch_seq_t batch = {2, 1 + 60 * s, 60, a + 1 + 60 * s, 1, NULL, 0, NULL, 0};
            float *rows[1] = {out[b]};
            CHECK(lp_engine_step(e[b], &batch, 1, rows) == 0, "%s %s long prefill: %s", file,
                  names[b], lp_error_msg());
        }
        worst = fmax(worst, max_logprob_diff(out[0], out[1], nv));
    }
    /* steps 13..15: seq 2 decodes at positions 301.. (two attention splits) */
    for (int s = 0; s < 3; s++, step_no++) {
        for (int b = 0; b < 2; b++) {
            lp_batch_seq_t batch = {2, 301 + s, 1, a + 301 + s, 1, NULL, 0, NULL, 0};
            float *rows[1] = {out[b]};
            CHECK(lp_engine_step(e[b], &batch, 1, rows) == 0, "%s %s long decode: %s", file,
                  names[b], lp_error_msg());
        }
        worst = fmax(worst, max_logprob_diff(out[0], out[1], nv));
    }
    printf("forward %s (graphs %s): max |dlogprob| cuda vs cpu %.3g over %d steps\n", file,
           graphs ? "on" : "off", worst, step_no);
    CHECK(worst <= 2e-3, "%s (graphs %s): CUDA logits differ from the CPU backend's by %.3g "
          "in log-softmax (> 2e-3)", file, graphs ? "on" : "off", worst);
    lp_engine_destroy(&e[1]);
    lp_engine_destroy(&e[0]);
    munmap(seg, bytes);
    lp_model_destroy(&m);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: cuda-backend-test MODELS_DIR\n");
        return 2;
    }
    int n_dev = 0;
    cudaError_t err = cudaGetDeviceCount(&n_dev);
    if (err != cudaSuccess || n_dev == 0) {
        printf("skipped: no CUDA device (%s)\n",
               err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
        return 77;
    }
    const char *seed = getenv("LP_TEST_SEED");
    rng = seed ? strtoull(seed, NULL, 0) : (uint64_t)time(NULL) * 2654435761u;
    if (!rng) rng = 1;
    printf("seed %llu (set LP_TEST_SEED to repeat)\n", (unsigned long long)rng);

    cudaStream_t st;
    lp_cuda_blas_t *h;
    CU(cudaStreamCreate(&st));
    OK(lp_cuda_blas_new(st, &h));
    test_dequant(st);
    test_matvec(st);
    test_matvec_multi(st);
    test_matvec_glu(st);
    test_gemm(st, h);
    test_rmsnorm(st);
    test_rope(st);
    test_attention(st);
    test_swiglu_add(st);
    lp_cuda_blas_destroy(&h);
    cudaStreamDestroy(st);
    /* decode steps replay CUDA graphs by default; the direct path too */
    test_forward(argv[1], "stories260K.gguf", true);
    test_forward(argv[1], "stories260K.gguf", false);
    test_forward(argv[1], "synth-llama-Q4_K_M.gguf", true);
    test_forward(argv[1], "synth-qwen2-Q8_0.gguf", true);
    test_forward(argv[1], "synth-qwen2-Q8_0.gguf", false);
    if (!lp_check_failures) printf("cuda backend: all passed\n");
    return CHECK_DONE();
}
