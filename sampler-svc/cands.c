/* cands.c - the candidate set (dense row or explicit list) and the partial
 * selections that keep the samplers from sorting a whole vocabulary. */
#include "cands-impl.h"

#include "error.h"
#include "row.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void lp_cands_init(lp_cands_t *c)
{
    memset(c, 0, sizeof(*c));
    c->selected_id = -1;
    c->arr.selected = -1;
}

void lp_cands_free(lp_cands_t *c)
{
    free(c->row);
    free(c->bmax);
    free(c->orig);
    free(c->buf);
    free(c->tmp);
    free(c->fscratch);
    lp_cands_init(c);
}

int lp_cands_reserve(lp_cands_t *c, size_t n)
{
    if (n <= c->buf_cap) return 0;
    size_t off = c->arr.data ? (size_t)(c->arr.data - c->buf) : 0;
    lp_token_data_t *nb = realloc(c->buf, n * sizeof(*nb));
    if (!nb) return lp_error_set(LP_ERR(ENOMEM), "sampler: out of memory for %zu candidates", n);
    c->buf = nb;
    c->buf_cap = n;
    c->arr.data = nb + off;
    return 0;
}

int lp__cands_tmp(lp_cands_t *c, size_t n)
{
    if (n <= c->tmp_cap) return 0;
    lp_token_data_t *nb = realloc(c->tmp, n * sizeof(*nb));
    if (!nb) return lp_error_set(LP_ERR(ENOMEM), "sampler: out of memory for %zu candidates", n);
    c->tmp = nb;
    c->tmp_cap = n;
    return 0;
}

int lp__cands_fscratch(lp_cands_t *c, int32_t n)
{
    if (n <= c->fscratch_cap) return 0;
    float *nb = realloc(c->fscratch, (size_t)n * sizeof(*nb));
    if (!nb) return lp_error_set(LP_ERR(ENOMEM), "sampler: out of memory for a row of %d", n);
    c->fscratch = nb;
    c->fscratch_cap = n;
    return 0;
}

int lp_cands_set_row(lp_cands_t *c, const float *logits, int32_t n)
{
    if (n > c->row_cap) {
        float *nr = realloc(c->row, (size_t)n * sizeof(*nr));
        if (!nr) return lp_error_set(LP_ERR(ENOMEM), "sampler: out of memory for a row of %d", n);
        c->row = nr;
        c->row_cap = n;
    }
    int32_t nb = (n + 63) / 64;
    if (nb > c->bmax_cap) {
        float *b = realloc(c->bmax, (size_t)nb * sizeof(*b));
        if (!b) return lp_error_set(LP_ERR(ENOMEM), "sampler: out of memory for a row of %d", n);
        c->bmax = b;
        c->bmax_cap = nb;
    }
    c->row_max = lp__row_load(c->row, logits, n, c->bmax); /* NaN never wins */
    c->row_fresh = true;
    c->keep_orig = false;
    c->n_row = n;
    c->dense = true;
    c->arr.data = c->buf;
    c->arr.size = 0;
    c->arr.selected = -1;
    c->arr.sorted = false;
    c->selected_id = -1;
    return 0;
}

float *lp__cands_row_w(lp_cands_t *c)
{
    if (c->row_fresh && c->keep_orig) memcpy(c->orig, c->row, (size_t)c->n_row * sizeof(float));
    c->row_fresh = false;
    return c->row;
}

int lp__cands_keep_orig(lp_cands_t *c)
{
    if (!c->row_fresh)
        return lp_error_set(LP_ERR(EINVAL), "sampler: the row was changed before it was kept");
    if (c->n_row > c->orig_cap) {
        float *o = realloc(c->orig, (size_t)c->n_row * sizeof(*o));
        if (!o) return lp_error_set(LP_ERR(ENOMEM), "sampler: out of memory for a row of %d", c->n_row);
        c->orig = o;
        c->orig_cap = c->n_row;
    }
    c->keep_orig = true;
    return 0;
}

const float *lp__cands_orig(const lp_cands_t *c, const float **bmax)
{
    *bmax = c->row_fresh ? c->bmax : NULL;
    if (!c->keep_orig) return NULL;
    return c->row_fresh ? c->row : c->orig;
}

int32_t lp__cands_argmax(const lp_cands_t *c)
{
    int32_t at;
    if (!c->row_fresh) {
        lp__row_max(c->row, c->n_row, &at);
        return at;
    }
    if (c->row_max == -INFINITY) return -1;
    for (int32_t i = 0; i < c->n_row; i += 64) {
        if (c->bmax[i / 64] < c->row_max) continue;
        int32_t end = i + 64 < c->n_row ? i + 64 : c->n_row;
        for (int32_t j = i; j < end; j++)
            if (c->row[j] == c->row_max) return j;
    }
    return -1; /* not reached: row_max is in the row */
}

