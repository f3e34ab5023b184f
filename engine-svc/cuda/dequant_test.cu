/* dequant_test.cu - the device decoders of every block type (dequant.cuh)
 * and the lane arithmetic of the matrix-vector kernel (matvec.cuh), run as
 * host code against the reference quant.c.  Needs no GPU: it checks the
 * block layouts and the indexing that the kernels use, on any machine that
 * builds the CUDA backend.
 *
 * Checked for every type and both forms of the float types:
 *  - elem() maps the PARTS x NV decoded values of a block onto its QK
 *    elements one to one;
 *  - dequant_item over every item of a few rows (also gathered through a
 *    row list) reproduces lp_dequant_row bit for bit: the decoders round
 *    each product and sum on their own, as quant.c does;
 *  - 32 emulated lanes of matvec_lane, summed, give the dot products of
 *    the reference rows with random activations within the float
 *    summation bound gamma_n * sum |w x| (Higham 3.1). */
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "dequant.cuh"
#include "matvec.cuh"

#define _Static_assert static_assert /* quant.h is C11 */
extern "C" {
#include "error.h"
#include "quant.h"
}
#undef _Static_assert
#include "../../tests/check.h"

using namespace lp_cuda;

static uint64_t rng = 0x9e3779b97f4a7c15ull;

template <typename Q>
static void check_type(const char *name, uint32_t type, int64_t n_in)
{
    /* elem() is a bijection of (part, k) onto the block's elements */
    int hits[256] = {0};
    for (int p = 0; p < Q::PARTS; p++)
        for (int k = 0; k < Q::NV; k++) {
            int e = Q::elem(p, k);
            if (e >= 0 && e < Q::QK) hits[e]++;
            else CHECK(0, "%s: elem(%d, %d) = %d is outside the block", name, p, k, e);
        }
    for (int e = 0; e < Q::QK; e++) CHECK(hits[e] == 1, "%s: element %d decoded %d times", name, e, hits[e]);
    /* RUN 4: runs of four consecutive elements from multiples of 4 */
    for (int p = 0; Q::RUN == 4 && p < Q::PARTS; p++)
        for (int k = 0; k < Q::NV; k++)
            CHECK(Q::elem(p, k) == Q::elem(p, k & ~3) + (k & 3) && Q::elem(p, k & ~3) % 4 == 0,
                  "%s: elem(%d, %d) breaks the runs of four", name, p, k);

    const int64_t n_rows = 5;
    const size_t rb = lp_type_row_bytes(type, n_in);
    CHECK(rb == (size_t)(n_in / Q::QK * Q::BYTES), "%s: row bytes %zu, traits say %lld", name, rb,
          (long long)(n_in / Q::QK * Q::BYTES));
    uint8_t *w = (uint8_t *)aligned_alloc(16, rb * n_rows + 16);
    float *src = (float *)malloc(sizeof(float) * n_in);
    float *ref = (float *)malloc(sizeof(float) * n_in * n_rows);
    for (int64_t r = 0; r < n_rows; r++) {
        for (int64_t i = 0; i < n_in; i++) src[i] = lp_check_frand(&rng) * (float)(r + 1);
        if (lp_quant_row(type, src, w + r * rb, n_in)) {
            CHECK(0, "%s: quantize: %s", name, lp_error_msg());
            return;
        }
        lp_dequant_row(type, w + r * rb, ref + r * n_in, n_in);
    }

    /* every item of a dequantization, rows in order and gathered */
    const int32_t gather[] = {4, 0, 2, 2, 1};
    for (int g = 0; g < 2; g++) {
        float *out = (float *)malloc(sizeof(float) * n_in * n_rows);
        for (int64_t i = 0; i < n_in * n_rows; i++) out[i] = NAN;
        const int64_t items = n_rows * (n_in / Q::QK) * Q::PARTS;
        for (int64_t i = 0; i < items; i++)
            dequant_item<Q>(w, rb, n_in, g ? gather : nullptr, out, i);
        int64_t diff = 0;
        for (int64_t r = 0; r < n_rows; r++) {
            const float *e = ref + (g ? gather[r] : r) * n_in;
            if (memcmp(out + r * n_in, e, sizeof(float) * n_in))
                for (int64_t i = 0; i < n_in; i++)
                    if (memcmp(&out[r * n_in + i], &e[i], sizeof(float)) && diff++ < 3)
                        fprintf(stderr, "  %s row %lld [%lld]: %.9g, reference %.9g\n", name,
                                (long long)r, (long long)i, out[r * n_in + i], e[i]);
        }
        CHECK(!diff, "%s: %lld dequantized values differ from lp_dequant_row%s", name,
              (long long)diff, g ? " (gathered rows)" : "");
        free(out);
    }

    /* 32 lanes of the matvec for 3 tokens with padded activation rows:
     * rows 7 floats apart (scalar loads), then 8 apart, 16-byte aligned
     * (float4 loads) */
    const int n_tok = 3;
    int bad = 0;
    for (int64_t x_stride = n_in + 7; x_stride <= n_in + 8; x_stride++) {
    float *x = (float *)aligned_alloc(16, sizeof(float) * x_stride * n_tok + 16);
    for (int64_t i = 0; i < x_stride * n_tok; i++) x[i] = lp_check_frand(&rng);
    for (int64_t r = 0; r < n_rows; r++) {
        double sum[LP_CUDA_MMV_MAX_TOKENS] = {0};
        for (int lane = 0; lane < 32; lane++) {
            float acc[LP_CUDA_MMV_MAX_TOKENS];
            matvec_lane<Q>(w + r * rb, n_in, x, x_stride, n_tok, lane, acc);
            for (int t = 0; t < n_tok; t++) sum[t] += acc[t];
        }
        for (int t = 0; t < n_tok; t++) {
            double want = 0, mag = 0;
            for (int64_t i = 0; i < n_in; i++) {
                want += (double)ref[r * n_in + i] * x[t * x_stride + i];
                mag += fabs((double)ref[r * n_in + i] * x[t * x_stride + i]);
            }
            const double u = 0x1p-24, tol = (n_in + 1) * u / (1 - (n_in + 1) * u) * mag;
            if (!(fabs(sum[t] - want) <= tol) && bad++ < 3)
                fprintf(stderr, "  %s matvec row %lld token %d: %.9g, reference %.9g\n", name,
                        (long long)r, t, sum[t], want);
        }
    }
    free(x);
    }
    CHECK(!bad, "%s: %d matvec lane sums out of tolerance", name, bad);
    free(w); free(src); free(ref);
}

