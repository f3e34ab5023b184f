/* gr-schema-merge.c - a conjunction with no enum, anyOf, oneOf or if left:
 * its keywords merged per type (types intersected; string constraints
 * collected; bounds tightened; objects and arrays position by position and
 * key by key across the conjuncts) and emitted as rules: one lexeme for
 * the scalar types together where it can be, counted strings, an object
 * rule, an array rule. */
#include "gr-schema.h"

#include "error.h"

#include <stdio.h>

/* ---- merging a conjunction, per type ---------------------------------------------------------------- */

typedef struct {
    const lp_json_t *props, *pp, *ap, *pn;
    const lp_json_t *req, *deps, *dreq;
} objsrc_t;

typedef struct {
    const lp_json_t *prefix; /* array of schemas, or NULL */
    const lp_json_t *rest;   /* schema, or NULL (true) */
    bool rest_all;           /* rest applies to the prefix positions too */
} arrsrc_t;

typedef struct {
    int types;
    /* strings */
    uint32_t min_len, max_len;
    GR_VEC(const lp_json_t *) patterns, notpatterns, formats, notformats;
    /* numbers */
    sc_num_t num;
    /* excluded values */
    GR_VEC(const lp_json_t *) notvals;
    /* arrays */
    GR_VEC(arrsrc_t) arr;
    uint32_t min_items, max_items;
    bool unique;
    /* objects */
    GR_VEC(objsrc_t) obj;
    uint32_t min_props, max_props;
    const lp_json_t *unsup; /* a keyword refused if its type remains */
    int unsup_types;
} merged_t;

static void merged_free(merged_t *m)
{
    GR_FREE(m->patterns);
    GR_FREE(m->notpatterns);
    GR_FREE(m->formats);
    GR_FREE(m->notformats);
    GR_FREE(m->num.mult);
    GR_FREE(m->notvals);
    GR_FREE(m->arr);
    GR_FREE(m->obj);
}

static int get_count(const lp_json_t *k, const char *kw, uint32_t *out)
{
    int64_t v;
    if (k->type != LP_JSON_NUMBER || lp_json_int(k, 0, INT64_MAX, &v))
        return lp_error_set(LP_ERR(EINVAL), "schema: \"%s\" must be a non-negative integer", kw);
    *out = v > (int64_t)UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)v;
    return 0;
}

static int merge_bound(sc_t *sc, merged_t *m, const lp_json_t *s, const lp_json_t *k, bool is_max, bool excl)
{
    sc_dec_t d;
    int rc = lp__gr_dec_parse(sc, k->num_text, k->n, &d);
    if (rc) return rc;
    if (!excl) {
        const lp_json_t *e = lp__gr_sc_kw(s, is_max ? "exclusiveMaximum" : "exclusiveMinimum");
        if (e && e->type == LP_JSON_BOOL && e->u.b) excl = true;
    }
    sc_num_t *c = &m->num;
    if (is_max) {
        int cmp = c->has_hi ? lp__gr_dec_cmp(&d, &c->hi) : -1;
        if (!c->has_hi || cmp < 0 || (cmp == 0 && excl)) {
            c->has_hi = true;
            c->hi = d;
            c->hi_excl = excl;
        }
    } else {
        int cmp = c->has_lo ? lp__gr_dec_cmp(&d, &c->lo) : 1;
        if (!c->has_lo || cmp > 0 || (cmp == 0 && excl)) {
            c->has_lo = true;
            c->lo = d;
            c->lo_excl = excl;
        }
    }
    return 0;
}

static bool kis(const lp_json_t *k, const char *x) { return k->key_len == strlen(x) && !memcmp(k->key, x, k->key_len); }

