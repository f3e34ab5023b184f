/* detok.c - token IDs back to text: per-token pieces and the incremental
 * decoder that holds back partial UTF-8 (see tokenizer.h). */
#include "tok-internal.h"
#include "unicode.h"

#include "error.h"

#include <stdlib.h>
#include <string.h>

/* ---- pieces ----
 * token_to_piece(special = true) of every token, built on the first call:
 * tokenizing never needs them, and for a 150k-token vocabulary they are a
 * pass over every token and a megabyte of tables. */
static int build_pieces(lp_tokenizer_t *t)
{
    lp__buf_t arena = {0};
    uint32_t *off = malloc((size_t)t->n_tokens * sizeof(uint32_t));
    uint32_t *plen = malloc((size_t)t->n_tokens * sizeof(uint32_t));
    int rc = off && plen ? 0 : lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
    for (int32_t id = 0; id < t->n_tokens && !rc; id++) {
        size_t n;
        const char *s = lp__strtab_str(&t->strs, t->tok_sid[id], &n);
        uint16_t a = t->attr[id];
        size_t start = arena.n;
        if (a & (LP__ATTR_UNKNOWN | LP__ATTR_CONTROL | LP__ATTR_USER_DEFINED)) {
            rc = lp__buf_put(&arena, s, n);
        } else if ((t->kind == LP_VOCAB_SPM || t->raw_bpe) && (a & LP__ATTR_NORMAL)) {
            for (size_t i = 0; i < n && !rc; i++) {
                if (i + 3 <= n && !memcmp(s + i, "\xe2\x96\x81", 3)) {
                    rc = lp__buf_put(&arena, " ", 1);
                    i += 2;
                } else {
                    rc = lp__buf_put(&arena, s + i, 1);
                }
            }
        } else if ((t->kind == LP_VOCAB_SPM || t->raw_bpe) && (a & LP__ATTR_BYTE)) {
            unsigned v;
            char hex[3] = {0};
            if (n == 6 && !memcmp(s, "<0x", 3) && s[5] == '>') {
                memcpy(hex, s + 3, 2);
                v = (unsigned)strtoul(hex, NULL, 16);
                char c = (char)v;
                rc = lp__buf_put(&arena, &c, 1);
            }
        } else if (t->kind == LP_VOCAB_BPE && (a & LP__ATTR_NORMAL)) {
            /* decoding never lengthens the text: reserve n bytes, then write */
            rc = lp__buf_put(&arena, s, n);
            if (!rc) {
                char *dst = arena.v + start;
                size_t at = 0, w = 0;
                while (at < n) {
                    size_t from = at;
                    int32_t cp = lp__utf8_decode((const uint8_t *)s, n, &at);
                    int b = cp < 0 ? -1 : lp__cp_to_byte((uint32_t)cp);
                    if (b >= 0) {
                        dst[w++] = (char)b;
                    } else {
                        memmove(dst + w, s + from, at - from);
                        w += at - from;
                    }
                }
                arena.n = start + w;
            }
        }
        if (!rc) {
            off[id] = (uint32_t)start;
            plen[id] = (uint32_t)(arena.n - start);
        }
    }
    if (!rc && !arena.v) rc = lp__buf_put(&arena, "", 0);
    if (rc) {
        free(off);
        free(plen);
        free(arena.v);
        return rc;
    }
    t->piece_off = off;
    t->piece_len = plen;
    t->piece_arena = arena.v;
    return 0;
}

/* The tables are built once, under a lock; readers that find them ready
 * take no lock. */
static int pieces_ready(const lp_tokenizer_t *tok)
{
    if (atomic_load_explicit(&tok->pieces_ready, memory_order_acquire)) return 0;
    lp_tokenizer_t *t = (lp_tokenizer_t *)tok; /* only the lazily built tables change */
    pthread_mutex_lock(&t->pieces_lock);
    int rc = 0;
    if (!atomic_load_explicit(&t->pieces_ready, memory_order_relaxed)) {
        rc = build_pieces(t);
        if (!rc) atomic_store_explicit(&t->pieces_ready, true, memory_order_release);
    }
    pthread_mutex_unlock(&t->pieces_lock);
    return rc;
}

int lp_token_piece(const lp_tokenizer_t *tok, int32_t id, bool special, const char **piece,
                   size_t *len)
{
    if (id < 0 || id >= tok->n_tokens)
        return lp_error_set(LP_ERR(EINVAL), "token id %d out of range (%d tokens)", id, tok->n_tokens);
    if (!special && (tok->attr[id] & (LP__ATTR_UNKNOWN | LP__ATTR_CONTROL))) {
        *piece = "";
        *len = 0;
        return 0;
    }
    int rc = pieces_ready(tok);
    if (rc) return rc;
    *piece = tok->piece_arena + tok->piece_off[id];
    *len = tok->piece_len[id];
    return 0;
}

struct lp_detok {
    const lp_tokenizer_t *tok;
    bool special;
    bool at_start;     /* no text emitted yet: drop SPM's prefix space */
    uint8_t hold[4];   /* an incomplete UTF-8 sequence */
    size_t n_hold;
    lp__buf_t out;
};

