/* gr-schema-neg.c - "not" in JSON Schema: a negated schema rewritten as a
 * positive synthetic one (negated type, enum, required, properties,
 * pattern, format, bounds, lengths, counts; De Morgan through anyOf, allOf,
 * not, if), and the disjointness test that lets oneOf be read as anyOf.
 * Synthetic schemas live in the compiler's arena and use internal keywords
 * (K_NOT* in gr-schema.h); a negation that refers to itself goes through an
 * internal "$ref". */
#include "gr-schema.h"

#include "error.h"

#include <stdio.h>

typedef GR_VEC(lp_json_t *) jsonv_t;

/* ---- synthetic schemas ------------------------------------------------------------------- */

static lp_json_t *mk(sc_t *sc, enum lp_json_type t, size_t n)
{
    lp_json_t *v = lp__gr_zalloc(&sc->arena, sizeof(*v));
    if (!v) return NULL;
    v->type = t;
    v->n = n;
    if (n && (t == LP_JSON_OBJECT || t == LP_JSON_ARRAY)) {
        v->u.items = lp__gr_zalloc(&sc->arena, n * sizeof(lp_json_t));
        if (!v->u.items) return NULL;
    }
    return v;
}

static void set_member(lp_json_t *obj, size_t i, const char *key, const lp_json_t *val)
{
    obj->u.items[i] = *val;
    obj->u.items[i].key = key;
    obj->u.items[i].key_len = strlen(key);
}

lp_json_t *lp__gr_sc_mk_bool(sc_t *sc, bool b)
{
    lp_json_t *v = mk(sc, LP_JSON_BOOL, 0);
    if (v) v->u.b = b;
    return v;
}

lp_json_t *lp__gr_sc_mk_str(sc_t *sc, const char *s, size_t n)
{
    lp_json_t *v = mk(sc, LP_JSON_STRING, n);
    if (v) v->u.str = s;
    return v;
}

/* {k1: v1, k2: v2} (v2 may be NULL) */
lp_json_t *lp__gr_sc_mk_obj2(sc_t *sc, const char *k1, const lp_json_t *v1, const char *k2, const lp_json_t *v2)
{
    if (!v1 || (k2 && !v2)) return NULL;
    lp_json_t *o = mk(sc, LP_JSON_OBJECT, k2 ? 2 : 1);
    if (!o) return NULL;
    set_member(o, 0, k1, v1);
    if (k2) set_member(o, 1, k2, v2);
    return o;
}

lp_json_t *lp__gr_sc_mk_arr(sc_t *sc, lp_json_t *const *v, size_t n)
{
    lp_json_t *a = mk(sc, LP_JSON_ARRAY, n);
    if (!a) return NULL;
    for (size_t i = 0; i < n; i++) {
        if (!v[i]) return NULL;
        a->u.items[i] = *v[i];
        a->u.items[i].key = NULL;
        a->u.items[i].key_len = 0;
    }
    return a;
}

#define mk_bool lp__gr_sc_mk_bool
#define mk_str lp__gr_sc_mk_str
#define mk_obj2 lp__gr_sc_mk_obj2
#define mk_arr lp__gr_sc_mk_arr

/* {"type": t, k: v} */
static lp_json_t *mk_typed(sc_t *sc, const char *t, const char *k, const lp_json_t *v)
{
    return mk_obj2(sc, "type", mk_str(sc, t, strlen(t)), k, v);
}

/* ---- negation: a synthetic schema for "not S" --------------------------------------------------- */



