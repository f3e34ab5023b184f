/* heap.h - the merge queue of spm.c and bpe.c: a 4-ary min-heap of u64 keys
 * (priority << 32 | left symbol index), so ties go to the leftmost pair as in
 * llama.cpp.  Keys are 8 bytes and a node's children share a cache line,
 * which matters for one long word (millions of pending pairs). */
#ifndef LP_TOK_HEAP_H
#define LP_TOK_HEAP_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct lp__heap {
    uint64_t *v;
    size_t n, cap;
    uint64_t *own; /* v when heap-allocated */
} lp__heap_t;

static inline void lp__heap_init(lp__heap_t *h, uint64_t *stack, size_t cap)
{
    h->v = stack;
    h->n = 0;
    h->cap = cap;
    h->own = NULL;
}

static inline void lp__heap_free(lp__heap_t *h)
{
    free(h->own);
    h->own = NULL;
}

/* 0, or -1 when out of memory */
static inline int lp__heap_push(lp__heap_t *h, uint64_t x)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        uint64_t *v = h->own ? realloc(h->own, cap * sizeof(*v)) : malloc(cap * sizeof(*v));
        if (!v) return -1;
        if (!h->own)
            for (size_t i = 0; i < h->n; i++) v[i] = h->v[i];
        h->v = h->own = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 4;
        if (h->v[p] <= x) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = x;
    return 0;
}

static inline void lp__heap_sift_down(uint64_t *v, size_t n, size_t i, uint64_t x)
{
    for (;;) {
        size_t c = 4 * i + 1;
        if (c >= n) break;
        size_t best = c;
        size_t end = c + 4 < n ? c + 4 : n;
        for (size_t k = c + 1; k < end; k++)
            if (v[k] < v[best]) best = k;
        if (v[best] >= x) break;
        v[i] = v[best];
        i = best;
    }
    v[i] = x;
}

static inline uint64_t lp__heap_pop(lp__heap_t *h)
{
    uint64_t top = h->v[0], x = h->v[--h->n];
    if (h->n) lp__heap_sift_down(h->v, h->n, 0, x);
    return top;
}

/* Turn v[0..n) into a heap in O(n). */
static inline void lp__heap_build(lp__heap_t *h)
{
    if (h->n < 2) return;
    for (size_t i = (h->n - 2) / 4 + 1; i-- > 0;) lp__heap_sift_down(h->v, h->n, i, h->v[i]);
}

/* ---- bucket queue for long words ----
 * The same order (priority, then left), for words of thousands of symbols,
 * where a heap of a million keys spends its time in cache misses.  The
 * initial pairs (pushed in left order before lp__bq_start) are counting-
 * sorted into one array, already in left order within each priority; later
 * pairs go to one list per priority, sorted in when that priority is
 * reached.  Keys at or below the current priority (merges are not monotone in
 * general) go to a small heap that is merged in. */
typedef struct lp__bq {
    uint32_t n_prio;
    bool started;
    uint64_t *pend;    /* initial keys, before lp__bq_start */
    size_t pn, pcap;
    uint32_t *istart;  /* (n_prio + 1) initial lefts of priority p: ileft[istart[p]..istart[p+1]) */
    uint32_t *ileft;
    int32_t *head;     /* (n_prio) later pairs: first node of each priority's list, -1 */
    uint32_t *nleft;   /* node: left symbol */
    int32_t *nnext;    /* node: next in list, -1 */
    size_t nn, ncap;
    const uint32_t *bptr; /* lefts of the current priority, sorted */
    uint32_t *batch;      /* storage for bptr when later pairs join in */
    size_t bn, bi, bcap;
    int64_t cur;       /* current priority, -1 before the first */
    lp__heap_t aux;    /* keys with priority <= cur */
} lp__bq_t;

static inline int lp__bq_init(lp__bq_t *q, uint32_t n_prio, size_t expect)
{
    memset(q, 0, sizeof(*q));
    q->n_prio = n_prio;
    q->cur = -1;
    q->pcap = expect ? expect : 64;
    q->pend = malloc(q->pcap * sizeof(*q->pend));
    lp__heap_init(&q->aux, NULL, 0);
    return q->pend ? 0 : -1;
}

static inline void lp__bq_free(lp__bq_t *q)
{
    free(q->pend);
    free(q->istart);
    free(q->ileft);
    free(q->head);
    free(q->nleft);
    free(q->nnext);
    free(q->batch);
    lp__heap_free(&q->aux);
    memset(q, 0, sizeof(*q));
}

