/* bpe.c - byte-level BPE for one pre-tokenized word, as llama.cpp's
 * llm_tokenizer_bpe_session does it: start from one symbol per byte (its
 * GPT-2 character), repeatedly apply the lowest-ranked merge among adjacent
 * pairs (ties: leftmost), then emit each symbol's token.  Strings are
 * interned, so a merge is one lookup of (left sid, right sid) -> (rank,
 * merged sid).  A binary heap keeps one long word O(n log n). */
#include "tok-internal.h"
#include "unicode.h"

#include "error.h"

#include <stdlib.h>
#include <string.h>

typedef struct sym {
    int32_t prev, next;
    uint32_t sid;
    uint32_t n; /* bytes; 0 once merged away */
} sym_t;

typedef struct bigram {
    int32_t rank;
    int32_t left, right;
    uint32_t size;
    uint32_t sid;
} bigram_t;

typedef struct heap {
    bigram_t *v;
    size_t n, cap;
} heap_t;

static inline bool before(const bigram_t *a, const bigram_t *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static int heap_push(heap_t *h, bigram_t x)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        bigram_t *v = realloc(h->v, cap * sizeof(*v));
        if (!v) return lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(&x, &h->v[p])) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = x;
    return 0;
}

static bigram_t heap_pop(heap_t *h)
{
    bigram_t top = h->v[0], x = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && before(&h->v[c + 1], &h->v[c])) c++;
        if (!before(&h->v[c], &x)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = x;
    return top;
}

static int add_bigram(const lp_tokenizer_t *t, sym_t *s, heap_t *h, int32_t l, int32_t r)
{
    if (l < 0 || r < 0) return 0;
    int32_t rank;
    uint32_t sid;
    if (!lp__pairmap_get(&t->merges, (uint64_t)s[l].sid << 32 | s[r].sid, &rank, &sid)) return 0;
    return heap_push(h, (bigram_t){rank, l, r, s[l].n + s[r].n, sid});
}

static int emit(const lp_tokenizer_t *t, uint32_t sid, lp__ivec_t *out)
{
    if (t->strs.tok[sid] >= 0) return lp__ivec_push(out, t->strs.tok[sid]);
    /* not a token: llama.cpp looks up each byte of the text on its own */
    size_t n;
    const char *s = lp__strtab_str(&t->strs, sid, &n);
    for (size_t j = 0; j < n; j++) {
        int64_t b = lp__strtab_find(&t->strs, s + j, 1);
        if (b >= 0 && t->strs.tok[b] >= 0) {
            int rc = lp__ivec_push(out, t->strs.tok[b]);
            if (rc) return rc;
        }
    }
    return 0;
}

int lp__bpe_word(const lp_tokenizer_t *t, const char *w, size_t n, lp__ivec_t *out)
{
    if (n == 0) return 0;
    if (n == 1) return emit(t, t->byte_sid[(uint8_t)w[0]], out);
    if (t->ignore_merges) {
        /* a word that is itself a token is taken whole */
        char small[256];
        char *enc = n * 2 <= sizeof(small) ? small : malloc(n * 2);
        if (!enc) return lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
        size_t k = 0;
        for (size_t i = 0; i < n; i++) k += lp__utf8_encode(lp__byte_to_cp((uint8_t)w[i]), enc + k);
        int64_t sid = lp__strtab_find(&t->strs, enc, k);
        if (enc != small) free(enc);
        if (sid >= 0 && t->strs.tok[sid] >= 0) return lp__ivec_push(out, t->strs.tok[sid]);
    }
    sym_t small_sym[64];
    sym_t *s = n <= 64 ? small_sym : malloc(n * sizeof(*s));
    if (!s) return lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
    for (size_t i = 0; i < n; i++)
        s[i] = (sym_t){(int32_t)i - 1, i + 1 == n ? -1 : (int32_t)i + 1, t->byte_sid[(uint8_t)w[i]], 1};
    bigram_t small_heap[128];
    heap_t h = {small_heap, 0, 128};
    bool heap_owned = false;
    int rc = 0;
    for (size_t i = 1; i < n && !rc; i++) {
        if (!heap_owned && h.n == h.cap) {
            bigram_t *v = malloc(h.cap * 2 * sizeof(*v));
            if (!v) {
                rc = lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
                break;
            }
            memcpy(v, h.v, h.n * sizeof(*v));
            h.v = v;
            h.cap *= 2;
            heap_owned = true;
        }
        rc = add_bigram(t, s, &h, (int32_t)i - 1, (int32_t)i);
    }
    while (h.n && !rc) {
        bigram_t bg = heap_pop(&h);
        sym_t *l = &s[bg.left], *r = &s[bg.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != bg.size) continue;
        l->n += r->n;
        l->sid = bg.sid;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s[r->next].prev = bg.left;
        if (!heap_owned && h.n + 2 > h.cap) {
            bigram_t *v = malloc(h.cap * 2 * sizeof(*v));
            if (!v) {
                rc = lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
                break;
            }
            memcpy(v, h.v, h.n * sizeof(*v));
            h.v = v;
            h.cap *= 2;
            heap_owned = true;
        }
        rc = add_bigram(t, s, &h, l->prev, bg.left);
        if (!rc) rc = add_bigram(t, s, &h, bg.left, l->next);
    }
    for (int32_t i = 0; i != -1 && !rc; i = s[i].next) rc = emit(t, s[i].sid, out);
    if (heap_owned) free(h.v);
    if (s != small_sym) free(s);
    return rc;
}
