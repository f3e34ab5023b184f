/* samplers-trunc.c - the samplers that cut the candidate set: top-k, top-p,
 * min-p, typical-p, top-n-sigma and XTC (llama.cpp meanings).  On a dense
 * row they use partial selection and a histogram, never a full sort. */
#include "cands-impl.h"

#include "error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct trunc_ctx {
    float p;
    int32_t k;
    size_t min_keep;
    float threshold;
    lp_rng_t *rng; /* borrowed (XTC) */
} trunc_ctx_t;

static lp_sampler_t *trunc_new(const lp_sampler_i *iface, trunc_ctx_t v)
{
    trunc_ctx_t *ctx = malloc(sizeof(*ctx));
    if (!ctx) return NULL;
    *ctx = v;
    lp_sampler_t *s = lp_sampler_new(iface, ctx);
    if (!s) free(ctx);
    return s;
}

static lp_sampler_t *trunc_clone(const lp_sampler_t *s)
{
    return trunc_new(s->iface, *(const trunc_ctx_t *)s->ctx);
}

static void trunc_free(lp_sampler_t *s)
{
    free(s->ctx);
}

/* ---- top-k ---------------------------------------------------------------------- */

static const char *top_k_name(const lp_sampler_t *s)
{
    (void)s;
    return "top-k";
}

static int top_k_apply(lp_sampler_t *s, lp_cands_t *c)
{
    const trunc_ctx_t *ctx = s->ctx;
    if (ctx->k <= 0) return 0;
    if (c->dense) return lp__dense_top_k(c, ctx->k);
    lp_cands_top_k(c, ctx->k);
    return 0;
}

static const lp_sampler_i top_k_i = {
    .name = top_k_name, .apply = top_k_apply, .clone = trunc_clone, .free = trunc_free};

lp_sampler_t *lp_sampler_top_k_new(int32_t k)
{
    return trunc_new(&top_k_i, (trunc_ctx_t){.k = k});
}

/* ---- top-p ---------------------------------------------------------------------- */

static const char *top_p_name(const lp_sampler_t *s)
{
    (void)s;
    return "top-p";
}

#define TOP_P_BUCKETS 2048
#define TOP_P_RANGE 40.0f /* at most this many nats below the maximum are bucketed */

typedef struct hist {
    float max, scale;
} hist_t;

/* Bucket 0 holds the largest logits; everything beyond the range falls in
 * the last bucket.  The same inline code runs in every pass, so a logit
 * always lands in the same bucket. */
static inline int bucket_of(const hist_t *h, float x)
{
    float f = (h->max - x) * h->scale;
    return f < (float)(TOP_P_BUCKETS - 1) ? (int)f : TOP_P_BUCKETS - 1;
}

/* Dense top-p: the softmax mass per logit bucket, counted down from the
 * maximum, finds the bucket where the cumulative mass reaches p; only that
 * bucket's entries go through a mass-weighted selection.  The buckets span
 * the row's own range (at most 40 nats), so a flat row spreads out too.
 * When most of the row survives it stays dense (cut tokens become -inf);
 * otherwise the survivors become a list. */
