/* tokenize.c - lp_tokenize: special-token split, then SPM or BPE on each
 * text fragment, with BOS/EOS as llama.cpp's llama_vocab::tokenize adds them. */
#include "tok-internal.h"

#include "error.h"

#include <stdlib.h>
#include <string.h>

/* esc = optional "▁", then s with ' ' -> "▁". */
static int escape_spaces(const char *s, size_t n, bool prefix, lp__buf_t *esc)
{
    esc->n = 0;
    int rc = 0;
    if (prefix) rc = lp__buf_put(esc, "\xe2\x96\x81", 3);
    size_t i = 0;
    while (i < n && !rc) {
        const char *sp = memchr(s + i, ' ', n - i);
        size_t j = sp ? (size_t)(sp - s) : n;
        rc = lp__buf_put(esc, s + i, j - i);
        if (!rc && sp) rc = lp__buf_put(esc, "\xe2\x96\x81", 3);
        i = sp ? j + 1 : n;
    }
    return rc;
}

/* SPM: optional leading space, then ' ' -> "▁". */
static int spm_fragment(const lp_tokenizer_t *t, const char *s, size_t n, bool prefix,
                        lp__ivec_t *out, lp__wcache_t *cache, lp__buf_t *esc)
{
    int rc = escape_spaces(s, n, prefix, esc);
    if (!rc) rc = lp__spm_encode(t, esc->v ? esc->v : "", esc->n, out, cache);
    return rc;
}

static int bpe_block(const lp_tokenizer_t *t, const char *s, size_t n, lp__ivec_t *out,
                     lp__wcache_t *cache)
{
    const char *clean;
    char *owned;
    size_t *starts, n_words;
    int rc = lp__pretok_split(t->pre, s, n, &clean, &owned, &starts, &n_words);
    if (rc) return rc;
    for (size_t w = 0; w < n_words && !rc; w++) {
        const char *word = clean + starts[w];
        size_t len = starts[w + 1] - starts[w];
        if (lp__wcache_get(cache, word, len, out)) continue;
        size_t before = out->n;
        rc = lp__bpe_word(t, word, len, out);
        if (!rc) lp__wcache_put(cache, word, len, out->v + before, out->n - before);
    }
    free(starts);
    free(owned);
    return rc;
}

static bool graphic_ascii(char c) { return c > 0x20 && c < 0x7f; }

/* BPE over long text in blocks of about 64 KiB, so that the working arrays
 * stay in cache and the cost stays linear.  A block ends after a "\n" that
 * has a visible ASCII character on both sides: every supported
 * pre-tokenizer puts a word boundary there and decides the words on either
 * side without looking across it. */
static int bpe_fragment(const lp_tokenizer_t *t, const char *s, size_t n, lp__ivec_t *out,
                        lp__wcache_t *cache)
{
    const size_t block = 65536;
    size_t start = 0;
    int rc = 0;
    while (!rc && start < n) {
        size_t end = n;
        if (n - start > 2 * block) {
            for (size_t p = start + block; p + 1 < n; p++) {
                const char *nl = memchr(s + p, '\n', n - 1 - p);
                if (!nl) break;
                p = (size_t)(nl - s);
                if (p + 1 < n && graphic_ascii(s[p - 1]) && graphic_ascii(s[p + 1])) {
                    end = p + 1;
                    break;
                }
            }
        }
        rc = bpe_block(t, s + start, end - start, out, cache);
        start = end;
    }
    return rc;
}

static int tokenize_vec(const lp_tokenizer_t *t, const char *text, size_t len, bool add_special,
                        bool parse_special, lp__ivec_t *out)
{
    /* symbol indices are 32-bit */
    if (len > INT32_MAX / 4)
        return lp_error_set(LP_ERR(E2BIG), "tokenize: text of %zu bytes is too long (max %d)", len,
                            INT32_MAX / 4);
    lp__frag_t *frags = NULL;
    size_t n_frags = 0;
    int rc = lp__special_split(t, text, len, parse_special, &frags, &n_frags);
    if (rc) return rc;
    /* a cache pays off only on longer inputs */
    lp__wcache_t *cache = len >= 4096 ? lp__wcache_new(len) : NULL;
    lp__buf_t esc = {0};

    if (add_special && t->add_bos && t->bos >= 0) rc = lp__ivec_push(out, t->bos);
    bool prev_special = true; /* SPM: a space prefix at the start and after specials */
    for (size_t i = 0; i < n_frags && !rc; i++) {
        const lp__frag_t *f = &frags[i];
        if (f->token >= 0) {
            rc = lp__ivec_push(out, f->token);
            prev_special = true;
        } else if (t->kind == LP_VOCAB_SPM) {
            rc = spm_fragment(t, text + f->off, f->len, t->add_space_prefix && prev_special, out,
                              cache, &esc);
            prev_special = false;
        } else if (t->raw_bpe) {
            /* gemma4: spaces become "▁" before the pre-tokenizer */
            rc = escape_spaces(text + f->off, f->len, false, &esc);
            if (!rc) rc = bpe_fragment(t, esc.v ? esc.v : "", esc.n, out, cache);
        } else {
            rc = bpe_fragment(t, text + f->off, f->len, out, cache);
        }
    }
    if (!rc && add_special && t->add_eos && t->eos >= 0) rc = lp__ivec_push(out, t->eos);
    free(esc.v);
    free(frags);
    lp__wcache_free(cache);
    return rc;
}

int lp_tokenize(const lp_tokenizer_t *tok, const char *text, size_t len, bool add_special,
                bool parse_special, int32_t *out, size_t cap, size_t *n_out)
{
    lp__ivec_t v = {0};
    int rc = tokenize_vec(tok, text, len, add_special, parse_special, &v);
    if (rc) {
        free(v.v);
        *n_out = 0;
        return rc;
    }
    size_t k = v.n < cap ? v.n : cap;
    if (k) memcpy(out, v.v, k * sizeof(*out));
    *n_out = v.n;
    free(v.v);
    if (v.n > cap)
        return lp_error_set(LP_ERR(ENOSPC), "tokenize: %zu tokens do not fit in %zu", v.n, cap);
    return 0;
}

int lp_tokenize_alloc(const lp_tokenizer_t *tok, const char *text, size_t len,
                      bool add_special, bool parse_special, int32_t **ids, size_t *n_out)
{
    lp__ivec_t v = {0};
    *ids = NULL;
    *n_out = 0;
    int rc = tokenize_vec(tok, text, len, add_special, parse_special, &v);
    if (rc) {
        free(v.v);
        return rc;
    }
    if (!v.v && (rc = lp__ivec_reserve(&v, 1))) return rc;
    *ids = v.v;
    *n_out = v.n;
    return 0;
}
