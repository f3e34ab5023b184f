/* gr-schema-obj.c - the rules of JSON objects and arrays under a schema.
 *
 * An object is one SEQ rule whose frame keeps the set of named properties
 * seen and the member count: properties come in any order, each at most
 * once, '}' only once the required ones are there (gr-match.c's guards).
 * Its keys are one lexeme (quotes, content, whitespace and ':'), a DFA
 * whose accepting states say which property the key was (named ones first,
 * then each pattern, then any other key); the value rule follows from it.
 * An array counts its items in its frame (minItems, maxItems, prefixItems). */
#include "gr-schema.h"

#include "error.h"

#include <stdio.h>

/* per state: the tags reachable from it (fixpoint over the DFA's edges) */
static int key_reach(gr_rule_t *r, uint32_t n_tags)
{
    const gr_dfa_t *d = r->dfa;
    uint32_t w = (uint32_t)lp__gr_words(n_tags);
    r->reach_words = w;
    r->n_tags = n_tags;
    r->reach = calloc((size_t)d->n_states * w, sizeof(uint64_t));
    if (!r->reach) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    for (uint32_t q = 0; q < d->n_states; q++)
        if (d->tag[q] >= 0) lp__gr_bset(r->reach + (size_t)q * w, (size_t)d->tag[q]);
    /* states are numbered breadth first: backwards, one pass settles all
     * but the loops */
    bool ch = true;
    while (ch) {
        ch = false;
        for (uint32_t qq = d->n_states; qq-- > 0;) {
            uint32_t q = qq;
            uint64_t *rq = r->reach + (size_t)q * w;
            for (uint32_t k = 0; k < d->n_cls; k++) {
                int32_t t = d->next[(size_t)q * d->n_cls + k];
                if (t < 0) continue;
                const uint64_t *rt = r->reach + (size_t)t * w;
                for (uint32_t i = 0; i < w; i++)
                    if (rt[i] & ~rq[i]) {
                        rq[i] |= rt[i];
                        ch = true;
                    }
            }
        }
    }
    return 0;
}

/* "content" ws : ws, as the tail of a key */
static gr_re_t *key_tail(sc_t *sc)
{
    gr_json_t *j = &sc->J;
    gr_re_t *k[4] = {lp__gr_re_byte(&j->rb, '"', '"', false), lp__gr_json_ws(j), lp__gr_json_lit(j, ":"),
                     lp__gr_json_ws(j)};
    return lp__gr_re_cat(&j->rb, k, 4);
}

static gr_re_t *key_alt(sc_t *sc, gr_re_t *content)
{
    gr_json_t *j = &sc->J;
    gr_re_t *k[3] = {lp__gr_re_byte(&j->rb, '"', '"', false), content, key_tail(sc)};
    return lp__gr_re_cat(&j->rb, k, 3);
}