static inline int lp__bq_push(lp__bq_t *q, uint64_t key)
{
    uint32_t prio = (uint32_t)(key >> 32);
    if (!q->started) {
        if (q->pn == q->pcap) {
            size_t cap = q->pcap * 2;
            uint64_t *p = realloc(q->pend, cap * sizeof(*p));
            if (!p) return -1;
            q->pend = p;
            q->pcap = cap;
        }
        q->pend[q->pn++] = key;
        return 0;
    }
    if ((int64_t)prio <= q->cur || prio >= q->n_prio) return lp__heap_push(&q->aux, key);
    if (q->nn == q->ncap) {
        size_t cap = q->ncap ? q->ncap * 2 : 1024;
        uint32_t *l = realloc(q->nleft, cap * sizeof(*l));
        if (l) q->nleft = l;
        int32_t *x = realloc(q->nnext, cap * sizeof(*x));
        if (x) q->nnext = x;
        if (!l || !x) return -1;
        q->ncap = cap;
    }
    q->nleft[q->nn] = (uint32_t)key;
    q->nnext[q->nn] = q->head[prio];
    q->head[prio] = (int32_t)q->nn++;
    return 0;
}

/* Counting-sort the initial keys; pushes after this are the later pairs. */
static inline int lp__bq_start(lp__bq_t *q)
{
    q->started = true;
    q->istart = calloc((size_t)q->n_prio + 1, sizeof(*q->istart));
    q->ileft = malloc((q->pn ? q->pn : 1) * sizeof(*q->ileft));
    q->head = malloc((size_t)q->n_prio * sizeof(*q->head));
    if (!q->istart || !q->ileft || !q->head) return -1;
    memset(q->head, 0xff, (size_t)q->n_prio * sizeof(*q->head));
    size_t kept = 0;
    for (size_t i = 0; i < q->pn; i++) {
        uint32_t prio = (uint32_t)(q->pend[i] >> 32);
        if (prio >= q->n_prio) {
            if (lp__heap_push(&q->aux, q->pend[i])) return -1;
            continue;
        }
        q->istart[prio + 1]++;
        q->pend[kept++] = q->pend[i];
    }
    for (uint32_t p = 0; p < q->n_prio; p++) q->istart[p + 1] += q->istart[p];
    /* place in input (left) order: istart[p] runs as a cursor, then is restored */
    for (size_t i = 0; i < kept; i++) q->ileft[q->istart[q->pend[i] >> 32]++] = (uint32_t)q->pend[i];
    for (uint32_t p = q->n_prio; p > 0; p--) q->istart[p] = q->istart[p - 1];
    q->istart[0] = 0;
    free(q->pend);
    q->pend = NULL;
    return 0;
}

static inline int lp__bq_cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Next key in order; false when empty (or out of memory, see *oom). */
static inline bool lp__bq_pop(lp__bq_t *q, uint64_t *key, bool *oom)
{
    for (;;) {
        bool have_b = q->bi < q->bn;
        uint64_t kb = have_b ? ((uint64_t)q->cur << 32 | q->bptr[q->bi]) : UINT64_MAX;
        if (q->aux.n && (!have_b || q->aux.v[0] < kb)) {
            *key = lp__heap_pop(&q->aux);
            return true;
        }
        if (have_b) {
            q->bi++;
            *key = kb;
            return true;
        }
        /* load the next non-empty priority */
        int64_t p = q->cur + 1;
        while (p < q->n_prio && q->head[p] < 0 && q->istart[p] == q->istart[p + 1]) p++;
        if (p >= q->n_prio) return false;
        q->cur = p;
        q->bi = 0;
        const uint32_t *init = q->ileft + q->istart[p];
        size_t n_init = q->istart[p + 1] - q->istart[p];
        if (q->head[p] < 0) {
            q->bptr = init;
            q->bn = n_init;
            continue;
        }
        size_t n_later = 0;
        for (int32_t i = q->head[p]; i >= 0; i = q->nnext[i]) n_later++;
        if (n_init + n_later > q->bcap) {
            size_t cap = (n_init + n_later) * 2;
            uint32_t *b = realloc(q->batch, cap * sizeof(*b));
            if (!b) {
                *oom = true;
                return false;
            }
            q->batch = b;
            q->bcap = cap;
        }
        memcpy(q->batch, init, n_init * sizeof(*init));
        size_t k = n_init;
        for (int32_t i = q->head[p]; i >= 0; i = q->nnext[i]) q->batch[k++] = q->nleft[i];
        q->head[p] = -1;
        qsort(q->batch, k, sizeof(*q->batch), lp__bq_cmp_u32);
        q->bptr = q->batch;
        q->bn = k;
    }
}

/* ---- the merge queue: a heap for ordinary words, buckets for long ones ---- */
#define LP__BQ_MIN_SYMBOLS 1024

typedef struct lp__mq {
    bool big;
    bool oom;
    lp__heap_t h;
    lp__bq_t b;
} lp__mq_t;

static inline int lp__mq_push(lp__mq_t *q, uint64_t key)
{
    return q->big ? lp__bq_push(&q->b, key) : lp__heap_push(&q->h, key);
}

static inline bool lp__mq_pop(lp__mq_t *q, uint64_t *key)
{
    if (q->big) {
        if (!q->b.started && lp__bq_start(&q->b)) {
            q->oom = true;
            return false;
        }
        return lp__bq_pop(&q->b, key, &q->oom);
    }
    if (!q->h.n) return false;
    *key = lp__heap_pop(&q->h);
    return true;
}

#endif
