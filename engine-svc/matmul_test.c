/* matmul_test.c - lp_matmul against a naive double loop over the
 * dequantized weights, for every type, several shapes and thread counts,
 * both paths. */
#include "matmul.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "quant.h"
#include "../tests/check.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;

static const uint32_t types[] = {
    LP_TYPE_F32, LP_TYPE_F16, LP_TYPE_BF16, LP_TYPE_Q8_0, LP_TYPE_Q4_0, LP_TYPE_Q4_1,
    LP_TYPE_Q5_0, LP_TYPE_Q5_1, LP_TYPE_Q4_K, LP_TYPE_Q5_K, LP_TYPE_Q6_K,
};

/* n_in, n_out, n_tok: single tokens and batches, odd n_out, one row. */
static const int64_t shapes[][3] = {
    {256, 7, 1}, {512, 33, 3}, {256, 1, 5}, {768, 17, 8}, {1024, 64, 13}, {2048, 5, 1},
    {5632, 20, 9}, /* TinyLlama's ffn_down width */
    {256, 3001, 1}, /* one token, many chunks: shares and stealing */
};

/* Largest error allowed, relative to sum_i |w_i x_i|.  exact: the dot is
 * accumulated in double and rounded once to float, so only float rounding
 * of the result (2^-24) matters; 1e-6 leaves room.  fast: the activations
 * are rounded to 8 bits per block (relative error up to 1/254 of the block
 * maximum), so the error of a dot stays under ~1% of sum |w x|, and F16 /
 * BF16 / F32 weights use float activations and float accumulation. */
#define EXACT_REL 1e-6
#define FAST_REL 0.02

static void run_case(lp_threadpool_t *pool, uint32_t type, const int64_t *shape, bool exact)
{
    int64_t n_in = shape[0], n_out = shape[1], n_tok = shape[2];
    int64_t xs = n_in + 3, ys = n_out + 2; /* strides wider than the rows */
    size_t rb = lp_type_row_bytes(type, n_in);
    uint8_t *w = malloc(rb * (size_t)n_out);
    float *wf = malloc(sizeof(float) * (size_t)(n_in * n_out));
    float *x = malloc(sizeof(float) * (size_t)(xs * n_tok));
    float *y = malloc(sizeof(float) * (size_t)(ys * n_tok));
    for (int64_t o = 0; o < n_out; o++) {
        for (int64_t i = 0; i < n_in; i++)
            wf[o * n_in + i] = lp_check_frand(&rng) * (1.0f + (float)(o % 3));
        CHECK(lp_quant_row(type, wf + o * n_in, w + (size_t)o * rb, n_in) == 0, "quantize");
        lp_dequant_row(type, w + (size_t)o * rb, wf + o * n_in, n_in); /* the reference weights */
    }
    for (int64_t i = 0; i < xs * n_tok; i++) x[i] = lp_check_frand(&rng) * 2.0f;
    for (int64_t i = 0; i < ys * n_tok; i++) y[i] = NAN; /* padding must stay untouched */

    lp_matmul_t mm = {
        .type = type, .w = w, .n_in = n_in, .n_out = n_out,
        .x = x, .x_stride = xs, .n_tok = n_tok, .y = y, .y_stride = ys,
    };
    CHECK(lp_matmul_check(&mm) == 0, "check: %s", lp_error_msg());
    CHECK_RC(lp_matmul(pool, &mm, exact), 0);

    double worst = 0;
    for (int64_t t = 0; t < n_tok; t++) {
        for (int64_t o = 0; o < n_out; o++) {
            double ref = 0, mag = 0;
            for (int64_t i = 0; i < n_in; i++) {
                double p = (double)wf[o * n_in + i] * x[t * xs + i];
                ref += p;
                mag += fabs(p);
            }
            double err = fabs(y[t * ys + o] - ref) / mag;
            if (!(err <= worst)) worst = err; /* catches NaN */
        }
        for (int64_t o = n_out; o < ys; o++)
            CHECK(isnan(y[t * ys + o]), "%s: padding of row %lld written", lp_type_name(type),
                  (long long)t);
    }
    double tol = exact ? EXACT_REL : FAST_REL;
    CHECK(worst <= tol, "%s %s/%s n_in %lld n_out %lld n_tok %lld threads %d: error %g > %g",
          lp_type_name(type), exact ? "exact" : "fast", lp_matmul_isa(), (long long)n_in, (long long)n_out,
          (long long)n_tok, pool ? lp_threadpool_n_threads(pool) : 0, worst, tol);
    free(w);
    free(wf);
    free(x);
    free(y);
}