static int merge_one(sc_t *sc, merged_t *m, const sc_ref_t *it)
{
    const lp_json_t *s = it->node;
    objsrc_t os = {0};
    arrsrc_t as = {0};
    bool has_obj = false, has_arr = false;
    int rc = 0;
    for (size_t i = 0; i < s->n && !rc; i++) {
        const lp_json_t *k = &s->u.items[i];
        if (kis(k, "type")) {
            int t = lp__gr_sc_type_mask(k);
            if (t < 0) return lp_error_set(LP_ERR(EINVAL), "schema: bad \"type\"");
            m->types &= t;
        } else if (kis(k, K_NOTTYPE)) {
            int t = lp__gr_sc_type_mask(k);
            if (t < 0) return lp_error_set(LP_ERR(EINVAL), "schema: bad \"type\"");
            m->types &= ~t;
        } else if (kis(k, K_NOTENUM)) {
            for (size_t j = 0; j < k->n && !rc; j++)
                if (GR_PUSH(m->notvals, &k->u.items[j])) rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
        } else if (kis(k, "minLength")) {
            uint32_t v = 0;
            if ((rc = get_count(k, "minLength", &v))) return rc;
            if (v > m->min_len) m->min_len = v;
        } else if (kis(k, "maxLength")) {
            uint32_t v = 0;
            if ((rc = get_count(k, "maxLength", &v))) return rc;
            if (m->max_len == GR_NONE || v < m->max_len) m->max_len = v;
        } else if (kis(k, "pattern") || kis(k, K_NOTPATTERN)) {
            if (k->type != LP_JSON_STRING) return lp_error_set(LP_ERR(EINVAL), "schema: \"pattern\" must be a string");
            if (kis(k, "pattern") ? GR_PUSH(m->patterns, k) : GR_PUSH(m->notpatterns, k))
                rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
        } else if (kis(k, "format") || kis(k, K_NOTFORMAT)) {
            if (k->type != LP_JSON_STRING) continue;
            if (kis(k, "format") ? GR_PUSH(m->formats, k) : GR_PUSH(m->notformats, k))
                rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
        } else if (kis(k, "minimum") || kis(k, "maximum")) {
            if (k->type != LP_JSON_NUMBER) return lp_error_set(LP_ERR(EINVAL), "schema: \"minimum\"/\"maximum\" must be numbers");
            rc = merge_bound(sc, m, s, k, kis(k, "maximum"), false);
        } else if (kis(k, "exclusiveMinimum") || kis(k, "exclusiveMaximum")) {
            if (k->type == LP_JSON_NUMBER) rc = merge_bound(sc, m, s, k, kis(k, "exclusiveMaximum"), true);
        } else if (kis(k, "multipleOf")) {
            sc_dec_t d;
            if (k->type != LP_JSON_NUMBER) return lp_error_set(LP_ERR(EINVAL), "schema: \"multipleOf\" must be a number");
            if ((rc = lp__gr_dec_parse(sc, k->num_text, k->n, &d))) return rc;
            if (!d.nd || d.neg) return lp_error_set(LP_ERR(EINVAL), "schema: \"multipleOf\" must be greater than 0");
            if (GR_PUSH(m->num.mult, d)) rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
        } else if (kis(k, "items")) {
            has_arr = true;
            if (k->type == LP_JSON_ARRAY) {
                as.prefix = k;
                if (!as.rest) as.rest = lp__gr_sc_kw(s, "additionalItems");
            } else {
                as.rest = k;
                /* no $schema: draft 7 reads a schema "items" as every item's,
                 * 2020-12 as those after prefixItems; both must hold */
                as.rest_all = !sc->draft;
            }
        } else if (kis(k, "prefixItems")) {
            if (k->type != LP_JSON_ARRAY) return lp_error_set(LP_ERR(EINVAL), "schema: \"prefixItems\" must be an array");
            has_arr = true;
            as.prefix = k;
        } else if (kis(k, "minItems")) {
            uint32_t v = 0;
            if ((rc = get_count(k, "minItems", &v))) return rc;
            if (v > m->min_items) m->min_items = v;
        } else if (kis(k, "maxItems")) {
            uint32_t v = 0;
            if ((rc = get_count(k, "maxItems", &v))) return rc;
            if (m->max_items == GR_NONE || v < m->max_items) m->max_items = v;
        } else if (kis(k, "uniqueItems")) {
            if (k->type == LP_JSON_BOOL && k->u.b) m->unique = true;
        } else if (kis(k, "dependentSchemas") && (it->skip & SK_DEPS)) {
            /* rewritten as conjuncts (schema_deps) */
        } else if (kis(k, "contains") || kis(k, "unevaluatedItems") || kis(k, "unevaluatedProperties") ||
                   kis(k, "dependentSchemas") || kis(k, "$dynamicRef") || kis(k, "$recursiveRef")) {
            /* these constrain only their own type: refused once all types are
             * merged, if that type is still possible */
            if (!m->unsup) {
                m->unsup = k;
                m->unsup_types = kis(k, "contains") || kis(k, "unevaluatedItems") ? T_ARR
                               : kis(k, "$dynamicRef") || kis(k, "$recursiveRef") ? T_ALL : T_OBJ;
            }
        } else if (kis(k, "properties")) {
            has_obj = true;
            os.props = k;
        } else if (kis(k, "patternProperties")) {
            has_obj = true;
            os.pp = k;
        } else if (kis(k, "additionalProperties")) {
            has_obj = true;
            os.ap = k;
        } else if (kis(k, "propertyNames")) {
            has_obj = true;
            os.pn = k;
        } else if (kis(k, "required")) {
            if (k->type == LP_JSON_ARRAY) {
                has_obj = true;
                os.req = k;
            }
        } else if (kis(k, "dependencies") || kis(k, "dependentRequired")) {
            if (k->type != LP_JSON_OBJECT) return lp_error_set(LP_ERR(EINVAL), "schema: \"dependencies\" must be an object");
            for (size_t j = 0; j < k->n; j++)
                if (k->u.items[j].type != LP_JSON_ARRAY && (kis(k, "dependentRequired") || !(it->skip & SK_DEPS)))
                    return lp_error_set(LP_ERR(EINVAL), "schema: \"%s\" values must be arrays",
                                        kis(k, "dependentRequired") ? "dependentRequired" : "dependencies");
            has_obj = true;
            if (kis(k, "dependencies")) os.deps = k;
            else os.dreq = k;
        } else if (kis(k, "minProperties")) {
            uint32_t v = 0;
            if ((rc = get_count(k, "minProperties", &v))) return rc;
            if (v > m->min_props) m->min_props = v;
        } else if (kis(k, "maxProperties")) {
            uint32_t v = 0;
            if ((rc = get_count(k, "maxProperties", &v))) return rc;
            if (m->max_props == GR_NONE || v < m->max_props) m->max_props = v;
        }
    }
    if (has_arr && GR_PUSH(m->arr, as)) rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
    if (has_obj && GR_PUSH(m->obj, os)) rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
    return rc;
}

