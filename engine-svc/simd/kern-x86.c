/* kern-x86.c - the fast kernels for x86-64, compiled three times:
 *   avx2   (-mavx2 -mfma -mf16c): u8 x s8 products with vpmaddubsw + vpmaddwd;
 *   avx512 (+ AVX-512 F/BW/VL): the same 256-bit code with EVEX encoding and
 *          32 vector registers, and 512-bit float kernels;
 *   vnni   (+ AVX-512 VNNI): vpdpbusd for u8 x s8 dots, vpdpwssd to apply
 *          the K-quant sub-block scales.
 * meson.build defines LP_KERN_AVX512 / LP_KERN_VNNI for the last two.
 *
 * Every GEMM works on a tile of one weight row and up to four tokens: the
 * row's blocks are unpacked once into registers and dotted with each
 * token's activation blocks, so prefill reuses every unpacked weight four
 * times while decode (one token) streams the weights once. */
#include <immintrin.h>
#include <string.h>

#include "kern.h"
#include "quant.h"

#if defined(LP_KERN_VNNI)
#define KERN_SYM lp__kern_vnni
#define KERN_NAME "vnni"
#elif defined(LP_KERN_AVX512)
#define KERN_SYM lp__kern_avx512
#define KERN_NAME "avx512"
#else
#define KERN_SYM lp__kern_avx2
#define KERN_NAME "avx2"
#endif

#define INLINE static inline __attribute__((always_inline))
#define NT 4 /* tokens per tile */

/* ---- helpers ------------------------------------------------------------ */

/* acc + sum over groups of four of u[i] * s[i] (u unsigned, s signed bytes;
 * the products here never saturate vpmaddubsw's int16 pairs). */
INLINE __m256i dot_us(__m256i acc, __m256i u, __m256i s)
{
#if defined(LP_KERN_VNNI)
    return _mm256_dpbusd_epi32(acc, u, s);
#else
    __m256i p = _mm256_maddubs_epi16(u, s);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
#endif
}

/* acc + sum over pairs of (u[2i]*s[2i] + u[2i+1]*s[2i+1]) * sc[i] (sc int16). */
INLINE __m256i dot_us_scaled(__m256i acc, __m256i u, __m256i s, __m256i sc)
{
    __m256i p = _mm256_maddubs_epi16(u, s);
#if defined(LP_KERN_VNNI)
    return _mm256_dpwssd_epi32(acc, p, sc);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, sc));
#endif
}

INLINE float hsum_ps(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

INLINE float f16(uint16_t h) { return _cvtsh_ss(h); }

/* 16 packed nibbles -> 32 bytes: low nibbles then high nibbles (the
 * element order of the legacy blocks). */
INLINE __m256i unpack_nibbles16(const uint8_t *qs)
{
    __m128i q = _mm_loadu_si128((const __m128i *)qs);
    __m128i m4 = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
}

/* Bit j of the 32-bit little-endian word at qh -> 0x10 in byte j. */
INLINE __m256i bits_to_0x10(const uint8_t *qh)
{
    uint32_t v;
    memcpy(&v, qh, 4);
    /* byte j takes source byte j/8, then keeps bit j%8 */
    const __m256i pick = _mm256_set_epi64x(0x0303030303030303ll, 0x0202020202020202ll,
                                           0x0101010101010101ll, 0x0000000000000000ll);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)v), pick);
    b = _mm256_cmpeq_epi8(_mm256_and_si256(b, bit), bit);
    return _mm256_and_si256(b, _mm256_set1_epi8(0x10));
}

/* A vector whose lane 0 is v and the rest 0: the integer offset of
 * Q4_0/Q5_0 folded into the dot's accumulator. */
INLINE __m256i lane0(int v) { return _mm256_zextsi128_si256(_mm_cvtsi32_si128(v)); }

/* ---- GEMM driver -------------------------------------------------------- */

