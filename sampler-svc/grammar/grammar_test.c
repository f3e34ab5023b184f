/* grammar_test.c - the grammar engine on the Llama 3 vocabulary.
 *
 *   grammar_test VOCAB.gguf CASES.json [--naive N]
 *
 * CASES.json (testdata/schema-cases.json) lists schemas with texts that are
 * valid and invalid by Python's jsonschema (schema_cases_test.py checks the
 * file against it): each text is fed byte by byte and token by token, every
 * token checked against its mask, and every N-th mask compared with the
 * plain walk of the token trie (the reference for the tables).  Then the
 * other inputs (JSON mode, GBNF, regex, choice), the matcher's API
 * (end of generation, rollback, clone, refusal of a token), refusals that
 * name their keyword, hostile inputs, the cache, and masks from threads. */
#include "grammar.h"
#include "gr-internal.h"

#include "check.h"
#include "error.h"
#include "fileio.h"
#include "json.h"
#include "tokenizer.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static lp_tokenizer_t *tok;
static lp_grammar_vocab_t *gv;
static int naive_every = 4;
static long n_masks, n_naive;

static bool bit(const uint64_t *m, int32_t i) { return m[i >> 6] >> (i & 63) & 1; }

static lp_grammar_t *compile(enum lp_grammar_kind kind, const char *text, size_t len)
{
    lp_grammar_spec_t spec = {.kind = kind, .text = text, .len = len, .compact = false};
    lp_grammar_t *g = NULL;
    if (lp_grammar_compile(gv, &spec, &g)) return NULL;
    return g;
}

/* Byte by byte: accepted (and complete)? */
static bool by_bytes(lp_grammar_t *g, const char *s, size_t n)
{
    lp_grammar_matcher_t *m;
    if (lp_grammar_matcher_new(g, &m)) return false;
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) ok = !lp_grammar_matcher_accept_bytes(m, s + i, 1);
    ok = ok && lp_grammar_matcher_end_allowed(m);
    lp_grammar_matcher_destroy(&m);
    return ok;
}

/* Token by token through the masks; checks the mask against the reference
 * walk and against accept. */
static bool by_tokens(lp_grammar_t *g, const char *s, size_t n, const char *what)
{
    int32_t *ids;
    size_t k;
    if (lp_tokenize_alloc(tok, s, n, false, false, &ids, &k)) return false;
    size_t words = lp_grammar_mask_words(gv);
    uint64_t *mask = malloc(words * 8), *ref = malloc(words * 8);
    lp_grammar_matcher_t *m;
    bool ok = !lp_grammar_matcher_new(g, &m);
    for (size_t i = 0; i < k && ok; i++) {
        CHECK_RC(lp_grammar_matcher_fill_mask(m, mask), 0);
        if (naive_every && n_masks++ % naive_every == 0) {
            n_naive++;
            CHECK_RC(lp__gr_matcher_mask_naive(m, ref), 0);
            CHECK(!memcmp(mask, ref, words * 8), "%s: token %zu: the tables' mask differs from the walk's", what, i);
        }
        ok = bit(mask, ids[i]);
        int rc = lp_grammar_matcher_accept(m, ids[i]);
        CHECK(ok == !rc, "%s: token %zu: mask says %d, accept says %d", what, i, ok, rc);
        ok = ok && !rc;
    }
    if (ok) {
        ok = lp_grammar_matcher_end_allowed(m);
        /* the end-of-generation tokens are in the mask exactly then */
        CHECK_RC(lp_grammar_matcher_fill_mask(m, mask), 0);
        int32_t eos = lp_tokenizer_eos(tok);
        if (eos >= 0) CHECK(bit(mask, eos) == ok, "%s: EOS in the mask %d, complete %d", what, bit(mask, eos), ok);
    }
    lp_grammar_matcher_destroy(&m);
    free(mask);
    free(ref);
    free(ids);
    return ok;
}

/* ---- a JSON writer for the case file's schemas (compact, strings as JSON) ---- */

static size_t wr(char *buf, size_t cap, size_t at, const char *s, size_t n)
{
    if (buf && at + n < cap) memcpy(buf + at, s, n);
    return at + n;
}

