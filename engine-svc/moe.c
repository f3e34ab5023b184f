/* moe.c - the CPU backend's mixture-of-experts feed-forward (moe.h).
 *
 * Order of work in a step: the router's logits for every token; the
 * gating (softmax then top k, or top k then softmax over them; the
 * weights renormalised where the arch says); the (token, expert) pairs
 * grouped by expert (counting sort, tokens in order within an expert);
 * every chosen expert's gate and up over its tokens (plus the shared
 * expert over all tokens) in one grouped product; biases and the
 * activation; every chosen expert's down in a second grouped product;
 * each token's outputs weighted and added in the order of its choices,
 * largest weight first, as llama.cpp's graph adds them. */
#include "moe.h"

#include "error.h"
#include "matmul.h"
#include "ops.h"
#include "vec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct lp_moe_cpu {
    int32_t max_tok, n_expert, n_used;
    int64_t n_embd, ff_w;    /* ff_w: the widest expert or shared-expert FFN */
    float *logits;           /* (max_tok, n_expert) */
    int32_t *sel;            /* (max_tok, n_used) chosen experts, largest weight first */
    float *wt;               /* (max_tok, n_used) their weights */
    int32_t *cnt, *off;      /* (n_expert), (n_expert + 1) pairs per expert, first pair */
    int32_t *tok;            /* (max_tok * n_used) each grouped pair's token */
    int32_t *slot;           /* (max_tok, n_used) where pair (t, k) lies in the grouping */
    float *gate, *up;        /* (max_tok * (n_used + 1), ff_w) the shared expert's rows last */
    float *down;             /* (max_tok * (n_used + 1), n_embd) */
    float *sh_w;             /* (max_tok) the shared expert's gate */
    lp_matmul_t *mm;         /* (2 * n_expert + 2) */
    lp_moe_counts_t counts;
};

int lp_moe_cpu_new(const lp_model_t *m, int32_t max_tok, lp_moe_cpu_t **out)
{
    const lp_hparams_t *hp = &m->hp;
    *out = NULL;
    lp_moe_cpu_t *mc = calloc(1, sizeof(*mc));
    if (!mc) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    mc->max_tok = max_tok;
    mc->n_expert = hp->n_expert;
    mc->n_used = hp->n_expert_used;
    mc->n_embd = hp->n_embd;
    mc->ff_w = hp->n_ff_exp > hp->n_ff_shexp ? hp->n_ff_exp : hp->n_ff_shexp;
    const size_t T = (size_t)max_tok, K = (size_t)hp->n_expert_used, X = (size_t)hp->n_expert;
    const size_t rows = T * (K + 1), F = sizeof(float);
    mc->logits = malloc(F * T * X);
    mc->sel = malloc(sizeof(int32_t) * T * K);
    mc->wt = malloc(F * T * K);
    mc->cnt = malloc(sizeof(int32_t) * X);
    mc->off = malloc(sizeof(int32_t) * (X + 1));
    mc->tok = malloc(sizeof(int32_t) * T * K);
    mc->slot = malloc(sizeof(int32_t) * T * K);
    mc->gate = malloc(F * rows * (size_t)mc->ff_w);
    mc->up = malloc(F * rows * (size_t)mc->ff_w);
    mc->down = malloc(F * rows * (size_t)mc->n_embd);
    mc->sh_w = malloc(F * T);
    mc->mm = calloc(2 * X + 2, sizeof(*mc->mm));
    if (!mc->logits || !mc->sel || !mc->wt || !mc->cnt || !mc->off || !mc->tok || !mc->slot ||
        !mc->gate || !mc->up || !mc->down || !mc->sh_w || !mc->mm) {
        lp_moe_cpu_destroy(&mc);
        return lp_error_set(LP_ERR(ENOMEM), "out of memory for the mixture-of-experts buffers "
                            "(%zu MB)", (F * rows * (size_t)(2 * mc->ff_w + mc->n_embd)) >> 20);
    }
    *out = mc;
    return 0;
}

void lp_moe_cpu_destroy(lp_moe_cpu_t **self_p)
{
    lp_moe_cpu_t *mc = *self_p;
    if (!mc) return;
    free(mc->logits); free(mc->sel); free(mc->wt); free(mc->cnt); free(mc->off);
    free(mc->tok); free(mc->slot); free(mc->gate); free(mc->up); free(mc->down);
    free(mc->sh_w); free(mc->mm);
    free(mc);
    *self_p = NULL;
}

