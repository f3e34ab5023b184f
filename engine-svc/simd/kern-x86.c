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
    __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
}

/* q with 0x10 added in byte j where bit j of the 32-bit little-endian word
 * at qh is set (the fifth bits of Q5_0/Q5_1). */
INLINE __m256i add_bits_0x10(__m256i q, const uint8_t *qh)
{
    uint32_t v;
    memcpy(&v, qh, 4);
#if defined(LP_KERN_AVX512)
    return _mm256_mask_add_epi8(q, (__mmask32)v, q, _mm256_set1_epi8(0x10));
#else
    /* byte j takes source byte j/8, then keeps bit j%8 */
    const __m256i pick = _mm256_set_epi64x(0x0303030303030303ll, 0x0202020202020202ll,
                                           0x0101010101010101ll, 0x0000000000000000ll);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)v), pick);
    b = _mm256_cmpeq_epi8(_mm256_and_si256(b, bit), bit);
    return _mm256_or_si256(q, _mm256_and_si256(b, _mm256_set1_epi8(0x10)));
#endif
}

/* A vector whose lane 0 is v and the rest 0: the integer offset of
 * Q4_0/Q5_0 folded into the dot's accumulator. */
INLINE __m256i lane0(int v) { return _mm256_zextsi128_si256(_mm_cvtsi32_si128(v)); }

/* ---- GEMM driver -------------------------------------------------------- */

/* TILE(n, wrow, x[NT], nt, out[NT]) computes nt dots of one weight row.
 * Rows are the outer loop, so a row read from memory serves every token
 * tile from L1, and each row prefetches the one GEMM_PF rows on: a few
 * tokens compute too little per byte to hide the loads otherwise. */
#define GEMM_PF 4
#define DEFINE_GEMM_W(name, tile, W)                                                     \
    static void name(int64_t n, const void *w, size_t wrb, int64_t nr, const void *xq,    \
                     size_t xrb, int64_t nt, float *y, int64_t ys)                        \
    {                                                                                     \
        for (int64_t r = 0; r < nr; r++) {                                                \
            const void *wr = (const uint8_t *)w + (size_t)r * wrb;                        \
            if (r + GEMM_PF < nr)                                                         \
                for (size_t o = 0; o < wrb; o += 64)                                      \
                    _mm_prefetch((const char *)wr + GEMM_PF * wrb + o, _MM_HINT_T1);      \
            for (int64_t t0 = 0; t0 < nt; t0 += W) {                                      \
                int m = nt - t0 < W ? (int)(nt - t0) : W;                                 \
                const void *x[W];                                                         \
                _Pragma("GCC unroll 16") for (int t = 0; t < W; t++)                     \
                    x[t] = (const uint8_t *)xq + (size_t)(t0 + (t < m ? t : 0)) * xrb;     \
                float out[W] = {0};                                                       \
                switch (m) {                                                              \
                case 8: if (W >= 8) { tile(n, wr, x, 8, out); break; } /* fall through */ \
                case 7: if (W >= 8) { tile(n, wr, x, 7, out); break; } /* fall through */ \
                case 6: if (W >= 8) { tile(n, wr, x, 6, out); break; } /* fall through */ \
                case 5: if (W >= 8) { tile(n, wr, x, 5, out); break; } /* fall through */ \
                case 4: tile(n, wr, x, 4, out); break;                                    \
                case 3: tile(n, wr, x, 3, out); break;                                    \
                case 2: tile(n, wr, x, 2, out); break;                                    \
                default: tile(n, wr, x, 1, out); break;                                   \
                }                                                                         \
                for (int t = 0; t < m; t++) y[(t0 + t) * ys + r] = out[t];                \
            }                                                                             \
        }                                                                                 \
    }
#define DEFINE_GEMM(name, tile) DEFINE_GEMM_W(name, tile, NT)

/* gemv: one token, rows [0, nr), prefetching up to row nr_pf; gemm: the
 * batches through the tiles, one token through gemv. */
#define DEFINE_GEMV_GEMM(name, tiles)                                                     \
    static void name(int64_t n, const void *w, size_t wrb, int64_t nr, const void *xq,    \
                     size_t xrb, int64_t nt, float *y, int64_t ys)                        \
    {                                                                                     \
        if (nt != 1) tiles(n, w, wrb, nr, xq, xrb, nt, y, ys);                            \
        else name##_v(n, w, wrb, nr, nr, xq, y);                                          \
    }

/* ---- float weights ------------------------------------------------------ */

#if defined(LP_KERN_AVX512)
#define FV __m512
#define FW 16
#define FT 8 /* tokens per float tile: 32 registers hold 8 sums */
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
#define FT NT
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
        FV acc[FT];                                                                       \
        _Pragma("GCC unroll 16") for (int t = 0; t < nt; t++) acc[t] = f_zero();                                   \
        int64_t i = 0;                                                                    \
        for (; i + FW <= n; i += FW) {                                                    \
            FV wf = load_w(w + i);                                                        \
            _Pragma("GCC unroll 16") for (int t = 0; t < nt; t++)                                                  \
                acc[t] = f_fmadd(wf, f_load((const float *)xv[t] + i), acc[t]);           \
        }                                                                                 \
        _Pragma("GCC unroll 16") for (int t = 0; t < nt; t++) {                                                    \
            float s = f_hsum(acc[t]);                                                     \
            for (int64_t j = i; j < n; j++) s += scalar_w(w[j]) * ((const float *)xv[t])[j]; \
            out[t] = s;                                                                   \
        }                                                                                 \
    }

INLINE float id_f32(float f) { return f; }
DEFINE_FLOAT_TILE(tile_f32, float, f_load, id_f32)
DEFINE_FLOAT_TILE(tile_f16, uint16_t, f_cvt_f16, f16)
DEFINE_FLOAT_TILE(tile_bf16, uint16_t, f_cvt_bf16, lp_bf16_to_f32)
#if defined(LP_KERN_AVX512)
/* Three rows by up to FT tokens: each activation load feeds three FMAs and
 * each converted weight vector FT, where one row at a time spent a load per
 * FMA (batched decode on float weights is load-bound otherwise). */
#define DEFINE_FLOAT_TILE3(name, wtype, load_w, scalar_w)                                 \
    INLINE void name(int64_t n, const wtype *w0, size_t wrb, const float *const *x,       \
                     const int nt, float *y, int64_t ys)                                  \
    {                                                                                     \
        const wtype *w1 = (const wtype *)((const uint8_t *)w0 + wrb);                     \
        const wtype *w2 = (const wtype *)((const uint8_t *)w1 + wrb);                     \
        FV a0[FT], a1[FT], a2[FT];                                                        \
        _Pragma("GCC unroll 16") for (int t = 0; t < nt; t++)                            \
            a0[t] = a1[t] = a2[t] = f_zero();                                             \
        int64_t i = 0;                                                                    \
        for (; i + FW <= n; i += FW) {                                                    \
            FV f0 = load_w(w0 + i), f1 = load_w(w1 + i), f2 = load_w(w2 + i);             \
            _Pragma("GCC unroll 16") for (int t = 0; t < nt; t++) {                      \
                FV xv = f_load(x[t] + i);                                                 \
                a0[t] = f_fmadd(f0, xv, a0[t]);                                           \
                a1[t] = f_fmadd(f1, xv, a1[t]);                                           \
                a2[t] = f_fmadd(f2, xv, a2[t]);                                           \
            }                                                                             \
        }                                                                                 \
        _Pragma("GCC unroll 16") for (int t = 0; t < nt; t++) {                          \
            float s0 = f_hsum(a0[t]), s1 = f_hsum(a1[t]), s2 = f_hsum(a2[t]);             \
            for (int64_t j = i; j < n; j++) {                                             \
                s0 += scalar_w(w0[j]) * x[t][j];                                          \
                s1 += scalar_w(w1[j]) * x[t][j];                                          \
                s2 += scalar_w(w2[j]) * x[t][j];                                          \
            }                                                                             \
            y[t * ys] = s0, y[t * ys + 1] = s1, y[t * ys + 2] = s2;                       \
        }                                                                                 \
    }

#define DEFINE_FLOAT_GEMM3(name, tile3, tile1, wtype)                                     \
    DEFINE_GEMM_W(name##_rows, tile1, FT)                                                 \
    static void name(int64_t n, const void *w, size_t wrb, int64_t nr, const void *xq,    \
                     size_t xrb, int64_t nt, float *y, int64_t ys)                        \
    {                                                                                     \
        int64_t r = 0;                                                                    \
        for (; nt > 1 && r + 3 <= nr; r += 3) {                                           \
            const uint8_t *wr = (const uint8_t *)w + (size_t)r * wrb;                     \
            if (r + 3 + GEMM_PF <= nr)                                                    \
                for (size_t o = 0; o < 3 * wrb; o += 64)                                  \
                    _mm_prefetch((const char *)wr + GEMM_PF * wrb + o, _MM_HINT_T1);      \
            for (int64_t t0 = 0; t0 < nt; t0 += FT) {                                     \
                int m = nt - t0 < FT ? (int)(nt - t0) : FT;                               \
                const float *x[FT];                                                       \
                for (int t = 0; t < FT; t++)                                              \
                    x[t] = (const float *)((const uint8_t *)xq + (size_t)(t0 + (t < m ? t : 0)) * xrb); \
                const wtype *w0 = (const wtype *)wr;                                      \
                float *yt = y + t0 * ys + r;                                              \
                switch (m) {                                                              \
                case 8: tile3(n, w0, wrb, x, 8, yt, ys); break;                           \
                case 7: tile3(n, w0, wrb, x, 7, yt, ys); break;                           \
                case 6: tile3(n, w0, wrb, x, 6, yt, ys); break;                           \
                case 5: tile3(n, w0, wrb, x, 5, yt, ys); break;                           \
                case 4: tile3(n, w0, wrb, x, 4, yt, ys); break;                           \
                case 3: tile3(n, w0, wrb, x, 3, yt, ys); break;                           \
                case 2: tile3(n, w0, wrb, x, 2, yt, ys); break;                           \
                default: tile3(n, w0, wrb, x, 1, yt, ys); break;                          \
                }                                                                         \
            }                                                                             \
        }                                                                                 \
        if (r < nr)                                                                       \
            name##_rows(n, (const uint8_t *)w + (size_t)r * wrb, wrb, nr - r, xq, xrb, nt, \
                        y + r, ys);                                                       \
    }

DEFINE_FLOAT_TILE3(tile3_f32, float, f_load, id_f32)
DEFINE_FLOAT_TILE3(tile3_f16, uint16_t, f_cvt_f16, f16)
DEFINE_FLOAT_TILE3(tile3_bf16, uint16_t, f_cvt_bf16, lp_bf16_to_f32)
DEFINE_FLOAT_GEMM3(gemm_f32, tile3_f32, tile_f32, float)
DEFINE_FLOAT_GEMM3(gemm_f16, tile3_f16, tile_f16, uint16_t)
DEFINE_FLOAT_GEMM3(gemm_bf16, tile3_bf16, tile_bf16, uint16_t)
#else
DEFINE_GEMM_W(gemm_f32, tile_f32, FT)
DEFINE_GEMM_W(gemm_f16, tile_f16, FT)
DEFINE_GEMM_W(gemm_bf16, tile_bf16, FT)
#endif

/* ---- decode prefetch ---------------------------------------------------- */

/* Decode streams each weight row once from memory, and its kernels compute
 * enough per byte that few loads are in flight at once, so out of cache
 * they would read far below the memory's rate.  Each block step of a row
 * pair therefore also prefetches, into L2 (T1), the same blocks of the pair
 * PF_ROWS rows further on: a steady trickle a few KB ahead rather than a
 * burst per row, far enough to cover the latency and near enough to stay
 * in L2 (the distance and hint are in docs/KERNELS.md, "Tried"). */
#define PF_ROWS 8
#define PF_HINT _MM_HINT_T1

/* Where the pair at row r prefetches from; NULL near the end. */
INLINE const uint8_t *prefetch_base(const void *w, size_t wrb, int64_t r, int64_t nr)
{
    return r + PF_ROWS + 2 <= nr ? (const uint8_t *)w + (size_t)(r + PF_ROWS) * wrb : NULL;
}

