/* gr-text.c - the plain-text grammars: a regular expression that the whole
 * output must match, and a choice between literal strings. */
#include "gr-internal.h"

#include "error.h"
#include "json.h"

static int one_lexeme(gr_grammar_t *g, const gr_re_t *re, const char *name)
{
    gr_dfa_t *d;
    int rc = lp__gr_dfa_from_re(re, GR_ENC_UTF8, 50000, &d);
    if (rc) return rc;
    if (!d->n_states) {
        lp__gr_dfa_unref(&d);
        return lp_error_set(LP_ERR(EINVAL), "%s matches nothing", name);
    }
    if (d->tag[0] >= 0 && d->sink[0]) {
        lp__gr_dfa_unref(&d);
        return lp_error_set(LP_ERR(EINVAL), "%s matches only the empty text", name);
    }
    int64_t id = lp__gr_add_lex(g, d, name);
    if (id < 0) return (int)id;
    g->root = (uint32_t)id;
    return 0;
}

int lp__gr_compile_regex(gr_grammar_t *g, const char *text, size_t len)
{
    gr_rebuf_t rb = {0};
    gr_re_t *re;
    int rc = lp__gr_re_parse(&rb, text, len, &re);
    if (!rc) rc = one_lexeme(g, re, "regex");
    lp__gr_rebuf_free(&rb);
    return rc;
}

int lp__gr_compile_choice(gr_grammar_t *g, const char *text, size_t len)
{
    lp_json_doc_t *doc;
    int rc = lp_json_parse(text, len, &doc);
    if (rc) {
        lp_error_prefix("choice: ");
        return rc;
    }
    const lp_json_t *r = lp_json_root(doc);
    gr_rebuf_t rb = {0};
    GR_VEC(gr_re_t *) alts = {0};
    if (r->type != LP_JSON_ARRAY || !r->n) {
        rc = lp_error_set(LP_ERR(EINVAL), "choice: expected a non-empty array of strings");
        goto done;
    }
    for (size_t i = 0; i < r->n; i++) {
        const lp_json_t *s = &r->u.items[i];
        if (s->type != LP_JSON_STRING || !s->n) {
            rc = lp_error_set(LP_ERR(EINVAL), "choice: item %zu is not a non-empty string", i);
            goto done;
        }
        gr_re_t *t = lp__gr_re_bytes(&rb, s->u.str, s->n);
        if (!t || GR_PUSH(alts, t)) {
            rc = lp_error_set(LP_ERR(E2BIG), "choice: too large");
            goto done;
        }
    }
    {
        gr_re_t *a = lp__gr_re_alt(&rb, alts.v, alts.n);
        rc = a ? one_lexeme(g, a, "choice") : lp_error_set(LP_ERR(E2BIG), "choice: too large");
    }
done:
    GR_FREE(alts);
    lp__gr_rebuf_free(&rb);
    lp_json_doc_destroy(&doc);
    return rc;
}