/* TILE(n, wrow, x[NT], nt, out[NT]) computes nt dots of one weight row. */
#define DEFINE_GEMM(name, tile)                                                           \
    static void name(int64_t n, const void *w, size_t wrb, int64_t nr, const void *xq,    \
                     size_t xrb, int64_t nt, float *y, int64_t ys)                        \
    {                                                                                     \
        for (int64_t t0 = 0; t0 < nt; t0 += NT) {                                         \
            int m = nt - t0 < NT ? (int)(nt - t0) : NT;                                   \
            const void *x[NT];                                                            \
            for (int t = 0; t < NT; t++)                                                  \
                x[t] = (const uint8_t *)xq + (size_t)(t0 + (t < m ? t : 0)) * xrb;         \
            for (int64_t r = 0; r < nr; r++) {                                            \
                float out[NT];                                                            \
                const void *wr = (const uint8_t *)w + (size_t)r * wrb;                    \
                switch (m) {                                                              \
                case 4: tile(n, wr, x, 4, out); break;                                    \
                case 3: tile(n, wr, x, 3, out); break;                                    \
                case 2: tile(n, wr, x, 2, out); break;                                    \
                default: tile(n, wr, x, 1, out); break;                                   \
                }                                                                         \
                for (int t = 0; t < m; t++) y[(t0 + t) * ys + r] = out[t];                \
            }                                                                             \
        }                                                                                 \
    }

/* ---- float weights ------------------------------------------------------ */

#if defined(LP_KERN_AVX512)
#define FV __m512
#define FW 16
#define f_zero _mm512_setzero_ps
#define f_load _mm512_loadu_ps
#define f_fmadd _mm512_fmadd_ps
#define f_hsum _mm512_reduce_add_ps
#define f_cvt_f16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define f_cvt_bf16(p) \
    _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p))), 16))
#else
#define FV __m256
#define FW 8
#define f_zero _mm256_setzero_ps
#define f_load _mm256_loadu_ps
#define f_fmadd _mm256_fmadd_ps
#define f_hsum hsum_ps
#define f_cvt_f16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define f_cvt_bf16(p) \
    _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))
#endif

#define DEFINE_FLOAT_TILE(name, wtype, load_w, scalar_w)                                  \
    INLINE void name(int64_t n, const void *wv, const void *const *xv, const int nt,      \
                     float *out)                                                          \
    {                                                                                     \
        const wtype *w = wv;                                                              \
        FV acc[NT];                                                                       \
        for (int t = 0; t < nt; t++) acc[t] = f_zero();                                   \
        int64_t i = 0;                                                                    \
        for (; i + FW <= n; i += FW) {                                                    \
            FV wf = load_w(w + i);                                                        \
            for (int t = 0; t < nt; t++)                                                  \
                acc[t] = f_fmadd(wf, f_load((const float *)xv[t] + i), acc[t]);           \
        }                                                                                 \
        for (int t = 0; t < nt; t++) {                                                    \
            float s = f_hsum(acc[t]);                                                     \
            for (int64_t j = i; j < n; j++) s += scalar_w(w[j]) * ((const float *)xv[t])[j]; \
            out[t] = s;                                                                   \
        }                                                                                 \
    }

INLINE float id_f32(float f) { return f; }
DEFINE_FLOAT_TILE(tile_f32, float, f_load, id_f32)
DEFINE_FLOAT_TILE(tile_f16, uint16_t, f_cvt_f16, f16)
DEFINE_FLOAT_TILE(tile_bf16, uint16_t, f_cvt_bf16, lp_bf16_to_f32)
DEFINE_GEMM(gemm_f32, tile_f32)
DEFINE_GEMM(gemm_f16, tile_f16)
DEFINE_GEMM(gemm_bf16, tile_bf16)

/* ---- legacy types: 32-element blocks, Q8 activations -------------------- */