/* One block of bb bytes at p and at p + wrb (the pair's second row). */
INLINE void prefetch_block_pair(const uint8_t *p, size_t bb, size_t wrb)
{
    for (size_t o = 0; o < bb; o += 64) {
        _mm_prefetch((const char *)p + o, PF_HINT);
        _mm_prefetch((const char *)p + wrb + o, PF_HINT);
    }
}

/* ---- legacy types: 32-element blocks, Q8 activations -------------------- */

enum { L_Q8_0, L_Q4_0, L_Q5_0, L_Q4_1, L_Q5_1, L_MXFP4 };

/* Block i of a legacy row dotted with each token: Q8_0 through |q| and
 * the sign trick; Q4_0/Q5_0 as unsigned q with the offset times the
 * activation sum folded into the accumulator (sum((q - off) x) =
 * sum(q x) - off sum(x)); Q4_1/Q5_1 as d_w d_x sum(q x) + m_w s_x. */
/* The fp16 at the start of a legacy block (its d), converted straight
 * from memory: the load takes four halves, of which the block holds all
 * (every legacy block is at least 18 bytes), and lane 0 is d.  Per block
 * this saves the trip of f16(b->d) through a general register, which
 * matters in the compute-bound Q4_0/Q5_0 decode. */
INLINE float f16_lead(const void *block)
{
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)block)));
}

INLINE void legacy_block(const int kind, const uint8_t *w, int64_t i, const void *const *xv,
                         const int nt, __m256 *acc, float *mins)
{
    static const size_t bsize[] = {sizeof(lp_block_q8_0_t), sizeof(lp_block_q4_0_t),
                                   sizeof(lp_block_q5_0_t), sizeof(lp_block_q4_1_t),
                                   sizeof(lp_block_q5_1_t), sizeof(lp_block_mxfp4_t)};
    const uint8_t *blk = w + (size_t)i * bsize[kind];
    __m256i q, aq = _mm256_setzero_si256();
    float d, m = 0;
    int off = 0;
    switch (kind) {
    case L_Q8_0: {
        const lp_block_q8_0_t *b = (const lp_block_q8_0_t *)blk;
        q = _mm256_loadu_si256((const __m256i *)b->qs);
        aq = _mm256_sign_epi8(q, q); /* |q| as unsigned bytes (-128 -> 128) */
        d = f16_lead(b);
        break;
    }
    case L_Q4_0: {
        const lp_block_q4_0_t *b = (const lp_block_q4_0_t *)blk;
        q = unpack_nibbles16(b->qs);
        d = f16_lead(b);
        off = 8;
        break;
    }
    case L_Q5_0: {
        const lp_block_q5_0_t *b = (const lp_block_q5_0_t *)blk;
        q = add_bits_0x10(unpack_nibbles16(b->qs), b->qh);
        d = f16_lead(b);
        off = 16;
        break;
    }
    case L_Q4_1: {
        const lp_block_q4_1_t *b = (const lp_block_q4_1_t *)blk;
        q = unpack_nibbles16(b->qs);
        d = f16_lead(b);
        m = f16(b->m);
        break;
    }
    case L_MXFP4: { /* the nibbles through the value table, then as Q8_0 */
        const lp_block_mxfp4_t *b = (const lp_block_mxfp4_t *)blk;
        const __m256i kv = _mm256_broadcastsi128_si256(
            _mm_loadu_si128((const __m128i *)lp_mxfp4_kvalues));
        q = _mm256_shuffle_epi8(kv, unpack_nibbles16(b->qs));
        aq = _mm256_sign_epi8(q, q);
        d = lp_e8m0_half(b->e);
        break;
    }
    default: {
        const lp_block_q5_1_t *b = (const lp_block_q5_1_t *)blk;
        q = add_bits_0x10(unpack_nibbles16(b->qs), b->qh);
        d = f16_lead(b);
        m = f16(b->m);
        break;
    }
    }
    _Pragma("GCC unroll 16") for (int t = 0; t < nt; t++) {
        const lp__q8a_t *a = (const lp__q8a_t *)xv[t] + i;
        __m256i x = _mm256_loadu_si256((const __m256i *)a->qs);
        __m256i s;
        if (kind == L_Q8_0 || kind == L_MXFP4)
            s = dot_us(_mm256_setzero_si256(), aq, _mm256_sign_epi8(x, q));
        else if (off) s = dot_us(lane0(-off * a->sum), q, x);
        else s = dot_us(_mm256_setzero_si256(), q, x);
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(d * a->d), acc[t]);
        if (kind == L_Q4_1 || kind == L_Q5_1) mins[t] += m * f16(a->s);
    }
}

/* Blocks in pairs with two sets of accumulators: the FMA chain through one
 * accumulator would otherwise bound a single-token row at one block per
 * FMA latency.  pf (decode only, may be NULL): the same offsets of a row
 * further on, prefetched block pair by block pair (see PF_ROWS). */
INLINE void tile_legacy_pf(const int kind, int64_t n, const void *wv, const void *const *xv,
                           const int nt, float *out, const uint8_t *pf)
{
    static const size_t bsize[] = {sizeof(lp_block_q8_0_t), sizeof(lp_block_q4_0_t),
                                   sizeof(lp_block_q5_0_t), sizeof(lp_block_q4_1_t),
                                   sizeof(lp_block_q5_1_t), sizeof(lp_block_mxfp4_t)};
    __m256 acc0[NT], acc1[NT];
    float mins[NT];
    _Pragma("GCC unroll 16") for (int t = 0; t < nt; t++) {
        acc0[t] = acc1[t] = _mm256_setzero_ps();
        mins[t] = 0;
    }
    int64_t nb = n / LP_QK, i = 0;
    for (; i + 2 <= nb; i += 2) {
        if (pf) { /* the pair's first and last byte: every line it touches */
            _mm_prefetch((const char *)pf + (size_t)i * bsize[kind], PF_HINT);
            _mm_prefetch((const char *)pf + (size_t)(i + 2) * bsize[kind] - 1, PF_HINT);
        }
        legacy_block(kind, wv, i, xv, nt, acc0, mins);
        legacy_block(kind, wv, i + 1, xv, nt, acc1, mins);
    }
    if (i < nb) legacy_block(kind, wv, i, xv, nt, acc0, mins);
    _Pragma("GCC unroll 16") for (int t = 0; t < nt; t++)
        out[t] = hsum_ps(_mm256_add_ps(acc0[t], acc1[t])) + mins[t];
}

INLINE void tile_legacy(const int kind, int64_t n, const void *wv, const void *const *xv,
                        const int nt, float *out)
{
    tile_legacy_pf(kind, n, wv, xv, nt, out, NULL);
}

#define DEFINE_LEGACY_TILE(name, kind)                                                    \
    INLINE void name(int64_t n, const void *w, const void *const *xv, const int nt,       \
                     float *out)                                                          \
    {                                                                                     \
        tile_legacy(kind, n, w, xv, nt, out);                                             \
    }

DEFINE_LEGACY_TILE(tile_q8_0, L_Q8_0)
DEFINE_LEGACY_TILE(tile_q4_0, L_Q4_0)
DEFINE_LEGACY_TILE(tile_q5_0, L_Q5_0)
DEFINE_LEGACY_TILE(tile_q4_1, L_Q4_1)
DEFINE_LEGACY_TILE(tile_q5_1, L_Q5_1)
DEFINE_LEGACY_TILE(tile_mxfp4, L_MXFP4)

/* One token: row by row, each prefetching the row PF_ROWS further on. */
#define DEFINE_GEMV_LEGACY_ROWS(name, kind)                                               \
    DEFINE_GEMM(name##_tiles, name##_tile)                                                \
    static void name##_rows(int64_t n, const void *w, size_t wrb, int64_t nr,             \
                            int64_t nr_pf, const void *xq, float *y)                      \
    {                                                                                     \
        const void *x[1] = {xq};                                                          \
        for (int64_t r = 0; r < nr; r++) {                                                \
            const uint8_t *wr = (const uint8_t *)w + (size_t)r * wrb;                     \
            tile_legacy_pf(kind, n, wr, x, 1, &y[r],                                      \
                           r + PF_ROWS < nr_pf ? wr + PF_ROWS * wrb : NULL);              \
        }                                                                                 \
    }

#define DEFINE_GEMV_LEGACY(name, kind)                                                    \
    DEFINE_GEMV_LEGACY_ROWS(name, kind)                                                   \
    static void name##_v(int64_t n, const void *w, size_t wrb, int64_t nr, int64_t nr_pf, \
                         const void *xq, float *y)                                        \
    {                                                                                     \
        name##_rows(n, w, wrb, nr, nr_pf, xq, y);                                         \
    }                                                                                     \
    DEFINE_GEMV_GEMM(name, name##_tiles)

#define gemm_q8_0_tile tile_q8_0
#define gemm_q4_0_tile tile_q4_0
#define gemm_q5_0_tile tile_q5_0
#define gemm_q4_1_tile tile_q4_1
#define gemm_q5_1_tile tile_q5_1
#define gemm_mxfp4_tile tile_mxfp4
DEFINE_GEMV_LEGACY(gemm_q8_0, L_Q8_0)
DEFINE_GEMV_LEGACY_ROWS(gemm_q4_0, L_Q4_0) /* their gemvs: after the block pairs below */
DEFINE_GEMV_LEGACY_ROWS(gemm_q5_0, L_Q5_0)
DEFINE_GEMV_LEGACY(gemm_q4_1, L_Q4_1)
DEFINE_GEMV_LEGACY(gemm_q5_1, L_Q5_1)
DEFINE_GEMV_LEGACY(gemm_mxfp4, L_MXFP4)

#if defined(LP_KERN_AVX512)
/* ---- Q4_0 / Q5_0 decode in block pairs (AVX-512) --------------------------
 *
 * Q5_0 decode is compute-bound (well below Q8_0's rate even in cache),
 * Q4_0 nearly so: per 32-weight block, the nibble unpacking, the
 * fifth bits, the offset and the scale each take their own instructions.
 * Two blocks at a time share them: one 256-bit vector holds the low
 * nibbles of both blocks (elements 0-15 of each), another the high nibbles
 * (elements 16-31), so one unpacking and one dot-product pair serve two
 * blocks, whose sums land in lanes 0-3 and 4-7; Q5_0's fifth bits of both
 * blocks make one mask per vector, assembled in general registers.  The
 * activations are rearranged the same way once per call (q8_pair_t), with
 * each block's scale in its four lanes and its offset, -off * sum(x), in
 * the first of them. */
typedef struct {
    _Alignas(32) int8_t lo[32]; /* x[0..15] of block 2p, then of block 2p+1 */
    int8_t hi[32];              /* x[16..31] of both */
    float d[8];                 /* d of block 2p in lanes 0-3, 2p+1 in 4-7 */
    int32_t off[8];             /* -off * sum of each block in its first lane */
} q8_pair_t;

_Static_assert(sizeof(q8_pair_t) == 128, "q8 pair");

#define PAIR_MAX 1024 /* rows of up to 65536 elements; longer: per block */

static void q8a_to_pairs(const lp__q8a_t *a, int64_t np, int off, q8_pair_t *p)
{
    for (int64_t k = 0; k < np; k++, a += 2, p++) {
        __m256i x0 = _mm256_loadu_si256((const __m256i *)a[0].qs);
        __m256i x1 = _mm256_loadu_si256((const __m256i *)a[1].qs);
        _mm256_store_si256((__m256i *)p->lo, _mm256_permute2x128_si256(x0, x1, 0x20));
        _mm256_store_si256((__m256i *)p->hi, _mm256_permute2x128_si256(x0, x1, 0x31));
        _mm256_store_ps(p->d, _mm256_setr_m128(_mm_set1_ps(a[0].d), _mm_set1_ps(a[1].d)));
        _mm256_store_si256((__m256i *)p->off, _mm256_setr_epi32(-off * a[0].sum, 0, 0, 0,
                                                                 -off * a[1].sum, 0, 0, 0));
    }
}

/* Blocks 2k and 2k+1 of a row (w points at block 2k) dotted with pair k. */
INLINE __m256 legacy_pair(const int kind, const uint8_t *w, const q8_pair_t *p, __m256 acc)
{
    const size_t bb = kind == L_Q5_0 ? sizeof(lp_block_q5_0_t) : sizeof(lp_block_q4_0_t);
    const size_t qs = kind == L_Q5_0 ? offsetof(lp_block_q5_0_t, qs) : offsetof(lp_block_q4_0_t, qs);
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(w + qs))),
                                        _mm_loadu_si128((const __m128i *)(w + bb + qs)), 1);
    __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    if (kind == L_Q5_0) {
        const __m256i c16 = _mm256_set1_epi8(0x10);
        uint32_t h0, h1;
        memcpy(&h0, ((const lp_block_q5_0_t *)w)->qh, 4);
        memcpy(&h1, ((const lp_block_q5_0_t *)(w + bb))->qh, 4);
        lo = _mm256_mask_add_epi8(lo, (__mmask32)((h0 & 0xffff) | h1 << 16), lo, c16);
        hi = _mm256_mask_add_epi8(hi, (__mmask32)(h0 >> 16 | (h1 & 0xffff0000u)), hi, c16);
    }
    __m256i s = dot_us(_mm256_load_si256((const __m256i *)p->off), lo,
                       _mm256_load_si256((const __m256i *)p->lo));
    s = dot_us(s, hi, _mm256_load_si256((const __m256i *)p->hi));
    uint16_t d0, d1; /* d leads both block types */
    memcpy(&d0, w, 2);
    memcpy(&d1, w + bb, 2);
    const __m256i pick = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
    __m128 dw = _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)d0 | (uint32_t)d1 << 16)));
    __m256 d = _mm256_mul_ps(_mm256_permutexvar_ps(pick, _mm256_castps128_ps256(dw)),
                             _mm256_load_ps(p->d));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), d, acc);
}

