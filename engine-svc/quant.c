/* quant.c - reference (plain C) dequantization and quantization.
 *
 * Each block type stores small integers q and one or two half-precision
 * factors; a value is d*q (Q4_0, Q5_0, Q8_0: q centred by subtracting 8, 16
 * or nothing), d*q + m (Q4_1, Q5_1), or, for the K-quants, a 256-element
 * super-block whose sub-blocks carry 6- or 8-bit scales of the super-block
 * factors: d*sc*q - dmin*m (Q4_K, Q5_K) or d*sc*(q - 32) (Q6_K). */
#include "quant.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "error.h"

bool lp_quant_supported(uint32_t type)
{
    switch (type) {
    case LP_TYPE_F32: case LP_TYPE_F16: case LP_TYPE_BF16:
    case LP_TYPE_Q4_0: case LP_TYPE_Q4_1: case LP_TYPE_Q5_0: case LP_TYPE_Q5_1:
    case LP_TYPE_Q8_0: case LP_TYPE_Q4_K: case LP_TYPE_Q5_K: case LP_TYPE_Q6_K:
    case LP_TYPE_MXFP4:
        return true;
    default:
        return false;
    }
}

static uint32_t load_u32le(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void store_u32le(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

/* ---- dequantize ------------------------------------------------------- */

/* Legacy blocks: element j (0..15) is the low nibble of qs[j], element
 * j+16 the high nibble; Q5 adds bit j (and j+16) of qh as the fifth bit. */
static void dequant_q4_0(const lp_block_q4_0_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b++, y += LP_QK) {
        float d = lp_fp16_to_f32(b->d);
        for (int j = 0; j < LP_QK / 2; j++) {
            y[j] = (float)((b->qs[j] & 0xf) - 8) * d;
            y[j + 16] = (float)((b->qs[j] >> 4) - 8) * d;
        }
    }
}

static void dequant_q4_1(const lp_block_q4_1_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b++, y += LP_QK) {
        float d = lp_fp16_to_f32(b->d), m = lp_fp16_to_f32(b->m);
        for (int j = 0; j < LP_QK / 2; j++) {
            y[j] = (float)(b->qs[j] & 0xf) * d + m;
            y[j + 16] = (float)(b->qs[j] >> 4) * d + m;
        }
    }
}

static void dequant_q5_0(const lp_block_q5_0_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b++, y += LP_QK) {
        float d = lp_fp16_to_f32(b->d);
        uint32_t qh = load_u32le(b->qh);
        for (int j = 0; j < LP_QK / 2; j++) {
            int h0 = (qh >> j) & 1, h1 = (qh >> (j + 16)) & 1;
            y[j] = (float)(((b->qs[j] & 0xf) | h0 << 4) - 16) * d;
            y[j + 16] = (float)(((b->qs[j] >> 4) | h1 << 4) - 16) * d;
        }
    }
}

static void dequant_q5_1(const lp_block_q5_1_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b++, y += LP_QK) {
        float d = lp_fp16_to_f32(b->d), m = lp_fp16_to_f32(b->m);
        uint32_t qh = load_u32le(b->qh);
        for (int j = 0; j < LP_QK / 2; j++) {
            int h0 = (qh >> j) & 1, h1 = (qh >> (j + 16)) & 1;
            y[j] = (float)((b->qs[j] & 0xf) | h0 << 4) * d + m;
            y[j + 16] = (float)((b->qs[j] >> 4) | h1 << 4) * d + m;
        }
    }
}

const int8_t lp_mxfp4_kvalues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static void dequant_mxfp4(const lp_block_mxfp4_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b++, y += LP_QK) {
        const float d = lp_e8m0_half(b->e);
        for (int j = 0; j < LP_QK / 2; j++) {
            y[j] = (float)lp_mxfp4_kvalues[b->qs[j] & 0xf] * d;
            y[j + 16] = (float)lp_mxfp4_kvalues[b->qs[j] >> 4] * d;
        }
    }
}

static void dequant_q8_0(const lp_block_q8_0_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b++, y += LP_QK) {
        float d = lp_fp16_to_f32(b->d);
        for (int j = 0; j < LP_QK; j++) y[j] = (float)b->qs[j] * d;
    }
}