int main(void)
{
    check_type<t_f32>("F32", LP_TYPE_F32, 36);
    check_type<t_f32x8>("F32x8", LP_TYPE_F32, 512);
    check_type<t_f16>("F16", LP_TYPE_F16, 36);
    check_type<t_f16x8>("F16x8", LP_TYPE_F16, 512);
    check_type<t_bf16>("BF16", LP_TYPE_BF16, 36);
    check_type<t_bf16x8>("BF16x8", LP_TYPE_BF16, 512);
    check_type<t_q4_0>("Q4_0", LP_TYPE_Q4_0, 512);
    check_type<t_q4_1>("Q4_1", LP_TYPE_Q4_1, 512);
    check_type<t_q5_0>("Q5_0", LP_TYPE_Q5_0, 512);
    check_type<t_q5_1>("Q5_1", LP_TYPE_Q5_1, 512);
    check_type<t_q8_0>("Q8_0", LP_TYPE_Q8_0, 512);
    check_type<t_q4_k>("Q4_K", LP_TYPE_Q4_K, 768);
    check_type<t_q5_k>("Q5_K", LP_TYPE_Q5_K, 768);
    check_type<t_q6_k>("Q6_K", LP_TYPE_Q6_K, 768);
    /* every type the kernels claim goes through the dispatcher */
    const uint32_t types[] = {LP_TYPE_F32, LP_TYPE_F16, LP_TYPE_BF16, LP_TYPE_Q4_0,
                              LP_TYPE_Q4_1, LP_TYPE_Q5_0, LP_TYPE_Q5_1, LP_TYPE_Q8_0,
                              LP_TYPE_Q4_K, LP_TYPE_Q5_K, LP_TYPE_Q6_K};
    for (uint32_t t : types)
        CHECK(lp_cuda_dispatch(t, false, [&]<typename Q>() {}), "type %u not dispatched", t);
    CHECK(!lp_cuda_dispatch(LP_TYPE_Q2_K, false, [&]<typename Q>() {}), "Q2_K dispatched");
    if (!lp_check_failures) printf("cuda decoders: all passed\n");
    return CHECK_DONE();
}