static size_t jw(const lp_json_t *v, char *buf, size_t cap, size_t at)
{
    switch (v->type) {
    case LP_JSON_NULL: return wr(buf, cap, at, "null", 4);
    case LP_JSON_BOOL: return wr(buf, cap, at, v->u.b ? "true" : "false", v->u.b ? 4 : 5);
    case LP_JSON_NUMBER: return wr(buf, cap, at, v->num_text, v->n);
    case LP_JSON_STRING: {
        size_t need = lp_json_quote(NULL, 0, v->u.str, v->n);
        char *q = malloc(need + 1);
        lp_json_quote(q, need + 1, v->u.str, v->n);
        at = wr(buf, cap, at, q, need);
        free(q);
        return at;
    }
    case LP_JSON_ARRAY:
    case LP_JSON_OBJECT: {
        bool obj = v->type == LP_JSON_OBJECT;
        at = wr(buf, cap, at, obj ? "{" : "[", 1);
        for (size_t i = 0; i < v->n; i++) {
            if (i) at = wr(buf, cap, at, ",", 1);
            if (obj) {
                size_t need = lp_json_quote(NULL, 0, v->u.items[i].key, v->u.items[i].key_len);
                char *q = malloc(need + 1);
                lp_json_quote(q, need + 1, v->u.items[i].key, v->u.items[i].key_len);
                at = wr(buf, cap, at, q, need);
                free(q);
                at = wr(buf, cap, at, ":", 1);
            }
            at = jw(&v->u.items[i], buf, cap, at);
        }
        return wr(buf, cap, at, obj ? "}" : "]", 1);
    }
    }
    return at;
}

static size_t json_write(const lp_json_t *v, char *buf, size_t cap)
{
    size_t n = jw(v, buf, cap, 0);
    if (buf && cap) buf[n < cap ? n : cap - 1] = 0;
    return n;
}

static void test_cases(const char *path)
{
    char *text;
    size_t len;
    lp_json_doc_t *doc;
    if (lp_read_file(path, &text, &len) || lp_json_parse(text, len, &doc)) {
        CHECK(0, "%s: %s", path, lp_error_msg());
        return;
    }
    const lp_json_t *cases = lp_json_root(doc);
    int n_texts = 0;
    for (size_t c = 0; c < cases->n; c++) {
        const lp_json_t *cs = &cases->u.items[c];
        const lp_json_t *name = lp_json_get(cs, "name"), *schema = lp_json_get(cs, "schema");
        size_t slen = json_write(schema, NULL, 0);
        char *stext = malloc(slen + 1);
        json_write(schema, stext, slen + 1);
        lp_grammar_t *g = compile(LP_GRAMMAR_JSON_SCHEMA, stext, slen);
        CHECK(g, "%s: does not compile: %s", name->u.str, lp_error_msg());
        free(stext);
        if (!g) continue;
        static const char *keys[3] = {"valid", "invalid", "stricter"};
        for (int k = 0; k < 3; k++) {
            const lp_json_t *list = lp_json_get(cs, keys[k]);
            for (size_t i = 0; list && i < list->n; i++) {
                const lp_json_t *t = &list->u.items[i];
                bool want = k == 0;
                char what[256];
                snprintf(what, sizeof(what), "%s: %s text %.60s", name->u.str, keys[k], t->u.str);
                bool b = by_bytes(g, t->u.str, t->n);
                bool tk = by_tokens(g, t->u.str, t->n, what);
                CHECK(b == want, "%s: byte by byte %s", what, b ? "accepted" : "refused");
                CHECK(tk == want, "%s: token by token %s", what, tk ? "accepted" : "refused");
                n_texts++;
            }
        }
        lp_grammar_unref(&g);
    }
    printf("schema cases: %zu schemas, %d texts, %ld masks (%ld against the walk)\n", cases->n, n_texts, n_masks,
           n_naive);
    lp_json_doc_destroy(&doc);
    free(text);
}

/* ---- other inputs ------------------------------------------------------------------------------ */

static void expect(lp_grammar_t *g, const char *text, bool want, const char *what)
{
    bool b = by_bytes(g, text, strlen(text)), t = by_tokens(g, text, strlen(text), what);
    CHECK(b == want && t == want, "%s: %s: bytes %d tokens %d, want %d", what, text, b, t, want);
}

