/* grammar_gen.c - random outputs through a JSON Schema's masks, for the
 * soundness test (tests/grammar-gen-test.py validates them with Python's
 * jsonschema: every complete output must be valid).
 *
 *   grammar_gen VOCAB.gguf SCHEMA.json COUNT SEED
 *
 * Prints one JSON line per output: {"done": bool, "text": "..."}.  Each
 * step takes an allowed token at random, short ones more often (so that
 * strings and arrays end), and stops at the end of generation with some
 * probability once it is allowed; 400 tokens at most. */
#include "grammar.h"

#include "error.h"
#include "fileio.h"
#include "json.h"
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: grammar_gen VOCAB.gguf SCHEMA.json COUNT SEED\n");
        return 2;
    }
    lp_tokenizer_t *tok;
    lp_grammar_vocab_t *gv;
    char *schema;
    size_t len;
    if (lp_tokenizer_new(argv[1], &tok) || lp_grammar_vocab_new(tok, &gv) || lp_read_file(argv[2], &schema, &len)) {
        fprintf(stderr, "grammar_gen: %s\n", lp_error_msg());
        return 1;
    }
    int count = atoi(argv[3]);
    rng = strtoull(argv[4], NULL, 10) * 0x9e3779b97f4a7c15ull + 1;
    lp_grammar_spec_t spec = {.kind = LP_GRAMMAR_JSON_SCHEMA, .text = schema, .len = len, .compact = false};
    lp_grammar_t *g;
    if (lp_grammar_compile(gv, &spec, &g)) {
        printf("{\"refused\": true}\n");
        free(schema);
        lp_grammar_vocab_destroy(&gv);
        lp_tokenizer_destroy(&tok);
        return 0;
    }
    int32_t n_tok = lp_grammar_vocab_n_tokens(gv);
    size_t words = lp_grammar_mask_words(gv);
    uint64_t *mask = malloc(words * 8);
    int32_t *all = malloc((size_t)n_tok * sizeof(int32_t)), *shortt = malloc((size_t)n_tok * sizeof(int32_t));
    char *text = malloc(1 << 16);
    int status = 0;
    for (int k = 0; k < count && !status; k++) {
        lp_grammar_matcher_t *m;
        if (lp_grammar_matcher_new(g, &m)) {
            status = 1;
            break;
        }
        size_t tl = 0;
        bool done = false;
        for (int step = 0; step < 400 && !done; step++) {
            if (lp_grammar_matcher_fill_mask(m, mask)) {
                fprintf(stderr, "grammar_gen: %s\n", lp_error_msg());
                status = 1;
                break;
            }
            if (lp_grammar_matcher_end_allowed(m) && next() % 4 == 0) {
                done = true;
                break;
            }
            int32_t na = 0, ns = 0;
            for (int32_t t = 0; t < n_tok; t++) {
                if (!(mask[t >> 6] >> (t & 63) & 1) || lp_tokenizer_is_eog(tok, t)) continue;
                all[na++] = t;
                const char *p;
                size_t pl;
                if (!lp_token_piece(tok, t, false, &p, &pl) && pl <= 2) shortt[ns++] = t;
            }
            if (!na) {
                /* nothing but the end: complete, or a dead end (a bug) */
                done = lp_grammar_matcher_end_allowed(m);
                if (!done) {
                    fprintf(stderr, "grammar_gen: no token allowed and the output is not complete\n");
                    status = 1;
                }
                break;
            }
            int32_t t = ns && next() % 4 != 0 ? shortt[next() % (uint64_t)ns] : all[next() % (uint64_t)na];
            const char *p;
            size_t pl;
            lp_token_piece(tok, t, false, &p, &pl);
            if (lp_grammar_matcher_accept(m, t)) {
                fprintf(stderr, "grammar_gen: token %d from the mask refused: %s\n", t, lp_error_msg());
                status = 1;
                break;
            }
            if (tl + pl < (1 << 16)) {
                memcpy(text + tl, p, pl);
                tl += pl;
            }
        }
        if (!done && lp_grammar_matcher_end_allowed(m)) done = true;
        size_t need = lp_json_quote(NULL, 0, text, tl);
        char *q = malloc(need + 1);
        lp_json_quote(q, need + 1, text, tl);
        printf("{\"done\": %s, \"text\": %s}\n", done ? "true" : "false", q);
        free(q);
        lp_grammar_matcher_destroy(&m);
    }
    free(mask);
    free(all);
    free(shortt);
    free(text);
    free(schema);
    lp_grammar_unref(&g);
    lp_grammar_vocab_destroy(&gv);
    lp_tokenizer_destroy(&tok);
    return status;
}
