/* act-x86.c - element-wise operations on float vectors (SwiGLU, RMS norm,
 * RoPE), compiled twice (avx2, avx512) like attn-x86.c; the vnni kernel set
 * uses avx512's. */
#include <math.h>
#include <stdbool.h>

#include "kern.h"
#include "ops.h"
#include "vmath-x86.h"

#if defined(LP_KERN_AVX512)
#define SWIGLU_SYM lp__swiglu_avx512
#else
#define SWIGLU_SYM lp__swiglu_avx2
#endif

/* out = g / (1 + e^-g) * u.  v_exp's clamps keep the quotient finite: for
 * g below -88 it is g / 2.4e38, about 0, where expf would give g / inf. */
void SWIGLU_SYM(float *out, const float *g, const float *u, int64_t n)
{
    const V one = v_set1(1.0f);
    int64_t i = 0;
    for (; i + VW <= n; i += VW) {
        V x = v_loadu(g + i);
        V s = v_div(x, v_add(one, v_exp(v_sub(v_zero(), x))));
        v_storeu(out + i, v_mul(s, v_loadu(u + i)));
    }
    for (; i < n; i++) out[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

#if defined(LP_KERN_AVX512)
#define RMSNORM_SYM lp__add_rmsnorm_avx512
#define ROPE_SYM lp__rope_avx512
typedef __m512d VD;
INLINE VD vd_zero(void) { return _mm512_setzero_pd(); }
/* acc + the squares of v's lanes, in double, into two accumulators */
INLINE void vd_sq2(V v, VD *a0, VD *a1)
{
    VD lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    VD hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    *a0 = _mm512_fmadd_pd(lo, lo, *a0);
    *a1 = _mm512_fmadd_pd(hi, hi, *a1);
}
INLINE double vd_hsum(VD a) { return _mm512_reduce_add_pd(a); }
/* cs[0..VW/2) as pairs: c0 c0 c1 c1 ... */
INLINE V v_pairs(const float *p)
{
    const __m512i idx = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    return _mm512_permutexvar_ps(idx, _mm512_castps256_ps512(_mm256_loadu_ps(p)));
}
INLINE V v_swap_pairs(V x) { return _mm512_permute_ps(x, 0xb1); }
INLINE V v_neg_even(V x) { return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi64(0x80000000))); }
#else
#define RMSNORM_SYM lp__add_rmsnorm_avx2
#define ROPE_SYM lp__rope_avx2
typedef __m256d VD;
INLINE VD vd_zero(void) { return _mm256_setzero_pd(); }
INLINE void vd_sq2(V v, VD *a0, VD *a1)
{
    VD lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
    VD hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    *a0 = _mm256_fmadd_pd(lo, lo, *a0);
    *a1 = _mm256_fmadd_pd(hi, hi, *a1);
}
INLINE double vd_hsum(VD a)
{
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}
INLINE V v_pairs(const float *p)
{
    const __m256i idx = _mm256_set_epi32(3, 3, 2, 2, 1, 1, 0, 0);
    return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(p)), idx);
}
INLINE V v_swap_pairs(V x) { return _mm256_permute_ps(x, 0xb1); }
INLINE V v_neg_even(V x) { return _mm256_castsi256_ps(_mm256_xor_si256(_mm256_castps_si256(x), _mm256_set1_epi64x(0x80000000))); }
#endif

/* x += r (r may be NULL); y = x / sqrt(mean(x^2) + eps) * w, the squares
 * summed in double as lp_op_rmsnorm does (in another order). */
void RMSNORM_SYM(float *y, float *x, const float *r, const float *w, int64_t n, float eps)
{
    VD a0 = vd_zero(), a1 = vd_zero();
    int64_t i = 0;
    for (; i + VW <= n; i += VW) {
        V v = v_loadu(x + i);
        if (r) v_storeu(x + i, v = v_add(v, v_loadu(r + i)));
        vd_sq2(v, &a0, &a1);
    }
    double sum = vd_hsum(a0) + vd_hsum(a1);
    for (; i < n; i++) {
        if (r) x[i] += r[i];
        sum += (double)x[i] * x[i];
    }
    const float scale = (float)(1.0 / sqrt(sum / (double)n + eps));
    const V vs = v_set1(scale);
    for (i = 0; i + VW <= n; i += VW) v_storeu(y + i, v_mul(v_mul(v_loadu(x + i), vs), v_loadu(w + i)));
    for (; i < n; i++) y[i] = x[i] * scale * w[i];
}

/* lp_op_rope_apply: the pairs in vectors of pairs, each vector of angles
 * applied to every head.  NEOX pairs (i, i + n_rot/2) sit in two vectors;
 * normal pairs (2i, 2i+1) in one, as x * (c c) + (x1 x0) * (-s s). */