int lp_detok_new(const lp_tokenizer_t *tok, bool special, lp_detok_t **out)
{
    lp_detok_t *d = calloc(1, sizeof(*d));
    if (!d) return lp_error_set(LP_ERR(ENOMEM), "detokenize: out of memory");
    d->tok = tok;
    d->special = special;
    lp_detok_reset(d);
    *out = d;
    return 0;
}

void lp_detok_destroy(lp_detok_t **self_p)
{
    if (!self_p || !*self_p) return;
    free((*self_p)->out.v);
    free(*self_p);
    *self_p = NULL;
}

void lp_detok_reset(lp_detok_t *d)
{
    d->at_start = d->tok->kind == LP_VOCAB_SPM && d->tok->add_space_prefix;
    d->n_hold = 0;
    d->out.n = 0;
}

void lp_detok_continue(lp_detok_t *d)
{
    d->at_start = false;
}

/* Bytes needed by a lead byte, and the valid range of the second byte
 * (Unicode Table 3-7); 0 when b cannot start a sequence. */
static size_t lead_info(uint8_t b, uint8_t *lo, uint8_t *hi)
{
    *lo = 0x80;
    *hi = 0xbf;
    if (b < 0x80) return 1;
    if (b >= 0xc2 && b <= 0xdf) return 2;
    if (b >= 0xe0 && b <= 0xef) {
        if (b == 0xe0) *lo = 0xa0;
        if (b == 0xed) *hi = 0x9f;
        return 3;
    }
    if (b >= 0xf0 && b <= 0xf4) {
        if (b == 0xf0) *lo = 0x90;
        if (b == 0xf4) *hi = 0x8f;
        return 4;
    }
    return 0;
}

static const char replacement[3] = {(char)0xef, (char)0xbf, (char)0xbd};

/* Move the complete, valid prefix of hold+s to the output; keep an
 * incomplete tail in hold; replace invalid bytes by U+FFFD. */
static int push_bytes(lp_detok_t *d, const uint8_t *s, size_t n)
{
    int rc = 0;
    size_t i = 0;
    while (!rc && (i < n || d->n_hold)) {
        if (d->n_hold == 0) {
            /* fast path: ASCII run */
            size_t j = i;
            while (j < n && s[j] < 0x80) j++;
            if (j > i) {
                rc = lp__buf_put(&d->out, s + i, j - i);
                i = j;
                continue;
            }
            if (i >= n) break;
            d->hold[d->n_hold++] = s[i++];
        } else if (i < n) {
            d->hold[d->n_hold++] = s[i++];
        }
        uint8_t lo, hi;
        size_t need = lead_info(d->hold[0], &lo, &hi);
        if (need == 0) {
            rc = lp__buf_put(&d->out, replacement, 3);
            d->n_hold = 0;
            continue;
        }
        /* check the continuation bytes seen so far */
        size_t k;
        for (k = 1; k < d->n_hold; k++) {
            uint8_t c = d->hold[k];
            uint8_t l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xbf;
            if (c < l || c > h) break;
        }
        if (k < d->n_hold) {
            /* invalid: U+FFFD for the maximal subpart, then retry the rest */
            rc = lp__buf_put(&d->out, replacement, 3);
            uint8_t rest[4];
            size_t nr = d->n_hold - k;
            memcpy(rest, d->hold + k, nr);
            d->n_hold = 0;
            for (size_t r = 0; r < nr && !rc; r++) rc = push_bytes(d, rest + r, 1);
            continue;
        }
        if (d->n_hold == need) {
            rc = lp__buf_put(&d->out, d->hold, need);
            d->n_hold = 0;
            continue;
        }
        if (i >= n) break; /* incomplete: wait for more */
    }
    return rc;
}

int lp_detok_feed(lp_detok_t *d, int32_t id, const char **text, size_t *len)
{
    const char *p;
    size_t n;
    int rc = lp_token_piece(d->tok, id, d->special, &p, &n);
    if (rc) return rc;
    d->out.n = 0;
    if (n && d->at_start) {
        if (p[0] == ' ') {
            p++;
            n--;
        }
        d->at_start = false;
    }
    rc = push_bytes(d, (const uint8_t *)p, n);
    *text = d->out.v ? d->out.v : "";
    *len = d->out.n;
    return rc;
}

int lp_detok_flush(lp_detok_t *d, const char **text, size_t *len)
{
    d->out.n = 0;
    int rc = 0;
    if (d->n_hold) rc = lp__buf_put(&d->out, replacement, 3);
    d->n_hold = 0;
    *text = d->out.v ? d->out.v : "";
    *len = d->out.n;
    return rc;
}

int lp_detokenize(const lp_tokenizer_t *tok, const int32_t *ids, size_t n, bool special,
                  char **text, size_t *len)
{
    *text = NULL;
    *len = 0;
    lp_detok_t *d;
    int rc = lp_detok_new(tok, special, &d);
    if (rc) return rc;
    lp__buf_t all = {0};
    const char *p;
    size_t k;
    for (size_t i = 0; i < n && !rc; i++) {
        rc = lp_detok_feed(d, ids[i], &p, &k);
        if (!rc) rc = lp__buf_put(&all, p, k);
    }
    if (!rc) rc = lp_detok_flush(d, &p, &k);
    if (!rc) rc = lp__buf_put(&all, p, k);
    lp_detok_destroy(&d);
    if (rc) {
        free(all.v);
        return rc;
    }
    *text = all.v;
    *len = all.n;
    return 0;
}
