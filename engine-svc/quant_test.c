/* quant_test.c - dequantization of hand-built blocks, half/bfloat16
 * conversion, and quantize -> dequantize round trips. */
#include "quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "../tests/check.h"

/* Compare a dequantized row with hand-computed values (all of these are
 * exactly representable, so the comparison is exact). */
static void expect_row(const char *what, const float *got, const float *want, int n)
{
    for (int i = 0; i < n; i++)
        CHECK(got[i] == want[i], "%s: element %d is %g, expected %g", what, i, got[i], want[i]);
}

/* Half-precision constants used below. */
#define H_0_125 0x3000 /* 0.125 */
#define H_0_25 0x3400  /* 0.25 */
#define H_0_5 0x3800   /* 0.5 */
#define H_1 0x3c00     /* 1.0 */
#define H_M1 0xbc00    /* -1.0 */

/* ---- half / bfloat16 ---------------------------------------------------- */

static void test_fp16(void)
{
    /* fp16 -> f32: sign | 5-bit exponent (bias 15) | 10-bit mantissa. */
    CHECK(lp_fp16_to_f32(0x3c00) == 1.0f, "0x3c00");
    CHECK(lp_fp16_to_f32(0xc000) == -2.0f, "0xc000");          /* exp 16, sign */
    CHECK(lp_fp16_to_f32(0x3555) == 0x1.554p-2f, "0x3555");    /* 1.0101010101b * 2^-2 */
    CHECK(lp_fp16_to_f32(0x7bff) == 65504.0f, "max half");     /* (2 - 2^-10) * 2^15 */
    CHECK(lp_fp16_to_f32(0x0400) == 0x1p-14f, "min normal");
    CHECK(lp_fp16_to_f32(0x0001) == 0x1p-24f, "min subnormal"); /* 1 * 2^-24 */
    CHECK(lp_fp16_to_f32(0x03ff) == 1023 * 0x1p-24f, "max subnormal");
    CHECK(lp_fp16_to_f32(0x8001) == -0x1p-24f, "negative subnormal");
    float nz = lp_fp16_to_f32(0x8000);
    CHECK(nz == 0 && signbit(nz), "negative zero");
    CHECK(isinf(lp_fp16_to_f32(0x7c00)) && lp_fp16_to_f32(0x7c00) > 0, "+inf");
    CHECK(isinf(lp_fp16_to_f32(0xfc00)) && lp_fp16_to_f32(0xfc00) < 0, "-inf");
    CHECK(isnan(lp_fp16_to_f32(0x7e00)), "nan");
    CHECK(isnan(lp_fp16_to_f32(0x7c01)), "signalling nan");

    /* f32 -> fp16, round to nearest even. */
    CHECK(lp_f32_to_fp16(1.0f) == 0x3c00, "1.0");
    CHECK(lp_f32_to_fp16(-2.0f) == 0xc000, "-2.0");
    CHECK(lp_f32_to_fp16(65504.0f) == 0x7bff, "65504");
    CHECK(lp_f32_to_fp16(65519.0f) == 0x7bff, "65519 rounds down");
    CHECK(lp_f32_to_fp16(65520.0f) == 0x7c00, "65520 overflows to inf");
    CHECK(lp_f32_to_fp16(1e10f) == 0x7c00, "1e10 -> inf");
    CHECK(lp_f32_to_fp16(1.0f + 0x1p-11f) == 0x3c00, "tie 1+2^-11 -> even 1.0");
    CHECK(lp_f32_to_fp16(1.0f + 3 * 0x1p-11f) == 0x3c02, "tie 1+3*2^-11 -> even 0x3c02");
    CHECK(lp_f32_to_fp16(1.0f + 0x1p-11f + 0x1p-20f) == 0x3c01, "above the tie rounds up");
    CHECK(lp_f32_to_fp16(0x1p-24f) == 0x0001, "2^-24 -> min subnormal");
    CHECK(lp_f32_to_fp16(0x1p-25f) == 0x0000, "2^-25: tie -> even 0");
    CHECK(lp_f32_to_fp16(3 * 0x1p-25f) == 0x0002, "1.5 * 2^-24: tie -> even 2");
    CHECK(lp_f32_to_fp16(1023 * 0x1p-24f) == 0x03ff, "max subnormal");
    CHECK(lp_f32_to_fp16(-0x1p-24f) == 0x8001, "negative subnormal");
    CHECK(lp_f32_to_fp16(1e-10f) == 0x0000, "underflow to 0");
    CHECK(lp_f32_to_fp16(-0.0f) == 0x8000, "-0");
    CHECK(lp_f32_to_fp16(INFINITY) == 0x7c00, "+inf");
    CHECK(lp_f32_to_fp16(-INFINITY) == 0xfc00, "-inf");
    uint16_t hn = lp_f32_to_fp16(NAN);
    CHECK((hn & 0x7c00) == 0x7c00 && (hn & 0x3ff) != 0, "nan stays nan: %04x", hn);
}

