/* gr-json.c - JSON's lexemes and the rules for "any value" (see gr-json.h),
 * and JSON mode: any JSON object. */
#include "gr-json.h"

#include "error.h"

#include <stdio.h>

int lp__gr_json_init(gr_json_t *j, gr_grammar_t *g, bool compact)
{
    memset(j, 0, sizeof(*j));
    j->g = g;
    j->compact = compact;
    j->lbrace = j->rbrace = j->rbrace0 = j->lbracket = j->rbracket = j->rbracket0 = j->comma = GR_NONE;
    j->key_any = j->scalar_any = j->value_any = j->obj_any = j->arr_any = GR_NONE;
    j->max_dfa = 20000;
    j->budget = 400000;
    return 0;
}

void lp__gr_json_free(gr_json_t *j)
{
    lp__gr_rebuf_free(&j->rb);
    for (uint32_t i = 0; i < j->held.n; i++) lp__gr_dfa_unref(&j->held.v[i]);
    GR_FREE(j->held);
    GR_FREE(j->lex_hash);
    GR_FREE(j->lex_id);
}

/* ---- expressions --------------------------------------------------------------------- */

static gr_re_t *B(gr_json_t *j, char lo, char hi, bool count)
{
    return lp__gr_re_byte(&j->rb, (uint8_t)lo, (uint8_t)hi, count);
}

gr_re_t *lp__gr_json_ws(gr_json_t *j)
{
    if (j->compact) return lp__gr_re_new(&j->rb, GR_RE_EMPTY);
    gr_re_t *k[3] = {B(j, ' ', ' ', false), B(j, '\t', '\n', false), B(j, '\r', '\r', false)};
    return lp__gr_re_rep(&j->rb, lp__gr_re_alt(&j->rb, k, 3), 0, GR_RE_INF);
}

gr_re_t *lp__gr_json_lit(gr_json_t *j, const char *s)
{
    return lp__gr_re_bytes(&j->rb, s, strlen(s));
}

static gr_re_t *hexd(gr_json_t *j, const char *a, const char *b)
{
    /* hex digits from the pairs (lo,hi) in a and b: "09af" style */
    gr_re_t *k[8]; /* at most 8 pairs between a and b */
    uint32_t n = 0;
    for (const char *p = a; p && p[0] && p[1]; p += 2) k[n++] = B(j, p[0], p[1], false);
    for (const char *p = b; p && p[0] && p[1]; p += 2) k[n++] = B(j, p[0], p[1], false);
    return lp__gr_re_alt(&j->rb, k, n);
}

static gr_re_t *str_body_re(gr_json_t *j)
{
    gr_rebuf_t *rb = &j->rb;
    gr_cset_t all = {0};
    if (lp__gr_cs_negate(&all)) return NULL; /* every character */
    gr_re_t *chars = lp__gr_re_chars(rb, &all);
    lp__gr_cs_free(&all);
    /* \uXXXX for any character outside the surrogates */
    gr_re_t *hx = hexd(j, "09afAF", NULL);
    gr_re_t *nonsur[] = {
        B(j, '\\', '\\', true), B(j, 'u', 'u', false),
        lp__gr_re_alt2(rb, lp__gr_re_cat(rb, (gr_re_t *[]){hexd(j, "09acAC", "efEF"), hx, hx, hx}, 4),
                       lp__gr_re_cat(rb, (gr_re_t *[]){hexd(j, "dd", "DD"), B(j, '0', '7', false), hx, hx}, 4)),
    };
    gr_re_t *u1 = lp__gr_re_cat(rb, nonsur, 3);
    /* a surrogate pair: one character */
    gr_re_t *pair[] = {
        B(j, '\\', '\\', true), B(j, 'u', 'u', false), hexd(j, "dd", "DD"), hexd(j, "89abAB", NULL), hx, hx,
        B(j, '\\', '\\', false), B(j, 'u', 'u', false), hexd(j, "dd", "DD"), hexd(j, "cfCF", NULL), hx, hx,
    };
    gr_re_t *u2 = lp__gr_re_cat(rb, pair, 12);
    gr_re_t *one[] = {chars, u1, u2};
    return lp__gr_re_rep(rb, lp__gr_re_alt(rb, one, 3), 0, GR_RE_INF);
}