/* ---- emission ------------------------------------------------------------------------------------------ */

static int add_rule(lp__gr_u32v_t *v, uint32_t r)
{
    if (r == GR_NONE) return 0;
    return GR_PUSH(*v, r) ? lp_error_set(LP_ERR(ENOMEM), "out of memory") : 0;
}

/* DFA for a list of literal values' spellings (scalars), to subtract. */
static int notvals_dfa(sc_t *sc, const merged_t *m, int types, gr_dfa_t **out)
{
    *out = NULL;
    GR_VEC(gr_re_t *) alts = {0};
    int rc = 0;
    for (uint32_t i = 0; i < m->notvals.n && !rc; i++) {
        const lp_json_t *v = m->notvals.v[i];
        int t = v->type == LP_JSON_NULL ? T_NULL : v->type == LP_JSON_BOOL ? T_BOOL
              : v->type == LP_JSON_NUMBER ? (T_INT | T_NUM) : v->type == LP_JSON_STRING ? T_STR
              : v->type == LP_JSON_ARRAY ? T_ARR : T_OBJ;
        if (!(t & types)) continue;
        if (t & (T_ARR | T_OBJ)) {
            rc = lp__gr_sc_unsupported("not", "excluding an array or object value");
            break;
        }
        gr_re_t *r = NULL;
        switch (v->type) {
        case LP_JSON_NULL: r = lp__gr_json_lit(&sc->J, "null"); break;
        case LP_JSON_BOOL: r = lp__gr_json_lit(&sc->J, v->u.b ? "true" : "false"); break;
        case LP_JSON_STRING: r = lp__gr_json_quoted(&sc->J, lp__gr_sc_text_re(sc, v->u.str, v->n)); break;
        case LP_JSON_NUMBER: {
            /* every spelling of the value: a literal grammar of it */
            sc_dec_t d;
            const char *I, *F;
            size_t ni, nf;
            if ((rc = lp__gr_dec_parse(sc, v->num_text, v->n, &d))) break;
            if ((rc = lp__gr_dec_split(sc, &d, &I, &ni, &F, &nf))) break;
            gr_rebuf_t *rb = &sc->J.rb;
            /* its plain spellings [-]I[.F0*]; numbers are written without an
             * exponent where values are excluded (see merge_emit) */
            r = lp__gr_dec_plain_re(rb, &d, I, ni, F, nf);
            break;
        }
        default: break;
        }
        if (!rc && (!r || GR_PUSH(alts, r))) rc = lp_error_set(LP_ERR(E2BIG), "expression too large");
    }
    if (!rc && alts.n) rc = lp__gr_dfa_from_re(lp__gr_re_alt(&sc->J.rb, alts.v, alts.n), GR_ENC_JSON, 20000, out);
    GR_FREE(alts);
    return rc;
}

/* A JSON number with an exponent: its value may equal an excluded one. */
static bool has_num_notvals(const merged_t *m)
{
    for (uint32_t i = 0; i < m->notvals.n; i++)
        if (m->notvals.v[i]->type == LP_JSON_NUMBER) return true;
    return false;
}

static int dfa_minus(gr_dfa_t *a, const gr_dfa_t *b, gr_dfa_t **out);

