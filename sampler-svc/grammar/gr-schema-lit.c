/* gr-schema-lit.c - literal values under a schema: a JSON Schema validator
 * for the values of enum and const (so that "enum" next to anything else,
 * however complex, is decided exactly: each value is kept or dropped), and
 * the grammar of a set of literal values. */
#include "gr-schema.h"

#include "error.h"

#include <stdio.h>

/* ---- equality ------------------------------------------------------------------------------ */

bool lp__gr_sc_json_eq(sc_t *sc, const lp_json_t *a, const lp_json_t *b)
{
    if (a->type != b->type) return false;
    switch (a->type) {
    case LP_JSON_NULL: return true;
    case LP_JSON_BOOL: return a->u.b == b->u.b;
    case LP_JSON_STRING: return a->n == b->n && !memcmp(a->u.str, b->u.str, a->n);
    case LP_JSON_NUMBER: {
        sc_dec_t x, y;
        if (lp__gr_dec_parse(sc, a->num_text, a->n, &x) || lp__gr_dec_parse(sc, b->num_text, b->n, &y))
            return false;
        return !lp__gr_dec_cmp(&x, &y);
    }
    case LP_JSON_ARRAY:
        if (a->n != b->n) return false;
        for (size_t i = 0; i < a->n; i++)
            if (!lp__gr_sc_json_eq(sc, &a->u.items[i], &b->u.items[i])) return false;
        return true;
    case LP_JSON_OBJECT:
        if (a->n != b->n) return false;
        for (size_t i = 0; i < a->n; i++) {
            const lp_json_t *x = &a->u.items[i], *y = NULL;
            for (size_t k = 0; k < b->n && !y; k++)
                if (b->u.items[k].key_len == x->key_len && !memcmp(b->u.items[k].key, x->key, x->key_len))
                    y = &b->u.items[k];
            if (!y || !lp__gr_sc_json_eq(sc, x, y)) return false;
        }
        return true;
    }
    return false;
}

/* ---- validation ---------------------------------------------------------------------------- */

static bool key_is(const lp_json_t *m, const char *k)
{
    size_t n = strlen(k);
    return m->key_len == n && !memcmp(m->key, k, n);
}

static int num_of(sc_t *sc, const lp_json_t *v, sc_dec_t *d)
{
    return lp__gr_dec_parse(sc, v->num_text, v->n, d);
}

static bool is_integer(sc_t *sc, const lp_json_t *v)
{
    sc_dec_t d;
    if (v->type != LP_JSON_NUMBER || num_of(sc, v, &d)) return false;
    if (!lp__gr_dec_is_int(&d)) return false;
    /* draft 4 (Python): 1.0 is a float, not an integer */
    if (sc->draft == 4)
        for (size_t i = 0; i < v->n; i++)
            if (v->num_text[i] == '.' || v->num_text[i] == 'e' || v->num_text[i] == 'E') return false;
    return true;
}

static bool type_is(sc_t *sc, const lp_json_t *v, const char *t, size_t n)
{
#define IS(s) (n == strlen(s) && !memcmp(t, s, n))
    if (IS("null")) return v->type == LP_JSON_NULL;
    if (IS("boolean")) return v->type == LP_JSON_BOOL;
    if (IS("object")) return v->type == LP_JSON_OBJECT;
    if (IS("array")) return v->type == LP_JSON_ARRAY;
    if (IS("string")) return v->type == LP_JSON_STRING;
    if (IS("number")) return v->type == LP_JSON_NUMBER;
    if (IS("integer")) return is_integer(sc, v);
#undef IS
    return false;
}

static int vnode(sc_t *sc, const lp_json_t *v, const lp_json_t *s, uint32_t skip, int depth);

static int bad_schema(const char *kw)
{
    return lp_error_set(LP_ERR(EINVAL), "schema: \"%s\" has the wrong type", kw);
}

/* Compare v (number) with bound b: returns v cmp b. */
static int cmp_num(sc_t *sc, const lp_json_t *v, const lp_json_t *b, int *out)
{
    sc_dec_t x, y;
    int rc = num_of(sc, v, &x);
    if (!rc) rc = num_of(sc, b, &y);
    if (rc) return rc;
    *out = lp__gr_dec_cmp(&x, &y);
    return 0;
}