static void test_inputs(void)
{
    lp_grammar_t *g = compile(LP_GRAMMAR_JSON_OBJECT, NULL, 0);
    CHECK(g, "JSON mode: %s", lp_error_msg());
    if (g) {
        expect(g, "{}", true, "json mode");
        expect(g, "{\"a\": [1, 2.5e3, {\"b\": null}], \"c\": \"\\u00e9\"}", true, "json mode");
        expect(g, "[1]", false, "json mode: an array at the top");
        expect(g, "{\"a\":}", false, "json mode");
        expect(g, " {}", false, "json mode: no whitespace before");
        lp_grammar_unref(&g);
    }
    lp_grammar_spec_t compact = {.kind = LP_GRAMMAR_JSON_OBJECT, .text = NULL, .len = 0, .compact = true};
    CHECK_RC(lp_grammar_compile(gv, &compact, &g), 0);
    if (g) {
        expect(g, "{\"a\":[1,2]}", true, "compact");
        expect(g, "{\"a\": [1,2]}", false, "compact: no whitespace");
        lp_grammar_unref(&g);
    }
    const char *arith = "# arithmetic\nroot  ::= expr\nexpr  ::= term ([-+*/] term)*\n"
                        "term  ::= num | \"(\" space expr \")\" space\nnum   ::= [0-9]+ space\nspace ::= [ \\t\\n]*\n";
    g = compile(LP_GRAMMAR_GBNF, arith, strlen(arith));
    CHECK(g, "gbnf: %s", lp_error_msg());
    if (g) {
        expect(g, "(1+2)*3", true, "gbnf");
        expect(g, "((12 )/4)", true, "gbnf");
        expect(g, "(1+2", false, "gbnf");
        expect(g, "1+", false, "gbnf");
        lp_grammar_unref(&g);
    }
    const char *alts = "root ::= \"a\" x\nx ::= | \"b\" x\n"; /* an empty alternative, right recursion */
    g = compile(LP_GRAMMAR_GBNF, alts, strlen(alts));
    CHECK(g, "gbnf: %s", lp_error_msg());
    if (g) {
        expect(g, "abbb", true, "gbnf empty alternative");
        expect(g, "ba", false, "gbnf empty alternative");
        lp_grammar_unref(&g);
    }
    const char *re = "[0-9]{3}-[a-z]+";
    g = compile(LP_GRAMMAR_REGEX, re, strlen(re));
    CHECK(g, "regex: %s", lp_error_msg());
    if (g) {
        expect(g, "123-abc", true, "regex");
        expect(g, "12-abc", false, "regex");
        expect(g, "123-", false, "regex");
        lp_grammar_unref(&g);
    }
    const char *ch = "[\"yes\", \"no\", \"not sure\"]";
    g = compile(LP_GRAMMAR_CHOICE, ch, strlen(ch));
    CHECK(g, "choice: %s", lp_error_msg());
    if (g) {
        expect(g, "no", true, "choice");
        expect(g, "not sure", true, "choice");
        expect(g, "not", false, "choice");
        lp_grammar_unref(&g);
    }
}

/* ---- refusals and hostile input ---------------------------------------------------------------- */

static void refused(enum lp_grammar_kind kind, const char *text, int code, const char *word)
{
    lp_grammar_t *g = compile(kind, text, strlen(text));
    CHECK(!g, "accepted: %s", text);
    lp_grammar_unref(&g);
    int rc = 0;
    lp_grammar_spec_t spec = {.kind = kind, .text = text, .len = strlen(text), .compact = false};
    rc = lp_grammar_compile(gv, &spec, &g);
    CHECK(rc == code, "%s: code %d, want %d (%s)", text, rc, code, lp_error_msg());
    CHECK(strstr(lp_error_msg(), word), "%s: message '%s' does not name '%s'", text, lp_error_msg(), word);
}