INLINE void tile_q8_0(int64_t n, const void *wv, const void *const *xv, const int nt, float *out)
{
    const lp_block_q8_0_t *b = wv;
    __m256 acc[NT];
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LP_QK; i++) {
        __m256i q = _mm256_loadu_si256((const __m256i *)b[i].qs);
        __m256i aq = _mm256_sign_epi8(q, q); /* |q| as unsigned bytes (-128 -> 128) */
        float d = f16(b[i].d);
        for (int t = 0; t < nt; t++) {
            const lp__q8a_t *a = (const lp__q8a_t *)xv[t] + i;
            __m256i x = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)a->qs), q);
            __m256i s = dot_us(_mm256_setzero_si256(), aq, x);
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(d * a->d), acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) out[t] = hsum_ps(acc[t]);
}

/* Q4_0 / Q5_0: unsigned q with an offset: sum((q - off) * x) =
 * sum(q * x) - off * sum(x). */
INLINE void tile_q4_0(int64_t n, const void *wv, const void *const *xv, const int nt, float *out)
{
    const lp_block_q4_0_t *b = wv;
    __m256 acc[NT];
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LP_QK; i++) {
        __m256i q = unpack_nibbles16(b[i].qs);
        float d = f16(b[i].d);
        for (int t = 0; t < nt; t++) {
            const lp__q8a_t *a = (const lp__q8a_t *)xv[t] + i;
            __m256i s = dot_us(lane0(-8 * a->sum), q, _mm256_loadu_si256((const __m256i *)a->qs));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(d * a->d), acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) out[t] = hsum_ps(acc[t]);
}

INLINE void tile_q5_0(int64_t n, const void *wv, const void *const *xv, const int nt, float *out)
{
    const lp_block_q5_0_t *b = wv;
    __m256 acc[NT];
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LP_QK; i++) {
        __m256i q = _mm256_or_si256(unpack_nibbles16(b[i].qs), bits_to_0x10(b[i].qh));
        float d = f16(b[i].d);
        for (int t = 0; t < nt; t++) {
            const lp__q8a_t *a = (const lp__q8a_t *)xv[t] + i;
            __m256i s = dot_us(lane0(-16 * a->sum), q, _mm256_loadu_si256((const __m256i *)a->qs));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(d * a->d), acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) out[t] = hsum_ps(acc[t]);
}

/* Q4_1 / Q5_1: d_w*d_x*sum(q*x) + m_w*s_x. */
INLINE void tile_q4_1(int64_t n, const void *wv, const void *const *xv, const int nt, float *out)
{
    const lp_block_q4_1_t *b = wv;
    __m256 acc[NT];
    float mins[NT];
    for (int t = 0; t < nt; t++) { acc[t] = _mm256_setzero_ps(); mins[t] = 0; }
    for (int64_t i = 0; i < n / LP_QK; i++) {
        __m256i q = unpack_nibbles16(b[i].qs);
        float d = f16(b[i].d), m = f16(b[i].m);
        for (int t = 0; t < nt; t++) {
            const lp__q8a_t *a = (const lp__q8a_t *)xv[t] + i;
            __m256i s = dot_us(_mm256_setzero_si256(), q, _mm256_loadu_si256((const __m256i *)a->qs));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(d * a->d), acc[t]);
            mins[t] += m * f16(a->s);
        }
    }
    for (int t = 0; t < nt; t++) out[t] = hsum_ps(acc[t]) + mins[t];
}

INLINE void tile_q5_1(int64_t n, const void *wv, const void *const *xv, const int nt, float *out)
{
    const lp_block_q5_1_t *b = wv;
    __m256 acc[NT];
    float mins[NT];
    for (int t = 0; t < nt; t++) { acc[t] = _mm256_setzero_ps(); mins[t] = 0; }
    for (int64_t i = 0; i < n / LP_QK; i++) {
        __m256i q = _mm256_or_si256(unpack_nibbles16(b[i].qs), bits_to_0x10(b[i].qh));
        float d = f16(b[i].d), m = f16(b[i].m);
        for (int t = 0; t < nt; t++) {
            const lp__q8a_t *a = (const lp__q8a_t *)xv[t] + i;
            __m256i s = dot_us(_mm256_setzero_si256(), q, _mm256_loadu_si256((const __m256i *)a->qs));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(d * a->d), acc[t]);
            mins[t] += m * f16(a->s);
        }
    }
    for (int t = 0; t < nt; t++) out[t] = hsum_ps(acc[t]) + mins[t];
}