static int v_object(sc_t *sc, const lp_json_t *v, const lp_json_t *s, int depth)
{
    const lp_json_t *props = lp__gr_sc_kw(s, "properties");
    const lp_json_t *pp = lp__gr_sc_kw(s, "patternProperties");
    const lp_json_t *ap = lp__gr_sc_kw(s, "additionalProperties");
    const lp_json_t *pn = lp__gr_sc_kw(s, "propertyNames");
    for (size_t i = 0; i < v->n; i++) {
        const lp_json_t *m = &v->u.items[i];
        bool matched = false;
        if (props && props->type == LP_JSON_OBJECT)
            for (size_t k = 0; k < props->n; k++)
                if (props->u.items[k].key_len == m->key_len &&
                    !memcmp(props->u.items[k].key, m->key, m->key_len)) {
                    matched = true;
                    int r = lp__gr_sc_validate(sc, m, &props->u.items[k], depth + 1);
                    if (r != 1) return r;
                }
        if (pp && pp->type == LP_JSON_OBJECT)
            for (size_t k = 0; k < pp->n; k++) {
                const sc_pat_t *p;
                int rc = lp__gr_sc_pattern(sc, pp->u.items[k].key, pp->u.items[k].key_len, &p);
                if (rc) return rc;
                if (!lp__gr_sc_pattern_match(p, m->key, m->key_len)) continue;
                matched = true;
                int r = lp__gr_sc_validate(sc, m, &pp->u.items[k], depth + 1);
                if (r != 1) return r;
            }
        if (!matched && ap) {
            int r = lp__gr_sc_validate(sc, m, ap, depth + 1);
            if (r != 1) return r;
        }
        if (pn) {
            lp_json_t ks = {0};
            ks.type = LP_JSON_STRING;
            ks.u.str = m->key;
            ks.n = m->key_len;
            int r = lp__gr_sc_validate(sc, &ks, pn, depth + 1);
            if (r != 1) return r;
        }
    }
    return 1;
}

static bool has_key(const lp_json_t *v, const char *k, size_t n)
{
    for (size_t i = 0; i < v->n; i++)
        if (v->u.items[i].key_len == n && !memcmp(v->u.items[i].key, k, n)) return true;
    return false;
}

