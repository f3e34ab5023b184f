/* vec.h - float vector primitives on the fast kernels' instruction set, for
 * the CPU backend's attention and element-wise ops.  They use the same
 * run-time choice as lp_matmul (LMPIPE_ISA, lp_matmul_set_isa). */
#ifndef LP_VEC_H
#define LP_VEC_H

#include <stdbool.h>
#include <stdint.h>

/* sum_i a[i] * b[i], accumulated in float with several partial sums (the
 * order differs from a plain loop by rounding only). */
float lp_vec_dot(const float *a, const float *b, int64_t n);

/* y[i] += s * x[i]. */
void lp_vec_axpy(float *y, float s, const float *x, int64_t n);

/* out[i] = silu(g[i]) * u[i] with a vectorised exp (relative error about
 * 2^-23; lp_op_swiglu is the reference); out may alias g. */
void lp_vec_swiglu(float *out, const float *g, const float *u, int64_t n);

/* x += r (r may be NULL), then y = x / sqrt(mean(x^2) + eps) * w as
 * lp_op_rmsnorm (the squares summed in double, in another order); y may
 * not alias x. */
void lp_vec_add_rmsnorm(float *y, float *x, const float *r, const float *w, int64_t n, float eps);

/* lp_op_rope_apply: the pairs of n_heads heads rotated by the angles of
 * lp_op_rope_angles (products may be fused). */
void lp_vec_rope(float *x, int32_t n_heads, int32_t head_dim, int32_t n_rot, const float *cs,
                 const float *sn, bool neox);

/* lp_op_geglu (llama.cpp's fp16 GELU table) with SIMD gathers; the same
 * values bit for bit. */
void lp_vec_geglu(float *out, const float *g, const float *u, int64_t n);

/* x = cap * tanh(x / cap) with a vectorised tanh (absolute error about
 * 1e-7 against tanhf). */
void lp_vec_softcap(float *x, int64_t n, float cap);

#endif