static int top_p_dense(const trunc_ctx_t *ctx, lp_cands_t *c)
{
    int32_t n = c->n_row;
    int rc = lp__cands_fscratch(c, n);
    if (rc) return rc;
    float max = lp__row_max(c->row, n, NULL);
    if (max == -INFINITY) return lp_cands_materialize(c);
    float range = max - lp__row_min_finite(c->row, n);
    if (!(range <= TOP_P_RANGE)) range = TOP_P_RANGE;
    if (range < 1e-30f) range = 1e-30f;
    hist_t h = {max, (float)TOP_P_BUCKETS / range};
    float *e = c->fscratch;
    double sum = lp__row_expsum(c->row, e, n, max);
    double need = (double)ctx->p * sum;

    static _Thread_local double mass[TOP_P_BUCKETS];
    static _Thread_local int32_t count[TOP_P_BUCKETS];
    memset(mass, 0, sizeof(mass));
    memset(count, 0, sizeof(count));
    for (int32_t i = 0; i < n; i++) {
        float x = c->row[i];
        if (x == -INFINITY) continue;
        int b = bucket_of(&h, x);
        mass[b] += e[i];
        count[b]++;
    }
    double cum = 0.0;
    size_t taken = 0;
    int B = -1;
    for (int b = 0; b < TOP_P_BUCKETS; b++) {
        if (cum + mass[b] >= need && taken + (size_t)count[b] >= ctx->min_keep) {
            B = b;
            break;
        }
        cum += mass[b];
        taken += (size_t)count[b];
    }
    if (B < 0) return lp_cands_materialize(c); /* rounding: keep every candidate */

    size_t nb = (size_t)count[B];
    size_t keep_min = ctx->min_keep > taken ? ctx->min_keep - taken : 0;
    if ((rc = lp__cands_tmp(c, nb + 1))) return rc;
    bool stay_dense = taken + nb > (size_t)n / 4;
    if (stay_dense) {
        size_t kb = 0;
        float *row = lp__cands_row_w(c);
        for (int32_t i = 0; i < n; i++) {
            float x = row[i];
            if (x == -INFINITY) continue;
            int b = bucket_of(&h, x);
            if (b > B) row[i] = -INFINITY;
            else if (b == B) c->tmp[kb++] = (lp_token_data_t){i, x, e[i]};
        }
        size_t t = lp__select_mass(c->tmp, kb, need - cum, keep_min);
        for (size_t j = t; j < kb; j++) row[c->tmp[j].id] = -INFINITY;
        return 0;
    }
    if ((rc = lp_cands_reserve(c, taken + nb + 1))) return rc;
    size_t k = 0, kb = 0;
    float inv = (float)(1.0 / sum);
    for (int32_t i = 0; i < n; i++) {
        float x = c->row[i];
        if (x == -INFINITY) continue;
        int b = bucket_of(&h, x);
        if (b < B) c->buf[k++] = (lp_token_data_t){i, x, e[i] * inv};
        else if (b == B) c->tmp[kb++] = (lp_token_data_t){i, x, e[i]};
    }
    size_t t = lp__select_mass(c->tmp, kb, need - cum, keep_min);
    for (size_t j = 0; j < t; j++) {
        c->buf[k] = c->tmp[j];
        c->buf[k].p *= inv;
        k++;
    }
    c->dense = false;
    c->arr.data = c->buf;
    c->arr.size = k;
    c->arr.sorted = false;
    c->arr.selected = -1;
    return 0;
}

static int top_p_apply(lp_sampler_t *s, lp_cands_t *c)
{
    const trunc_ctx_t *ctx = s->ctx;
    if (ctx->p >= 1.0f) return 0;
    if (c->dense) return top_p_dense(ctx, c);
    lp_token_array_t *a = &c->arr;
    if (!a->size) return 0;
    lp_cands_softmax(c, false);
    size_t last;
    if (a->sorted) {
        double cum = 0.0;
        last = a->size;
        for (size_t i = 0; i < a->size; i++) {
            cum += a->data[i].p;
            if (cum >= ctx->p && i + 1 >= ctx->min_keep) {
                last = i + 1;
                break;
            }
        }
    } else {
        last = lp__select_mass(a->data, a->size, ctx->p, ctx->min_keep);
    }
    a->size = last;
    return 0;
}

static const lp_sampler_i top_p_i = {
    .name = top_p_name, .apply = top_p_apply, .clone = trunc_clone, .free = trunc_free};

lp_sampler_t *lp_sampler_top_p_new(float p, size_t min_keep)
{
    return trunc_new(&top_p_i, (trunc_ctx_t){.p = p, .min_keep = min_keep});
}

/* ---- min-p ---------------------------------------------------------------------- */

static const char *min_p_name(const lp_sampler_t *s)
{
    (void)s;
    return "min-p";
}