gr_re_t *lp__gr_json_quoted(gr_json_t *j, gr_re_t *body)
{
    gr_re_t *k[3] = {B(j, '"', '"', false), body, B(j, '"', '"', false)};
    return lp__gr_re_cat(&j->rb, k, 3);
}

static gr_re_t *integer_re(gr_json_t *j)
{
    gr_rebuf_t *rb = &j->rb;
    gr_re_t *minus = lp__gr_re_rep(rb, B(j, '-', '-', false), 0, 1);
    gr_re_t *nz = lp__gr_re_cat2(rb, B(j, '1', '9', false), lp__gr_re_rep(rb, B(j, '0', '9', false), 0, GR_RE_INF));
    gr_re_t *in = lp__gr_re_alt2(rb, B(j, '0', '0', false), nz);
    return lp__gr_re_cat2(rb, minus, in);
}

static gr_re_t *number_re(gr_json_t *j)
{
    gr_rebuf_t *rb = &j->rb;
    gr_re_t *digits = lp__gr_re_rep(rb, B(j, '0', '9', false), 1, GR_RE_INF);
    gr_re_t *frac = lp__gr_re_rep(rb, lp__gr_re_cat2(rb, B(j, '.', '.', false), digits), 0, 1);
    gr_re_t *ek[3] = {lp__gr_re_alt2(rb, B(j, 'e', 'e', false), B(j, 'E', 'E', false)),
                      lp__gr_re_rep(rb, lp__gr_re_alt2(rb, B(j, '+', '+', false), B(j, '-', '-', false)), 0, 1),
                      digits};
    gr_re_t *exp = lp__gr_re_rep(rb, lp__gr_re_cat(rb, ek, 3), 0, 1);
    gr_re_t *k[3] = {integer_re(j), frac, exp};
    return lp__gr_re_cat(rb, k, 3);
}

/* The common pieces, built once per process and embedded as DFAs (a
 * string's body with every escape is a few hundred NFA states: building it
 * again for every string lexeme would dominate compile times). */
static gr_dfa_t *common[4];
static int common_rc;
static pthread_once_t common_once = PTHREAD_ONCE_INIT;
enum { C_BODY, C_NUMBER, C_INTEGER, C_ANY };

static void common_build(void)
{
    gr_grammar_t g;
    gr_json_t j;
    lp__gr_grammar_init(&g);
    lp__gr_json_init(&j, &g, false);
    gr_cset_t all = {0};
    gr_re_t *any = NULL;
    if (!lp__gr_cs_negate(&all)) any = lp__gr_re_rep(&j.rb, lp__gr_re_chars(&j.rb, &all), 0, GR_RE_INF);
    lp__gr_cs_free(&all);
    struct {
        gr_re_t *re;
        enum gr_enc enc;
    } k[4] = {{str_body_re(&j), GR_ENC_JSON}, {number_re(&j), GR_ENC_UTF8},
              {lp__gr_re_cat2(&j.rb, lp__gr_re_rep(&j.rb, lp__gr_re_byte(&j.rb, '-', '-', false), 0, 1), integer_re(&j)),
               GR_ENC_UTF8},
              {any, GR_ENC_JSON}};
    for (int i = 0; i < 4 && !common_rc; i++)
        common_rc = k[i].re ? lp__gr_dfa_from_re(k[i].re, k[i].enc, 1000, &common[i]) : LP_ERR(ENOMEM);
    lp__gr_json_free(&j);
    lp__gr_grammar_free(&g);
}