static void test_bf16(void)
{
    /* bf16 is the top half of a float. */
    CHECK(lp_bf16_to_f32(0x3f80) == 1.0f, "0x3f80");
    CHECK(lp_bf16_to_f32(0xc040) == -3.0f, "0xc040"); /* -1.5 * 2 */
    CHECK(lp_bf16_to_f32(0x0001) == 0x1p-133f, "min subnormal"); /* 2^-126 * 2^-7 */
    CHECK(isinf(lp_bf16_to_f32(0x7f80)), "inf");
    CHECK(isnan(lp_bf16_to_f32(0x7fc0)), "nan");
    CHECK(lp_f32_to_bf16(1.0f) == 0x3f80, "1.0");
    CHECK(lp_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80, "tie -> even");
    CHECK(lp_f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82, "tie -> even (up)");
    CHECK(lp_f32_to_bf16(0x1p-133f) == 0x0001, "subnormal");
    CHECK(lp_f32_to_bf16(-INFINITY) == 0xff80, "-inf");
    uint16_t bn = lp_f32_to_bf16(NAN);
    CHECK((bn & 0x7f80) == 0x7f80 && (bn & 0x7f) != 0, "nan stays nan: %04x", bn);
    /* A float NaN whose payload is only in the low 16 bits must not become inf. */
    uint32_t low_nan = 0x7f800001u;
    float f;
    memcpy(&f, &low_nan, 4);
    CHECK(isnan(lp_bf16_to_f32(lp_f32_to_bf16(f))), "low-payload nan");
}

/* ---- hand-built blocks -------------------------------------------------- */

static void test_float_rows(void)
{
    float y[4];
    const float f[4] = {1.5f, -2.0f, 0.0f, 3.25f};
    lp_dequant_row(LP_TYPE_F32, f, y, 4);
    expect_row("F32", y, f, 4);
    const uint16_t h[4] = {0x3e00, 0xc000, 0x0001, 0x4a80}; /* 1.5, -2, 2^-24, 13 */
    lp_dequant_row(LP_TYPE_F16, h, y, 4);
    expect_row("F16", y, (const float[]){1.5f, -2.0f, 0x1p-24f, 13.0f}, 4);
    const uint16_t b[4] = {0x3fc0, 0xc000, 0x0001, 0x4150}; /* 1.5, -2, 2^-133, 13 */
    lp_dequant_row(LP_TYPE_BF16, b, y, 4);
    expect_row("BF16", y, (const float[]){1.5f, -2.0f, 0x1p-133f, 13.0f}, 4);
}