/* y = w x for n_tok tokens, packed (pk) or not. */
static void mm_run(lp_threadpool_t *pool, uint32_t type, const void *w, const lp_matmul_pack_t *pk,
                   int64_t n_in, int64_t n_out, const float *x, int64_t n_tok, float *y)
{
    lp_matmul_t mm = {.type = type, .w = w, .pk = pk, .n_in = n_in, .n_out = n_out, .x = x,
                      .x_stride = n_in, .n_tok = n_tok, .y = y, .y_stride = n_out};
    CHECK_RC(lp_matmul(pool, &mm, false), 0);
}

/* The types with a packed form under isa. */
static bool has_pack(const char *isa, uint32_t type)
{
    return (!strcmp(isa, "vnni") || (!strcmp(isa, "avx512") && type != LP_TYPE_Q8_0)) &&
           type != LP_TYPE_Q4_K;
}

/* A packed weight gives bit for bit what the unpacked batch kernel gives
 * (same arithmetic) for its whole row groups, with 1 to 40 tokens (under
 * 8, the batch kernel runs on the tokens padded to 8) and any thread
 * count; the rows past the last group give what the unpacked kernels give
 * for the same tokens.  A pack made under another ISA is not read.  Types
 * without a packed form get none. */
static void test_pack(lp_threadpool_t *pool, const char *isa)
{
    static const uint32_t ptypes[] = {LP_TYPE_Q4_0, LP_TYPE_Q5_0, LP_TYPE_Q8_0, LP_TYPE_Q6_K,
                                      LP_TYPE_Q4_K};
    static const int64_t pshapes[][3] = {{512, 48, 8}, {768, 37, 13}, {256, 16, 16}, {512, 70, 1},
                                         {768, 37, 3}, {4864, 32, 16}, {512, 40, 40}};
    for (size_t k = 0; k < sizeof ptypes / sizeof ptypes[0]; k++) {
        uint32_t type = ptypes[k];
        for (size_t s = 0; s < sizeof pshapes / sizeof pshapes[0]; s++) {
            int64_t n_in = pshapes[s][0], n_out = pshapes[s][1], n_tok = pshapes[s][2];
            if (n_in % lp_type_traits(type)->block_elems) continue;
            int64_t n_ref = n_tok < 8 ? 8 : n_tok;
            size_t rb = lp_type_row_bytes(type, n_in), ybytes = sizeof(float) * (size_t)(n_out * n_ref);
            uint8_t *w = malloc(rb * (size_t)n_out);
            float *row = malloc(sizeof(float) * (size_t)n_in);
            float *x = malloc(sizeof(float) * (size_t)(n_in * n_ref));
            float *yb = malloc(ybytes), *yr = malloc(ybytes), *yp = malloc(ybytes);
            for (int64_t o = 0; o < n_out; o++) {
                for (int64_t i = 0; i < n_in; i++) row[i] = lp_check_frand(&rng) * (1.0f + (float)(o % 5));
                CHECK(lp_quant_row(type, row, w + (size_t)o * rb, n_in) == 0, "quantize");
            }
            for (int64_t i = 0; i < n_in * n_ref; i++) x[i] = lp_check_frand(&rng) * 2.0f;
            lp_matmul_pack_t *pk = NULL;
            bool has = has_pack(isa, type);
            /* exactly as large as the whole groups of rows it packs */
            size_t size = lp_matmul_pack_size(type, n_in, n_out);
            CHECK(size == (has ? rb * (size_t)(n_out / 16 * 16) : 0), "%s/%s: pack size %zu",
                  lp_type_name(type), isa, size);
            void *arena = size ? aligned_alloc(64, (size + 63) & ~(size_t)63) : NULL;
            CHECK_RC(lp_matmul_pack(pool, type, w, n_in, n_out, arena, &pk), 0);
            CHECK(!!pk == has, "%s/%s: packed form %s", lp_type_name(type), isa, pk ? "made" : "missing");
            if (pk) {
                size_t cb = 0;
                CHECK(lp_matmul_pack_data(pk, &cb) == arena && cb == size,
                      "%s: packed %zu bytes, whole groups of rows %zu", lp_type_name(type), cb,
                      rb * (size_t)(n_out / 16 * 16));
            }
            mm_run(pool, type, w, NULL, n_in, n_out, x, n_ref, yb); /* the batch kernel */
            mm_run(pool, type, w, NULL, n_in, n_out, x, n_tok, yr); /* the same tokens */
            mm_run(pool, type, w, pk, n_in, n_out, x, n_tok, yp);
            int64_t full = pk ? n_out / 16 * 16 : 0;
            bool same = true;
            for (int64_t t = 0; t < n_tok; t++) {
                const float *p = yp + t * n_out;
                same &= !memcmp(p, yb + t * n_out, sizeof(float) * (size_t)full) &&
                        !memcmp(p + full, yr + t * n_out + full, sizeof(float) * (size_t)(n_out - full));
            }
            CHECK(same, "%s/%s n_in %lld n_out %lld n_tok %lld threads %d: packed result differs",
                  lp_type_name(type), isa, (long long)n_in, (long long)n_out, (long long)n_tok,
                  pool ? lp_threadpool_n_threads(pool) : 0);
            if (pk && strcmp(isa, "avx2")) { /* under another ISA the pack is not read */
                CHECK_RC(lp_matmul_set_isa("avx2"), 0);
                mm_run(pool, type, w, NULL, n_in, n_out, x, n_tok, yr);
                mm_run(pool, type, w, pk, n_in, n_out, x, n_tok, yp);
                CHECK(!memcmp(yr, yp, sizeof(float) * (size_t)(n_out * n_tok)),
                      "%s: a %s pack read under avx2", lp_type_name(type), isa);
                CHECK_RC(lp_matmul_set_isa(isa), 0);
            }
            lp_matmul_pack_free(&pk);
            CHECK(pk == NULL);
            free(arena);
            free(w);
            free(row);
            free(x);
            free(yb);
            free(yr);
            free(yp);
        }
    }
}

