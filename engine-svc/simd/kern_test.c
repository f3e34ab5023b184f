/* kern_test.c - every SIMD kernel set the CPU runs against the scalar one:
 * activation quantizers and the GEMM of every type, on blocks whose
 * quantized bits are random (every bit pattern, -128 included). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern.h"
#include "matmul.h"
#include "quant.h"
#include "../../tests/check.h"

static uint64_t rng = 0x853c49e6748fea9bull;

static const uint32_t types[] = {
    LP_TYPE_F32, LP_TYPE_F16, LP_TYPE_BF16, LP_TYPE_Q8_0, LP_TYPE_Q4_0, LP_TYPE_Q4_1,
    LP_TYPE_Q5_0, LP_TYPE_Q5_1, LP_TYPE_Q4_K, LP_TYPE_Q5_K, LP_TYPE_Q6_K, LP_TYPE_MXFP4,
};

/* Randomize the quantized bits of a row, keeping its half-precision
 * factors (valid numbers from lp_quant_row). */
static void scramble(uint32_t type, uint8_t *row, size_t bytes)
{
    const lp_type_traits_t *t = lp_type_traits(type);
    for (size_t off = 0; off < bytes; off += t->block_bytes) {
        uint8_t *b = row + off;
        size_t lo = 0, hi = 0; /* byte range of the quantized bits */
        switch (type) {
        case LP_TYPE_Q4_0: case LP_TYPE_Q5_0: case LP_TYPE_Q8_0: lo = 2; hi = t->block_bytes; break;
        case LP_TYPE_Q4_1: case LP_TYPE_Q5_1: lo = 4; hi = t->block_bytes; break;
        case LP_TYPE_Q4_K: case LP_TYPE_Q5_K: lo = 4; hi = t->block_bytes; break;
        case LP_TYPE_Q6_K: lo = 0; hi = t->block_bytes - 2; break;
        case LP_TYPE_MXFP4: lo = 1; hi = t->block_bytes; break;
        default: break;
        }
        for (size_t i = lo; i < hi; i++) b[i] = (uint8_t)(lp_check_rand(&rng) >> 32);
    }
}

static const lp__kern_t *isa_by_name(const char *name)
{
#if defined(LP_HAVE_X86_KERNELS)
    if (!strcmp(name, "avx2")) return &lp__kern_avx2;
    if (!strcmp(name, "avx512")) return &lp__kern_avx512;
    if (!strcmp(name, "vnni")) return &lp__kern_vnni;
#endif
    (void)name;
    return NULL;
}

