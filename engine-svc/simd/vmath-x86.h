/* vmath-x86.h - internal: float vectors of one instruction set for the
 * float kernels (attention, activations), included by files compiled once
 * per ISA: V is __m512 with LP_KERN_AVX512, __m256 otherwise (AVX2+FMA);
 * VW floats per vector; M a lane mask. */
#ifndef LP_VMATH_X86_H
#define LP_VMATH_X86_H

#include <immintrin.h>

#ifndef INLINE
#define INLINE static inline __attribute__((always_inline))
#endif

#if defined(LP_KERN_AVX512)
#define VW 16 /* floats per vector */
typedef __m512 V;
typedef __mmask16 M;
INLINE V v_zero(void) { return _mm512_setzero_ps(); }
INLINE V v_set1(float x) { return _mm512_set1_ps(x); }
INLINE V v_load(const float *p) { return _mm512_load_ps(p); }
INLINE void v_store(float *p, V x) { _mm512_store_ps(p, x); }
INLINE V v_loadu(const float *p) { return _mm512_loadu_ps(p); }
INLINE void v_storeu(float *p, V x) { _mm512_storeu_ps(p, x); }
INLINE V v_div(V a, V b) { return _mm512_div_ps(a, b); }
INLINE V v_add(V a, V b) { return _mm512_add_ps(a, b); }
INLINE V v_sub(V a, V b) { return _mm512_sub_ps(a, b); }
INLINE V v_mul(V a, V b) { return _mm512_mul_ps(a, b); }
INLINE V v_max(V a, V b) { return _mm512_max_ps(a, b); }
INLINE V v_min(V a, V b) { return _mm512_min_ps(a, b); }
INLINE V v_fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
INLINE V v_fnmadd(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }
INLINE M m_gt(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
INLINE V v_sel(M m, V a, V b) { return _mm512_mask_blend_ps(m, b, a); } /* m ? a : b */
INLINE V v_round(V x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
INLINE V v_pow2n(V y, V n) { return _mm512_scalef_ps(y, n); } /* y * 2^n */
#else
#define VW 8
typedef __m256 V;
typedef __m256 M;
INLINE V v_zero(void) { return _mm256_setzero_ps(); }
INLINE V v_set1(float x) { return _mm256_set1_ps(x); }
INLINE V v_load(const float *p) { return _mm256_load_ps(p); }
INLINE void v_store(float *p, V x) { _mm256_store_ps(p, x); }
INLINE V v_loadu(const float *p) { return _mm256_loadu_ps(p); }
INLINE void v_storeu(float *p, V x) { _mm256_storeu_ps(p, x); }
INLINE V v_div(V a, V b) { return _mm256_div_ps(a, b); }
INLINE V v_add(V a, V b) { return _mm256_add_ps(a, b); }
INLINE V v_sub(V a, V b) { return _mm256_sub_ps(a, b); }
INLINE V v_mul(V a, V b) { return _mm256_mul_ps(a, b); }
INLINE V v_max(V a, V b) { return _mm256_max_ps(a, b); }
INLINE V v_min(V a, V b) { return _mm256_min_ps(a, b); }
INLINE V v_fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
INLINE V v_fnmadd(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }
INLINE M m_gt(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
INLINE V v_sel(M m, V a, V b) { return _mm256_blendv_ps(b, a, m); }
INLINE V v_round(V x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
/* n is a whole number in [-126, 127] after the clamps of v_exp. */
INLINE V v_pow2n(V y, V n)
{
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}
#endif

/* e^x, Cephes' expf: x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts),
 * e^r by a degree-7 polynomial, times 2^n; relative error about 2^-23.
 * x is clamped to [-87.33, 88.37]: below, e^x is under FLT_MIN and comes
 * out near FLT_MIN, not 0 (callers zero masked lanes themselves). */
INLINE V v_exp(V x)
{
    x = v_min(v_max(x, v_set1(-87.33654f)), v_set1(88.37626f));
    V n = v_round(v_mul(x, v_set1(1.44269504088896341f)));
    V r = v_fnmadd(n, v_set1(0.693359375f), x);
    r = v_fnmadd(n, v_set1(-2.12194440e-4f), r);
    V p = v_set1(1.9875691500e-4f);
    p = v_fmadd(p, r, v_set1(1.3981999507e-3f));
    p = v_fmadd(p, r, v_set1(8.3334519073e-3f));
    p = v_fmadd(p, r, v_set1(4.1665795894e-2f));
    p = v_fmadd(p, r, v_set1(1.6666665459e-1f));
    p = v_fmadd(p, r, v_set1(5.0000001201e-1f));
    p = v_fmadd(p, v_mul(r, r), v_add(r, v_set1(1.0f)));
    return v_pow2n(p, n);
}

#endif