/* Q4_K: four 64-element chunks; in chunk c, qs[32c+l] holds element 64c+l
 * (low nibble, sub-block 2c) and 64c+32+l (high nibble, sub-block 2c+1). */
static void dequant_q4_k(const lp_block_q4_k_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b++) {
        float d = lp_fp16_to_f32(b->d), dmin = lp_fp16_to_f32(b->dmin);
        const uint8_t *q = b->qs;
        for (int c = 0; c < 4; c++, q += 32, y += 64) {
            uint8_t sc0, m0, sc1, m1;
            lp_k_scale_min(2 * c, b->scales, &sc0, &m0);
            lp_k_scale_min(2 * c + 1, b->scales, &sc1, &m1);
            float d0 = d * sc0, mm0 = dmin * m0, d1 = d * sc1, mm1 = dmin * m1;
            for (int l = 0; l < 32; l++) {
                y[l] = d0 * (float)(q[l] & 0xf) - mm0;
                y[l + 32] = d1 * (float)(q[l] >> 4) - mm1;
            }
        }
    }
}

/* Q5_K: as Q4_K, plus a fifth bit: element 64c+l has bit 2c of qh[l],
 * element 64c+32+l has bit 2c+1. */
static void dequant_q5_k(const lp_block_q5_k_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b++) {
        float d = lp_fp16_to_f32(b->d), dmin = lp_fp16_to_f32(b->dmin);
        const uint8_t *q = b->qs;
        for (int c = 0; c < 4; c++, q += 32, y += 64) {
            uint8_t sc0, m0, sc1, m1;
            lp_k_scale_min(2 * c, b->scales, &sc0, &m0);
            lp_k_scale_min(2 * c + 1, b->scales, &sc1, &m1);
            float d0 = d * sc0, mm0 = dmin * m0, d1 = d * sc1, mm1 = dmin * m1;
            for (int l = 0; l < 32; l++) {
                int h0 = (b->qh[l] >> (2 * c)) & 1, h1 = (b->qh[l] >> (2 * c + 1)) & 1;
                y[l] = d0 * (float)((q[l] & 0xf) | h0 << 4) - mm0;
                y[l + 32] = d1 * (float)((q[l] >> 4) | h1 << 4) - mm1;
            }
        }
    }
}

/* Q6_K: two 128-element halves; in half h, element 128h + 32k + l (k=0..3)
 * takes its low 4 bits from ql[64h + l + 32*(k&1)] (low nibble for k<2,
 * high for k>=2) and its high 2 bits from bits 2k..2k+1 of qh[32h + l].
 * Sub-block of 16 elements e/16 has the signed 8-bit scale scales[e/16]. */
static void dequant_q6_k(const lp_block_q6_k_t *b, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, b++) {
        float d = lp_fp16_to_f32(b->d);
        for (int h = 0; h < 2; h++, y += 128) {
            const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
            const int8_t *sc = b->scales + 8 * h;
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                int q1 = ((ql[l] & 0xf) | ((qh[l] >> 0) & 3) << 4) - 32;
                int q2 = ((ql[l + 32] & 0xf) | ((qh[l] >> 2) & 3) << 4) - 32;
                int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                y[l] = d * (float)sc[is] * (float)q1;
                y[l + 32] = d * (float)sc[is + 2] * (float)q2;
                y[l + 64] = d * (float)sc[is + 4] * (float)q3;
                y[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        }
    }
}

