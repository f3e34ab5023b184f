/* attn-scalar.c - the blocked attention kernel in plain C (any CPU, and
 * LMPIPE_ISA=scalar).  One row at a time: a block of LP_ATTN_KB scores,
 * then the online-softmax update of the row's maximum, sum and output. */
#include "attn-kern.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* Eight partial sums, as the scalar kernel set's float dot. */
static float dot(const float *a, const float *b, int32_t n)
{
    float s[8] = {0};
    int32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) s[k] += a[i + k] * b[i + k];
    for (; i < n; i++) s[0] += a[i] * b[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

static void tile_scalar(int32_t nr, const float *const *q, float *const *out,
                        const int32_t *k_lo, const int32_t *n_keys, const float *k,
                        const float *v, const int64_t *off,
                        int32_t hd, float scale, const float *sink, float *scratch)
{
    float *o = scratch, *s = scratch + hd; /* (hd) output, (LP_ATTN_KB) scores */
    for (int32_t r = 0; r < nr; r++) {
        const float *qr = q[r];
        float m = -FLT_MAX, l = 0;
        memset(o, 0, sizeof(float) * (size_t)hd);
        for (int32_t j0 = k_lo ? k_lo[r] : 0; j0 < n_keys[r]; j0 += LP_ATTN_KB) {
            const int32_t kb = n_keys[r] - j0 < LP_ATTN_KB ? n_keys[r] - j0 : LP_ATTN_KB;
            float bm = -FLT_MAX;
            for (int32_t j = 0; j < kb; j++) {
                s[j] = dot(qr, k + off[j0 + j], hd) * scale;
                if (s[j] > bm) bm = s[j];
            }
            const float mn = bm > m ? bm : m, alpha = expf(m - mn);
            m = mn;
            l *= alpha;
            for (int32_t i = 0; i < hd; i++) o[i] *= alpha;
            for (int32_t j = 0; j < kb; j++) {
                const float p = expf(s[j] - mn);
                const float *vj = v + off[j0 + j];
                l += p;
                for (int32_t i = 0; i < hd; i++) o[i] += p * vj[i];
            }
        }
        if (sink && l > 0) l += expf(sink[r] - m); /* a logit with no value */
        const float inv = l > 0 ? 1.0f / l : 0.0f; /* no keys: zeros, not NaN */
        for (int32_t i = 0; i < hd; i++) out[r][i] = o[i] * inv;
    }
}

const lp__attn_kern_t lp__attn_scalar = {
    .name = "scalar",
    .rows = 16, /* <= LP_ATTN_ROWS_MAX */
    .tile = tile_scalar,
};