static int min_p_apply(lp_sampler_t *s, lp_cands_t *c)
{
    const trunc_ctx_t *ctx = s->ctx;
    if (ctx->p <= 0.0f || !lp_cands_size(c)) return 0;
    if (c->dense) {
        float max = lp__row_max(c->row, c->n_row, NULL);
        if (max == -INFINITY) return lp_cands_materialize(c);
        const float min_logit = max + logf(ctx->p); /* p_i >= p * p_max */
        size_t cnt = 0;
        for (int32_t i = 0; i < c->n_row; i++) cnt += c->row[i] >= min_logit;
        if (cnt < ctx->min_keep) return lp__dense_top_k(c, (int32_t)ctx->min_keep);
        int rc = lp_cands_reserve(c, cnt + 1);
        if (rc) return rc;
        size_t k = 0;
        for (int32_t i = 0; i < c->n_row; i++)
            if (c->row[i] >= min_logit) c->buf[k++] = (lp_token_data_t){i, c->row[i], 0.0f};
        c->dense = false;
        c->arr.data = c->buf;
        c->arr.size = k;
        c->arr.sorted = false;
        c->arr.selected = -1;
        return 0;
    }
    lp_token_array_t *a = &c->arr;
    float max = -INFINITY;
    for (size_t i = 0; i < a->size; i++) max = a->data[i].logit > max ? a->data[i].logit : max;
    const float min_logit = max + logf(ctx->p);
    size_t cnt = 0;
    for (size_t i = 0; i < a->size; i++) cnt += a->data[i].logit >= min_logit;
    if (cnt < ctx->min_keep) {
        lp_cands_top_k(c, (int32_t)ctx->min_keep);
        return 0;
    }
    size_t k = 0;
    for (size_t i = 0; i < a->size; i++)
        if (a->data[i].logit >= min_logit) a->data[k++] = a->data[i];
    a->size = k; /* order kept, so a sorted list stays sorted */
    return 0;
}

static const lp_sampler_i min_p_i = {
    .name = min_p_name, .apply = min_p_apply, .clone = trunc_clone, .free = trunc_free};

lp_sampler_t *lp_sampler_min_p_new(float p, size_t min_keep)
{
    return trunc_new(&min_p_i, (trunc_ctx_t){.p = p, .min_keep = min_keep});
}

/* ---- typical-p ----------------------------------------------------------------------- */

static const char *typical_name(const lp_sampler_t *s)
{
    (void)s;
    return "typical";
}

static int typical_apply(lp_sampler_t *s, lp_cands_t *c)
{
    const trunc_ctx_t *ctx = s->ctx;
    if (ctx->p >= 1.0f) return 0;
    int rc = lp_cands_materialize(c);
    if (rc) return rc;
    lp_token_array_t *a = &c->arr;
    if (!a->size) return 0;
    lp_cands_softmax(c, false);
    double entropy = 0.0;
    for (size_t i = 0; i < a->size; i++)
        if (a->data[i].p > 0.0f) entropy -= (double)a->data[i].p * log(a->data[i].p);
    /* Order by |-log p - H| ascending and keep the fewest whose mass exceeds
     * p: a selection by mass with the key "-score" in the logit slot. */
    if ((rc = lp__cands_tmp(c, 2 * a->size))) return rc;
    lp_token_data_t *key = c->tmp, *out = c->tmp + a->size;
    for (size_t i = 0; i < a->size; i++) {
        float p = a->data[i].p;
        float score = p > 0.0f ? fabsf((float)(-log(p) - entropy)) : INFINITY;
        key[i] = (lp_token_data_t){(int32_t)i, -score, p};
    }
    size_t keep = lp__select_mass(key, a->size, ctx->p, ctx->min_keep);
    for (size_t i = 0; i < keep; i++) out[i] = a->data[key[i].id];
    memcpy(a->data, out, keep * sizeof(*out));
    a->size = keep;
    a->sorted = false;
    return 0;
}

static const lp_sampler_i typical_i = {
    .name = typical_name, .apply = typical_apply, .clone = trunc_clone, .free = trunc_free};

lp_sampler_t *lp_sampler_typical_new(float p, size_t min_keep)
{
    return trunc_new(&typical_i, (trunc_ctx_t){.p = p, .min_keep = min_keep});
}