static int num_bound_neg(sc_t *sc, const lp_json_t *s, const lp_json_t *k, jsonv_t *parts)
{
    /* not (x >= m) is: a number with x < m; draft 4 booleans read with it */
    bool mx = !strcmp(k->key, "maximum") || !strcmp(k->key, "exclusiveMaximum");
    bool excl = !strncmp(k->key, "exclusive", 9);
    if (excl && k->type == LP_JSON_BOOL) return 0; /* read with minimum/maximum */
    if (k->type != LP_JSON_NUMBER) return lp_error_set(LP_ERR(EINVAL), "schema: \"%s\" must be a number", k->key);
    if (!excl) {
        const lp_json_t *e = lp__gr_sc_kw(s, mx ? "exclusiveMaximum" : "exclusiveMinimum");
        if (e && e->type == LP_JSON_BOOL && e->u.b) excl = true;
    }
    /* x <= m negated: x > m; x < m negated: x >= m */
    const char *nk = mx ? (excl ? "minimum" : "exclusiveMinimum") : (excl ? "maximum" : "exclusiveMaximum");
    lp_json_t *p = mk_typed(sc, "number", nk, k);
    if (!p || GR_PUSH(*parts, p)) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    return 0;
}

static int count_neg(sc_t *sc, const lp_json_t *k, const char *type, const char *other, bool is_min,
                     jsonv_t *parts)
{
    int64_t lim;
    if (lp_json_int(k, 0, INT64_MAX, &lim)) return lp_error_set(LP_ERR(EINVAL), "schema: \"%s\" must be a count", k->key);
    if (is_min && lim == 0) return 0; /* always holds: its negation adds nothing */
    char buf[32];
    int len = snprintf(buf, sizeof(buf), "%lld", (long long)(is_min ? lim - 1 : lim + 1));
    char *t = lp__gr_strndup(&sc->arena, buf, (size_t)len);
    lp_json_t *num = mk(sc, LP_JSON_NUMBER, (size_t)len);
    if (!t || !num) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    num->num_text = t;
    num->u.num = (double)(is_min ? lim - 1 : lim + 1);
    lp_json_t *p = mk_typed(sc, type, other, num);
    if (!p || GR_PUSH(*parts, p)) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    return 0;
}

