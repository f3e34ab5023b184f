/* samplers-select.c - the samplers that shape and choose: temperature (and
 * dynamic temperature), greedy, dist, mirostat v1 and v2 (llama.cpp
 * meanings). */
#include "cands-impl.h"

#include "error.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void select_list(lp_cands_t *c, size_t i)
{
    c->arr.selected = (int64_t)i;
    c->selected_id = c->arr.data[i].id;
}

/* Draw from the list's .p (normalised) with one uniform number. */
static size_t draw_list(const lp_token_array_t *a, lp_rng_t *rng)
{
    double sum = 0.0;
    for (size_t i = 0; i < a->size; i++) sum += a->data[i].p;
    if (!(sum > 0.0 && sum < INFINITY)) {
        /* logits so extreme that the softmax overflowed: take the largest */
        size_t best = 0;
        for (size_t i = 1; i < a->size; i++)
            if (a->data[i].logit > a->data[best].logit) best = i;
        return best;
    }
    double target = lp_rng_uniform(rng) * sum, run = 0.0;
    size_t last = 0;
    for (size_t i = 0; i < a->size; i++) {
        if (a->data[i].p <= 0.0f) continue;
        run += a->data[i].p;
        last = i;
        if (run > target) return i;
    }
    return last; /* rounding at the very top */
}

static int no_candidates(void)
{
    return lp_error_set(LP_ERR(ENOENT), "sampler: no token can be sampled (every candidate "
                                        "is masked or removed)");
}

/* ---- greedy ---------------------------------------------------------------------- */

static const char *greedy_name(const lp_sampler_t *s)
{
    (void)s;
    return "greedy";
}

static int greedy_apply(lp_sampler_t *s, lp_cands_t *c)
{
    (void)s;
    if (c->dense) {
        int32_t at = lp__cands_argmax(c);
        if (at < 0) return no_candidates();
        c->selected_id = at;
        return 0;
    }
    lp_token_array_t *a = &c->arr;
    if (!a->size) return no_candidates();
    size_t best = 0;
    for (size_t i = 1; i < a->size; i++)
        if (a->data[i].logit > a->data[best].logit) best = i;
    if (a->data[best].logit == -INFINITY) return no_candidates();
    select_list(c, best);
    return 0;
}

static const lp_sampler_i greedy_i = {.name = greedy_name, .apply = greedy_apply};

lp_sampler_t *lp_sampler_greedy_new(void)
{
    return lp_sampler_new(&greedy_i, NULL);
}

/* ---- dist ------------------------------------------------------------------------------ */

typedef struct rng_ctx {
    lp_rng_t *rng; /* borrowed */
    float tau, eta, mu;
    int32_t n_vocab, m;
} rng_ctx_t;

static lp_sampler_t *rng_sampler_new(const lp_sampler_i *iface, rng_ctx_t v)
{
    rng_ctx_t *ctx = malloc(sizeof(*ctx));
    if (!ctx) return NULL;
    *ctx = v;
    lp_sampler_t *s = lp_sampler_new(iface, ctx);
    if (!s) free(ctx);
    return s;
}

static lp_sampler_t *rng_sampler_clone(const lp_sampler_t *s)
{
    return rng_sampler_new(s->iface, *(const rng_ctx_t *)s->ctx);
}

static void rng_sampler_free(lp_sampler_t *s)
{
    free(s->ctx);
}

static const char *dist_name(const lp_sampler_t *s)
{
    (void)s;
    return "dist";
}

static int dist_apply(lp_sampler_t *s, lp_cands_t *c)
{
    rng_ctx_t *ctx = s->ctx;
    if (c->dense) {
        int32_t n = c->n_row;
        int rc = lp__cands_fscratch(c, n);
        if (rc) return rc;
        float max = lp__row_max(c->row, n, NULL);
        if (max == -INFINITY) return no_candidates();
        float *e = c->fscratch;
        double sum = lp__row_expsum(c->row, e, n, max);
        if (!(sum > 0.0 && sum < INFINITY)) { /* overflowed (max is +inf): the largest */
            lp__row_max(c->row, n, &c->selected_id);
            return c->selected_id < 0 ? no_candidates() : 0;
        }
        double target = lp_rng_uniform(ctx->rng) * sum, run = 0.0;
        int32_t last = -1;
        for (int32_t i = 0; i < n; i++) {
            if (e[i] <= 0.0f) continue;
            run += e[i];
            last = i;
            if (run > target) break;
        }
        c->selected_id = last;
        return 0;
    }
    lp_token_array_t *a = &c->arr;
    if (!a->size) return no_candidates();
    lp_cands_softmax(c, false);
    size_t i = draw_list(a, ctx->rng);
    if (a->data[i].logit == -INFINITY) return no_candidates();
    select_list(c, i);
    return 0;
}