static int vnode(sc_t *sc, const lp_json_t *v, const lp_json_t *s, uint32_t skip, int depth)
{
    if (depth > SC_MAX_DEPTH) return lp_error_set(LP_ERR(E2BIG), "schema nested too deep");
    if (s->type == LP_JSON_BOOL) return s->u.b;
    if (s->type != LP_JSON_OBJECT) return lp_error_set(LP_ERR(EINVAL), "schema: a schema must be an object or a boolean");
    const lp_json_t *ref = lp__gr_sc_kw(s, "$ref");
    if (ref && !(skip & SK_REF)) {
        const lp_json_t *t;
        int rc = lp__gr_sc_resolve(sc, ref, &t);
        if (rc) return rc;
        int r = lp__gr_sc_validate(sc, v, t, depth + 1);
        if (r != 1) return r;
        if (sc->draft && sc->draft <= 7) return 1; /* siblings of $ref are ignored */
    }
    for (size_t i = 0; i < s->n; i++) {
        const lp_json_t *k = &s->u.items[i];
        int r = 1, c;
        if (key_is(k, "type")) {
            bool ok = false;
            if (k->type == LP_JSON_STRING) ok = type_is(sc, v, k->u.str, k->n);
            else if (k->type == LP_JSON_ARRAY) {
                for (size_t j = 0; j < k->n && !ok; j++)
                    if (k->u.items[j].type == LP_JSON_STRING)
                        ok = type_is(sc, v, k->u.items[j].u.str, k->u.items[j].n);
            } else return bad_schema("type");
            r = ok;
        } else if (key_is(k, "enum")) {
            if (k->type != LP_JSON_ARRAY) return bad_schema("enum");
            r = 0;
            for (size_t j = 0; j < k->n && !r; j++) r = lp__gr_sc_json_eq(sc, v, &k->u.items[j]);
        } else if (key_is(k, "const")) {
            r = lp__gr_sc_json_eq(sc, v, k);
        } else if (key_is(k, "allOf") && !(skip & SK_ALLOF)) {
            if (k->type != LP_JSON_ARRAY) return bad_schema("allOf");
            for (size_t j = 0; j < k->n && r == 1; j++) r = lp__gr_sc_validate(sc, v, &k->u.items[j], depth + 1);
        } else if (key_is(k, "anyOf") && !(skip & SK_ANYOF)) {
            if (k->type != LP_JSON_ARRAY) return bad_schema("anyOf");
            r = 0;
            for (size_t j = 0; j < k->n && r == 0; j++) r = lp__gr_sc_validate(sc, v, &k->u.items[j], depth + 1);
        } else if (key_is(k, "oneOf") && !(skip & SK_ONEOF)) {
            if (k->type != LP_JSON_ARRAY) return bad_schema("oneOf");
            int cnt = 0;
            for (size_t j = 0; j < k->n; j++) {
                int x = lp__gr_sc_validate(sc, v, &k->u.items[j], depth + 1);
                if (x < 0) return x;
                cnt += x;
            }
            r = cnt == 1;
        } else if (key_is(k, "not") && !(skip & SK_NOT)) {
            r = lp__gr_sc_validate(sc, v, k, depth + 1);
            if (r >= 0) r = !r;
        } else if (key_is(k, "if") && !(skip & SK_IF)) {
            int x = lp__gr_sc_validate(sc, v, k, depth + 1);
            if (x < 0) return x;
            const lp_json_t *br = lp__gr_sc_kw(s, x ? "then" : "else");
            if (br) r = lp__gr_sc_validate(sc, v, br, depth + 1);
        } else if (key_is(k, K_NOTTYPE)) {
            bool is = false;
            if (k->type == LP_JSON_STRING) is = type_is(sc, v, k->u.str, k->n);
            else if (k->type == LP_JSON_ARRAY)
                for (size_t j = 0; j < k->n && !is; j++)
                    if (k->u.items[j].type == LP_JSON_STRING) is = type_is(sc, v, k->u.items[j].u.str, k->u.items[j].n);
            r = !is;
        } else if (key_is(k, K_NOTENUM)) {
            r = 1;
            for (size_t j = 0; j < k->n && r; j++) r = !lp__gr_sc_json_eq(sc, v, &k->u.items[j]);
        } else if (key_is(k, K_NOTPATTERN) && v->type == LP_JSON_STRING) {
            const sc_pat_t *p;
            int rc = lp__gr_sc_pattern(sc, k->u.str, k->n, &p);
            if (rc) return rc;
            r = !lp__gr_sc_pattern_match(p, v->u.str, v->n);
        } else if (key_is(k, K_NOTFORMAT) && v->type == LP_JSON_STRING) {
            r = lp__gr_sc_format_check(sc, k->u.str, k->n, v->u.str, v->n);
            if (r >= 0) r = !r;
        } else if (key_is(k, "unevaluatedProperties") || key_is(k, "unevaluatedItems") ||
                   key_is(k, "$dynamicRef") || key_is(k, "$recursiveRef")) {
            char kw[64];
            snprintf(kw, sizeof(kw), "%.*s", (int)k->key_len, k->key);
            return lp__gr_sc_unsupported(kw, "not supported");
        } else if (v->type == LP_JSON_NUMBER) {
            if (key_is(k, "minimum") || key_is(k, "maximum")) {
                if (k->type != LP_JSON_NUMBER) return bad_schema("minimum/maximum");
                if ((r = cmp_num(sc, v, k, &c))) return r;
                bool mx = key_is(k, "maximum");
                const lp_json_t *ex = lp__gr_sc_kw(s, mx ? "exclusiveMaximum" : "exclusiveMinimum");
                bool excl = ex && ex->type == LP_JSON_BOOL && ex->u.b;
                r = mx ? (excl ? c < 0 : c <= 0) : (excl ? c > 0 : c >= 0);
            } else if (key_is(k, "exclusiveMinimum") || key_is(k, "exclusiveMaximum")) {
                if (k->type == LP_JSON_NUMBER) {
                    if ((r = cmp_num(sc, v, k, &c))) return r;
                    r = key_is(k, "exclusiveMaximum") ? c < 0 : c > 0;
                }
            } else if (key_is(k, "multipleOf")) {
                sc_dec_t x, m;
                if (k->type != LP_JSON_NUMBER) return bad_schema("multipleOf");
                if ((r = num_of(sc, v, &x)) || (r = num_of(sc, k, &m))) return r;
                r = lp__gr_dec_multiple(&x, &m);
            }
        } else if (v->type == LP_JSON_STRING) {
            if (key_is(k, "minLength") || key_is(k, "maxLength")) {
                int64_t lim;
                if (lp_json_int(k, 0, INT64_MAX, &lim)) return bad_schema("minLength/maxLength");
                size_t n = lp__gr_utf8_chars(v->u.str, v->n);
                r = key_is(k, "minLength") ? (int64_t)n >= lim : (int64_t)n <= lim;
            } else if (key_is(k, "pattern")) {
                const sc_pat_t *p;
                if (k->type != LP_JSON_STRING) return bad_schema("pattern");
                int rc = lp__gr_sc_pattern(sc, k->u.str, k->n, &p);
                if (rc) return rc;
                r = lp__gr_sc_pattern_match(p, v->u.str, v->n);
            } else if (key_is(k, "format")) {
                if (k->type == LP_JSON_STRING) r = lp__gr_sc_format_check(sc, k->u.str, k->n, v->u.str, v->n);
            }
        } else if (v->type == LP_JSON_ARRAY) {
            if (key_is(k, "minItems") || key_is(k, "maxItems")) {
                int64_t lim;
                if (lp_json_int(k, 0, INT64_MAX, &lim)) return bad_schema("minItems/maxItems");
                r = key_is(k, "minItems") ? (int64_t)v->n >= lim : (int64_t)v->n <= lim;
            } else if (key_is(k, "items") || key_is(k, "prefixItems")) {
                bool prefix = key_is(k, "prefixItems") || k->type == LP_JSON_ARRAY;
                if (prefix) {
                    if (k->type != LP_JSON_ARRAY) return bad_schema("prefixItems");
                    for (size_t j = 0; j < k->n && j < v->n && r == 1; j++)
                        r = lp__gr_sc_validate(sc, &v->u.items[j], &k->u.items[j], depth + 1);
                    /* draft 7's additionalItems for the rest */
                    const lp_json_t *ai = key_is(k, "items") ? lp__gr_sc_kw(s, "additionalItems") : NULL;
                    for (size_t j = k->n; ai && j < v->n && r == 1; j++)
                        r = lp__gr_sc_validate(sc, &v->u.items[j], ai, depth + 1);
                } else {
                    const lp_json_t *pi = lp__gr_sc_kw(s, "prefixItems");
                    /* no $schema: draft 7's reading (every item) as well */
                    size_t from = pi && pi->type == LP_JSON_ARRAY && sc->draft ? pi->n : 0;
                    for (size_t j = from; j < v->n && r == 1; j++)
                        r = lp__gr_sc_validate(sc, &v->u.items[j], k, depth + 1);
                }
            } else if (key_is(k, "uniqueItems")) {
                if (k->type == LP_JSON_BOOL && k->u.b)
                    for (size_t a = 0; a < v->n && r; a++)
                        for (size_t b = a + 1; b < v->n && r; b++)
                            if (lp__gr_sc_json_eq(sc, &v->u.items[a], &v->u.items[b])) r = 0;
            } else if (key_is(k, "contains")) {
                int64_t mn = 1, mx = INT64_MAX, cnt = 0;
                const lp_json_t *x;
                if ((x = lp__gr_sc_kw(s, "minContains")) && lp_json_int(x, 0, INT64_MAX, &mn)) return bad_schema("minContains");
                if ((x = lp__gr_sc_kw(s, "maxContains")) && lp_json_int(x, 0, INT64_MAX, &mx)) return bad_schema("maxContains");
                for (size_t j = 0; j < v->n; j++) {
                    int y = lp__gr_sc_validate(sc, &v->u.items[j], k, depth + 1);
                    if (y < 0) return y;
                    cnt += y;
                }
                r = cnt >= mn && cnt <= mx;
            }
        } else if (v->type == LP_JSON_OBJECT) {
            if (key_is(k, "minProperties") || key_is(k, "maxProperties")) {
                int64_t lim;
                if (lp_json_int(k, 0, INT64_MAX, &lim)) return bad_schema("minProperties/maxProperties");
                r = key_is(k, "minProperties") ? (int64_t)v->n >= lim : (int64_t)v->n <= lim;
            } else if (key_is(k, "required")) {
                if (k->type == LP_JSON_ARRAY)
                    for (size_t j = 0; j < k->n && r; j++)
                        if (k->u.items[j].type == LP_JSON_STRING)
                            r = has_key(v, k->u.items[j].u.str, k->u.items[j].n);
            } else if (key_is(k, "properties")) {
                /* with patternProperties and additionalProperties, once */
                r = v_object(sc, v, s, depth);
            } else if ((key_is(k, "patternProperties") || key_is(k, "additionalProperties") ||
                        key_is(k, "propertyNames")) &&
                       !lp__gr_sc_kw(s, "properties")) {
                /* the first of them present does the work */
                bool first = true;
                for (size_t j = 0; j < i; j++)
                    if (key_is(&s->u.items[j], "patternProperties") || key_is(&s->u.items[j], "additionalProperties") ||
                        key_is(&s->u.items[j], "propertyNames"))
                        first = false;
                if (first) r = v_object(sc, v, s, depth);
            } else if (key_is(k, "dependencies") || key_is(k, "dependentRequired") || key_is(k, "dependentSchemas")) {
                if (k->type != LP_JSON_OBJECT) return bad_schema("dependencies");
                for (size_t j = 0; j < k->n && r == 1; j++) {
                    const lp_json_t *d = &k->u.items[j];
                    if (!has_key(v, d->key, d->key_len)) continue;
                    if (d->type == LP_JSON_ARRAY) {
                        for (size_t q = 0; q < d->n && r; q++)
                            if (d->u.items[q].type == LP_JSON_STRING)
                                r = has_key(v, d->u.items[q].u.str, d->u.items[q].n);
                    } else {
                        r = lp__gr_sc_validate(sc, v, d, depth + 1);
                    }
                }
            }
        }
        if (r != 1) return r;
    }
    return 1;
}