static int neg_keywords(sc_t *sc, const lp_json_t *s, jsonv_t *parts, int depth)
{
    int rc = 0;
    const lp_json_t *ref = lp__gr_sc_kw(s, "$ref");
    if (ref) {
        const lp_json_t *t, *nt;
        if ((rc = lp__gr_sc_resolve(sc, ref, &t)) || (rc = lp__gr_sc_neg(sc, t, &nt, depth + 1))) return rc;
        if (GR_PUSH(*parts, (lp_json_t *)nt)) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
        if (sc->draft && sc->draft <= 7) return 0;
    }
    for (size_t i = 0; i < s->n && !rc; i++) {
        const lp_json_t *k = &s->u.items[i];
        const char *key = k->key;
        lp_json_t *p = NULL;
#define IS(x) (k->key_len == strlen(x) && !memcmp(key, x, k->key_len))
        if (IS("type")) {
            p = mk_obj2(sc, K_NOTTYPE, k, NULL, NULL);
        } else if (IS(K_NOTTYPE)) {
            p = mk_obj2(sc, "type", k, NULL, NULL);
        } else if (IS("enum")) {
            p = mk_obj2(sc, K_NOTENUM, k, NULL, NULL);
        } else if (IS("const")) {
            lp_json_t *one[1] = {(lp_json_t *)k};
            p = mk_obj2(sc, K_NOTENUM, mk_arr(sc, one, 1), NULL, NULL);
        } else if (IS(K_NOTENUM)) {
            p = mk_obj2(sc, "enum", k, NULL, NULL);
        } else if (IS("required")) {
            if (k->type != LP_JSON_ARRAY) continue;
            for (size_t j = 0; j < k->n && !rc; j++) {
                const lp_json_t *nm = &k->u.items[j];
                if (nm->type != LP_JSON_STRING) continue;
                char *key2 = lp__gr_strndup(&sc->arena, nm->u.str, nm->n);
                lp_json_t *f = mk_bool(sc, false);
                lp_json_t *props = key2 && f ? mk_obj2(sc, key2, f, NULL, NULL) : NULL;
                if (props) props->u.items[0].key_len = nm->n;
                lp_json_t *q = mk_typed(sc, "object", "properties", props);
                if (!q || GR_PUSH(*parts, q)) rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
            }
            continue;
        } else if (IS("properties")) {
            if (k->type != LP_JSON_OBJECT) continue;
            for (size_t j = 0; j < k->n && !rc; j++) {
                const lp_json_t *ps = &k->u.items[j], *np;
                if ((rc = lp__gr_sc_neg(sc, ps, &np, depth + 1))) break;
                lp_json_t *nm = mk_str(sc, ps->key, ps->key_len);
                lp_json_t *one[1] = {nm};
                lp_json_t *props = mk_obj2(sc, "x", np, NULL, NULL);
                if (props) {
                    props->u.items[0].key = ps->key;
                    props->u.items[0].key_len = ps->key_len;
                }
                lp_json_t *q = mk_obj2(sc, "required", mk_arr(sc, one, 1), "properties", props);
                lp_json_t *q2 = q ? mk_obj2(sc, "allOf", mk_arr(sc, &q, 1), "type", mk_str(sc, "object", 6)) : NULL;
                if (!q2 || GR_PUSH(*parts, q2)) rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
            }
            continue;
        } else if (IS("minLength") || IS("maxLength")) {
            rc = count_neg(sc, k, "string", IS("minLength") ? "maxLength" : "minLength", IS("minLength"), parts);
            continue;
        } else if (IS("minItems") || IS("maxItems")) {
            rc = count_neg(sc, k, "array", IS("minItems") ? "maxItems" : "minItems", IS("minItems"), parts);
            continue;
        } else if (IS("minProperties") || IS("maxProperties")) {
            rc = count_neg(sc, k, "object", IS("minProperties") ? "maxProperties" : "minProperties",
                           IS("minProperties"), parts);
            continue;
        } else if (IS("minimum") || IS("maximum") || IS("exclusiveMinimum") || IS("exclusiveMaximum")) {
            rc = num_bound_neg(sc, s, k, parts);
            continue;
        } else if (IS("pattern")) {
            p = mk_typed(sc, "string", K_NOTPATTERN, k);
        } else if (IS(K_NOTPATTERN)) {
            p = mk_typed(sc, "string", "pattern", k);
        } else if (IS("format")) {
            if (k->type != LP_JSON_STRING) continue;
            gr_re_t *dummy;
            uint32_t ml;
            int f = lp__gr_sc_format(sc, k->u.str, k->n, &dummy, &ml);
            if (f == 1) continue; /* not asserted: no constraint */
            if (f) return f;
            p = mk_typed(sc, "string", K_NOTFORMAT, k);
        } else if (IS("anyOf")) {
            if (k->type != LP_JSON_ARRAY) return lp_error_set(LP_ERR(EINVAL), "schema: \"anyOf\" must be an array");
            lp_json_t **ns = calloc(k->n ? k->n : 1, sizeof(*ns));
            if (!ns) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
            for (size_t j = 0; j < k->n && !rc; j++) rc = lp__gr_sc_neg(sc, &k->u.items[j], (const lp_json_t **)&ns[j], depth + 1);
            if (!rc) p = mk_obj2(sc, "allOf", mk_arr(sc, ns, k->n), NULL, NULL);
            free(ns);
            if (rc) return rc;
        } else if (IS("allOf")) {
            if (k->type != LP_JSON_ARRAY) return lp_error_set(LP_ERR(EINVAL), "schema: \"allOf\" must be an array");
            for (size_t j = 0; j < k->n && !rc; j++) {
                const lp_json_t *nj;
                if ((rc = lp__gr_sc_neg(sc, &k->u.items[j], &nj, depth + 1))) break;
                if (GR_PUSH(*parts, (lp_json_t *)nj)) rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
            }
            continue;
        } else if (IS("not")) {
            if (GR_PUSH(*parts, (lp_json_t *)k)) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
            continue;
        } else if (IS("if")) {
            /* not ((I and T) or (not I and E)) = (I and not T) or (not I and not E) */
            const lp_json_t *th = lp__gr_sc_kw(s, "then"), *el = lp__gr_sc_kw(s, "else");
            const lp_json_t *ni, *nt, *ne;
            if (!th && !el) continue;
            if ((rc = lp__gr_sc_neg(sc, k, &ni, depth + 1))) return rc;
            if (th) {
                if ((rc = lp__gr_sc_neg(sc, th, &nt, depth + 1))) return rc;
                lp_json_t *two[2] = {(lp_json_t *)k, (lp_json_t *)nt};
                lp_json_t *q = mk_obj2(sc, "allOf", mk_arr(sc, two, 2), NULL, NULL);
                if (!q || GR_PUSH(*parts, q)) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
            } else {
                /* no then: (I and not true) is nothing */
            }
            if (el) {
                if ((rc = lp__gr_sc_neg(sc, el, &ne, depth + 1))) return rc;
                lp_json_t *two[2] = {(lp_json_t *)ni, (lp_json_t *)ne};
                lp_json_t *q = mk_obj2(sc, "allOf", mk_arr(sc, two, 2), NULL, NULL);
                if (!q || GR_PUSH(*parts, q)) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
            }
            continue;
        } else if (IS("then") || IS("else") || IS("$ref") || IS("\x01x") || IS("exclusiveMinimum") || IS("exclusiveMaximum") ||
                   IS("$schema") || IS("$id") || IS("id") || IS("$defs") || IS("definitions") ||
                   IS("$comment") || IS("title") || IS("description") || IS("default") || IS("examples") ||
                   IS("readOnly") || IS("writeOnly") || IS("deprecated") || IS("$anchor") ||
                   (k->key_len && key[0] != '\x01' && !IS("multipleOf") && !IS("items") &&
                    !IS("prefixItems") && !IS("additionalItems") && !IS("additionalProperties") &&
                    !IS("patternProperties") && !IS("propertyNames") && !IS("uniqueItems") &&
                    !IS("contains") && !IS("dependencies") && !IS("dependentRequired") &&
                    !IS("dependentSchemas") && !IS("oneOf") && !IS("unevaluatedProperties") &&
                    !IS("unevaluatedItems") && !IS("minContains") && !IS("maxContains") &&
                    !IS("$dynamicRef") && !IS("$recursiveRef"))) {
            continue; /* annotations and unknown keywords: always true, nothing to negate */
        } else {
            char kw[64];
            snprintf(kw, sizeof(kw), "not %.*s", (int)(k->key_len > 40 ? 40 : k->key_len), key);
            return lp__gr_sc_unsupported(kw, "cannot negate it");
        }
#undef IS
        if (!p || GR_PUSH(*parts, p)) rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
    }
    return rc;
}

