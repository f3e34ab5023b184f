/* bpe.c - byte-level BPE for one pre-tokenized word, as llama.cpp's
 * llm_tokenizer_bpe_session does it: start from one symbol per byte (its
 * GPT-2 character), repeatedly apply the lowest-ranked merge among adjacent
 * pairs (ties: leftmost), then emit each symbol's token.  Strings are
 * interned, so a merge is one lookup of (left sid, right sid) -> (rank,
 * merged sid).  The 4-ary heap of heap.h keeps one long word O(n log n); a
 * queued pair is stale when its left symbol's latest queued pair differs. */
#include "tok-internal.h"
#include "heap.h"
#include "unicode.h"

#include "error.h"

#include <stdlib.h>
#include <string.h>

/* A raw-BPE symbol whose character is no string of the vocabulary: no
 * merge names it. */
#define NO_SID UINT32_MAX

typedef struct sym {
    int32_t prev, next;
    uint32_t sid;          /* NO_SID: a character the vocabulary lacks */
    uint32_t off;          /* byte offset in the word */
    uint32_t n;            /* bytes; 0 once merged away */
    uint32_t bprio, bsize; /* the latest pair queued with this symbol on the left */
    uint32_t bsid;         /* ... and the sid it merges into */
} sym_t;

static int add_bigram(const lp_tokenizer_t *t, sym_t *s, lp__mq_t *q, int32_t l, int32_t r)
{
    if (l < 0 || r < 0 || s[l].sid == NO_SID || s[r].sid == NO_SID) return 0;
    int32_t rank;
    uint32_t sid;
    if (!lp__pairmap_get(&t->merges, (uint64_t)s[l].sid << 32 | s[r].sid, &rank, &sid)) return 0;
    s[l].bprio = (uint32_t)rank;
    s[l].bsize = s[l].n + s[r].n;
    s[l].bsid = sid;
    if (lp__mq_push(q, (uint64_t)(uint32_t)rank << 32 | (uint32_t)l))
        return lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
    return 0;
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

/* Raw BPE (gemma4): a symbol that is no token is spelled in <0xXX> byte
 * tokens, as SentencePiece's byte fallback. */
static int emit_raw(const lp_tokenizer_t *t, uint32_t sid, const char *s, size_t n, lp__ivec_t *out)
{
    if (sid != NO_SID && t->strs.tok[sid] >= 0) return lp__ivec_push(out, t->strs.tok[sid]);
    for (size_t j = 0; j < n; j++) {
        const int32_t b = t->byte_tok[(uint8_t)s[j]];
        int rc = b >= 0 ? lp__ivec_push(out, b) : 0;
        if (rc) return rc;
    }
    return 0;
}

static bool all_newlines(const char *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (w[i] != '\n') return false;
    return true;
}

int lp__bpe_word(const lp_tokenizer_t *t, const char *w, size_t n, lp__ivec_t *out)
{
    if (n == 0) return 0;
    if (n == 1 && !t->raw_bpe) return emit(t, t->byte_sid[(uint8_t)w[0]], out);
    if (t->raw_bpe && all_newlines(w, n)) {
        /* a run of newlines that is a token is taken whole */
        int64_t sid = lp__strtab_find(&t->strs, w, n);
        if (sid >= 0 && t->strs.tok[sid] >= 0) return lp__ivec_push(out, t->strs.tok[sid]);
    }
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
    if (t->raw_bpe) {
        /* one symbol per UTF-8 character (the pre-tokenizer made it valid) */
        size_t k = 0;
        for (size_t at = 0; at < n; k++) {
            size_t len = lp__utf8_len((uint8_t)w[at]);
            if (len == 0 || at + len > n) len = 1;
            int64_t sid = lp__strtab_find(&t->strs, w + at, len);
            s[k] = (sym_t){(int32_t)k - 1, -1, sid >= 0 ? (uint32_t)sid : NO_SID, (uint32_t)at,
                           (uint32_t)len, 0, 0, 0};
            if (k) s[k - 1].next = (int32_t)k;
            at += len;
        }
        n = k;
    } else {
        for (size_t i = 0; i < n; i++)
            s[i] = (sym_t){(int32_t)i - 1, i + 1 == n ? -1 : (int32_t)i + 1,
                           t->byte_sid[(uint8_t)w[i]], (uint32_t)i, 1, 0, 0, 0};
    }
    uint64_t small_heap[128];
    lp__mq_t q = {0};
    lp__heap_init(&q.h, small_heap, 128);
    int rc = 0;
    if (n >= LP__BQ_MIN_SYMBOLS) {
        q.big = true;
        if (lp__bq_init(&q.b, t->n_merge_ranks, 2 * n)) rc = lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
    }
    for (size_t i = 1; i < n && !rc; i++) rc = add_bigram(t, s, &q, (int32_t)i - 1, (int32_t)i);
    uint64_t key;
    while (!rc && lp__mq_pop(&q, &key)) {
        int32_t li = (int32_t)(uint32_t)key;
        sym_t *l = &s[li];
        if (l->n == 0 || l->next < 0 || l->bprio != (uint32_t)(key >> 32)) continue;
        sym_t *r = &s[l->next];
        if (r->n == 0 || l->n + r->n != l->bsize) continue;
        l->n += r->n;
        l->sid = l->bsid;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s[r->next].prev = li;
        rc = add_bigram(t, s, &q, l->prev, li);
        if (!rc) rc = add_bigram(t, s, &q, li, l->next);
    }
    if (!rc && q.oom) rc = lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
    for (int32_t i = 0; i != -1 && !rc; i = s[i].next)
        rc = t->raw_bpe ? emit_raw(t, s[i].sid, w + s[i].off, s[i].n, out) : emit(t, s[i].sid, out);
    lp__heap_free(&q.h);
    if (q.big) lp__bq_free(&q.b);
    if (s != small_sym) free(s);
    return rc;
}
