/* row.c - whole-row kernels over a logit row: load (copy, NaN to -inf,
 * maximum), maximum, and exp-sum with a vectorised exp().  Written with
 * GCC/Clang vector extensions, 8 floats at a time; on x86-64 each kernel is
 * also built for AVX2+FMA and picked at load time (target_clones), so the
 * baseline build stays portable. */
#include "row.h"

#include <float.h>
#include <math.h>
#include <string.h>

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__)
#define LP_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define LP_CLONES
#endif

#define SPLAT(x) {x, x, x, x, x, x, x, x}

/* The helpers are macros or take pointers: a function passing 32-byte
 * vectors by value would have a different ABI in the AVX2 and the default
 * clones (GCC's -Wpsabi). */
#define V8_LOAD(v, p) memcpy(&(v), (p), sizeof(v8f))
#define V8_MAX(a, b) ((v8f)((((v8i)(a)) & ((a) > (b))) | (((v8i)(b)) & ~((a) > (b)))))

static inline float hmax8(const v8f *v)
{
    float m = (*v)[0];
    for (int i = 1; i < 8; i++) m = (*v)[i] > m ? (*v)[i] : m;
    return m;
}

/* *xp = exp(*xp) with relative error below 2e-7 on [-87, 88]; exactly 0
 * below -87 and for NaN (so -INFINITY, an excluded token, gives 0). */
static inline void v8_exp(v8f *xp)
{
    v8f x = *xp;
    const v8f lo = SPLAT(-87.0f), hi = SPLAT(88.0f);
    v8i keep = x >= lo;
    v8i big = x > hi;
    x = (v8f)(((v8i)x & ~big) | ((v8i)hi & big));
    x = (v8f)(((v8i)x & keep) | ((v8i)lo & ~keep));
    const float log2e = 1.44269504088896341f;
    const float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
    const float shifter = 12582912.0f; /* 1.5 * 2^23: rounds to nearest */
    v8f t = x * log2e + shifter;
    v8f n = t - shifter;
    v8f r = x - n * ln2_hi - n * ln2_lo;
    /* exp(r), |r| <= 0.35: degree-6 Taylor in Horner form */
    v8f p = r * (1.0f / 720.0f) + (1.0f / 120.0f);
    p = p * r + (1.0f / 24.0f);
    p = p * r + (1.0f / 6.0f);
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    v8i e = (__builtin_convertvector(n, v8i) + 127) << 23;
    v8f y = p * (v8f)e;
    *xp = (v8f)((v8i)y & keep);
}

LP_CLONES float lp__row_load(float *dst, const float *src, int32_t n, float *bmax)
{
    const v8f ninf = SPLAT(-INFINITY), pinf = SPLAT(INFINITY), fmax = SPLAT(FLT_MAX);
    v8f m = ninf;
    int32_t i = 0;
    for (; i + 64 <= n; i += 64) {
        v8f bm = ninf;
        for (int32_t j = i; j < i + 64; j += 8) {
            v8f x;
            V8_LOAD(x, src + j);
            v8i ok = x == x; /* false for NaN */
            x = (v8f)(((v8i)x & ok) | ((v8i)ninf & ~ok));
            v8i big = x == pinf; /* +inf would make every softmax NaN */
            x = (v8f)(((v8i)x & ~big) | ((v8i)fmax & big));
            memcpy(dst + j, &x, sizeof(x));
            bm = V8_MAX(x, bm);
        }
        if (bmax) bmax[i / 64] = hmax8(&bm);
        m = V8_MAX(bm, m);
    }
    float mx = hmax8(&m), bm = -INFINITY;
    for (int32_t t = i; t < n; t++) {
        float x = src[t] == src[t] ? src[t] : -INFINITY;
        if (x == INFINITY) x = FLT_MAX;
        dst[t] = x;
        bm = x > bm ? x : bm;
    }
    if (i < n && bmax) bmax[i / 64] = bm;
    return mx > bm ? mx : bm;
}

LP_CLONES float lp__row_max(const float *x, int32_t n, int32_t *arg)
{
    v8f m = SPLAT(-INFINITY);
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v8f v;
        V8_LOAD(v, x + i);
        m = V8_MAX(v, m);
    }
    float mx = hmax8(&m);
    for (; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    if (arg) {
        int32_t at = -1;
        if (mx != -INFINITY)
            for (int32_t j = 0; j < n; j++)
                if (x[j] == mx) {
                    at = j;
                    break;
                }
        *arg = at;
    }
    return mx;
}

LP_CLONES float lp__block_max64(const float *x)
{
    v8f a, b, c, d;
    V8_LOAD(a, x);
    V8_LOAD(b, x + 8);
    V8_LOAD(c, x + 16);
    V8_LOAD(d, x + 24);
    a = V8_MAX(a, b);
    c = V8_MAX(c, d);
    V8_LOAD(b, x + 32);
    V8_LOAD(d, x + 40);
    a = V8_MAX(a, c);
    b = V8_MAX(b, d);
    V8_LOAD(c, x + 48);
    V8_LOAD(d, x + 56);
    c = V8_MAX(c, d);
    a = V8_MAX(a, b);
    a = V8_MAX(a, c);
    return hmax8(&a);
}

LP_CLONES double lp__row_expsum(const float *x, float *out, int32_t n, float shift)
{
    double total = 0.0;
    v8f acc = SPLAT(0.0f);
    const v8f s = SPLAT(shift);
    int32_t i = 0, since = 0;
    for (; i + 8 <= n; i += 8) {
        v8f e;
        V8_LOAD(e, x + i);
        e -= s;
        v8_exp(&e);
        if (out) memcpy(out + i, &e, sizeof(e));
        acc += e;
        if (++since == 128) { /* keep float partial sums short; total in double */
            for (int k = 0; k < 8; k++) total += acc[k];
            acc = (v8f)SPLAT(0.0f);
            since = 0;
        }
    }
    for (int k = 0; k < 8; k++) total += acc[k];
    if (i < n) {
        v8f v = SPLAT(-INFINITY);
        memcpy(&v, x + i, (size_t)(n - i) * sizeof(float));
        v8f e = v - s;
        v8_exp(&e);
        for (int32_t k = 0; i + k < n; k++) {
            if (out) out[i + k] = e[k];
            total += e[k];
        }
    }
    return total;
}

LP_CLONES float lp__row_min_finite(const float *x, int32_t n)
{
    const v8f pinf = SPLAT(INFINITY), ninf = SPLAT(-INFINITY);
    v8f m = pinf;
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v8f v;
        V8_LOAD(v, x + i);
        v8i excl = v == ninf;
        v = (v8f)(((v8i)v & ~excl) | ((v8i)pinf & excl));
        v8i lt = v < m;
        m = (v8f)(((v8i)v & lt) | ((v8i)m & ~lt));
    }
    float mn = INFINITY;
    for (int k = 0; k < 8; k++) mn = m[k] < mn ? m[k] : mn;
    for (; i < n; i++)
        if (x[i] != -INFINITY && x[i] < mn) mn = x[i];
    return mn;
}