/* string lexeme(s) */
static int emit_string(sc_t *sc, merged_t *m, gr_dfa_t *minus, lp__gr_u32v_t *rules, gr_rev_t *scalars)
{
    gr_json_t *j = &sc->J;
    gr_rebuf_t *rb = &j->rb;
    uint32_t max_len = m->max_len;
    gr_dfa_t *content = NULL;
    int rc = 0;
    bool constrained = m->patterns.n || m->formats.n || m->notpatterns.n || m->notformats.n;
    for (uint32_t i = 0; i < m->patterns.n + m->notpatterns.n + m->formats.n + m->notformats.n && !rc; i++) {
        gr_dfa_t *d = NULL;
        bool negate = false;
        if (i < m->patterns.n + m->notpatterns.n) {
            bool isneg = i >= m->patterns.n;
            const lp_json_t *k = isneg ? m->notpatterns.v[i - m->patterns.n] : m->patterns.v[i];
            const sc_pat_t *p;
            if ((rc = lp__gr_sc_pattern(sc, k->u.str, k->n, &p))) break;
            d = lp__gr_dfa_ref(p->search);
            negate = isneg;
        } else {
            uint32_t fi = i - m->patterns.n - m->notpatterns.n;
            bool isneg = fi >= m->formats.n;
            const lp_json_t *k = isneg ? m->notformats.v[fi - m->formats.n] : m->formats.v[fi];
            gr_re_t *fr;
            uint32_t ml = 0;
            rc = lp__gr_sc_format(sc, k->u.str, k->n, &fr, &ml);
            if (rc == 1) {
                rc = 0;
                continue;
            }
            if (rc) break;
            if (isneg && ml) {
                /* not (F and len <= ml): would need "or longer"; refuse */
                rc = lp__gr_sc_unsupported("not format", "a format with a length limit");
                break;
            }
            if (!isneg && ml && (max_len == GR_NONE || ml < max_len)) max_len = ml;
            d = lp__gr_dfa_ref((gr_dfa_t *)fr->dfa);
            negate = isneg;
        }
        if (negate) {
            const gr_dfa_t *any;
            gr_dfa_t *x;
            if ((rc = lp__gr_sc_any_content(sc, &any))) {
                lp__gr_dfa_unref(&d);
                break;
            }
            rc = dfa_minus((gr_dfa_t *)any, d, &x);
            lp__gr_dfa_unref(&d);
            if (rc) break;
            d = x;
        }
        if (!content) {
            content = d;
        } else {
            gr_dfa_t *x;
            rc = lp__gr_dfa_intersect(content, d, 20000, &x);
            lp__gr_dfa_unref(&d);
            lp__gr_dfa_unref(&content);
            if (rc) break;
            content = x;
        }
    }
    if (rc) {
        lp__gr_dfa_unref(&content);
        return rc;
    }
    if (max_len != GR_NONE && m->min_len > max_len) {
        lp__gr_dfa_unref(&content);
        return 0;
    }
    gr_re_t *body;
    if (content) {
        if (!content->n_states) {
            lp__gr_dfa_unref(&content);
            return 0;
        }
        if (GR_PUSH(j->held, content)) {
            lp__gr_dfa_unref(&content);
            return lp_error_set(LP_ERR(ENOMEM), "out of memory");
        }
        body = lp__gr_re_dfa(rb, content);
    } else {
        body = constrained ? NULL : lp__gr_json_str_body(j);
        if (!body) {
            const gr_dfa_t *any;
            if ((rc = lp__gr_sc_any_content(sc, &any))) return rc;
            body = lp__gr_re_dfa(rb, any);
        }
    }
    gr_re_t *str = lp__gr_json_quoted(j, body);
    if (!str) return lp_error_set(LP_ERR(E2BIG), "expression too large");
    bool counted = m->min_len > 0 || max_len != GR_NONE;
    if (!counted && !minus) return GR_PUSH(*scalars, str) ? lp_error_set(LP_ERR(ENOMEM), "out of memory") : 0;
    gr_dfa_t *d;
    if ((rc = lp__gr_dfa_from_re(str, GR_ENC_JSON, j->max_dfa, &d))) return rc;
    if (minus) {
        gr_dfa_t *x;
        rc = dfa_minus(d, minus, &x);
        lp__gr_dfa_unref(&d);
        if (rc) return rc;
        d = x;
    }
    if (!d->n_states) {
        lp__gr_dfa_unref(&d);
        return 0;
    }
    if (!counted) {
        int64_t id = lp__gr_json_lex_dfa(j, d, "string");
        return id < 0 ? (int)id : add_rule(rules, (uint32_t)id);
    }
    int64_t id = lp__gr_add_lex(j->g, d, "string");
    if (id < 0) return (int)id;
    gr_rule_t *r = &j->g->rules.v[id];
    r->counted = true;
    r->min_len = m->min_len;
    r->max_len = max_len;
    if (!r->dfa->cnt) { /* no counted bytes (an empty-only language) */
        r->counted = false;
        if (m->min_len > 0) return 0;
    }
    if (r->counted && (rc = lp__gr_dfa_lengths(r->dfa))) return rc;
    return add_rule(rules, (uint32_t)id);
}

/* the schemas for a key, by source: properties[k], matching patterns, else additionalProperties */
static int key_parts(sc_t *sc, const merged_t *m, const char *k, size_t kn, sc_refv_t *parts)
{
    int rc = 0;
    for (uint32_t s = 0; s < m->obj.n && !rc; s++) {
        const objsrc_t *o = &m->obj.v[s];
        bool matched = false;
        if (o->props && o->props->type == LP_JSON_OBJECT)
            for (size_t i = 0; i < o->props->n && !rc; i++)
                if (o->props->u.items[i].key_len == kn && !memcmp(o->props->u.items[i].key, k, kn)) {
                    matched = true;
                    rc = lp__gr_sc_push(parts, &o->props->u.items[i], 0);
                }
        if (o->pp && o->pp->type == LP_JSON_OBJECT)
            for (size_t i = 0; i < o->pp->n && !rc; i++) {
                const sc_pat_t *p;
                if ((rc = lp__gr_sc_pattern(sc, o->pp->u.items[i].key, o->pp->u.items[i].key_len, &p))) break;
                if (!lp__gr_sc_pattern_match(p, k, kn)) continue;
                matched = true;
                rc = lp__gr_sc_push(parts, &o->pp->u.items[i], 0);
            }
        if (!matched && o->ap && !rc) rc = lp__gr_sc_push(parts, o->ap, 0);
    }
    return rc;
}

