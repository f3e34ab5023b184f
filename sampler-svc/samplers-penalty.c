/* samplers-penalty.c - the samplers that push logits by history or by
 * request: repetition/frequency/presence penalties, DRY, and logit bias
 * (llama.cpp meanings).  Each keeps its own ring of recent tokens, fed by
 * accept. */
#include "breakers.h"
#include "cands-impl.h"

#include "error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- a ring of the last `cap` tokens ----------------------------------------- */

typedef struct ring {
    int32_t *v;
    int32_t cap, first, size;
} ring_t;

static int ring_init(ring_t *r, int32_t cap)
{
    r->cap = cap;
    r->first = r->size = 0;
    r->v = cap > 0 ? malloc((size_t)cap * sizeof(int32_t)) : NULL;
    return cap > 0 && !r->v ? LP_ERR(ENOMEM) : 0;
}

static int ring_copy(ring_t *dst, const ring_t *src)
{
    if (ring_init(dst, src->cap)) return LP_ERR(ENOMEM);
    if (src->cap) memcpy(dst->v, src->v, (size_t)src->cap * sizeof(int32_t));
    dst->first = src->first;
    dst->size = src->size;
    return 0;
}

static void ring_push(ring_t *r, int32_t tok)
{
    if (!r->cap) return;
    if (r->size == r->cap) {
        r->v[r->first] = tok;
        r->first = (r->first + 1) % r->cap;
    } else {
        r->v[(r->first + r->size) % r->cap] = tok;
        r->size++;
    }
}

/* i-th from the end: rat(0) is the newest token. */
static inline int32_t ring_rat(const ring_t *r, int32_t i)
{
    return r->v[(r->first + r->size - 1 - i) % r->cap];
}

/* ---- penalties ------------------------------------------------------------------ */

typedef struct tok_count {
    int32_t id, count;
} tok_count_t;

typedef struct penalties {
    int32_t last_n;
    float repeat, freq, present;
    ring_t prev;
    int32_t *ids;        /* scratch, last_n entries */
    tok_count_t *counts; /* scratch, last_n entries */
} penalties_t;

static const char *penalties_name(const lp_sampler_t *s)
{
    (void)s;
    return "penalties";
}

static void penalties_accept(lp_sampler_t *s, int32_t token)
{
    penalties_t *ctx = s->ctx;
    ring_push(&ctx->prev, token);
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int cmp_count_id(const void *key, const void *e)
{
    int32_t x = *(const int32_t *)key, y = ((const tok_count_t *)e)->id;
    return (x > y) - (x < y);
}

static inline float penalize(const penalties_t *ctx, float x, int32_t count)
{
    /* multiply negative logits, divide positive ones (llama.cpp) */
    if (x <= 0) x *= ctx->repeat;
    else x /= ctx->repeat;
    return x - (float)count * ctx->freq - (float)(count > 0) * ctx->present;
}

static int penalties_apply(lp_sampler_t *s, lp_cands_t *c)
{
    penalties_t *ctx = s->ctx;
    if (ctx->last_n == 0 || ctx->prev.size == 0 ||
        (ctx->repeat == 1.0f && ctx->freq == 0.0f && ctx->present == 0.0f))
        return 0;
    /* counts of each token among the last_n, as sorted (id, count) pairs */
    int32_t n = ctx->prev.size;
    int32_t *ids = ctx->ids;
    for (int32_t i = 0; i < n; i++) ids[i] = ring_rat(&ctx->prev, i);
    qsort(ids, (size_t)n, sizeof(int32_t), cmp_i32);
    tok_count_t *pairs = ctx->counts;
    int32_t m = 0;
    for (int32_t i = 0; i < n;) {
        int32_t j = i;
        while (j < n && ids[j] == ids[i]) j++;
        pairs[m++] = (tok_count_t){ids[i], j - i};
        i = j;
    }
    if (c->dense) {
        float *row = lp__cands_row_w(c);
        for (int32_t i = 0; i < m; i++) {
            int32_t id = pairs[i].id;
            if (id >= 0 && id < c->n_row) row[id] = penalize(ctx, row[id], pairs[i].count);
        }
        return 0;
    }
    lp_token_array_t *a = &c->arr;
    for (size_t i = 0; i < a->size; i++) {
        const tok_count_t *hit =
            bsearch(&a->data[i].id, pairs, (size_t)m, sizeof(*pairs), cmp_count_id);
        if (hit) a->data[i].logit = penalize(ctx, a->data[i].logit, hit->count);
    }
    a->sorted = false;
    return 0;
}

static void penalties_reset(lp_sampler_t *s)
{
    penalties_t *ctx = s->ctx;
    ctx->prev.first = ctx->prev.size = 0;
}

static void penalties_free(lp_sampler_t *s)
{
    penalties_t *ctx = s->ctx;
    free(ctx->prev.v);
    free(ctx->ids);
    free(ctx->counts);
    free(ctx);
}

static lp_sampler_t *penalties_make(int32_t last_n, float repeat, float freq, float present,
                                    const ring_t *copy_from);

static lp_sampler_t *penalties_clone(const lp_sampler_t *s)
{
    const penalties_t *ctx = s->ctx;
    return penalties_make(ctx->last_n, ctx->repeat, ctx->freq, ctx->present, &ctx->prev);
}

static const lp_sampler_i penalties_i = {.name = penalties_name,
                                         .accept = penalties_accept,
                                         .apply = penalties_apply,
                                         .reset = penalties_reset,
                                         .clone = penalties_clone,
                                         .free = penalties_free};

static lp_sampler_t *penalties_make(int32_t last_n, float repeat, float freq, float present,
                                    const ring_t *copy_from)
{
    penalties_t *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) return NULL;
    if (last_n < 0) last_n = 0;
    *ctx = (penalties_t){last_n, repeat, freq, present, {0}, NULL, NULL};
    int rc = copy_from ? ring_copy(&ctx->prev, copy_from) : ring_init(&ctx->prev, last_n);
    ctx->ids = malloc(((size_t)last_n + 1) * sizeof(int32_t));
    ctx->counts = malloc(((size_t)last_n + 1) * sizeof(tok_count_t));
    lp_sampler_t *s = !rc && ctx->ids && ctx->counts ? lp_sampler_new(&penalties_i, ctx) : NULL;
    if (!s) {
        free(ctx->prev.v);
        free(ctx->ids);
        free(ctx->counts);
        free(ctx);
    }
    return s;
}