void lp_dequant_row(uint32_t type, const void *src, float *dst, int64_t n)
{
    const lp_type_traits_t *t = lp_type_traits(type);
    assert(t && n % t->block_elems == 0);
    int64_t nb = n / t->block_elems;
    switch (type) {
    case LP_TYPE_F32:
        memcpy(dst, src, (size_t)n * sizeof(float));
        break;
    case LP_TYPE_F16: {
        const uint16_t *h = src;
        for (int64_t i = 0; i < n; i++) dst[i] = lp_fp16_to_f32(h[i]);
        break;
    }
    case LP_TYPE_BF16: {
        const uint16_t *h = src;
        for (int64_t i = 0; i < n; i++) dst[i] = lp_bf16_to_f32(h[i]);
        break;
    }
    case LP_TYPE_Q4_0: dequant_q4_0(src, dst, nb); break;
    case LP_TYPE_Q4_1: dequant_q4_1(src, dst, nb); break;
    case LP_TYPE_Q5_0: dequant_q5_0(src, dst, nb); break;
    case LP_TYPE_Q5_1: dequant_q5_1(src, dst, nb); break;
    case LP_TYPE_Q8_0: dequant_q8_0(src, dst, nb); break;
    case LP_TYPE_MXFP4: dequant_mxfp4(src, dst, nb); break;
    case LP_TYPE_Q4_K: dequant_q4_k(src, dst, nb); break;
    case LP_TYPE_Q5_K: dequant_q5_k(src, dst, nb); break;
    case LP_TYPE_Q6_K: dequant_q6_k(src, dst, nb); break;
    default:
        assert(!"lp_dequant_row: unsupported type");
    }
}

/* ---- quantize --------------------------------------------------------- */

/* The element of largest magnitude, with its sign. */
static float signed_absmax(const float *x, int n)
{
    float amax = 0, max = 0;
    for (int j = 0; j < n; j++) {
        if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); max = x[j]; }
    }
    return max;
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Symmetric legacy blocks: the largest-magnitude value maps to -2^(bits-1). */
static void quant_sym(const float *x, uint16_t *dh, uint8_t *qs, uint8_t *qh, int bits)
{
    int half = 1 << (bits - 1), top = 2 * half - 1;
    float max = signed_absmax(x, LP_QK);
    float d = max / (float)-half;
    *dh = lp_f32_to_fp16(d);
    float dq = lp_fp16_to_f32(*dh);
    float id = dq != 0 ? 1.0f / dq : 0;
    uint32_t h = 0;
    for (int j = 0; j < LP_QK / 2; j++) {
        int q0 = clampi((int)lrintf(x[j] * id) + half, 0, top);
        int q1 = clampi((int)lrintf(x[j + 16] * id) + half, 0, top);
        qs[j] = (uint8_t)((q0 & 0xf) | (q1 & 0xf) << 4);
        h |= (uint32_t)(q0 >> 4) << j | (uint32_t)(q1 >> 4) << (j + 16);
    }
    if (qh) store_u32le(qh, h);
}

/* Asymmetric legacy blocks: min maps to 0, max to 2^bits - 1. */
static void quant_asym(const float *x, uint16_t *dh, uint16_t *mh, uint8_t *qs, uint8_t *qh,
                       int bits)
{
    int top = (1 << bits) - 1;
    float mn = x[0], mx = x[0];
    for (int j = 1; j < LP_QK; j++) {
        mn = fminf(mn, x[j]);
        mx = fmaxf(mx, x[j]);
    }
    *dh = lp_f32_to_fp16((mx - mn) / (float)top);
    *mh = lp_f32_to_fp16(mn);
    float dq = lp_fp16_to_f32(*dh), mq = lp_fp16_to_f32(*mh);
    float id = dq != 0 ? 1.0f / dq : 0;
    uint32_t h = 0;
    for (int j = 0; j < LP_QK / 2; j++) {
        int q0 = clampi((int)lrintf((x[j] - mq) * id), 0, top);
        int q1 = clampi((int)lrintf((x[j + 16] - mq) * id), 0, top);
        qs[j] = (uint8_t)((q0 & 0xf) | (q1 & 0xf) << 4);
        h |= (uint32_t)(q0 >> 4) << j | (uint32_t)(q1 >> 4) << (j + 16);
    }
    if (qh) store_u32le(qh, h);
}

/* llama.cpp's quantize_row_mxfp4_ref: e = floor(log2 amax) - 2 + 127 (the
 * largest value, 6 in E2M1, then lands near amax), each value the nearest
 * table entry, the first of equals. */
