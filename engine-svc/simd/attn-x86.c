/* attn-x86.c - the blocked attention kernel for x86-64, compiled twice:
 *   avx2   (-mavx2 -mfma): 8 rows per vector, up to 16 rows per tile;
 *   avx512 (+ AVX-512 F/BW/VL, LP_KERN_AVX512): 16 rows per vector, up to 32
 *          rows per tile (the vnni kernel set uses this one too).
 *
 * Layout (scratch, per tile of R = NV * W rows):
 *   qt (head_dim, R)    q transposed and multiplied by scale
 *   ot (head_dim, R)    output transposed, unnormalised
 *   pb (LP_ATTN_KB, R)  one block of scores, then of probabilities
 * With the rows in the lanes, scores are rank-1 updates: for each dim i,
 * a broadcast of k_j[i] times the vector qt[i] (rows), for a few keys j at
 * once; P.V is the same with v_j[i] and pb[j].  Masking, the online
 * softmax's running maximum m, sum l and the rescaling of ot by
 * alpha = exp(m_old - m_new) are lane-wise.  Keys are read straight from
 * the cache (broadcasts), never transposed. */
#include <immintrin.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "attn-kern.h"
#include "vmath-x86.h"


#if defined(LP_KERN_AVX512)
#define ATTN_SYM lp__attn_avx512
#define ATTN_NAME "avx512"
#define KJ 8 /* keys per score micro-tile */
#define DJ 8 /* dims per P.V micro-tile */
#else
#define ATTN_SYM lp__attn_avx2
#define ATTN_NAME "avx2"
#define KJ 4
#define DJ 4
#endif
#define W VW /* rows per vector */

#define NVMAX 2 /* vectors of rows per tile */
#define RMAX (NVMAX * W)
_Static_assert(RMAX <= LP_ATTN_ROWS_MAX, "attn.c passes at most LP_ATTN_ROWS_MAX rows");
#define NEG (-FLT_MAX) /* score of a masked key; the maximum before any key */

/* 8x8 transpose of floats in ymm registers (both builds have AVX2): the
 * transposes of q into qt and of ot into the output go 8 rows by 8 dims at
 * a time. */
