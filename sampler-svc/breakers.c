/* breakers.c - DRY sequence breakers (see breakers.h). */
#include "breakers.h"

#include "error.h"

#include <stdlib.h>
#include <string.h>

typedef struct vec {
    lp_dry_breaker_t *v;
    size_t n, cap;
} vec_t;

static int push(vec_t *x, const lp_dry_breaker_t *b)
{
    /* no duplicate of the same (head, tail) */
    for (size_t i = x->n; i-- > 0 && x->v[i].head == b->head;)
        if (x->v[i].tail_len == b->tail_len &&
            !memcmp(x->v[i].tail, b->tail, (size_t)b->tail_len * sizeof(int32_t)))
            return 0;
    if (x->n == x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 64;
        lp_dry_breaker_t *nv = realloc(x->v, cap * sizeof(*nv));
        if (!nv) return lp_error_set(LP_ERR(ENOMEM), "dry breakers: out of memory");
        x->v = nv;
        x->cap = cap;
    }
    x->v[x->n++] = *b;
    return 0;
}

static int cmp_head(const void *a, const void *b)
{
    int32_t x = ((const lp_dry_breaker_t *)a)->head, y = ((const lp_dry_breaker_t *)b)->head;
    return (x > y) - (x < y);
}

/* llama.cpp's get_overlapping_token_sequences for one breaker string: a
 * token whose text contains the breaker is a breaker on its own; a token
 * whose text ends with a prefix of the breaker is a head, and the rest of
 * the breaker, tokenized, is its tail. */
static int resolve_text(const lp_sampler_vocab_text_t *vt, const char *str, size_t str_len,
                        vec_t *out)
{
    for (int32_t id = 0; id < vt->n_tokens; id++) {
        const char *word;
        size_t word_len;
        if (vt->piece(vt->user, id, &word, &word_len) || word_len == 0) continue;
        lp_dry_breaker_t b = {.head = id, .tail_len = 0};
        if (word_len >= str_len && memmem(word, word_len, str, str_len)) {
            int rc = push(out, &b);
            if (rc) return rc;
            continue;
        }
        for (size_t pos = 0; pos < word_len; pos++) {
            if (word[pos] != str[0]) continue;
            size_t i = 1;
            bool match = true;
            for (; i < str_len && i + pos < word_len; i++)
                if (word[pos + i] != str[i]) {
                    match = false;
                    break;
                }
            if (!match) continue;
            size_t n_tail = 0;
            int32_t tail[256];
            int rc = vt->tokenize(vt->user, str + i, str_len - i, tail, 256, &n_tail);
            if (rc && rc != LP_ERR(ENOSPC)) return rc;
            if (n_tail > LP_DRY_MAX_TAIL) n_tail = LP_DRY_MAX_TAIL;
            b.tail_len = (int32_t)n_tail;
            memcpy(b.tail, tail, n_tail * sizeof(int32_t));
            if ((rc = push(out, &b))) return rc;
        }
    }
    return 0;
}

/* Add p's ID breakers to x and hand x over as a sorted table. */
static int finish(vec_t *x, int rc, const lp_sampler_params_t *p, lp_dry_breakers_t **out)
{
    for (int32_t i = 0; !rc && i < p->n_breakers; i++) {
        lp_dry_breaker_t b = {.head = p->breakers[i][0], .tail_len = p->breaker_len[i] - 1};
        memcpy(b.tail, &p->breakers[i][1], (size_t)b.tail_len * sizeof(int32_t));
        rc = push(x, &b);
    }
    lp_dry_breakers_t *t = rc ? NULL : malloc(sizeof(*t));
    if (!rc && !t) rc = lp_error_set(LP_ERR(ENOMEM), "dry breakers: out of memory");
    if (rc) {
        free(x->v);
        return rc;
    }
    if (x->n) qsort(x->v, x->n, sizeof(*x->v), cmp_head);
    t->n = x->n;
    t->v = x->v;
    *out = t;
    return 0;
}

int lp_dry_breakers_build(const lp_sampler_vocab_text_t *vt, const lp_sampler_params_t *p,
                          lp_dry_breakers_t **out)
{
    *out = NULL;
    vec_t x = {0};
    int rc = 0;
    for (int32_t i = 0; vt && !rc && i < p->n_text_breakers; i++)
        rc = resolve_text(vt, p->text_breakers[i], (size_t)p->text_breaker_len[i], &x);
    return finish(&x, rc, p, out);
}

int lp_dry_breakers_with_ids(const lp_dry_breakers_t *text, const lp_sampler_params_t *p,
                             lp_dry_breakers_t **out)
{
    *out = NULL;
    vec_t x = {0};
    size_t n = text ? text->n : 0;
    if (n) {
        if (!(x.v = malloc(n * sizeof(*x.v))))
            return lp_error_set(LP_ERR(ENOMEM), "dry breakers: out of memory");
        memcpy(x.v, text->v, n * sizeof(*x.v));
        x.n = x.cap = n;
    }
    return finish(&x, 0, p, out);
}

lp_dry_breakers_t *lp_dry_breakers_copy(const lp_dry_breakers_t *b)
{
    lp_dry_breakers_t *t = calloc(1, sizeof(*t));
    if (!t) return NULL;
    if (b && b->n) {
        t->v = malloc(b->n * sizeof(*t->v));
        if (!t->v) {
            free(t);
            return NULL;
        }
        memcpy(t->v, b->v, b->n * sizeof(*t->v));
        t->n = b->n;
    }
    return t;
}

void lp_dry_breakers_destroy(lp_dry_breakers_t **self_p)
{
    if (!self_p || !*self_p) return;
    free((*self_p)->v);
    free(*self_p);
    *self_p = NULL;
}

size_t lp_dry_breakers_find(const lp_dry_breakers_t *b, int32_t head)
{
    size_t lo = 0, hi = b->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (b->v[mid].head < head) lo = mid + 1;
        else hi = mid;
    }
    return lo < b->n && b->v[lo].head == head ? lo : b->n;
}
