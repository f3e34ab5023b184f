/* gr-schema-str.c - strings in JSON Schema: "pattern" (ECMA-262 search
 * semantics: unanchored unless ^ or $ say otherwise), "format", and the
 * helpers for literal strings and keys.
 *
 * Formats are written as the strictest of what Python's and Rust's
 * validators accept (an instance either refuses is refused here); a format
 * the validators check that is not written here is refused at compile time.
 * Formats they do not know are annotations and constrain nothing. */
#include "gr-schema.h"
#include "gr-json.h"

#include "error.h"

#include <stdio.h>

int lp__gr_sc_unsupported(const char *kw, const char *why)
{
    return lp_error_set(LP_ERR(ENOTSUP), "unsupported: \"%s\" (%s)", kw, why);
}

size_t lp__gr_utf8_chars(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

gr_re_t *lp__gr_sc_text_re(sc_t *sc, const char *s, size_t n)
{
    return lp__gr_re_text(&sc->J.rb, s, n);
}

/* any character, as a regex */
static gr_re_t *anychar(gr_rebuf_t *rb)
{
    gr_cset_t all = {0};
    if (lp__gr_cs_negate(&all)) return NULL;
    gr_re_t *r = lp__gr_re_chars(rb, &all);
    lp__gr_cs_free(&all);
    return r;
}

int lp__gr_sc_any_content(sc_t *sc, const gr_dfa_t **out)
{
    (void)sc;
    *out = lp__gr_json_any_content_dfa();
    return *out ? 0 : lp_error_set(LP_ERR(ENOMEM), "out of memory");
}

/* Every match of r starts at the text's start (end): each alternative
 * begins (ends) with ^ ($), perhaps after (before) empty things. */
static bool anchored(const gr_re_t *r, bool at_end)
{
    switch (r->kind) {
    case GR_RE_BOL: return !at_end;
    case GR_RE_EOL: return at_end;
    case GR_RE_ALT:
        for (uint32_t i = 0; i < r->n; i++)
            if (!anchored(r->kids[i], at_end)) return false;
        return r->n > 0;
    case GR_RE_CAT:
        for (uint32_t i = 0; i < r->n; i++) {
            const gr_re_t *k = r->kids[at_end ? r->n - 1 - i : i];
            if (anchored(k, at_end)) return true;
            if (k->kind != GR_RE_EMPTY && !(k->kind == GR_RE_REP && k->max == 0)) return false;
        }
        return false;
    case GR_RE_REP: return r->min >= 1 && anchored(r->kids[0], at_end);
    default: return false;
    }
}

/* search semantics: .*R.* where . is any character and anchors bind R
 * (the loops left out where anchors make them useless);
 * json: the any-character loop as the common DFA of JSON content */
static gr_re_t *search_re(gr_rebuf_t *rb, gr_re_t *r, bool json)
{
    gr_re_t *any = json ? lp__gr_re_dfa(rb, lp__gr_json_any_content_dfa())
                        : lp__gr_re_rep(rb, anychar(rb), 0, GR_RE_INF);
    gr_re_t *none = lp__gr_re_new(rb, GR_RE_EMPTY);
    gr_re_t *k[3] = {anchored(r, false) ? none : any, r, anchored(r, true) ? none : any};
    return lp__gr_re_cat(rb, k, 3);
}

int lp__gr_sc_pattern(sc_t *sc, const char *pat, size_t len, const sc_pat_t **out)
{
    for (uint32_t i = 0; i < sc->pats.n; i++)
        if (sc->pats.v[i]->len == len && !memcmp(sc->pats.v[i]->pat, pat, len)) {
            *out = sc->pats.v[i];
            return 0;
        }
    gr_rebuf_t rb = {0};
    gr_re_t *r;
    int rc = lp__gr_re_parse(&rb, pat, len, &r);
    sc_pat_t p = {pat, len, NULL};
    if (rc) {
        lp_error_prefix("\"pattern\" %.*s: ", (int)(len > 60 ? 60 : len), pat);
        goto done;
    }
    gr_re_t *rj = search_re(&rb, r, true);
    if (!rj || !lp__gr_json_any_content_dfa()) {
        rc = lp_error_set(LP_ERR(E2BIG), "\"pattern\": too large");
        goto done;
    }
    rc = lp__gr_dfa_from_re(rj, GR_ENC_JSON, 20000, &p.search);
    if (rc) {
        lp_error_prefix("\"pattern\": ");
        goto done;
    }
    sc_pat_t *keep = lp__gr_memdup(&sc->arena, &p, sizeof(p));
    if (!keep || GR_PUSH(sc->pats, keep)) {
        rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
        goto done;
    }
    *out = keep;
    p.search = NULL;
done:
    lp__gr_dfa_unref(&p.search);
    lp__gr_rebuf_free(&rb);
    return rc;
}

bool lp__gr_sc_pattern_match(const sc_pat_t *p, const char *s, size_t n)
{
    /* the string as JSON content, escaped as the DFA spells it */
    const gr_dfa_t *d = p->search;
    if (!d->n_states) return false;
    int32_t q = 0;
    char esc[8];
    for (size_t i = 0; i < n && q >= 0; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *e = NULL;
        size_t k = 0;
        if (c == '"') e = "\\\"", k = 2;
        else if (c == '\\') e = "\\\\", k = 2;
        else if (c < 0x20) {
            const char *sh = c == 8 ? "b" : c == 9 ? "t" : c == 10 ? "n" : c == 12 ? "f" : c == 13 ? "r" : NULL;
            if (sh) {
                esc[0] = '\\';
                esc[1] = sh[0];
                k = 2;
            } else {
                k = (size_t)snprintf(esc, sizeof(esc), "\\u%04x", c);
            }
            e = esc;
        }
        if (!e) {
            q = lp__gr_dfa_step(d, q, c);
            continue;
        }
        for (size_t j = 0; j < k && q >= 0; j++) q = lp__gr_dfa_step(d, q, (uint8_t)e[j]);
    }
    return q >= 0 && d->tag[q] >= 0;
}

/* ---- formats ----------------------------------------------------------------------------- */

/* Formats as ECMA patterns, anchored.  Each is a subset of what both
 * validators accept. */
#define DIG "[0-9]"
#define HEX "[0-9a-fA-F]"
/* day-of-month per month, February 29 only in leap years */
#define DATE                                                                               \
    "(" DIG "{4}-(0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])"                                \
    "|" DIG "{4}-(0[469]|11)-(0[1-9]|[12][0-9]|30)"                                        \
    "|" DIG "{4}-02-(0[1-9]|1[0-9]|2[0-8])"                                                \
    "|(" DIG DIG "(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)-02-29)"
#define TIME "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
#define LABEL "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
#define TLD "[A-Za-z]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
#define ATOM "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
#define OCTET "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
#define H16 HEX "{1,4}"
#define UNRES "A-Za-z0-9._~\\-"
#define SUBD "!$&'()*+,;="
#define PCT "%" HEX HEX
#define PCHAR "([" UNRES SUBD ":@]|" PCT ")"
#define PORT "([0-9]{1,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
#define AUTHORITY "(([" UNRES SUBD ":]|" PCT ")*@)?([" UNRES SUBD "]|" PCT ")+(:" PORT ")?"
#define QUERY "(\\?(" PCHAR "|[/?])*)?(#(" PCHAR "|[/?])*)?"
#define SCHEME "[A-Za-z][A-Za-z0-9+.-]*"
/* an empty authority only before a path ("file:///x"): validators differ on "http://" */
#define URI SCHEME ":(//(" AUTHORITY "(/" PCHAR "*)*|(/" PCHAR "*)+)|/?(" PCHAR "+(/" PCHAR "*)*)?)" QUERY
#define RELREF                                                                             \
    "(//" AUTHORITY "(/" PCHAR "*)*|/(" PCHAR "+(/" PCHAR "*)*)?|([" UNRES SUBD "@]|" PCT  \
    ")+(/" PCHAR "*)*|)" QUERY

static const struct {
    const char *name;
    const char *re;   /* NULL: asserted by validators, not supported here */
    const char *re2;  /* must match too */
    uint32_t max_len; /* characters, 0: none */
} formats[] = {
    {"date-time", "^" DATE "T" TIME "$", NULL, 0},
    {"date", "^" DATE "$", NULL, 0},
    {"time", "^" TIME "$", NULL, 0},
    {"email", "^[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]{1,64}@(" LABEL "\\.)+" TLD "$", "^" ATOM "(\\." ATOM ")*@", 254},
    {"idn-email", "^[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]{1,64}@(" LABEL "\\.)+" TLD "$", "^" ATOM "(\\." ATOM ")*@", 254},
    {"hostname", "^(" LABEL "\\.)*" TLD "$", NULL, 253},
    {"ipv4", "^" OCTET "\\." OCTET "\\." OCTET "\\." OCTET "$", NULL, 0},
    {"ipv6",
     "^((" H16 ":){7}" H16 "|(" H16 ":){1,7}:|(" H16 ":){1,6}:" H16 "|(" H16 ":){1,5}(:" H16
     "){1,2}|(" H16 ":){1,4}(:" H16 "){1,3}|(" H16 ":){1,3}(:" H16 "){1,4}|(" H16 ":){1,2}(:" H16
     "){1,5}|" H16 ":(:" H16 "){1,6}|:((:" H16 "){1,7}|:))$", NULL, 0},
    {"uuid", "^" HEX "{8}-" HEX "{4}-" HEX "{4}-" HEX "{4}-" HEX "{12}$", NULL, 0},
    {"uri", "^" URI "$", NULL, 0},
    {"iri", "^" URI "$", NULL, 0},
    {"uri-reference", "^(" URI "|" RELREF ")$", NULL, 0},
    {"iri-reference", "^(" URI "|" RELREF ")$", NULL, 0},
    {"json-pointer", "^(/([^~/]|~[01])*)*$", NULL, 0},
    {"relative-json-pointer", "^(0|[1-9][0-9]*)(#|(/([^~/]|~[01])*)*)$", NULL, 0},
    {"duration",
     "^P(([0-9]+D|[0-9]+M([0-9]+D)?|[0-9]+Y([0-9]+M([0-9]+D)?)?)(T([0-9]+H([0-9]+M([0-9]+S)?)?|[0-9]+M([0-9]+S)?|[0-9]+S))?"
     "|T([0-9]+H([0-9]+M([0-9]+S)?)?|[0-9]+M([0-9]+S)?|[0-9]+S)|[0-9]+W)$", NULL, 0},
    {"idn-hostname", NULL, NULL, 0},
    {"uri-template", NULL, NULL, 0},
    {"regex", NULL, NULL, 0},
    {"host-name", NULL, NULL, 0},
    {"ip-address", NULL, NULL, 0},
    {"color", NULL, NULL, 0},
};

/* A format as a DFA over content in encoding enc; 1 when validators do not
 * assert it. */
static int format_dfa(const char *fmt, size_t flen, enum gr_enc enc, gr_dfa_t **out, uint32_t *max_len)
{
    for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
        if (strlen(formats[i].name) != flen || memcmp(formats[i].name, fmt, flen)) continue;
        if (!formats[i].re) {
            char why[96];
            snprintf(why, sizeof(why), "format \"%s\" is checked by validators and not supported here",
                     formats[i].name);
            return lp__gr_sc_unsupported("format", why);
        }
        if (max_len) *max_len = formats[i].max_len;
        gr_rebuf_t rb = {0};
        gr_re_t *r;
        gr_dfa_t *a = NULL, *b = NULL;
        int rc = lp__gr_re_parse(&rb, formats[i].re, strlen(formats[i].re), &r);
        if (!rc) rc = lp__gr_dfa_from_re(r, enc, 20000, &a);
        if (!rc && formats[i].re2) {
            gr_re_t *any = NULL;
            rc = lp__gr_re_parse(&rb, formats[i].re2, strlen(formats[i].re2), &r);
            if (!rc) { /* anchored at the start only: anything may follow */
                gr_cset_t all = {0};
                rc = lp__gr_cs_negate(&all);
                if (!rc) any = lp__gr_re_rep(&rb, lp__gr_re_chars(&rb, &all), 0, GR_RE_INF);
                lp__gr_cs_free(&all);
                r = lp__gr_re_cat2(&rb, r, any);
                if (!r) rc = lp_error_set(LP_ERR(E2BIG), "format too large");
            }
            if (!rc) rc = lp__gr_dfa_from_re(r, enc, 20000, &b);
            if (!rc) {
                gr_dfa_t *x;
                rc = lp__gr_dfa_intersect(a, b, 20000, &x);
                if (!rc) {
                    lp__gr_dfa_unref(&a);
                    a = x;
                }
            }
        }
        lp__gr_rebuf_free(&rb);
        lp__gr_dfa_unref(&b);
        if (rc) {
            lp__gr_dfa_unref(&a);
            return rc;
        }
        *out = a;
        return 0;
    }
    return 1;
}

int lp__gr_sc_format(sc_t *sc, const char *fmt, size_t len, gr_re_t **re, uint32_t *max_len)
{
    gr_dfa_t *d;
    *max_len = 0;
    int rc = format_dfa(fmt, len, GR_ENC_JSON, &d, max_len);
    if (rc) return rc;
    if (GR_PUSH(sc->J.held, d)) {
        lp__gr_dfa_unref(&d);
        return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    }
    *re = lp__gr_re_dfa(&sc->J.rb, d);
    return *re ? 0 : lp_error_set(LP_ERR(E2BIG), "expression too large");
}

int lp__gr_sc_format_check(sc_t *sc, const char *fmt, size_t flen, const char *s, size_t n)
{
    gr_dfa_t *d;
    uint32_t max_len = 0;
    (void)sc;
    int rc = format_dfa(fmt, flen, GR_ENC_UTF8, &d, &max_len);
    if (rc == 1) return 1;
    if (rc) return rc;
    int ok = lp__gr_dfa_run(d, (const uint8_t *)s, n) >= 0;
    if (max_len && lp__gr_utf8_chars(s, n) > max_len) ok = 0;
    lp__gr_dfa_unref(&d);
    return ok;
}