static void test_q4_0(void)
{
    /* d = 0.5; qs[j] = j | (15-j) << 4.  Element j is the low nibble,
     * element j+16 the high one, both minus 8: y[j] = (j-8)*0.5,
     * y[j+16] = (15-j-8)*0.5.  E.g. qs[3] = 0xc3: y[3] = (3-8)*0.5 = -2.5,
     * y[19] = (12-8)*0.5 = 2. */
    lp_block_q4_0_t b[2] = {{.d = H_0_5}, {.d = H_M1}};
    float want[64], y[64];
    for (int j = 0; j < 16; j++) {
        b[0].qs[j] = (uint8_t)(j | (15 - j) << 4);
        want[j] = (float)(j - 8) * 0.5f;
        want[j + 16] = (float)(7 - j) * 0.5f;
        /* second block: d = -1, all nibbles 0xf: (15-8)*-1 = -7 */
        b[1].qs[j] = 0xff;
        want[32 + j] = want[48 + j] = -7.0f;
    }
    CHECK(want[3] == -2.5f && want[19] == 2.0f, "worked example");
    lp_dequant_row(LP_TYPE_Q4_0, b, y, 64);
    expect_row("Q4_0", y, want, 64);
}

static void test_q4_1(void)
{
    /* d = 0.5, m = -1: y = q*0.5 - 1.  qs[j] = j | (15-j) << 4, so
     * y[0] = -1, y[3] = 3*0.5 - 1 = 0.5, y[16] = 15*0.5 - 1 = 6.5. */
    lp_block_q4_1_t b = {.d = H_0_5, .m = H_M1};
    float want[32], y[32];
    for (int j = 0; j < 16; j++) {
        b.qs[j] = (uint8_t)(j | (15 - j) << 4);
        want[j] = (float)j * 0.5f - 1.0f;
        want[j + 16] = (float)(15 - j) * 0.5f - 1.0f;
    }
    CHECK(want[0] == -1.0f && want[3] == 0.5f && want[16] == 6.5f, "worked example");
    lp_dequant_row(LP_TYPE_Q4_1, &b, y, 32);
    expect_row("Q4_1", y, want, 32);
}

static void test_q5_0(void)
{
    /* d = 0.25; qh = 0x00010002 (bytes 02 00 01 00): bit 1 gives element 1
     * its fifth bit, bit 16 gives element 16 its fifth bit.  qs[0] = 0x50,
     * qs[1] = 0x07, the rest 0.  y = (q - 16) * 0.25:
     *   element 0:  low nibble 0, no bit      -> (0-16)*0.25 = -4
     *   element 16: high nibble 5, bit 16 set -> (21-16)*0.25 = 1.25
     *   element 1:  low nibble 7, bit 1 set   -> (23-16)*0.25 = 1.75
     *   element 17: high nibble 0, no bit     -> -4
     *   all others: -4 */
    lp_block_q5_0_t b = {.d = H_0_25, .qh = {0x02, 0x00, 0x01, 0x00}};
    b.qs[0] = 0x50;
    b.qs[1] = 0x07;
    float want[32], y[32];
    for (int j = 0; j < 32; j++) want[j] = -4.0f;
    want[16] = 1.25f;
    want[1] = 1.75f;
    lp_dequant_row(LP_TYPE_Q5_0, &b, y, 32);
    expect_row("Q5_0", y, want, 32);
}

static void test_q5_1(void)
{
    /* d = 0.5, m = 1; qh bytes 01 00 00 80: bits 0 and 31 -> elements 0
     * and 31 get +16.  qs[j] = 0x21 (low 1, high 2).  y = q*0.5 + 1:
     *   element 0:      (1+16)*0.5 + 1 = 9.5
     *   elements 1-15:  1*0.5 + 1 = 1.5
     *   elements 16-30: 2*0.5 + 1 = 2
     *   element 31:     (2+16)*0.5 + 1 = 10 */
    lp_block_q5_1_t b = {.d = H_0_5, .m = H_1, .qh = {0x01, 0x00, 0x00, 0x80}};
    memset(b.qs, 0x21, sizeof b.qs);
    float want[32], y[32];
    for (int j = 0; j < 16; j++) {
        want[j] = 1.5f;
        want[j + 16] = 2.0f;
    }
    want[0] = 9.5f;
    want[31] = 10.0f;
    lp_dequant_row(LP_TYPE_Q5_1, &b, y, 32);
    expect_row("Q5_1", y, want, 32);
}

