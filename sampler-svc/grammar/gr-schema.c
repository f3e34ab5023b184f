/* gr-schema.c - JSON Schema to grammar rules (see gr-schema.h for the
 * shape of the compiler).  Drafts: 4, 6, 7, 2019-09 and 2020-12.  A schema
 * without "$schema" is compiled so that what it accepts is valid under
 * both draft 7 and 2020-12 (MaskBench's reading); "$ref" siblings are
 * ignored only where $schema names draft 7 or earlier.
 *
 * Every keyword that constrains a value is either enforced exactly or
 * refused (LP_ERR(ENOTSUP), naming the keyword).  Annotations and unknown
 * keywords constrain nothing, as validators treat them. */
#include "gr-schema.h"

#include "error.h"

#include <stdio.h>

enum {
    T_NULL = 1,
    T_BOOL = 2,
    T_INT = 4,
    T_NUM = 8, /* numbers that are not integers */
    T_STR = 16,
    T_ARR = 32,
    T_OBJ = 64,
    T_ALL = 127,
};


const lp_json_t *lp__gr_sc_kw(const lp_json_t *s, const char *k)
{
    if (!s || s->type != LP_JSON_OBJECT) return NULL;
    return lp_json_get(s, k);
}

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

static lp_json_t *mk_bool(sc_t *sc, bool b)
{
    lp_json_t *v = mk(sc, LP_JSON_BOOL, 0);
    if (v) v->u.b = b;
    return v;
}

static lp_json_t *mk_str(sc_t *sc, const char *s, size_t n)
{
    lp_json_t *v = mk(sc, LP_JSON_STRING, n);
    if (v) v->u.str = s;
    return v;
}

/* {k1: v1, k2: v2} (v2 may be NULL) */
static lp_json_t *mk_obj2(sc_t *sc, const char *k1, const lp_json_t *v1, const char *k2, const lp_json_t *v2)
{
    if (!v1 || (k2 && !v2)) return NULL;
    lp_json_t *o = mk(sc, LP_JSON_OBJECT, k2 ? 2 : 1);
    if (!o) return NULL;
    set_member(o, 0, k1, v1);
    if (k2) set_member(o, 1, k2, v2);
    return o;
}

static lp_json_t *mk_arr(sc_t *sc, lp_json_t *const *v, size_t n)
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

/* {"type": t, k: v} */
static lp_json_t *mk_typed(sc_t *sc, const char *t, const char *k, const lp_json_t *v)
{
    return mk_obj2(sc, "type", mk_str(sc, t, strlen(t)), k, v);
}

/* ---- references ------------------------------------------------------------------------------ */

static int ptr_step(sc_t *sc, const lp_json_t *cur, const char *tok, size_t n, const lp_json_t **out)
{
    /* unescape ~1 ~0 and %XX */
    char *k = lp__gr_alloc(&sc->arena, n + 1);
    if (!k) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (tok[i] == '~' && i + 1 < n && (tok[i + 1] == '0' || tok[i + 1] == '1')) {
            k[m++] = tok[i + 1] == '0' ? '~' : '/';
            i++;
        } else if (tok[i] == '%' && i + 2 < n) {
            char h[3] = {tok[i + 1], tok[i + 2], 0};
            char *e;
            long v = strtol(h, &e, 16);
            if (*e) return lp_error_set(LP_ERR(EINVAL), "$ref: bad %%-escape");
            k[m++] = (char)v;
            i += 2;
        } else {
            k[m++] = tok[i];
        }
    }
    if (cur->type == LP_JSON_OBJECT) {
        for (size_t i = 0; i < cur->n; i++)
            if (cur->u.items[i].key_len == m && !memcmp(cur->u.items[i].key, k, m)) {
                *out = &cur->u.items[i];
                return 0;
            }
    } else if (cur->type == LP_JSON_ARRAY) {
        char *e;
        k[m] = 0;
        long idx = strtol(k, &e, 10);
        if (!*e && m && idx >= 0 && (size_t)idx < cur->n) {
            *out = &cur->u.items[idx];
            return 0;
        }
    }
    return lp_error_set(LP_ERR(EINVAL), "$ref: no such location (\"%.*s\")", (int)(m > 80 ? 80 : m), k);
}

/* A node with "$id"/"id" equal to id, or "$anchor" equal to anchor. */
static const lp_json_t *find_id(const lp_json_t *v, const char *id, size_t n, bool anchor, int depth)
{
    if (depth > 100) return NULL;
    if (v->type == LP_JSON_OBJECT) {
        const lp_json_t *x = anchor ? lp_json_get(v, "$anchor") : NULL;
        if (x && x->type == LP_JSON_STRING && x->n == n && !memcmp(x->u.str, id, n)) return v;
        const char *ks[2] = {"$id", "id"};
        for (int i = 0; i < 2; i++) {
            x = lp_json_get(v, ks[i]);
            if (!x || x->type != LP_JSON_STRING) continue;
            const char *s = x->u.str;
            size_t sn = x->n;
            if (anchor) {
                if (sn == n + 1 && s[0] == '#' && !memcmp(s + 1, id, n)) return v;
            } else {
                /* strip a trailing '#' */
                if (sn && s[sn - 1] == '#') sn--;
                if (sn == n && !memcmp(s, id, n)) return v;
                /* a relative reference naming the end of an absolute id */
                if (sn > n && s[sn - n - 1] == '/' && !memcmp(s + sn - n, id, n)) return v;
            }
        }
    }
    if (v->type == LP_JSON_OBJECT || v->type == LP_JSON_ARRAY)
        for (size_t i = 0; i < v->n; i++) {
            const lp_json_t *k = &v->u.items[i];
            if (v->type == LP_JSON_OBJECT && k->key_len && (k->key_len == 4 && !memcmp(k->key, "enum", 4))) continue;
            if (v->type == LP_JSON_OBJECT && (k->key_len == 5 && !memcmp(k->key, "const", 5))) continue;
            const lp_json_t *r = find_id(k, id, n, anchor, depth + 1);
            if (r) return r;
        }
    return NULL;
}

