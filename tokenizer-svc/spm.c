/* spm.c - SentencePiece BPE as llama.cpp's llm_tokenizer_spm_session does
 * it: start from UTF-8 characters, repeatedly merge the adjacent pair whose
 * concatenation is the highest-scoring token (ties: leftmost), then emit each
 * symbol's token, or its bytes as <0xXX> tokens when it is not one.
 *
 * A binary heap and a linked list of symbols make it O(n log n) in the
 * length, even for one long word.  When no token has "▁" after another
 * character, text is cut before each such "▁" and the chunks (words) are
 * encoded independently, with a per-call cache: merges never cross those
 * cuts, so the result is the same. */
#include "tok-internal.h"
#include "unicode.h"

#include "error.h"

#include <stdlib.h>
#include <string.h>

typedef struct sym {
    int32_t prev, next;
    uint32_t start, n; /* bytes of the chunk; n = 0 once merged away */
} sym_t;

typedef struct bigram {
    float score;
    int32_t left, right;
    uint32_t size;
} bigram_t;

typedef struct heap {
    bigram_t *v;
    size_t n, cap;
} heap_t;

/* a before b: higher score, then smaller left */
static inline bool before(const bigram_t *a, const bigram_t *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
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

typedef struct spm_ctx {
    const lp_tokenizer_t *t;
    const char *text;
    sym_t *sym;
    size_t cap;
    heap_t heap;
} spm_ctx_t;

static int try_bigram(spm_ctx_t *c, int32_t left, int32_t right)
{
    if (left < 0 || right < 0) return 0;
    uint32_t size = c->sym[left].n + c->sym[right].n;
    if (size > c->t->max_token_len) return 0;
    int64_t sid = lp__strtab_find(&c->t->strs, c->text + c->sym[left].start, size);
    if (sid < 0) return 0;
    int32_t tok = c->t->strs.tok[sid];
    if (tok < 0) return 0;
    return heap_push(&c->heap, (bigram_t){c->t->scores[tok], left, right, size});
}

static int emit_symbol(const lp_tokenizer_t *t, const char *s, size_t n, lp__ivec_t *out)
{
    int64_t sid = lp__strtab_find(&t->strs, s, n);
    if (sid >= 0 && t->strs.tok[sid] >= 0) return lp__ivec_push(out, t->strs.tok[sid]);
    for (size_t j = 0; j < n; j++) {
        int32_t id = t->byte_tok[(uint8_t)s[j]];
        if (id < 0) id = t->unk;
        if (id < 0)
            return lp_error_set(LP_ERR(EINVAL), "tokenizer: byte 0x%02x has no token and there is no <unk>",
                                (uint8_t)s[j]);
        int rc = lp__ivec_push(out, id);
        if (rc) return rc;
    }
    return 0;
}

static int encode_chunk(spm_ctx_t *c, const char *text, size_t len, lp__ivec_t *out)
{
    c->text = text;
    c->heap.n = 0;
    if (len > c->cap) {
        sym_t *s = realloc(c->sym, len * sizeof(*s));
        if (!s) return lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
        c->sym = s;
        c->cap = len;
    }
    int32_t n = 0;
    for (size_t off = 0; off < len; n++) {
        size_t l = lp__utf8_len((uint8_t)text[off]);
        if (l > len - off) l = len - off;
        c->sym[n] = (sym_t){n - 1, off + l == len ? -1 : n + 1, (uint32_t)off, (uint32_t)l};
        off += l;
    }
    int rc = 0;
    for (int32_t i = 1; i < n && !rc; i++) rc = try_bigram(c, i - 1, i);
    while (c->heap.n && !rc) {
        bigram_t bg = heap_pop(&c->heap);
        sym_t *l = &c->sym[bg.left], *r = &c->sym[bg.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != bg.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) c->sym[r->next].prev = bg.left;
        rc = try_bigram(c, l->prev, bg.left);
        if (!rc) rc = try_bigram(c, bg.left, l->next);
    }
    for (int32_t i = 0; i != -1 && n > 0 && !rc; i = c->sym[i].next)
        rc = emit_symbol(c->t, text + c->sym[i].start, c->sym[i].n, out);
    return rc;
}

int lp__spm_encode(const lp_tokenizer_t *t, const char *text, size_t len, lp__ivec_t *out,
                   lp__wcache_t *cache)
{
    spm_ctx_t c = {.t = t};
    int rc = 0;
    if (!t->spm_split_ok) {
        rc = encode_chunk(&c, text, len, out);
    } else {
        size_t i = 0;
        while (i < len && !rc) {
            /* a chunk: any run of "▁", then up to the next "▁" */
            size_t j = i;
            while (j + 3 <= len && !memcmp(text + j, "\xe2\x96\x81", 3)) j += 3;
            while (j < len && !(j + 3 <= len && !memcmp(text + j, "\xe2\x96\x81", 3))) j++;
            if (!lp__wcache_get(cache, text + i, j - i, out)) {
                size_t before = out->n;
                rc = encode_chunk(&c, text + i, j - i, out);
                if (!rc) lp__wcache_put(cache, text + i, j - i, out->v + before, out->n - before);
            }
            i = j;
        }
    }
    free(c.sym);
    free(c.heap.v);
    return rc;
}