static void test_q8_0(void)
{
    /* d = 0.125; qs[j] = j - 16, except qs[0] = -128 and qs[31] = 127:
     * y[j] = (j-16)*0.125, y[0] = -16, y[31] = 15.875. */
    lp_block_q8_0_t b = {.d = H_0_125};
    float want[32], y[32];
    for (int j = 0; j < 32; j++) {
        b.qs[j] = (int8_t)(j - 16);
        want[j] = (float)(j - 16) * 0.125f;
    }
    b.qs[0] = -128;
    want[0] = -16.0f;
    b.qs[31] = 127;
    want[31] = 15.875f;
    lp_dequant_row(LP_TYPE_Q8_0, &b, y, 32);
    expect_row("Q8_0", y, want, 32);
}

/* Sub-block scales and mins for the K-quant tests, and their 12-byte
 * packing: for j < 4, scales[j] = sc[j] | (sc[j+4] >> 4) << 6 and
 * scales[j+4] = m[j] | (m[j+4] >> 4) << 6; scales[8+j] = (sc[j+4] & 15) |
 * (m[j+4] & 15) << 4.
 *   sc = 1 2 3 4 17 33 5 63      m = 0 1 2 3 20 4 48 63
 *   scales[0] = 1 | 1<<6 = 0x41   scales[4] = 0 | 1<<6 = 0x40
 *   scales[1] = 2 | 2<<6 = 0x82   scales[5] = 1 | 0<<6 = 0x01
 *   scales[2] = 3 | 0<<6 = 0x03   scales[6] = 2 | 3<<6 = 0xc2
 *   scales[3] = 4 | 3<<6 = 0xc4   scales[7] = 3 | 3<<6 = 0xc3
 *   scales[8] = 1 | 4<<4 = 0x41   scales[9] = 1 | 4<<4 = 0x41
 *   scales[10] = 5 | 0<<4 = 0x05  scales[11] = 15 | 15<<4 = 0xff */
static const uint8_t k_sc[8] = {1, 2, 3, 4, 17, 33, 5, 63};
static const uint8_t k_m[8] = {0, 1, 2, 3, 20, 4, 48, 63};
static const uint8_t k_scales[12] = {0x41, 0x82, 0x03, 0xc4, 0x40, 0x01, 0xc2, 0xc3,
                                     0x41, 0x41, 0x05, 0xff};

static void test_k_scales(void)
{
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        lp_k_scale_min(j, k_scales, &sc, &m);
        CHECK(sc == k_sc[j] && m == k_m[j], "sub-block %d: scale %u min %u, expected %u %u",
              j, sc, m, k_sc[j], k_m[j]);
    }
}

static void test_q4_k(void)
{
    /* d = 1, dmin = 0.5; every qs byte 0x5a (low nibble 10 for the even
     * sub-block of each 64-element chunk, high nibble 5 for the odd one),
     * y = sc*q - 0.5*m per 32-element sub-block:
     *   sb0: 1*10 - 0     = 10      sb4: 17*10 - 10  = 160
     *   sb1: 2*5  - 0.5   = 9.5     sb5: 33*5  - 2   = 163
     *   sb2: 3*10 - 1     = 29      sb6: 5*10  - 24  = 26
     *   sb3: 4*5  - 1.5   = 18.5    sb7: 63*5  - 31.5 = 283.5
     * qs[0] = 0x0f instead: element 0 = 1*15 - 0 = 15, element 32 (high
     * nibble 0, sb1) = 0 - 0.5 = -0.5. */
    static const float sb[8] = {10, 9.5f, 29, 18.5f, 160, 163, 26, 283.5f};
    lp_block_q4_k_t b = {.d = H_1, .dmin = H_0_5};
    memcpy(b.scales, k_scales, 12);
    memset(b.qs, 0x5a, sizeof b.qs);
    b.qs[0] = 0x0f;
    float want[256], y[256];
    for (int i = 0; i < 256; i++) want[i] = sb[i / 32];
    want[0] = 15.0f;
    want[32] = -0.5f;
    lp_dequant_row(LP_TYPE_Q4_K, &b, y, 256);
    expect_row("Q4_K", y, want, 256);
}