int lp__gr_sc_object(sc_t *sc, const sc_objspec_t *o, uint32_t *rule)
{
    gr_json_t *j = &sc->J;
    gr_grammar_t *g = j->g;
    uint32_t n_tags = o->n_named + o->n_pat + 1;
    uint32_t other_tag = o->n_named + o->n_pat;
    uint32_t words = (uint32_t)lp__gr_words(o->n_named ? o->n_named : 1);
    int rc = 0;
    *rule = GR_NONE;
    /* a required name that cannot appear: no object */
    for (uint32_t i = 0; i < o->n_named; i++)
        if (o->required && lp__gr_btest(o->required, i) && o->value_rule[i] == GR_NONE) return 0;
    /* the key lexeme: one tagged alternative per name, pattern, other */
    gr_rev_t alts = {0};
    lp__gr_u32v_t atags = {0};
    bool any_key = false;
    for (uint32_t i = 0; i < o->n_named && !rc; i++) {
        /* a name that may not appear stays in, so that it is not taken for
         * an other key; it is not available (see avail) */
        gr_re_t *t = lp__gr_sc_text_re(sc, o->names[i], o->name_lens[i]);
        gr_re_t *a = t ? key_alt(sc, t) : NULL;
        rc = a ? (GR_PUSH(alts, a) || GR_PUSH(atags, i) ? LP_ERR(ENOMEM) : 0) : lp_error_set(LP_ERR(E2BIG), "keys too large");
        any_key = true;
    }
    for (uint32_t i = 0; i < o->n_pat && !rc; i++) {
        if (o->pat_rule[i] == GR_NONE) continue;
        gr_re_t *a = key_alt(sc, lp__gr_re_dfa(&j->rb, o->pat_dfa[i]));
        rc = a ? (GR_PUSH(alts, a) || GR_PUSH(atags, o->n_named + i) ? LP_ERR(ENOMEM) : 0) : lp_error_set(LP_ERR(E2BIG), "keys too large");
        any_key = true;
    }
    if (!rc && o->other_rule != GR_NONE) {
        const gr_dfa_t *anyc;
        rc = lp__gr_sc_any_content(sc, &anyc);
        gr_re_t *a = rc ? NULL : key_alt(sc, lp__gr_re_dfa(&j->rb, anyc));
        if (!rc) rc = a ? (GR_PUSH(alts, a) || GR_PUSH(atags, other_tag) ? LP_ERR(ENOMEM) : 0) : lp_error_set(LP_ERR(E2BIG), "keys too large");
        any_key = true;
    }
    gr_dfa_t *kd = NULL;
    if (!rc && any_key) rc = lp__gr_dfa_build((const gr_re_t *const *)alts.v, (const int32_t *)atags.v, alts.n, GR_ENC_JSON, 50000, &kd);
    GR_FREE(alts);
    GR_FREE(atags);
    if (rc) return rc == LP_ERR(ENOMEM) ? lp_error_set(rc, "out of memory") : rc;
    if (kd && o->names_dfa) {
        gr_re_t *a = key_alt(sc, lp__gr_re_dfa(&j->rb, o->names_dfa));
        gr_dfa_t *nd = NULL, *x = NULL;
        rc = a ? lp__gr_dfa_from_re(a, GR_ENC_JSON, 50000, &nd) : lp_error_set(LP_ERR(E2BIG), "keys too large");
        if (!rc) rc = lp__gr_dfa_intersect(kd, nd, 50000, &x);
        lp__gr_dfa_unref(&nd);
        lp__gr_dfa_unref(&kd);
        if (rc) return rc;
        kd = x;
    }
    if (kd && !kd->n_states) lp__gr_dfa_unref(&kd);
    /* the object's bookkeeping */
    gr_obj_t *ob = lp__gr_zalloc(&g->arena, sizeof(*ob));
    if (!ob) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    ob->n_named = o->n_named;
    ob->words = words;
    ob->required = lp__gr_zalloc(&g->arena, words * sizeof(uint64_t));
    if (!ob->required) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    if (o->required) memcpy(ob->required, o->required, (size_t)lp__gr_words(o->n_named) * sizeof(uint64_t));
    for (uint32_t i = 0; i < o->n_named; i++) ob->n_required += lp__gr_btest(ob->required, i);
    ob->min_props = o->min_props;
    ob->max_props = o->max_props;
    ob->other_keys = false;
    for (uint32_t i = 0; i < o->n_pat; i++)
        if (o->pat_rule[i] != GR_NONE) ob->other_keys = true;
    if (o->other_rule != GR_NONE) ob->other_keys = true;
    if (o->n_deps) {
        ob->n_deps = o->n_deps;
        ob->dep_key = lp__gr_memdup(&g->arena, o->dep_key, o->n_deps * sizeof(uint32_t));
        ob->dep_set = lp__gr_memdup(&g->arena, o->dep_set, (size_t)o->n_deps * words * sizeof(uint64_t));
        if (!ob->dep_key || !ob->dep_set) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    }
    /* unsatisfiable counts */
    uint32_t possible = 0;
    for (uint32_t i = 0; i < o->n_named; i++) possible += o->value_rule[i] != GR_NONE;
    if (ob->n_required > o->max_props && o->max_props != GR_NONE) return 0;
    if (!ob->other_keys && o->min_props != GR_NONE && o->min_props > possible) return 0;
    if (!kd && (ob->n_required || o->min_props > 0)) return 0;
    /* rules */
    int64_t key = -1;
    if (kd) {
        key = lp__gr_add_lex(g, kd, "object key");
        if (key < 0) return (int)key;
        gr_rule_t *kr = &g->rules.v[key];
        kr->key_of = ob;
        if ((rc = key_reach(kr, n_tags))) return rc;
        /* an other key's content once no name can be meant: the state that
         * every plain character keeps it in */
        for (uint32_t q = 0; q < kd->n_states && kr->pure < 0; q++) {
            bool loop = true;
            for (int b = 0x20; b < 0x7f && loop; b++)
                if (b != '"' && b != '\\') loop = lp__gr_dfa_step(kd, (int32_t)q, (uint8_t)b) == (int32_t)q;
            if (loop) kr->pure = (int32_t)q;
        }
    }
    ob->avail = lp__gr_zalloc(&g->arena, words * sizeof(uint64_t));
    if (!ob->avail) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    if (kd) {
        const uint64_t *r0 = g->rules.v[key].reach; /* state 0: every key it can spell */
        for (uint32_t i = 0; i < o->n_named; i++)
            if (lp__gr_btest(r0, i) && o->value_rule[i] != GR_NONE) lp__gr_bset(ob->avail, i);
    }
    for (uint32_t i = 0; i < o->n_named; i++)
        if (lp__gr_btest(ob->required, i) && !lp__gr_btest(ob->avail, i)) return 0;
    int64_t lb = GR_J_LBRACE(j), rb = GR_J_RBRACE(j), rb0 = GR_J_RBRACE0(j), cm = GR_J_COMMA(j);
    if (lb < 0 || rb < 0 || rb0 < 0 || cm < 0) return (int)(lb < 0 ? lb : rb < 0 ? rb : rb0 < 0 ? rb0 : cm);
    int64_t id = lp__gr_add_seq(g, "object");
    if (id < 0) return (int)id;
    gr_seqb_t b = {0};
    for (uint32_t i = 0; i < 5 + n_tags; i++)
        if (lp__gr_seqb_state(&b) == GR_NONE) {
            lp__gr_seqb_free(&b);
            return lp_error_set(LP_ERR(ENOMEM), "out of memory");
        }
    b.final.v[4] = 1;
#define EDGE(from, callee, tag, to, gd, ac)                                                      \
    do {                                                                                         \
        if (!rc) rc = lp__gr_seqb_edge(&b, from, (gr_edge_t){(uint32_t)(callee), tag, to, gd, ac, 0, 0}); \
    } while (0)
    EDGE(0, lb, GR_TAG_ANY, 1, GR_G_NONE, GR_A_NONE);
    EDGE(1, rb0, GR_TAG_ANY, 4, GR_G_CLOSE, GR_A_NONE);
    EDGE(2, rb, GR_TAG_ANY, 4, GR_G_CLOSE, GR_A_NONE);
    if (kd) {
        EDGE(1, key, GR_TAG_DISPATCH, 5, GR_G_KEY, GR_A_MARK);
        EDGE(2, cm, GR_TAG_ANY, 3, GR_G_MORE, GR_A_NONE);
        EDGE(3, key, GR_TAG_DISPATCH, 5, GR_G_KEY, GR_A_MARK);
        for (uint32_t t = 0; t < n_tags; t++) {
            uint32_t vr = t < o->n_named ? o->value_rule[t]
                        : t < other_tag ? o->pat_rule[t - o->n_named] : o->other_rule;
            if (vr != GR_NONE) EDGE(5 + t, vr, GR_TAG_ANY, 2, GR_G_NONE, GR_A_NONE);
        }
    }
#undef EDGE
    if (rc) {
        lp__gr_seqb_free(&b);
        return rc;
    }
    if ((rc = lp__gr_set_seq(g, (uint32_t)id, &b))) return rc;
    g->rules.v[id].obj = ob;
    *rule = (uint32_t)id;
    return 0;
}