int lp_cands_set_list(lp_cands_t *c, const lp_token_data_t *data, size_t n)
{
    int rc = lp_cands_reserve(c, n ? n : 1);
    if (rc) return rc;
    memcpy(c->buf, data, n * sizeof(*data));
    c->dense = false;
    c->n_row = 0;
    c->arr.data = c->buf;
    c->arr.size = n;
    c->arr.selected = -1;
    c->arr.sorted = false;
    c->selected_id = -1;
    return 0;
}

int lp_cands_materialize(lp_cands_t *c)
{
    if (!c->dense) return 0;
    int rc = lp_cands_reserve(c, (size_t)c->n_row + 1);
    if (rc) return rc;
    size_t k = 0;
    for (int32_t i = 0; i < c->n_row; i++) {
        if (c->row[i] == -INFINITY) continue;
        c->buf[k].id = i;
        c->buf[k].logit = c->row[i];
        c->buf[k].p = 0.0f;
        k++;
    }
    c->dense = false;
    c->arr.data = c->buf;
    c->arr.size = k;
    c->arr.sorted = false;
    c->arr.selected = -1;
    return 0;
}

size_t lp_cands_size(const lp_cands_t *c)
{
    return c->dense ? (size_t)c->n_row : c->arr.size;
}

/* ---- list helpers ------------------------------------------------------------ */

static int cmp_desc(const void *a, const void *b)
{
    float x = ((const lp_token_data_t *)a)->logit, y = ((const lp_token_data_t *)b)->logit;
    return (x < y) - (x > y);
}

void lp__sort_desc(lp_token_data_t *d, size_t n)
{
    qsort(d, n, sizeof(*d), cmp_desc);
}

void lp_cands_softmax(lp_cands_t *c, bool sort)
{
    lp_token_array_t *a = &c->arr;
    if (!a->size) return;
    if (sort && !a->sorted) {
        lp_cands_top_k(c, (int32_t)(a->size > INT32_MAX ? INT32_MAX : a->size));
    }
    float max_l = a->data[0].logit;
    for (size_t i = 1; i < a->size; i++)
        if (a->data[i].logit > max_l) max_l = a->data[i].logit;
    double sum = 0.0;
    for (size_t i = 0; i < a->size; i++) {
        float p = expf(a->data[i].logit - max_l);
        a->data[i].p = p;
        sum += p;
    }
    for (size_t i = 0; i < a->size; i++) a->data[i].p = (float)(a->data[i].p / sum);
}

/* Min-heap of k entries by logit (heap[0] is the smallest kept). */
static void heap_sift_down(lp_token_data_t *h, size_t n, size_t i)
{
    lp_token_data_t x = h[i];
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        float mv = x.logit;
        if (l < n && h[l].logit < mv) m = l, mv = h[l].logit;
        if (l + 1 < n && h[l + 1].logit < mv) m = l + 1;
        if (m == i) break;
        h[i] = h[m];
        i = m;
    }
    h[i] = x;
}

static void heap_push_full(lp_token_data_t *h, size_t k, lp_token_data_t x)
{
    /* replace the minimum */
    h[0] = x;
    heap_sift_down(h, k, 0);
}

static void heap_build(lp_token_data_t *h, size_t n)
{
    for (size_t i = n / 2; i-- > 0;) heap_sift_down(h, n, i);
}

/* Three-way partition of d[0..n) around pivot v: [> v][== v][< v]. */
static void partition3(lp_token_data_t *d, size_t n, float v, size_t *n_gt, size_t *n_eq)
{
    size_t lt = 0, i = 0, gt = n;
    /* Dutch flag with "greater" first */
    while (i < gt) {
        float x = d[i].logit;
        if (x > v) {
            lp_token_data_t t = d[lt];
            d[lt] = d[i];
            d[i] = t;
            lt++;
            i++;
        } else if (x < v) {
            gt--;
            lp_token_data_t t = d[gt];
            d[gt] = d[i];
            d[i] = t;
        } else
            i++;
    }
    *n_gt = lt;
    *n_eq = gt - lt;
}

static float median3(const lp_token_data_t *d, size_t n)
{
    float a = d[0].logit, b = d[n / 2].logit, c = d[n - 1].logit;
    if (a > b) { float t = a; a = b; b = t; }
    if (b > c) b = c;
    return a > b ? a : b;
}

