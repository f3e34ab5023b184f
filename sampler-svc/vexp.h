/* vexp.h - a vectorised exp() for whole logit rows (GCC/Clang vector
 * extensions, 4 floats at a time; SSE2 on x86-64, NEON on arm64).  Relative
 * error below 2e-7 for x in [-87, 88]; exactly 0 below -87 (so -INFINITY,
 * the mark of an excluded token, gives 0). */
#ifndef LP_SAMPLER_VEXP_H
#define LP_SAMPLER_VEXP_H

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef float lp_v4f __attribute__((vector_size(16)));
typedef int32_t lp_v4i __attribute__((vector_size(16)));

static inline lp_v4f lp_vexp4(lp_v4f x)
{
    const lp_v4f lo = {-87.0f, -87.0f, -87.0f, -87.0f};
    const lp_v4f hi = {88.0f, 88.0f, 88.0f, 88.0f};
    lp_v4i keep = x >= lo; /* -1 where x >= -87 (false for NaN and -inf) */
    lp_v4i big = x > hi;
    x = (lp_v4f)(((lp_v4i)x & ~big) | ((lp_v4i)hi & big));
    x = (lp_v4f)(((lp_v4i)x & keep) | ((lp_v4i)lo & ~keep));
    const float log2e = 1.44269504088896341f;
    const float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
    const float shifter = 12582912.0f; /* 1.5 * 2^23: rounds to nearest */
    lp_v4f t = x * log2e + shifter;
    lp_v4f n = t - shifter;
    lp_v4f r = x - n * ln2_hi - n * ln2_lo;
    /* exp(r) for |r| <= 0.35: degree-6 Taylor/Horner */
    lp_v4f p = r * (1.0f / 720.0f) + (1.0f / 120.0f);
    p = p * r + (1.0f / 24.0f);
    p = p * r + (1.0f / 6.0f);
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    lp_v4i e = (__builtin_convertvector(n, lp_v4i) + 127) << 23;
    lp_v4f y = p * (lp_v4f)e;
    return (lp_v4f)((lp_v4i)y & keep);
}

/* out[i] = exp(x[i] - shift) for i < n (out may equal x); returns the sum
 * (accumulated in double per lane block for accuracy over long rows). */
static inline double lp_vexp_row(const float *x, float *out, int32_t n, float shift)
{
    double total = 0.0;
    lp_v4f acc = {0, 0, 0, 0};
    lp_v4f s = {shift, shift, shift, shift};
    int32_t i = 0, since_flush = 0;
    for (; i + 4 <= n; i += 4) {
        lp_v4f v;
        memcpy(&v, x + i, sizeof(v));
        lp_v4f e = lp_vexp4(v - s);
        if (out) memcpy(out + i, &e, sizeof(e));
        acc += e;
        if (++since_flush == 256) { /* flush float lanes into double */
            total += (double)acc[0] + acc[1] + acc[2] + acc[3];
            acc = (lp_v4f){0, 0, 0, 0};
            since_flush = 0;
        }
    }
    total += (double)acc[0] + acc[1] + acc[2] + acc[3];
    if (i < n) {
        lp_v4f v = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
        memcpy(&v, x + i, (size_t)(n - i) * sizeof(float));
        lp_v4f e = lp_vexp4(v - s);
        for (int32_t k = 0; i + k < n; k++) {
            if (out) out[i + k] = e[k];
            total += e[k];
        }
    }
    return total;
}

#endif