static void test_refusals(void)
{
    int S = LP_GRAMMAR_JSON_SCHEMA;
    refused(S, "{\"type\":\"array\",\"uniqueItems\":true}", LP_ERR(ENOTSUP), "uniqueItems");
    refused(S, "{\"type\":\"array\",\"contains\":{\"type\":\"integer\"}}", LP_ERR(ENOTSUP), "contains");
    refused(S, "{\"type\":\"string\",\"pattern\":\"^(?!x)\"}", LP_ERR(ENOTSUP), "lookaround");
    refused(S, "{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}", LP_ERR(ENOTSUP), "backreference");
    refused(S, "{\"type\":\"string\",\"format\":\"regex\"}", LP_ERR(ENOTSUP), "regex");
    refused(S, "{\"type\":\"object\",\"unevaluatedProperties\":false}", LP_ERR(ENOTSUP), "unevaluatedProperties");
    refused(S, "{\"$ref\":\"other.json#/x\"}", LP_ERR(ENOTSUP), "$ref");
    refused(S, "{\"$schema\":\"http://json-schema.org/draft-03/schema#\"}", LP_ERR(ENOTSUP), "draft 3");
    refused(S, "{\"type\":\"number\",\"multipleOf\":0.1}", LP_ERR(ENOTSUP), "multipleOf");
    refused(S, "{\"type\":\"string\",\"enum\":[1,2]}", LP_ERR(EINVAL), "no value");
    refused(S, "{\"type\":", LP_ERR(EINVAL), "schema");
    refused(S, "{\"type\":\"strnig\"}", LP_ERR(EINVAL), "type");
    refused(S, "{\"\\u0001notenum\":[1]}", LP_ERR(EINVAL), "reserved");
    refused(LP_GRAMMAR_GBNF, "root ::= root \"a\" | \"b\"\n", LP_ERR(EINVAL), "left recursion");
    refused(LP_GRAMMAR_GBNF, "root ::= x\n", LP_ERR(EINVAL), "not defined");
    refused(LP_GRAMMAR_GBNF, "expr ::= \"a\"\n", LP_ERR(EINVAL), "root");
    refused(LP_GRAMMAR_GBNF, "root ::= <[1000]>\n", LP_ERR(ENOTSUP), "token");
    refused(LP_GRAMMAR_GBNF, "root ::= \"a\" \\q\n", LP_ERR(EINVAL), "gbnf");
    refused(LP_GRAMMAR_REGEX, "(a", LP_ERR(EINVAL), "')'");
    refused(LP_GRAMMAR_CHOICE, "[]", LP_ERR(EINVAL), "choice");
    /* bounded: sizes past the engine's limits are refused, not tried */
    refused(LP_GRAMMAR_REGEX, "(a{1000}b){1000}", LP_ERR(E2BIG), "large");
    refused(LP_GRAMMAR_GBNF, "root ::= (\"ab\" [a-z]{3000}){3000}\n", LP_ERR(E2BIG), "large");
    refused(S, "{\"type\":\"string\",\"pattern\":\"^(.{0,50}x){50}$\"}", LP_ERR(E2BIG), "large");
    /* the work of building automata is bounded per compile (lowered here
     * so that a small expression reaches it) */
    uint64_t work = lp__gr_compile_work;
    lp__gr_compile_work = 20000;
    refused(LP_GRAMMAR_REGEX, "(.*q.{5}){2}", LP_ERR(E2BIG), "costly");
    lp__gr_compile_work = work;
    /* nesting deeper than the JSON reader takes */
    char deep[1024];
    size_t k = 0;
    for (int i = 0; i < 70; i++) k += (size_t)snprintf(deep + k, sizeof(deep) - k, "{\"not\":");
    k += (size_t)snprintf(deep + k, sizeof(deep) - k, "{}");
    for (int i = 0; i < 70; i++) deep[k++] = '}';
    deep[k] = 0;
    refused(S, deep, LP_ERR(EINVAL), "deeper");
    /* a schema that refers to itself forever, and one that multiplies */
    const char *loop = "{\"$ref\":\"#\"}"; /* any value: a reference cycle consumes nothing */
    lp_grammar_t *g = compile(S, loop, strlen(loop));
    CHECK(g, "self reference: %s", lp_error_msg());
    lp_grammar_unref(&g);
    const char *wide = "{\"$defs\":{\"a\":{\"anyOf\":[{\"$ref\":\"#/$defs/b\"},{\"$ref\":\"#/$defs/b\"},{\"type\":\"null\"}]},"
                       "\"b\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/a\"}}},\"$ref\":\"#/$defs/a\"}";
    g = compile(S, wide, strlen(wide));
    CHECK(g, "mutual recursion: %s", lp_error_msg());
    if (g) {
        expect(g, "[[null],[]]", true, "mutual recursion");
        expect(g, "[[1]]", false, "mutual recursion");
    }
    lp_grammar_unref(&g);
}

/* ---- the matcher's API ---------------------------------------------------------------------------- */

