/* mxfp4_ref_test.c - MXFP4 against llama.cpp's own code: the peer build's
 * libggml-base (../shared/llama.cpp/lib) is loaded and its
 * dequantize_row_mxfp4 and quantize_row_mxfp4_ref run beside ours.
 *   - dequantization: every exponent byte 0..255 with every value byte
 *     0..255 in every position, compared bit for bit;
 *   - quantization: rows of random values over 2^-130 .. 2^20 (zeros,
 *     ties, subnormal scales included), compared byte for byte.
 * usage: mxfp4_ref_test PATH/libggml-base.so.0 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "../tests/check.h"

typedef void (*deq_fn)(const void *x, float *y, int64_t k);
typedef void (*q_fn)(const float *x, void *y, int64_t k);

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s libggml-base.so.0\n", argv[0]);
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "FAIL: %s\n", dlerror());
        return 1;
    }
    deq_fn ref_deq = (deq_fn)dlsym(h, "dequantize_row_mxfp4");
    q_fn ref_q = (q_fn)dlsym(h, "quantize_row_mxfp4_ref");
    CHECK(ref_deq && ref_q, "llama.cpp's MXFP4 functions are not in %s", argv[1]);
    if (!ref_deq || !ref_q) return 1;

    /* 256 exponents x 16 rows: row r's value byte j is (16 r + j) mod 256
     * shifted by the exponent, so every byte meets every position */
    enum { NB = 256 * 16 };
    static lp_block_mxfp4_t blk[NB];
    static float got[NB * LP_QK], want[NB * LP_QK];
    for (int e = 0; e < 256; e++)
        for (int r = 0; r < 16; r++) {
            lp_block_mxfp4_t *b = &blk[e * 16 + r];
            b->e = (uint8_t)e;
            for (int j = 0; j < 16; j++) b->qs[j] = (uint8_t)(16 * r + j + e);
        }
    ref_deq(blk, want, (int64_t)NB * LP_QK);
    lp_dequant_row(LP_TYPE_MXFP4, blk, got, (int64_t)NB * LP_QK);
    int bad = 0;
    for (int i = 0; i < NB * LP_QK; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) && bad++ < 5)
            CHECK(0, "dequant: block %d element %d: %a, llama.cpp %a", i / LP_QK, i % LP_QK,
                  got[i], want[i]);
    CHECK(!bad, "dequant: %d of %d values differ from llama.cpp's", bad, NB * LP_QK);

    enum { NQ = 4096 };
    static float x[NQ * LP_QK];
    static lp_block_mxfp4_t q0[NQ], q1[NQ];
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (int b = 0; b < NQ; b++) {
        const float scale = ldexpf(1.0f, (int)(lp_check_rand(&rng) % 150) - 130);
        for (int j = 0; j < LP_QK; j++) {
            const uint64_t r = lp_check_rand(&rng);
            float v = lp_check_frand(&rng) * scale * 8;
            if (r % 7 == 0) v = 0;                       /* zeros */
            else if (r % 7 == 1) v = scale * (float)((int)(r >> 8) % 25 - 12) * 0.5f; /* grid, ties */
            x[b * LP_QK + j] = v;
        }
    }
    ref_q(x, q1, (int64_t)NQ * LP_QK);
    CHECK(!lp_quant_row(LP_TYPE_MXFP4, x, q0, (int64_t)NQ * LP_QK), "quant_row: %s", "failed");
    bad = 0;
    for (int b = 0; b < NQ; b++)
        if (memcmp(&q0[b], &q1[b], sizeof(q0[b])) && bad++ < 5)
            CHECK(0, "quant: block %d differs from llama.cpp's (e %u vs %u)", b, q0[b].e, q1[b].e);
    CHECK(!bad, "quant: %d of %d blocks differ from llama.cpp's", bad, NQ);
    dlclose(h);
    const int rc = CHECK_DONE();
    if (!rc) printf("PASS: MXFP4 dequantization (%d values) and quantization (%d blocks) as "
                    "llama.cpp's\n", NB * LP_QK, NQ);
    return rc;
}