int lp__gr_sc_neg(sc_t *sc, const lp_json_t *s, const lp_json_t **out, int depth)
{
    if (depth > 60) return lp__gr_sc_unsupported("not", "nested too deep");
    if (s->type == LP_JSON_BOOL) {
        *out = mk_bool(sc, !s->u.b);
        return *out ? 0 : lp_error_set(LP_ERR(ENOMEM), "out of memory");
    }
    if (s->type != LP_JSON_OBJECT) return lp_error_set(LP_ERR(EINVAL), "schema: a schema must be an object or a boolean");
    for (uint32_t i = 0; i < sc->negs.n; i++) {
        sc_negmemo_t *m = &sc->negs.v[i];
        if (m->node != s) continue;
        if (m->neg) {
            *out = m->neg;
            return 0;
        }
        /* a negation of itself in progress: refer to it by index */
        if (m->ref == UINT32_MAX) {
            if (GR_PUSH(sc->syn, NULL)) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
            m->ref = sc->syn.n - 1;
        }
        char buf[24];
        int len = snprintf(buf, sizeof(buf), "\x01%u", m->ref);
        char *t = lp__gr_strndup(&sc->arena, buf, (size_t)len);
        *out = t ? mk_obj2(sc, "$ref", mk_str(sc, t, (size_t)len), NULL, NULL) : NULL;
        return *out ? 0 : lp_error_set(LP_ERR(ENOMEM), "out of memory");
    }
    sc_negmemo_t nm = {s, NULL, UINT32_MAX};
    if (GR_PUSH(sc->negs, nm)) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    uint32_t me = sc->negs.n - 1;
    jsonv_t parts = {0};
    int rc = neg_keywords(sc, s, &parts, depth);
    lp_json_t *res = NULL;
    if (!rc) {
        if (!parts.n) res = mk_bool(sc, false);
        else if (parts.n == 1) res = parts.v[0];
        else res = mk_obj2(sc, "anyOf", mk_arr(sc, parts.v, parts.n), NULL, NULL);
        if (!res) rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
    }
    GR_FREE(parts);
    if (rc) return rc;
    sc->negs.v[me].neg = res;
    if (sc->negs.v[me].ref != UINT32_MAX) sc->syn.v[sc->negs.v[me].ref] = res;
    *out = res;
    return 0;
}

