/* row.h - whole-row kernels over a logit row (vectorised; see row.c). */
#ifndef LP_SAMPLER_ROW_H
#define LP_SAMPLER_ROW_H

#include <stdint.h>

/* dst[i] = src[i] with NaN replaced by -INFINITY and +INFINITY by FLT_MAX;
 * returns the maximum (-INFINITY when nothing is left).  With bmax, also
 * the maximum of each block of 64 (bmax[i / 64], (n + 63) / 64 of them). */
float lp__row_load(float *dst, const float *src, int32_t n, float *bmax);
/* Largest value and, when arg is not NULL, its first index (-1 when every
 * value is -INFINITY). */
float lp__row_max(const float *x, int32_t n, int32_t *arg);
/* Smallest value that is not -INFINITY (INFINITY when there is none). */
float lp__row_min_finite(const float *x, int32_t n);
/* Largest of x[0..64). */
float lp__block_max64(const float *x);
/* out[i] = exp(x[i] - shift) when out is not NULL (out may be x); returns
 * the sum in double.  exp(-INFINITY) is exactly 0. */
double lp__row_expsum(const float *x, float *out, int32_t n, float shift);

#endif