void lp_moe_cpu_counts(const lp_moe_cpu_t *mc, lp_moe_counts_t *out) { *out = mc->counts; }

/* ---- routing --------------------------------------------------------- */

/* The indices of the k largest of v[0..n), largest first (ties: the lower
 * index first). */
static void top_k(const float *v, int32_t n, int32_t k, int32_t *idx)
{
    for (int32_t i = 0; i < k; i++) idx[i] = -1;
    for (int32_t e = 0; e < n; e++) {
        int32_t j = k;
        while (j > 0 && (idx[j - 1] < 0 || v[e] > v[idx[j - 1]])) j--;
        if (j == k) continue;
        memmove(idx + j + 1, idx + j, sizeof(int32_t) * (size_t)(k - 1 - j));
        idx[j] = e;
    }
}

/* ggml's soft_max: exp(x - max) with the sum in double, then times the
 * float reciprocal. */
static void softmax(float *v, int32_t n)
{
    float max = -INFINITY;
    for (int32_t i = 0; i < n; i++) max = v[i] > max ? v[i] : max;
    double sum = 0;
    for (int32_t i = 0; i < n; i++) {
        v[i] = expf(v[i] - max);
        sum += v[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int32_t i = 0; i < n; i++) v[i] *= inv;
}

static void route(lp_moe_cpu_t *mc, const lp_moe_t *moe, int32_t T)
{
    const int32_t X = moe->n_expert, K = moe->n_used;
    for (int32_t t = 0; t < T; t++) {
        float *l = mc->logits + (size_t)t * X, *w = mc->wt + (size_t)t * K;
        int32_t *sel = mc->sel + (size_t)t * K;
        if (moe->router_b)
            for (int32_t e = 0; e < X; e++) l[e] += moe->router_b[e];
        if (moe->gating == LP_MOE_SOFTMAX) softmax(l, X);
        top_k(l, X, K, sel);
        for (int32_t k = 0; k < K; k++) w[k] = l[sel[k]];
        if (moe->gating == LP_MOE_TOPK_SOFTMAX) softmax(w, K);
        if (moe->norm) { /* llama.cpp: the sum clamped to 2^-14 before the division */
            double s = 0;
            for (int32_t k = 0; k < K; k++) s += w[k];
            float sum = (float)s < 6.103515625e-5f ? 6.103515625e-5f : (float)s;
            for (int32_t k = 0; k < K; k++) w[k] /= sum;
        }
    }
    /* group the pairs by expert, tokens in order within each */
    memset(mc->cnt, 0, sizeof(int32_t) * (size_t)X);
    for (int32_t i = 0; i < T * K; i++) mc->cnt[mc->sel[i]]++;
    mc->off[0] = 0;
    for (int32_t e = 0; e < X; e++) mc->off[e + 1] = mc->off[e] + mc->cnt[e];
    memset(mc->cnt, 0, sizeof(int32_t) * (size_t)X);
    for (int32_t t = 0; t < T; t++)
        for (int32_t k = 0; k < K; k++) {
            const int32_t e = mc->sel[t * K + k], at = mc->off[e] + mc->cnt[e]++;
            mc->tok[at] = t;
            mc->slot[t * K + k] = at;
        }
}

/* ---- element-wise work, split over the pool -------------------------- */

typedef struct moe_job {
    lp_moe_cpu_t *mc;
    const lp_moe_t *moe;
    bool exact;
    int32_t T;
    const float *x;
    float *out;
} moe_job_t;

/* gpt-oss's activation, as ggml's swiglu_oai: x = min(g, 7), y = clamp(u,
 * -7, 7), x / (1 + exp(-1.702 x)) * (y + 1). */
static void swiglu_oai(float *g, const float *u, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const float x = g[i] < 7.0f ? g[i] : 7.0f;
        const float y = u[i] < -7.0f ? -7.0f : u[i] > 7.0f ? 7.0f : u[i];
        g[i] = x / (1.0f + expf(1.702f * -x)) * (y + 1.0f);
    }
}