static const lp_sampler_i dist_i = {
    .name = dist_name, .apply = dist_apply, .clone = rng_sampler_clone, .free = rng_sampler_free};

lp_sampler_t *lp_sampler_dist_new(lp_rng_t *rng)
{
    return rng_sampler_new(&dist_i, (rng_ctx_t){.rng = rng});
}

/* ---- temperature ------------------------------------------------------------------------- */

typedef struct temp_ctx {
    float temp, delta, exponent;
} temp_ctx_t;

static const char *temp_name(const lp_sampler_t *s)
{
    (void)s;
    return "temp-ext";
}

/* temp <= 0: keep only the (first) maximum; otherwise divide. */
static int temp_impl(lp_cands_t *c, float temp)
{
    if (temp <= 0.0f) {
        if (c->dense) {
            int32_t at = lp__cands_argmax(c);
            if (at < 0) return no_candidates();
            lp_token_data_t one = {at, c->row[at], 1.0f};
            return lp_cands_set_list(c, &one, 1);
        }
        lp_token_array_t *a = &c->arr;
        if (!a->size) return 0;
        size_t best = 0;
        for (size_t i = 1; i < a->size; i++)
            if (a->data[i].logit > a->data[best].logit) best = i;
        a->data[0] = a->data[best];
        a->size = 1;
        a->sorted = true;
        return 0;
    }
    if (temp == 1.0f) return 0;
    /* a small temperature must not turn a large logit into +inf (every
     * softmax after it would be NaN) */
    if (c->dense) {
        float *row = lp__cands_row_w(c);
        for (int32_t i = 0; i < c->n_row; i++) row[i] = fminf(row[i] / temp, FLT_MAX);
        return 0;
    }
    for (size_t i = 0; i < c->arr.size; i++)
        c->arr.data[i].logit = fminf(c->arr.data[i].logit / temp, FLT_MAX);
    return 0;
}

static int temp_apply(lp_sampler_t *s, lp_cands_t *c)
{
    const temp_ctx_t *ctx = s->ctx;
    if (ctx->delta <= 0.0f) return temp_impl(c, ctx->temp);
    /* dynamic temperature from the normalised entropy (llama.cpp temp-ext) */
    int rc = lp_cands_materialize(c);
    if (rc) return rc;
    lp_token_array_t *a = &c->arr;
    if (a->size <= 1) return 0;
    float min_temp = ctx->temp - ctx->delta > 0.0f ? ctx->temp - ctx->delta : 0.0f;
    float max_temp = ctx->temp + ctx->delta;
    float max_entropy = -logf(1.0f / (float)a->size);
    lp_cands_softmax(c, false);
    double entropy = 0.0;
    for (size_t i = 0; i < a->size; i++)
        if (a->data[i].p > 0.0f) entropy -= (double)a->data[i].p * log(a->data[i].p);
    float norm = (float)(entropy / max_entropy);
    float dyn = min_temp + (max_temp - min_temp) * powf(norm, ctx->exponent);
    if ((rc = temp_impl(c, dyn))) return rc;
    lp_cands_softmax(c, false);
    return 0;
}

static const lp_sampler_i temp_i;

static lp_sampler_t *temp_new(temp_ctx_t v)
{
    temp_ctx_t *ctx = malloc(sizeof(*ctx));
    if (!ctx) return NULL;
    *ctx = v;
    lp_sampler_t *s = lp_sampler_new(&temp_i, ctx);
    if (!s) free(ctx);
    return s;
}

static lp_sampler_t *temp_clone(const lp_sampler_t *s)
{
    return temp_new(*(const temp_ctx_t *)s->ctx);
}

static void temp_free(lp_sampler_t *s)
{
    free(s->ctx);
}

static const lp_sampler_i temp_i = {
    .name = temp_name, .apply = temp_apply, .clone = temp_clone, .free = temp_free};

lp_sampler_t *lp_sampler_temp_new(float temp)
{
    return temp_new((temp_ctx_t){temp, 0.0f, 1.0f});
}

lp_sampler_t *lp_sampler_temp_ext_new(float temp, float delta, float exponent)
{
    return temp_new((temp_ctx_t){temp, delta, exponent});
}

/* ---- mirostat v1 ----------------------------------------------------------------------- */

static const char *mirostat_name(const lp_sampler_t *s)
{
    (void)s;
    return "mirostat";
}