int lp__gr_sc_validate(sc_t *sc, const lp_json_t *v, const lp_json_t *s, int depth)
{
    return vnode(sc, v, s, 0, depth);
}

int lp__gr_sc_validate_conj(sc_t *sc, const lp_json_t *v, const sc_ref_t *items, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        int r = vnode(sc, v, items[i].node, items[i].skip, 0);
        if (r != 1) return r;
    }
    return 1;
}

/* ---- the grammar of literal values ------------------------------------------------------- */

static int lit_rule(sc_t *sc, const lp_json_t *v, uint32_t *rule, int depth);

/* A number's spellings: as written, and plainly with any trailing zeros
 * after the point (1, 1.0, 1.00; -0 for 0). */
static gr_re_t *num_re(sc_t *sc, const lp_json_t *v)
{
    gr_rebuf_t *rb = &sc->J.rb;
    sc_dec_t d;
    const char *I, *F;
    size_t ni, nf;
    if (lp__gr_dec_parse(sc, v->num_text, v->n, &d)) return NULL;
    gr_re_t *as_written = lp__gr_re_bytes(rb, v->num_text, v->n);
    if (lp__gr_dec_split(sc, &d, &I, &ni, &F, &nf)) return as_written;
    return lp__gr_re_alt2(rb, as_written, lp__gr_dec_plain_re(rb, &d, I, ni, F, nf));
}