void ROPE_SYM(float *x, int32_t n_heads, int32_t head_dim, int32_t n_rot, const float *cs,
              const float *sn, bool neox)
{
    const int32_t half = n_rot / 2, step = neox ? VW : VW / 2; /* pairs per vector */
    int32_t i0 = 0;
    for (; i0 + step <= half; i0 += step) {
        if (neox) {
            const V c = v_loadu(cs + i0), s = v_loadu(sn + i0);
            for (int32_t h = 0; h < n_heads; h++) {
                float *xa = x + (int64_t)h * head_dim + i0, *xb = xa + half;
                const V x0 = v_loadu(xa), x1 = v_loadu(xb);
                v_storeu(xa, v_sub(v_mul(x0, c), v_mul(x1, s)));
                v_storeu(xb, v_add(v_mul(x0, s), v_mul(x1, c)));
            }
        } else {
            const V c = v_pairs(cs + i0), s = v_neg_even(v_pairs(sn + i0));
            for (int32_t h = 0; h < n_heads; h++) {
                float *xp = x + (int64_t)h * head_dim + 2 * i0;
                const V v = v_loadu(xp);
                v_storeu(xp, v_add(v_mul(v, c), v_mul(v_swap_pairs(v), s)));
            }
        }
    }
    if (i0 < half)
        lp_op_rope_apply_range(x, n_heads, head_dim, n_rot, i0, half - i0, cs + i0, sn + i0, neox);
}

#if defined(LP_KERN_AVX512)
#define GEGLU_SYM lp__geglu_avx512
#define SOFTCAP_SYM lp__softcap_avx512
/* the fp16 bits of x (round to nearest even), as 32-bit indices */
INLINE __m512i v_half_idx(V x)
{
    return _mm512_cvtepu16_epi32(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
INLINE V v_gather(const float *t, __m512i idx) { return _mm512_i32gather_ps(idx, t, 4); }
INLINE M m_le(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_LE_OQ); }
INLINE M m_ge(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
INLINE V v_abs(V x) { return _mm512_abs_ps(x); }
INLINE V v_copysign(V mag, V sgn)
{
    const __m512i m = _mm512_set1_epi32(0x80000000);
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(mag),
                                               _mm512_and_si512(_mm512_castps_si512(sgn), m)));
}
#else
#define GEGLU_SYM lp__geglu_avx2
#define SOFTCAP_SYM lp__softcap_avx2
INLINE __m256i v_half_idx(V x)
{
    return _mm256_cvtepu16_epi32(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
INLINE V v_gather(const float *t, __m256i idx) { return _mm256_i32gather_ps(t, idx, 4); }
INLINE M m_le(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_LE_OQ); }
INLINE M m_ge(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
INLINE V v_abs(V x) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x); }
INLINE V v_copysign(V mag, V sgn)
{
    return _mm256_or_ps(mag, _mm256_and_ps(sgn, _mm256_set1_ps(-0.0f)));
}
#endif

/* lp_op_geglu: g rounded to fp16 by the hardware (nearest even, as the
 * scalar conversion), its table entry gathered, times u; the two clamps. */
void GEGLU_SYM(float *out, const float *g, const float *u, int64_t n, const float *table)
{
    const V lo = v_set1(-10.0f), hi = v_set1(10.0f);
    int64_t i = 0;
    for (; i + VW <= n; i += VW) {
        const V x = v_loadu(g + i), up = v_loadu(u + i);
        V y = v_mul(v_gather(table, v_half_idx(x)), up);
        y = v_sel(m_ge(x, hi), v_mul(x, up), y);
        y = v_sel(m_le(x, lo), v_zero(), y);
        v_storeu(out + i, y);
    }
    if (i < n) lp_op_geglu(out + i, g + i, u + i, n - i);
}

/* tanh(y) = sign(y) (1 - 2 / (e^(2|y|) + 1)), with v_exp: within about
 * 1e-7 of tanhf absolutely, which is all a logit needs. */
void SOFTCAP_SYM(float *x, int64_t n, float cap)
{
    const float inv = 1.0f / cap;
    const V vinv = v_set1(inv), vcap = v_set1(cap), one = v_set1(1.0f), two = v_set1(2.0f);
    int64_t i = 0;
    for (; i + VW <= n; i += VW) {
        const V y = v_mul(v_loadu(x + i), vinv);
        const V e = v_exp(v_mul(two, v_abs(y)));
        const V t = v_sub(one, v_div(two, v_add(e, one)));
        v_storeu(x + i, v_mul(v_copysign(t, y), vcap));
    }
    for (; i < n; i++) x[i] = tanhf(x[i] * inv) * cap;
}