static void test_matcher(void)
{
    const char *schema = "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}},\"required\":[\"n\"]}";
    lp_grammar_t *g = compile(LP_GRAMMAR_JSON_SCHEMA, schema, strlen(schema));
    CHECK(g, "%s", lp_error_msg());
    if (!g) return;
    size_t words = lp_grammar_mask_words(gv);
    uint64_t *a = malloc(words * 8), *b = malloc(words * 8);
    int32_t *ids;
    size_t n;
    const char *text = "{\"n\": 12}";
    CHECK_RC(lp_tokenize_alloc(tok, text, strlen(text), false, false, &ids, &n), 0);
    int32_t eos = lp_tokenizer_eos(tok);
    lp_grammar_matcher_t *m, *c, *m2;
    CHECK_RC(lp_grammar_matcher_new(g, &m), 0);
    /* end of generation only when complete */
    CHECK_RC(lp_grammar_matcher_accept(m, eos), LP_ERR(EINVAL));
    CHECK_RC(lp_grammar_matcher_fill_mask(m, a), 0);
    CHECK(!bit(a, eos));
    /* a refused token leaves the matcher as it was */
    int32_t bad = -1;
    for (int32_t t = 0; t < lp_grammar_vocab_n_tokens(gv) && bad < 0; t++)
        if (!bit(a, t) && t != eos) bad = t;
    CHECK_RC(lp_grammar_matcher_accept(m, bad), LP_ERR(EINVAL));
    CHECK_RC(lp_grammar_matcher_fill_mask(m, b), 0);
    CHECK(!memcmp(a, b, words * 8), "a refused token changed the matcher");
    /* rollback: the mask after one token, again */
    CHECK_RC(lp_grammar_matcher_accept(m, ids[0]), 0);
    CHECK_RC(lp_grammar_matcher_fill_mask(m, a), 0);
    for (size_t i = 1; i < n; i++) CHECK_RC(lp_grammar_matcher_accept(m, ids[i]), 0);
    CHECK(lp_grammar_matcher_end_allowed(m));
    CHECK_RC(lp_grammar_matcher_fill_mask(m, b), 0);
    CHECK(bit(b, eos), "EOS not allowed at the end");
    CHECK(lp_grammar_matcher_history(m) == n);
    CHECK_RC(lp_grammar_matcher_rollback(m, (uint32_t)n - 1), 0);
    CHECK_RC(lp_grammar_matcher_fill_mask(m, b), 0);
    CHECK(!memcmp(a, b, words * 8), "rollback: not the state after the first token");
    CHECK_RC(lp_grammar_matcher_rollback(m, 5), LP_ERR(EINVAL));
    /* clone: the copy goes on alone */
    CHECK_RC(lp_grammar_matcher_clone(m, &c), 0);
    for (size_t i = 1; i < n; i++) CHECK_RC(lp_grammar_matcher_accept(c, ids[i]), 0);
    CHECK(lp_grammar_matcher_end_allowed(c));
    CHECK(!lp_grammar_matcher_end_allowed(m));
    CHECK_RC(lp_grammar_matcher_accept(c, eos), 0);
    CHECK(lp_grammar_matcher_done(c));
    /* nothing may follow the end: an error, and an empty mask */
    CHECK_RC(lp_grammar_matcher_fill_mask(c, b), LP_ERR(ENOENT));
    CHECK(strstr(lp_error_msg(), "complete"), "%s", lp_error_msg());
    bool any = false;
    for (size_t w = 0; w < words; w++) any |= b[w] != 0;
    CHECK(!any, "tokens allowed after the end");
    CHECK_RC(lp_grammar_matcher_accept(c, ids[0]), LP_ERR(EINVAL));
    /* reset: the start's mask again, end of generation refused */
    CHECK_RC(lp_grammar_matcher_new(g, &m2), 0);
    CHECK_RC(lp_grammar_matcher_fill_mask(m2, a), 0);
    CHECK_RC(lp_grammar_matcher_reset(c), 0);
    CHECK(!lp_grammar_matcher_done(c) && !lp_grammar_matcher_end_allowed(c) && !lp_grammar_matcher_history(c));
    CHECK_RC(lp_grammar_matcher_fill_mask(c, b), 0);
    CHECK(!memcmp(a, b, words * 8), "reset: not the start's mask");
    for (size_t i = 0; i < n; i++) CHECK_RC(lp_grammar_matcher_accept(c, ids[i]), 0);
    CHECK_RC(lp_grammar_matcher_accept(c, eos), 0);
    lp_grammar_matcher_destroy(&m2);
    /* memory: reported, and a cap refuses the token that passes it */
    size_t mb = lp_grammar_matcher_bytes(c);
    CHECK(mb > 0 && mb < LP_GRAMMAR_MATCHER_MAX_BYTES, "matcher bytes %zu", mb);
    lp_grammar_matcher_destroy(&c);
    lp_grammar_matcher_destroy(&m);
    CHECK(m == NULL && c == NULL);
    lp_grammar_matcher_destroy(&m); /* NULL is fine */
    free(ids);
    free(a);
    free(b);
    lp_grammar_unref(&g);
}

/* End of generation and the logit row: EOG exactly where the grammar is
 * complete; padding ids and masked tokens never samplable; a row with
 * nothing samplable an error, not a softmax over -inf (NaN). */