typedef struct {
    GR_VEC(const lp_json_t *) v; /* synthetic schemas referred to by K_SYNREF */
} synref_t;

static synref_t *synrefs(sc_t *sc);

int lp__gr_sc_resolve(sc_t *sc, const lp_json_t *ref, const lp_json_t **out)
{
    if (ref->type != LP_JSON_STRING) return lp_error_set(LP_ERR(EINVAL), "schema: \"$ref\" must be a string");
    const char *s = ref->u.str;
    size_t n = ref->n;
    if (n && s[0] == '\x01') { /* synthetic */
        size_t idx = (size_t)strtoul(s + 1, NULL, 10);
        synref_t *sr = synrefs(sc);
        if (!sr || idx >= sr->v.n || !sr->v.v[idx]) return lp_error_set(LP_ERR(EINVAL), "schema: internal reference");
        *out = sr->v.v[idx];
        return 0;
    }
    const char *hash = memchr(s, '#', n);
    size_t base_n = hash ? (size_t)(hash - s) : n;
    const lp_json_t *cur = sc->root;
    if (base_n) {
        const lp_json_t *rid = lp__gr_sc_kw(sc->root, "$id");
        if (!rid) rid = lp__gr_sc_kw(sc->root, "id");
        size_t rn = rid && rid->type == LP_JSON_STRING ? rid->n : 0;
        if (rn && rid->u.str[rn - 1] == '#') rn--;
        if (rid && rn == base_n && !memcmp(rid->u.str, s, base_n)) {
            cur = sc->root;
        } else {
            cur = find_id(sc->root, s, base_n, false, 0);
            if (!cur)
                return lp__gr_sc_unsupported("$ref", "a reference to another document");
        }
    }
    if (!hash) {
        *out = cur;
        return 0;
    }
    const char *f = hash + 1;
    size_t fn = n - base_n - 1;
    if (fn && f[0] != '/') { /* an anchor */
        const lp_json_t *a = find_id(sc->root, f, fn, true, 0);
        if (!a) return lp_error_set(LP_ERR(EINVAL), "$ref: no anchor \"%.*s\"", (int)(fn > 80 ? 80 : fn), f);
        *out = a;
        return 0;
    }
    size_t i = 0;
    while (i < fn) {
        size_t j = i + 1;
        while (j < fn && f[j] != '/') j++;
        int rc = ptr_step(sc, cur, f + i + 1, j - i - 1, &cur);
        if (rc) return rc;
        i = j;
    }
    *out = cur;
    return 0;
}

/* ---- the compiler's state beyond gr-schema.h ------------------------------------------------- */

typedef struct {
    const lp_json_t *node;
    const lp_json_t *neg; /* NULL while being built */
    uint32_t ref;         /* synthetic ref index, UINT32_MAX none */
} negmemo_t;

typedef struct {
    sc_t sc;
    synref_t syn;
    GR_VEC(negmemo_t) negs;
} scx_t;

static synref_t *synrefs(sc_t *sc) { return &((scx_t *)sc)->syn; }

/* ---- negation: a synthetic schema for "not S" --------------------------------------------------- */

typedef GR_VEC(lp_json_t *) jsonv_t;

