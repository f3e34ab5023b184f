/* ops.c - reference element-wise and attention operations. */
#include "ops.h"

#include "vec.h"

#include <math.h>
#include <string.h>

void lp_op_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps)
{
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (double)x[i] * x[i];
    float scale = (float)(1.0 / sqrt(sum / (double)n + eps));
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale * w[i];
}

void lp_op_rope(float *x, int32_t n_heads, int32_t head_dim, int32_t n_rot, int32_t pos,
                float base, bool neox)
{
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    for (int32_t h = 0; h < n_heads; h++) {
        float *xh = x + (int64_t)h * head_dim;
        float theta = (float)pos;
        for (int32_t i = 0; i < n_rot / 2; i++) {
            const float c = cosf(theta), s = sinf(theta);
            const int32_t a = neox ? i : 2 * i;
            const int32_t b = neox ? i + n_rot / 2 : 2 * i + 1;
            const float x0 = xh[a], x1 = xh[b];
            xh[a] = x0 * c - x1 * s;
            xh[b] = x0 * s + x1 * c;
            theta *= theta_scale;
        }
    }
}

void lp_op_attn_head(float *out, const float *q, const float *k, const float *v,
                     int64_t kv_stride, int32_t n_pos, int32_t head_dim, float scale,
                     const uint8_t *mask, float *scores)
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
    double sum = 0;
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