/* One row of np block pairs; pf: the same offsets of a row further on. */
INLINE float legacy_row_pairs(const int kind, const uint8_t *w, const q8_pair_t *p, int64_t np,
                              const uint8_t *pf)
{
    const size_t pb = 2 * (kind == L_Q5_0 ? sizeof(lp_block_q5_0_t) : sizeof(lp_block_q4_0_t));
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 2 <= np; k += 2) { /* two accumulators: the FMA chain */
        if (pf) { /* every line of the two pairs (72 or 88 bytes) */
            _mm_prefetch((const char *)pf + (size_t)k * pb, PF_HINT);
            _mm_prefetch((const char *)pf + (size_t)k * pb + 64, PF_HINT);
            _mm_prefetch((const char *)pf + (size_t)(k + 2) * pb - 1, PF_HINT);
        }
        acc0 = legacy_pair(kind, w + (size_t)k * pb, p + k, acc0);
        acc1 = legacy_pair(kind, w + (size_t)(k + 1) * pb, p + k + 1, acc1);
    }
    if (k < np) acc0 = legacy_pair(kind, w + (size_t)k * pb, p + k, acc0);
    return hsum_ps(_mm256_add_ps(acc0, acc1));
}

/* False (nothing done) for an odd number of blocks or a row too long. */
INLINE bool legacy_pairs(const int kind, int64_t n, const void *w, size_t wrb, int64_t nr,
                         int64_t nr_pf, const void *xq, float *y)
{
    const int64_t nb = n / LP_QK, np = nb / 2;
    if (nb % 2 || np > PAIR_MAX) return false;
    q8_pair_t xp[np];
    q8a_to_pairs(xq, np, kind == L_Q5_0 ? 16 : 8, xp);
    for (int64_t r = 0; r < nr; r++) {
        const uint8_t *wr = (const uint8_t *)w + (size_t)r * wrb;
        y[r] = legacy_row_pairs(kind, wr, xp, np, r + PF_ROWS < nr_pf ? wr + PF_ROWS * wrb : NULL);
    }
    return true;
}
#else
INLINE bool legacy_pairs(const int kind, int64_t n, const void *w, size_t wrb, int64_t nr,
                         int64_t nr_pf, const void *xq, float *y)
{
    (void)kind, (void)n, (void)w, (void)wrb, (void)nr, (void)nr_pf, (void)xq, (void)y;
    return false;
}
#endif

/* An odd number of blocks (or a row too long for the stack, or no
 * AVX-512) goes block by block. */
#define DEFINE_GEMV_PAIRS(name, kind)                                                     \
    static void name##_v(int64_t n, const void *w, size_t wrb, int64_t nr, int64_t nr_pf, \
                         const void *xq, float *y)                                        \
    {                                                                                     \
        if (!legacy_pairs(kind, n, w, wrb, nr, nr_pf, xq, y))                             \
            name##_rows(n, w, wrb, nr, nr_pf, xq, y);                                     \
    }                                                                                     \
    DEFINE_GEMV_GEMM(name, name##_tiles)
DEFINE_GEMV_PAIRS(gemm_q4_0, L_Q4_0)
DEFINE_GEMV_PAIRS(gemm_q5_0, L_Q5_0)

/* ---- K-quants: 256-element super-blocks, Q8_K activations --------------- */

/* The 8 scales and 8 mins of a Q4_K/Q5_K block as 16 int16 in one vector:
 * scales in the low 128 bits, mins in the high 128 bits. */
INLINE __m256i k_scales_mins(const uint8_t *q)
{
    uint32_t u[3];
    memcpy(u, q, 12);
    const uint32_t m6 = 0x3f3f3f3f, m4 = 0x0f0f0f0f, m2 = 0x03030303;
    /* scales 0-3: q[0..3] & 63; scales 4-7: q[8..11] low nibbles | q[0..3] top bits;
     * mins 0-3: q[4..7] & 63;   mins 4-7: q[8..11] high nibbles | q[4..7] top bits */
    uint32_t s03 = u[0] & m6, m03 = u[1] & m6;
    uint32_t s47 = (u[2] & m4) | ((u[0] >> 6) & m2) << 4;
    uint32_t m47 = ((u[2] >> 4) & m4) | ((u[1] >> 6) & m2) << 4;
    return _mm256_cvtepu8_epi16(_mm_set_epi32((int)m47, (int)m03, (int)s47, (int)s03));
}

/* Shuffle controls: int16 element j of a 128-bit lane into every int16 of
 * the lane (for the low lane) ... */
static const uint8_t bcast16_ctrl[8][32] __attribute__((aligned(32))) = {
#define B(j) {2*j, 2*j+1, 2*j, 2*j+1, 2*j, 2*j+1, 2*j, 2*j+1, 2*j, 2*j+1, 2*j, 2*j+1, \
              2*j, 2*j+1, 2*j, 2*j+1, 2*j, 2*j+1, 2*j, 2*j+1, 2*j, 2*j+1, 2*j, 2*j+1, \
              2*j, 2*j+1, 2*j, 2*j+1, 2*j, 2*j+1, 2*j, 2*j+1}
    B(0), B(1), B(2), B(3), B(4), B(5), B(6), B(7),
#undef B
};

/* ... and int16 pairs (m0 m0 m1 m1 m2 m2 m3 m3 | m4 m4 .. m7 m7) from a
 * lane pair that both hold m0..m7. */
static const uint8_t dup16_ctrl[32] __attribute__((aligned(32))) = {
    0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7,
    8, 9, 8, 9, 10, 11, 10, 11, 12, 13, 12, 13, 14, 15, 14, 15,
};

INLINE __m256i bcast16(__m256i v, int j)
{
    return _mm256_shuffle_epi8(v, _mm256_load_si256((const __m256i *)bcast16_ctrl[j]));
}

/* Q4_K / Q5_K (hbits = 1): per super-block
 * d_x * (d * sum_j sc_j sum(q x) - dmin * sum_j m_j (bsum_2j + bsum_2j+1)). */
INLINE void tile_qk_affine(int64_t n, const uint8_t *w, size_t bb, int hbits,
                           const void *const *xv, const int nt, float *out)
{
    __m256 acc[NT], accm[NT]; /* scale and min parts: two shorter chains */
    _Pragma("GCC unroll 16") for (int t = 0; t < nt; t++) acc[t] = accm[t] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
    for (int64_t i = 0; i < n / LP_QK_K; i++, w += bb) {
        /* Q4_K and Q5_K share the d, dmin, scales prefix */
        const lp_block_q4_k_t *b = (const lp_block_q4_k_t *)w;
        const uint8_t *qs = hbits ? ((const lp_block_q5_k_t *)w)->qs : b->qs;
        __m256i sm = k_scales_mins(b->scales);
        __m256i scb = _mm256_permute4x64_epi64(sm, 0x44); /* scales in both lanes */
        __m256i mnb = _mm256_permute4x64_epi64(sm, 0xee); /* mins in both lanes */
        /* lane k of mdup = m_{k/2}, matching bsums[k] */
        __m256i mdup = _mm256_shuffle_epi8(mnb, _mm256_load_si256((const __m256i *)dup16_ctrl));
        __m256i hv = hbits ? _mm256_loadu_si256((const __m256i *)((const lp_block_q5_k_t *)w)->qh)
                           : _mm256_setzero_si256();
        __m256i isum[NT], isum2[NT]; /* two chains per token: shorter latency */
        _Pragma("GCC unroll 16") for (int t = 0; t < nt; t++) isum[t] = isum2[t] = _mm256_setzero_si256();
        _Pragma("GCC unroll 16") for (int c = 0; c < 4; c++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            __m256i lo = _mm256_and_si256(q, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (hbits) {
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(hv, one), 4));
                hi = _mm256_or_si256(hi, _mm256_slli_epi16(
                                             _mm256_and_si256(_mm256_srli_epi16(hv, 1), one), 4));
                hv = _mm256_srli_epi16(hv, 2);
            }
            __m256i s_lo = bcast16(scb, 2 * c), s_hi = bcast16(scb, 2 * c + 1);
            _Pragma("GCC unroll 16") for (int t = 0; t < nt; t++) {
                const int8_t *xq = ((const lp__q8k_t *)xv[t])[i].qs + 64 * c;
                isum[t] = dot_us_scaled(isum[t], lo, _mm256_load_si256((const __m256i *)xq), s_lo);
                /* a second chain only where registers are plentiful (nt is a
                 * constant here, so the branch folds away) */
                __m256i *h2 = nt <= 2 ? &isum2[t] : &isum[t];
                *h2 = dot_us_scaled(*h2, hi, _mm256_load_si256((const __m256i *)(xq + 32)), s_hi);
            }
        }
        float d = f16(b->d), dmin = f16(b->dmin);
        _Pragma("GCC unroll 16") for (int t = 0; t < nt; t++) {
            const lp__q8k_t *a = (const lp__q8k_t *)xv[t] + i;
            __m256i mm = _mm256_madd_epi16(_mm256_load_si256((const __m256i *)a->bsums), mdup);
            isum[t] = _mm256_add_epi32(isum[t], isum2[t]);
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_set1_ps(d * a->d), acc[t]);
            accm[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mm), _mm256_set1_ps(dmin * a->d), accm[t]);
        }
    }
    _Pragma("GCC unroll 16") for (int t = 0; t < nt; t++) out[t] = hsum_ps(_mm256_sub_ps(acc[t], accm[t]));
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

/* int16 element 2k into the low lane, 2k+1 into the high lane. */
static const uint8_t q6_scale_ctrl[4][32] __attribute__((aligned(32))) = {
#define P(a, b) {2*a, 2*a+1, 2*a, 2*a+1, 2*a, 2*a+1, 2*a, 2*a+1, 2*a, 2*a+1, 2*a, 2*a+1, \
                 2*a, 2*a+1, 2*a, 2*a+1, 2*b, 2*b+1, 2*b, 2*b+1, 2*b, 2*b+1, 2*b, 2*b+1, \
                 2*b, 2*b+1, 2*b, 2*b+1, 2*b, 2*b+1, 2*b, 2*b+1}
    P(0, 1), P(2, 3), P(4, 5), P(6, 7),
#undef P
};
/* Half h (128 values) of a Q6_K block as unsigned bytes 0..63: q[k] holds
 * values 32k .. 32k+31 of the half (low 4 bits from ql, high 2 from qh). */
INLINE void q6_unpack_half(const lp_block_q6_k_t *b, int h, __m256i q[4])
{
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    __m256i ql0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
    __m256i ql1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
    __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
    q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4),
                           _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
    q[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4),
                           _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                           _mm256_and_si256(qh, m30));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                           _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
}