static void test_quantizers(const lp__kern_t *k)
{
    enum { N = 2048 };
    static float x[N];
    static lp__q8a_t a0[N / LP_QK], a1[N / LP_QK];
    static lp__q8k_t k0[N / LP_QK_K] __attribute__((aligned(64))), k1[N / LP_QK_K] __attribute__((aligned(64)));
    for (int rep = 0; rep < 20; rep++) {
        float scale = rep % 2 ? 1e-3f : 37.0f;
        for (int i = 0; i < N; i++) x[i] = lp_check_frand(&rng) * scale;
        if (rep == 3) memset(x, 0, 256 * sizeof(float)); /* an all-zero block */
        lp__quant_q8a_scalar(x, a0, N);
        k->quant_q8a(x, a1, N);
        for (int b = 0; b < N / LP_QK; b++) {
            CHECK(!memcmp(a0[b].qs, a1[b].qs, LP_QK) && a0[b].d == a1[b].d &&
                  a0[b].sum == a1[b].sum && a0[b].s == a1[b].s && a0[b].fsum == a1[b].fsum &&
                  a0[b].fsum == (float)a0[b].sum,
                  "%s q8a block %d differs from scalar", k->name, b);
        }
        lp__quant_q8k_scalar(x, k0, N);
        k->quant_q8k(x, k1, N);
        for (int b = 0; b < N / LP_QK_K; b++) {
            /* equal, or equal with q, bsums and d all negated (the sign
             * of the scale is free) */
            int sg = (k0[b].d == k1[b].d) ? 1 : -1;
            CHECK(k0[b].d == sg * k1[b].d, "%s q8k block %d: d %g vs %g", k->name, b, k0[b].d,
                  k1[b].d);
            for (int j = 0; j < LP_QK_K; j++)
                if (k0[b].qs[j] != sg * k1[b].qs[j]) {
                    CHECK(0, "%s q8k block %d value %d: %d vs %d", k->name, b, j, k0[b].qs[j],
                          k1[b].qs[j]);
                    break;
                }
            for (int j = 0; j < 16; j++)
                CHECK(k0[b].bsums[j] == sg * k1[b].bsums[j] &&
                      k0[b].fbsums[j] == (float)k0[b].bsums[j] &&
                      k1[b].fbsums[j] == (float)k1[b].bsums[j],
                      "%s q8k block %d bsum %d: %d vs %d", k->name, b, j, k0[b].bsums[j],
                      k1[b].bsums[j]);
            for (int j = 0; j < 8; j++)
                CHECK(k0[b].fbsums32[j] == sg * k1[b].fbsums32[j] &&
                      k0[b].fbsums32[j] == (float)(k0[b].bsums[2 * j] + k0[b].bsums[2 * j + 1]),
                      "%s q8k block %d 32-sum %d: %g vs %g", k->name, b, j, k0[b].fbsums32[j],
                      k1[b].fbsums32[j]);
        }
    }
}

/* The GEMM of kernel set k against the scalar GEMM on the same quantized
 * activations: the integer sums are the same, only the float summation
 * order differs, so they agree to 1e-5 of sum |w x|. */
static void test_gemm(const lp__kern_t *k, uint32_t type, int64_t n, int64_t nr, int64_t nt,
                      bool batched)
{
    size_t wrb = lp_type_row_bytes(type, n);
    uint8_t *w = malloc(wrb * (size_t)nr);
    float *wf = malloc(sizeof(float) * (size_t)(n * nr));
    float *x = malloc(sizeof(float) * (size_t)(n * nt));
    size_t xrb;
    enum lp__act act = lp__act_of(type);
    if (act == LP_ACT_Q8A) xrb = (size_t)(n / LP_QK) * sizeof(lp__q8a_t);
    else if (act == LP_ACT_Q8K) xrb = (size_t)(n / LP_QK_K) * sizeof(lp__q8k_t);
    else xrb = (size_t)n * sizeof(float);
    void *xq = aligned_alloc(64, (xrb * (size_t)nt + 63) & ~(size_t)63);
    int64_t ys = nr + 1;
    float *y0 = malloc(sizeof(float) * (size_t)(ys * nt));
    float *y1 = malloc(sizeof(float) * (size_t)(ys * nt));
    for (int64_t r = 0; r < nr; r++) {
        for (int64_t i = 0; i < n; i++) wf[r * n + i] = lp_check_frand(&rng);
        lp_quant_row(type, wf + r * n, w + (size_t)r * wrb, n);
        scramble(type, w + (size_t)r * wrb, wrb);
        lp_dequant_row(type, w + (size_t)r * wrb, wf + r * n, n);
    }
    for (int64_t i = 0; i < n * nt; i++) x[i] = lp_check_frand(&rng) * 3.0f;
    for (int64_t t = 0; t < nt; t++) {
        uint8_t *dst = (uint8_t *)xq + (size_t)t * xrb;
        if (act == LP_ACT_Q8A) lp__quant_q8a_scalar(x + t * n, dst, n);
        else if (act == LP_ACT_Q8K) lp__quant_q8k_scalar(x + t * n, dst, n);
        else memcpy(dst, x + t * n, (size_t)n * sizeof(float));
    }
    lp__kern_scalar.gemm[type](n, w, wrb, nr, xq, xrb, nt, y0, ys);
    void *scratch = NULL;
    if (batched) {
        scratch = aligned_alloc(64, (LP_PP_SCRATCH(n) + 63) & ~(size_t)63);
        k->gemm_pp[type](n, w, wrb, nr, xq, xrb, nt, y1, ys, scratch);
    } else {
        k->gemm[type](n, w, wrb, nr, xq, xrb, nt, y1, ys);
    }
    free(scratch);
    for (int64_t t = 0; t < nt; t++) {
        for (int64_t r = 0; r < nr; r++) {
            double mag = 0;
            for (int64_t i = 0; i < n; i++) mag += fabs((double)wf[r * n + i] * x[t * n + i]);
            double err = fabs((double)y0[t * ys + r] - y1[t * ys + r]);
            if (!(err <= 1e-5 * mag)) {
                CHECK(0, "%s %s%s n %lld rows %lld tokens %lld: row %lld token %lld: %g vs scalar %g",
                      k->name, lp_type_name(type), batched ? " batched" : "", (long long)n, (long long)nr, (long long)nt,
                      (long long)r, (long long)t, y1[t * ys + r], y0[t * ys + r]);
                goto done;
            }
        }
    }
done:
    free(w);
    free(wf);
    free(x);
    free(xq);
    free(y0);
    free(y1);
}

