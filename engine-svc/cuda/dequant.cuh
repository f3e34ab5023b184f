/* dequant.cuh - device decoders of the GGUF block types, shared by the
 * dequantize kernel (dequant.cu) and the matrix-vector kernels (matvec.cu).
 *
 * The layouts are those of quant.h / quant.c; the comments there say which
 * bits make which element.  A block of QK elements and BYTES bytes is
 * decoded in PARTS parts of NV values, so that neighbouring lanes of a warp
 * read neighbouring bytes of one block: part(b, p, v) fills v[0..NV) and
 * elem(p, k) says which element of the block v[k] is.  RUN 4 promises that
 * v comes in runs of four consecutive elements starting at multiples of 4
 * (elem(p, 4j + i) = elem(p, 4j) + i, elem(p, 4j) % 4 = 0), so that the
 * matching activations can be read as float4.
 *
 * Products and sums are written with mul_rn/add_rn/sub_rn (__fmul_rn ...
 * on the device) where quant.c multiplies then adds, so that nvcc does not contract them into a
 * fused multiply-add: the decoded values are then bit-identical to
 * lp_dequant_row's (the gpu test checks that). */
#ifndef LP_CUDA_DEQUANT_CUH
#define LP_CUDA_DEQUANT_CUH

#include <cstdint>

#include <cuda_fp16.h>

extern "C" {
#include "ggml-type.h"
}

/* Host and device: the decoders also compile as host code, so that
 * dequant_test.cu checks them against quant.c on a machine without a GPU. */
#define LP_HD __host__ __device__ __forceinline__
/* #pragma unroll for the device passes only (gcc warns about it). */
#ifdef __CUDA_ARCH__
#define LP_UNROLL _Pragma("unroll")
#else
#define LP_UNROLL
#endif

namespace lp_cuda {

/* Products and sums rounded on their own (no FMA contraction).  Host code
 * is compiled without FMA instructions, as quant.c is. */
LP_HD float mul_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

LP_HD float add_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

LP_HD float sub_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

LP_HD float f16(const uint8_t *p)
{
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half(*reinterpret_cast<const uint16_t *>(p)));
#else
    return lp_fp16_to_f32(*reinterpret_cast<const uint16_t *>(p));
#endif
}

LP_HD float bf16(uint16_t h)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float((uint32_t)h << 16);
#else
    return lp_bf16_to_f32(h);
#endif
}

