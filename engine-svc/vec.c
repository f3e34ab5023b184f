/* vec.c - dispatch of the float vector primitives (kernels in simd/). */
#include "vec.h"

#include "simd/kern.h"

float lp_vec_dot(const float *a, const float *b, int64_t n)
{
    return lp__kern_current()->dot_f32(a, b, n);
}

void lp_vec_axpy(float *y, float s, const float *x, int64_t n)
{
    lp__kern_current()->axpy_f32(y, s, x, n);
}

void lp_vec_swiglu(float *out, const float *g, const float *u, int64_t n)
{
    lp__kern_current()->swiglu_f32(out, g, u, n);
}
