/* ops_test.c - the reference ops against naive double-precision versions:
 * RoPE in both modes, GQA attention over a cache, a fully masked row, and
 * RMSNorm / SwiGLU against values worked out by hand. */
#include "ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/check.h"

/* Naive RoPE: pair (a, b) of dim i is rotated by pos * base^(-2i/n_rot). */
static void rope_naive(double *x, int head_dim, int n_rot, int pos, double base, int neox)
{
    for (int i = 0; i < n_rot / 2; i++) {
        double theta = pos * pow(base, -2.0 * i / n_rot);
        int a = neox ? i : 2 * i, b = neox ? i + n_rot / 2 : 2 * i + 1;
        double x0 = x[a], x1 = x[b];
        x[a] = x0 * cos(theta) - x1 * sin(theta);
        x[b] = x0 * sin(theta) + x1 * cos(theta);
    }
    (void)head_dim;
}

static void test_rope(void)
{
    enum { HEADS = 3, HD = 16 };
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (int neox = 0; neox <= 1; neox++) {
        for (int n_rot = 4; n_rot <= HD; n_rot += 12) { /* partial (4) and full (16) */
            for (int pos = 0; pos < 300; pos += 37) {
                float x[HEADS * HD];
                double ref[HEADS * HD];
                for (int i = 0; i < HEADS * HD; i++) ref[i] = x[i] = lp_check_frand(&rng);
                float y[HEADS * HD], cs[HD / 2], sn[HD / 2];
                memcpy(y, x, sizeof y);
                lp_op_rope(x, HEADS, HD, n_rot, pos, 10000.0f, neox);
                for (int h = 0; h < HEADS; h++) rope_naive(ref + h * HD, HD, n_rot, pos, 10000.0, neox);
                for (int i = 0; i < HEADS * HD; i++)
                    CHECK_NEAR(x[i], ref[i], 2e-4, "rope neox=%d n_rot=%d pos=%d dim %d", neox,
                               n_rot, pos, i);
                /* in two parts: the same values */
                lp_op_rope_angles(pos, n_rot, 10000.0f, cs, sn);
                lp_op_rope_apply(y, HEADS, HD, n_rot, cs, sn, neox);
                CHECK(!memcmp(x, y, sizeof y), "rope angles+apply neox=%d n_rot=%d pos=%d", neox,
                      n_rot, pos);
            }
        }
    }
    /* Hand-worked: pos 1, n_rot 2, base 10000: theta 1 rad for pair 0.
     * Normal mode rotates (x0, x1) = (1, 0) to (cos 1, sin 1); NEOX mode with
     * head_dim 4 and n_rot 4 pairs dims 0 and 2. */
    float v[4] = {1, 0, 0, 0};
    lp_op_rope(v, 1, 4, 2, 1, 10000.0f, false);
    CHECK_NEAR(v[0], 0.5403023, 1e-6, "normal rope by hand");
    CHECK_NEAR(v[1], 0.8414710, 1e-6, "normal rope by hand");
    float w[4] = {1, 0, 0, 0};
    lp_op_rope(w, 1, 4, 4, 1, 10000.0f, true);
    CHECK_NEAR(w[0], 0.5403023, 1e-6, "neox rope by hand");
    CHECK_NEAR(w[2], 0.8414710, 1e-6, "neox rope by hand: pair (0, 2)");
    CHECK_NEAR(w[1], 0.0, 1e-7, "neox rope leaves dim 1 alone");
}

/* GQA: 4 query heads share 2 KV heads; cache rows are [pos][kv_head][dim]. */
static void test_gqa_attention(void)
{
    enum { NH = 4, NKV = 2, HD = 8, NPOS = 13 };
    uint64_t rng = 0x2545f4914f6cdd1dull;
    float q[NH * HD], k[NPOS * NKV * HD], v[NPOS * NKV * HD], out[HD], scores[NPOS];
    for (int i = 0; i < NH * HD; i++) q[i] = lp_check_frand(&rng) * 2;
    for (int i = 0; i < NPOS * NKV * HD; i++) {
        k[i] = lp_check_frand(&rng) * 2;
        v[i] = lp_check_frand(&rng);
    }
    const float scale = 1.0f / sqrtf(HD);
    for (int h = 0; h < NH; h++) {
        int kvh = h / (NH / NKV);
        for (int n_pos = 1; n_pos <= NPOS; n_pos += 4) {
            lp_op_attn_head(out, q + h * HD, k + kvh * HD, v + kvh * HD, NKV * HD, n_pos, HD,
                            scale, NULL, scores);
            double s[NPOS], max = -1e300, sum = 0;
            for (int j = 0; j < n_pos; j++) {
                double d = 0;
                for (int c = 0; c < HD; c++) d += (double)q[h * HD + c] * k[(j * NKV + kvh) * HD + c];
                s[j] = d * scale;
                if (s[j] > max) max = s[j];
            }
            for (int j = 0; j < n_pos; j++) sum += (s[j] = exp(s[j] - max));
            for (int c = 0; c < HD; c++) {
                double o = 0;
                for (int j = 0; j < n_pos; j++) o += s[j] / sum * v[(j * NKV + kvh) * HD + c];
                CHECK_NEAR(out[c], o, 1e-5, "attention head %d n_pos %d dim %d", h, n_pos, c);
            }
        }
    }
    /* A mask that hides some positions equals attention over the rest. */
    uint8_t mask[NPOS] = {0};
    for (int j = 0; j < NPOS; j += 2) mask[j] = 1;
    float masked[HD], kk[NPOS * HD], vv[NPOS * HD];
    int n = 0;
    for (int j = 0; j < NPOS; j++) {
        if (mask[j]) continue;
        memcpy(kk + n * HD, k + j * NKV * HD, sizeof(float) * HD);
        memcpy(vv + n * HD, v + j * NKV * HD, sizeof(float) * HD);
        n++;
    }
    lp_op_attn_head(masked, q, k, v, NKV * HD, NPOS, HD, scale, mask, scores);
    lp_op_attn_head(out, q, kk, vv, HD, n, HD, scale, NULL, scores);
    for (int c = 0; c < HD; c++) CHECK_NEAR(masked[c], out[c], 1e-6, "masked attention dim %d", c);
}

