/* kern-scalar.c - the fast path in plain C: activation quantization and
 * integer dot products per weight type.  The reference that every SIMD
 * kernel is tested against, and the path on CPUs without AVX2. */
#include <math.h>
#include <string.h>

#include "kern.h"
#include "quant.h"

enum lp__act lp__act_of(uint32_t type)
{
    switch (type) {
    case LP_TYPE_Q4_0: case LP_TYPE_Q4_1: case LP_TYPE_Q5_0: case LP_TYPE_Q5_1:
    case LP_TYPE_Q8_0: case LP_TYPE_MXFP4:
        return LP_ACT_Q8A;
    case LP_TYPE_Q4_K: case LP_TYPE_Q5_K: case LP_TYPE_Q6_K:
        return LP_ACT_Q8K;
    default:
        return LP_ACT_F32;
    }
}

/* ---- activation quantization ------------------------------------------ */

static float fp16_round(float f) { return lp_fp16_to_f32(lp_f32_to_fp16(f)); }

void lp__quant_q8a_scalar(const float *x, void *xq, int64_t n)
{
    lp__q8a_t *b = xq;
    for (int64_t i = 0; i < n / LP_QK; i++, b++, x += LP_QK) {
        float amax = 0;
        for (int j = 0; j < LP_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.0f;
        float id = amax != 0 ? 127.0f / amax : 0.0f;
        int sum = 0;
        for (int j = 0; j < LP_QK; j++) {
            int q = (int)nearbyintf(x[j] * id);
            b->qs[j] = (int8_t)q;
            sum += q;
        }
        b->d = fp16_round(d);
        b->sum = (int16_t)sum;
        b->fsum = (float)sum;
        b->pad = 0;
        b->s = lp_f32_to_fp16(d * (float)sum);
    }
}

void lp__quant_q8k_scalar(const float *x, void *xq, int64_t n)
{
    lp__q8k_t *b = xq;
    for (int64_t i = 0; i < n / LP_QK_K; i++, b++, x += LP_QK_K) {
        float amax = 0, max = 0;
        for (int j = 0; j < LP_QK_K; j++) {
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        if (amax == 0) {
            memset(b, 0, sizeof *b);
            continue;
        }
        float iscale = -127.0f / max;
        for (int j = 0; j < LP_QK_K; j++) {
            int q = (int)nearbyintf(iscale * x[j]);
            b->qs[j] = (int8_t)(q < 127 ? q : 127);
        }
        for (int j = 0; j < LP_QK_K / 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += b->qs[16 * j + l];
            b->bsums[j] = (int16_t)s;
            b->fbsums[j] = (float)s;
        }
        for (int j = 0; j < LP_QK_K / 32; j++)
            b->fbsums32[j] = (float)(b->bsums[2 * j] + b->bsums[2 * j + 1]);
        memset(b->pad, 0, sizeof b->pad);
        memset(b->pad2, 0, sizeof b->pad2);
        b->d = 1.0f / iscale;
    }
}

/* ---- dot products: one weight row, one activation row ------------------ */

static float dot_f32(int64_t n, const void *w, const void *x)
{
    const float *a = w, *b = x;
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

static float dot_f16(int64_t n, const void *w, const void *x)
{
    const uint16_t *a = w;
    const float *b = x;
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += lp_fp16_to_f32(a[i]) * b[i];
    return s;
}

static float dot_bf16(int64_t n, const void *w, const void *x)
{
    const uint16_t *a = w;
    const float *b = x;
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += lp_bf16_to_f32(a[i]) * b[i];
    return s;
}

/* Legacy types: sum over blocks of d_w * d_x * sum(q_w * q_x), with the
 * offset of Q4_0/Q5_0 taken out through the activation sum and the min of
 * Q4_1/Q5_1 added through s = d_x * sum. */
static float dot_q4_0(int64_t n, const void *w, const void *x)
{
    const lp_block_q4_0_t *b = w;
    const lp__q8a_t *a = x;
    float s = 0;
    for (int64_t i = 0; i < n / LP_QK; i++) {
        int sumi = 0;
        for (int j = 0; j < 16; j++)
            sumi += (b[i].qs[j] & 0xf) * a[i].qs[j] + (b[i].qs[j] >> 4) * a[i].qs[j + 16];
        s += lp_fp16_to_f32(b[i].d) * a[i].d * (float)(sumi - 8 * a[i].sum);
    }
    return s;
}

static float dot_q4_1(int64_t n, const void *w, const void *x)
{
    const lp_block_q4_1_t *b = w;
    const lp__q8a_t *a = x;
    float s = 0;
    for (int64_t i = 0; i < n / LP_QK; i++) {
        int sumi = 0;
        for (int j = 0; j < 16; j++)
            sumi += (b[i].qs[j] & 0xf) * a[i].qs[j] + (b[i].qs[j] >> 4) * a[i].qs[j + 16];
        s += lp_fp16_to_f32(b[i].d) * a[i].d * (float)sumi +
             lp_fp16_to_f32(b[i].m) * lp_fp16_to_f32(a[i].s);
    }
    return s;
}

static int q5_sumi(const uint8_t *qs, const uint8_t *qhb, const int8_t *xq)
{
    uint32_t qh = (uint32_t)qhb[0] | (uint32_t)qhb[1] << 8 | (uint32_t)qhb[2] << 16 |
                  (uint32_t)qhb[3] << 24;
    int sumi = 0;
    for (int j = 0; j < 16; j++) {
        int q0 = (qs[j] & 0xf) | ((qh >> j) & 1) << 4;
        int q1 = (qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4;
        sumi += q0 * xq[j] + q1 * xq[j + 16];
    }
    return sumi;
}

static float dot_q5_0(int64_t n, const void *w, const void *x)
{
    const lp_block_q5_0_t *b = w;
    const lp__q8a_t *a = x;
    float s = 0;
    for (int64_t i = 0; i < n / LP_QK; i++) {
        int sumi = q5_sumi(b[i].qs, b[i].qh, a[i].qs);
        s += lp_fp16_to_f32(b[i].d) * a[i].d * (float)(sumi - 16 * a[i].sum);
    }
    return s;
}

static float dot_q5_1(int64_t n, const void *w, const void *x)
{
    const lp_block_q5_1_t *b = w;
    const lp__q8a_t *a = x;
    float s = 0;
    for (int64_t i = 0; i < n / LP_QK; i++) {
        int sumi = q5_sumi(b[i].qs, b[i].qh, a[i].qs);
        s += lp_fp16_to_f32(b[i].d) * a[i].d * (float)sumi +
             lp_fp16_to_f32(b[i].m) * lp_fp16_to_f32(a[i].s);
    }
    return s;
}

static float dot_q8_0(int64_t n, const void *w, const void *x)
{
    const lp_block_q8_0_t *b = w;
    const lp__q8a_t *a = x;
    float s = 0;
    for (int64_t i = 0; i < n / LP_QK; i++) {
        int sumi = 0;
        for (int j = 0; j < LP_QK; j++) sumi += b[i].qs[j] * a[i].qs[j];
        s += lp_fp16_to_f32(b[i].d) * a[i].d * (float)sumi;
    }
    return s;
}

/* MXFP4: as llama.cpp's ggml_vec_dot_mxfp4_q8_0, 2^(e-128) * d_x times
 * the integer dot of the table values with the activations. */
static float dot_mxfp4(int64_t n, const void *w, const void *x)
{
    const lp_block_mxfp4_t *b = w;
    const lp__q8a_t *a = x;
    float s = 0;
    for (int64_t i = 0; i < n / LP_QK; i++) {
        int sumi = 0;
        for (int j = 0; j < 16; j++)
            sumi += lp_mxfp4_kvalues[b[i].qs[j] & 0xf] * a[i].qs[j] +
                    lp_mxfp4_kvalues[b[i].qs[j] >> 4] * a[i].qs[j + 16];
        s += lp_e8m0_half(b[i].e) * a[i].d * (float)sumi;
    }
    return s;
}

/* K-quants: per super-block d_x * (d * sum_j sc_j * sum(q * x) -
 * dmin * sum_j m_j * (sum of x over sub-block j)), the activation sums
 * coming from bsums.  Q4_K and Q5_K share the d, dmin, scales prefix;
 * with hbits the block is a Q5_K one and each value gets its fifth bit
 * from qh (bit 2c of qh[l] for the low nibbles of chunk c, 2c+1 for the
 * high ones). */
static float dot_qk_affine(int64_t n, const uint8_t *w, size_t bb, int hbits,
                           const lp__q8k_t *a)
{
    float s = 0;
    for (int64_t i = 0; i < n / LP_QK_K; i++, w += bb) {
        const lp_block_q4_k_t *b = (const lp_block_q4_k_t *)w;
        const lp_block_q5_k_t *b5 = (const lp_block_q5_k_t *)w;
        const uint8_t *qs = hbits ? b5->qs : b->qs;
        int sumi = 0, summ = 0;
        for (int c = 0; c < 4; c++) {
            uint8_t sc0, m0, sc1, m1;
            lp_k_scale_min(2 * c, b->scales, &sc0, &m0);
            lp_k_scale_min(2 * c + 1, b->scales, &sc1, &m1);
            int s0 = 0, s1 = 0;
            for (int l = 0; l < 32; l++) {
                int q0 = qs[32 * c + l] & 0xf, q1 = qs[32 * c + l] >> 4;
                if (hbits) {
                    q0 |= ((b5->qh[l] >> (2 * c)) & 1) << 4;
                    q1 |= ((b5->qh[l] >> (2 * c + 1)) & 1) << 4;
                }
                s0 += q0 * a[i].qs[64 * c + l];
                s1 += q1 * a[i].qs[64 * c + 32 + l];
            }
            sumi += sc0 * s0 + sc1 * s1;
            summ += m0 * (a[i].bsums[4 * c] + a[i].bsums[4 * c + 1]) +
                    m1 * (a[i].bsums[4 * c + 2] + a[i].bsums[4 * c + 3]);
        }
        s += a[i].d * (lp_fp16_to_f32(b->d) * (float)sumi -
                       lp_fp16_to_f32(b->dmin) * (float)summ);
    }
    return s;
}

static float dot_q4_k(int64_t n, const void *w, const void *x)
{
    return dot_qk_affine(n, w, sizeof(lp_block_q4_k_t), 0, x);
}

static float dot_q5_k(int64_t n, const void *w, const void *x)
{
    return dot_qk_affine(n, w, sizeof(lp_block_q5_k_t), 1, x);
}

/* Q6_K: d_w * d_x * sum_j sc_j * (sum(q * x) - 32 * bsum_j), q in 0..63. */
static float dot_q6_k(int64_t n, const void *w, const void *x)
{
    const lp_block_q6_k_t *b = w;
    const lp__q8k_t *a = x;
    float s = 0;
    for (int64_t i = 0; i < n / LP_QK_K; i++) {
        int sub[16] = {0};
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = b[i].ql + 64 * h, *qh = b[i].qh + 32 * h;
            const int8_t *xq = a[i].qs + 128 * h;
            for (int l = 0; l < 32; l++) {
                int q1 = (ql[l] & 0xf) | ((qh[l] >> 0) & 3) << 4;
                int q2 = (ql[l + 32] & 0xf) | ((qh[l] >> 2) & 3) << 4;
                int q3 = (ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4;
                int q4 = (ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4;
                int is = 8 * h + l / 16;
                sub[is] += q1 * xq[l];
                sub[is + 2] += q2 * xq[l + 32];
                sub[is + 4] += q3 * xq[l + 64];
                sub[is + 6] += q4 * xq[l + 96];
            }
        }
        int sumi = 0;
        for (int j = 0; j < 16; j++) sumi += b[i].scales[j] * (sub[j] - 32 * a[i].bsums[j]);
        s += lp_fp16_to_f32(b[i].d) * a[i].d * (float)sumi;
    }
    return s;
}

/* ---- GEMM: every (row, token) pair ------------------------------------- */

#define SCALAR_GEMM(name, dot)                                                          \
    static void name(int64_t n, const void *w, size_t wrb, int64_t nr, const void *xq,  \
                     size_t xrb, int64_t nt, float *y, int64_t ys)                      \
    {                                                                                   \
        for (int64_t r = 0; r < nr; r++)                                                \
            for (int64_t t = 0; t < nt; t++)                                            \
                y[t * ys + r] = dot(n, (const uint8_t *)w + (size_t)r * wrb,            \
                                    (const uint8_t *)xq + (size_t)t * xrb);             \
    }

SCALAR_GEMM(gemm_f32, dot_f32)
SCALAR_GEMM(gemm_f16, dot_f16)
SCALAR_GEMM(gemm_bf16, dot_bf16)
SCALAR_GEMM(gemm_q4_0, dot_q4_0)
SCALAR_GEMM(gemm_q4_1, dot_q4_1)
SCALAR_GEMM(gemm_q5_0, dot_q5_0)
SCALAR_GEMM(gemm_q5_1, dot_q5_1)
SCALAR_GEMM(gemm_q8_0, dot_q8_0)
SCALAR_GEMM(gemm_q4_k, dot_q4_k)
SCALAR_GEMM(gemm_q5_k, dot_q5_k)
SCALAR_GEMM(gemm_q6_k, dot_q6_k)
SCALAR_GEMM(gemm_mxfp4, dot_mxfp4)

/* ---- float vectors ------------------------------------------------------ */

static float vdot_f32(const float *a, const float *b, int64_t n)
{
    float s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) s[k] += a[i + k] * b[i + k];
    for (; i < n; i++) s[0] += a[i] * b[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

static void vswiglu_f32(float *out, const float *g, const float *u, int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static void vaxpy_f32(float *y, float s, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] += s * x[i];
}

const lp__kern_t lp__kern_scalar = {
    .name = "scalar",
    .gemm = {
        [LP_TYPE_F32] = gemm_f32, [LP_TYPE_F16] = gemm_f16, [LP_TYPE_BF16] = gemm_bf16,
        [LP_TYPE_Q4_0] = gemm_q4_0, [LP_TYPE_Q4_1] = gemm_q4_1, [LP_TYPE_Q5_0] = gemm_q5_0,
        [LP_TYPE_Q5_1] = gemm_q5_1, [LP_TYPE_Q8_0] = gemm_q8_0, [LP_TYPE_Q4_K] = gemm_q4_k,
        [LP_TYPE_Q5_K] = gemm_q5_k, [LP_TYPE_Q6_K] = gemm_q6_k, [LP_TYPE_MXFP4] = gemm_mxfp4,
    },
    .quant_q8a = lp__quant_q8a_scalar,
    .quant_q8k = lp__quant_q8k_scalar,
    .dot_f32 = vdot_f32,
    .axpy_f32 = vaxpy_f32,
    .swiglu_f32 = vswiglu_f32,
};