static gr_re_t *scalar_re(sc_t *sc, const lp_json_t *v)
{
    gr_json_t *j = &sc->J;
    switch (v->type) {
    case LP_JSON_NULL: return lp__gr_json_lit(j, "null");
    case LP_JSON_BOOL: return lp__gr_json_lit(j, v->u.b ? "true" : "false");
    case LP_JSON_NUMBER: return num_re(sc, v);
    case LP_JSON_STRING: return lp__gr_json_quoted(j, lp__gr_sc_text_re(sc, v->u.str, v->n));
    default: return NULL;
    }
}

static int lit_rule(sc_t *sc, const lp_json_t *v, uint32_t *rule, int depth)
{
    if (depth > SC_MAX_DEPTH) return lp_error_set(LP_ERR(E2BIG), "literal nested too deep");
    if (v->type == LP_JSON_ARRAY) {
        uint32_t *pr = calloc(v->n ? v->n : 1, sizeof(uint32_t));
        if (!pr) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
        int rc = 0;
        for (size_t i = 0; i < v->n && !rc; i++) rc = lit_rule(sc, &v->u.items[i], &pr[i], depth + 1);
        sc_arrspec_t a = {(uint32_t)v->n, pr, GR_NONE, (uint32_t)v->n, (uint32_t)v->n};
        if (!rc) rc = lp__gr_sc_array(sc, &a, rule);
        free(pr);
        return rc;
    }
    if (v->type == LP_JSON_OBJECT) {
        size_t n = v->n;
        const char **names = calloc(n ? n : 1, sizeof(char *));
        size_t *lens = calloc(n ? n : 1, sizeof(size_t));
        uint32_t *vr = calloc(n ? n : 1, sizeof(uint32_t));
        uint64_t *req = calloc(lp__gr_words(n ? n : 1), sizeof(uint64_t));
        int rc = 0;
        if (!names || !lens || !vr || !req) rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
        for (size_t i = 0; i < n && !rc; i++) {
            names[i] = v->u.items[i].key;
            lens[i] = v->u.items[i].key_len;
            lp__gr_bset(req, i);
            rc = lit_rule(sc, &v->u.items[i], &vr[i], depth + 1);
        }
        sc_objspec_t o = {0};
        o.n_named = (uint32_t)n;
        o.names = names;
        o.name_lens = lens;
        o.value_rule = vr;
        o.required = req;
        o.other_rule = GR_NONE;
        o.max_props = GR_NONE;
        if (!rc) rc = lp__gr_sc_object(sc, &o, rule);
        free(names);
        free(lens);
        free(vr);
        free(req);
        return rc;
    }
    gr_re_t *r = scalar_re(sc, v);
    if (!r) return lp_error_set(LP_ERR(E2BIG), "literal too large");
    int64_t id = lp__gr_json_lex(&sc->J, r, GR_ENC_JSON, "literal");
    if (id < 0) return (int)id;
    *rule = (uint32_t)id;
    return 0;
}