static int emit_object(sc_t *sc, merged_t *m, uint32_t *rule)
{
    *rule = GR_NONE;
    GR_VEC(const char *) names = {0};
    GR_VEC(size_t) lens = {0};
    int rc = 0;
    /* named: properties, required, dependencies, in order of appearance */
#define ADD_NAME(S_, N_)                                                                           \
    do {                                                                                           \
        bool dup_ = false;                                                                         \
        for (uint32_t q_ = 0; q_ < names.n && !dup_; q_++)                                         \
            dup_ = lens.v[q_] == (N_) && !memcmp(names.v[q_], (S_), (N_));                         \
        if (!dup_ && (GR_PUSH(names, (S_)) || GR_PUSH(lens, (N_)))) rc = lp_error_set(LP_ERR(ENOMEM), "out of memory"); \
    } while (0)
    for (uint32_t s = 0; s < m->obj.n && !rc; s++) {
        const objsrc_t *o = &m->obj.v[s];
        if (o->props && o->props->type == LP_JSON_OBJECT)
            for (size_t i = 0; i < o->props->n; i++) ADD_NAME(o->props->u.items[i].key, o->props->u.items[i].key_len);
        if (o->req)
            for (size_t i = 0; i < o->req->n; i++)
                if (o->req->u.items[i].type == LP_JSON_STRING) ADD_NAME(o->req->u.items[i].u.str, o->req->u.items[i].n);
        const lp_json_t *dl[2] = {o->deps, o->dreq};
        for (int d = 0; d < 2; d++)
            if (dl[d])
                for (size_t i = 0; i < dl[d]->n; i++) {
                    const lp_json_t *e = &dl[d]->u.items[i];
                    if (e->type != LP_JSON_ARRAY) continue; /* a schema: schema_deps */
                    ADD_NAME(e->key, e->key_len);
                    for (size_t q = 0; q < e->n; q++)
                        if (e->u.items[q].type == LP_JSON_STRING) ADD_NAME(e->u.items[q].u.str, e->u.items[q].n);
                }
    }
#undef ADD_NAME
    uint32_t nn = names.n;
    uint32_t words = (uint32_t)lp__gr_words(nn ? nn : 1);
    uint32_t *vr = calloc(nn ? nn : 1, sizeof(uint32_t));
    uint64_t *req = calloc(words, sizeof(uint64_t));
    GR_VEC(const gr_dfa_t *) pdfa = {0};
    lp__gr_u32v_t prule = {0};
    lp__gr_u32v_t dkey = {0};
    GR_VEC(uint64_t) dset = {0};
    sc_refv_t parts = {0};
    gr_dfa_t *names_dfa = NULL;
    if (!vr || !req) rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
    /* propertyNames: a string schema every key must satisfy */
    const lp_json_t *pn_list[64];
    uint32_t n_pn = 0;
    for (uint32_t s = 0; s < m->obj.n && !rc; s++)
        if (m->obj.v[s].pn) {
            if (n_pn == 64) rc = lp__gr_sc_unsupported("propertyNames", "too many");
            else pn_list[n_pn++] = m->obj.v[s].pn;
        }
    for (uint32_t i = 0; i < nn && !rc; i++) {
        /* a name propertyNames refuses cannot appear */
        bool ok = true;
        lp_json_t ks = {0};
        ks.type = LP_JSON_STRING;
        ks.u.str = names.v[i];
        ks.n = lens.v[i];
        for (uint32_t p = 0; p < n_pn && ok && !rc; p++) {
            int v = lp__gr_sc_validate(sc, &ks, pn_list[p], 0);
            if (v < 0) rc = v;
            ok = v == 1;
        }
        if (rc) break;
        vr[i] = GR_NONE;
        if (!ok) continue;
        parts.n = 0;
        if ((rc = key_parts(sc, m, names.v[i], lens.v[i], &parts))) break;
        rc = lp__gr_sc_conj(sc, parts.v, parts.n, &vr[i]);
    }
    /* required and dependencies as bitsets over names */
    for (uint32_t s = 0; s < m->obj.n && !rc; s++) {
        const objsrc_t *o = &m->obj.v[s];
        if (o->req)
            for (size_t i = 0; i < o->req->n; i++) {
                const lp_json_t *x = &o->req->u.items[i];
                if (x->type != LP_JSON_STRING) continue;
                for (uint32_t q = 0; q < nn; q++)
                    if (lens.v[q] == x->n && !memcmp(names.v[q], x->u.str, x->n)) lp__gr_bset(req, q);
            }
        const lp_json_t *dl[2] = {o->deps, o->dreq};
        for (int d = 0; d < 2 && !rc; d++)
            if (dl[d])
                for (size_t i = 0; i < dl[d]->n && !rc; i++) {
                    const lp_json_t *e = &dl[d]->u.items[i];
                    if (e->type != LP_JSON_ARRAY) continue;
                    uint32_t kq = 0;
                    for (uint32_t q = 0; q < nn; q++)
                        if (lens.v[q] == e->key_len && !memcmp(names.v[q], e->key, e->key_len)) kq = q;
                    if (GR_PUSH(dkey, kq) || GR_RESERVE(dset, words)) {
                        rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
                        break;
                    }
                    uint64_t *bits = dset.v + dset.n;
                    memset(bits, 0, words * sizeof(uint64_t));
                    dset.n += words;
                    for (size_t t = 0; t < e->n; t++) {
                        const lp_json_t *x = &e->u.items[t];
                        if (x->type != LP_JSON_STRING) continue;
                        for (uint32_t q = 0; q < nn; q++)
                            if (lens.v[q] == x->n && !memcmp(names.v[q], x->u.str, x->n)) lp__gr_bset(bits, q);
                    }
                }
    }
    if (dkey.n && m->max_props != GR_NONE && !rc) rc = lp__gr_sc_unsupported("dependencies", "with maxProperties");
    /* patterns: pairwise disjoint */
    GR_VEC(const lp_json_t *) pnodes = {0};
    for (uint32_t s = 0; s < m->obj.n && !rc; s++) {
        const objsrc_t *o = &m->obj.v[s];
        if (!o->pp || o->pp->type != LP_JSON_OBJECT) continue;
        for (size_t i = 0; i < o->pp->n && !rc; i++) {
            const lp_json_t *pe = &o->pp->u.items[i];
            const sc_pat_t *p;
            if ((rc = lp__gr_sc_pattern(sc, pe->key, pe->key_len, &p))) break;
            for (uint32_t q = 0; q < pdfa.n && !rc; q++) {
                gr_dfa_t *x;
                if ((rc = lp__gr_dfa_intersect(pdfa.v[q], p->search, 20000, &x))) break;
                bool overlap = x->n_states > 0;
                lp__gr_dfa_unref(&x);
                if (overlap) rc = lp__gr_sc_unsupported("patternProperties", "two patterns may match the same key");
            }
            if (rc) break;
            /* the schema for keys matching it: it, and other sources' additionalProperties */
            parts.n = 0;
            rc = lp__gr_sc_push(&parts, pe, 0);
            for (uint32_t t = 0; t < m->obj.n && !rc; t++)
                if (t != s && m->obj.v[t].ap) rc = lp__gr_sc_push(&parts, m->obj.v[t].ap, 0);
            uint32_t r;
            if (!rc) rc = lp__gr_sc_conj(sc, parts.v, parts.n, &r);
            if (!rc && (GR_PUSH(pdfa, p->search) || GR_PUSH(prule, r) || GR_PUSH(pnodes, pe)))
                rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
        }
    }
    GR_FREE(pnodes);
    /* other keys */
    uint32_t other = GR_NONE;
    if (!rc) {
        parts.n = 0;
        for (uint32_t s = 0; s < m->obj.n && !rc; s++)
            if (m->obj.v[s].ap) rc = lp__gr_sc_push(&parts, m->obj.v[s].ap, 0);
        if (!rc) rc = lp__gr_sc_conj(sc, parts.v, parts.n, &other);
    }
    /* propertyNames as a content DFA for pattern and other keys */
    if (!rc && n_pn && (pdfa.n || other != GR_NONE)) {
        for (uint32_t p = 0; p < n_pn && !rc; p++) {
            const lp_json_t *pn = pn_list[p];
            gr_dfa_t *d = NULL;
            if (pn->type == LP_JSON_BOOL) {
                if (!pn->u.b) { /* no key at all */
                    for (uint32_t q = 0; q < pdfa.n; q++) prule.v[q] = GR_NONE;
                    other = GR_NONE;
                }
                continue;
            }
            /* a string schema: its lexeme without the quotes is what we need;
             * supported: pattern, format, enum/const of strings, no lengths */
            for (size_t i = 0; i < pn->n && !rc; i++) {
                const lp_json_t *k = &pn->u.items[i];
                if (kis(k, "pattern")) {
                    const sc_pat_t *sp;
                    if ((rc = lp__gr_sc_pattern(sc, k->u.str, k->n, &sp))) break;
                    gr_dfa_t *x = NULL;
                    if (d) {
                        rc = lp__gr_dfa_intersect(d, sp->search, 20000, &x);
                        lp__gr_dfa_unref(&d);
                        d = x;
                    } else {
                        d = lp__gr_dfa_ref(sp->search);
                    }
                } else if (kis(k, "type") || kis(k, "description") || kis(k, "title") || kis(k, "$comment") ||
                           kis(k, "examples")) {
                    continue;
                } else {
                    rc = lp__gr_sc_unsupported("propertyNames", "beyond a pattern, with keys not named in properties");
                }
            }
            if (rc) {
                lp__gr_dfa_unref(&d);
                break;
            }
            if (!d) continue;
            if (!names_dfa) {
                names_dfa = d;
            } else {
                gr_dfa_t *x;
                rc = lp__gr_dfa_intersect(names_dfa, d, 20000, &x);
                lp__gr_dfa_unref(&d);
                lp__gr_dfa_unref(&names_dfa);
                names_dfa = x;
            }
        }
    }
    if (!rc) {
        bool others = other != GR_NONE;
        for (uint32_t q = 0; q < prule.n; q++) others |= prule.v[q] != GR_NONE;
        if (m->min_props > 1 && others)
            rc = lp__gr_sc_unsupported("minProperties",
                                       "over 1 where keys beyond the named ones may repeat (only distinct keys count)");
    }
    if (!rc) {
        sc_objspec_t o = {0};
        o.n_named = nn;
        o.names = names.v;
        o.name_lens = lens.v;
        o.value_rule = vr;
        o.required = req;
        o.n_pat = pdfa.n;
        o.pat_dfa = pdfa.v;
        o.pat_rule = prule.v;
        o.other_rule = other;
        /* named keys are checked against propertyNames above; the DFA
         * applies to the rest only */
        o.names_dfa = NULL;
        o.min_props = m->min_props;
        o.max_props = m->max_props;
        o.n_deps = dkey.n;
        o.dep_key = dkey.v;
        o.dep_set = dset.v;
        if (names_dfa) {
            /* restrict patterns and other keys by intersecting their DFAs */
            for (uint32_t q = 0; q < pdfa.n && !rc; q++) {
                gr_dfa_t *x;
                if ((rc = lp__gr_dfa_intersect(pdfa.v[q], names_dfa, 20000, &x))) break;
                if (GR_PUSH(sc->J.held, x)) {
                    lp__gr_dfa_unref(&x);
                    rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
                    break;
                }
                pdfa.v[q] = x;
            }
            if (!rc && other != GR_NONE) {
                /* other keys: patternless keys must match propertyNames: add
                 * it as a pattern region with the other rule, and no other */
                if (GR_PUSH(pdfa, names_dfa) || GR_PUSH(prule, other)) rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
                else {
                    if (GR_PUSH(sc->J.held, names_dfa)) rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
                    names_dfa = NULL;
                    o.n_pat = pdfa.n;
                    o.pat_dfa = pdfa.v;
                    o.pat_rule = prule.v;
                    o.other_rule = GR_NONE;
                    if (prule.n > 1) /* overlapping with the real patterns: refuse */
                        rc = lp__gr_sc_unsupported("propertyNames", "together with patternProperties");
                }
            }
        }
        if (!rc) rc = lp__gr_sc_object(sc, &o, rule);
    }
    lp__gr_dfa_unref(&names_dfa);
    free(vr);
    free(req);
    GR_FREE(pdfa);
    GR_FREE(prule);
    GR_FREE(dkey);
    GR_FREE(dset);
    GR_FREE(parts);
    GR_FREE(names);
    GR_FREE(lens);
    return rc;
}