INLINE void tile_q6_k(int64_t n, const void *wv, const void *const *xv, const int nt, float *out)
{
    const lp_block_q6_k_t *b = wv;
    __m256 acc[NT];
    _Pragma("GCC unroll 16") for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LP_QK_K; i++, b++) {
        __m256i isum[NT];
        _Pragma("GCC unroll 16") for (int t = 0; t < nt; t++) isum[t] = _mm256_setzero_si256();
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
        _Pragma("GCC unroll 16") for (int h = 0; h < 2; h++) {
            /* scales 8h..8h+7 in both lanes */
            __m256i sch = h ? _mm256_permute4x64_epi64(sc16, 0xee)
                            : _mm256_permute4x64_epi64(sc16, 0x44);
            __m256i q[4];
            q6_unpack_half(b, h, q);
            _Pragma("GCC unroll 16") for (int k = 0; k < 4; k++) {
                /* sub-blocks 8h+2k (elements 0-15: low lane) and 8h+2k+1 (high lane) */
                __m256i sc = _mm256_shuffle_epi8(
                    sch, _mm256_load_si256((const __m256i *)q6_scale_ctrl[k]));
                _Pragma("GCC unroll 16") for (int t = 0; t < nt; t++) {
                    const int8_t *xq = ((const lp__q8k_t *)xv[t])[i].qs + 128 * h + 32 * k;
                    isum[t] = dot_us_scaled(isum[t], q[k], _mm256_load_si256((const __m256i *)xq), sc);
                }
            }
        }
        float d = f16(b->d);
        _Pragma("GCC unroll 16") for (int t = 0; t < nt; t++) {
            const lp__q8k_t *a = (const lp__q8k_t *)xv[t] + i;
            __m256i corr = _mm256_madd_epi16(_mm256_load_si256((const __m256i *)a->bsums), sc16);
            __m256i s = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(corr, 5));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(d * a->d), acc[t]);
        }
    }
    _Pragma("GCC unroll 16") for (int t = 0; t < nt; t++) out[t] = hsum_ps(acc[t]);
}

/* Decode (one token), two Q4_K/Q5_K rows at a time: two independent chains
 * share each activation load. */
INLINE void dec2_qk_affine(int64_t n, const uint8_t *w0, const uint8_t *w1, size_t bb,
                           int hbits, const lp__q8k_t *a, float *out0, float *out1,
                           const uint8_t *pf, size_t wrb)
{
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    __m256 accm[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
    const uint8_t *wr[2] = {w0, w1};
    for (int64_t i = 0; i < n / LP_QK_K; i++, a++) {
        if (pf) prefetch_block_pair(pf + (size_t)i * bb, bb, wrb);
        __m256i mdup[2], scb[2], isum[2], isum2[2], hv[2];
        const lp_block_q4_k_t *b[2];
        const uint8_t *qs[2];
        _Pragma("GCC unroll 2") for (int r = 0; r < 2; r++) {
            const uint8_t *blk = wr[r] + (size_t)i * bb;
            b[r] = (const lp_block_q4_k_t *)blk; /* the d, dmin, scales prefix */
            qs[r] = hbits ? ((const lp_block_q5_k_t *)blk)->qs : b[r]->qs;
            hv[r] = hbits ? _mm256_loadu_si256((const __m256i *)((const lp_block_q5_k_t *)blk)->qh)
                          : _mm256_setzero_si256();
            __m256i sm = k_scales_mins(b[r]->scales);
            scb[r] = _mm256_permute4x64_epi64(sm, 0x44);
            mdup[r] = _mm256_shuffle_epi8(_mm256_permute4x64_epi64(sm, 0xee),
                                          _mm256_load_si256((const __m256i *)dup16_ctrl));
            isum[r] = isum2[r] = _mm256_setzero_si256();
        }
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
            __m256i xlo = _mm256_load_si256((const __m256i *)(a->qs + 64 * c));
            __m256i xhi = _mm256_load_si256((const __m256i *)(a->qs + 64 * c + 32));
            _Pragma("GCC unroll 2") for (int r = 0; r < 2; r++) {
                __m256i q = _mm256_loadu_si256((const __m256i *)(qs[r] + 32 * c));
                __m256i lo = _mm256_and_si256(q, m4);
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                if (hbits) {
                    lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(hv[r], one), 4));
                    hi = _mm256_or_si256(hi, _mm256_slli_epi16(
                                                 _mm256_and_si256(_mm256_srli_epi16(hv[r], 1), one), 4));
                    hv[r] = _mm256_srli_epi16(hv[r], 2);
                }
                isum[r] = dot_us_scaled(isum[r], lo, xlo, bcast16(scb[r], 2 * c));
                isum2[r] = dot_us_scaled(isum2[r], hi, xhi, bcast16(scb[r], 2 * c + 1));
            }
        }
        __m256i bs = _mm256_load_si256((const __m256i *)a->bsums);
        _Pragma("GCC unroll 2") for (int r = 0; r < 2; r++) {
            __m256i mm = _mm256_madd_epi16(bs, mdup[r]);
            /* d and dmin lead the block: both from one conversion */
            __m128 dd = _mm_mul_ps(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)b[r])),
                                   _mm_set1_ps(a->d));
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(isum[r], isum2[r])),
                                     _mm256_broadcastss_ps(dd), acc[r]);
            accm[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mm),
                                      _mm256_broadcastss_ps(_mm_movehdup_ps(dd)), accm[r]);
        }
    }
    *out0 = hsum_ps(_mm256_sub_ps(acc[0], accm[0]));
    *out1 = hsum_ps(_mm256_sub_ps(acc[1], accm[1]));
}

DEFINE_GEMM(gemm_q4_k_tiles, tile_q4_k)

DEFINE_GEMM(gemm_q5_k_tiles, tile_q5_k)

#if defined(LP_KERN_VNNI)
/* ---- Q4_K decode with 512-bit vectors (VNNI) ----------------------------
 *
 * The 256-bit decode kernel spends about 80 instructions per block and
 * row, a quarter of them decoding the 6-bit scales in general registers,
 * so when the host gives a thread more bandwidth than usual the kernel
 * falls behind the memory.  Here:
 *
 * - one 512-bit load takes 64 bytes of nibbles, two 64-element chunks:
 *   its low nibbles are sub-blocks 4g (bytes 0-31) and 4g+2 (32-63) of
 *   128-element group g, its high nibbles 4g+1 and 4g+3.  The activations
 *   are rearranged to match once per call (q8k_zx_t), with their sums
 *   per 32 for the mins;
 * - vpdpbusd sums four byte products per int32, and with q <= 15, |x| <=
 *   127 such a sum fits int16, so the sums of the low and the high
 *   nibbles pack (vpackssdw) into one vector of int16 and one vpdpwssd
 *   weighs them by their scales: three multiplies per 128 weights instead
 *   of four, one scale shuffle instead of two.  Per 128-bit lane the
 *   packed vector holds four sums of the low nibbles, then four of the
 *   high ones, so the scale vector holds two scales, four times each;
 * - the scales and mins of both rows of a pair decode in one 256-bit
 *   vector, a row per 128-bit lane.
 *
 * Q6_K keeps its 256-bit kernel: a 512-bit operation takes a 256-bit pipe
 * twice on Zen 4, and Q6_K's unpacking gains too little to pay for it. */
typedef struct {
    _Alignas(64) int8_t x[LP_QK_K]; /* per group g: x 0-31 | 64-95, x 32-63 | 96-127 */
    int16_t bsum32[8];              /* sum of x[32j .. 32j+31] */
    float d;
    uint8_t pad[44];
} q8k_zx_t;

_Static_assert(sizeof(q8k_zx_t) == 320, "q8k zx");

#define ZX_MAX 64 /* rows of up to 16384 elements; longer: the 256-bit kernel */

static void q8k_to_zx(const lp__q8k_t *a, int64_t nb, q8k_zx_t *z)
{
    static const int from[4] = {0, 64, 32, 96};
    for (int64_t i = 0; i < nb; i++, a++, z++) {
        for (int g = 0; g < 2; g++)
            for (int k = 0; k < 4; k++)
                _mm256_store_si256((__m256i *)(z->x + 128 * g + 32 * k),
                                   _mm256_load_si256((const __m256i *)(a->qs + 128 * g + from[k])));
        for (int j = 0; j < 8; j++) z->bsum32[j] = (int16_t)(a->bsums[2 * j] + a->bsums[2 * j + 1]);
        z->d = a->d;
    }
}

/* The dots of (u0, x0) and of (u1, x1), each four-byte sum weighed by its
 * int16 scale in sc (the packing above). */
INLINE __m512i dot2_packed(__m512i u0, __m512i x0, __m512i u1, __m512i x1, __m512i sc)
{
    const __m512i z = _mm512_setzero_si512();
    return _mm512_dpwssd_epi32(z, _mm512_packs_epi32(_mm512_dpbusd_epi32(z, u0, x0),
                                                     _mm512_dpbusd_epi32(z, u1, x1)), sc);
}

/* Q4_K: byte shuffles of a vector holding a row's 16 decoded bytes (s0-s7,
 * m0-m7) in every 128-bit lane.  zsc_q4k[g]: in the low 256 bits s_4g
 * four times then s_4g+1, in the high 256 bits s_4g+2 then s_4g+3, as
 * int16; zmn_q4k: the mins m0-m7 as int16. */
#define Z16(j) (j), -128
#define ZHALF(a, b) Z16(a), Z16(a), Z16(a), Z16(a), Z16(b), Z16(b), Z16(b), Z16(b)
static const int8_t zsc_q4k[2][64] __attribute__((aligned(64))) = {
    {ZHALF(0, 1), ZHALF(0, 1), ZHALF(2, 3), ZHALF(2, 3)},
    {ZHALF(4, 5), ZHALF(4, 5), ZHALF(6, 7), ZHALF(6, 7)},
};
#define ZMINS Z16(8), Z16(9), Z16(10), Z16(11), Z16(12), Z16(13), Z16(14), Z16(15)
static const int8_t zmn_q4k[32] __attribute__((aligned(32))) = {ZMINS, ZMINS};
#undef ZMINS
#undef ZHALF
#undef Z16

/* Rows w and w + wrb (nb blocks each) dotted with the rearranged
 * activations a; pf: the same offsets of a row pair further on, or NULL. */
