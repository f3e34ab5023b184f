/* vec_test.c - lp_vec_dot / lp_vec_axpy / lp_vec_swiglu /
 * lp_vec_add_rmsnorm on every instruction set against double-precision
 * loops, lengths 0..200 (every tail length), and lp_vec_rope against
 * lp_op_rope_apply. */
#include "vec.h"
#include "ggml-type.h"
#include "ops.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "matmul.h"
#include "ops.h"
#include "../tests/check.h"

static uint64_t rng = 0x6a09e667f3bcc909ull;

/* Every rotary size 2..64 with two spare dims per head, both pair layouts,
 * against the reference rotation: one rounding more or less per product. */
static void check_rope(void)
{
    enum { HEADS = 3, HD = 66 };
    float x[HEADS * HD], want[HEADS * HD], cs[HD / 2], sn[HD / 2];
    const char *isas[] = {"scalar", "avx2", "avx512"};
    for (int k = 0; k < 3; k++) {
        if (!lp_matmul_isa_supported(isas[k]) || lp_matmul_set_isa(isas[k])) continue;
        for (int n_rot = 2; n_rot <= 64; n_rot += 2) {
            for (int neox = 0; neox < 2; neox++) {
                lp_op_rope_angles(1000 + n_rot, n_rot, 10000.0f, cs, sn);
                for (int i = 0; i < HEADS * HD; i++) x[i] = want[i] = lp_check_frand(&rng);
                lp_op_rope_apply(want, HEADS, HD, n_rot, cs, sn, neox);
                lp_vec_rope(x, HEADS, HD, n_rot, cs, sn, neox);
                for (int i = 0; i < HEADS * HD; i++) {
                    if (fabs(x[i] - want[i]) <= 4 * 0x1p-24) continue;
                    CHECK(0, "%s rope n_rot %d neox %d element %d: %g vs %g", isas[k], n_rot, neox,
                          i, x[i], want[i]);
                    break;
                }
            }
        }
    }
}

/* x += r, y = x / rms(x) * w: x exactly the float sums, y within a few
 * ulps of the double-precision norm. */
static void check_add_rmsnorm(const char *isa, int n, const float *w, const float *r)
{
    enum { N = 200 };
    float x[N], x0[N], y[N];
    for (int i = 0; i < n; i++) x[i] = x0[i] = 3.0f * lp_check_frand(&rng);
    lp_vec_add_rmsnorm(y, x, r, w, n, 1e-5f);
    double sum = 0;
    for (int i = 0; i < n; i++) {
        float xi = r ? x0[i] + r[i] : x0[i];
        if (memcmp(&xi, &x[i], sizeof xi)) {
            CHECK(0, "%s add_rmsnorm n %d: x[%d] %g, not %g", isa, n, i, x[i], xi);
            return;
        }
        sum += (double)xi * xi;
    }
    double scale = 1.0 / sqrt(sum / n + 1e-5f);
    for (int i = 0; i < n; i++) {
        double want = x[i] * scale * w[i];
        if (!(fabs(y[i] - want) <= 4 * 0x1p-24 * fabs(want) + 1e-30)) {
            CHECK(0, "%s add_rmsnorm n %d element %d: %g vs %g", isa, n, i, y[i], want);
            return;
        }
    }
}

/* GEGLU through llama.cpp's fp16 table: the SIMD gathers give the
 * reference's bits for every fp16 value (and around the +-10 clamps);
 * soft-capping within 2e-7 * cap of tanhf, and exactly odd. */