/* ---- disjointness (oneOf) --------------------------------------------------------------------------- */

int lp__gr_sc_type_mask(const lp_json_t *t)
{
    static const struct {
        const char *n;
        int m;
    } names[] = {{"null", T_NULL},  {"boolean", T_BOOL}, {"integer", T_INT}, {"number", T_INT | T_NUM},
                 {"string", T_STR}, {"array", T_ARR},    {"object", T_OBJ}};
    int m = 0;
    const lp_json_t *one = t;
    size_t n = 1;
    if (t->type == LP_JSON_ARRAY) {
        one = t->u.items;
        n = t->n;
    } else if (t->type != LP_JSON_STRING) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (one[i].type != LP_JSON_STRING) return -1;
        bool found = false;
        for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
            if (strlen(names[k].n) == one[i].n && !memcmp(names[k].n, one[i].u.str, one[i].n)) {
                m |= names[k].m;
                found = true;
            }
        if (!found) return -1;
    }
    return m;
}

/* The types a schema may take, following $ref and allOf, and anyOf/oneOf
 * as unions (over-approximation: T_ALL when unsure). */
static int types_of(sc_t *sc, const lp_json_t *s, int depth)
{
    if (depth > 20) return T_ALL;
    if (s->type == LP_JSON_BOOL) return s->u.b ? T_ALL : 0;
    if (s->type != LP_JSON_OBJECT) return T_ALL;
    int m = T_ALL;
    const lp_json_t *k;
    if ((k = lp_json_get(s, "type"))) {
        int t = lp__gr_sc_type_mask(k);
        if (t >= 0) m &= t;
    }
    if ((k = lp_json_get(s, "const")) || ((k = lp_json_get(s, "enum")) && k->type == LP_JSON_ARRAY)) {
        int t = 0;
        const lp_json_t *vs = k->type == LP_JSON_ARRAY && lp_json_get(s, "enum") == k ? k->u.items : k;
        size_t n = k->type == LP_JSON_ARRAY && lp_json_get(s, "enum") == k ? k->n : 1;
        for (size_t i = 0; i < n; i++) {
            switch (vs[i].type) {
            case LP_JSON_NULL: t |= T_NULL; break;
            case LP_JSON_BOOL: t |= T_BOOL; break;
            case LP_JSON_NUMBER: t |= T_INT | T_NUM; break;
            case LP_JSON_STRING: t |= T_STR; break;
            case LP_JSON_ARRAY: t |= T_ARR; break;
            case LP_JSON_OBJECT: t |= T_OBJ; break;
            }
        }
        m &= t;
    }
    if ((k = lp_json_get(s, "$ref"))) {
        const lp_json_t *t;
        if (!lp__gr_sc_resolve(sc, k, &t)) m &= types_of(sc, t, depth + 1);
        else lp_error_clear();
    }
    if ((k = lp_json_get(s, "allOf")) && k->type == LP_JSON_ARRAY)
        for (size_t i = 0; i < k->n; i++) m &= types_of(sc, &k->u.items[i], depth + 1);
    const char *alts[2] = {"anyOf", "oneOf"};
    for (int a = 0; a < 2; a++)
        if ((k = lp_json_get(s, alts[a])) && k->type == LP_JSON_ARRAY) {
            int u = 0;
            for (size_t i = 0; i < k->n; i++) u |= types_of(sc, &k->u.items[i], depth + 1);
            m &= u;
        }
    return m;
}