/* ---- top-n-sigma ------------------------------------------------------------------ */

static const char *top_n_sigma_name(const lp_sampler_t *s)
{
    (void)s;
    return "top-n-sigma";
}

static int top_n_sigma_apply(lp_sampler_t *s, lp_cands_t *c)
{
    const trunc_ctx_t *ctx = s->ctx;
    if (ctx->p <= 0.0f || lp_cands_size(c) <= 1) return 0;
    /* max, mean and standard deviation over the logits that are not -inf */
    double sum = 0.0, acc = 0.0;
    size_t valid = 0;
    float max = -INFINITY;
    size_t n = lp_cands_size(c);
    for (size_t i = 0; i < n; i++) {
        float x = c->dense ? c->row[i] : c->arr.data[i].logit;
        if (x == -INFINITY) continue;
        max = x > max ? x : max;
        sum += x;
        valid++;
    }
    double mean = valid ? sum / (double)valid : 0.0;
    for (size_t i = 0; i < n; i++) {
        float x = c->dense ? c->row[i] : c->arr.data[i].logit;
        if (x != -INFINITY) acc += (x - mean) * (x - mean);
    }
    double sd = valid ? sqrt(acc / (double)valid) : 0.0;
    float cut = (float)(max - ctx->p * sd);
    if (c->dense) {
        float *row = lp__cands_row_w(c);
        for (int32_t i = 0; i < c->n_row; i++)
            if (row[i] < cut) row[i] = -INFINITY;
        return 0;
    }
    /* llama.cpp sets them to -inf; they can never be chosen, so drop them */
    lp_token_array_t *a = &c->arr;
    size_t k = 0;
    for (size_t i = 0; i < a->size; i++)
        if (!(a->data[i].logit < cut)) a->data[k++] = a->data[i];
    a->size = k;
    return 0;
}

static const lp_sampler_i top_n_sigma_i = {.name = top_n_sigma_name,
                                           .apply = top_n_sigma_apply,
                                           .clone = trunc_clone,
                                           .free = trunc_free};

lp_sampler_t *lp_sampler_top_n_sigma_new(float n)
{
    return trunc_new(&top_n_sigma_i, (trunc_ctx_t){.p = n});
}

/* ---- XTC ----------------------------------------------------------------------------- */

static const char *xtc_name(const lp_sampler_t *s)
{
    (void)s;
    return "xtc";
}

static int xtc_apply(lp_sampler_t *s, lp_cands_t *c)
{
    const trunc_ctx_t *ctx = s->ctx;
    if (ctx->p <= 0.0f || ctx->threshold > 0.5f || lp_cands_size(c) < 2) return 0;
    float chance = (float)lp_rng_uniform(ctx->rng);
    if (chance > ctx->p) return 0;
    int rc = lp_cands_materialize(c);
    if (rc) return rc;
    lp_cands_softmax(c, false);
    lp_token_array_t *a = &c->arr;
    /* Every token at or above the threshold but the least likely of them
     * goes (llama.cpp: pos_last on the sorted list). */
    size_t cnt = 0, least = 0;
    for (size_t i = 0; i < a->size; i++)
        if (a->data[i].p >= ctx->threshold) {
            if (!cnt || a->data[i].p < a->data[least].p) least = i;
            cnt++;
        }
    if (cnt < 2 || a->size - (cnt - 1) < ctx->min_keep) return 0;
    size_t k = 0;
    for (size_t i = 0; i < a->size; i++)
        if (a->data[i].p < ctx->threshold || i == least) a->data[k++] = a->data[i];
    a->size = k;
    return 0;
}

static const lp_sampler_i xtc_i = {
    .name = xtc_name, .apply = xtc_apply, .clone = trunc_clone, .free = trunc_free};

lp_sampler_t *lp_sampler_xtc_new(float probability, float threshold, size_t min_keep,
                                  lp_rng_t *rng)
{
    return trunc_new(&xtc_i, (trunc_ctx_t){.p = probability, .threshold = threshold,
                                           .min_keep = min_keep, .rng = rng});
}