INLINE void dec2_q4_k_z(int64_t nb, const uint8_t *w, size_t wrb, const q8k_zx_t *a,
                        float *out, const uint8_t *pf)
{
    const size_t bb = sizeof(lp_block_q4_k_t);
    const size_t sco = offsetof(lp_block_q4_k_t, scales), qso = offsetof(lp_block_q4_k_t, qs);
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    /* 32-bit words of a lane after the shuffles: s0-3 (6 bits of bytes
     * 0-3), s4-7 (low nibbles of bytes 8-11, top bits of bytes 0-3), m0-3
     * (6 bits of bytes 4-7), m4-7 (high nibbles of 8-11, top bits of 4-7) */
    const __m256i shift = _mm256_setr_epi32(0, 0, 0, 4, 0, 0, 0, 4);
    const __m256i low = _mm256_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f,
                                          0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f);
    const __m256i top = _mm256_setr_epi32(0, 0x30303030, 0, 0x30303030, 0, 0x30303030, 0,
                                          0x30303030);
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    __m256 accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++, a++) {
        const uint8_t *b[2] = {w + (size_t)i * bb, w + wrb + (size_t)i * bb};
        if (pf) prefetch_block_pair(pf + (size_t)i * bb, bb, wrb);
        __m256i u = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(b[0] + sco))),
            _mm_loadu_si128((const __m128i *)(b[1] + sco)), 1);
        __m256i v1 = _mm256_shuffle_epi32(u, _MM_SHUFFLE(2, 1, 2, 0));
        __m256i v2 = _mm256_shuffle_epi32(u, _MM_SHUFFLE(1, 1, 0, 0));
        __m256i sm = _mm256_or_si256(_mm256_and_si256(_mm256_srlv_epi32(v1, shift), low),
                                     _mm256_and_si256(_mm256_srli_epi32(v2, 2), top));
        /* the mins of both rows times the sums per 32: lanes 0-3 row 0, 4-7 row 1 */
        __m256i mm = _mm256_madd_epi16(
            _mm256_shuffle_epi8(sm, _mm256_load_si256((const __m256i *)zmn_q4k)),
            _mm256_broadcastsi128_si256(_mm_load_si128((const __m128i *)a->bsum32)));
        /* d, dmin of row 0, then of row 1 (they lead the block), times the
         * activations' d */
        uint32_t h0, h1;
        memcpy(&h0, b[0], 4);
        memcpy(&h1, b[1], 4);
        __m128 dd = _mm_mul_ps(_mm_cvtph_ps(_mm_insert_epi32(_mm_cvtsi32_si128((int)h0), (int)h1, 1)),
                               _mm_set1_ps(a->d));
        const __m512i sc[2] = {_mm512_broadcast_i32x4(_mm256_castsi256_si128(sm)),
                               _mm512_broadcast_i32x4(_mm256_extracti128_si256(sm, 1))};
        __m512i s[2][2]; /* [row][group]: two chains per row */
        _Pragma("GCC unroll 2") for (int g = 0; g < 2; g++) {
            const __m512i xlo = _mm512_load_si512((const void *)(a->x + 128 * g));
            const __m512i xhi = _mm512_load_si512((const void *)(a->x + 128 * g + 64));
            const __m512i ctl = _mm512_load_si512((const void *)zsc_q4k[g]);
            _Pragma("GCC unroll 2") for (int r = 0; r < 2; r++) {
                __m512i q = _mm512_loadu_si512((const void *)(b[r] + qso + 64 * g));
                s[r][g] = dot2_packed(_mm512_and_si512(q, m4), xlo,
                                      _mm512_and_si512(_mm512_srli_epi16(q, 4), m4), xhi,
                                      _mm512_shuffle_epi8(sc[r], ctl));
            }
        }
        _Pragma("GCC unroll 2") for (int r = 0; r < 2; r++)
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s[r][0], s[r][1])),
                                     _mm512_set1_ps(dd[2 * r]), acc[r]);
        /* dmin of row 0 in lanes 0-3, of row 1 in 4-7 */
        __m256 dm = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(dd),
                                             _mm256_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3));
        accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mm), dm, accm);
    }
    out[0] = _mm512_reduce_add_ps(acc[0]) - hsum_ps(_mm256_permute2f128_ps(accm, accm, 0x08));
    out[1] = _mm512_reduce_add_ps(acc[1]) - hsum_ps(_mm256_permute2f128_ps(accm, accm, 0x81));
}

/* Q4_K row pairs through dec2_q4_k_z: the number of rows done (the odd
 * last one is left to the caller), 0 for rows too long for the stack copy
 * of the activations. */
INLINE int64_t q4_k_wide(int64_t n, const void *w, size_t wrb, int64_t nr, int64_t nr_pf,
                         const void *xq, float *y)
{
    const int64_t nb = n / LP_QK_K;
    if (nb > ZX_MAX) return 0;
    q8k_zx_t zx[nb];
    q8k_to_zx(xq, nb, zx);
    int64_t r = 0;
    for (; r + 2 <= nr; r += 2)
        dec2_q4_k_z(nb, (const uint8_t *)w + (size_t)r * wrb, wrb, zx, y + r,
                    prefetch_base(w, wrb, r, nr_pf));
    return r;
}
#else
#define q4_k_wide no_wide
#endif

/* No wide decode kernel: every row pair through dec2_qk_affine. */
INLINE int64_t no_wide(int64_t n, const void *w, size_t wrb, int64_t nr, int64_t nr_pf,
                       const void *xq, float *y)
{
    (void)n, (void)w, (void)wrb, (void)nr, (void)nr_pf, (void)xq, (void)y;
    return 0;
}

#define DEFINE_GEMV_AFFINE(name, tiles, block, hbits, wide)                               \
    static void name##_v(int64_t n, const void *w, size_t wrb, int64_t nr, int64_t nr_pf, \
                         const void *xq, float *y)                                        \
    {                                                                                     \
        int64_t r = wide(n, w, wrb, nr, nr_pf, xq, y); /* row pairs a wide kernel did */  \
        for (; r + 2 <= nr; r += 2)                                                       \
            dec2_qk_affine(n, (const uint8_t *)w + (size_t)r * wrb,                       \
                           (const uint8_t *)w + (size_t)(r + 1) * wrb, sizeof(block),     \
                           hbits, xq, &y[r], &y[r + 1], prefetch_base(w, wrb, r, nr_pf), wrb); \
        if (r < nr)                                                                       \
            tiles(n, (const uint8_t *)w + (size_t)r * wrb, wrb, nr - r, xq, 0, 1, y + r, 1); \
    }                                                                                     \
    DEFINE_GEMV_GEMM(name, tiles)

DEFINE_GEMV_AFFINE(gemm_q4_k, gemm_q4_k_tiles, lp_block_q4_k_t, 0, q4_k_wide)
DEFINE_GEMV_AFFINE(gemm_q5_k, gemm_q5_k_tiles, lp_block_q5_k_t, 1, no_wide)

/* Decode, two Q6_K rows at a time (as dec2_q4_k). */
INLINE void dec2_q6_k(int64_t n, const lp_block_q6_k_t *b0, const lp_block_q6_k_t *b1,
                      const lp__q8k_t *a, float *out0, float *out1, const uint8_t *pf, size_t wrb)
{
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    const lp_block_q6_k_t *bb[2] = {b0, b1};
    for (int64_t i = 0; i < n / LP_QK_K; i++, a++) {
        if (pf) prefetch_block_pair(pf + (size_t)i * sizeof(lp_block_q6_k_t), sizeof(lp_block_q6_k_t), wrb);
        __m256i isum[2], isum2[2], sc16[2];
        _Pragma("GCC unroll 2") for (int r = 0; r < 2; r++) {
            sc16[r] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)bb[r][i].scales));
            isum[r] = isum2[r] = _mm256_setzero_si256();
        }
        _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
            __m256i x[4];
            _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)
                x[k] = _mm256_load_si256((const __m256i *)(a->qs + 128 * h + 32 * k));
            _Pragma("GCC unroll 2") for (int r = 0; r < 2; r++) {
                const lp_block_q6_k_t *b = &bb[r][i];
                __m256i sch = h ? _mm256_permute4x64_epi64(sc16[r], 0xee)
                                : _mm256_permute4x64_epi64(sc16[r], 0x44);
                __m256i q[4];
                q6_unpack_half(b, h, q);
                _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
                    __m256i sc = _mm256_shuffle_epi8(
                        sch, _mm256_load_si256((const __m256i *)q6_scale_ctrl[k]));
                    if (k & 1) isum2[r] = dot_us_scaled(isum2[r], q[k], x[k], sc);
                    else isum[r] = dot_us_scaled(isum[r], q[k], x[k], sc);
                }
            }
        }
        __m256i bs = _mm256_load_si256((const __m256i *)a->bsums);
        _Pragma("GCC unroll 2") for (int r = 0; r < 2; r++) {
            __m256i corr = _mm256_madd_epi16(bs, sc16[r]);
            __m256i sum = _mm256_sub_epi32(_mm256_add_epi32(isum[r], isum2[r]),
                                           _mm256_slli_epi32(corr, 5));
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum),
                                     _mm256_set1_ps(f16(bb[r][i].d) * a->d), acc[r]);
        }
    }
    *out0 = hsum_ps(acc[0]);
    *out1 = hsum_ps(acc[1]);
}

DEFINE_GEMM(gemm_q6_k_tiles, tile_q6_k)


static void gemm_q6_k_v(int64_t n, const void *w, size_t wrb, int64_t nr, int64_t nr_pf,
                        const void *xq, float *y)
{
    int64_t r = 0;
    for (; r + 2 <= nr; r += 2)
        dec2_q6_k(n, (const lp_block_q6_k_t *)((const uint8_t *)w + (size_t)r * wrb),
                  (const lp_block_q6_k_t *)((const uint8_t *)w + (size_t)(r + 1) * wrb), xq,
                  &y[r], &y[r + 1], prefetch_base(w, wrb, r, nr_pf), wrb);
    if (r < nr) gemm_q6_k_tiles(n, (const uint8_t *)w + (size_t)r * wrb, wrb, nr - r, xq, 0, 1,
                                y + r, 1);
}
DEFINE_GEMV_GEMM(gemm_q6_k, gemm_q6_k_tiles)

/* ---- batched GEMM (VNNI): repacked row groups ---------------------------
 *
 * For prefill, eight weight rows at a time are unpacked into bytes and
 * interleaved so that one 256-bit vector holds four consecutive weights of
 * each of the eight rows ("group" g of a unit).  vpdpbusd of that vector
 * with four activation bytes broadcast from one token then adds four
 * products to each row's lane: no horizontal sums, and the per-unit
 * scales apply to all eight rows with one FMA.  A unit is a run of weights
 * sharing a scale: 32 (Q4_K, Q5_K, legacy blocks) or 16 (Q6_K).  Each
 * weight is stored as an unsigned byte q with w = SC*q - MN per unit and
 * row, so a dot over a unit is SC * sum(q*x) - MN * sum(x).
 *
 * Scratch layout for a row group: qv[unit][group][row][4] bytes, then
 * SC[unit][row] and MN[unit][row] as floats. */
#if defined(LP_KERN_AVX512)

/* acc + four-byte dot products: vpdpbusd, or without VNNI vpmaddubsw +
 * vpmaddwd (exact as long as a pair of products fits int16: every type
 * but Q8_0, whose flipped bytes reach 255, so Q8_0 batches need VNNI). */
INLINE __m512i dpbusd512(__m512i acc, __m512i u, __m512i s)
{
#if defined(LP_KERN_VNNI)
    return _mm512_dpbusd_epi32(acc, u, s);
#else
    __m512i p = _mm512_maddubs_epi16(u, s);
    return _mm512_add_epi32(acc, _mm512_madd_epi16(p, _mm512_set1_epi16(1)));
#endif
}

#define RG 16 /* rows per group: one 512-bit vector holds 4 weights of each */
#define PT 8 /* tokens per tile */

/* r[i] holds eight dwords of row i; store dword g of every row as vector g. */
INLINE void transpose_store(__m256i r[8], uint8_t *dst, size_t stride)
{
    __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
    __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
    __m256i t4 = _mm256_unpacklo_epi32(r[4], r[5]), t5 = _mm256_unpackhi_epi32(r[4], r[5]);
    __m256i t6 = _mm256_unpacklo_epi32(r[6], r[7]), t7 = _mm256_unpackhi_epi32(r[6], r[7]);
    /* t0: r0g0 r1g0 r0g1 r1g1 | r0g4 r1g4 r0g5 r1g5 ; t1: g2 g3 | g6 g7 */
    __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
    __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
    /* u0: rows 0-3 of g0 | rows 0-3 of g4; u4: rows 4-7 of g0 | g4 ... */
    _mm256_store_si256((__m256i *)(dst + 0 * stride), _mm256_permute2x128_si256(u0, u4, 0x20));
    _mm256_store_si256((__m256i *)(dst + 1 * stride), _mm256_permute2x128_si256(u1, u5, 0x20));
    _mm256_store_si256((__m256i *)(dst + 2 * stride), _mm256_permute2x128_si256(u2, u6, 0x20));
    _mm256_store_si256((__m256i *)(dst + 3 * stride), _mm256_permute2x128_si256(u3, u7, 0x20));
    _mm256_store_si256((__m256i *)(dst + 4 * stride), _mm256_permute2x128_si256(u0, u4, 0x31));
    _mm256_store_si256((__m256i *)(dst + 5 * stride), _mm256_permute2x128_si256(u1, u5, 0x31));
    _mm256_store_si256((__m256i *)(dst + 6 * stride), _mm256_permute2x128_si256(u2, u6, 0x31));
    _mm256_store_si256((__m256i *)(dst + 7 * stride), _mm256_permute2x128_si256(u3, u7, 0x31));
}

/* Rows 0-7 and 8-15: vector g of the group is [rows 0-7 | rows 8-15]. */
INLINE void transpose16_store(__m256i r[RG], uint8_t *dst)
{
    transpose_store(r, dst, 64);
    transpose_store(r + 8, dst + 32, 64);
}