/* Move the k largest logits to d[0..k) (unordered), expected O(n). */
void lp__select_top(lp_token_data_t *d, size_t n, size_t k)
{
    while (k > 0 && k < n) {
        size_t n_gt, n_eq;
        partition3(d, n, median3(d, n), &n_gt, &n_eq);
        if (k <= n_gt) {
            n = n_gt;
        } else if (k <= n_gt + n_eq) {
            return;
        } else {
            d += n_gt + n_eq;
            n -= n_gt + n_eq;
            k -= n_gt + n_eq;
        }
    }
}

void lp_cands_top_k(lp_cands_t *c, int32_t k)
{
    lp_token_array_t *a = &c->arr;
    if (k <= 0) return;
    size_t kk = (size_t)k < a->size ? (size_t)k : a->size;
    if (!a->sorted) {
        lp__select_top(a->data, a->size, kk);
        /* a short head is sorted (cheap, and tests read it in order); a long
         * one stays unsorted: no step after needs the order */
        if (kk <= 4096) {
            lp__sort_desc(a->data, kk);
            a->sorted = true;
        }
    }
    a->size = kk;
}

/* ---- dense helpers -------------------------------------------------------------- */

size_t lp__row_top_k(const float *x, int32_t n, int32_t k, const float *bmax,
                     lp_token_data_t *h)
{
    if (k <= 0) return 0;
    size_t filled = 0;
    int32_t i = 0;
    for (; i < n && filled < (size_t)k; i++) {
        h[filled].id = i;
        h[filled].logit = x[i];
        h[filled].p = 0.0f;
        filled++;
    }
    heap_build(h, filled);
    /* the rest of the first block one by one, then whole blocks skipped
     * where their maximum cannot enter the heap (a skipped logit would have
     * failed the test below, so the result does not depend on the blocks) */
    for (; i < n && i % 64; i++)
        if (x[i] > h[0].logit) heap_push_full(h, filled, (lp_token_data_t){i, x[i], 0.0f});
    while (i < n) {
        int32_t end = i + 64 <= n ? i + 64 : n;
        float bm;
        if (bmax) bm = bmax[i / 64];
        else if (end - i == 64) bm = lp__block_max64(x + i);
        else {
            bm = x[i];
            for (int32_t j = i + 1; j < end; j++) bm = x[j] > bm ? x[j] : bm;
        }
        if (bm > h[0].logit) {
            for (int32_t j = i; j < end; j++)
                if (x[j] > h[0].logit) {
                    lp_token_data_t t = {j, x[j], 0.0f};
                    heap_push_full(h, filled, t);
                }
        }
        i = end;
    }
    lp__sort_desc(h, filled);
    while (filled && h[filled - 1].logit == -INFINITY) filled--; /* excluded tokens */
    return filled;
}

int lp__dense_top_k(lp_cands_t *c, int32_t k)
{
    int32_t n = c->n_row;
    if (k <= 0 || k >= n) return lp_cands_materialize(c);
    int rc;
    if (k > 4096) {
        /* large k: quickselect over the whole list */
        if ((rc = lp_cands_materialize(c))) return rc;
        lp_cands_top_k(c, k);
        return 0;
    }
    if ((rc = lp_cands_reserve(c, (size_t)k))) return rc;
    size_t filled = lp__row_top_k(c->row, n, k, c->row_fresh ? c->bmax : NULL, c->buf);
    c->dense = false;
    c->arr.data = c->buf;
    c->arr.size = filled;
    c->arr.sorted = true;
    c->arr.selected = -1;
    return 0;
}

/* Entries d[0..n) with masses w[] (parallel to d via d[i].p): move to the
 * front the smallest set of largest logits whose mass reaches `need`
 * (at least min_keep of them); returns its size.  Expected O(n). */
size_t lp__select_mass(lp_token_data_t *d, size_t n, double need, size_t min_keep)
{
    size_t taken = 0;
    double have = 0.0;
    while (n > 0) {
        size_t n_gt, n_eq;
        partition3(d, n, median3(d, n), &n_gt, &n_eq);
        double m_gt = 0.0, m_eq = 0.0;
        for (size_t i = 0; i < n_gt; i++) m_gt += d[i].p;
        for (size_t i = n_gt; i < n_gt + n_eq; i++) m_eq += d[i].p;
        if (have + m_gt >= need && taken + n_gt >= min_keep && n_gt > 0) {
            n = n_gt; /* the answer lies within the greater part */
            continue;
        }
        have += m_gt;
        taken += n_gt;
        if (have + m_eq >= need && taken + n_eq >= min_keep) {
            /* equal logits: take as many as needed, in any order */
            for (size_t i = n_gt; i < n_gt + n_eq; i++) {
                have += d[i].p;
                taken++;
                if (have >= need && taken >= min_keep) break;
            }
            return taken;
        }
        have += m_eq;
        taken += n_eq;
        d += n_gt + n_eq;
        n -= n_gt + n_eq;
    }
    return taken;
}
