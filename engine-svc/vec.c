/* vec.c - dispatch of the float vector primitives (kernels in simd/). */
#include "vec.h"

#include "ops.h"
#include "simd/kern.h"

#include <math.h>

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

void lp_vec_add_rmsnorm(float *y, float *x, const float *r, const float *w, int64_t n, float eps)
{
    const lp__kern_t *k = lp__kern_current();
    if (k->add_rmsnorm_f32) {
        k->add_rmsnorm_f32(y, x, r, w, n, eps);
        return;
    }
    lp_op_add_rmsnorm(y, x, r, w, n, eps);
}

void lp_vec_rope(float *x, int32_t n_heads, int32_t head_dim, int32_t n_rot, const float *cs,
                 const float *sn, bool neox)
{
    const lp__kern_t *k = lp__kern_current();
    if (k->rope_f32) k->rope_f32(x, n_heads, head_dim, n_rot, cs, sn, neox);
    else lp_op_rope_apply(x, n_heads, head_dim, n_rot, cs, sn, neox);
}

void lp_vec_geglu(float *out, const float *g, const float *u, int64_t n)
{
    const lp__kern_t *k = lp__kern_current();
    if (k->geglu_f32) k->geglu_f32(out, g, u, n, lp_op_gelu_table());
    else lp_op_geglu(out, g, u, n);
}

void lp_vec_softcap(float *x, int64_t n, float cap)
{
    const lp__kern_t *k = lp__kern_current();
    if (k->softcap_f32) {
        k->softcap_f32(x, n, cap);
        return;
    }
    const float inv = 1.0f / cap;
    for (int64_t i = 0; i < n; i++) x[i] = tanhf(x[i] * inv) * cap;
}