int lp__gr_sc_array(sc_t *sc, const sc_arrspec_t *a, uint32_t *rule)
{
    gr_json_t *j = &sc->J;
    gr_grammar_t *g = j->g;
    *rule = GR_NONE;
    /* the most items any array can have */
    uint32_t max = a->max_items;
    for (uint32_t k = 0; k < a->n_prefix; k++)
        if (a->prefix_rule[k] == GR_NONE) {
            if (max == GR_NONE || k < max) max = k;
            break;
        }
    if (a->rest_rule == GR_NONE && (max == GR_NONE || max > a->n_prefix)) max = a->n_prefix;
    if (max != GR_NONE && a->min_items > max) return 0;
    int64_t lk = GR_J_LBRACKET(j), rk = GR_J_RBRACKET(j), rk0 = GR_J_RBRACKET0(j), cm = GR_J_COMMA(j);
    if (lk < 0 || rk < 0 || rk0 < 0 || cm < 0) return (int)(lk < 0 ? lk : rk < 0 ? rk : rk0 < 0 ? rk0 : cm);
    int64_t id = lp__gr_add_seq(g, "array");
    if (id < 0) return (int)id;
    gr_seqb_t b = {0};
    for (int i = 0; i < 5; i++)
        if (lp__gr_seqb_state(&b) == GR_NONE) {
            lp__gr_seqb_free(&b);
            return lp_error_set(LP_ERR(ENOMEM), "out of memory");
        }
    /* 0 start, 1 after '[', 2 after an item, 3 after ',', 4 end */
    b.final.v[4] = 1;
    int rc = 0;
    uint32_t hi = max == GR_NONE ? UINT32_MAX : max;
#define EDGE(from, callee, to, gd, ac, x, y)                                                        \
    do {                                                                                            \
        if (!rc) rc = lp__gr_seqb_edge(&b, from, (gr_edge_t){(uint32_t)(callee), GR_TAG_ANY, to, gd, ac, x, y}); \
    } while (0)
    EDGE(0, lk, 1, GR_G_NONE, GR_A_NONE, 0, 0);
    EDGE(1, rk0, 4, GR_G_GE, GR_A_NONE, a->min_items, 0);
    EDGE(2, rk, 4, GR_G_GE, GR_A_NONE, a->min_items, 0);
    if (hi > 0) {
        EDGE(2, cm, 3, GR_G_LT, GR_A_NONE, hi, 0);
        for (uint32_t from = 1; from <= 3; from += 2) {
            for (uint32_t k = 0; k < a->n_prefix && k < hi; k++)
                EDGE(from, a->prefix_rule[k], 2, GR_G_EQ, GR_A_INC, k, 0);
            if (a->rest_rule != GR_NONE && hi > a->n_prefix)
                EDGE(from, a->rest_rule, 2, GR_G_RANGE, GR_A_INC, a->n_prefix, hi);
        }
    }
#undef EDGE
    if (rc) {
        lp__gr_seqb_free(&b);
        return rc;
    }
    if ((rc = lp__gr_set_seq(g, (uint32_t)id, &b))) return rc;
    *rule = (uint32_t)id;
    return 0;
}