INLINE void tr8x8(__m256 r[8])
{
    __m256 t[8], u[8];
    _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    _Pragma("GCC unroll 2") for (int i = 0; i < 2; i++) {
        u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

/* qt[i][r] = q[r][i] * scale for r < R (rows from nr on are zeros). */
INLINE void load_q(float *qt, int32_t R, int32_t nr, const float *const *q, int32_t hd, float scale)
{
    int32_t i0 = 0;
    if (hd % 8 == 0) {
        const __m256 vs = _mm256_set1_ps(scale);
        for (int32_t r0 = 0; r0 < R; r0 += 8) {
            for (i0 = 0; i0 < hd; i0 += 8) {
                __m256 x[8];
                _Pragma("GCC unroll 8") for (int rr = 0; rr < 8; rr++)
                    x[rr] = r0 + rr < nr ? _mm256_mul_ps(_mm256_loadu_ps(q[r0 + rr] + i0), vs)
                                         : _mm256_setzero_ps();
                tr8x8(x);
                _Pragma("GCC unroll 8") for (int ii = 0; ii < 8; ii++) _mm256_store_ps(qt + (int64_t)(i0 + ii) * R + r0, x[ii]);
            }
        }
        return;
    }
    for (int32_t r = 0; r < R; r++)
        for (int32_t i = 0; i < hd; i++) qt[(int64_t)i * R + r] = r < nr ? q[r][i] * scale : 0.0f;
}

/* out[r][i] = ot[i][r] * inv[r] for r < nr. */
INLINE void store_out(float *const *out, int32_t nr, const float *ot, int32_t R, const float *inv,
                      int32_t hd)
{
    if (hd % 8 == 0) {
        for (int32_t r0 = 0; r0 < nr; r0 += 8) {
            for (int32_t i0 = 0; i0 < hd; i0 += 8) {
                __m256 x[8];
                _Pragma("GCC unroll 8") for (int ii = 0; ii < 8; ii++) x[ii] = _mm256_load_ps(ot + (int64_t)(i0 + ii) * R + r0);
                tr8x8(x);
                _Pragma("GCC unroll 8") for (int rr = 0; rr < 8; rr++)
                    if (r0 + rr < nr)
                        _mm256_storeu_ps(out[r0 + rr] + i0, _mm256_mul_ps(x[rr], _mm256_set1_ps(inv[r0 + rr])));
            }
        }
        return;
    }
    for (int32_t r = 0; r < nr; r++)
        for (int32_t i = 0; i < hd; i++) out[r][i] = ot[(int64_t)i * R + r] * inv[r];
}

/* pb[j + jk][rows] = qt . k_{j + jk} for jk < NK (scale is in qt); key j's
 * row is at k + ob[j] (ob: the block's offsets). */
INLINE void score_micro(const int NV, const int NK, const float *qt, int32_t R, const float *k,
                        const int64_t *ob, int32_t j, int32_t hd, float *pb)
{
    V acc[KJ][NVMAX];
    const float *kr[KJ];
    _Pragma("GCC unroll 8") for (int jk = 0; jk < NK; jk++) {
        kr[jk] = k + ob[j + jk];
        _Pragma("GCC unroll 2") for (int c = 0; c < NV; c++) acc[jk][c] = v_zero();
    }
    for (int32_t i = 0; i < hd; i++) {
        V qv[NVMAX];
        _Pragma("GCC unroll 2") for (int c = 0; c < NV; c++) qv[c] = v_load(qt + (int64_t)i * R + c * W);
        _Pragma("GCC unroll 8") for (int jk = 0; jk < NK; jk++) {
            const V b = v_set1(kr[jk][i]);
            _Pragma("GCC unroll 2") for (int c = 0; c < NV; c++) acc[jk][c] = v_fmadd(b, qv[c], acc[jk][c]);
        }
    }
    _Pragma("GCC unroll 8") for (int jk = 0; jk < NK; jk++)
        _Pragma("GCC unroll 2") for (int c = 0; c < NV; c++) v_store(pb + (int64_t)(j + jk) * R + c * W, acc[jk][c]);
}

/* ot[d + dd][rows] = ot[d + dd][rows] * alpha + sum_j pb[j][rows] * v_j[d + dd]
 * for dd < ND, j < kb (v_j at v + ob[j]). */
INLINE void pv_micro(const int NV, const int ND, float *ot, int32_t R, int32_t d, const float *pb,
                     int32_t kb, const float *v, const int64_t *ob, const V *alpha)
{
    V acc[DJ][NVMAX];
    _Pragma("GCC unroll 8") for (int dd = 0; dd < ND; dd++)
        _Pragma("GCC unroll 2") for (int c = 0; c < NV; c++)
            acc[dd][c] = v_mul(v_load(ot + (int64_t)(d + dd) * R + c * W), alpha[c]);
    for (int32_t j = 0; j < kb; j++) {
        const float *vr = v + ob[j] + d;
        V p[NVMAX];
        _Pragma("GCC unroll 2") for (int c = 0; c < NV; c++) p[c] = v_load(pb + (int64_t)j * R + c * W);
        _Pragma("GCC unroll 8") for (int dd = 0; dd < ND; dd++) {
            const V b = v_set1(vr[dd]);
            _Pragma("GCC unroll 2") for (int c = 0; c < NV; c++) acc[dd][c] = v_fmadd(b, p[c], acc[dd][c]);
        }
    }
    _Pragma("GCC unroll 8") for (int dd = 0; dd < ND; dd++)
        _Pragma("GCC unroll 2") for (int c = 0; c < NV; c++)
            v_store(ot + (int64_t)(d + dd) * R + c * W, acc[dd][c]);
}

INLINE void tile_nv(const int NV, int32_t nr, const float *const *q, float *const *out,
                    const int32_t *k_lo, const int32_t *n_keys, const float *k, const float *v,
                    const int64_t *off, int32_t hd, float scale, const float *sink,
                    float *scratch)
{
    const int32_t R = NV * W;
    float *qt = scratch, *ot = qt + (size_t)hd * R, *pb = ot + (size_t)hd * R;
    _Alignas(64) float lim[RMAX], lov[RMAX], lv[RMAX];
    int32_t n_max = 0, n_min = INT32_MAX, lo_min = INT32_MAX, lo_max = 0;
    for (int32_t r = 0; r < R; r++) {
        const int32_t lo = r < nr && k_lo ? k_lo[r] : 0;
        if (r < nr) {
            n_max = n_keys[r] > n_max ? n_keys[r] : n_max;
            n_min = n_keys[r] < n_min ? n_keys[r] : n_min;
            lo_min = lo < lo_min ? lo : lo_min;
            lo_max = lo > lo_max ? lo : lo_max;
        }
        lim[r] = r < nr ? (float)n_keys[r] : 0; /* exact: n_keys < 2^24 */
        lov[r] = (float)lo;
    }
    if (lo_min == INT32_MAX) lo_min = 0;
    load_q(qt, R, nr, q, hd, scale);
    memset(ot, 0, sizeof(float) * (size_t)hd * (size_t)R);

    V m[NVMAX], l[NVMAX], limv[NVMAX], lowv[NVMAX];
    _Pragma("GCC unroll 2") for (int c = 0; c < NV; c++) {
        m[c] = v_set1(NEG);
        l[c] = v_zero();
        limv[c] = v_load(lim + c * W);
        lowv[c] = v_load(lov + c * W);
    }
    for (int32_t j0 = lo_min; j0 < n_max; j0 += LP_ATTN_KB) {
        const int32_t kb = n_max - j0 < LP_ATTN_KB ? n_max - j0 : LP_ATTN_KB;
        const int64_t *ob = off + j0; /* the block's key offsets */
        /* scores of the block */
        int32_t j = 0;
        for (; j + KJ <= kb; j += KJ) {
            /* In a decode step the cache comes from memory (the weights
             * passed through every cache since the last step), and the
             * few loads in flight at once would read it far below the
             * memory's rate: prefetch the keys one block ahead and this
             * block's values (docs/ATTENTION.md) */
            for (int32_t jj = j; jj < j + KJ; jj++) {
                const float *vn = v + ob[jj];
                for (int32_t o = 0; o < hd; o += 16) _mm_prefetch((const char *)(vn + o), _MM_HINT_T1);
                if (j0 + jj + LP_ATTN_KB >= n_max) continue;
                const float *kn = k + ob[jj + LP_ATTN_KB];
                for (int32_t o = 0; o < hd; o += 16) _mm_prefetch((const char *)(kn + o), _MM_HINT_T1);
            }
            score_micro(NV, KJ, qt, R, k, ob, j, hd, pb);
        }
        for (; j < kb; j++) score_micro(NV, 1, qt, R, k, ob, j, hd, pb);

        /* causal and window masks (only where some row sees fewer keys) and
         * block maximum */
        const int masked = j0 + kb > n_min || j0 < lo_max;
        V bm[NVMAX], alpha[NVMAX], sum[NVMAX];
        _Pragma("GCC unroll 2") for (int c = 0; c < NV; c++) bm[c] = v_set1(NEG);
        for (j = 0; j < kb; j++) {
            const V jv = v_set1((float)(j0 + j));
            _Pragma("GCC unroll 2") for (int c = 0; c < NV; c++) {
                V s = v_load(pb + (int64_t)j * R + c * W);
                if (masked) {
                    s = v_sel(m_gt(limv[c], jv), s, v_set1(NEG));
                    s = v_sel(m_gt(lowv[c], jv), v_set1(NEG), s);
                    v_store(pb + (int64_t)j * R + c * W, s);
                }
                bm[c] = v_max(bm[c], s);
            }
        }
        /* online softmax: new maximum, rescale factor, probabilities */
        _Pragma("GCC unroll 2") for (int c = 0; c < NV; c++) {
            const V mn = v_max(m[c], bm[c]);
            alpha[c] = v_exp(v_sub(m[c], mn));
            m[c] = mn;
            sum[c] = v_zero();
        }
        for (j = 0; j < kb; j++) {
            const V jv = v_set1((float)(j0 + j));
            _Pragma("GCC unroll 2") for (int c = 0; c < NV; c++) {
                V p = v_exp(v_sub(v_load(pb + (int64_t)j * R + c * W), m[c]));
                if (masked) {
                    p = v_sel(m_gt(limv[c], jv), p, v_zero());
                    p = v_sel(m_gt(lowv[c], jv), v_zero(), p);
                }
                v_store(pb + (int64_t)j * R + c * W, p);
                sum[c] = v_add(sum[c], p);
            }
        }
        _Pragma("GCC unroll 2") for (int c = 0; c < NV; c++) l[c] = v_fmadd(l[c], alpha[c], sum[c]);

        /* ot = ot * alpha + P . V */
        int32_t d = 0;
        for (; d + DJ <= hd; d += DJ) pv_micro(NV, DJ, ot, R, d, pb, kb, v, ob, alpha);
        for (; d < hd; d++) pv_micro(NV, 1, ot, R, d, pb, kb, v, ob, alpha);
    }

    /* normalise; a row that saw no key has l = 0 and gets zeros, not NaN */
    _Pragma("GCC unroll 2") for (int c = 0; c < NV; c++) v_store(lv + c * W, l[c]);
    if (sink) { /* a logit with no value in each row's denominator */
        _Alignas(64) float mv[RMAX];
        _Pragma("GCC unroll 2") for (int c = 0; c < NV; c++) v_store(mv + c * W, m[c]);
        for (int32_t r = 0; r < nr; r++)
            if (lv[r] > 0) lv[r] += expf(sink[r] - mv[r]);
    }
    for (int32_t r = 0; r < nr; r++) lv[r] = lv[r] > 0 ? 1.0f / lv[r] : 0.0f;
    store_out(out, nr, ot, R, lv, hd);
}

static void tile(int32_t nr, const float *const *q, float *const *out, const int32_t *k_lo,
                 const int32_t *n_keys, const float *k, const float *v, const int64_t *off,
                 int32_t hd, float scale, const float *sink, float *scratch)
{
    if (nr <= W) tile_nv(1, nr, q, out, k_lo, n_keys, k, v, off, hd, scale, sink, scratch);
    else tile_nv(2, nr, q, out, k_lo, n_keys, k, v, off, hd, scale, sink, scratch);
}

const lp__attn_kern_t ATTN_SYM = {
    .name = ATTN_NAME,
    .rows = RMAX,
    .tile = tile,
};