static void test_eog_and_row(void)
{
    const char *gb = "root ::= \"[\" ( [0-9] ( \",\" [0-9] )* )? \"]\"";
    lp_grammar_t *g = compile(LP_GRAMMAR_GBNF, gb, strlen(gb));
    CHECK(g, "%s", lp_error_msg());
    if (!g) return;
    size_t words = lp_grammar_mask_words(gv);
    int32_t nt = lp_grammar_vocab_n_tokens(gv), nl = nt + 300; /* a padded row */
    uint64_t *mask = malloc(words * 8);
    float *row = malloc((size_t)nl * sizeof(float));
    int32_t n_eog = 0;
    for (int32_t t = 0; t < nt; t++) n_eog += lp_tokenizer_is_eog(tok, t);
    CHECK(n_eog > 0, "the vocabulary has no end-of-generation token");
    lp_grammar_matcher_t *m;
    CHECK_RC(lp_grammar_matcher_new(g, &m), 0);
    const char *steps[] = {"[", "3", ",", "4", "]"};
    for (size_t k = 0; k <= 5; k++) {
        CHECK_RC(lp_grammar_matcher_fill_mask(m, mask), 0);
        bool complete = k == 5;
        CHECK(lp_grammar_matcher_end_allowed(m) == complete);
        for (int32_t t = 0; t < nt; t++)
            if (lp_tokenizer_is_eog(tok, t)) CHECK(bit(mask, t) == complete, "EOG %d at step %zu", t, k);
        for (size_t w = nt / 64 + 1; w < words; w++) CHECK(!mask[w]);
        if (nt % 64) CHECK(!(mask[nt / 64] >> (nt % 64)), "bits past the vocabulary");
        /* the row: every logit high, padding highest */
        for (int32_t i = 0; i < nl; i++) row[i] = i >= nt ? 100.0f : 1.0f + (float)(i % 7);
        int rc = lp_grammar_mask_apply(gv, mask, row, nl);
        CHECK(rc > 0, "%s", lp_error_msg());
        int32_t best = 0;
        for (int32_t i = 1; i < nl; i++)
            if (row[i] > row[best]) best = i;
        CHECK(best < nt && bit(mask, best), "step %zu: argmax %d is not allowed", k, best);
        for (int32_t i = nt; i < nl; i++) CHECK(row[i] == -INFINITY, "padding id %d samplable", i);
        if (k < 5) CHECK_RC(lp_grammar_matcher_accept_bytes(m, steps[k], 1), 0);
    }
    /* every allowed token at -inf or NaN: an error naming it */
    for (int32_t i = 0; i < nl; i++) row[i] = i < nt && bit(mask, i) ? (i & 1 ? -INFINITY : NAN) : 5.0f;
    CHECK_RC(lp_grammar_mask_apply(gv, mask, row, nl), LP_ERR(ENOENT));
    CHECK(strstr(lp_error_msg(), "-inf"), "%s", lp_error_msg());
    /* after EOS: the empty mask is an error, and applying it leaves nothing */
    int32_t eos = lp_tokenizer_eos(tok);
    CHECK_RC(lp_grammar_matcher_accept(m, eos), 0);
    CHECK_RC(lp_grammar_matcher_fill_mask(m, mask), LP_ERR(ENOENT));
    for (int32_t i = 0; i < nl; i++) row[i] = 1.0f;
    CHECK_RC(lp_grammar_mask_apply(gv, mask, row, nl), LP_ERR(ENOENT));
    lp_grammar_matcher_destroy(&m);
    free(mask);
    free(row);
    lp_grammar_unref(&g);
}

/* A matcher's cap on its parse state: deep nesting passes a small cap, the
 * token is refused, and the matcher is as before it. */
static void test_memory_cap(void)
{
    const char *gb = "root ::= \"[\" root? \"]\"";
    lp_grammar_t *g = compile(LP_GRAMMAR_GBNF, gb, strlen(gb));
    CHECK(g, "%s", lp_error_msg());
    if (!g) return;
    lp_grammar_matcher_t *m;
    CHECK_RC(lp_grammar_matcher_new(g, &m), 0);
    lp_grammar_matcher_set_max_bytes(m, 64 << 10);
    int rc = 0;
    uint32_t depth = 0;
    for (; depth < 100000 && !rc; depth++) rc = lp_grammar_matcher_accept_bytes(m, "[", 1);
    CHECK(rc == LP_ERR(E2BIG) && strstr(lp_error_msg(), "MiB"), "no cap after %u levels: %d %s", depth, rc, lp_error_msg());
    CHECK(lp_grammar_matcher_bytes(m) < (1u << 20) + (64u << 10) * 4, "bytes %zu", lp_grammar_matcher_bytes(m));
    /* what was taken before the refusal still closes */
    uint32_t open = depth - 1, k;
    for (k = 0; k < open; k++)
        if (lp_grammar_matcher_accept_bytes(m, "]", 1)) break;
    CHECK(k == open && lp_grammar_matcher_end_allowed(m), "closed %u of %u", k, open);
    lp_grammar_matcher_destroy(&m);
    lp_grammar_unref(&g);
}