/* The schema of property name when s requires it, or NULL. */
static const lp_json_t *req_prop(sc_t *sc, const lp_json_t *s, const char *name, size_t n);

static const lp_json_t *deref(sc_t *sc, const lp_json_t *s)
{
    for (int i = 0; i < 20 && s->type == LP_JSON_OBJECT; i++) {
        const lp_json_t *r = lp_json_get(s, "$ref");
        if (!r) break;
        const lp_json_t *t;
        if (lp__gr_sc_resolve(sc, r, &t)) {
            lp_error_clear();
            break;
        }
        s = t;
    }
    return s;
}

static const lp_json_t *req_prop(sc_t *sc, const lp_json_t *s, const char *name, size_t n)
{
    if (s->type != LP_JSON_OBJECT) return NULL;
    const lp_json_t *req = lp_json_get(s, "required"), *props = lp_json_get(s, "properties");
    bool required = false;
    if (req && req->type == LP_JSON_ARRAY)
        for (size_t i = 0; i < req->n; i++)
            if (req->u.items[i].type == LP_JSON_STRING && req->u.items[i].n == n && !memcmp(req->u.items[i].u.str, name, n))
                required = true;
    if (!required || !props || props->type != LP_JSON_OBJECT) return NULL;
    for (size_t i = 0; i < props->n; i++) {
        const lp_json_t *p = &props->u.items[i];
        if (p->key_len == n && !memcmp(p->key, name, n)) return deref(sc, p);
    }
    return NULL;
}

static bool disjoint_d(sc_t *sc, const lp_json_t *a, const lp_json_t *b, int depth);

/* A property both require, with values that cannot agree: no object
 * satisfies both a and b. */
static bool discriminated(sc_t *sc, const lp_json_t *a, const lp_json_t *b, int depth)
{
    const lp_json_t *req = lp_json_get(a, "required");
    if (!req || req->type != LP_JSON_ARRAY) return false;
    for (size_t i = 0; i < req->n; i++) {
        const lp_json_t *nm = &req->u.items[i];
        if (nm->type != LP_JSON_STRING) continue;
        const lp_json_t *pa = req_prop(sc, a, nm->u.str, nm->n), *pb = req_prop(sc, b, nm->u.str, nm->n);
        if (pa && pb && disjoint_d(sc, pa, pb, depth + 1)) return true;
    }
    return false;
}

/* Every value of s satisfies one of its anyOf/oneOf branches and all of its
 * allOf members: s is disjoint from b when each branch, or one member, is. */
static bool parts_disjoint(sc_t *sc, const lp_json_t *s, const lp_json_t *b, int depth)
{
    if (s->type != LP_JSON_OBJECT) return false;
    static const char *alts[] = {"anyOf", "oneOf"};
    for (int i = 0; i < 2; i++) {
        const lp_json_t *k = lp_json_get(s, alts[i]);
        if (!k || k->type != LP_JSON_ARRAY) continue;
        bool all = true;
        for (size_t j = 0; j < k->n && all; j++) all = disjoint_d(sc, &k->u.items[j], b, depth + 1);
        if (all) return true;
    }
    const lp_json_t *k = lp_json_get(s, "allOf");
    if (k && k->type == LP_JSON_ARRAY)
        for (size_t j = 0; j < k->n; j++)
            if (disjoint_d(sc, &k->u.items[j], b, depth + 1)) return true;
    return false;
}