/* Q4_K / Q5_K: units of 32, SC = d*sc_j, MN = dmin*m_j. */
static void repack_qk_affine(int64_t n, const uint8_t *w, size_t wrb, int hbits, uint8_t *qv,
                             float *sc, float *mn)
{
    size_t bb = hbits ? sizeof(lp_block_q5_k_t) : sizeof(lp_block_q4_k_t);
    const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
    for (int64_t sb = 0; sb < n / LP_QK_K; sb++) {
        const uint8_t *qs[RG], *qh[RG];
        _Pragma("GCC unroll 16") for (int r = 0; r < RG; r++) {
            const uint8_t *blk = w + (size_t)r * wrb + (size_t)sb * bb;
            const lp_block_q4_k_t *b = (const lp_block_q4_k_t *)blk;
            qs[r] = hbits ? ((const lp_block_q5_k_t *)blk)->qs : b->qs;
            qh[r] = hbits ? ((const lp_block_q5_k_t *)blk)->qh : NULL;
            __m256i sm = k_scales_mins(b->scales);
            float fsc[8], fmn[8];
            _mm256_storeu_ps(fsc, _mm256_mul_ps(_mm256_set1_ps(f16(b->d)), _mm256_cvtepi32_ps(
                                      _mm256_cvtepi16_epi32(_mm256_castsi256_si128(sm)))));
            _mm256_storeu_ps(fmn, _mm256_mul_ps(_mm256_set1_ps(f16(b->dmin)), _mm256_cvtepi32_ps(
                                      _mm256_cvtepi16_epi32(_mm256_extracti128_si256(sm, 1)))));
            _Pragma("GCC unroll 16") for (int j = 0; j < 8; j++) {
                sc[(sb * 8 + j) * RG + r] = fsc[j];
                mn[(sb * 8 + j) * RG + r] = fmn[j];
            }
        }
        _Pragma("GCC unroll 16") for (int c = 0; c < 4; c++) {
            __m256i lo[RG], hi[RG];
            _Pragma("GCC unroll 16") for (int r = 0; r < RG; r++) {
                __m256i q = _mm256_loadu_si256((const __m256i *)(qs[r] + 32 * c));
                lo[r] = _mm256_and_si256(q, m4);
                hi[r] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                if (hbits) {
                    __m256i hv = _mm256_srl_epi16(_mm256_loadu_si256((const __m256i *)qh[r]),
                                                  _mm_cvtsi32_si128(2 * c));
                    lo[r] = _mm256_or_si256(lo[r], _mm256_slli_epi16(_mm256_and_si256(hv, one), 4));
                    hi[r] = _mm256_or_si256(hi[r], _mm256_slli_epi16(
                                                       _mm256_and_si256(_mm256_srli_epi16(hv, 1), one), 4));
                }
            }
            transpose16_store(lo, qv + (size_t)(sb * 8 + 2 * c) * 8 * 64);
            transpose16_store(hi, qv + (size_t)(sb * 8 + 2 * c + 1) * 8 * 64);
        }
    }
}

static void repack_q4_k(int64_t n, const uint8_t *w, size_t wrb, uint8_t *qv, float *sc, float *mn)
{
    repack_qk_affine(n, w, wrb, 0, qv, sc, mn);
}

static void repack_q5_k(int64_t n, const uint8_t *w, size_t wrb, uint8_t *qv, float *sc, float *mn)
{
    repack_qk_affine(n, w, wrb, 1, qv, sc, mn);
}

/* Q6_K: units of 16, SC = d*sc_j, MN = 32*d*sc_j. */
static void repack_q6_k(int64_t n, const uint8_t *w, size_t wrb, uint8_t *qv, float *sc, float *mn)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    for (int64_t sb = 0; sb < n / LP_QK_K; sb++) {
        const lp_block_q6_k_t *b[RG];
        _Pragma("GCC unroll 16") for (int r = 0; r < RG; r++) {
            b[r] = (const lp_block_q6_k_t *)(w + (size_t)r * wrb) + sb;
            float d = f16(b[r]->d);
            for (int j = 0; j < 16; j++) {
                sc[(sb * 16 + j) * RG + r] = d * (float)b[r]->scales[j];
                mn[(sb * 16 + j) * RG + r] = 32.0f * d * (float)b[r]->scales[j];
            }
        }
        _Pragma("GCC unroll 16") for (int h = 0; h < 2; h++) {
            _Pragma("GCC unroll 16") for (int k = 0; k < 4; k++) {
                __m256i q[RG];
                _Pragma("GCC unroll 16") for (int r = 0; r < RG; r++) {
                    __m256i ql = _mm256_loadu_si256((const __m256i *)(b[r]->ql + 64 * h + 32 * (k & 1)));
                    __m256i qh = _mm256_loadu_si256((const __m256i *)(b[r]->qh + 32 * h));
                    if (k & 2) ql = _mm256_srli_epi16(ql, 4);
                    /* bits 2k..2k+1 of qh to bits 4..5 */
                    __m256i h2 = k < 2 ? _mm256_sll_epi16(qh, _mm_cvtsi32_si128(4 - 2 * k))
                                       : _mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * k - 4));
                    q[r] = _mm256_or_si256(_mm256_and_si256(ql, m4), _mm256_and_si256(h2, m30));
                }
                /* units 16sb + 8h + 2k and the next: groups 4u .. 4u+7 */
                transpose16_store(q, qv + (size_t)(sb * 16 + 8 * h + 2 * k) * 4 * 64);
            }
        }
    }
}

/* Legacy blocks: units of 32 = one block; SC = d, MN = offset*d. */
#if defined(LP_KERN_VNNI)
static void repack_q8_0(int64_t n, const uint8_t *w, size_t wrb, uint8_t *qv, float *sc, float *mn)
{
    const __m256i flip = _mm256_set1_epi8((char)0x80); /* q + 128 as unsigned */
    for (int64_t i = 0; i < n / LP_QK; i++) {
        __m256i q[RG];
        _Pragma("GCC unroll 16") for (int r = 0; r < RG; r++) {
            const lp_block_q8_0_t *b = (const lp_block_q8_0_t *)(w + (size_t)r * wrb) + i;
            float d = f16(b->d);
            sc[i * RG + r] = d;
            mn[i * RG + r] = 128.0f * d;
            q[r] = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)b->qs), flip);
        }
        transpose16_store(q, qv + (size_t)i * 8 * 64);
    }
}
#endif

static void repack_q4_0(int64_t n, const uint8_t *w, size_t wrb, uint8_t *qv, float *sc, float *mn)
{
    for (int64_t i = 0; i < n / LP_QK; i++) {
        __m256i q[RG];
        _Pragma("GCC unroll 16") for (int r = 0; r < RG; r++) {
            const lp_block_q4_0_t *b = (const lp_block_q4_0_t *)(w + (size_t)r * wrb) + i;
            float d = f16(b->d);
            sc[i * RG + r] = d;
            mn[i * RG + r] = 8.0f * d;
            q[r] = unpack_nibbles16(b->qs);
        }
        transpose16_store(q, qv + (size_t)i * 8 * 64);
    }
}

static void repack_q5_0(int64_t n, const uint8_t *w, size_t wrb, uint8_t *qv, float *sc, float *mn)
{
    for (int64_t i = 0; i < n / LP_QK; i++) {
        __m256i q[RG];
        _Pragma("GCC unroll 16") for (int r = 0; r < RG; r++) {
            const lp_block_q5_0_t *b = (const lp_block_q5_0_t *)(w + (size_t)r * wrb) + i;
            float d = f16(b->d);
            sc[i * RG + r] = d;
            mn[i * RG + r] = 16.0f * d;
            q[r] = add_bits_0x10(unpack_nibbles16(b->qs), b->qh);
        }
        transpose16_store(q, qv + (size_t)i * 8 * 64);
    }
}

#define PP_PF_TOK 64 /* up to this many tokens, gemm_pp prefetches */

/* Activation kinds of the batched tile. */
enum { PP_K32, PP_K16, PP_A32 };

/* One unit's integer dots: lane r = row r's G groups of 4 bytes (W) times
 * one token's bytes xs. */
INLINE __m512i unit_dot(const __m512i *W, const int G, const uint8_t *xs)
{
    __m512i acc = _mm512_setzero_si512();
    _Pragma("GCC unroll 16") for (int g = 0; g < G; g++) {
        int32_t v;
        memcpy(&v, xs + 4 * g, 4);
        acc = dpbusd512(acc, W[g], _mm512_set1_epi32(v));
    }
    return acc;
}

/* y[t*ys + 0..15] = the sixteen rows of the group dotted with token t. */
INLINE void pp_tile(const int kind, int64_t n, const uint8_t *qv, const float *sc,
                    const float *mn, const uint8_t *const *x, const int nt, float *y, int64_t ys)
{
    const int S = kind == PP_K16 ? 16 : 32, G = S / 4;
    const int U = kind == PP_K32 ? 8 : kind == PP_K16 ? 16 : 1; /* units per activation block */
    const size_t xbb = kind == PP_A32 ? sizeof(lp__q8a_t) : sizeof(lp__q8k_t);
    __m512 tot[PT];
    _Pragma("GCC unroll 16") for (int t = 0; t < nt; t++) tot[t] = _mm512_setzero_ps();
    for (int64_t blk = 0; blk < n / (S * U); blk++) {
        __m512 fs[PT];
        _Pragma("GCC unroll 16") for (int t = 0; t < nt; t++) fs[t] = _mm512_setzero_ps();
        for (int u = 0; u < U; u++) {
            int64_t unit = blk * U + u;
            const uint8_t *wq = qv + (size_t)unit * G * 64;
            __m512i W[8];
            _Pragma("GCC unroll 16") for (int g = 0; g < G; g++)
                W[g] = _mm512_load_si512((const void *)(wq + 64 * g));
            __m512 SC = _mm512_load_ps(sc + unit * RG), MN = _mm512_load_ps(mn + unit * RG);
            _Pragma("GCC unroll 16") for (int t = 0; t < nt; t++) {
                const uint8_t *xb = x[t] + (size_t)blk * xbb;
                /* qs is at offset 0 of both block types */
                __m512i acc = unit_dot(W, G, xb + u * S);
                fs[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), SC, fs[t]);
                if (kind == PP_K32) {
                    const lp__q8k_t *a = (const lp__q8k_t *)xb;
                    fs[t] = _mm512_fnmadd_ps(MN, _mm512_set1_ps(a->fbsums32[u]), fs[t]);
                } else if (kind == PP_K16) {
                    const lp__q8k_t *a = (const lp__q8k_t *)xb;
                    fs[t] = _mm512_fnmadd_ps(MN, _mm512_set1_ps(a->fbsums[u]), fs[t]);
                } else {
                    const lp__q8a_t *a = (const lp__q8a_t *)xb;
                    fs[t] = _mm512_fnmadd_ps(MN, _mm512_set1_ps(a->fsum), fs[t]);
                }
            }
        }
        _Pragma("GCC unroll 16") for (int t = 0; t < nt; t++) {
            float dx = kind == PP_A32 ? ((const lp__q8a_t *)(x[t] + (size_t)blk * xbb))->d
                                      : ((const lp__q8k_t *)(x[t] + (size_t)blk * xbb))->d;
            tot[t] = _mm512_fmadd_ps(fs[t], _mm512_set1_ps(dx), tot[t]);
        }
    }
    _Pragma("GCC unroll 16") for (int t = 0; t < nt; t++) _mm512_storeu_ps(y + t * ys, tot[t]);
}

/* pp_tile over all nt tokens, 8 at a time: y[t*ys + 0..15]. */
INLINE void pp_tiles(const int kind, int64_t n, const uint8_t *qv, const float *sc,
                     const float *mn, const void *xq, size_t xrb, int64_t nt, float *y, int64_t ys)
{
    for (int64_t t0 = 0; t0 < nt; t0 += PT) {
        int m = nt - t0 < PT ? (int)(nt - t0) : PT;
        const uint8_t *x[PT];
        for (int t = 0; t < PT; t++)
            x[t] = (const uint8_t *)xq + (size_t)(t0 + (t < m ? t : 0)) * xrb;
        float *yt = y + t0 * ys;
        switch (m) {
        case 8: pp_tile(kind, n, qv, sc, mn, x, 8, yt, ys); break;
        case 7: pp_tile(kind, n, qv, sc, mn, x, 7, yt, ys); break;
        case 6: pp_tile(kind, n, qv, sc, mn, x, 6, yt, ys); break;
        case 5: pp_tile(kind, n, qv, sc, mn, x, 5, yt, ys); break;
        case 4: pp_tile(kind, n, qv, sc, mn, x, 4, yt, ys); break;
        case 3: pp_tile(kind, n, qv, sc, mn, x, 3, yt, ys); break;
        case 2: pp_tile(kind, n, qv, sc, mn, x, 2, yt, ys); break;
        default: pp_tile(kind, n, qv, sc, mn, x, 1, yt, ys); break;
        }
    }
}