static void test_q5_k(void)
{
    /* As Q4_K (qs all 0x5a, same scales) plus fifth bits: element 64c+l
     * takes bit 2c of qh[l], element 64c+32+l bit 2c+1.  qh[0] = 0x01
     * -> element 0: (10+16)*1 - 0 = 26; qh[1] = 0x80 (bit 7: c = 3, odd)
     * -> element 3*64+32+1 = 225 (sb7): (5+16)*63 - 31.5 = 1291.5. */
    static const float sb[8] = {10, 9.5f, 29, 18.5f, 160, 163, 26, 283.5f};
    lp_block_q5_k_t b = {.d = H_1, .dmin = H_0_5};
    memcpy(b.scales, k_scales, 12);
    memset(b.qs, 0x5a, sizeof b.qs);
    b.qh[0] = 0x01;
    b.qh[1] = 0x80;
    float want[256], y[256];
    for (int i = 0; i < 256; i++) want[i] = sb[i / 32];
    want[0] = 26.0f;
    want[225] = 1291.5f;
    lp_dequant_row(LP_TYPE_Q5_K, &b, y, 256);
    expect_row("Q5_K", y, want, 256);
}

static void test_q6_k(void)
{
    /* d = 0.5; scales[i] = i+1 for even i, -(i+1) for odd i; element e
     * belongs to sub-block e/16.  With ql = qh = 0 every q is 0 - 32, so
     * y = 0.5*sc*(-32) = -16*sc (element 16, sc = -2: 32).  Exceptions:
     *   ql[0] = 0x21, qh[0] = 0xe4 (bits 00 01 10 11 from the bottom):
     *     element 0  (low nibble 1, bits 0-1 = 0):  q = 1-32 = -31,  sc 1:  -15.5
     *     element 32 (ql[32] low 0, bits 2-3 = 1):  q = 16-32 = -16, sc 3:  -24
     *     element 64 (high nibble 2, bits 4-5 = 2): q = 34-32 = 2,   sc 5:  5
     *     element 96 (ql[32] high 0, bits 6-7 = 3): q = 48-32 = 16,  sc 7:  56
     *   second half (ql + 64, qh + 32), l = 1: ql[97] = 0xf7, qh[33] = 0xff:
     *     element 129 (ql[65] low 0 | 3<<4):  q = 16, sb 8,  sc 9:  72
     *     element 161 (ql[97] low 7 | 3<<4):  q = 23, sb 10, sc 11: 126.5
     *     element 193 (ql[65] high 0 | 3<<4): q = 16, sb 12, sc 13: 104
     *     element 225 (ql[97] high 15 | 3<<4): q = 31, sb 14, sc 15: 232.5 */
    lp_block_q6_k_t b;
    memset(&b, 0, sizeof b);
    b.d = H_0_5;
    for (int i = 0; i < 16; i++) b.scales[i] = (int8_t)(i % 2 ? -(i + 1) : i + 1);
    b.ql[0] = 0x21;
    b.qh[0] = 0xe4;
    b.ql[97] = 0xf7;
    b.qh[33] = 0xff;
    float want[256], y[256];
    for (int i = 0; i < 256; i++) want[i] = -16.0f * (float)b.scales[i / 16];
    CHECK(want[16] == 32.0f, "worked example");
    want[0] = -15.5f;
    want[32] = -24.0f;
    want[64] = 5.0f;
    want[96] = 56.0f;
    want[129] = 72.0f;
    want[161] = 126.5f;
    want[193] = 104.0f;
    want[225] = 232.5f;
    lp_dequant_row(LP_TYPE_Q6_K, &b, y, 256);
    expect_row("Q6_K", y, want, 256);
}

/* ---- round trips -------------------------------------------------------- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

/* Bounds for data uniform in [-1, 1]: the largest error is about one
 * quantization step (values clamped at the top level) and the RMS error
 * step/sqrt(12); see the arithmetic per type. */