/* Provably no value satisfies both a and b. */
static bool disjoint_d(sc_t *sc, const lp_json_t *a, const lp_json_t *b, int depth)
{
    if (depth > 8) return false;
    int ta = types_of(sc, a, 0), tb = types_of(sc, b, 0);
    if (!(ta & tb)) return true;
    a = deref(sc, a);
    b = deref(sc, b);
    if ((ta & tb) == T_OBJ && a->type == LP_JSON_OBJECT && b->type == LP_JSON_OBJECT &&
        (discriminated(sc, a, b, depth) || discriminated(sc, b, a, depth)))
        return true;
    if (parts_disjoint(sc, a, b, depth) || parts_disjoint(sc, b, a, depth)) return true;
    /* two value lists */
    const lp_json_t *ea = lp__gr_sc_kw(a, "enum"), *eb = lp__gr_sc_kw(b, "enum");
    const lp_json_t *ca = lp__gr_sc_kw(a, "const"), *cb = lp__gr_sc_kw(b, "const");
    const lp_json_t *va = ca ? ca : ea && ea->type == LP_JSON_ARRAY ? ea->u.items : NULL;
    const lp_json_t *vb = cb ? cb : eb && eb->type == LP_JSON_ARRAY ? eb->u.items : NULL;
    size_t na = ca ? 1 : ea ? ea->n : 0, nb = cb ? 1 : eb ? eb->n : 0;
    if (va && vb) {
        for (size_t x = 0; x < na; x++)
            for (size_t y = 0; y < nb; y++)
                if (lp__gr_sc_json_eq(sc, &va[x], &vb[y])) return false;
        return true;
    }
    return false;
}

bool lp__gr_sc_disjoint(sc_t *sc, const lp_json_t *a, const lp_json_t *b) { return disjoint_d(sc, a, b, 0); }


/* ---- oneOf, type by type ------------------------------------------------------------------ */

static bool kw_is(const lp_json_t *k, const char *x) { return k->key_len == strlen(x) && !memcmp(k->key, x, k->key_len); }

/* The types s accepts in full (every value of them), following $ref and
 * allOf; 0 where unsure. */
static int full_types(sc_t *sc, const lp_json_t *s, int depth)
{
    if (depth > 20) return 0;
    if (s->type == LP_JSON_BOOL) return s->u.b ? T_ALL : 0;
    if (s->type != LP_JSON_OBJECT) return 0;
    int acc = T_ALL;
    for (size_t i = 0; i < s->n && acc; i++) {
        const lp_json_t *k = &s->u.items[i];
        if (kw_is(k, "type")) {
            int t = lp__gr_sc_type_mask(k);
            acc &= t < 0 ? 0 : t;
        } else if (kw_is(k, "enum") || kw_is(k, "const") || kw_is(k, "anyOf") || kw_is(k, "oneOf") || kw_is(k, "not") ||
                   kw_is(k, "if") || kw_is(k, K_NOTTYPE) || kw_is(k, K_NOTENUM)) {
            return 0;
        } else if (kw_is(k, "minLength") || kw_is(k, "maxLength") || kw_is(k, "pattern") || kw_is(k, "format") ||
                   kw_is(k, K_NOTPATTERN) || kw_is(k, K_NOTFORMAT)) {
            acc &= ~T_STR;
        } else if (kw_is(k, "minimum") || kw_is(k, "maximum") || kw_is(k, "exclusiveMinimum") ||
                   kw_is(k, "exclusiveMaximum") || kw_is(k, "multipleOf")) {
            acc &= ~(T_INT | T_NUM);
        } else if (kw_is(k, "items") || kw_is(k, "prefixItems") || kw_is(k, "additionalItems") || kw_is(k, "minItems") ||
                   kw_is(k, "maxItems") || kw_is(k, "uniqueItems") || kw_is(k, "contains") || kw_is(k, "unevaluatedItems")) {
            acc &= ~T_ARR;
        } else if (kw_is(k, "properties") || kw_is(k, "required") || kw_is(k, "additionalProperties") ||
                   kw_is(k, "patternProperties") || kw_is(k, "propertyNames") || kw_is(k, "minProperties") ||
                   kw_is(k, "maxProperties") || kw_is(k, "dependencies") || kw_is(k, "dependentRequired") ||
                   kw_is(k, "dependentSchemas") || kw_is(k, "unevaluatedProperties")) {
            acc &= ~T_OBJ;
        } else if (kw_is(k, "$ref")) {
            const lp_json_t *t;
            if (lp__gr_sc_resolve(sc, k, &t)) {
                lp_error_clear();
                return 0;
            }
            acc &= full_types(sc, t, depth + 1);
        } else if (kw_is(k, "allOf") && k->type == LP_JSON_ARRAY) {
            for (size_t j = 0; j < k->n; j++) acc &= full_types(sc, &k->u.items[j], depth + 1);
        }
    }
    return acc;
}