static int emit_array(sc_t *sc, merged_t *m, uint32_t *rule)
{
    *rule = GR_NONE;
    if (m->unique && (m->max_items == GR_NONE || m->max_items > 1))
        return lp__gr_sc_unsupported("uniqueItems", "not supported for arrays of more than one item");
    uint32_t L = 0;
    for (uint32_t s = 0; s < m->arr.n; s++)
        if (m->arr.v[s].prefix && m->arr.v[s].prefix->n > L) L = (uint32_t)m->arr.v[s].prefix->n;
    if (m->max_items != GR_NONE && L > m->max_items) L = m->max_items;
    uint32_t *pr = calloc(L ? L : 1, sizeof(uint32_t));
    if (!pr) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    sc_refv_t parts = {0};
    int rc = 0;
    for (uint32_t k = 0; k < L && !rc; k++) {
        parts.n = 0;
        for (uint32_t s = 0; s < m->arr.n && !rc; s++) {
            const arrsrc_t *a = &m->arr.v[s];
            if (a->prefix && k < a->prefix->n) {
                rc = lp__gr_sc_push(&parts, &a->prefix->u.items[k], 0);
                if (!rc && a->rest && a->rest_all) rc = lp__gr_sc_push(&parts, a->rest, 0);
            } else if (a->rest) {
                rc = lp__gr_sc_push(&parts, a->rest, 0);
            }
        }
        if (!rc) rc = lp__gr_sc_conj(sc, parts.v, parts.n, &pr[k]);
    }
    uint32_t rest = GR_NONE;
    if (!rc) {
        parts.n = 0;
        for (uint32_t s = 0; s < m->arr.n && !rc; s++)
            if (m->arr.v[s].rest) rc = lp__gr_sc_push(&parts, m->arr.v[s].rest, 0);
        if (!rc) rc = lp__gr_sc_conj(sc, parts.v, parts.n, &rest);
    }
    if (!rc) {
        sc_arrspec_t a = {L, pr, rest, m->min_items, m->max_items};
        rc = lp__gr_sc_array(sc, &a, rule);
    }
    free(pr);
    GR_FREE(parts);
    return rc;
}