typedef void (*repack_fn)(int64_t n, const uint8_t *w, size_t wrb, uint8_t *qv, float *sc,
                          float *mn);

INLINE void gemm_pp(const int kind, repack_fn repack, lp__gemm_fn rows, int64_t n,
                    const void *w, size_t wrb, int64_t nr, const void *xq, size_t xrb,
                    int64_t nt, float *y, int64_t ys, void *scratch)
{
    const int S = kind == PP_K16 ? 16 : 32;
    uint8_t *qv = scratch;
    float *sc = (float *)(qv + (size_t)n * RG); /* n*RG is a multiple of 64 */
    float *mn = sc + (size_t)(n / S) * RG;
    int64_t r = 0;
    for (; r + RG <= nr; r += RG) {
        repack(n, (const uint8_t *)w + (size_t)r * wrb, wrb, qv, sc, mn);
        /* Few tokens leave the tiles too little work to hide the next
         * group's loads behind, so fetch that group into L2 now. */
        if (nt <= PP_PF_TOK && r + 2 * RG <= nr) {
            const char *nx = (const char *)w + (size_t)(r + RG) * wrb;
            for (size_t o = 0; o < (size_t)RG * wrb; o += 64) _mm_prefetch(nx + o, PF_HINT);
        }
        pp_tiles(kind, n, qv, sc, mn, xq, xrb, nt, y + r, ys);
    }
    if (r < nr) rows(n, (const uint8_t *)w + (size_t)r * wrb, wrb, nr - r, xq, xrb, nt, y + r, ys);
}

#define DEFINE_GEMM_PP(name, kind, repack, rows)                                          \
    static void name(int64_t n, const void *w, size_t wrb, int64_t nr, const void *xq,    \
                     size_t xrb, int64_t nt, float *y, int64_t ys, void *scratch)         \
    {                                                                                     \
        gemm_pp(kind, repack, rows, n, w, wrb, nr, xq, xrb, nt, y, ys, scratch);          \
    }

DEFINE_GEMM_PP(gemm_pp_q4_k, PP_K32, repack_q4_k, gemm_q4_k)
DEFINE_GEMM_PP(gemm_pp_q5_k, PP_K32, repack_q5_k, gemm_q5_k)
DEFINE_GEMM_PP(gemm_pp_q6_k, PP_K16, repack_q6_k, gemm_q6_k)
#if defined(LP_KERN_VNNI)
DEFINE_GEMM_PP(gemm_pp_q8_0, PP_A32, repack_q8_0, gemm_q8_0)
#endif
DEFINE_GEMM_PP(gemm_pp_q4_0, PP_A32, repack_q4_0, gemm_q4_0)
DEFINE_GEMM_PP(gemm_pp_q5_0, PP_A32, repack_q5_0, gemm_q5_0)

/* ---- batched GEMM on weights packed at load -----------------------------
 *
 * The repacking above runs on every call, and in a decode batch of 8-16
 * tokens it costs as much as the dot products.  lp_matmul_pack stores each
 * row group once in the tile's order, as compact as the file: 4-bit halves
 * of two byte vectors in one, the fifth bit (Q5_0) as a 64-bit mask per
 * vector, Q6_K's top two bits four to a byte, the file's fp16 d and int8
 * scales.  The tile rebuilds the byte vectors with an AND and a shift, and
 * the scales as the repacking computes them, so results are bit for bit
 * those of gemm_pp.
 *
 * Group layout (LP_PP_ROWS rows), one record per unit (legacy) or per
 * super-block (Q6_K):
 *   Q4_0  nib[4][64] d16[16]              288 bytes per 32 weights
 *   Q5_0  nib[4][64] hb[8] (u64) d16[16]  352
 *   Q8_0  q[8][64] d16[16]                544
 *   Q6_K  (nib[2][64] hb[64]) x 16 units, sc[16 units][16 rows], d16[16]
 *                                         3360 per 256 weights */
enum { PK_Q4_0, PK_Q5_0, PK_Q8_0, PK_Q6_K };

#define PK_Q6K_UNIT 192
#define PK_Q6K_SC (16 * PK_Q6K_UNIT)
#define PK_Q6K_D (PK_Q6K_SC + 256)

INLINE size_t pk_rec(const int pt)
{
    return lp__pk_rec_bytes(pt == PK_Q4_0 ? LP_TYPE_Q4_0 : pt == PK_Q5_0 ? LP_TYPE_Q5_0
                            : pt == PK_Q8_0 ? LP_TYPE_Q8_0 : LP_TYPE_Q6_K);
}

/* The byte vectors of one unit (see the scratch layout of gemm_pp). */
INLINE void pk_unpack(const int pt, const uint8_t *u, __m512i W[8])
{
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    if (pt == PK_Q8_0) {
        _Pragma("GCC unroll 8") for (int g = 0; g < 8; g++)
            W[g] = _mm512_loadu_si512((const void *)(u + 64 * g));
    } else if (pt == PK_Q6_K) {
        const __m512i m30 = _mm512_set1_epi8(0x30);
        __m512i p0 = _mm512_loadu_si512((const void *)u);
        __m512i p1 = _mm512_loadu_si512((const void *)(u + 64));
        __m512i h = _mm512_loadu_si512((const void *)(u + 128));
        W[0] = _mm512_or_si512(_mm512_and_si512(p0, m4),
                               _mm512_and_si512(_mm512_slli_epi16(h, 4), m30));
        W[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(p0, 4), m4),
                               _mm512_and_si512(_mm512_slli_epi16(h, 2), m30));
        W[2] = _mm512_or_si512(_mm512_and_si512(p1, m4), _mm512_and_si512(h, m30));
        W[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(p1, 4), m4),
                               _mm512_and_si512(_mm512_srli_epi16(h, 2), m30));
    } else {
        _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
            __m512i p = _mm512_loadu_si512((const void *)(u + 64 * j));
            W[2 * j] = _mm512_and_si512(p, m4);
            W[2 * j + 1] = _mm512_and_si512(_mm512_srli_epi16(p, 4), m4);
        }
        if (pt == PK_Q5_0) {
            const __m512i b4 = _mm512_set1_epi8(0x10);
            _Pragma("GCC unroll 8") for (int g = 0; g < 8; g++) {
                uint64_t m;
                memcpy(&m, u + 256 + 8 * g, 8);
                W[g] = _mm512_mask_add_epi8(W[g], _cvtu64_mask64(m), W[g], b4);
            }
        }
    }
}

/* pp_tile on a packed group. */
INLINE void pk_tile(const int pt, int64_t n, const uint8_t *pg, const uint8_t *pf,
                    const uint8_t *const *x, const int nt, float *y, int64_t ys)
{
    const int k16 = pt == PK_Q6_K;
    const int S = k16 ? 16 : 32, G = S / 4, U = k16 ? 16 : 1;
    const size_t xbb = k16 ? sizeof(lp__q8k_t) : sizeof(lp__q8a_t), rec = pk_rec(pt);
    const float mnk = pt == PK_Q4_0 ? 8.0f : pt == PK_Q5_0 ? 16.0f : pt == PK_Q8_0 ? 128.0f : 32.0f;
    __m512 tot[PT];
    _Pragma("GCC unroll 16") for (int t = 0; t < nt; t++) tot[t] = _mm512_setzero_ps();
    for (int64_t blk = 0; blk < n / (S * U); blk++) {
        const uint8_t *b = pg + (size_t)blk * rec;
        if (pf) /* the next group, record by record: a steady stream */
            for (size_t o = 0; o < rec; o += 64) _mm_prefetch((const char *)pf + blk * rec + o, PF_HINT);
        __m512 D = _mm512_cvtph_ps(_mm256_loadu_si256(
            (const __m256i *)(b + (k16 ? PK_Q6K_D : rec - 32))));
        __m512 fs[PT];
        _Pragma("GCC unroll 16") for (int t = 0; t < nt; t++) fs[t] = _mm512_setzero_ps();
        for (int u = 0; u < U; u++) {
            __m512i W[8];
            pk_unpack(pt, b + (k16 ? (size_t)u * PK_Q6K_UNIT : 0), W);
            __m512 SC = D;
            if (k16)
                SC = _mm512_mul_ps(D, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                                          _mm_loadu_si128((const __m128i *)(b + PK_Q6K_SC + 16 * u)))));
            __m512 MN = _mm512_mul_ps(SC, _mm512_set1_ps(mnk)); /* exact: a power of two */
            _Pragma("GCC unroll 16") for (int t = 0; t < nt; t++) {
                const uint8_t *xb = x[t] + (size_t)blk * xbb;
                __m512i acc = unit_dot(W, G, xb + u * S);
                fs[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), SC, fs[t]);
                float xsum = k16 ? ((const lp__q8k_t *)xb)->fbsums[u] : ((const lp__q8a_t *)xb)->fsum;
                fs[t] = _mm512_fnmadd_ps(MN, _mm512_set1_ps(xsum), fs[t]);
            }
        }
        _Pragma("GCC unroll 16") for (int t = 0; t < nt; t++) {
            float dx = k16 ? ((const lp__q8k_t *)(x[t] + (size_t)blk * xbb))->d
                           : ((const lp__q8a_t *)(x[t] + (size_t)blk * xbb))->d;
            tot[t] = _mm512_fmadd_ps(fs[t], _mm512_set1_ps(dx), tot[t]);
        }
    }
    _Pragma("GCC unroll 16") for (int t = 0; t < nt; t++) _mm512_storeu_ps(y + t * ys, tot[t]);
}

/* A packed group back into gemm_pp's scratch layout (qv, SC, MN). */
INLINE void pk_expand(const int pt, int64_t n, const uint8_t *pg, uint8_t *qv, float *sc,
                      float *mn)
{
    const int k16 = pt == PK_Q6_K;
    const int S = k16 ? 16 : 32, G = S / 4, U = k16 ? 16 : 1;
    const size_t rec = pk_rec(pt);
    const float mnk = pt == PK_Q4_0 ? 8.0f : pt == PK_Q5_0 ? 16.0f : pt == PK_Q8_0 ? 128.0f : 32.0f;
    for (int64_t blk = 0; blk < n / (S * U); blk++) {
        const uint8_t *b = pg + (size_t)blk * rec;
        __m512 D = _mm512_cvtph_ps(_mm256_loadu_si256(
            (const __m256i *)(b + (k16 ? PK_Q6K_D : rec - 32))));
        for (int u = 0; u < U; u++) {
            int64_t unit = blk * U + u;
            __m512i W[8];
            pk_unpack(pt, b + (k16 ? (size_t)u * PK_Q6K_UNIT : 0), W);
            _Pragma("GCC unroll 8") for (int g = 0; g < G; g++)
                _mm512_store_si512((void *)(qv + ((size_t)unit * G + g) * 64), W[g]);
            __m512 SC = D;
            if (k16)
                SC = _mm512_mul_ps(D, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                                          _mm_loadu_si128((const __m128i *)(b + PK_Q6K_SC + 16 * u)))));
            _mm512_store_ps(sc + unit * RG, SC);
            _mm512_store_ps(mn + unit * RG, _mm512_mul_ps(SC, _mm512_set1_ps(mnk)));
        }
    }
}

/* Past this many tokens a group is expanded once into scratch for the
 * plain tile, rather than unpacked again by every tile of 8 tokens. */
#define PK_EXPAND_TOK 32