LP_HD uint32_t u32le(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The 6-bit scale and min of sub-block j of a Q4_K/Q5_K block
 * (lp_k_scale_min). */
LP_HD void k_scale_min(int j, const uint8_t *q, int &sc, int &m)
{
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* ---- float types: one element per "block", or 8 when rows allow 16-byte
 * loads (n_in % 8 == 0, rows 16-byte aligned) -------------------------- */

struct t_f32 {
    static constexpr int QK = 1, BYTES = 4, PARTS = 1, NV = 1, RUN = 1;
    LP_HD static void part(const uint8_t *b, int, float *v) { v[0] = *(const float *)b; }
    LP_HD static int elem(int, int k) { return k; }
};

struct t_f32x8 {
    static constexpr int QK = 8, BYTES = 32, PARTS = 1, NV = 8, RUN = 4;
    LP_HD static void part(const uint8_t *b, int, float *v)
    {
        float4 a = reinterpret_cast<const float4 *>(b)[0], c = reinterpret_cast<const float4 *>(b)[1];
        v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
        v[4] = c.x; v[5] = c.y; v[6] = c.z; v[7] = c.w;
    }
    LP_HD static int elem(int, int k) { return k; }
};

struct t_f16 {
    static constexpr int QK = 1, BYTES = 2, PARTS = 1, NV = 1, RUN = 1;
    LP_HD static void part(const uint8_t *b, int, float *v) { v[0] = f16(b); }
    LP_HD static int elem(int, int k) { return k; }
};

struct t_f16x8 {
    static constexpr int QK = 8, BYTES = 16, PARTS = 1, NV = 8, RUN = 4;
    LP_HD static void part(const uint8_t *b, int, float *v)
    {
        uint4 u = *reinterpret_cast<const uint4 *>(b);
        const uint32_t w[4] = {u.x, u.y, u.z, u.w};
LP_UNROLL
        for (int i = 0; i < 4; i++) {
            v[2 * i] = __half2float(__ushort_as_half((uint16_t)(w[i] & 0xffff)));
            v[2 * i + 1] = __half2float(__ushort_as_half((uint16_t)(w[i] >> 16)));
        }
    }
    LP_HD static int elem(int, int k) { return k; }
};

struct t_bf16 {
    static constexpr int QK = 1, BYTES = 2, PARTS = 1, NV = 1, RUN = 1;
    LP_HD static void part(const uint8_t *b, int, float *v)
    {
        v[0] = bf16(*reinterpret_cast<const uint16_t *>(b));
    }
    LP_HD static int elem(int, int k) { return k; }
};

struct t_bf16x8 {
    static constexpr int QK = 8, BYTES = 16, PARTS = 1, NV = 8, RUN = 4;
    LP_HD static void part(const uint8_t *b, int, float *v)
    {
        uint4 u = *reinterpret_cast<const uint4 *>(b);
        const uint32_t w[4] = {u.x, u.y, u.z, u.w};
LP_UNROLL
        for (int i = 0; i < 4; i++) {
            v[2 * i] = bf16((uint16_t)(w[i] & 0xffff));
            v[2 * i + 1] = bf16((uint16_t)(w[i] >> 16));
        }
    }
    LP_HD static int elem(int, int k) { return k; }
};

/* ---- legacy 32-element blocks: part p holds elements 4p..4p+3 (low
 * nibbles of qs[4p..4p+3]) and 16+4p..16+4p+3 (their high nibbles);
 * Q8_0's part p is elements 8p..8p+7 ---------------------------------- */

LP_HD int legacy_elem(int p, int k) { return k < 4 ? 4 * p + k : 12 + 4 * p + k; }

struct t_q4_0 { /* d, qs[16] */
    static constexpr int QK = 32, BYTES = 18, PARTS = 4, NV = 8, RUN = 4;
    LP_HD static void part(const uint8_t *b, int p, float *v)
    {
        const float d = f16(b);
        const uint8_t *qs = b + 2 + 4 * p;
LP_UNROLL
        for (int k = 0; k < 4; k++) {
            v[k] = (float)((qs[k] & 0xf) - 8) * d;
            v[k + 4] = (float)((qs[k] >> 4) - 8) * d;
        }
    }
    LP_HD static int elem(int p, int k) { return legacy_elem(p, k); }
};

struct t_q4_1 { /* d, m, qs[16] */
    static constexpr int QK = 32, BYTES = 20, PARTS = 4, NV = 8, RUN = 4;
    LP_HD static void part(const uint8_t *b, int p, float *v)
    {
        const float d = f16(b), m = f16(b + 2);
        const uint8_t *qs = b + 4 + 4 * p;
LP_UNROLL
        for (int k = 0; k < 4; k++) {
            v[k] = add_rn(mul_rn((float)(qs[k] & 0xf), d), m);
            v[k + 4] = add_rn(mul_rn((float)(qs[k] >> 4), d), m);
        }
    }
    LP_HD static int elem(int p, int k) { return legacy_elem(p, k); }
};

struct t_q5_0 { /* d, qh[4], qs[16] */
    static constexpr int QK = 32, BYTES = 22, PARTS = 4, NV = 8, RUN = 4;
    LP_HD static void part(const uint8_t *b, int p, float *v)
    {
        const float d = f16(b);
        const uint32_t qh = u32le(b + 2);
        const uint8_t *qs = b + 6 + 4 * p;
LP_UNROLL
        for (int k = 0; k < 4; k++) {
            const int j = 4 * p + k;
            const int h0 = (qh >> j) & 1, h1 = (qh >> (j + 16)) & 1;
            v[k] = (float)(((qs[k] & 0xf) | h0 << 4) - 16) * d;
            v[k + 4] = (float)(((qs[k] >> 4) | h1 << 4) - 16) * d;
        }
    }
    LP_HD static int elem(int p, int k) { return legacy_elem(p, k); }
};

struct t_q5_1 { /* d, m, qh[4], qs[16] */
    static constexpr int QK = 32, BYTES = 24, PARTS = 4, NV = 8, RUN = 4;
    LP_HD static void part(const uint8_t *b, int p, float *v)
    {
        const float d = f16(b), m = f16(b + 2);
        const uint32_t qh = u32le(b + 4);
        const uint8_t *qs = b + 8 + 4 * p;
LP_UNROLL
        for (int k = 0; k < 4; k++) {
            const int j = 4 * p + k;
            const int h0 = (qh >> j) & 1, h1 = (qh >> (j + 16)) & 1;
            v[k] = add_rn(mul_rn((float)((qs[k] & 0xf) | h0 << 4), d), m);
            v[k + 4] = add_rn(mul_rn((float)((qs[k] >> 4) | h1 << 4), d), m);
        }
    }
    LP_HD static int elem(int p, int k) { return legacy_elem(p, k); }
};

struct t_q8_0 { /* d, qs[32] int8 */
    static constexpr int QK = 32, BYTES = 34, PARTS = 4, NV = 8, RUN = 4;
    LP_HD static void part(const uint8_t *b, int p, float *v)
    {
        const float d = f16(b);
        const int8_t *qs = reinterpret_cast<const int8_t *>(b + 2 + 8 * p);
LP_UNROLL
        for (int k = 0; k < 8; k++) v[k] = (float)qs[k] * d;
    }
    LP_HD static int elem(int p, int k) { return 8 * p + k; }
};

/* ---- K-quants: 256-element super-blocks in 16 parts of 16 values ------ */

/* Q4_K/Q5_K part p: chunk c = p/4 of 64 elements, l = 8*(p%4) .. +7;
 * v[0..8) are elements 64c+l (sub-block 2c), v[8..16) 64c+32+l (2c+1). */
LP_HD int k4_elem(int p, int k)
{
    return 64 * (p >> 2) + 8 * (p & 3) + (k < 8 ? k : 32 + k - 8);
}

struct t_q4_k { /* d, dmin, scales[12], qs[128] */
    static constexpr int QK = 256, BYTES = 144, PARTS = 16, NV = 16, RUN = 4;
    LP_HD static void part(const uint8_t *b, int p, float *v)
    {
        const int c = p >> 2, l0 = 8 * (p & 3);
        int sc0, m0, sc1, m1;
        k_scale_min(2 * c, b + 4, sc0, m0);
        k_scale_min(2 * c + 1, b + 4, sc1, m1);
        const float d = f16(b), dmin = f16(b + 2);
        const float d0 = mul_rn(d, (float)sc0), mm0 = mul_rn(dmin, (float)m0);
        const float d1 = mul_rn(d, (float)sc1), mm1 = mul_rn(dmin, (float)m1);
        /* 8-byte aligned: blocks are 144 bytes in 16-byte aligned rows */
        const uint2 q2 = *reinterpret_cast<const uint2 *>(b + 16 + 32 * c + l0);
        const uint32_t qw[2] = {q2.x, q2.y};
LP_UNROLL
        for (int k = 0; k < 8; k++) {
            const uint32_t q = (qw[k >> 2] >> (8 * (k & 3))) & 0xff;
            v[k] = sub_rn(mul_rn(d0, (float)(q & 0xf)), mm0);
            v[k + 8] = sub_rn(mul_rn(d1, (float)(q >> 4)), mm1);
        }
    }
    LP_HD static int elem(int p, int k) { return k4_elem(p, k); }
};

struct t_q5_k { /* d, dmin, scales[12], qh[32], qs[128] */
    static constexpr int QK = 256, BYTES = 176, PARTS = 16, NV = 16, RUN = 4;
    LP_HD static void part(const uint8_t *b, int p, float *v)
    {
        const int c = p >> 2, l0 = 8 * (p & 3);
        int sc0, m0, sc1, m1;
        k_scale_min(2 * c, b + 4, sc0, m0);
        k_scale_min(2 * c + 1, b + 4, sc1, m1);
        const float d = f16(b), dmin = f16(b + 2);
        const float d0 = mul_rn(d, (float)sc0), mm0 = mul_rn(dmin, (float)m0);
        const float d1 = mul_rn(d, (float)sc1), mm1 = mul_rn(dmin, (float)m1);
        const uint8_t *qh = b + 16 + l0, *qs = b + 48 + 32 * c + l0;
LP_UNROLL
        for (int k = 0; k < 8; k++) {
            const int h0 = (qh[k] >> (2 * c)) & 1, h1 = (qh[k] >> (2 * c + 1)) & 1;
            v[k] = sub_rn(mul_rn(d0, (float)((qs[k] & 0xf) | h0 << 4)), mm0);
            v[k + 8] = sub_rn(mul_rn(d1, (float)((qs[k] >> 4) | h1 << 4)), mm1);
        }
    }
    LP_HD static int elem(int p, int k) { return k4_elem(p, k); }
};

/* Q6_K part p: half h = p/8, l = 4*(p%8) .. +3; v[4kk + i] is element
 * 128h + 32kk + l0 + i for kk = 0..3 (see quant.c's dequant_q6_k). */
struct t_q6_k { /* ql[128], qh[64], scales[16] int8, d */
    static constexpr int QK = 256, BYTES = 210, PARTS = 16, NV = 16, RUN = 4;
    LP_HD static void part(const uint8_t *b, int p, float *v)
    {
        const int h = p >> 3, l0 = 4 * (p & 7), is = l0 / 16;
        const uint8_t *ql = b + 64 * h + l0, *qh = b + 128 + 32 * h + l0;
        const int8_t *sc = reinterpret_cast<const int8_t *>(b + 192) + 8 * h;
        const float d = f16(b + 208);
        const float s0 = mul_rn(d, (float)sc[is]), s1 = mul_rn(d, (float)sc[is + 2]);
        const float s2 = mul_rn(d, (float)sc[is + 4]), s3 = mul_rn(d, (float)sc[is + 6]);
LP_UNROLL
        for (int i = 0; i < 4; i++) {
            const int q1 = ((ql[i] & 0xf) | ((qh[i] >> 0) & 3) << 4) - 32;
            const int q2 = ((ql[i + 32] & 0xf) | ((qh[i] >> 2) & 3) << 4) - 32;
            const int q3 = ((ql[i] >> 4) | ((qh[i] >> 4) & 3) << 4) - 32;
            const int q4 = ((ql[i + 32] >> 4) | ((qh[i] >> 6) & 3) << 4) - 32;
            v[i] = mul_rn(s0, (float)q1);
            v[4 + i] = mul_rn(s1, (float)q2);
            v[8 + i] = mul_rn(s2, (float)q3);
            v[12 + i] = mul_rn(s3, (float)q4);
        }
    }
    LP_HD static int elem(int p, int k) { return 128 * (p >> 3) + 32 * (k >> 2) + 4 * (p & 7) + (k & 3); }
};

/* Item i of a dequantization of n_rows rows (one thread's work): item i
 * is part i % PARTS of block (i / PARTS) % blocks-per-row of row
 * i / (PARTS * blocks-per-row), which is source row rows[r] (or r). */
template <typename Q>
LP_HD void dequant_item(const uint8_t *w, size_t row_bytes, int64_t n_in, const int32_t *rows,
                        float *out, int64_t i)
{
    const int64_t per_row = n_in / Q::QK * Q::PARTS;
    const int64_t r = i / per_row, j = i % per_row;
    const int64_t blk = j / Q::PARTS;
    const int p = (int)(j % Q::PARTS);
    const int64_t src_row = rows ? rows[r] : r;
    float v[Q::NV];
    Q::part(w + src_row * row_bytes + blk * Q::BYTES, p, v);
    float *o = out + r * n_in + blk * Q::QK;
LP_UNROLL
    for (int k = 0; k < Q::NV; k++) o[Q::elem(p, k)] = v[k];
}

} /* namespace lp_cuda */

/* Call F.template operator()<traits>() for a weight type; the float types
 * take their 8-wide form when `vec8` (n_in % 8 == 0).  Returns false for a
 * type the kernels do not handle. */
template <typename F>
static bool lp_cuda_dispatch(uint32_t type, bool vec8, F &&f)
{
    using namespace lp_cuda;
    switch (type) {
    case LP_TYPE_F32: if (vec8) f.template operator()<t_f32x8>(); else f.template operator()<t_f32>(); return true;
    case LP_TYPE_F16: if (vec8) f.template operator()<t_f16x8>(); else f.template operator()<t_f16>(); return true;
    case LP_TYPE_BF16: if (vec8) f.template operator()<t_bf16x8>(); else f.template operator()<t_bf16>(); return true;
    case LP_TYPE_Q4_0: f.template operator()<t_q4_0>(); return true;
    case LP_TYPE_Q4_1: f.template operator()<t_q4_1>(); return true;
    case LP_TYPE_Q5_0: f.template operator()<t_q5_0>(); return true;
    case LP_TYPE_Q5_1: f.template operator()<t_q5_1>(); return true;
    case LP_TYPE_Q8_0: f.template operator()<t_q8_0>(); return true;
    case LP_TYPE_Q4_K: f.template operator()<t_q4_k>(); return true;
    case LP_TYPE_Q5_K: f.template operator()<t_q5_k>(); return true;
    case LP_TYPE_Q6_K: f.template operator()<t_q6_k>(); return true;
    default: return false;
    }
}

#endif