/* lp_matmul_multi gives each product exactly what lp_matmul gives it
 * alone (a row's dot does not depend on how rows are shared out), for one
 * token (the chunked path), a few and a batch (the shared quantization),
 * for products of one activation format and of mixed formats. */
static void test_multi(lp_threadpool_t *pool)
{
    static const uint32_t sets[][3] = {
        {LP_TYPE_Q4_K, LP_TYPE_Q6_K, LP_TYPE_Q5_K}, /* one format: one pass */
        {LP_TYPE_Q5_0, LP_TYPE_Q8_0, LP_TYPE_Q4_0},
        {LP_TYPE_Q4_K, LP_TYPE_Q8_0, LP_TYPE_F16},  /* mixed: one call each */
    };
    enum { N_IN = 512, MAX_TOK = 9 };
    const int64_t n_out[3] = {1501, 67, 2048}, n_tok[] = {1, 3, MAX_TOK};
    static float x[MAX_TOK * N_IN];
    for (int i = 0; i < MAX_TOK * N_IN; i++) x[i] = lp_check_frand(&rng);
    for (size_t s = 0; s < sizeof sets / sizeof sets[0]; s++) {
        for (size_t t = 0; t < sizeof n_tok / sizeof n_tok[0]; t++) {
            lp_matmul_t mm[3];
            uint8_t *w[3];
            float *y1[3], *y3[3];
            for (int m = 0; m < 3; m++) {
                size_t rb = lp_type_row_bytes(sets[s][m], N_IN), ny = (size_t)(n_out[m] * n_tok[t]);
                float row[N_IN];
                w[m] = malloc(rb * (size_t)n_out[m]);
                y1[m] = malloc(sizeof(float) * ny);
                y3[m] = malloc(sizeof(float) * ny);
                for (int64_t o = 0; o < n_out[m]; o++) {
                    for (int i = 0; i < N_IN; i++) row[i] = lp_check_frand(&rng);
                    lp_quant_row(sets[s][m], row, w[m] + (size_t)o * rb, N_IN);
                }
                mm[m] = (lp_matmul_t){.type = sets[s][m], .w = w[m], .n_in = N_IN,
                                      .n_out = n_out[m], .x = x, .x_stride = N_IN,
                                      .n_tok = n_tok[t], .y = y1[m], .y_stride = n_out[m]};
                CHECK_RC(lp_matmul(pool, &mm[m], false), 0);
                mm[m].y = y3[m];
            }
            CHECK_RC(lp_matmul_multi(pool, mm, 3, false), 0);
            for (int m = 0; m < 3; m++) {
                CHECK(!memcmp(y1[m], y3[m], sizeof(float) * (size_t)(n_out[m] * n_tok[t])),
                      "multi %s (set %zu, %lld tokens, %s): differs from lp_matmul alone",
                      lp_type_name(sets[s][m]), s, (long long)n_tok[t], lp_matmul_isa());
                free(w[m]);
                free(y1[m]);
                free(y3[m]);
            }
        }
    }
}