static void quant_mxfp4(const float *x, lp_block_mxfp4_t *b)
{
    float amax = 0;
    for (int j = 0; j < LP_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
    b->e = amax > 0 ? (uint8_t)(floorf(log2f(amax)) - 2 + 127) : 0;
    const float d = lp_e8m0_half(b->e);
    uint8_t q[LP_QK];
    for (int j = 0; j < LP_QK; j++) {
        int best = 0;
        float err = fabsf((float)lp_mxfp4_kvalues[0] * d - x[j]);
        for (int k = 1; k < 16; k++) {
            const float e2 = fabsf((float)lp_mxfp4_kvalues[k] * d - x[j]);
            if (e2 < err) {
                best = k;
                err = e2;
            }
        }
        q[j] = (uint8_t)best;
    }
    for (int j = 0; j < LP_QK / 2; j++) b->qs[j] = (uint8_t)(q[j] | q[j + 16] << 4);
}

static void quant_q8_0(const float *x, lp_block_q8_0_t *b)
{
    float amax = fabsf(signed_absmax(x, LP_QK));
    b->d = lp_f32_to_fp16(amax / 127.0f);
    float dq = lp_fp16_to_f32(b->d);
    float id = dq != 0 ? 1.0f / dq : 0;
    for (int j = 0; j < LP_QK; j++) b->qs[j] = (int8_t)clampi((int)lrintf(x[j] * id), -127, 127);
}

/* Q4_K/Q5_K: per 32-element sub-block an affine range [-m, -m + 15*s] (or
 * 31*s) covering the values and 0; s and m are then coded as 6-bit
 * multiples of the super-block factors d = max s / 63, dmin = max m / 63.
 * L receives the 256 quantized levels. */
static void quant_k_affine(const float *x, int top, uint16_t *dh, uint16_t *dminh,
                           uint8_t *scales, uint8_t *L)
{
    float s[8], m[8], smax = 0, mmax = 0;
    for (int j = 0; j < 8; j++) {
        float mn = 0, mx = 0;
        for (int l = 0; l < 32; l++) {
            mn = fminf(mn, x[32 * j + l]);
            mx = fmaxf(mx, x[32 * j + l]);
        }
        s[j] = (mx - mn) / (float)top;
        m[j] = -mn;
        smax = fmaxf(smax, s[j]);
        mmax = fmaxf(mmax, m[j]);
    }
    *dh = lp_f32_to_fp16(smax / 63.0f);
    *dminh = lp_f32_to_fp16(mmax / 63.0f);
    float d = lp_fp16_to_f32(*dh), dmin = lp_fp16_to_f32(*dminh);
    memset(scales, 0, LP_K_SCALE_SIZE);
    for (int j = 0; j < 8; j++) {
        /* Round the scale up so that the range still covers the values. */
        int ls = d > 0 ? clampi((int)ceilf(s[j] / d), 0, 63) : 0;
        int lm = dmin > 0 ? clampi((int)lrintf(m[j] / dmin), 0, 63) : 0;
        if (j < 4) {
            scales[j] = (uint8_t)ls;
            scales[j + 4] = (uint8_t)lm;
        } else {
            scales[j + 4] = (uint8_t)((ls & 0xf) | (lm & 0xf) << 4);
            scales[j - 4] |= (uint8_t)((ls >> 4) << 6);
            scales[j] |= (uint8_t)((lm >> 4) << 6);
        }
        float dl = d * (float)ls, ml = dmin * (float)lm;
        for (int l = 0; l < 32; l++) {
            int q = dl > 0 ? (int)lrintf((x[32 * j + l] + ml) / dl) : 0;
            L[32 * j + l] = (uint8_t)clampi(q, 0, top);
        }
    }
}

static void quant_q4_k(const float *x, lp_block_q4_k_t *b)
{
    uint8_t L[LP_QK_K];
    quant_k_affine(x, 15, &b->d, &b->dmin, b->scales, L);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++)
            b->qs[32 * c + l] = (uint8_t)(L[64 * c + l] | L[64 * c + 32 + l] << 4);
}

static void quant_q5_k(const float *x, lp_block_q5_k_t *b)
{
    uint8_t L[LP_QK_K];
    quant_k_affine(x, 31, &b->d, &b->dmin, b->scales, L);
    memset(b->qh, 0, sizeof b->qh);
    for (int c = 0; c < 4; c++) {
        for (int l = 0; l < 32; l++) {
            uint8_t lo = L[64 * c + l], hi = L[64 * c + 32 + l];
            b->qs[32 * c + l] = (uint8_t)((lo & 0xf) | (hi & 0xf) << 4);
            b->qh[l] |= (uint8_t)((lo >> 4) << (2 * c) | (hi >> 4) << (2 * c + 1));
        }
    }
}

