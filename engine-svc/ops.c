/* ops.c - reference element-wise and attention operations. */
#include "ops.h"

#include "ggml-type.h"
#include "vec.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

void lp_op_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps)
{
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (double)x[i] * x[i];
    float scale = (float)(1.0 / sqrt(sum / (double)n + eps));
    if (w) for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale * w[i];
    else for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale;
}

void lp_op_add_rmsnorm(float *y, float *x, const float *r, const float *w, int64_t n, float eps)
{
    for (int64_t i = 0; r && i < n; i++) x[i] += r[i];
    lp_op_rmsnorm(y, x, w, n, eps);
}

/* cos and sin of theta, theta * scale, ... (n of them); returns the next
 * theta.  theta runs in float, as llama.cpp's does. */
static float rope_angles(float theta, float scale, int32_t n, float *cs, float *sn)
{
    for (int32_t i = 0; i < n; i++) {
        cs[i] = cosf(theta);
        sn[i] = sinf(theta);
        theta *= scale;
    }
    return theta;
}

void lp_op_rope_apply_range(float *x, int32_t n_heads, int32_t head_dim, int32_t n_rot,
                            int32_t i0, int32_t n, const float *cs, const float *sn, bool neox)
{
    for (int32_t h = 0; h < n_heads; h++) {
        float *xh = x + (int64_t)h * head_dim;
        for (int32_t i = 0; i < n; i++) {
            const int32_t a = neox ? i0 + i : 2 * (i0 + i);
            const int32_t b = neox ? i0 + i + n_rot / 2 : 2 * (i0 + i) + 1;
            const float x0 = xh[a], x1 = xh[b];
            xh[a] = x0 * cs[i] - x1 * sn[i];
            xh[b] = x0 * sn[i] + x1 * cs[i];
        }
    }
}

void lp_op_rope_angles(int32_t pos, int32_t n_rot, float base, float *cs, float *sn)
{
    rope_angles((float)pos, powf(base, -2.0f / (float)n_rot), n_rot / 2, cs, sn);
}

void lp_op_rope_angles_ext(int32_t pos, int32_t n_rot, float base, float freq_scale,
                           const float *ff, float *cs, float *sn)
{
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    float theta = (float)pos;
    for (int32_t i = 0; i < n_rot / 2; i++) {
        const float t = freq_scale * (ff ? theta / ff[i] : theta);
        cs[i] = cosf(t);
        sn[i] = sinf(t);
        theta *= theta_scale;
    }
}

void lp_op_rope_angles_yarn(int32_t pos, int32_t n_rot, float base, float freq_scale,
                            const float *ff, float ext, float lo, float hi, float mscale,
                            float *cs, float *sn)
{
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    float theta = (float)pos;
    for (int32_t i = 0; i < n_rot / 2; i++) {
        const float te = ff ? theta / ff[i] : theta, ti = freq_scale * te;
        /* ggml passes the element index 2i and halves it */
        const float y = ((float)(2 * i) / 2 - lo) / fmaxf(0.001f, hi - lo);
        const float ramp = (1 - fminf(1.0f, fmaxf(0.0f, y))) * ext;
        const float t = ti * (1 - ramp) + te * ramp;
        cs[i] = cosf(t) * mscale;
        sn[i] = sinf(t) * mscale;
        theta *= theta_scale;
    }
}

void lp_op_rope_apply(float *x, int32_t n_heads, int32_t head_dim, int32_t n_rot,
                      const float *cs, const float *sn, bool neox)
{
    lp_op_rope_apply_range(x, n_heads, head_dim, n_rot, 0, n_rot / 2, cs, sn, neox);
}

/* The angles depend on the pair and the position only: each chunk of pairs
 * gets its cos/sin once and is applied to every head. */
void lp_op_rope(float *x, int32_t n_heads, int32_t head_dim, int32_t n_rot, int32_t pos,
                float base, bool neox)
{
    enum { CHUNK = 64 };
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    float theta = (float)pos, cs[CHUNK], sn[CHUNK];
    for (int32_t i0 = 0; i0 < n_rot / 2; i0 += CHUNK) {
        const int32_t n = n_rot / 2 - i0 < CHUNK ? n_rot / 2 - i0 : CHUNK;
        theta = rope_angles(theta, theta_scale, n, cs, sn);
        lp_op_rope_apply_range(x, n_heads, head_dim, n_rot, i0, n, cs, sn, neox);
    }
}

void lp_op_attn_head(float *out, const float *q, const float *k, const float *v,
                     int64_t kv_stride, int32_t n_pos, int32_t head_dim, float scale,
                     const uint8_t *mask, float *scores)
{
    lp_op_attn_head_sink(out, q, k, v, kv_stride, n_pos, head_dim, scale, mask, NULL, scores);
}

void lp_op_attn_head_sink(float *out, const float *q, const float *k, const float *v,
                          int64_t kv_stride, int32_t n_pos, int32_t head_dim, float scale,
                          const uint8_t *mask, const float *sink, float *scores)
{
    float max = -INFINITY;
    for (int32_t j = 0; j < n_pos; j++) {
        if (mask && mask[j]) {
            scores[j] = -INFINITY;
            continue;
        }
        scores[j] = lp_vec_dot(q, k + (int64_t)j * kv_stride, head_dim) * scale;
        if (scores[j] > max) max = scores[j];
    }
    memset(out, 0, sizeof(float) * (size_t)head_dim);
    if (max == -INFINITY) return; /* every score masked: no NaN from 0/0 */
    if (sink && *sink > max) max = *sink; /* as llama.cpp's soft_max with sinks */
    double sum = sink ? expf(*sink - max) : 0;
    for (int32_t j = 0; j < n_pos; j++) {
        scores[j] = scores[j] == -INFINITY ? 0.0f : expf(scores[j] - max);
        sum += scores[j];
    }
    const float inv = (float)(1.0 / sum);
    for (int32_t j = 0; j < n_pos; j++) {
        const float p = scores[j] * inv;
        if (p == 0.0f) continue;
        lp_vec_axpy(out, p, v + (int64_t)j * kv_stride, head_dim);
    }
}

void lp_op_swiglu(float *out, const float *g, const float *u, int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* ---- GELU through llama.cpp's fp16 table ------------------------------ */

static float gelu_table[1 << 16];
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static void gelu_init(void)
{
    for (uint32_t h = 0; h < (1u << 16); h++) {
        const float v = lp_fp16_to_f32((uint16_t)h);
        const float g = 0.5f * v * (1.0f + tanhf(0.7978845608f * v * (1.0f + 0.044715f * v * v)));
        gelu_table[h] = lp_fp16_to_f32(lp_f32_to_fp16(g));
    }
}

const float *lp_op_gelu_table(void)
{
    pthread_once(&gelu_once, gelu_init);
    return gelu_table;
}

void lp_op_geglu(float *out, const float *g, const float *u, int64_t n)
{
    const float *t = lp_op_gelu_table();
    for (int64_t i = 0; i < n; i++) {
        const float x = g[i];
        if (x <= -10.0f) out[i] = 0.0f;
        else if (x >= 10.0f) out[i] = x * u[i];
        else out[i] = t[lp_f32_to_fp16(x)] * u[i];
    }
}