/* lp_matmul_grouped: products of their own weights over gathered rows of
 * a shared x (the experts of a step) give what lp_matmul gives on those
 * rows copied out, bit for bit, on each path; products that share rows
 * share their quantization. */
static void test_grouped(lp_threadpool_t *pool, bool exact)
{
    enum { N_IN = 512, N_X = 12, N_PROD = 7 };
    static const uint32_t type[N_PROD] = {LP_TYPE_Q4_K, LP_TYPE_Q4_K, LP_TYPE_Q6_K, LP_TYPE_Q8_0,
                                          LP_TYPE_F32, LP_TYPE_Q4_0, LP_TYPE_Q5_K};
    static const int64_t n_out[N_PROD] = {96, 96, 33, 130, 17, 64, 40};
    static const int32_t rows[N_PROD][N_X] = {
        {3}, {3}, {0, 5, 7, 11}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {4, 4}, {0}, {0}};
    static const int64_t n_tok[N_PROD] = {1, 1, 4, 10, 2, 0, 9};
    static float x[N_X * N_IN], xg[N_X * N_IN];
    for (int i = 0; i < N_X * N_IN; i++) x[i] = lp_check_frand(&rng);
    lp_matmul_t mm[N_PROD];
    uint8_t *w[N_PROD];
    float *y1[N_PROD], *yg[N_PROD];
    int32_t seq[N_X];
    for (int i = 0; i < N_X; i++) seq[i] = (i * 5 + 3) % N_X; /* product 6: a permutation */
    for (int m = 0; m < N_PROD; m++) {
        size_t rb = lp_type_row_bytes(type[m], N_IN), ny = (size_t)(n_out[m] * (n_tok[m] + 1));
        float row[N_IN];
        w[m] = malloc(rb * (size_t)n_out[m]);
        y1[m] = malloc(sizeof(float) * ny);
        yg[m] = malloc(sizeof(float) * ny);
        for (int64_t o = 0; o < n_out[m]; o++) {
            for (int i = 0; i < N_IN; i++) row[i] = lp_check_frand(&rng);
            lp_quant_row(type[m], row, w[m] + (size_t)o * rb, N_IN);
        }
        const int32_t *r = m == 6 ? seq : rows[m];
        for (int64_t t = 0; t < n_tok[m]; t++)
            memcpy(xg + t * N_IN, x + (int64_t)r[t] * N_IN, sizeof(float) * N_IN);
        lp_matmul_t one = {.type = type[m], .w = w[m], .n_in = N_IN, .n_out = n_out[m], .x = xg,
                           .x_stride = N_IN, .n_tok = n_tok[m], .y = y1[m], .y_stride = n_out[m]};
        CHECK_RC(lp_matmul(pool, &one, exact), 0);
        mm[m] = one;
        mm[m].x = x;
        mm[m].x_rows = r;
        mm[m].y = yg[m];
    }
    CHECK_RC(lp_matmul_grouped(pool, mm, N_PROD, exact), 0);
    for (int m = 0; m < N_PROD; m++) {
        CHECK(!memcmp(y1[m], yg[m], sizeof(float) * (size_t)(n_out[m] * n_tok[m])),
              "grouped %s (product %d, %lld tokens, %s %s): differs from lp_matmul on the rows",
              lp_type_name(type[m]), m, (long long)n_tok[m], exact ? "exact" : "fast",
              lp_matmul_isa());
        free(w[m]);
        free(y1[m]);
        free(yg[m]);
    }
}

