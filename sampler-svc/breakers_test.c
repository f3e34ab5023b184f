/* breakers_test.c - DRY sequence breakers given as text, resolved against
 * a real vocabulary (llama SPM) through lib/vocab, and their
 * effect on the DRY penalty.
 *
 * args: ggml-vocab-llama-spm.gguf */
#include "breakers.h"
#include "chain.h"
#include "tokenizer.h"
#include "vocab-text.h"

#include "check.h"
#include "error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool has(const lp_dry_breakers_t *t, int32_t head, const int32_t *tail, int32_t n)
{
    for (size_t b = lp_dry_breakers_find(t, head); b < t->n && t->v[b].head == head; b++)
        if (t->v[b].tail_len == n && (n == 0 || !memcmp(t->v[b].tail, tail, (size_t)n * sizeof(int32_t))))
            return true;
    return false;
}

static int32_t one_token(lp_tokenizer_t *tok, const char *s)
{
    int32_t ids[8];
    size_t n = 0;
    if (lp_tokenize(tok, s, strlen(s), false, false, ids, 8, &n) || n == 0) return -1;
    return ids[n - 1];
}

/* The probability of token x after DRY on a flat row of 300 tokens. */
static double dry_p(const lp_dry_breakers_t *t, const int32_t *hist, int n_hist, int32_t x)
{
    lp_sampler_t *s = lp_sampler_dry_new(1.0f, 2.0f, 1, 64, t);
    for (int i = 0; i < n_hist; i++) lp_sampler_accept(s, hist[i]);
    static float row[300];
    memset(row, 0, sizeof(row));
    lp_cands_t c;
    lp_cands_init(&c);
    double p = -1;
    if (!lp_cands_set_row(&c, row, 300) && !lp_sampler_apply(s, &c) && !lp_cands_materialize(&c)) {
        lp_cands_softmax(&c, false);
        for (size_t i = 0; i < c.arr.size; i++)
            if (c.arr.data[i].id == x) p = c.arr.data[i].p;
    }
    lp_cands_free(&c);
    lp_sampler_destroy(&s);
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: breakers_test VOCAB.gguf\n");
        return 2;
    }
    lp_tokenizer_t *tok;
    if (lp_tokenizer_new(argv[1], &tok)) {
        fprintf(stderr, "%s\n", lp_error_msg());
        return 1;
    }
    lp_sampler_vocab_text_t vt = lp_sampler_vocab_text_of(tok);

    /* llama.cpp's default breakers "\n" ":" "\"" "*": every token whose text
     * holds one of them is a breaker on its own */
    lp_sampler_params_t p;
    lp_sampler_params_default(&p);
    lp_dry_breakers_t *t;
    CHECK_RC(lp_dry_breakers_build(&vt, &p, &t), 0);
    int32_t nl = one_token(tok, "\n"), colon = one_token(tok, ":"), star = one_token(tok, "*");
    CHECK(nl >= 0 && colon >= 0 && star >= 0);
    CHECK(has(t, nl, NULL, 0) && has(t, colon, NULL, 0) && has(t, star, NULL, 0));
    /* every token of the vocabulary with ':' in its text is in, and no other */
    int wrong = 0;
    for (int32_t id = 0; id < vt.n_tokens; id++) {
        const char *w;
        size_t n;
        if (lp_token_piece(tok, id, true, &w, &n)) continue;
        bool want = memchr(w, '\n', n) || memchr(w, ':', n) || memchr(w, '"', n) || memchr(w, '*', n);
        if (want != has(t, id, NULL, 0)) wrong++;
    }
    CHECK(wrong == 0);
    CHECK(t->n > 4);
    lp_dry_breakers_destroy(&t);

    /* a breaker of several tokens: "\nUser:".  The newline token ends with
     * its first byte, so it heads the rest, "User:", tokenized. */
    p.n_text_breakers = 1;
    strcpy(p.text_breakers[0], "\nUser:");
    p.text_breaker_len[0] = 6;
    CHECK_RC(lp_dry_breakers_build(&vt, &p, &t), 0);
    int32_t tail[16];
    size_t n_tail = 0;
    CHECK_RC(lp_tokenize(tok, "User:", 5, false, false, tail, 16, &n_tail), 0);
    CHECK(n_tail >= 1 && has(t, nl, tail, (int32_t)n_tail));
    CHECK(!has(t, nl, NULL, 0)); /* the newline alone no longer breaks */
    lp_dry_breakers_destroy(&t);

    /* the effect: history X NL A X NL A.  Without breakers, emitting X would
     * extend the repeat "X NL A" (length 3): penalty 1 * 2^(3-1) = 4.  With
     * the newline a breaker, a repeat may not reach back past it: length 1,
     * penalty 2^0 = 1.  Flat row of 300: p(X) = e^-pen / (299 + e^-pen). */
    const int32_t X = 100, A = 200;
    const int32_t hist[6] = {X, nl, A, X, nl, A};
    lp_sampler_params_default(&p);
    p.n_text_breakers = 0;
    lp_dry_breakers_t *none, *with_nl;
    CHECK_RC(lp_dry_breakers_build(&vt, &p, &none), 0);
    p.n_text_breakers = 1;
    strcpy(p.text_breakers[0], "\n");
    p.text_breaker_len[0] = 1;
    CHECK_RC(lp_dry_breakers_build(&vt, &p, &with_nl), 0);
    CHECK(nl < 300); /* the flat row covers the newline token */
    double p0 = dry_p(none, hist, 6, X), p1 = dry_p(with_nl, hist, 6, X);
    CHECK(fabs(p0 - exp(-4.0) / (299 + exp(-4.0))) < 1e-6);
    CHECK(fabs(p1 - exp(-1.0) / (299 + exp(-1.0))) < 1e-6);
    lp_dry_breakers_destroy(&none);
    lp_dry_breakers_destroy(&with_nl);
    lp_tokenizer_destroy(&tok);
    return CHECK_DONE();
}
