/* ops.h - the reference element-wise and attention operations of the CPU
 * backend.  Other backends are tested against these. */
#ifndef LP_OPS_H
#define LP_OPS_H

#include <stdbool.h>
#include <stdint.h>

/* y = x / sqrt(mean(x^2) + eps) * w (w NULL: no weight); y may alias x. */
void lp_op_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps);
/* x += r (r may be NULL), then lp_op_rmsnorm(y, x, w, n, eps). */
void lp_op_add_rmsnorm(float *y, float *x, const float *r, const float *w, int64_t n, float eps);

/* Rotate the first n_rot dims of each of n_heads heads (x is [head][head_dim])
 * for position pos.  Normal mode (llama) rotates pairs (2i, 2i+1); NEOX mode
 * (qwen2) rotates pairs (i, i + n_rot/2).  theta_i = pos * base^(-2i/n_rot). */
void lp_op_rope(float *x, int32_t n_heads, int32_t head_dim, int32_t n_rot, int32_t pos,
                float base, bool neox);

/* lp_op_rope in two parts, for many heads or layers at one position: the
 * n_rot/2 angles' cosines and sines (the same values lp_op_rope takes), and
 * the rotation by them. */
void lp_op_rope_angles(int32_t pos, int32_t n_rot, float base, float *cs, float *sn);
/* The angles of a scaled RoPE, as llama.cpp's rope cache computes them
 * (no YaRN): angle_i = freq_scale * (theta_i / ff[i]) with theta_i =
 * pos * base^(-2i/n_rot) by repeated multiplication in float; ff (n_rot/2
 * divisors) may be NULL.  freq_scale 1 and no ff give lp_op_rope_angles. */
void lp_op_rope_angles_ext(int32_t pos, int32_t n_rot, float base, float freq_scale,
                           const float *ff, float *cs, float *sn);
/* The same with YaRN (ggml's rope_yarn, ext_factor ext != 0): with t_e =
 * theta_i / ff[i] and t_i = freq_scale * t_e, ramp = 1 - clamp((i - lo) /
 * max(0.001, hi - lo), 0, 1), angle = t_i (1 - ramp ext) + t_e ramp ext;
 * cos and sin times mscale (1 + 0.1 ln(1/freq_scale) included). */
void lp_op_rope_angles_yarn(int32_t pos, int32_t n_rot, float base, float freq_scale,
                            const float *ff, float ext, float lo, float hi, float mscale,
                            float *cs, float *sn);
void lp_op_rope_apply(float *x, int32_t n_heads, int32_t head_dim, int32_t n_rot,
                      const float *cs, const float *sn, bool neox);
/* The same for pairs i0 .. i0+n-1 only; cs and sn hold their n angles. */
void lp_op_rope_apply_range(float *x, int32_t n_heads, int32_t head_dim, int32_t n_rot,
                            int32_t i0, int32_t n, const float *cs, const float *sn, bool neox);

/* One query head over n_pos cached positions:
 *   out = softmax(scale * q.k_j, j masked out where mask[j]) . v
 * k and v rows are head_dim floats, kv_stride floats apart.  mask may be
 * NULL (nothing masked).  When every score is masked, out is all zeros, not
 * NaN.  scores is scratch of n_pos floats. */
void lp_op_attn_head(float *out, const float *q, const float *k, const float *v,
                     int64_t kv_stride, int32_t n_pos, int32_t head_dim, float scale,
                     const uint8_t *mask, float *scores);

/* The same with an attention sink (gpt-oss): one more logit, *sink (not
 * scaled), in the softmax's denominator, with no value; sink NULL: none. */
void lp_op_attn_head_sink(float *out, const float *q, const float *k, const float *v,
                          int64_t kv_stride, int32_t n_pos, int32_t head_dim, float scale,
                          const uint8_t *mask, const float *sink, float *scores);

/* out = silu(g) * u, element-wise; out may alias g. */
void lp_op_swiglu(float *out, const float *g, const float *u, int64_t n);

/* out = gelu_tanh(g) * u as llama.cpp's CPU backend computes it (GGML_GELU_FP16):
 * g rounded to fp16, gelu_tanh read from a table of 65536 fp16 values
 * computed in float, times u in float; g <= -10 gives 0, g >= 10 gives
 * g * u.  out may alias g. */
void lp_op_geglu(float *out, const float *g, const float *u, int64_t n);
/* The table: entry h is gelu_tanh(fp16 h) as a float (rounded to fp16). */
const float *lp_op_gelu_table(void);

#endif