DEFINE_GEMM(gemm_q8_0, tile_q8_0)
DEFINE_GEMM(gemm_q4_0, tile_q4_0)
DEFINE_GEMM(gemm_q5_0, tile_q5_0)
DEFINE_GEMM(gemm_q4_1, tile_q4_1)
DEFINE_GEMM(gemm_q5_1, tile_q5_1)

/* ---- K-quants: 256-element super-blocks, Q8_K activations --------------- */

/* The 8 scales (bytes 0-7) and 8 mins (bytes 8-15) of a Q4_K/Q5_K block. */
INLINE void k_scales_mins(const uint8_t *q, uint8_t out[16])
{
    uint32_t u[4];
    memcpy(u, q, 12);
    const uint32_t m6 = 0x3f3f3f3f, m4 = 0x0f0f0f0f, m2 = 0x03030303;
    /* scales 0-3: q[0..3] & 63; scales 4-7: q[8..11] low nibbles | q[0..3] top bits;
     * mins 0-3: q[4..7] & 63;   mins 4-7: q[8..11] high nibbles | q[4..7] top bits */
    uint32_t s03 = u[0] & m6, m03 = u[1] & m6;
    uint32_t s47 = (u[2] & m4) | ((u[0] >> 6) & m2) << 4;
    uint32_t m47 = ((u[2] >> 4) & m4) | ((u[1] >> 6) & m2) << 4;
    memcpy(out, &s03, 4);
    memcpy(out + 4, &s47, 4);
    memcpy(out + 8, &m03, 4);
    memcpy(out + 12, &m47, 4);
}

/* Q4_K / Q5_K (hbits = 1): per super-block
 * d_x * (d * sum_j sc_j sum(q x) - dmin * sum_j m_j (bsum_2j + bsum_2j+1)). */
INLINE void tile_qk_affine(int64_t n, const uint8_t *w, size_t bb, int hbits,
                           const void *const *xv, const int nt, float *out)
{
    __m256 acc[NT];
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
    for (int64_t i = 0; i < n / LP_QK_K; i++, w += bb) {
        /* Q4_K and Q5_K share the d, dmin, scales prefix */
        const lp_block_q4_k_t *b = (const lp_block_q4_k_t *)w;
        const uint8_t *qs = hbits ? ((const lp_block_q5_k_t *)w)->qs : b->qs;
        uint8_t sm[16];
        k_scales_mins(b->scales, sm);
        __m128i mins8 = _mm_loadl_epi64((const __m128i *)(sm + 8));
        __m128i mins16 = _mm_cvtepu8_epi16(mins8);
        /* lane k of mdup = m_{k/2}, matching bsums[k] */
        __m256i mdup = _mm256_set_m128i(_mm_unpackhi_epi16(mins16, mins16),
                                        _mm_unpacklo_epi16(mins16, mins16));
        __m256i hv = hbits ? _mm256_loadu_si256((const __m256i *)((const lp_block_q5_k_t *)w)->qh)
                           : _mm256_setzero_si256();
        __m256i isum[NT];
        for (int t = 0; t < nt; t++) isum[t] = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            __m256i lo = _mm256_and_si256(q, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (hbits) {
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(hv, one), 4));
                hi = _mm256_or_si256(hi, _mm256_slli_epi16(
                                             _mm256_and_si256(_mm256_srli_epi16(hv, 1), one), 4));
                hv = _mm256_srli_epi16(hv, 2);
            }
            __m256i s_lo = _mm256_set1_epi16(sm[2 * c]), s_hi = _mm256_set1_epi16(sm[2 * c + 1]);
            for (int t = 0; t < nt; t++) {
                const int8_t *xq = ((const lp__q8k_t *)xv[t])[i].qs + 64 * c;
                isum[t] = dot_us_scaled(isum[t], lo, _mm256_load_si256((const __m256i *)xq), s_lo);
                isum[t] = dot_us_scaled(isum[t], hi, _mm256_load_si256((const __m256i *)(xq + 32)),
                                        s_hi);
            }
        }
        float d = f16(b->d), dmin = f16(b->dmin);
        for (int t = 0; t < nt; t++) {
            const lp__q8k_t *a = (const lp__q8k_t *)xv[t] + i;
            __m256i mm = _mm256_madd_epi16(_mm256_load_si256((const __m256i *)a->bsums), mdup);
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_set1_ps(d * a->d), acc[t]);
            acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mm), _mm256_set1_ps(dmin * a->d), acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) out[t] = hsum_ps(acc[t]);
}