static gr_re_t *common_re(gr_json_t *j, int which)
{
    pthread_once(&common_once, common_build);
    if (common_rc) return NULL;
    return lp__gr_re_dfa(&j->rb, common[which]);
}

gr_re_t *lp__gr_json_str_body(gr_json_t *j) { return common_re(j, C_BODY); }
gr_re_t *lp__gr_json_number(gr_json_t *j) { return common_re(j, C_NUMBER); }
gr_re_t *lp__gr_json_int(gr_json_t *j) { return common_re(j, C_INTEGER); }
gr_re_t *lp__gr_json_any_content(gr_json_t *j) { return common_re(j, C_ANY); }

const gr_dfa_t *lp__gr_json_any_content_dfa(void)
{
    pthread_once(&common_once, common_build);
    return common_rc ? NULL : common[C_ANY];
}

/* ---- rules ----------------------------------------------------------------------------- */

static bool dfa_equal(const gr_dfa_t *a, const gr_dfa_t *b)
{
    if (a->n_states != b->n_states || a->n_cls != b->n_cls || memcmp(a->cls, b->cls, 256)) return false;
    size_t n = (size_t)a->n_states * a->n_cls;
    if (memcmp(a->next, b->next, n * sizeof(int32_t)) ||
        memcmp(a->tag, b->tag, a->n_states * sizeof(int32_t)))
        return false;
    if (!a->cnt != !b->cnt) return false;
    return !a->cnt || !memcmp(a->cnt, b->cnt, n);
}

int64_t lp__gr_json_lex_dfa(gr_json_t *j, gr_dfa_t *d, const char *name)
{
    for (uint32_t i = 0; i < j->lex_hash.n; i++)
        if (j->lex_hash.v[i] == d->hash && dfa_equal(j->g->rules.v[j->lex_id.v[i]].dfa, d)) {
            lp__gr_dfa_unref(&d);
            return j->lex_id.v[i];
        }
    if (d->n_states > j->budget) {
        lp__gr_dfa_unref(&d);
        return lp_error_set(LP_ERR(E2BIG), "grammar too large (its lexemes need over %u DFA states)",
                            400000u);
    }
    j->budget -= d->n_states;
    uint64_t h = d->hash;
    int64_t id = lp__gr_add_lex(j->g, d, name);
    if (id < 0) return id;
    if (GR_PUSH(j->lex_hash, h) || GR_PUSH(j->lex_id, (uint32_t)id))
        return lp_error_set(LP_ERR(ENOMEM), "out of memory building a grammar");
    return id;
}

int64_t lp__gr_json_lex(gr_json_t *j, const gr_re_t *re, enum gr_enc enc, const char *name)
{
    if (!re) return lp_error_set(LP_ERR(E2BIG), "expression too large");
    gr_dfa_t *d;
    int rc = lp__gr_dfa_from_re(re, enc, j->max_dfa, &d);
    if (rc) return rc;
    return lp__gr_json_lex_dfa(j, d, name);
}

int64_t lp__gr_json_punct(gr_json_t *j, uint32_t *slot, const char *ch, int ws_before, int ws_after)
{
    if (*slot != GR_NONE) return *slot;
    gr_re_t *k[3];
    uint32_t n = 0;
    if (ws_before) k[n++] = lp__gr_json_ws(j);
    k[n++] = lp__gr_json_lit(j, ch);
    if (ws_after) k[n++] = lp__gr_json_ws(j);
    char name[16];
    snprintf(name, sizeof(name), "'%s'", ch);
    int64_t id = lp__gr_json_lex(j, lp__gr_re_cat(&j->rb, k, n), GR_ENC_UTF8, name);
    if (id >= 0) *slot = (uint32_t)id;
    return id;
}

