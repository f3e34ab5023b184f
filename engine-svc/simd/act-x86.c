/* act-x86.c - element-wise activations on float vectors, compiled twice
 * (avx2, avx512) like attn-x86.c; the vnni kernel set uses avx512's. */
#include <math.h>

#include "kern.h"
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