lp_sampler_t *lp_sampler_penalties_new(int32_t last_n, float repeat, float freq, float present)
{
    return penalties_make(last_n, repeat, freq, present, NULL);
}

/* ---- DRY ("don't repeat yourself", from koboldcpp via llama.cpp) --------------------- */

typedef struct dry {
    float multiplier, base;
    int32_t allowed_length, last_n;
    lp_dry_breakers_t *breakers; /* owned */
    ring_t last;
    int32_t *repeat_count;   /* scratch, last_n */
    tok_count_t *max_repeat; /* scratch: (token, longest repeat it would extend) */
} dry_t;

static bool dry_enabled(const dry_t *d)
{
    return d->multiplier != 0.0f && d->base >= 1.0f && d->last_n != 0;
}

static const char *dry_name(const lp_sampler_t *s)
{
    (void)s;
    return "dry";
}

static void dry_accept(lp_sampler_t *s, int32_t token)
{
    dry_t *d = s->ctx;
    if (dry_enabled(d)) ring_push(&d->last, token);
}

static int cmp_count_by_id(const void *a, const void *b)
{
    int32_t x = ((const tok_count_t *)a)->id, y = ((const tok_count_t *)b)->id;
    return (x > y) - (x < y);
}

static bool is_single_token_breaker(const dry_t *d, int32_t tok)
{
    const lp_dry_breakers_t *t = d->breakers;
    for (size_t b = lp_dry_breakers_find(t, tok); b < t->n && t->v[b].head == tok; b++)
        if (t->v[b].tail_len == 0) return true;
    return false;
}