int main(void)
{
    const char *names[] = {"avx2", "avx512", "vnni"};
    int ran = 0;
    for (int s = 0; s < 3; s++) {
        const lp__kern_t *k = isa_by_name(names[s]);
        if (!k || !lp_matmul_isa_supported(names[s])) {
            printf("%s: not supported here, skipped\n", names[s]);
            continue;
        }
        ran++;
        test_quantizers(k);
        /* one token: row pairs and a tail, and enough rows to prefetch ahead */
        const int64_t shapes[][3] = {{256, 1, 1}, {512, 5, 3}, {768, 3, 9}, {2048, 2, 4}, {512, 5, 1},
                                     {256, 4, 7}, {2048, 21, 1}};
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
            for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
                test_gemm(k, types[t], shapes[sh][0], shapes[sh][1], shapes[sh][2], false);
        /* legacy rows of an odd number of blocks (Q5_0's decode pairs them) */
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
            if (lp__act_of(types[t]) == LP_ACT_Q8A) {
                test_gemm(k, types[t], 96, 3, 1, false);
                test_gemm(k, types[t], 160, 2, 2, false);
            }
        /* one token over rows longer than the vnni Q4_K kernel's copy of
         * the activations (64 blocks): the 256-bit kernel */
        test_gemm(k, LP_TYPE_Q4_K, 65 * 256, 3, 1, false);
        /* float types with a length that is not a multiple of the vector width */
        test_gemm(k, LP_TYPE_F32, 37, 3, 5, false);
        test_gemm(k, LP_TYPE_F16, 19, 2, 2, false);
        test_gemm(k, LP_TYPE_BF16, 45, 1, 6, false);
        /* batched kernels: whole row groups plus a tail, token tiles plus a tail */
        const int64_t pp_shapes[][3] = {{256, LP_PP_ROWS, 8}, {512, 2 * LP_PP_ROWS + 5, 13},
                                        {768, LP_PP_ROWS + 1, 17}, {256, 3, 9}};
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            if (!k->gemm_pp[types[t]]) continue;
            for (size_t sh = 0; sh < sizeof pp_shapes / sizeof pp_shapes[0]; sh++)
                test_gemm(k, types[t], pp_shapes[sh][0], pp_shapes[sh][1], pp_shapes[sh][2], true);
        }
        printf("%s: checked against scalar\n", names[s]);
    }
    if (lp_check_failures) return CHECK_DONE();
    /* A machine without AVX2 has nothing to compare: skip rather than pass. */
    return ran ? 0 : 77;
}