/* b cannot have property p: false in its properties, or not listed where
 * additionalProperties is false and no pattern matches. */
static bool forbids(sc_t *sc, const lp_json_t *b, const char *p, size_t n)
{
    const lp_json_t *props = lp__gr_sc_kw(b, "properties"), *ap = lp__gr_sc_kw(b, "additionalProperties");
    const lp_json_t *pp = lp__gr_sc_kw(b, "patternProperties");
    if (props && props->type == LP_JSON_OBJECT)
        for (size_t i = 0; i < props->n; i++)
            if (props->u.items[i].key_len == n && !memcmp(props->u.items[i].key, p, n))
                return props->u.items[i].type == LP_JSON_BOOL && !props->u.items[i].u.b;
    if (!ap || ap->type != LP_JSON_BOOL || ap->u.b) return false;
    if (pp && pp->type == LP_JSON_OBJECT)
        for (size_t i = 0; i < pp->n; i++) {
            const sc_pat_t *pat;
            if (lp__gr_sc_pattern(sc, pp->u.items[i].key, pp->u.items[i].key_len, &pat)) {
                lp_error_clear();
                return false;
            }
            if (lp__gr_sc_pattern_match(pat, p, n)) return false;
        }
    return true;
}

/* No object satisfies both: a discriminator, or a property one requires
 * and the other forbids. */
static bool objects_disjoint(sc_t *sc, const lp_json_t *a, const lp_json_t *b)
{
    a = deref(sc, a);
    b = deref(sc, b);
    if (a->type != LP_JSON_OBJECT || b->type != LP_JSON_OBJECT) return false;
    if (discriminated(sc, a, b, 0) || discriminated(sc, b, a, 0)) return true;
    for (int side = 0; side < 2; side++) {
        const lp_json_t *x = side ? b : a, *y = side ? a : b;
        const lp_json_t *req = lp_json_get(x, "required");
        if (!req || req->type != LP_JSON_ARRAY) continue;
        for (size_t i = 0; i < req->n; i++) {
            const lp_json_t *nm = &req->u.items[i];
            if (nm->type == LP_JSON_STRING && forbids(sc, y, nm->u.str, nm->n)) return true;
        }
    }
    return false;
}

int lp__gr_sc_oneof_types(sc_t *sc, const lp_json_t *alts, int *excluded)
{
    int ex = 0;
    for (size_t i = 0; i < alts->n; i++)
        for (size_t j = i + 1; j < alts->n; j++) {
            const lp_json_t *a = &alts->u.items[i], *b = &alts->u.items[j];
            if (lp__gr_sc_disjoint(sc, a, b)) continue;
            int common = types_of(sc, a, 0) & types_of(sc, b, 0);
            int both_full = full_types(sc, a, 0) & full_types(sc, b, 0);
            for (int t = 1; t <= T_OBJ; t <<= 1) {
                if (!(common & t)) continue;
                if (t == T_OBJ && objects_disjoint(sc, a, b)) continue;
                if (both_full & t) {
                    ex |= t;
                    continue;
                }
                return 0;
            }
        }
    /* a type name for each excluded bit: "number" covers both number bits */
    if ((ex & T_NUM) && !(ex & T_INT)) return 0;
    *excluded = ex;
    return 1;
}