int lp__gr_sc_literals(sc_t *sc, const lp_json_t *const *vals, uint32_t n, uint32_t *rule)
{
    *rule = GR_NONE;
    if (!n) return 0;
    GR_VEC(gr_re_t *) sc_alts = {0};
    lp__gr_u32v_t rules = {0};
    int rc = 0;
    for (uint32_t i = 0; i < n && !rc; i++) {
        const lp_json_t *v = vals[i];
        if (v->type == LP_JSON_ARRAY || v->type == LP_JSON_OBJECT) {
            uint32_t r;
            rc = lit_rule(sc, v, &r, 0);
            if (!rc && r != GR_NONE && GR_PUSH(rules, r)) rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
        } else {
            gr_re_t *r = scalar_re(sc, v);
            if (!r || GR_PUSH(sc_alts, r)) rc = lp_error_set(LP_ERR(E2BIG), "literals too large");
        }
    }
    if (!rc && sc_alts.n) {
        int64_t id = lp__gr_json_lex(&sc->J, lp__gr_re_alt(&sc->J.rb, sc_alts.v, sc_alts.n), GR_ENC_JSON, "enum");
        if (id < 0) rc = (int)id;
        else if (GR_PUSH(rules, (uint32_t)id)) rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
    }
    if (!rc && rules.n == 1) *rule = rules.v[0];
    else if (!rc && rules.n > 1) {
        int64_t id = lp__gr_json_choice(&sc->J, rules.v, rules.n, "enum");
        if (id < 0) rc = (int)id;
        else *rule = (uint32_t)id;
    }
    GR_FREE(sc_alts);
    GR_FREE(rules);
    return rc;
}
