/* vec_test.c - lp_vec_dot / lp_vec_axpy / lp_vec_swiglu on every
 * instruction set against double-precision loops, lengths 0..200 (every
 * tail length). */
#include "vec.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "matmul.h"
#include "../tests/check.h"

static uint64_t rng = 0x6a09e667f3bcc909ull;

int main(void)
{
    enum { N = 200 };
    float a[N], b[N], y[N], y0[N];
    const char *isas[] = {"scalar", "avx2", "avx512", "vnni"};
    for (int k = 0; k < 4; k++) {
        if (!lp_matmul_isa_supported(isas[k])) continue;
        CHECK(lp_matmul_set_isa(isas[k]) == 0, "set %s", isas[k]);
        for (int n = 0; n <= N; n++) {
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
    return CHECK_DONE();
}