int lp__gr_sc_merge_emit(sc_t *sc, const sc_ref_t *items, uint32_t n, uint32_t *rule)
{
    merged_t m = {0};
    m.types = T_ALL;
    m.max_len = m.max_items = m.max_props = GR_NONE;
    int rc = 0;
    for (uint32_t i = 0; i < n && !rc; i++) rc = merge_one(sc, &m, &items[i]);
    if (!rc && m.unsup && (m.types & m.unsup_types)) {
        char kw[40];
        snprintf(kw, sizeof(kw), "%.*s", (int)m.unsup->key_len, m.unsup->key);
        rc = lp__gr_sc_unsupported(kw, "not supported");
    }
    lp__gr_u32v_t rules = {0};
    gr_rev_t scalars = {0};
    gr_dfa_t *minus = NULL;
    *rule = GR_NONE;
    gr_json_t *j = &sc->J;
    if (!rc && m.notvals.n) rc = notvals_dfa(sc, &m, m.types, &minus);
    /* the subtraction of excluded numbers sees plain spellings only: no
     * exponents then */
    if (!rc && minus && has_num_notvals(&m)) m.num.no_exp = true;
    if (!rc && (m.types & T_NULL)) rc = GR_PUSH(scalars, lp__gr_json_lit(j, "null")) ? LP_ERR(ENOMEM) : 0;
    if (!rc && (m.types & T_BOOL)) {
        rc = GR_PUSH(scalars, lp__gr_json_lit(j, "true")) ? LP_ERR(ENOMEM) : 0;
        if (!rc) rc = GR_PUSH(scalars, lp__gr_json_lit(j, "false")) ? LP_ERR(ENOMEM) : 0;
    }
    if (!rc && (m.types & (T_INT | T_NUM))) {
        m.num.integer = !(m.types & T_NUM);
        /* fractional multipleOf: only where integers are wanted and every
         * integer is a multiple (1/2^k) */
        for (uint32_t i = 0; i < m.num.mult.n && !rc; i++) {
            sc_dec_t *d = &m.num.mult.v[i];
            if (lp__gr_dec_is_int(d)) continue;
            sc_dec_t one = {false, "1", 1, 0};
            if (m.num.integer && lp__gr_dec_multiple(&one, d) == 1) {
                /* drop it: every integer is a multiple */
                d->nd = 1, d->dig = "1", d->exp = 0;
                continue;
            }
            rc = lp__gr_sc_unsupported("multipleOf", "a fractional divisor on non-integers");
        }
        gr_re_t *nr = NULL;
        if (!rc) rc = lp__gr_sc_number_re(sc, &m.num, &nr);
        if (!rc && nr && !(m.types & T_INT)) {
            /* numbers that are not integers: a non-zero digit after the
             * point, no exponent (1.5e1 is 15) */
            gr_rebuf_t *rb = &j->rb;
            const char *nonint = "-?(0|[1-9][0-9]*)\\.[0-9]*[1-9][0-9]*";
            if (!rc && !m.num.has_lo && !m.num.has_hi) rc = lp__gr_sc_number_budget(sc, &nr);
            gr_re_t *ni;
            gr_dfa_t *a = NULL, *b = NULL, *x = NULL;
            rc = lp__gr_re_parse(rb, nonint, strlen(nonint), &ni);
            if (!rc) rc = lp__gr_dfa_from_re(ni, GR_ENC_UTF8, 1000, &a);
            if (!rc) rc = lp__gr_dfa_from_re(nr, GR_ENC_UTF8, j->max_dfa, &b);
            if (!rc) rc = lp__gr_dfa_intersect(a, b, j->max_dfa, &x);
            lp__gr_dfa_unref(&a);
            lp__gr_dfa_unref(&b);
            if (!rc && GR_PUSH(j->held, x)) {
                lp__gr_dfa_unref(&x);
                rc = LP_ERR(ENOMEM);
            }
            nr = rc ? NULL : lp__gr_re_dfa(rb, x);
        }
        if (!rc && nr) {
            rc = GR_PUSH(scalars, nr) ? LP_ERR(ENOMEM) : 0;
        }
    }
    if (!rc && (m.types & T_STR)) rc = emit_string(sc, &m, minus, &rules, &scalars);
    if (!rc && scalars.n) {
        gr_re_t *alt = lp__gr_re_alt(&j->rb, scalars.v, scalars.n);
        if (!alt) rc = lp_error_set(LP_ERR(E2BIG), "expression too large");
        gr_dfa_t *d = NULL;
        if (!rc) rc = lp__gr_dfa_from_re(alt, GR_ENC_JSON, j->max_dfa, &d);
        if (!rc && minus) {
            gr_dfa_t *x;
            rc = dfa_minus(d, minus, &x);
            lp__gr_dfa_unref(&d);
            d = x;
        }
        if (!rc && d->n_states) {
            int64_t id = lp__gr_json_lex_dfa(j, d, "value");
            if (id < 0) rc = (int)id;
            else rc = add_rule(&rules, (uint32_t)id);
        } else {
            lp__gr_dfa_unref(&d);
        }
    }
    if (!rc && (m.types & T_ARR)) {
        uint32_t r;
        if (!(rc = emit_array(sc, &m, &r))) rc = add_rule(&rules, r);
    }
    if (!rc && (m.types & T_OBJ)) {
        uint32_t r;
        if (!(rc = emit_object(sc, &m, &r))) rc = add_rule(&rules, r);
    }
    if (rc == LP_ERR(ENOMEM)) lp_error_set(rc, "out of memory");
    if (!rc) {
        if (rules.n == 1) *rule = rules.v[0];
        else if (rules.n > 1) {
            int64_t id = lp__gr_json_choice(j, rules.v, rules.n, "types");
            if (id < 0) rc = (int)id;
            else *rule = (uint32_t)id;
        }
    }
    lp__gr_dfa_unref(&minus);
    GR_FREE(rules);
    GR_FREE(scalars);
    merged_free(&m);
    return rc;
}