static int dry_apply(lp_sampler_t *s, lp_cands_t *c)
{
    dry_t *d = s->ctx;
    if (!dry_enabled(d)) return 0;
    int32_t n = d->last.size < d->last_n ? d->last.size : d->last_n;
    if (n <= d->allowed_length) return 0;
    const ring_t *r = &d->last;

    /* Step 1: the nearest sequence breaker limits how far back a repeat may reach. */
    int32_t rep_limit = n;
    for (int32_t i = 0; i < n; i++) {
        int32_t tok = ring_rat(r, i);
        int32_t longest = -1;
        const lp_dry_breakers_t *t = d->breakers;
        for (size_t b = lp_dry_breakers_find(t, tok); b < t->n && t->v[b].head == tok; b++) {
            int32_t tail = t->v[b].tail_len;
            if (tail > longest && tail <= i) {
                bool match = true;
                for (int32_t o = 0; o < tail && match; o++)
                    match = t->v[b].tail[o] == ring_rat(r, i - o - 1);
                if (match) longest = tail;
            }
        }
        if (longest >= 0) {
            rep_limit = i - longest;
            break;
        }
    }
    if (rep_limit < d->allowed_length) return 0;

    /* Step 2: Z-algorithm backwards: repeat_count[last - k] = length of the
     * suffix that also ends k tokens earlier. */
    int32_t *rc = d->repeat_count;
    memset(rc, 0, (size_t)n * sizeof(int32_t));
    {
        const int32_t last = n - 1;
        int32_t rt = 0, lt = 0;
        for (int32_t k = 1; k < n; k++) {
            if (k > rt) {
                int32_t m = 0;
                while (m + k < n && ring_rat(r, m) == ring_rat(r, m + k)) m++;
                rc[last - k] = m < rep_limit ? m : rep_limit;
                if (m > 0) {
                    lt = k;
                    rt = k + m - 1;
                }
            } else {
                int32_t p = k - lt;
                int32_t right_part_len = rt - k + 1;
                if (rc[last - p] < right_part_len) {
                    int32_t m = rc[last - p] < rep_limit ? rc[last - p] : rep_limit;
                    rc[last - k] = m;
                } else {
                    int32_t i = rt + 1;
                    while (i < n && ring_rat(r, i) == ring_rat(r, i - k)) i++;
                    int32_t m = i - k < rep_limit ? i - k : rep_limit;
                    rc[last - k] = m;
                    lt = k;
                    rt = i - 1;
                }
            }
        }
    }

    /* Step 3: the token after each repeat would extend it. */
    int32_t n_max = 0;
    for (int32_t i = 0; i < n - 1; i++) {
        int32_t len = rc[i];
        if (len < d->allowed_length) continue;
        int32_t tok = ring_rat(r, n - 2 - i);
        int32_t j = 0;
        while (j < n_max && d->max_repeat[j].id != tok) j++;
        if (j == n_max) d->max_repeat[n_max++] = (tok_count_t){tok, len};
        else if (d->max_repeat[j].count < len) d->max_repeat[j].count = len;
    }
    if (!n_max) return 0;
    qsort(d->max_repeat, (size_t)n_max, sizeof(tok_count_t), cmp_count_by_id);

    /* Step 4: penalty multiplier * base^(len - allowed_length), exponent clamped. */
    const float FLOAT_MAX_LOG = 88.7228391f;
    int32_t max_exponent = 0;
    if (d->base > 1.000001f) max_exponent = (int32_t)(FLOAT_MAX_LOG / logf(d->base));
    for (int32_t j = 0; j < n_max; j++) {
        int32_t tok = d->max_repeat[j].id;
        if (is_single_token_breaker(d, tok)) continue;
        int32_t e = d->max_repeat[j].count - d->allowed_length;
        if (max_exponent > 0 && e > max_exponent) e = max_exponent;
        float penalty = d->multiplier * powf(d->base, (float)e);
        if (c->dense) {
            if (tok >= 0 && tok < c->n_row) lp__cands_row_w(c)[tok] -= penalty;
        } else {
            for (size_t i = 0; i < c->arr.size; i++)
                if (c->arr.data[i].id == tok) c->arr.data[i].logit -= penalty;
        }
    }
    c->arr.sorted = false;
    return 0;
}

static void dry_reset(lp_sampler_t *s)
{
    dry_t *d = s->ctx;
    d->last.first = d->last.size = 0;
}

static void dry_free(lp_sampler_t *s)
{
    dry_t *d = s->ctx;
    lp_dry_breakers_destroy(&d->breakers);
    free(d->last.v);
    free(d->repeat_count);
    free(d->max_repeat);
    free(d);
}

static lp_sampler_t *dry_make(const dry_t *proto, const ring_t *copy_from);

static lp_sampler_t *dry_clone(const lp_sampler_t *s)
{
    const dry_t *d = s->ctx;
    return dry_make(d, &d->last);
}

static const lp_sampler_i dry_i = {.name = dry_name,
                                   .accept = dry_accept,
                                   .apply = dry_apply,
                                   .reset = dry_reset,
                                   .clone = dry_clone,
                                   .free = dry_free};