static void test_all_masked(void)
{
    enum { HD = 4, NPOS = 5 };
    float q[HD] = {1, 2, 3, 4}, k[NPOS * HD], v[NPOS * HD], out[HD], scores[NPOS];
    for (int i = 0; i < NPOS * HD; i++) { k[i] = 1; v[i] = 1; }
    uint8_t mask[NPOS] = {1, 1, 1, 1, 1};
    lp_op_attn_head(out, q, k, v, HD, NPOS, HD, 0.5f, mask, scores);
    for (int c = 0; c < HD; c++) {
        CHECK(!isnan(out[c]), "all-masked row gave NaN");
        CHECK_NEAR(out[c], 0.0, 0.0, "all-masked row is zero");
    }
    lp_op_attn_head(out, q, k, v, HD, 0, HD, 0.5f, NULL, scores); /* no positions at all */
    for (int c = 0; c < HD; c++) CHECK_NEAR(out[c], 0.0, 0.0, "empty row is zero");
}

/* An attention sink is a logit with no value: two keys with scores s0, s1
 * and a sink z give p_j = e^{s_j} / (e^{s0} + e^{s1} + e^z); a sink far
 * above the scores leaves almost nothing, and all-masked stays zero. */
static void test_sink(void)
{
    enum { HD = 2 };
    float q[HD] = {1, 0}, k[2 * HD] = {2, 0, -1, 0}, v[2 * HD] = {1, 2, 3, 4}, out[HD], sc[2];
    const float z = 1.5f;
    lp_op_attn_head_sink(out, q, k, v, HD, 2, HD, 1.0f, NULL, &z, sc);
    const double den = exp(2.0) + exp(-1.0) + exp(1.5);
    CHECK_NEAR(out[0], (exp(2.0) * 1 + exp(-1.0) * 3) / den, 1e-6, "sink dim 0");
    CHECK_NEAR(out[1], (exp(2.0) * 2 + exp(-1.0) * 4) / den, 1e-6, "sink dim 1");
    const float big = 200.0f;
    lp_op_attn_head_sink(out, q, k, v, HD, 2, HD, 1.0f, NULL, &big, sc);
    CHECK(out[0] == 0.0f && out[1] == 0.0f, "a sink far above the scores: %g %g", out[0], out[1]);
    uint8_t mask[2] = {1, 1};
    lp_op_attn_head_sink(out, q, k, v, HD, 2, HD, 1.0f, mask, &z, sc);
    CHECK(out[0] == 0.0f && out[1] == 0.0f, "all masked with a sink: %g %g", out[0], out[1]);
}

static void test_rmsnorm_swiglu(void)
{
    /* x = (3, 4): mean of squares 12.5, so y = x / sqrt(12.5 + eps) * w. */
    float x[2] = {3, 4}, w[2] = {1, 2}, y[2];
    lp_op_rmsnorm(y, x, w, 2, 0.0f);
    CHECK_NEAR(y[0], 3 / sqrt(12.5), 1e-6, "rmsnorm");
    CHECK_NEAR(y[1], 8 / sqrt(12.5), 1e-6, "rmsnorm");
    /* silu(0) = 0; silu(2) = 2 / (1 + e^-2) = 1.7615942 */
    float g[2] = {0, 2}, u[2] = {5, 3}, o[2];
    lp_op_swiglu(o, g, u, 2);
    CHECK_NEAR(o[0], 0.0, 1e-7, "swiglu");
    CHECK_NEAR(o[1], 1.7615942 * 3, 1e-5, "swiglu");
}

int main(void)
{
    test_rope();
    test_gqa_attention();
    test_all_masked();
    test_sink();
    test_rmsnorm_swiglu();
    if (!lp_check_failures) printf("ops: all passed\n");
    return CHECK_DONE();
}
