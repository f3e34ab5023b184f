/* heap.h - the merge queue of spm.c and bpe.c: a 4-ary min-heap of u64 keys
 * (priority << 32 | left symbol index), so ties go to the leftmost pair as in
 * llama.cpp.  Keys are 8 bytes and a node's children share a cache line,
 * which matters for one long word (millions of pending pairs). */
#ifndef LP_TOK_HEAP_H
#define LP_TOK_HEAP_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

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

#endif