/* GBNF whose rules come from JSON Schemas (lib/chat's tool-call grammars). */
static void test_schema_rules(void)
{
    const char *gb = "root ::= \"call \" args \" \" n";
    lp_grammar_schema_rule_t r[2] = {
        {"args", "{\"type\":\"object\",\"properties\":{\"u\":{\"enum\":[\"c\",\"f\"]}},\"required\":[\"u\"]}", 0},
        {"n", "{\"type\":\"integer\",\"minimum\":3}", 0}};
    r[0].schema_len = strlen(r[0].schema);
    r[1].schema_len = strlen(r[1].schema);
    lp_grammar_spec_t spec = {.kind = LP_GRAMMAR_GBNF, .text = gb, .len = strlen(gb), .schema_rules = r,
                              .n_schema_rules = 2};
    lp_grammar_t *g = NULL;
    CHECK_RC(lp_grammar_compile(gv, &spec, &g), 0);
    if (g) {
        expect(g, "call {\"u\": \"c\"} 3", true, "schema rules");
        expect(g, "call {\"u\":\"f\"} 12", true, "schema rules");
        expect(g, "call {\"u\": \"k\"} 3", false, "an enum the rule's schema refuses");
        expect(g, "call {\"u\": \"c\"} 2", false, "a minimum the rule's schema refuses");
        expect(g, "call {} 3", false, "a required property");
        lp_grammar_unref(&g);
    }
    /* the cache keys on the rules too */
    lp_grammar_cache_t *cache;
    CHECK_RC(lp_grammar_cache_new(gv, 4, &cache), 0);
    lp_grammar_t *g1 = NULL, *g2 = NULL;
    bool hit = true;
    CHECK_RC(lp_grammar_cache_get(cache, &spec, &g1, &hit), 0);
    CHECK(!hit);
    const char *n2 = "{\"type\":\"integer\",\"maximum\":3}";
    r[1].schema = n2;
    r[1].schema_len = strlen(n2);
    CHECK_RC(lp_grammar_cache_get(cache, &spec, &g2, &hit), 0);
    CHECK(!hit && g1 != g2, "another rule's schema hit the cache");
    if (g2) expect(g2, "call {\"u\": \"c\"} 2", true, "the second grammar's rule");
    lp_grammar_unref(&g1);
    lp_grammar_unref(&g2);
    lp_grammar_cache_destroy(&cache);
    /* refusals name the rule */
    const char *twice = "root ::= args\nargs ::= \"x\"";
    spec.text = twice;
    spec.len = strlen(twice);
    CHECK_RC(lp_grammar_compile(gv, &spec, &g), LP_ERR(EINVAL));
    CHECK(strstr(lp_error_msg(), "'args'") && strstr(lp_error_msg(), "JSON Schema"), "%s", lp_error_msg());
    r[0].schema = "{\"type\":\"array\",\"items\":{\"type\":\"object\"},\"uniqueItems\":true}";
    r[0].schema_len = strlen(r[0].schema);
    spec.text = gb;
    spec.len = strlen(gb);
    int rc = lp_grammar_compile(gv, &spec, &g);
    CHECK(rc < 0 && strstr(lp_error_msg(), "rule 'args'"), "%d %s", rc, lp_error_msg());
    lp_grammar_spec_t bad = {.kind = LP_GRAMMAR_REGEX, .text = "a", .len = 1, .schema_rules = r, .n_schema_rules = 1};
    CHECK_RC(lp_grammar_compile(gv, &bad, &g), LP_ERR(EINVAL));
}

/* ---- the cache ------------------------------------------------------------------------------------- */