/* a minus b: accepted by a and not by b (a's tags and counts) */
static int dfa_minus(gr_dfa_t *a, const gr_dfa_t *b, gr_dfa_t **out)
{
    /* complement b over a's alphabet: b with a dead state made real, finals
     * flipped; then intersect */
    uint32_t n = b->n_states + 1, K = b->n_cls;
    gr_dfa_t *c = calloc(1, sizeof(*c));
    if (!c) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    c->refs = 1;
    c->n_states = n;
    c->n_cls = K;
    memcpy(c->cls, b->cls, 256);
    c->next = malloc((size_t)n * K * sizeof(int32_t));
    c->tag = malloc(n * sizeof(int32_t));
    c->sink = calloc(n, 1);
    if (!c->next || !c->tag || !c->sink) {
        lp__gr_dfa_unref(&c);
        return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    }
    uint32_t dead = n - 1;
    for (uint32_t q = 0; q < n; q++) {
        bool fin = q < b->n_states && b->tag[q] >= 0;
        c->tag[q] = fin ? -1 : 0;
        for (uint32_t k = 0; k < K; k++) {
            int32_t t = q < b->n_states ? b->next[(size_t)q * K + k] : -1;
            c->next[(size_t)q * K + k] = t >= 0 ? t : (int32_t)dead;
        }
    }
    if (!b->n_states) c->next[0] = 0; /* b empty: complement is everything */
    int rc = lp__gr_dfa_intersect(a, c, 50000, out);
    lp__gr_dfa_unref(&c);
    return rc;
}