INLINE void gemm_pk(const int pt, int64_t n, const void *pk, size_t gb, int64_t ng,
                    const void *xq, size_t xrb, int64_t nt, float *y, int64_t ys, void *scratch)
{
    if (nt > PK_EXPAND_TOK) {
        const int S = pt == PK_Q6_K ? 16 : 32, kind = pt == PK_Q6_K ? PP_K16 : PP_A32;
        uint8_t *qv = scratch;
        float *sc = (float *)(qv + (size_t)n * RG);
        float *mn = sc + (size_t)(n / S) * RG;
        for (int64_t g = 0; g < ng; g++) {
            pk_expand(pt, n, (const uint8_t *)pk + (size_t)g * gb, qv, sc, mn);
            pp_tiles(kind, n, qv, sc, mn, xq, xrb, nt, y + g * RG, ys);
        }
        return;
    }
    for (int64_t g = 0; g < ng; g++) {
        const uint8_t *pg = (const uint8_t *)pk + (size_t)g * gb;
        for (int64_t t0 = 0; t0 < nt; t0 += PT) {
            const uint8_t *pf = t0 == 0 && nt <= PP_PF_TOK && g + 1 < ng ? pg + gb : NULL;
            int m = nt - t0 < PT ? (int)(nt - t0) : PT;
            const uint8_t *x[PT];
            for (int t = 0; t < PT; t++)
                x[t] = (const uint8_t *)xq + (size_t)(t0 + (t < m ? t : 0)) * xrb;
            float *yt = y + t0 * ys + g * RG;
            switch (m) {
            case 8: pk_tile(pt, n, pg, pf, x, 8, yt, ys); break;
            case 7: pk_tile(pt, n, pg, pf, x, 7, yt, ys); break;
            case 6: pk_tile(pt, n, pg, pf, x, 6, yt, ys); break;
            case 5: pk_tile(pt, n, pg, pf, x, 5, yt, ys); break;
            case 4: pk_tile(pt, n, pg, pf, x, 4, yt, ys); break;
            case 3: pk_tile(pt, n, pg, pf, x, 3, yt, ys); break;
            case 2: pk_tile(pt, n, pg, pf, x, 2, yt, ys); break;
            default: pk_tile(pt, n, pg, pf, x, 1, yt, ys); break;
            }
        }
    }
}

/* One row group (w: RG rows of wrb bytes) into dst, via the repacking;
 * scratch: LP_PP_SCRATCH(n) bytes. */
static void pack_group(const int pt, repack_fn repack, int64_t n, const uint8_t *w, size_t wrb,
                       uint8_t *dst, void *scratch)
{
    const int k16 = pt == PK_Q6_K, S = k16 ? 16 : 32, G = S / 4;
    const size_t rec = pk_rec(pt);
    uint8_t *qv = scratch;
    float *sc = (float *)(qv + (size_t)n * RG);
    repack(n, w, wrb, qv, sc, sc + (size_t)(n / S) * RG);
    for (int64_t u = 0; u < n / S; u++) {
        const uint8_t *q = qv + (size_t)u * G * 64;
        uint8_t *o = k16 ? dst + (size_t)(u / 16) * rec + (size_t)(u % 16) * PK_Q6K_UNIT
                         : dst + (size_t)u * rec;
        if (pt == PK_Q8_0) {
            memcpy(o, q, 512);
        } else if (k16) {
            for (int i = 0; i < 64; i++) {
                o[i] = (uint8_t)((q[i] & 15) | (q[64 + i] & 15) << 4);
                o[64 + i] = (uint8_t)((q[128 + i] & 15) | (q[192 + i] & 15) << 4);
                o[128 + i] = (uint8_t)(q[i] >> 4 | (q[64 + i] >> 4) << 2 | (q[128 + i] >> 4) << 4 |
                                       (q[192 + i] >> 4) << 6);
            }
        } else {
            for (int j = 0; j < 4; j++)
                for (int i = 0; i < 64; i++)
                    o[64 * j + i] = (uint8_t)((q[128 * j + i] & 15) | (q[128 * j + 64 + i] & 15) << 4);
            if (pt == PK_Q5_0)
                for (int g = 0; g < 8; g++) {
                    uint64_t m = 0;
                    for (int i = 0; i < 64; i++) m |= (uint64_t)(q[64 * g + i] >> 4 & 1) << i;
                    memcpy(o + 256 + 8 * g, &m, 8);
                }
        }
        for (int r = 0; r < RG; r++) {
            const uint8_t *row = w + (size_t)r * wrb;
            if (k16) {
                const lp_block_q6_k_t *b = (const lp_block_q6_k_t *)row + u / 16;
                o = dst + (size_t)(u / 16) * rec;
                o[PK_Q6K_SC + 16 * (u % 16) + r] = (uint8_t)b->scales[u % 16];
                memcpy(o + PK_Q6K_D + 2 * r, &b->d, 2);
            } else {
                /* d leads every legacy block */
                size_t bb = pt == PK_Q4_0 ? sizeof(lp_block_q4_0_t)
                          : pt == PK_Q5_0 ? sizeof(lp_block_q5_0_t) : sizeof(lp_block_q8_0_t);
                memcpy(o + rec - 32 + 2 * r, row + (size_t)u * bb, 2);
            }
        }
    }
}

#define DEFINE_PK(pack, gemm, pt, repack)                                                  \
    static void pack(int64_t n, const void *w, size_t wrb, uint8_t *dst, void *scratch)    \
    {                                                                                      \
        pack_group(pt, repack, n, w, wrb, dst, scratch);                                   \
    }                                                                                      \
    static void gemm(int64_t n, const void *pk, size_t gb, int64_t ng, const void *xq,     \
                     size_t xrb, int64_t nt, float *y, int64_t ys, void *scratch)          \
    {                                                                                      \
        gemm_pk(pt, n, pk, gb, ng, xq, xrb, nt, y, ys, scratch);                           \
    }

DEFINE_PK(pack_q4_0, gemm_pk_q4_0, PK_Q4_0, repack_q4_0)
DEFINE_PK(pack_q5_0, gemm_pk_q5_0, PK_Q5_0, repack_q5_0)
DEFINE_PK(pack_q6_k, gemm_pk_q6_k, PK_Q6_K, repack_q6_k)
#if defined(LP_KERN_VNNI)
DEFINE_PK(pack_q8_0, gemm_pk_q8_0, PK_Q8_0, repack_q8_0)
#endif

#endif /* LP_KERN_AVX512 */

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
        _Pragma("GCC unroll 16") for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(x + 8 * k);
            mx = _mm256_max_ps(mx, _mm256_and_ps(v[k], absm));
        }
        float amax = hmax_ps(mx);
        float d = amax / 127.0f;
        float id = amax != 0 ? 127.0f / amax : 0.0f;
        __m256 vid = _mm256_set1_ps(id);
        __m256i q[4];
        _Pragma("GCC unroll 16") for (int k = 0; k < 4; k++) q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], vid));
        _mm256_storeu_si256((__m256i *)b->qs, pack_i32x4(q[0], q[1], q[2], q[3]));
        int sum = hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]),
                                              _mm256_add_epi32(q[2], q[3])));
        b->d = _cvtsh_ss(_cvtss_sh(d, 0));
        b->sum = (int16_t)sum;
        b->fsum = (float)sum;
        b->pad = 0;
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
            _Pragma("GCC unroll 16") for (int k = 0; k < 4; k++)
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
            b->fbsums[2 * g] = (float)b->bsums[2 * g];
            b->fbsums[2 * g + 1] = (float)b->bsums[2 * g + 1];
            b->fbsums32[g] = (float)(b->bsums[2 * g] + b->bsums[2 * g + 1]);
        }
        b->d = 1.0f / iscale;
    }
}

/* ---- float vectors ------------------------------------------------------ */

static float vdot_f32(const float *a, const float *b, int64_t n)
{
    FV s0 = f_zero(), s1 = f_zero(), s2 = f_zero(), s3 = f_zero();
    int64_t i = 0;
    for (; i + 4 * FW <= n; i += 4 * FW) {
        s0 = f_fmadd(f_load(a + i), f_load(b + i), s0);
        s1 = f_fmadd(f_load(a + i + FW), f_load(b + i + FW), s1);
        s2 = f_fmadd(f_load(a + i + 2 * FW), f_load(b + i + 2 * FW), s2);
        s3 = f_fmadd(f_load(a + i + 3 * FW), f_load(b + i + 3 * FW), s3);
    }
    for (; i + FW <= n; i += FW) s0 = f_fmadd(f_load(a + i), f_load(b + i), s0);
#if defined(LP_KERN_AVX512)
    float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
#else
    float s = hsum_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
#endif
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

static void vaxpy_f32(float *y, float s, const float *x, int64_t n)
{
    int64_t i = 0;
#if defined(LP_KERN_AVX512)
    __m512 vs = _mm512_set1_ps(s);
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(vs, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
#else
    __m256 vs = _mm256_set1_ps(s);
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(vs, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
#endif
    for (; i < n; i++) y[i] += s * x[i];
}

const lp__kern_t KERN_SYM = {
    .name = KERN_NAME,
    .gemm = {
        [LP_TYPE_F32] = gemm_f32, [LP_TYPE_F16] = gemm_f16, [LP_TYPE_BF16] = gemm_bf16,
        [LP_TYPE_Q4_0] = gemm_q4_0, [LP_TYPE_Q4_1] = gemm_q4_1, [LP_TYPE_Q5_0] = gemm_q5_0,
        [LP_TYPE_Q5_1] = gemm_q5_1, [LP_TYPE_Q8_0] = gemm_q8_0, [LP_TYPE_Q4_K] = gemm_q4_k,
        [LP_TYPE_Q5_K] = gemm_q5_k, [LP_TYPE_Q6_K] = gemm_q6_k, [LP_TYPE_MXFP4] = gemm_mxfp4,
    },
    .gemv = {
        [LP_TYPE_Q4_0] = gemm_q4_0_v, [LP_TYPE_Q4_1] = gemm_q4_1_v, [LP_TYPE_Q5_0] = gemm_q5_0_v,
        [LP_TYPE_Q5_1] = gemm_q5_1_v, [LP_TYPE_Q8_0] = gemm_q8_0_v, [LP_TYPE_Q4_K] = gemm_q4_k_v,
        [LP_TYPE_Q5_K] = gemm_q5_k_v, [LP_TYPE_Q6_K] = gemm_q6_k_v,
        [LP_TYPE_MXFP4] = gemm_mxfp4_v,
    },
#if defined(LP_KERN_AVX512)
    .gemm_pp = {
        [LP_TYPE_Q4_K] = gemm_pp_q4_k, [LP_TYPE_Q5_K] = gemm_pp_q5_k,
        [LP_TYPE_Q6_K] = gemm_pp_q6_k, [LP_TYPE_Q4_0] = gemm_pp_q4_0,
        [LP_TYPE_Q5_0] = gemm_pp_q5_0,
#if defined(LP_KERN_VNNI)
        [LP_TYPE_Q8_0] = gemm_pp_q8_0,
#endif
    },
    .pack = {
        [LP_TYPE_Q4_0] = pack_q4_0, [LP_TYPE_Q5_0] = pack_q5_0, [LP_TYPE_Q6_K] = pack_q6_k,
#if defined(LP_KERN_VNNI)
        [LP_TYPE_Q8_0] = pack_q8_0,
#endif
    },
    .gemm_pk = {
        [LP_TYPE_Q4_0] = gemm_pk_q4_0, [LP_TYPE_Q5_0] = gemm_pk_q5_0, [LP_TYPE_Q6_K] = gemm_pk_q6_k,
#if defined(LP_KERN_VNNI)
        [LP_TYPE_Q8_0] = gemm_pk_q8_0,
#endif
    },
#endif
    .quant_q8a = quant_q8a,
    .quant_q8k = quant_q8k,
    .dot_f32 = vdot_f32,
    .axpy_f32 = vaxpy_f32,
#if defined(LP_KERN_AVX512)
    .swiglu_f32 = lp__swiglu_avx512,
    .add_rmsnorm_f32 = lp__add_rmsnorm_avx512,
    .rope_f32 = lp__rope_avx512,
    .geglu_f32 = lp__geglu_avx512,
    .softcap_f32 = lp__softcap_avx512,
#else
    .swiglu_f32 = lp__swiglu_avx2,
    .add_rmsnorm_f32 = lp__add_rmsnorm_avx2,
    .rope_f32 = lp__rope_avx2,
    .geglu_f32 = lp__geglu_avx2,
    .softcap_f32 = lp__softcap_avx2,
#endif
};