int64_t lp__gr_json_key_any(gr_json_t *j)
{
    if (j->key_any != GR_NONE) return j->key_any;
    gr_re_t *k[4] = {lp__gr_json_quoted(j, lp__gr_json_str_body(j)), lp__gr_json_ws(j),
                     lp__gr_json_lit(j, ":"), lp__gr_json_ws(j)};
    int64_t id = lp__gr_json_lex(j, lp__gr_re_cat(&j->rb, k, 4), GR_ENC_JSON, "key");
    if (id >= 0) j->key_any = (uint32_t)id;
    return id;
}

static int64_t scalar_any(gr_json_t *j)
{
    if (j->scalar_any != GR_NONE) return j->scalar_any;
    gr_re_t *k[5] = {lp__gr_json_quoted(j, lp__gr_json_str_body(j)), lp__gr_json_number(j),
                     lp__gr_json_lit(j, "true"), lp__gr_json_lit(j, "false"), lp__gr_json_lit(j, "null")};
    int64_t id = lp__gr_json_lex(j, lp__gr_re_alt(&j->rb, k, 5), GR_ENC_JSON, "scalar");
    if (id >= 0) j->scalar_any = (uint32_t)id;
    return id;
}

int64_t lp__gr_json_choice(gr_json_t *j, const uint32_t *alts, uint32_t n, const char *name)
{
    int64_t id = lp__gr_add_seq(j->g, name);
    if (id < 0) return id;
    gr_seqb_t b = {0};
    uint32_t s0 = lp__gr_seqb_state(&b), f = lp__gr_seqb_state(&b);
    if (s0 == GR_NONE || f == GR_NONE) {
        lp__gr_seqb_free(&b);
        return lp_error_set(LP_ERR(ENOMEM), "out of memory building a grammar");
    }
    b.final.v[f] = 1;
    for (uint32_t i = 0; i < n; i++) {
        gr_edge_t e = {alts[i], GR_TAG_ANY, f, 0, 0, 0, 0};
        int rc = lp__gr_seqb_edge(&b, s0, e);
        if (rc) {
            lp__gr_seqb_free(&b);
            return rc;
        }
    }
    int rc = lp__gr_set_seq(j->g, (uint32_t)id, &b);
    return rc ? rc : id;
}