/* Q6_K: per 16-element sub-block a signed scale putting the largest
 * magnitude at -32; the scales are coded as int8 multiples of d. */
static void quant_q6_k(const float *x, lp_block_q6_k_t *b)
{
    float s[16], smax = 0, samax = 0;
    for (int j = 0; j < 16; j++) {
        s[j] = signed_absmax(x + 16 * j, 16) / -32.0f;
        if (fabsf(s[j]) > samax) { samax = fabsf(s[j]); smax = s[j]; }
    }
    b->d = lp_f32_to_fp16(smax / -128.0f);
    float d = lp_fp16_to_f32(b->d);
    uint8_t L[LP_QK_K];
    for (int j = 0; j < 16; j++) {
        int ls = d != 0 ? clampi((int)lrintf(s[j] / d), -128, 127) : 0;
        b->scales[j] = (int8_t)ls;
        float dl = d * (float)ls;
        for (int l = 0; l < 16; l++) {
            int q = dl != 0 ? (int)lrintf(x[16 * j + l] / dl) : 0;
            L[16 * j + l] = (uint8_t)(clampi(q, -32, 31) + 32);
        }
    }
    for (int h = 0; h < 2; h++) {
        const uint8_t *Lh = L + 128 * h;
        uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
        for (int l = 0; l < 32; l++) {
            ql[l] = (uint8_t)((Lh[l] & 0xf) | (Lh[l + 64] & 0xf) << 4);
            ql[l + 32] = (uint8_t)((Lh[l + 32] & 0xf) | (Lh[l + 96] & 0xf) << 4);
            qh[l] = (uint8_t)((Lh[l] >> 4) | (Lh[l + 32] >> 4) << 2 | (Lh[l + 64] >> 4) << 4 |
                              (Lh[l + 96] >> 4) << 6);
        }
    }
}

int lp_quant_row(uint32_t type, const float *src, void *dst, int64_t n)
{
    if (!lp_quant_supported(type))
        return lp_error_set(LP_ERR(EINVAL), "quantize: unsupported type %s (%u)",
                            lp_type_name(type), type);
    const lp_type_traits_t *t = lp_type_traits(type);
    if (n < 0 || n % t->block_elems)
        return lp_error_set(LP_ERR(EINVAL), "quantize: row of %lld elements is not a whole "
                            "number of %s blocks (%u)", (long long)n, t->name, t->block_elems);
    int64_t nb = n / t->block_elems;
    uint8_t *out = dst;
    for (int64_t i = 0; i < nb; i++) {
        const float *x = src + i * t->block_elems;
        void *b = out + i * t->block_bytes;
        switch (type) {
        case LP_TYPE_F32: memcpy(b, x, 4); break;
        case LP_TYPE_F16: { uint16_t h = lp_f32_to_fp16(*x); memcpy(b, &h, 2); break; }
        case LP_TYPE_BF16: { uint16_t h = lp_f32_to_bf16(*x); memcpy(b, &h, 2); break; }
        case LP_TYPE_Q4_0: {
            lp_block_q4_0_t *q = b;
            quant_sym(x, &q->d, q->qs, NULL, 4);
            break;
        }
        case LP_TYPE_Q5_0: {
            lp_block_q5_0_t *q = b;
            quant_sym(x, &q->d, q->qs, q->qh, 5);
            break;
        }
        case LP_TYPE_Q4_1: {
            lp_block_q4_1_t *q = b;
            quant_asym(x, &q->d, &q->m, q->qs, NULL, 4);
            break;
        }
        case LP_TYPE_Q5_1: {
            lp_block_q5_1_t *q = b;
            quant_asym(x, &q->d, &q->m, q->qs, q->qh, 5);
            break;
        }
        case LP_TYPE_Q8_0: quant_q8_0(x, b); break;
        case LP_TYPE_MXFP4: quant_mxfp4(x, b); break;
        case LP_TYPE_Q4_K: quant_q4_k(x, b); break;
        case LP_TYPE_Q5_K: quant_q5_k(x, b); break;
        case LP_TYPE_Q6_K: quant_q6_k(x, b); break;
        }
    }
    return 0;
}