static void check_gemma_ops(void)
{
    enum { NH = 1 << 16 };
    float *g = malloc(sizeof(float) * NH), *u = malloc(sizeof(float) * NH);
    float *want = malloc(sizeof(float) * NH), *got = malloc(sizeof(float) * NH);
    uint64_t rng = 77;
    for (int h = 0; h < NH; h++) {
        /* every half, nudged within its rounding interval, and the clamps */
        g[h] = lp_fp16_to_f32((uint16_t)h) * (1.0f + 0x1p-13f * lp_check_frand(&rng));
        if (h % 97 == 0) g[h] = (h % 2 ? 10.0f : -10.0f) + 0x1p-12f * lp_check_frand(&rng);
        if (isnan(g[h]) || isinf(g[h])) g[h] = 0.5f;
        u[h] = lp_check_frand(&rng);
    }
    lp_op_geglu(want, g, u, NH);
    const char *isas[] = {"scalar", "avx2", "avx512", "vnni"};
    for (int k = 0; k < 4; k++) {
        if (!lp_matmul_isa_supported(isas[k]) || lp_matmul_set_isa(isas[k])) continue;
        lp_op_geglu(want, g, u, NH);
        for (int n = NH - 13; n <= NH; n += 13) {
            memcpy(got, g, sizeof(float) * NH);
            lp_vec_geglu(got, got, u, n);
            int bad = 0;
            for (int i = 0; i < n && !bad; i++)
                if (memcmp(&got[i], &want[i], 4)) {
                    CHECK(0, "%s geglu n %d element %d (g %a): %a, not %a", isas[k], n, i, g[i],
                          got[i], want[i]);
                    bad = 1;
                }
        }
        for (int i = 0; i < NH; i++) got[i] = 200.0f * lp_check_frand(&rng);
        memcpy(want, got, sizeof(float) * NH);
        lp_vec_softcap(got, NH - 5, 30.0f);
        for (int i = 0; i < NH - 5; i++) {
            const double ref = tanh((double)want[i] / 30.0) * 30.0;
            if (!(fabs(got[i] - ref) <= 30 * 2e-7)) {
                CHECK(0, "%s softcap %g: %g, not %g", isas[k], want[i], got[i], ref);
                break;
            }
        }
    }
    lp_matmul_set_isa("auto");
    free(g); free(u); free(want); free(got);
}

int main(void)
{
    enum { N = 200 };
    float a[N], b[N], y[N], y0[N];
    const char *isas[] = {"scalar", "avx2", "avx512", "vnni"};
    for (int k = 0; k < 4; k++) {
        if (!lp_matmul_isa_supported(isas[k])) continue;
        CHECK(lp_matmul_set_isa(isas[k]) == 0, "set %s", isas[k]);
        for (int n = 0; n <= N; n++) {
            if (n > 0) {
                for (int i = 0; i < n; i++) a[i] = 1.0f + lp_check_frand(&rng);
                check_add_rmsnorm(isas[k], n, a, NULL);
                for (int i = 0; i < n; i++) b[i] = lp_check_frand(&rng);
                check_add_rmsnorm(isas[k], n, a, b);
            }
            double ref = 0, mag = 0;
            for (int i = 0; i < n; i++) {
                a[i] = lp_check_frand(&rng);
                b[i] = lp_check_frand(&rng);
                ref += (double)a[i] * b[i];
                mag += fabs((double)a[i] * b[i]);
            }
            float got = lp_vec_dot(a, b, n);
            /* float partial sums: error below n * 2^-24 of sum |a b| */
            CHECK(fabs(got - ref) <= (n + 1) * 0x1p-24 * mag, "%s dot n %d: %g vs %g", isas[k], n,
                  got, ref);
            for (int i = 0; i < N; i++) y[i] = y0[i] = lp_check_frand(&rng);
            lp_vec_axpy(y, 0.75f, a, n);
            for (int i = 0; i < N; i++) {
                /* one rounding (FMA) or two (mul, add): within 2 ulps */
                double want = i < n ? (double)y0[i] + 0.75 * a[i] : y0[i];
                if (!(fabs(y[i] - want) <= 2 * 0x1p-24 * (fabs(want) + 1))) {
                    CHECK(0, "%s axpy n %d element %d: %g vs %g", isas[k], n, i, y[i], want);
                    break;
                }
            }
            /* silu(g) * u over g in [-100, 100] (exp's clamps included), in
             * place (out aliases g) as the backend calls it */
            for (int i = 0; i < N; i++) y[i] = y0[i] = 100.0f * lp_check_frand(&rng);
            lp_vec_swiglu(y, y, b, n);
            for (int i = 0; i < N; i++) {
                double g = y0[i], want = i < n ? g / (1.0 + exp(-g)) * b[i] : g;
                if (!(fabs(y[i] - want) <= 4 * 0x1p-24 * fabs(want) + 1e-30)) {
                    CHECK(0, "%s swiglu n %d element %d (g %g): %g vs %g", isas[k], n, i, g, y[i],
                          want);
                    break;
                }
            }
        }
    }
    check_rope();
    check_gemma_ops();
    return CHECK_DONE();
}