static lp_sampler_t *dry_make(const dry_t *proto, const ring_t *copy_from)
{
    dry_t *d = malloc(sizeof(*d));
    if (!d) return NULL;
    *d = *proto;
    d->last.v = NULL;
    d->breakers = lp_dry_breakers_copy(proto->breakers);
    int32_t cap = dry_enabled(d) ? d->last_n : 0;
    int rc = copy_from && copy_from->cap == cap ? ring_copy(&d->last, copy_from)
                                                : ring_init(&d->last, cap);
    d->repeat_count = malloc(((size_t)cap + 1) * sizeof(int32_t));
    d->max_repeat = malloc(((size_t)cap + 1) * sizeof(tok_count_t));
    lp_sampler_t *s = !rc && d->breakers && d->repeat_count && d->max_repeat
                          ? lp_sampler_new(&dry_i, d) : NULL;
    if (!s) {
        lp_dry_breakers_destroy(&d->breakers);
        free(d->last.v);
        free(d->repeat_count);
        free(d->max_repeat);
        free(d);
    }
    return s;
}

lp_sampler_t *lp_sampler_dry_new(float multiplier, float base, int32_t allowed_length,
                                  int32_t last_n, const lp_dry_breakers_t *breakers)
{
    dry_t proto = {.multiplier = multiplier, .base = base, .allowed_length = allowed_length,
                   .last_n = last_n < 0 ? 0 : last_n};
    /* llama.cpp keeps breakers only when DRY is on */
    proto.breakers = dry_enabled(&proto) ? (lp_dry_breakers_t *)breakers : NULL;
    return dry_make(&proto, NULL); /* copies the table */
}

/* ---- logit bias ------------------------------------------------------------------------ */

typedef struct bias {
    int32_t n;
    lp_logit_bias_t *v; /* sorted by id, duplicates summed */
} bias_t;

static const char *bias_name(const lp_sampler_t *s)
{
    (void)s;
    return "logit-bias";
}

static int cmp_bias(const void *a, const void *b)
{
    int32_t x = ((const lp_logit_bias_t *)a)->id, y = ((const lp_logit_bias_t *)b)->id;
    return (x > y) - (x < y);
}

static int bias_apply(lp_sampler_t *s, lp_cands_t *c)
{
    const bias_t *b = s->ctx;
    if (c->dense) {
        float *row = lp__cands_row_w(c);
        for (int32_t i = 0; i < b->n; i++)
            if (b->v[i].id < c->n_row) row[b->v[i].id] += b->v[i].bias;
        return 0;
    }
    lp_token_array_t *a = &c->arr;
    for (size_t i = 0; i < a->size; i++) {
        lp_logit_bias_t key = {a->data[i].id, 0.0f};
        const lp_logit_bias_t *hit = bsearch(&key, b->v, (size_t)b->n, sizeof(key), cmp_bias);
        if (hit) a->data[i].logit += hit->bias;
    }
    a->sorted = false;
    return 0;
}

static void bias_free(lp_sampler_t *s)
{
    bias_t *b = s->ctx;
    free(b->v);
    free(b);
}

static lp_sampler_t *bias_clone(const lp_sampler_t *s)
{
    const bias_t *b = s->ctx;
    return lp_sampler_logit_bias_new(b->v, b->n);
}

static const lp_sampler_i bias_i = {
    .name = bias_name, .apply = bias_apply, .clone = bias_clone, .free = bias_free};

lp_sampler_t *lp_sampler_logit_bias_new(const lp_logit_bias_t *bias, int32_t n)
{
    bias_t *b = calloc(1, sizeof(*b));
    if (!b) return NULL;
    b->v = malloc(((size_t)n + 1) * sizeof(*b->v));
    lp_sampler_t *s = b->v ? lp_sampler_new(&bias_i, b) : NULL;
    if (!s) {
        free(b->v);
        free(b);
        return NULL;
    }
    if (n) memcpy(b->v, bias, (size_t)n * sizeof(*bias));
    qsort(b->v, (size_t)n, sizeof(*b->v), cmp_bias);
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        if (m && b->v[m - 1].id == b->v[i].id) b->v[m - 1].bias += b->v[i].bias;
        else b->v[m++] = b->v[i];
    }
    b->n = m;
    return s;
}