static int mirostat_apply(lp_sampler_t *s, lp_cands_t *c)
{
    rng_ctx_t *ctx = s->ctx;
    int rc = lp_cands_materialize(c);
    if (rc) return rc;
    lp_token_array_t *a = &c->arr;
    if (!a->size) return no_candidates();
    lp_cands_softmax(c, false);
    /* the m most likely, sorted, for the Zipf exponent estimate */
    size_t m = (size_t)ctx->m < a->size ? (size_t)ctx->m : a->size;
    if (!a->sorted) {
        lp__select_top(a->data, a->size, m);
        lp__sort_desc(a->data, m);
    }
    float sum_ti_bi = 0.0f, sum_ti_sq = 0.0f;
    for (size_t i = 0; i + 1 < m; i++) {
        float t_i = logf((float)(i + 2) / (float)(i + 1));
        float b_i = logf(a->data[i].p / a->data[i + 1].p);
        sum_ti_bi += t_i * b_i;
        sum_ti_sq += t_i * t_i;
    }
    float s_hat = sum_ti_bi / sum_ti_sq;
    float epsilon_hat = s_hat - 1;
    int32_t n_vocab = ctx->n_vocab > 0 ? ctx->n_vocab : (int32_t)a->size;
    float k = powf((epsilon_hat * powf(2, ctx->mu)) / (1 - powf((float)n_vocab, -epsilon_hat)),
                   1 / s_hat);
    int32_t ki = k >= 1.0f && k < 2e9f ? (int32_t)k : (k >= 2e9f ? INT32_MAX : 1);
    if ((size_t)ki <= m) {
        a->size = (size_t)ki;
        a->sorted = true;
    } else {
        a->sorted = false;
        lp_cands_top_k(c, ki);
    }
    lp_cands_softmax(c, false);
    size_t idx = draw_list(a, ctx->rng);
    select_list(c, idx);
    float observed = -log2f(a->data[idx].p);
    ctx->mu = ctx->mu - ctx->eta * (observed - ctx->tau);
    return 0;
}

static void mirostat_reset(lp_sampler_t *s)
{
    rng_ctx_t *ctx = s->ctx;
    ctx->mu = 2.0f * ctx->tau;
}

static const lp_sampler_i mirostat_i = {.name = mirostat_name,
                                        .apply = mirostat_apply,
                                        .reset = mirostat_reset,
                                        .clone = rng_sampler_clone,
                                        .free = rng_sampler_free};

lp_sampler_t *lp_sampler_mirostat_new(int32_t n_vocab, float tau, float eta, int32_t m,
                                       lp_rng_t *rng)
{
    return rng_sampler_new(&mirostat_i, (rng_ctx_t){.rng = rng, .tau = tau, .eta = eta,
                                                    .mu = 2.0f * tau, .n_vocab = n_vocab,
                                                    .m = m});
}

/* ---- mirostat v2 ----------------------------------------------------------------------- */

static const char *mirostat_v2_name(const lp_sampler_t *s)
{
    (void)s;
    return "mirostat-v2";
}

static int mirostat_v2_apply(lp_sampler_t *s, lp_cands_t *c)
{
    rng_ctx_t *ctx = s->ctx;
    int rc = lp_cands_materialize(c);
    if (rc) return rc;
    lp_token_array_t *a = &c->arr;
    if (!a->size) return no_candidates();
    lp_cands_softmax(c, false);
    /* keep the tokens whose surprise -log2 p is at most mu (a prefix of the
     * sorted list in llama.cpp); at least the most likely one */
    size_t best = 0, k = 0;
    for (size_t i = 1; i < a->size; i++)
        if (a->data[i].logit > a->data[best].logit) best = i;
    lp_token_data_t top = a->data[best];
    for (size_t i = 0; i < a->size; i++)
        if (!(-log2f(a->data[i].p) > ctx->mu)) a->data[k++] = a->data[i];
    if (k == 0) a->data[k++] = top;
    a->size = k;
    a->sorted = false;
    lp_cands_softmax(c, false);
    size_t idx = draw_list(a, ctx->rng);
    select_list(c, idx);
    float observed = -log2f(a->data[idx].p);
    ctx->mu = ctx->mu - ctx->eta * (observed - ctx->tau);
    return 0;
}

static const lp_sampler_i mirostat_v2_i = {.name = mirostat_v2_name,
                                           .apply = mirostat_v2_apply,
                                           .reset = mirostat_reset,
                                           .clone = rng_sampler_clone,
                                           .free = rng_sampler_free};

lp_sampler_t *lp_sampler_mirostat_v2_new(float tau, float eta, lp_rng_t *rng)
{
    return rng_sampler_new(&mirostat_v2_i,
                           (rng_ctx_t){.rng = rng, .tau = tau, .eta = eta, .mu = 2.0f * tau});
}

float *lp__sampler_mu(lp_sampler_t *s)
{
    if (s->iface != &mirostat_i && s->iface != &mirostat_v2_i) return NULL;
    return &((rng_ctx_t *)s->ctx)->mu;
}