static int neg(sc_t *sc, const lp_json_t *s, const lp_json_t **out, int depth);

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
        if ((rc = lp__gr_sc_resolve(sc, ref, &t)) || (rc = neg(sc, t, &nt, depth + 1))) return rc;
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
                if ((rc = neg(sc, ps, &np, depth + 1))) break;
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
            for (size_t j = 0; j < k->n && !rc; j++) rc = neg(sc, &k->u.items[j], (const lp_json_t **)&ns[j], depth + 1);
            if (!rc) p = mk_obj2(sc, "allOf", mk_arr(sc, ns, k->n), NULL, NULL);
            free(ns);
            if (rc) return rc;
        } else if (IS("allOf")) {
            if (k->type != LP_JSON_ARRAY) return lp_error_set(LP_ERR(EINVAL), "schema: \"allOf\" must be an array");
            for (size_t j = 0; j < k->n && !rc; j++) {
                const lp_json_t *nj;
                if ((rc = neg(sc, &k->u.items[j], &nj, depth + 1))) break;
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
            if ((rc = neg(sc, k, &ni, depth + 1))) return rc;
            if (th) {
                if ((rc = neg(sc, th, &nt, depth + 1))) return rc;
                lp_json_t *two[2] = {(lp_json_t *)k, (lp_json_t *)nt};
                lp_json_t *q = mk_obj2(sc, "allOf", mk_arr(sc, two, 2), NULL, NULL);
                if (!q || GR_PUSH(*parts, q)) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
            } else {
                /* no then: (I and not true) is nothing */
            }
            if (el) {
                if ((rc = neg(sc, el, &ne, depth + 1))) return rc;
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

static int neg(sc_t *sc, const lp_json_t *s, const lp_json_t **out, int depth)
{
    scx_t *x = (scx_t *)sc;
    if (depth > 60) return lp__gr_sc_unsupported("not", "nested too deep");
    if (s->type == LP_JSON_BOOL) {
        *out = mk_bool(sc, !s->u.b);
        return *out ? 0 : lp_error_set(LP_ERR(ENOMEM), "out of memory");
    }
    if (s->type != LP_JSON_OBJECT) return lp_error_set(LP_ERR(EINVAL), "schema: a schema must be an object or a boolean");
    for (uint32_t i = 0; i < x->negs.n; i++) {
        negmemo_t *m = &x->negs.v[i];
        if (m->node != s) continue;
        if (m->neg) {
            *out = m->neg;
            return 0;
        }
        /* a negation of itself in progress: refer to it by index */
        if (m->ref == UINT32_MAX) {
            if (GR_PUSH(x->syn.v, NULL)) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
            m->ref = x->syn.v.n - 1;
        }
        char buf[24];
        int len = snprintf(buf, sizeof(buf), "\x01%u", m->ref);
        char *t = lp__gr_strndup(&sc->arena, buf, (size_t)len);
        *out = t ? mk_obj2(sc, "$ref", mk_str(sc, t, (size_t)len), NULL, NULL) : NULL;
        return *out ? 0 : lp_error_set(LP_ERR(ENOMEM), "out of memory");
    }
    negmemo_t nm = {s, NULL, UINT32_MAX};
    if (GR_PUSH(x->negs, nm)) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    uint32_t me = x->negs.n - 1;
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
    x->negs.v[me].neg = res;
    if (x->negs.v[me].ref != UINT32_MAX) x->syn.v.v[x->negs.v[me].ref] = res;
    *out = res;
    return 0;
}

/* ---- disjointness (oneOf) --------------------------------------------------------------------------- */

static int type_mask_of(const lp_json_t *t)
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
        int t = type_mask_of(k);
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

/* The values a required property must take (const/enum), or NULL. */
static const lp_json_t *prop_values(sc_t *sc, const lp_json_t *s, const char *name, size_t n, size_t *count)
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
        if (p->key_len != n || memcmp(p->key, name, n)) continue;
        const lp_json_t *ref = lp_json_get(p, "$ref");
        if (ref) {
            const lp_json_t *t;
            if (lp__gr_sc_resolve(sc, ref, &t)) {
                lp_error_clear();
                return NULL;
            }
            p = t;
        }
        const lp_json_t *c = lp_json_get(p, "const");
        if (c) {
            *count = 1;
            return c;
        }
        c = lp_json_get(p, "enum");
        if (c && c->type == LP_JSON_ARRAY) {
            *count = c->n;
            return c->u.items;
        }
    }
    return NULL;
}

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

/* Provably no value satisfies both a and b. */
static bool disjoint(sc_t *sc, const lp_json_t *a, const lp_json_t *b)
{
    int ta = types_of(sc, a, 0), tb = types_of(sc, b, 0);
    if (!(ta & tb)) return true;
    a = deref(sc, a);
    b = deref(sc, b);
    if ((ta & tb) == T_OBJ && a->type == LP_JSON_OBJECT) {
        /* a discriminator: a property required in both with disjoint values */
        const lp_json_t *req = lp_json_get(a, "required");
        if (req && req->type == LP_JSON_ARRAY)
            for (size_t i = 0; i < req->n; i++) {
                const lp_json_t *nm = &req->u.items[i];
                if (nm->type != LP_JSON_STRING) continue;
                size_t na, nb;
                const lp_json_t *va = prop_values(sc, a, nm->u.str, nm->n, &na);
                const lp_json_t *vb = prop_values(sc, b, nm->u.str, nm->n, &nb);
                if (!va || !vb) continue;
                bool common = false;
                for (size_t x = 0; x < na && !common; x++)
                    for (size_t y = 0; y < nb && !common; y++) common = lp__gr_sc_json_eq(sc, &va[x], &vb[y]);
                if (!common) return true;
            }
    }
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

/* ---- the conjunction compiler --------------------------------------------------------------------- */

static int cmp_ref(const void *a, const void *b)
{
    const sc_ref_t *x = a, *y = b;
    if (x->node != y->node) return (uintptr_t)x->node < (uintptr_t)y->node ? -1 : 1;
    return x->skip < y->skip ? -1 : x->skip > y->skip;
}

static uint64_t conj_hash(const sc_ref_t *v, uint32_t n)
{
    uint64_t h = 99;
    for (uint32_t i = 0; i < n; i++) h = lp__gr_mix(lp__gr_mix(h, (uintptr_t)v[i].node), v[i].skip);
    return h;
}

static int memo_find(sc_t *sc, const sc_ref_t *v, uint32_t n, uint64_t h)
{
    if (!sc->nslots) return -1;
    uint32_t j = (uint32_t)h & (sc->nslots - 1);
    while (sc->slots[j]) {
        sc_memo_t *m = &sc->memo.v[sc->slots[j] - 1];
        if (m->hash == h && m->n == n && !memcmp(sc->keys.v + m->off, v, n * sizeof(sc_ref_t)))
            return (int)(sc->slots[j] - 1);
        j = (j + 1) & (sc->nslots - 1);
    }
    return -1;
}

static int memo_add(sc_t *sc, const sc_ref_t *v, uint32_t n, uint64_t h, uint32_t *idx)
{
    if ((sc->memo.n + 1) * 2 > sc->nslots) {
        uint32_t ns = sc->nslots ? sc->nslots * 2 : 256;
        uint32_t *sl = calloc(ns, sizeof(uint32_t));
        if (!sl) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
        for (uint32_t i = 0; i < sc->memo.n; i++) {
            uint32_t j = (uint32_t)sc->memo.v[i].hash & (ns - 1);
            while (sl[j]) j = (j + 1) & (ns - 1);
            sl[j] = i + 1;
        }
        free(sc->slots);
        sc->slots = sl;
        sc->nslots = ns;
    }
    sc_memo_t m = {h, sc->keys.n, n, GR_NONE, true, false};
    if (GR_RESERVE(sc->keys, n) || GR_PUSH(sc->memo, m)) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    memcpy(sc->keys.v + sc->keys.n, v, n * sizeof(sc_ref_t));
    sc->keys.n += n;
    uint32_t j = (uint32_t)h & (sc->nslots - 1);
    while (sc->slots[j]) j = (j + 1) & (sc->nslots - 1);
    sc->slots[j] = sc->memo.n;
    *idx = sc->memo.n - 1;
    return 0;
}

typedef GR_VEC(sc_ref_t) refv_t;

/* Add a conjunct; a node already there adds nothing (the conjunction is
 * idempotent, and $ref cycles through it stop here). */
static int push_new(refv_t *v, const lp_json_t *node, uint32_t skip)
{
    for (uint32_t i = 0; i < v->n; i++)
        if (v->v[i].node == node) return 0;
    sc_ref_t r = {node, skip};
    return GR_PUSH(*v, r) ? lp_error_set(LP_ERR(ENOMEM), "out of memory") : 0;
}

static int push_ref(refv_t *v, const lp_json_t *node, uint32_t skip)
{
    sc_ref_t r = {node, skip};
    return GR_PUSH(*v, r) ? lp_error_set(LP_ERR(ENOMEM), "out of memory") : 0;
}

static const lp_json_t true_node = {.type = LP_JSON_BOOL, .u.b = true};

/* Expand $ref, allOf and not into the list; false when some part is the
 * false schema. */
static int flatten(sc_t *sc, refv_t *f, bool *is_false)
{
    *is_false = false;
    for (uint32_t i = 0; i < f->n; i++) {
        const lp_json_t *s = f->v[i].node;
        if (s->type == LP_JSON_BOOL) {
            if (!s->u.b) {
                *is_false = true;
                return 0;
            }
            continue;
        }
        if (s->type != LP_JSON_OBJECT)
            return lp_error_set(LP_ERR(EINVAL), "schema: a schema must be an object or a boolean");
        const lp_json_t *k;
        int rc;
        if ((k = lp_json_get(s, "$ref")) && !(f->v[i].skip & SK_REF)) {
            const lp_json_t *t;
            if ((rc = lp__gr_sc_resolve(sc, k, &t))) return rc;
            f->v[i].skip |= SK_REF;
            if (sc->draft && sc->draft <= 7) { /* siblings ignored: this node is now its target */
                bool have = false;
                for (uint32_t j = 0; j < f->n && !have; j++) have = f->v[j].node == t;
                if (have) { /* a cycle: true */
                    f->v[i].node = &true_node;
                    continue;
                }
                f->v[i].node = t;
                f->v[i].skip = 0;
                i--;
                continue;
            }
            if ((rc = push_new(f, t, 0))) return rc;
        }
        if ((k = lp_json_get(s, "allOf")) && !(f->v[i].skip & SK_ALLOF)) {
            if (k->type != LP_JSON_ARRAY) return lp_error_set(LP_ERR(EINVAL), "schema: \"allOf\" must be an array");
            f->v[i].skip |= SK_ALLOF;
            for (size_t j = 0; j < k->n; j++)
                if ((rc = push_new(f, &k->u.items[j], 0))) return rc;
        }
        if ((k = lp_json_get(s, "not")) && !(f->v[i].skip & SK_NOT)) {
            const lp_json_t *n;
            if ((rc = neg(sc, k, &n, 0))) return rc;
            f->v[i].skip |= SK_NOT;
            if ((rc = push_new(f, n, 0))) return rc;
        }
        if (f->n > 4096) return lp_error_set(LP_ERR(E2BIG), "schema too complex (allOf/$ref expand past 4096 parts)");
    }
    /* drop "true", sort, dedup */
    uint32_t w = 0;
    for (uint32_t i = 0; i < f->n; i++)
        if (f->v[i].node->type == LP_JSON_OBJECT) f->v[w++] = f->v[i];
    f->n = w;
    qsort(f->v, f->n, sizeof(sc_ref_t), cmp_ref);
    w = 0;
    for (uint32_t i = 0; i < f->n; i++)
        if (!w || cmp_ref(&f->v[w - 1], &f->v[i])) f->v[w++] = f->v[i];
    f->n = w;
    return 0;
}

static int merge_emit(sc_t *sc, const sc_ref_t *items, uint32_t n, uint32_t *rule);

/* Compile one branch per alternative of items[at]'s keyword kw. */
static int distribute(sc_t *sc, const refv_t *f, uint32_t at, const lp_json_t *alts, uint32_t skipbit,
                      const lp_json_t *const *extra, size_t n_extra_per, uint32_t *rule)
{
    lp__gr_u32v_t rules = {0};
    refv_t b = {0};
    int rc = 0;
    for (size_t a = 0; a < alts->n && !rc; a++) {
        b.n = 0;
        for (uint32_t i = 0; i < f->n && !rc; i++)
            rc = push_ref(&b, f->v[i].node, f->v[i].skip | (i == at ? skipbit : 0));
        if (!rc) rc = push_ref(&b, &alts->u.items[a], 0);
        for (size_t e = 0; extra && e < n_extra_per && !rc; e++)
            if (extra[a * n_extra_per + e]) rc = push_ref(&b, extra[a * n_extra_per + e], 0);
        uint32_t r;
        if (!rc) rc = lp__gr_sc_conj(sc, b.v, b.n, &r);
        if (!rc && r != GR_NONE) {
            bool dup = false;
            for (uint32_t k = 0; k < rules.n; k++) dup |= rules.v[k] == r;
            if (!dup && GR_PUSH(rules, r)) rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
        }
    }
    if (!rc) {
        if (!rules.n) *rule = GR_NONE;
        else if (rules.n == 1) *rule = rules.v[0];
        else {
            int64_t id = lp__gr_json_choice(&sc->J, rules.v, rules.n, "anyOf");
            if (id < 0) rc = (int)id;
            else *rule = (uint32_t)id;
        }
    }
    GR_FREE(rules);
    GR_FREE(b);
    return rc;
}

static int conj_body(sc_t *sc, refv_t *f, uint32_t *rule)
{
    int rc;
    /* enum / const: decide each value against everything */
    for (uint32_t i = 0; i < f->n; i++) {
        const lp_json_t *s = f->v[i].node, *e = lp_json_get(s, "enum"), *c = lp_json_get(s, "const");
        if (!e && !c) continue;
        const lp_json_t *vals = c ? c : e->u.items;
        size_t nv = c ? 1 : e->n;
        if (!c && e->type != LP_JSON_ARRAY) return lp_error_set(LP_ERR(EINVAL), "schema: \"enum\" must be an array");
        GR_VEC(const lp_json_t *) keep = {0};
        for (size_t k = 0; k < nv; k++) {
            int ok = lp__gr_sc_validate_conj(sc, &vals[k], f->v, f->n);
            if (ok < 0) {
                GR_FREE(keep);
                return ok;
            }
            bool dup = false;
            for (uint32_t q = 0; q < keep.n && !dup; q++) dup = lp__gr_sc_json_eq(sc, keep.v[q], &vals[k]);
            if (ok && !dup && GR_PUSH(keep, &vals[k])) {
                GR_FREE(keep);
                return lp_error_set(LP_ERR(ENOMEM), "out of memory");
            }
        }
        rc = lp__gr_sc_literals(sc, keep.v, keep.n, rule);
        GR_FREE(keep);
        return rc;
    }
    /* anyOf */
    for (uint32_t i = 0; i < f->n; i++) {
        const lp_json_t *k = lp_json_get(f->v[i].node, "anyOf");
        if (!k || (f->v[i].skip & SK_ANYOF)) continue;
        if (k->type != LP_JSON_ARRAY) return lp_error_set(LP_ERR(EINVAL), "schema: \"anyOf\" must be an array");
        return distribute(sc, f, i, k, SK_ANYOF, NULL, 0, rule);
    }
    /* oneOf: disjoint branches are anyOf; otherwise each branch excludes the others */
    for (uint32_t i = 0; i < f->n; i++) {
        const lp_json_t *k = lp_json_get(f->v[i].node, "oneOf");
        if (!k || (f->v[i].skip & SK_ONEOF)) continue;
        if (k->type != LP_JSON_ARRAY) return lp_error_set(LP_ERR(EINVAL), "schema: \"oneOf\" must be an array");
        bool all = true;
        for (size_t a = 0; a < k->n && all; a++)
            for (size_t b = a + 1; b < k->n && all; b++) all = disjoint(sc, &k->u.items[a], &k->u.items[b]);
        if (all) return distribute(sc, f, i, k, SK_ONEOF, NULL, 0, rule);
        if (k->n > 8) return lp__gr_sc_unsupported("oneOf", "over 8 branches that may overlap");
        const lp_json_t **ex = calloc(k->n * k->n, sizeof(*ex));
        if (!ex) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
        rc = 0;
        for (size_t a = 0; a < k->n && !rc; a++)
            for (size_t b = 0; b < k->n && !rc; b++) {
                if (a == b || disjoint(sc, &k->u.items[a], &k->u.items[b])) continue;
                rc = neg(sc, &k->u.items[b], &ex[a * k->n + b], 0);
            }
        if (rc == LP_ERR(ENOTSUP)) {
            char msg[256];
            snprintf(msg, sizeof(msg), "branches may overlap and cannot be excluded: %s", lp_error_msg());
            rc = lp__gr_sc_unsupported("oneOf", msg);
        }
        if (!rc) rc = distribute(sc, f, i, k, SK_ONEOF, ex, k->n, rule);
        free(ex);
        return rc;
    }
    /* if/then/else: (I and T) or (not I and E) */
    for (uint32_t i = 0; i < f->n; i++) {
        const lp_json_t *s = f->v[i].node, *ifs = lp_json_get(s, "if");
        if (!ifs || (f->v[i].skip & SK_IF)) continue;
        const lp_json_t *th = lp_json_get(s, "then"), *el = lp_json_get(s, "else");
        if (!th && !el) {
            f->v[i].skip |= SK_IF;
            continue;
        }
        const lp_json_t *ni;
        if ((rc = neg(sc, ifs, &ni, 0))) {
            if (rc == LP_ERR(ENOTSUP)) {
                char msg[256];
                snprintf(msg, sizeof(msg), "its condition cannot be negated: %s", lp_error_msg());
                rc = lp__gr_sc_unsupported("if", msg);
            }
            return rc;
        }
        lp_json_t *b1[2] = {(lp_json_t *)ifs, (lp_json_t *)(th ? th : NULL)};
        lp_json_t *b2[2] = {(lp_json_t *)ni, (lp_json_t *)(el ? el : NULL)};
        lp_json_t *t = mk_bool(sc, true);
        if (!t) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
        if (!b1[1]) b1[1] = t;
        if (!b2[1]) b2[1] = t;
        lp_json_t *alts[2] = {mk_obj2(sc, "allOf", mk_arr(sc, b1, 2), NULL, NULL),
                              mk_obj2(sc, "allOf", mk_arr(sc, b2, 2), NULL, NULL)};
        lp_json_t *arr = mk_arr(sc, alts, 2);
        if (!arr) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
        return distribute(sc, f, i, arr, SK_IF, NULL, 0, rule);
    }
    return merge_emit(sc, f->v, f->n, rule);
}

int lp__gr_sc_conj(sc_t *sc, const sc_ref_t *items, uint32_t n, uint32_t *rule)
{
    if (++sc->n_compiles > SC_MAX_COMPILES)
        return lp_error_set(LP_ERR(E2BIG), "schema too complex (over %u sub-schemas to compile)", SC_MAX_COMPILES);
    if (sc->depth >= SC_MAX_DEPTH) return lp_error_set(LP_ERR(E2BIG), "schema nested too deep");
    refv_t f = {0};
    int rc = 0;
    for (uint32_t i = 0; i < n && !rc; i++) rc = push_ref(&f, items[i].node, items[i].skip);
    bool is_false = false;
    if (!rc) rc = flatten(sc, &f, &is_false);
    if (rc || is_false) {
        *rule = GR_NONE;
        GR_FREE(f);
        return rc;
    }
    if (!f.n) { /* true: any value */
        GR_FREE(f);
        int64_t id = lp__gr_json_value_any(&sc->J);
        if (id < 0) return (int)id;
        *rule = (uint32_t)id;
        return 0;
    }
    uint64_t h = conj_hash(f.v, f.n);
    int at = memo_find(sc, f.v, f.n, h);
    if (at >= 0) {
        sc_memo_t *m = &sc->memo.v[at];
        GR_FREE(f);
        if (!m->busy) {
            *rule = m->rule;
            return 0;
        }
        /* recursion: a rule that will call the result once it exists */
        if (m->rule == GR_NONE) {
            int64_t id = lp__gr_add_seq(sc->J.g, "recursive");
            if (id < 0) return (int)id;
            sc->memo.v[at].rule = (uint32_t)id;
        }
        sc->memo.v[at].referenced = true;
        *rule = sc->memo.v[at].rule;
        return 0;
    }
    uint32_t idx = 0;
    if ((rc = memo_add(sc, f.v, f.n, h, &idx))) {
        GR_FREE(f);
        return rc;
    }
    sc->depth++;
    uint32_t r = GR_NONE;
    rc = conj_body(sc, &f, &r);
    sc->depth--;
    GR_FREE(f);
    if (rc) return rc;
    sc_memo_t *m = &sc->memo.v[idx];
    m->busy = false;
    if (m->referenced) {
        /* fill the placeholder: one edge to the result (if any) */
        gr_seqb_t b = {0};
        uint32_t s0 = lp__gr_seqb_state(&b), fin = lp__gr_seqb_state(&b);
        if (fin == GR_NONE) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
        b.final.v[fin] = 1;
        if (r != GR_NONE && (rc = lp__gr_seqb_edge(&b, s0, (gr_edge_t){r, GR_TAG_ANY, fin, 0, 0, 0, 0}))) {
            lp__gr_seqb_free(&b);
            return rc;
        }
        if ((rc = lp__gr_set_seq(sc->J.g, m->rule, &b))) return rc;
        *rule = m->rule;
        if (r == GR_NONE) m->rule = GR_NONE;
        return 0;
    }
    m->rule = r;
    *rule = r;
    return 0;
}

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
            int t = type_mask_of(k);
            if (t < 0) return lp_error_set(LP_ERR(EINVAL), "schema: bad \"type\"");
            m->types &= t;
        } else if (kis(k, K_NOTTYPE)) {
            int t = type_mask_of(k);
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
                if (k->u.items[j].type != LP_JSON_ARRAY)
                    return lp__gr_sc_unsupported("dependencies", "a schema dependency (dependentSchemas)");
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
            gr_re_t *zeros = lp__gr_re_rep(rb, lp__gr_re_byte(rb, '0', '0', false), nf ? 0 : 1, GR_RE_INF);
            gr_re_t *frac = lp__gr_re_cat2(rb, lp__gr_re_byte(rb, '.', '.', false), lp__gr_re_cat2(rb, lp__gr_re_bytes(rb, F, nf), zeros));
            gr_re_t *plain = lp__gr_re_cat2(rb, lp__gr_re_bytes(rb, I, ni), nf ? frac : lp__gr_re_rep(rb, frac, 0, 1));
            gr_re_t *sign = d.neg ? lp__gr_re_byte(rb, '-', '-', false)
                          : d.nd ? lp__gr_re_new(rb, GR_RE_EMPTY)
                                 : lp__gr_re_rep(rb, lp__gr_re_byte(rb, '-', '-', false), 0, 1);
            r = lp__gr_re_cat2(rb, sign, plain);
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
static int key_parts(sc_t *sc, const merged_t *m, const char *k, size_t kn, refv_t *parts)
{
    int rc = 0;
    for (uint32_t s = 0; s < m->obj.n && !rc; s++) {
        const objsrc_t *o = &m->obj.v[s];
        bool matched = false;
        if (o->props && o->props->type == LP_JSON_OBJECT)
            for (size_t i = 0; i < o->props->n && !rc; i++)
                if (o->props->u.items[i].key_len == kn && !memcmp(o->props->u.items[i].key, k, kn)) {
                    matched = true;
                    rc = push_ref(parts, &o->props->u.items[i], 0);
                }
        if (o->pp && o->pp->type == LP_JSON_OBJECT)
            for (size_t i = 0; i < o->pp->n && !rc; i++) {
                const sc_pat_t *p;
                if ((rc = lp__gr_sc_pattern(sc, o->pp->u.items[i].key, o->pp->u.items[i].key_len, &p))) break;
                if (!lp__gr_sc_pattern_match(p, k, kn)) continue;
                matched = true;
                rc = push_ref(parts, &o->pp->u.items[i], 0);
            }
        if (!matched && o->ap && !rc) rc = push_ref(parts, o->ap, 0);
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
    refv_t parts = {0};
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
            rc = push_ref(&parts, pe, 0);
            for (uint32_t t = 0; t < m->obj.n && !rc; t++)
                if (t != s && m->obj.v[t].ap) rc = push_ref(&parts, m->obj.v[t].ap, 0);
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
            if (m->obj.v[s].ap) rc = push_ref(&parts, m->obj.v[s].ap, 0);
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
    refv_t parts = {0};
    int rc = 0;
    for (uint32_t k = 0; k < L && !rc; k++) {
        parts.n = 0;
        for (uint32_t s = 0; s < m->arr.n && !rc; s++) {
            const arrsrc_t *a = &m->arr.v[s];
            if (a->prefix && k < a->prefix->n) {
                rc = push_ref(&parts, &a->prefix->u.items[k], 0);
                if (!rc && a->rest && a->rest_all) rc = push_ref(&parts, a->rest, 0);
            } else if (a->rest) {
                rc = push_ref(&parts, a->rest, 0);
            }
        }
        if (!rc) rc = lp__gr_sc_conj(sc, parts.v, parts.n, &pr[k]);
    }
    uint32_t rest = GR_NONE;
    if (!rc) {
        parts.n = 0;
        for (uint32_t s = 0; s < m->arr.n && !rc; s++)
            if (m->arr.v[s].rest) rc = push_ref(&parts, m->arr.v[s].rest, 0);
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

static int merge_emit(sc_t *sc, const sc_ref_t *items, uint32_t n, uint32_t *rule)
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

/* Keywords the declared draft does not have are annotations to its
 * validators: renamed out of the way ("\x01x") where the schema is read as
 * that draft.  A schema naming no draft keeps them all (it must be valid
 * under draft 7 and 2020-12 both, so the stricter reading holds). */
static bool draft_ignores(int draft, const lp_json_t *k)
{
#define IS(x) (k->key_len == strlen(x) && !memcmp(k->key, x, k->key_len))
    bool later = IS("prefixItems") || IS("dependentRequired") || IS("dependentSchemas") ||
                 IS("unevaluatedProperties") || IS("unevaluatedItems") || IS("minContains") || IS("maxContains");
    bool excl = IS("exclusiveMinimum") || IS("exclusiveMaximum");
    switch (draft) {
    case 4:
        return later || IS("const") || IS("contains") || IS("propertyNames") || IS("if") || IS("then") ||
               IS("else") || (excl && k->type == LP_JSON_NUMBER);
    case 6:
        return later || IS("if") || IS("then") || IS("else") || (excl && k->type == LP_JSON_BOOL);
    case 7:
        return later || (excl && k->type == LP_JSON_BOOL);
    case 2019:
        return IS("prefixItems") || IS("dependencies") || (excl && k->type == LP_JSON_BOOL);
    case 2020:
        return IS("dependencies") || IS("additionalItems") || (excl && k->type == LP_JSON_BOOL);
    default:
        return false;
    }
#undef IS
}

static void draft_prune(sc_t *sc, lp_json_t *s, int depth)
{
    if (!sc->draft || depth > LP_JSON_MAX_DEPTH + 1 || s->type != LP_JSON_OBJECT) return;
    static const char *maps[] = {"properties", "patternProperties", "definitions", "$defs", "dependentSchemas", "dependencies"};
    static const char *lists[] = {"allOf", "anyOf", "oneOf", "prefixItems", "items"};
    static const char *ones[] = {"not", "if", "then", "else", "additionalProperties", "additionalItems", "contains",
                                 "propertyNames", "items", "unevaluatedProperties", "unevaluatedItems"};
    for (size_t i = 0; i < s->n; i++) {
        lp_json_t *k = &s->u.items[i];
        if (draft_ignores(sc->draft, k)) {
            k->key = "\x01x";
            k->key_len = 2;
            continue;
        }
        for (size_t m = 0; m < sizeof(maps) / sizeof(maps[0]); m++)
            if (k->key_len == strlen(maps[m]) && !memcmp(k->key, maps[m], k->key_len) && k->type == LP_JSON_OBJECT)
                for (size_t j = 0; j < k->n; j++) draft_prune(sc, &k->u.items[j], depth + 1);
        for (size_t m = 0; m < sizeof(lists) / sizeof(lists[0]); m++)
            if (k->key_len == strlen(lists[m]) && !memcmp(k->key, lists[m], k->key_len) && k->type == LP_JSON_ARRAY)
                for (size_t j = 0; j < k->n; j++) draft_prune(sc, &k->u.items[j], depth + 1);
        for (size_t m = 0; m < sizeof(ones) / sizeof(ones[0]); m++)
            if (k->key_len == strlen(ones[m]) && !memcmp(k->key, ones[m], k->key_len)) draft_prune(sc, k, depth + 1);
    }
}

/* Keys (and "$ref"s) starting with U+0001 are the compiler's own. */
static int reserved_keys(const lp_json_t *v, int depth)
{
    if (depth > LP_JSON_MAX_DEPTH + 1) return 0;
    if (v->type != LP_JSON_OBJECT && v->type != LP_JSON_ARRAY) return 0;
    for (size_t i = 0; i < v->n; i++) {
        const lp_json_t *k = &v->u.items[i];
        if (v->type == LP_JSON_OBJECT && k->key_len && k->key[0] == '\x01')
            return lp_error_set(LP_ERR(EINVAL), "schema: keys starting with U+0001 are reserved");
        if (v->type == LP_JSON_OBJECT && k->key_len == 4 && !memcmp(k->key, "$ref", 4) &&
            k->type == LP_JSON_STRING && k->n && k->u.str[0] == '\x01')
            return lp_error_set(LP_ERR(EINVAL), "schema: \"$ref\" values starting with U+0001 are reserved");
        int rc = reserved_keys(k, depth + 1);
        if (rc) return rc;
    }
    return 0;
}

/* ---- entry ---------------------------------------------------------------------------------------------- */

int lp__gr_compile_schema(gr_grammar_t *g, const char *text, size_t len, const gr_json_opts_t *o)
{
    lp_json_doc_t *doc;
    int rc = lp_json_parse(text, len, &doc);
    if (rc) {
        lp_error_prefix("schema: ");
        return rc;
    }
    scx_t *x = calloc(1, sizeof(*x));
    if (!x) {
        lp_json_doc_destroy(&doc);
        return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    }
    sc_t *sc = &x->sc;
    lp__gr_json_init(&sc->J, g, o->compact);
    sc->root = lp_json_root(doc);
    if (sc->root->type != LP_JSON_OBJECT && sc->root->type != LP_JSON_BOOL) {
        rc = lp_error_set(LP_ERR(EINVAL), "schema: must be an object or a boolean");
        goto done;
    }
    const lp_json_t *sv = lp__gr_sc_kw(sc->root, "$schema");
    if (sv && sv->type == LP_JSON_STRING) {
        const char *s = sv->u.str;
        if (strstr(s, "draft-03")) {
            rc = lp__gr_sc_unsupported("$schema", "draft 3");
            goto done;
        }
        sc->draft = strstr(s, "draft-04") ? 4 : strstr(s, "draft-06") ? 6 : strstr(s, "draft-07") ? 7
                  : strstr(s, "2019-09") ? 2019 : strstr(s, "2020-12") ? 2020 : 0;
    }
    if ((rc = reserved_keys(sc->root, 0))) goto done;
    draft_prune(sc, (lp_json_t *)sc->root, 0); /* the document is ours */
    sc_ref_t r0 = {sc->root, 0};
    uint32_t root;
    rc = lp__gr_sc_conj(sc, &r0, 1, &root);
    if (!rc && root == GR_NONE) rc = lp_error_set(LP_ERR(EINVAL), "schema: no value satisfies it");
    if (!rc) g->root = root;
done:
    for (uint32_t i = 0; i < sc->pats.n; i++) {
        lp__gr_dfa_unref(&sc->pats.v[i].search);
    }
    GR_FREE(sc->pats);
    GR_FREE(sc->memo);
    GR_FREE(sc->keys);
    free(sc->slots);
    GR_FREE(x->syn.v);
    GR_FREE(x->negs);
    lp__gr_json_free(&sc->J);
    lp__gr_arena_free(&sc->arena);
    free(x);
    lp_json_doc_destroy(&doc);
    return rc;
}