INLINE void tile_q4_k(int64_t n, const void *w, const void *const *xv, const int nt, float *out)
{
    tile_qk_affine(n, w, sizeof(lp_block_q4_k_t), 0, xv, nt, out);
}

INLINE void tile_q5_k(int64_t n, const void *w, const void *const *xv, const int nt, float *out)
{
    tile_qk_affine(n, w, sizeof(lp_block_q5_k_t), 1, xv, nt, out);
}

/* Q6_K: d_w * d_x * sum_j sc_j * (sum(q x) - 32 * bsum_j), q in 0..63. */
INLINE void tile_q6_k(int64_t n, const void *wv, const void *const *xv, const int nt, float *out)
{
    const lp_block_q6_k_t *b = wv;
    __m256 acc[NT];
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3);
    for (int64_t i = 0; i < n / LP_QK_K; i++, b++) {
        __m256i isum[NT];
        for (int t = 0; t < nt; t++) isum[t] = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i ql0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
            __m256i ql1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
            for (int k = 0; k < 4; k++) {
                __m256i lo4 = k & 2 ? _mm256_srli_epi16(k & 1 ? ql1 : ql0, 4) : (k & 1 ? ql1 : ql0);
                __m256i h2 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), m2);
                __m256i q = _mm256_or_si256(_mm256_and_si256(lo4, m4), _mm256_slli_epi16(h2, 4));
                int j = 8 * h + 2 * k; /* sub-blocks j (elements 0-15) and j+1 (16-31) */
                __m256i sc = _mm256_set_m128i(_mm_set1_epi16(b->scales[j + 1]),
                                              _mm_set1_epi16(b->scales[j]));
                for (int t = 0; t < nt; t++) {
                    const int8_t *xq = ((const lp__q8k_t *)xv[t])[i].qs + 128 * h + 32 * k;
                    isum[t] = dot_us_scaled(isum[t], q, _mm256_load_si256((const __m256i *)xq), sc);
                }
            }
        }
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
        float d = f16(b->d);
        for (int t = 0; t < nt; t++) {
            const lp__q8k_t *a = (const lp__q8k_t *)xv[t] + i;
            __m256i corr = _mm256_madd_epi16(_mm256_load_si256((const __m256i *)a->bsums), sc16);
            __m256i s = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(corr, 5));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(d * a->d), acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) out[t] = hsum_ps(acc[t]);
}

DEFINE_GEMM(gemm_q4_k, tile_q4_k)
DEFINE_GEMM(gemm_q5_k, tile_q5_k)
DEFINE_GEMM(gemm_q6_k, tile_q6_k)

/* ---- activation quantization ------------------------------------------- */