static void test_cache(void)
{
    lp_grammar_cache_t *c;
    CHECK_RC(lp_grammar_cache_new(gv, 2, &c), 0);
    const char *s1 = "{\"type\":\"integer\"}", *s2 = "{\"type\":\"array\",\"uniqueItems\":true}";
    lp_grammar_spec_t a = {.kind = LP_GRAMMAR_JSON_SCHEMA, .text = s1, .len = strlen(s1)};
    lp_grammar_spec_t b = {.kind = LP_GRAMMAR_JSON_SCHEMA, .text = s2, .len = strlen(s2)};
    lp_grammar_t *g1, *g2, *g3 = NULL;
    bool hit;
    CHECK_RC(lp_grammar_cache_get(c, &a, &g1, &hit), 0);
    CHECK(!hit);
    CHECK_RC(lp_grammar_cache_get(c, &a, &g2, &hit), 0);
    CHECK(hit && g1 == g2, "the second get is not the cached grammar");
    CHECK_RC(lp_grammar_cache_get(c, &b, &g3, &hit), LP_ERR(ENOTSUP));
    CHECK(!hit);
    CHECK_RC(lp_grammar_cache_get(c, &b, &g3, &hit), LP_ERR(ENOTSUP));
    CHECK(hit && strstr(lp_error_msg(), "uniqueItems"), "a cached refusal: %s", lp_error_msg());
    a.compact = true; /* another key */
    CHECK_RC(lp_grammar_cache_get(c, &a, &g3, &hit), 0);
    CHECK(!hit && g3 != g1);
    lp_grammar_unref(&g3);
    lp_grammar_cache_destroy(&c);
    /* the grammars outlive the cache */
    expect(g1, "-12", true, "cached grammar");
    lp_grammar_unref(&g1);
    lp_grammar_unref(&g2);
}

/* ---- masks from threads: tables built lazily under contention ---------------------------------------- */

typedef struct {
    lp_grammar_t *g;
    const int32_t *ids;
    size_t n;
    uint64_t *masks; /* n masks */
} thr_t;

static void *thr_run(void *arg)
{
    thr_t *t = arg;
    size_t words = lp_grammar_mask_words(gv);
    lp_grammar_matcher_t *m;
    if (lp_grammar_matcher_new(t->g, &m)) return NULL;
    for (size_t i = 0; i < t->n; i++) {
        if (lp_grammar_matcher_fill_mask(m, t->masks + i * words)) break;
        if (lp_grammar_matcher_accept(m, t->ids[i])) break;
    }
    lp_grammar_matcher_destroy(&m);
    return NULL;
}

static void test_threads(void)
{
    const char *schema = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":30},"
                         "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"pattern\":\"^[a-z]+$\"}}}}";
    const char *text = "{\"name\": \"Ada Lovelace\", \"tags\": [\"math\", \"engines\"]}";
    size_t words = lp_grammar_mask_words(gv);
    int32_t *ids;
    size_t n;
    CHECK_RC(lp_tokenize_alloc(tok, text, strlen(text), false, false, &ids, &n), 0);
    thr_t t[5];
    pthread_t th[4];
    for (int round = 0; round < 2; round++) {
        lp_grammar_t *g = compile(LP_GRAMMAR_JSON_SCHEMA, schema, strlen(schema)); /* fresh tables */
        CHECK(g, "%s", lp_error_msg());
        if (!g) break;
        for (int i = 0; i < 5; i++) {
            t[i] = (thr_t){g, ids, n, calloc(n * words, 8)};
        }
        if (round) { /* four at once, then one alone as the reference */
            for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, thr_run, &t[i]);
            for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
            thr_run(&t[4]);
        } else {
            for (int i = 0; i < 5; i++) thr_run(&t[i]);
        }
        for (int i = 0; i < 4; i++)
            CHECK(!memcmp(t[i].masks, t[4].masks, n * words * 8), "round %d thread %d: masks differ", round, i);
        for (int i = 0; i < 5; i++) free(t[i].masks);
        lp_grammar_unref(&g);
    }
    free(ids);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: grammar_test VOCAB.gguf CASES.json [--naive N]\n");
        return 2;
    }
    if (argc > 4 && !strcmp(argv[3], "--naive")) naive_every = atoi(argv[4]);
    if (lp_tokenizer_new(argv[1], &tok) || lp_grammar_vocab_new(tok, &gv)) {
        fprintf(stderr, "%s: %s\n", argv[1], lp_error_msg());
        return 1;
    }
    test_cases(argv[2]);
    test_inputs();
    test_refusals();
    test_matcher();
    test_eog_and_row();
    test_memory_cap();
    test_schema_rules();
    test_cache();
    test_threads();
    lp_grammar_vocab_destroy(&gv);
    lp_tokenizer_destroy(&tok);
    return CHECK_DONE();
}
