/* spm.c - SentencePiece BPE as llama.cpp's llm_tokenizer_spm_session does
 * it: start from UTF-8 characters, repeatedly merge the adjacent pair whose
 * concatenation is the highest-scoring token (ties: leftmost), then emit each
 * symbol's token, or its bytes as <0xXX> tokens when it is not one.
 *
 * A 4-ary heap of packed keys (heap.h) and a linked list of symbols make it
 * O(n log n) in the length, even for one long word.  A queued pair is stale
 * when its left symbol's latest queued pair differs in priority or length.  When no token has "▁" after another
 * character, text is cut before each such "▁" and the chunks (words) are
 * encoded independently, with a per-call cache: merges never cross those
 * cuts, so the result is the same. */
#include "tok-internal.h"
#include "heap.h"
#include "unicode.h"

#include "error.h"

#include <stdlib.h>
#include <string.h>

typedef struct sym {
    int32_t prev, next;
    uint32_t start, n;     /* bytes of the chunk; n = 0 once merged away */
    uint32_t bprio, bsize; /* the latest pair queued with this symbol on the left */
} sym_t;

typedef struct spm_ctx {
    const lp_tokenizer_t *t;
    const char *text;
    sym_t *sym;
    size_t cap;
    lp__heap_t heap;
    lp__mq_t *bq; /* set while encoding a long chunk */
} spm_ctx_t;

/* Queue the pair (left, right) when its text is a token; the priority is
 * the token's score rank (0 = highest score). */
static int try_bigram(spm_ctx_t *c, int32_t left, int32_t right, bool append)
{
    if (left < 0 || right < 0) return 0;
    uint32_t size = c->sym[left].n + c->sym[right].n;
    if (size > c->t->max_token_len) return 0;
    int64_t sid = lp__strtab_find(&c->t->strs, c->text + c->sym[left].start, size);
    if (sid < 0) return 0;
    int32_t tok = c->t->strs.tok[sid];
    if (tok < 0) return 0;
    uint32_t prio = c->t->score_rank[tok];
    c->sym[left].bprio = prio;
    c->sym[left].bsize = size;
    uint64_t key = (uint64_t)prio << 32 | (uint32_t)left;
    if (c->bq)
        return lp__mq_push(c->bq, key) ? lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory") : 0;
    if (append && c->heap.n < c->heap.cap) {
        c->heap.v[c->heap.n++] = key;
        return 0;
    }
    return lp__heap_push(&c->heap, key) ? lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory") : 0;
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
    if (len > c->cap) {
        sym_t *s = realloc(c->sym, len * sizeof(*s));
        uint64_t *h = c->heap.own ? realloc(c->heap.own, len * sizeof(*h)) : malloc(len * sizeof(*h));
        if (s) c->sym = s;
        if (h) c->heap.v = c->heap.own = h;
        if (!s || !h) return lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
        c->cap = len;
        c->heap.cap = len;
    }
    c->heap.n = 0;
    int32_t n = 0;
    for (size_t off = 0; off < len; n++) {
        size_t l = lp__utf8_len((uint8_t)text[off]);
        if (l > len - off) l = len - off;
        c->sym[n] = (sym_t){n - 1, off + l == len ? -1 : n + 1, (uint32_t)off, (uint32_t)l, 0, 0};
        off += l;
    }
    int rc = 0;
    lp__mq_t q = {0}; /* used for long chunks only; short ones use c->heap */
    if (n >= LP__BQ_MIN_SYMBOLS) {
        q.big = true;
        if (lp__bq_init(&q.b, c->t->n_score_ranks, 2 * (size_t)n))
            rc = lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
        c->bq = &q;
    }
    for (int32_t i = 1; i < n && !rc; i++) rc = try_bigram(c, i - 1, i, true);
    if (!q.big) lp__heap_build(&c->heap);
    uint64_t key;
    for (;;) {
        if (rc) break;
        if (!q.big) {
            if (!c->heap.n) break;
            key = lp__heap_pop(&c->heap);
        } else if (!lp__mq_pop(&q, &key)) {
            if (q.oom) rc = lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
            break;
        }
        int32_t li = (int32_t)(uint32_t)key;
        sym_t *l = &c->sym[li];
        if (l->n == 0 || l->next < 0 || l->bprio != (uint32_t)(key >> 32)) continue;
        sym_t *r = &c->sym[l->next];
        if (r->n == 0 || l->n + r->n != l->bsize) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) c->sym[r->next].prev = li;
        rc = try_bigram(c, l->prev, li, false);
        if (!rc) rc = try_bigram(c, li, l->next, false);
    }
    if (q.big) {
        lp__bq_free(&q.b);
        c->bq = NULL;
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
    lp__heap_free(&c.heap);
    return rc;
}