/* Reserve the three recursive rules, then fill them. */
static int any_rules(gr_json_t *j)
{
    if (j->value_any != GR_NONE) return 0;
    int64_t v = lp__gr_add_seq(j->g, "any value");
    int64_t o = v >= 0 ? lp__gr_add_seq(j->g, "any object") : v;
    int64_t a = o >= 0 ? lp__gr_add_seq(j->g, "any array") : o;
    if (a < 0) return (int)a;
    j->value_any = (uint32_t)v;
    j->obj_any = (uint32_t)o;
    j->arr_any = (uint32_t)a;
    int64_t sc = scalar_any(j), key = lp__gr_json_key_any(j), lb = GR_J_LBRACE(j), rb = GR_J_RBRACE(j),
            rb0 = GR_J_RBRACE0(j), lk = GR_J_LBRACKET(j), rk = GR_J_RBRACKET(j), rk0 = GR_J_RBRACKET0(j),
            cm = GR_J_COMMA(j);
    if (sc < 0) return (int)sc;
    if (key < 0) return (int)key;
    if (lb < 0 || rb < 0 || rb0 < 0 || lk < 0 || rk < 0 || rk0 < 0 || cm < 0)
        return lp_error_set(LP_ERR(ENOMEM), "out of memory building a grammar");
    int rc;
    /* value: scalar | object | array */
    {
        gr_seqb_t b = {0};
        uint32_t s0 = lp__gr_seqb_state(&b), f = lp__gr_seqb_state(&b);
        if (f == GR_NONE) return lp_error_set(LP_ERR(ENOMEM), "out of memory building a grammar");
        b.final.v[f] = 1;
        uint32_t alts[3] = {(uint32_t)sc, (uint32_t)o, (uint32_t)a};
        for (int i = 0; i < 3; i++) {
            if ((rc = lp__gr_seqb_edge(&b, s0, (gr_edge_t){alts[i], GR_TAG_ANY, f, 0, 0, 0, 0}))) {
                lp__gr_seqb_free(&b);
                return rc;
            }
        }
        if ((rc = lp__gr_set_seq(j->g, (uint32_t)v, &b))) return rc;
    }
    /* object: { (} | key value (, key value)* }) */
    {
        gr_seqb_t b = {0};
        uint32_t s[6];
        for (int i = 0; i < 6; i++) s[i] = lp__gr_seqb_state(&b);
        if (s[5] == GR_NONE) return lp_error_set(LP_ERR(ENOMEM), "out of memory building a grammar");
        b.final.v[s[5]] = 1;
        struct { uint32_t from, callee, to; } E[] = {
            {s[0], (uint32_t)lb, s[1]}, {s[1], (uint32_t)rb0, s[5]}, {s[1], (uint32_t)key, s[2]},
            {s[2], (uint32_t)v, s[3]},  {s[3], (uint32_t)cm, s[4]},  {s[3], (uint32_t)rb, s[5]},
            {s[4], (uint32_t)key, s[2]},
        };
        for (size_t i = 0; i < sizeof(E) / sizeof(E[0]); i++)
            if ((rc = lp__gr_seqb_edge(&b, E[i].from, (gr_edge_t){E[i].callee, GR_TAG_ANY, E[i].to, 0, 0, 0, 0}))) {
                lp__gr_seqb_free(&b);
                return rc;
            }
        if ((rc = lp__gr_set_seq(j->g, (uint32_t)o, &b))) return rc;
    }
    /* array: [ (] | value (, value)* ]) */
    {
        gr_seqb_t b = {0};
        uint32_t s[5];
        for (int i = 0; i < 5; i++) s[i] = lp__gr_seqb_state(&b);
        if (s[4] == GR_NONE) return lp_error_set(LP_ERR(ENOMEM), "out of memory building a grammar");
        b.final.v[s[4]] = 1;
        struct { uint32_t from, callee, to; } E[] = {
            {s[0], (uint32_t)lk, s[1]}, {s[1], (uint32_t)rk0, s[4]}, {s[1], (uint32_t)v, s[2]},
            {s[2], (uint32_t)cm, s[3]}, {s[2], (uint32_t)rk, s[4]},  {s[3], (uint32_t)v, s[2]},
        };
        for (size_t i = 0; i < sizeof(E) / sizeof(E[0]); i++)
            if ((rc = lp__gr_seqb_edge(&b, E[i].from, (gr_edge_t){E[i].callee, GR_TAG_ANY, E[i].to, 0, 0, 0, 0}))) {
                lp__gr_seqb_free(&b);
                return rc;
            }
        if ((rc = lp__gr_set_seq(j->g, (uint32_t)a, &b))) return rc;
    }
    return 0;
}

int64_t lp__gr_json_value_any(gr_json_t *j)
{
    int rc = any_rules(j);
    return rc ? (int64_t)rc : (int64_t)j->value_any;
}

int64_t lp__gr_json_obj_any(gr_json_t *j)
{
    int rc = any_rules(j);
    return rc ? (int64_t)rc : (int64_t)j->obj_any;
}

int64_t lp__gr_json_arr_any(gr_json_t *j)
{
    int rc = any_rules(j);
    return rc ? (int64_t)rc : (int64_t)j->arr_any;
}

/* ---- JSON mode -------------------------------------------------------------------------- */

int lp__gr_compile_json_object(gr_grammar_t *g, const gr_json_opts_t *o)
{
    gr_json_t j;
    lp__gr_json_init(&j, g, o->compact);
    int64_t id = lp__gr_json_obj_any(&j);
    lp__gr_json_free(&j);
    if (id < 0) return (int)id;
    g->root = (uint32_t)id;
    return 0;
}
