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


const lp_json_t *lp__gr_sc_kw(const lp_json_t *s, const char *k)
{
    if (!s || s->type != LP_JSON_OBJECT) return NULL;
    return lp_json_get(s, k);
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

int lp__gr_sc_resolve(sc_t *sc, const lp_json_t *ref, const lp_json_t **out)
{
    if (ref->type != LP_JSON_STRING) return lp_error_set(LP_ERR(EINVAL), "schema: \"$ref\" must be a string");
    const char *s = ref->u.str;
    size_t n = ref->n;
    if (n && s[0] == '\x01') { /* synthetic */
        size_t idx = (size_t)strtoul(s + 1, NULL, 10);
        if (idx >= sc->syn.n || !sc->syn.v[idx]) return lp_error_set(LP_ERR(EINVAL), "schema: internal reference");
        *out = sc->syn.v[idx];
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


/* Add a conjunct; a node already there adds nothing (the conjunction is
 * idempotent, and $ref cycles through it stop here). */
static int push_new(sc_refv_t *v, const lp_json_t *node, uint32_t skip)
{
    for (uint32_t i = 0; i < v->n; i++)
        if (v->v[i].node == node) return 0;
    sc_ref_t r = {node, skip};
    return GR_PUSH(*v, r) ? lp_error_set(LP_ERR(ENOMEM), "out of memory") : 0;
}

int lp__gr_sc_push(sc_refv_t *v, const lp_json_t *node, uint32_t skip)
{
    sc_ref_t r = {node, skip};
    return GR_PUSH(*v, r) ? lp_error_set(LP_ERR(ENOMEM), "out of memory") : 0;
}

static const lp_json_t true_node = {.type = LP_JSON_BOOL, .u.b = true};

/* Expand $ref, allOf and not into the list; false when some part is the
 * false schema. */
static int flatten(sc_t *sc, sc_refv_t *f, bool *is_false)
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
            if ((rc = lp__gr_sc_neg(sc, k, &n, 0))) return rc;
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
    if (f->n > 1) qsort(f->v, f->n, sizeof(sc_ref_t), cmp_ref);
    w = 0;
    for (uint32_t i = 0; i < f->n; i++)
        if (!w || cmp_ref(&f->v[w - 1], &f->v[i])) f->v[w++] = f->v[i];
    f->n = w;
    return 0;
}


/* Compile one branch per alternative of items[at]'s keyword kw. */
static int distribute(sc_t *sc, const sc_refv_t *f, uint32_t at, const lp_json_t *alts, uint32_t skipbit,
                      const lp_json_t *const *extra, size_t n_extra_per, uint32_t *rule)
{
    lp__gr_u32v_t rules = {0};
    sc_refv_t b = {0};
    int rc = 0;
    for (size_t a = 0; a < alts->n && !rc; a++) {
        b.n = 0;
        for (uint32_t i = 0; i < f->n && !rc; i++)
            rc = lp__gr_sc_push(&b, f->v[i].node, f->v[i].skip | (i == at ? skipbit : 0));
        if (!rc) rc = lp__gr_sc_push(&b, &alts->u.items[a], 0);
        for (size_t e = 0; extra && e < n_extra_per && !rc; e++)
            if (extra[a * n_extra_per + e]) rc = lp__gr_sc_push(&b, extra[a * n_extra_per + e], 0);
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

static bool is_schema(const lp_json_t *v) { return v->type == LP_JSON_OBJECT || v->type == LP_JSON_BOOL; }
#define KEY_IS(k, x) ((k)->key_len == strlen(x) && !memcmp((k)->key, x, (k)->key_len))

/* "a present implies S" (dependentSchemas, and dependencies with a schema)
 * becomes one more conjunct: anyOf [{type object, required [a], allOf [S]},
 * {properties {a: false}}], the two branches disjoint. */
static int schema_deps(sc_t *sc, sc_refv_t *f)
{
    for (uint32_t i = 0; i < f->n; i++) {
        if (f->v[i].skip & SK_DEPS) continue;
        const lp_json_t *s = f->v[i].node;
        if (s->type != LP_JSON_OBJECT) continue;
        bool any = false;
        for (size_t j = 0; j < s->n; j++) {
            const lp_json_t *k = &s->u.items[j];
            bool ds = KEY_IS(k, "dependentSchemas");
            if (!ds && !KEY_IS(k, "dependencies")) continue;
            if (k->type != LP_JSON_OBJECT)
                return lp_error_set(LP_ERR(EINVAL), "schema: \"%s\" must be an object", ds ? "dependentSchemas" : "dependencies");
            for (size_t q = 0; q < k->n; q++) {
                const lp_json_t *e = &k->u.items[q];
                if (is_schema(e)) any = true;
                else if (ds || e->type != LP_JSON_ARRAY)
                    return lp_error_set(LP_ERR(EINVAL), "schema: \"%s\" values must be %s", ds ? "dependentSchemas" : "dependencies",
                                        ds ? "schemas" : "arrays or schemas");
            }
        }
        if (!any) continue;
        f->v[i].skip |= SK_DEPS;
        for (size_t j = 0; j < s->n; j++) {
            const lp_json_t *k = &s->u.items[j];
            if (!KEY_IS(k, "dependentSchemas") && !KEY_IS(k, "dependencies")) continue;
            for (size_t q = 0; q < k->n; q++) {
                const lp_json_t *e = &k->u.items[q];
                if (!is_schema(e)) continue;
                char *name = lp__gr_strndup(&sc->arena, e->key, e->key_len);
                lp_json_t *no = name ? lp__gr_sc_mk_obj2(sc, name, lp__gr_sc_mk_bool(sc, false), NULL, NULL) : NULL;
                if (no) no->u.items[0].key_len = e->key_len;
                no = lp__gr_sc_mk_obj2(sc, "properties", no, NULL, NULL);
                lp_json_t *nm = lp__gr_sc_mk_str(sc, e->key, e->key_len);
                lp_json_t *req = lp__gr_sc_mk_obj2(sc, "required", lp__gr_sc_mk_arr(sc, &nm, 1), NULL, NULL);
                lp_json_t *both[2] = {req, (lp_json_t *)e};
                lp_json_t *yes = lp__gr_sc_mk_obj2(sc, "type", lp__gr_sc_mk_str(sc, "object", 6), "allOf",
                                                   lp__gr_sc_mk_arr(sc, both, 2));
                lp_json_t *alts[2] = {yes, no};
                lp_json_t *c = lp__gr_sc_mk_obj2(sc, "anyOf", lp__gr_sc_mk_arr(sc, alts, 2), NULL, NULL);
                if (!c || lp__gr_sc_push(f, c, 0)) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
            }
        }
    }
    return 0;
}

static int conj_body(sc_t *sc, sc_refv_t *f, uint32_t *rule)
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
    if ((rc = schema_deps(sc, f))) return rc;
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
        int excluded = 0;
        if (lp__gr_sc_oneof_types(sc, k, &excluded)) {
            if (excluded) { /* types every value of which two branches accept */
                static const struct {
                    int t;
                    const char *name;
                } names[] = {{T_NULL, "null"}, {T_BOOL, "boolean"}, {T_INT | T_NUM, "number"}, {T_INT, "integer"},
                             {T_STR, "string"}, {T_ARR, "array"}, {T_OBJ, "object"}};
                lp_json_t *tn[7];
                size_t nn = 0;
                int left = excluded;
                for (size_t q = 0; q < 7; q++)
                    if ((left & names[q].t) == names[q].t) {
                        tn[nn++] = lp__gr_sc_mk_str(sc, names[q].name, strlen(names[q].name));
                        left &= ~names[q].t;
                    }
                lp_json_t *not_types = lp__gr_sc_mk_obj2(sc, K_NOTTYPE, lp__gr_sc_mk_arr(sc, tn, nn), NULL, NULL);
                if (!not_types) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
                if ((rc = lp__gr_sc_push(f, not_types, 0))) return rc;
            }
            return distribute(sc, f, i, k, SK_ONEOF, NULL, 0, rule);
        }
        if (k->n > 8) return lp__gr_sc_unsupported("oneOf", "over 8 branches that may overlap");
        const lp_json_t **ex = calloc(k->n * k->n, sizeof(*ex));
        if (!ex) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
        rc = 0;
        for (size_t a = 0; a < k->n && !rc; a++)
            for (size_t b = 0; b < k->n && !rc; b++) {
                if (a == b || lp__gr_sc_disjoint(sc, &k->u.items[a], &k->u.items[b])) continue;
                rc = lp__gr_sc_neg(sc, &k->u.items[b], &ex[a * k->n + b], 0);
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
        if ((rc = lp__gr_sc_neg(sc, ifs, &ni, 0))) {
            if (rc == LP_ERR(ENOTSUP)) {
                char msg[256];
                snprintf(msg, sizeof(msg), "its condition cannot be negated: %s", lp_error_msg());
                rc = lp__gr_sc_unsupported("if", msg);
            }
            return rc;
        }
        lp_json_t *b1[2] = {(lp_json_t *)ifs, (lp_json_t *)(th ? th : NULL)};
        lp_json_t *b2[2] = {(lp_json_t *)ni, (lp_json_t *)(el ? el : NULL)};
        lp_json_t *t = lp__gr_sc_mk_bool(sc, true);
        if (!t) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
        if (!b1[1]) b1[1] = t;
        if (!b2[1]) b2[1] = t;
        lp_json_t *alts[2] = {lp__gr_sc_mk_obj2(sc, "allOf", lp__gr_sc_mk_arr(sc, b1, 2), NULL, NULL),
                              lp__gr_sc_mk_obj2(sc, "allOf", lp__gr_sc_mk_arr(sc, b2, 2), NULL, NULL)};
        lp_json_t *arr = lp__gr_sc_mk_arr(sc, alts, 2);
        if (!arr) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
        return distribute(sc, f, i, arr, SK_IF, NULL, 0, rule);
    }
    return lp__gr_sc_merge_emit(sc, f->v, f->n, rule);
}

int lp__gr_sc_conj(sc_t *sc, const sc_ref_t *items, uint32_t n, uint32_t *rule)
{
    if (++sc->n_compiles > SC_MAX_COMPILES)
        return lp_error_set(LP_ERR(E2BIG), "schema too complex (over %u sub-schemas to compile)", SC_MAX_COMPILES);
    if (sc->depth >= SC_MAX_DEPTH) return lp_error_set(LP_ERR(E2BIG), "schema nested too deep");
    sc_refv_t f = {0};
    int rc = 0;
    for (uint32_t i = 0; i < n && !rc; i++) rc = lp__gr_sc_push(&f, items[i].node, items[i].skip);
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

/* ---- draft keywords and reserved keys ----------------------------------------------------------- */

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
    sc_t *sc = calloc(1, sizeof(*sc));
    if (!sc) {
        lp_json_doc_destroy(&doc);
        return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    }
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
        lp__gr_dfa_unref(&sc->pats.v[i]->search);
    }
    GR_FREE(sc->pats);
    GR_FREE(sc->memo);
    GR_FREE(sc->keys);
    free(sc->slots);
    GR_FREE(sc->syn);
    GR_FREE(sc->negs);
    lp__gr_json_free(&sc->J);
    lp__gr_arena_free(&sc->arena);
    free(sc);
    lp_json_doc_destroy(&doc);
    return rc;
}
