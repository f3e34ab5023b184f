/* fuzz-grammar.c - libFuzzer target for the grammar compilers and matcher:
 * arbitrary bytes as a JSON Schema, GBNF, regex or choice list (the first
 * byte picks the kind and compact), compiled against the stories260K
 * vocabulary (512 tokens, every byte a token of its own).  What compiles is
 * walked for up to 24 tokens picked by the input: each mask must equal the
 * plain trie walk's, each token from the mask must be accepted, and a mask
 * may be empty only where the output is complete (no dead ends).  Aborts
 * otherwise.  The model comes from $LMPIPE_SHARED/models (default: the
 * shared_dir the build was set up with). */
#include "grammar.h"
#include "gr-internal.h"

#include "error.h"
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifndef LP_SHARED_DIR
#define LP_SHARED_DIR "../shared"
#endif

static lp_tokenizer_t *tok;
static lp_grammar_vocab_t *gv;

static void load(void)
{
    const char *shared = getenv("LMPIPE_SHARED");
    if (!shared) shared = LP_SHARED_DIR;
    char path[4096];
    snprintf(path, sizeof(path), "%s/models/stories260K.gguf", shared);
    if (lp_tokenizer_new(path, &tok) || lp_grammar_vocab_new(tok, &gv)) {
        fprintf(stderr, "fuzz-grammar: %s\n", lp_error_msg());
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!gv) load();
    if (size < 2) return 0;
    static const enum lp_grammar_kind kinds[5] = {LP_GRAMMAR_JSON_SCHEMA, LP_GRAMMAR_GBNF, LP_GRAMMAR_REGEX,
                                                  LP_GRAMMAR_CHOICE, LP_GRAMMAR_JSON_OBJECT};
    lp_grammar_spec_t spec = {.kind = kinds[data[0] % 5], .text = (const char *)data + 2, .len = size - 2,
                              .compact = (data[0] >> 4) & 1};
    uint8_t pick = data[1];
    lp_grammar_t *g;
    if (lp_grammar_compile(gv, &spec, &g)) return 0;
    size_t words = lp_grammar_mask_words(gv);
    int32_t n = lp_grammar_vocab_n_tokens(gv);
    uint64_t mask[16], ref[16]; /* 512 tokens */
    if (words > 16) abort();
    lp_grammar_matcher_t *m;
    if (lp_grammar_matcher_new(g, &m)) abort();
    for (int step = 0; step < 24; step++) {
        int rc = lp_grammar_matcher_fill_mask(m, mask);
        if (rc == LP_ERR(E2BIG)) break; /* too ambiguous: refused, cleanly */
        if (rc || lp__gr_matcher_mask_naive(m, ref)) abort();
        if (memcmp(mask, ref, words * 8)) {
            fprintf(stderr, "fuzz-grammar: the tables' mask differs from the walk's at step %d\n", step);
            abort();
        }
        int32_t allowed[512], na = 0;
        for (int32_t t = 0; t < n; t++)
            if (mask[t >> 6] >> (t & 63) & 1 && !lp_tokenizer_is_eog(tok, t)) allowed[na++] = t;
        bool end = lp_grammar_matcher_end_allowed(m);
        if (!na) {
            if (!end) {
                fprintf(stderr, "fuzz-grammar: nothing allowed before the output is complete (step %d)\n", step);
                abort();
            }
            break;
        }
        int32_t t = allowed[(pick + (unsigned)step * 131u + (size > (size_t)step + 2 ? data[2 + step] : 0)) % (unsigned)na];
        pick = (uint8_t)(pick * 33 + 7);
        if (lp_grammar_matcher_accept(m, t)) {
            fprintf(stderr, "fuzz-grammar: token %d from the mask refused: %s\n", t, lp_error_msg());
            abort();
        }
    }
    lp_grammar_matcher_destroy(&m);
    lp_grammar_unref(&g);
    return 0;
}