/* One row: the biases (gb, ub may be NULL), then g = act(g, u). */
static void act_row(const moe_job_t *j, enum lp_act act, float *g, float *u, const float *gb,
                    const float *ub, int64_t width)
{
    for (int64_t i = 0; gb && i < width; i++) g[i] += gb[i];
    for (int64_t i = 0; ub && i < width; i++) u[i] += ub[i];
    if (act == LP_ACT_SWIGLU_OAI) swiglu_oai(g, u, width);
    else (j->exact ? lp_op_swiglu : lp_vec_swiglu)(g, g, u, width);
}

/* The expert of grouped row r. */
static int32_t expert_of(const lp_moe_cpu_t *mc, int64_t r)
{
    int32_t lo = 0, hi = mc->n_expert - 1; /* the last e with off[e] <= r */
    while (lo < hi) {
        const int32_t mid = (lo + hi + 1) / 2;
        if (mc->off[mid] <= r) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* Biases and the activation of every grouped row (and the shared
 * expert's rows). */
static void act_worker(void *arg, int ith, int nth)
{
    const moe_job_t *j = arg;
    lp_moe_cpu_t *mc = j->mc;
    const lp_moe_t *moe = j->moe;
    const int32_t TK = j->T * moe->n_used;
    const int64_t n_rows = TK + (moe->sh_gate ? j->T : 0);
    for (int64_t r = ith; r < n_rows; r += nth) {
        float *g = mc->gate + r * mc->ff_w, *u = mc->up + r * mc->ff_w;
        if (r < TK) {
            const int64_t e = moe->gate_b || moe->up_b ? expert_of(mc, r) : 0;
            act_row(j, moe->act, g, u, moe->gate_b ? moe->gate_b + e * moe->n_ff : NULL,
                    moe->up_b ? moe->up_b + e * moe->n_ff : NULL, moe->n_ff);
        } else { /* the shared expert: a SwiGLU (Qwen's) */
            act_row(j, LP_ACT_SILU, g, u, NULL, NULL, moe->n_ff_sh);
        }
    }
}

/* out[t] = sum_k w[t][k] * (down[slot(t, k)] + down_b[e]) + shared. */
static void combine_worker(void *arg, int ith, int nth)
{
    const moe_job_t *j = arg;
    lp_moe_cpu_t *mc = j->mc;
    const lp_moe_t *moe = j->moe;
    const int32_t K = moe->n_used;
    const int64_t E = mc->n_embd;
    for (int32_t t = ith; t < j->T; t += nth) {
        float *o = j->out + (int64_t)t * E;
        for (int32_t k = 0; k < K; k++) {
            const int32_t e = mc->sel[t * K + k];
            const float w = mc->wt[t * K + k];
            float *d = mc->down + (int64_t)mc->slot[t * K + k] * E;
            if (moe->down_b)
                for (int64_t i = 0; i < E; i++) d[i] += moe->down_b[(int64_t)e * E + i];
            if (k == 0)
                for (int64_t i = 0; i < E; i++) o[i] = d[i] * w;
            else
                for (int64_t i = 0; i < E; i++) o[i] += d[i] * w;
        }
        if (moe->sh_gate) {
            const float *d = mc->down + ((int64_t)j->T * K + t) * E;
            float s = 1.0f;
            if (moe->sh_gate_inp) {
                const float *x = j->x + (int64_t)t * E;
                float z;
                if (j->exact) {
                    double zd = 0;
                    for (int64_t i = 0; i < E; i++) zd += (double)x[i] * moe->sh_gate_inp[i];
                    z = (float)zd;
                } else {
                    z = lp_vec_dot(x, moe->sh_gate_inp, E);
                }
                s = 1.0f / (1.0f + expf(-z));
            }
            for (int64_t i = 0; i < E; i++) o[i] += d[i] * s;
        }
    }
}

static void run_rows(lp_threadpool_t *pool, void (*fn)(void *, int, int), moe_job_t *j, int64_t n)
{
    if (n < 4 || !pool) fn(j, 0, 1);
    else lp_threadpool_run(pool, fn, j);
}

/* ---- the step ---------------------------------------------------------- */

int lp_moe_cpu_run(lp_moe_cpu_t *mc, lp_threadpool_t *pool, bool exact, const lp_moe_t *moe,
                   const float *x, int32_t T, float *out)
{
    const int32_t X = moe->n_expert, K = moe->n_used;
    const int64_t E = mc->n_embd;
    if (T > mc->max_tok || X != mc->n_expert || K != mc->n_used || moe->n_ff > mc->ff_w ||
        (moe->sh_gate && moe->n_ff_sh > mc->ff_w))
        return lp_error_set(LP_ERR(EINVAL), "internal: a mixture of experts larger than its "
                            "buffers");
    if (T == 0) return 0;
    /* the router */
    lp_matmul_t r = {.type = moe->router->type, .w = moe->router->data, .n_in = E,
                     .n_out = X, .x = x, .x_stride = E, .n_tok = T, .y = mc->logits,
                     .y_stride = X};
    int rc = lp_matmul(pool, &r, exact);
    if (rc) return rc;
    route(mc, moe, T);

    /* gate and up of every chosen expert over its tokens, and of the
     * shared expert over all */
    const int64_t F = mc->ff_w;
    int n = 0, n_active = 0;
    for (int32_t e = 0; e < X; e++) {
        const int32_t c = mc->off[e + 1] - mc->off[e];
        if (!c) continue;
        n_active++;
        const lp_weight_t g = lp_weight_mat(moe->gate, e), u = lp_weight_mat(moe->up, e);
        const int64_t at = mc->off[e];
        mc->mm[n++] = (lp_matmul_t){.type = g.type, .w = g.data, .n_in = E, .n_out = moe->n_ff,
                                    .x = x, .x_stride = E, .n_tok = c, .x_rows = mc->tok + at,
                                    .y = mc->gate + at * F, .y_stride = F};
        mc->mm[n++] = (lp_matmul_t){.type = u.type, .w = u.data, .n_in = E, .n_out = moe->n_ff,
                                    .x = x, .x_stride = E, .n_tok = c, .x_rows = mc->tok + at,
                                    .y = mc->up + at * F, .y_stride = F};
    }
    const int64_t sh = (int64_t)T * K; /* the shared expert's first row */
    if (moe->sh_gate) {
        mc->mm[n++] = (lp_matmul_t){.type = moe->sh_gate->type, .w = moe->sh_gate->data,
                                    .n_in = E, .n_out = moe->n_ff_sh, .x = x, .x_stride = E,
                                    .n_tok = T, .y = mc->gate + sh * F, .y_stride = F};
        mc->mm[n++] = (lp_matmul_t){.type = moe->sh_up->type, .w = moe->sh_up->data,
                                    .n_in = E, .n_out = moe->n_ff_sh, .x = x, .x_stride = E,
                                    .n_tok = T, .y = mc->up + sh * F, .y_stride = F};
    }
    if ((rc = lp_matmul_grouped(pool, mc->mm, n, exact))) return rc;
    moe_job_t job = {mc, moe, exact, T, x, out};
    run_rows(pool, act_worker, &job, sh + (moe->sh_gate ? T : 0));

    /* every chosen expert's down */
    n = 0;
    for (int32_t e = 0; e < X; e++) {
        const int32_t c = mc->off[e + 1] - mc->off[e];
        if (!c) continue;
        const lp_weight_t d = lp_weight_mat(moe->down, e);
        const int64_t at = mc->off[e];
        mc->mm[n++] = (lp_matmul_t){.type = d.type, .w = d.data, .n_in = moe->n_ff, .n_out = E,
                                    .x = mc->gate + at * F, .x_stride = F, .n_tok = c,
                                    .y = mc->down + at * E, .y_stride = E};
    }
    if (moe->sh_gate)
        mc->mm[n++] = (lp_matmul_t){.type = moe->sh_down->type, .w = moe->sh_down->data,
                                    .n_in = moe->n_ff_sh, .n_out = E, .x = mc->gate + sh * F,
                                    .x_stride = F, .n_tok = T, .y = mc->down + sh * E,
                                    .y_stride = E};
    if ((rc = lp_matmul_grouped(pool, mc->mm, n, exact))) return rc;
    run_rows(pool, combine_worker, &job, T);

    mc->counts.calls++;
    mc->counts.tokens += (uint64_t)T;
    mc->counts.pairs += (uint64_t)T * (uint64_t)K;
    mc->counts.expert_reads += (uint64_t)n_active;
    mc->counts.expert_bytes +=
        (uint64_t)n_active * (moe->gate->mat_bytes + moe->up->mat_bytes + moe->down->mat_bytes);
    return 0;
}