static const struct {
    uint32_t type;
    double max_err, rms_rel;
} trip[] = {
    {LP_TYPE_F32, 0, 0},
    {LP_TYPE_F16, 0x1p-11, 0x1p-11},      /* half ulp of values < 1 */
    {LP_TYPE_BF16, 0x1p-8, 0x1p-8},
    {LP_TYPE_Q8_0, 0.0045, 0.006},        /* step 1/127: half a step + fp16 d */
    {LP_TYPE_Q4_0, 0.126, 0.08},          /* step 1/8; +max clamps to 15: a full step */
    {LP_TYPE_Q4_1, 0.07, 0.08},           /* step 2/15, half of it */
    {LP_TYPE_Q5_0, 0.0626, 0.04},         /* step 1/16, clamped top: a full step */
    {LP_TYPE_Q5_1, 0.035, 0.04},          /* step 2/31, half of it */
    {LP_TYPE_Q4_K, 0.09, 0.09},           /* step <= 2/15 + 1/63, min off by dmin/2 */
    {LP_TYPE_Q5_K, 0.05, 0.05},           /* step <= 2/31 + 1/63, min off by dmin/2 */
    {LP_TYPE_Q6_K, 0.033, 0.02},          /* step 1/32 (+ scale rounding), clamp at 31 */
};

static void test_round_trip(void)
{
    enum { N = 4096 };
    static float x[N], y[N];
    static uint8_t q[N * 4];
    for (size_t k = 0; k < sizeof trip / sizeof trip[0]; k++) {
        uint32_t type = trip[k].type;
        for (int i = 0; i < N; i++) x[i] = lp_check_frand(&rng);
        /* a block of zeros and a constant block must survive too */
        for (int i = 256; i < 512; i++) x[i] = 0;
        for (int i = 512; i < 768; i++) x[i] = 0.75f;
        CHECK(lp_quant_row(type, x, q, N) == 0, "%s: quantize failed", lp_type_name(type));
        lp_dequant_row(type, q, y, N);
        double max_err = 0, se = 0, sx = 0;
        for (int i = 0; i < N; i++) {
            double e = fabs((double)y[i] - x[i]);
            CHECK(isfinite(y[i]), "%s: element %d is not finite", lp_type_name(type), i);
            if (e > max_err) max_err = e;
            se += e * e;
            sx += (double)x[i] * x[i];
        }
        for (int i = 256; i < 512; i++)
            CHECK(y[i] == 0, "%s: zero block element %d became %g", lp_type_name(type), i, y[i]);
        double rms_rel = sqrt(se / sx);
        CHECK(max_err <= trip[k].max_err, "%s: max error %g > %g", lp_type_name(type), max_err,
              trip[k].max_err);
        CHECK(rms_rel <= trip[k].rms_rel, "%s: rms error %g > %g", lp_type_name(type), rms_rel,
              trip[k].rms_rel);
    }
}

static void test_quant_errors(void)
{
    float x[64] = {0};
    uint8_t q[256];
    CHECK(lp_quant_row(LP_TYPE_Q2_K, x, q, 256) == LP_ERR(EINVAL), "Q2_K is unsupported");
    CHECK(strstr(lp_error_msg(), "Q2_K"), "message names the type: %s", lp_error_msg());
    CHECK(lp_quant_row(LP_TYPE_Q4_0, x, q, 33) == LP_ERR(EINVAL), "33 is not whole blocks");
    CHECK(strstr(lp_error_msg(), "33"), "message names the length: %s", lp_error_msg());
    CHECK(lp_quant_row(999, x, q, 32) == LP_ERR(EINVAL), "unknown type");
    CHECK(!lp_quant_supported(LP_TYPE_Q8_K) && lp_quant_supported(LP_TYPE_Q6_K), "supported");
}

int main(void)
{
    test_fp16();
    test_bf16();
    test_float_rows();
    test_q4_0();
    test_q4_1();
    test_q5_0();
    test_q5_1();
    test_q8_0();
    test_k_scales();
    test_q4_k();
    test_q5_k();
    test_q6_k();
    test_round_trip();
    test_quant_errors();
    return CHECK_DONE();
}