static void test_check(void)
{
    float x[256], y[4];
    uint8_t w[1024] = {0};
    lp_matmul_t mm = {.type = LP_TYPE_Q4_K, .w = w, .n_in = 256, .n_out = 4,
                      .x = x, .x_stride = 256, .n_tok = 1, .y = y, .y_stride = 4};
    CHECK(lp_matmul_check(&mm) == 0, "valid call");
    mm.n_in = 100;
    CHECK(lp_matmul_check(&mm) == LP_ERR(EINVAL) && strstr(lp_error_msg(), "n_in"),
          "n_in not whole blocks: %s", lp_error_msg());
    mm.n_in = 256;
    mm.type = LP_TYPE_Q2_K;
    CHECK(lp_matmul_check(&mm) == LP_ERR(EINVAL) && strstr(lp_error_msg(), "Q2_K"),
          "unsupported type: %s", lp_error_msg());
    mm.type = LP_TYPE_Q4_K;
    mm.n_tok = 2;
    mm.x_stride = 10;
    CHECK(lp_matmul_check(&mm) == LP_ERR(EINVAL) && strstr(lp_error_msg(), "x_stride"),
          "short stride: %s", lp_error_msg());
}

/* The failure test asks for more scratch than any address space holds;
 * under AddressSanitizer that must come back as NULL, as from malloc,
 * rather than end the process. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

/* Scratch that cannot be allocated (rows of 2^50 elements) is LP_ERR(ENOMEM)
 * on every path (exact, decode, prefill), with and without a pool, and y is
 * left alone.  The weights and activations are never read: the scratch is
 * sized before any row is touched. */
static void test_no_memory(lp_threadpool_t *pool)
{
    float x[64] = {0}, y[8];
    uint8_t w[64] = {0};
    const struct {
        uint32_t type;
        int64_t n_tok;
        bool exact;
    } cases[] = {{LP_TYPE_F32, 1, true}, {LP_TYPE_Q8_0, 1, false}, {LP_TYPE_Q8_0, 8, false},
                 {LP_TYPE_Q4_K, 8, false}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int k = 0; k < 8; k++) y[k] = NAN;
        lp_matmul_t mm = {.type = cases[i].type, .w = w, .n_in = (int64_t)1 << 50, .n_out = 1,
                          .x = x, .x_stride = (int64_t)1 << 50, .n_tok = cases[i].n_tok,
                          .y = y, .y_stride = 1};
        CHECK(lp_matmul_check(&mm) == 0, "check: %s", lp_error_msg());
        CHECK_RC(lp_matmul(pool, &mm, cases[i].exact), LP_ERR(ENOMEM));
        CHECK(strstr(lp_error_msg(), "out of memory") != NULL, "%s", lp_error_msg());
        CHECK_RC(lp_matmul_multi(pool, &mm, 1, cases[i].exact), LP_ERR(ENOMEM));
        for (int k = 0; k < 8; k++)
            CHECK(isnan(y[k]), "%s %s: y written after a failed allocation",
                  lp_type_name(cases[i].type), cases[i].exact ? "exact" : "fast");
    }
}

int main(void)
{
    test_check();
    lp_threadpool_t *pools[3] = {NULL, lp_threadpool_new(1), lp_threadpool_new(3)};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int p = 0; p < 3; p++) run_case(pools[p], types[k], shapes[s], true);
    for (int p = 0; p < 3; p++) test_grouped(pools[p], true);
    /* the fast path on every instruction set this CPU runs */
    const char *isas[] = {"scalar", "avx2", "avx512", "vnni"};
    for (int i = 0; i < 4; i++) {
        if (!lp_matmul_isa_supported(isas[i])) continue;
        CHECK(lp_matmul_set_isa(isas[i]) == 0 && !strcmp(lp_matmul_isa(), isas[i]),
              "set_isa %s: %s", isas[i], lp_error_msg());
        for (size_t k = 0; k < sizeof types / sizeof types[0]; k++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                for (int p = 0; p < 3; p++) run_case(pools[p], types[k], shapes[s], false);
        for (int p = 0; p < 3; p++) test_multi(pools[p]);
        for (int p = 0; p < 3; p++) test_grouped(pools[p], false);
        for (int p = 0; p < 3; p++) test_no_memory(pools[p]);
        for (int p = 0; p < 3; p++) test_pack(pools[p], isas[i]);
    }
    CHECK(lp_matmul_set_isa("sse9") == LP_ERR(EINVAL) && strstr(lp_error_msg(), "sse9"),
          "unknown instruction set: %s", lp_error_msg());
    CHECK(lp_matmul_set_isa("auto") == 0, "auto");
    lp_threadpool_destroy(&pools[1]);
    lp_threadpool_destroy(&pools[2]);
    return CHECK_DONE();
}