/* Four vectors of 8 int32 (values -127..127) -> 32 int8 in order. */
INLINE __m256i pack_i32x4(__m256i a, __m256i b, __m256i c, __m256i d)
{
    __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    __m256i p = _mm256_packs_epi16(ab, cd);
    /* packs work per 128-bit lane: dwords come out as 0 2 4 6 1 3 5 7 */
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

INLINE float hmax_ps(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

INLINE int hsum_epi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

static void quant_q8a(const float *x, void *xq, int64_t n)
{
    lp__q8a_t *b = xq;
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t i = 0; i < n / LP_QK; i++, b++, x += LP_QK) {
        __m256 v[4];
        __m256 mx = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(x + 8 * k);
            mx = _mm256_max_ps(mx, _mm256_and_ps(v[k], absm));
        }
        float amax = hmax_ps(mx);
        float d = amax / 127.0f;
        float id = amax != 0 ? 127.0f / amax : 0.0f;
        __m256 vid = _mm256_set1_ps(id);
        __m256i q[4];
        for (int k = 0; k < 4; k++) q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], vid));
        _mm256_storeu_si256((__m256i *)b->qs, pack_i32x4(q[0], q[1], q[2], q[3]));
        int sum = hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]),
                                              _mm256_add_epi32(q[2], q[3])));
        b->d = _cvtsh_ss(_cvtss_sh(d, 0));
        b->sum = (int16_t)sum;
        b->s = _cvtss_sh(d * (float)sum, 0);
    }
}

/* The sign of iscale does not change any product d * q, so the SIMD
 * version uses +amax where the scalar one uses the signed maximum. */
static void quant_q8k(const float *x, void *xq, int64_t n)
{
    lp__q8k_t *b = xq;
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t i = 0; i < n / LP_QK_K; i++, b++, x += LP_QK_K) {
        __m256 mx = _mm256_setzero_ps();
        for (int k = 0; k < 32; k++)
            mx = _mm256_max_ps(mx, _mm256_and_ps(_mm256_loadu_ps(x + 8 * k), absm));
        float amax = hmax_ps(mx);
        if (amax == 0) {
            memset(b, 0, sizeof *b);
            continue;
        }
        float iscale = -127.0f / amax;
        __m256 vis = _mm256_set1_ps(iscale);
        __m256i sums[8];
        for (int g = 0; g < 8; g++) { /* 32 values = sub-blocks 2g, 2g+1 */
            __m256i q[4];
            for (int k = 0; k < 4; k++)
                q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 32 * g + 8 * k), vis));
            _mm256_store_si256((__m256i *)(b->qs + 32 * g), pack_i32x4(q[0], q[1], q[2], q[3]));
            /* lanes 0-3: 4-element sums of the first 16, lanes 4-7 of the next 16 */
            __m256i s01 = _mm256_hadd_epi32(q[0], q[1]), s23 = _mm256_hadd_epi32(q[2], q[3]);
            sums[g] = _mm256_hadd_epi32(s01, s23);
        }
        /* sums[g] holds the 4-element sums of q[0] q[1] q[2] q[3] (low
         * 128-bit lane) and again of their upper halves (high lane);
         * sub-block 2g is q[0] + q[1], sub-block 2g+1 is q[2] + q[3]. */
        for (int g = 0; g < 8; g++) {
            int32_t l[8];
            _mm256_storeu_si256((__m256i *)l, sums[g]);
            b->bsums[2 * g] = (int16_t)(l[0] + l[1] + l[4] + l[5]);
            b->bsums[2 * g + 1] = (int16_t)(l[2] + l[3] + l[6] + l[7]);
        }
        b->d = 1.0f / iscale;
    }
}

const lp__kern_t KERN_SYM = {
    .name = KERN_NAME,
    .gemm = {
        [LP_TYPE_F32] = gemm_f32, [LP_TYPE_F16] = gemm_f16, [LP_TYPE_BF16] = gemm_bf16,
        [LP_TYPE_Q4_0] = gemm_q4_0, [LP_TYPE_Q4_1] = gemm_q4_1, [LP_TYPE_Q5_0] = gemm_q5_0,
        [LP_TYPE_Q5_1] = gemm_q5_1, [LP_TYPE_Q8_0] = gemm_q8_0, [LP_TYPE_Q4_K] = gemm_q4_k,
        [LP_TYPE_Q5_K] = gemm_q5_k, [LP_TYPE_Q6_K] = gemm_q6_k,
    },
    .quant_q8a = quant_q8a,
    .quant_q8k = quant_q8k,
};
