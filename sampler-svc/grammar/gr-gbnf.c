/* gr-gbnf.c - llama.cpp's GBNF (grammars/README.md): rules `name ::= ...`
 * with literals, character classes, `.`, groups, alternation, * + ? {m}
 * {m,} {m,n}, rule references, # comments; "root" is the start.
 *
 * A rule that reaches no recursion is regular: it is inlined into one
 * expression and becomes a single lexeme (one DFA).  A recursive rule is a
 * SEQ rule; each stretch of its body free of recursive references becomes
 * a lexeme it calls.  Token references (<[id]>, <text>, !<...>) are refused:
 * this engine matches text.  Left recursion is refused, as in llama.cpp. */
#include "gr-internal.h"

#include "error.h"

#include <stdio.h>

#define MAX_RULES 4096
#define MAX_NODES 200000

/* the body of a rule: expressions over characters and rule references */
enum { G_TERM, G_REF, G_CAT, G_ALT, G_REP };

typedef struct gnode gnode_t;
struct gnode {
    uint8_t kind;
    uint32_t ref;     /* G_REF: rule index */
    uint32_t min, max;
    gr_re_t *term;    /* G_TERM */
    uint32_t n;
    gnode_t **kids;
};

typedef struct {
    const char *name;
    size_t len;
    gnode_t *body;     /* NULL: referenced, not (yet) defined */
    int mark;          /* SCC / DFS scratch */
    bool recursive;    /* on a cycle of references */
    bool regular;      /* reaches no recursive rule */
    uint32_t id;       /* IR rule, GR_NONE until made */
    gr_re_t *re;       /* regular: the inlined expression */
    size_t at;         /* where it was first referenced (messages) */
    const lp_grammar_schema_rule_t *ext; /* defined by a JSON Schema */
} grule_t;

typedef struct {
    const char *s;
    size_t n, i;
    int depth;
    gr_rebuf_t rb;
    lp__gr_arena_t arena;
    GR_VEC(grule_t) rules;
    uint32_t nodes;
    int rc;
    gr_grammar_t *g;
    const gr_json_opts_t *jo;
} gp_t;

static int gfail(gp_t *p, int code, const char *what)
{
    if (!p->rc) {
        /* line and column of p->i */
        size_t line = 1, col = 1;
        for (size_t k = 0; k < p->i && k < p->n; k++) {
            if (p->s[k] == '\n') line++, col = 1;
            else col++;
        }
        p->rc = lp_error_set(code, "gbnf: line %zu column %zu: %s", line, col, what);
    }
    return p->rc;
}

static gnode_t *gnew(gp_t *p, uint8_t kind)
{
    if (++p->nodes > MAX_NODES) {
        gfail(p, LP_ERR(E2BIG), "grammar too large");
        return NULL;
    }
    gnode_t *x = lp__gr_zalloc(&p->arena, sizeof(*x));
    if (!x) gfail(p, LP_ERR(ENOMEM), "out of memory");
    if (x) x->kind = kind;
    return x;
}

static gnode_t *gnary(gp_t *p, uint8_t kind, gnode_t **kids, uint32_t n)
{
    if (n == 1) return kids[0];
    gnode_t *x = gnew(p, kind);
    if (!x || !n) return x; /* an empty sequence: the empty text */
    x->kids = lp__gr_memdup(&p->arena, kids, n * sizeof(*kids));
    if (!x->kids) {
        gfail(p, LP_ERR(ENOMEM), "out of memory");
        return NULL;
    }
    x->n = n;
    return x;
}

/* ---- parsing ----------------------------------------------------------------------------- */

static bool is_name(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Skip blanks and comments; newlines only if nl. */
static void gspace(gp_t *p, bool nl)
{
    while (p->i < p->n) {
        char c = p->s[p->i];
        if (c == '#') {
            while (p->i < p->n && p->s[p->i] != '\n' && p->s[p->i] != '\r') p->i++;
        } else if (c == ' ' || c == '\t' || (nl && (c == '\n' || c == '\r'))) {
            p->i++;
        } else {
            break;
        }
    }
}

static int32_t ghex(gp_t *p, int n)
{
    uint32_t v = 0;
    for (int k = 0; k < n; k++) {
        if (p->i >= p->n) return gfail(p, LP_ERR(EINVAL), "bad escape"), -1;
        char c = p->s[p->i++];
        int h = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (h < 0) return gfail(p, LP_ERR(EINVAL), "bad hex escape"), -1;
        v = v * 16 + (uint32_t)h;
    }
    if (v > GR_CP_MAX || (v >= 0xD800 && v <= 0xDFFF)) return gfail(p, LP_ERR(EINVAL), "escape is not a character"), -1;
    return (int32_t)v;
}

/* One character of a literal or class (escapes as llama.cpp reads them). */
static int32_t gchar(gp_t *p)
{
    if (p->i >= p->n) return gfail(p, LP_ERR(EINVAL), "unexpected end"), -1;
    if (p->s[p->i] != '\\') {
        size_t len;
        int32_t cp = lp__gr_utf8_next((const uint8_t *)p->s + p->i, p->n - p->i, &len);
        if (cp < 0) return gfail(p, LP_ERR(EINVAL), "invalid UTF-8"), -1;
        p->i += len;
        return cp;
    }
    p->i++;
    if (p->i >= p->n) return gfail(p, LP_ERR(EINVAL), "escape at the end"), -1;
    char c = p->s[p->i++];
    switch (c) {
    case 'x': return ghex(p, 2);
    case 'u': return ghex(p, 4);
    case 'U': return ghex(p, 8);
    case 't': return '\t';
    case 'r': return '\r';
    case 'n': return '\n';
    case '\\': case '"': case '[': case ']': case '-': case '^': return c;
    default:
        p->i--;
        return gfail(p, LP_ERR(EINVAL), "unknown escape"), -1;
    }
}

static uint32_t rule_index(gp_t *p, const char *name, size_t len, size_t at)
{
    for (uint32_t i = 0; i < p->rules.n; i++)
        if (p->rules.v[i].len == len && !memcmp(p->rules.v[i].name, name, len)) return i;
    if (p->rules.n >= MAX_RULES) {
        gfail(p, LP_ERR(E2BIG), "too many rules");
        return GR_NONE;
    }
    grule_t r = {name, len, NULL, 0, false, false, GR_NONE, NULL, at, NULL};
    if (GR_PUSH(p->rules, r)) {
        gfail(p, LP_ERR(ENOMEM), "out of memory");
        return GR_NONE;
    }
    return p->rules.n - 1;
}

static gnode_t *galt(gp_t *p, bool nested);

static gnode_t *gterm(gp_t *p, gr_re_t *re)
{
    if (!re) {
        gfail(p, LP_ERR(E2BIG), "grammar too large");
        return NULL;
    }
    gnode_t *x = gnew(p, G_TERM);
    if (x) x->term = re;
    return x;
}

static gnode_t *gprimary(gp_t *p, bool nested)
{
    char c = p->s[p->i];
    if (c == '"') {
        p->i++;
        GR_VEC(gr_re_t *) k = {0};
        while (p->i < p->n && p->s[p->i] != '"') {
            int32_t cp = gchar(p);
            if (cp < 0 || GR_PUSH(k, lp__gr_re_char(&p->rb, (uint32_t)cp))) {
                GR_FREE(k);
                if (cp >= 0) gfail(p, LP_ERR(ENOMEM), "out of memory");
                return NULL;
            }
        }
        if (p->i >= p->n) {
            GR_FREE(k);
            gfail(p, LP_ERR(EINVAL), "unterminated literal");
            return NULL;
        }
        p->i++;
        gr_re_t *r = lp__gr_re_cat(&p->rb, k.v, k.n);
        GR_FREE(k);
        return gterm(p, r);
    }
    if (c == '[') {
        p->i++;
        bool neg = false;
        if (p->i < p->n && p->s[p->i] == '^') neg = true, p->i++;
        gr_cset_t cs = {0};
        while (p->i < p->n && p->s[p->i] != ']') {
            int32_t lo = gchar(p), hi;
            if (lo < 0) {
                lp__gr_cs_free(&cs);
                return NULL;
            }
            hi = lo;
            if (p->i + 1 < p->n && p->s[p->i] == '-' && p->s[p->i + 1] != ']') {
                p->i++;
                hi = gchar(p);
                if (hi < 0) {
                    lp__gr_cs_free(&cs);
                    return NULL;
                }
                if (hi < lo) {
                    lp__gr_cs_free(&cs);
                    gfail(p, LP_ERR(EINVAL), "range out of order");
                    return NULL;
                }
            }
            if (lp__gr_cs_add(&cs, (uint32_t)lo, (uint32_t)hi)) {
                lp__gr_cs_free(&cs);
                gfail(p, LP_ERR(ENOMEM), "out of memory");
                return NULL;
            }
        }
        if (p->i >= p->n) {
            lp__gr_cs_free(&cs);
            gfail(p, LP_ERR(EINVAL), "unterminated character class");
            return NULL;
        }
        p->i++;
        if (neg && lp__gr_cs_negate(&cs)) {
            lp__gr_cs_free(&cs);
            gfail(p, LP_ERR(ENOMEM), "out of memory");
            return NULL;
        }
        gr_re_t *r = lp__gr_re_chars(&p->rb, &cs);
        lp__gr_cs_free(&cs);
        return gterm(p, r);
    }
    if (c == '.') {
        p->i++;
        gr_cset_t cs = {0};
        gr_re_t *r = lp__gr_cs_negate(&cs) ? NULL : lp__gr_re_chars(&p->rb, &cs); /* any character */
        lp__gr_cs_free(&cs);
        return gterm(p, r);
    }
    if (c == '(') {
        p->i++;
        if (++p->depth > 200) {
            gfail(p, LP_ERR(E2BIG), "groups nested too deep");
            return NULL;
        }
        gspace(p, true);
        gnode_t *x = galt(p, true);
        p->depth--;
        if (!x) return NULL;
        if (p->i >= p->n || p->s[p->i] != ')') {
            gfail(p, LP_ERR(EINVAL), "expected ')'");
            return NULL;
        }
        p->i++;
        return x;
    }
    if (c == '<' || c == '!') {
        gfail(p, LP_ERR(ENOTSUP), "token references (<...>) are not supported: this engine matches text");
        return NULL;
    }
    if (is_name(c)) {
        size_t st = p->i;
        while (p->i < p->n && is_name(p->s[p->i])) p->i++;
        uint32_t idx = rule_index(p, p->s + st, p->i - st, st);
        if (idx == GR_NONE) return NULL;
        gnode_t *x = gnew(p, G_REF);
        if (x) x->ref = idx;
        return x;
    }
    (void)nested;
    gfail(p, LP_ERR(EINVAL), "expected a literal, a class, a group or a rule name");
    return NULL;
}

static bool gcount(gp_t *p, uint32_t *out)
{
    uint64_t v = 0;
    size_t st = p->i;
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
        v = v * 10 + (uint64_t)(p->s[p->i++] - '0');
        if (v > 100000) v = 100000;
    }
    *out = (uint32_t)v;
    return p->i > st;
}

static gnode_t *gsequence(gp_t *p, bool nested)
{
    GR_VEC(gnode_t *) k = {0};
    gnode_t *out = NULL;
    for (;;) {
        gspace(p, nested);
        if (p->i >= p->n) break;
        char c = p->s[p->i];
        if (c == '|' || c == ')' || c == '\n' || c == '\r') break;
        gnode_t *x = gprimary(p, nested);
        if (!x) goto done;
        gspace(p, false);
        while (p->i < p->n) {
            char q = p->s[p->i];
            uint32_t mn, mx;
            if (q == '*') mn = 0, mx = GR_RE_INF, p->i++;
            else if (q == '+') mn = 1, mx = GR_RE_INF, p->i++;
            else if (q == '?') mn = 0, mx = 1, p->i++;
            else if (q == '{') {
                p->i++;
                gspace(p, false);
                if (!gcount(p, &mn)) {
                    gfail(p, LP_ERR(EINVAL), "expected a number after '{'");
                    goto done;
                }
                gspace(p, false);
                mx = mn;
                if (p->i < p->n && p->s[p->i] == ',') {
                    p->i++;
                    gspace(p, false);
                    if (!gcount(p, &mx)) mx = GR_RE_INF;
                    gspace(p, false);
                }
                if (p->i >= p->n || p->s[p->i] != '}') {
                    gfail(p, LP_ERR(EINVAL), "expected '}'");
                    goto done;
                }
                p->i++;
                if (mx < mn) {
                    gfail(p, LP_ERR(EINVAL), "repetition bounds out of order");
                    goto done;
                }
            } else {
                break;
            }
            gnode_t *r = gnew(p, G_REP);
            if (!r) goto done;
            r->min = mn;
            r->max = mx;
            r->kids = lp__gr_alloc(&p->arena, sizeof(gnode_t *));
            if (!r->kids) {
                gfail(p, LP_ERR(ENOMEM), "out of memory");
                goto done;
            }
            r->kids[0] = x;
            r->n = 1;
            x = r;
            gspace(p, false);
        }
        if (GR_PUSH(k, x)) {
            gfail(p, LP_ERR(ENOMEM), "out of memory");
            goto done;
        }
    }
    out = gnary(p, G_CAT, k.v, k.n);
done:
    GR_FREE(k);
    return out;
}

static gnode_t *galt(gp_t *p, bool nested)
{
    GR_VEC(gnode_t *) k = {0};
    gnode_t *out = NULL;
    for (;;) {
        gnode_t *x = gsequence(p, nested);
        if (!x || GR_PUSH(k, x)) {
            if (x) gfail(p, LP_ERR(ENOMEM), "out of memory");
            goto done;
        }
        gspace(p, nested);
        if (p->i < p->n && p->s[p->i] == '|') {
            p->i++;
            gspace(p, true); /* a newline after '|' continues the rule */
            continue;
        }
        break;
    }
    out = gnary(p, G_ALT, k.v, k.n);
done:
    GR_FREE(k);
    return out;
}

static int gparse(gp_t *p)
{
    for (;;) {
        gspace(p, true);
        if (p->i >= p->n) break;
        size_t st = p->i;
        while (p->i < p->n && is_name(p->s[p->i])) p->i++;
        if (p->i == st) return gfail(p, LP_ERR(EINVAL), "expected a rule name");
        size_t nl = p->i - st;
        gspace(p, false);
        if (p->i + 3 > p->n || memcmp(p->s + p->i, "::=", 3)) return gfail(p, LP_ERR(EINVAL), "expected '::='");
        p->i += 3;
        gspace(p, true);
        uint32_t idx = rule_index(p, p->s + st, nl, st);
        if (idx == GR_NONE) return p->rc;
        if (p->rules.v[idx].body) {
            p->i = st;
            return gfail(p, LP_ERR(EINVAL), "rule defined twice");
        }
        gnode_t *b = galt(p, false);
        if (!b) return p->rc;
        p->rules.v[idx].body = b;
        gspace(p, false);
        if (p->i < p->n && p->s[p->i] != '\n' && p->s[p->i] != '\r')
            return gfail(p, LP_ERR(EINVAL), "expected the end of the line");
    }
    return 0;
}

/* ---- analysis ------------------------------------------------------------------------------ */

static void collect_refs(const gnode_t *x, lp__gr_u32v_t *out, int *err)
{
    if (!x) return; /* a rule from a JSON Schema */
    if (x->kind == G_REF) {
        if (GR_PUSH(*out, x->ref)) *err = LP_ERR(ENOMEM);
        return;
    }
    for (uint32_t i = 0; i < x->n; i++) collect_refs(x->kids[i], out, err);
}

/* Tarjan's SCC over rule references: recursive = on a cycle. */
typedef struct {
    gp_t *p;
    lp__gr_u32v_t *adj;
    uint32_t *idx, *low, counter;
    lp__gr_u32v_t stack;
    uint8_t *on;
} scc_t;

static void strong(scc_t *s, uint32_t v, int depth)
{
    if (depth > 10000) return;
    s->idx[v] = s->low[v] = ++s->counter;
    if (GR_PUSH(s->stack, v)) return;
    s->on[v] = 1;
    for (uint32_t k = 0; k < s->adj[v].n; k++) {
        uint32_t w = s->adj[v].v[k];
        if (!s->idx[w]) {
            strong(s, w, depth + 1);
            if (s->low[w] < s->low[v]) s->low[v] = s->low[w];
        } else if (s->on[w] && s->idx[w] < s->low[v]) {
            s->low[v] = s->idx[w];
        }
    }
    if (s->low[v] == s->idx[v]) {
        uint32_t n = 0, w;
        uint32_t base = s->stack.n;
        do {
            w = s->stack.v[--base];
            n++;
        } while (w != v);
        bool self = false;
        for (uint32_t k = 0; k < s->adj[v].n; k++) self |= s->adj[v].v[k] == v;
        for (uint32_t i = base; i < s->stack.n; i++) {
            s->on[s->stack.v[i]] = 0;
            if (n > 1 || self) s->p->rules.v[s->stack.v[i]].recursive = true;
        }
        s->stack.n = base;
    }
}

static gr_re_t *to_re(gp_t *p, const gnode_t *x);

static gr_re_t *rule_re(gp_t *p, uint32_t r)
{
    grule_t *g = &p->rules.v[r];
    if (!g->re) g->re = to_re(p, g->body);
    return g->re;
}

/* A regular body as one expression (references inlined). */
static gr_re_t *to_re(gp_t *p, const gnode_t *x)
{
    switch (x->kind) {
    case G_TERM: return x->term;
    case G_REF: return rule_re(p, x->ref);
    case G_REP: return lp__gr_re_rep(&p->rb, to_re(p, x->kids[0]), x->min, x->max);
    case G_CAT:
    case G_ALT: {
        GR_VEC(gr_re_t *) k = {0};
        gr_re_t *out = NULL;
        for (uint32_t i = 0; i < x->n; i++) {
            gr_re_t *r = to_re(p, x->kids[i]);
            if (!r || GR_PUSH(k, r)) goto done;
        }
        out = x->kind == G_CAT ? lp__gr_re_cat(&p->rb, k.v, k.n) : lp__gr_re_alt(&p->rb, k.v, k.n);
    done:
        GR_FREE(k);
        return out;
    }
    }
    return NULL;
}

static bool node_regular(gp_t *p, const gnode_t *x)
{
    if (x->kind == G_REF) return p->rules.v[x->ref].regular;
    for (uint32_t i = 0; i < x->n; i++)
        if (!node_regular(p, x->kids[i])) return false;
    return true;
}

/* ---- building --------------------------------------------------------------------------------- */

static int rule_id(gp_t *p, uint32_t r, uint32_t *out);

static int lex_of(gp_t *p, gr_re_t *re, const char *name, uint32_t *out)
{
    if (!re) return gfail(p, LP_ERR(E2BIG), "grammar too large");
    gr_dfa_t *d;
    int rc = lp__gr_dfa_from_re(re, GR_ENC_UTF8, 50000, &d);
    if (rc) {
        lp_error_prefix("gbnf: rule '%s': ", name);
        return p->rc = rc;
    }
    int64_t id = lp__gr_add_lex(p->g, d, name);
    if (id < 0) return p->rc = (int)id;
    *out = (uint32_t)id;
    return 0;
}

/* Thompson construction over calls: a regular stretch is one call to its
 * lexeme; a reference to a recursive rule is a call to it. */
typedef struct {
    gr_seqb_t b;
    GR_VEC(gr_edge_t) eps; /* callee GR_NONE: epsilon, from in .arg */
} nb_t;

static int nb_state(gp_t *p, nb_t *nb, uint32_t *s)
{
    *s = lp__gr_seqb_state(&nb->b);
    return *s == GR_NONE ? gfail(p, LP_ERR(ENOMEM), "out of memory") : 0;
}

static int nb_eps(gp_t *p, nb_t *nb, uint32_t from, uint32_t to)
{
    gr_edge_t e = {GR_NONE, GR_TAG_ANY, to, 0, 0, from, 0};
    return GR_PUSH(nb->eps, e) ? gfail(p, LP_ERR(ENOMEM), "out of memory") : 0;
}

static int nb_build(gp_t *p, nb_t *nb, const gnode_t *x, uint32_t s, uint32_t e, const char *name)
{
    int rc;
    if (nb->b.final.n > 200000) return gfail(p, LP_ERR(E2BIG), "grammar too large");
    if (node_regular(p, x)) {
        uint32_t id = 0;
        if ((rc = lex_of(p, to_re(p, x), name, &id))) return rc;
        return lp__gr_seqb_edge(&nb->b, s, (gr_edge_t){id, GR_TAG_ANY, e, 0, 0, 0, 0});
    }
    switch (x->kind) {
    case G_REF: {
        uint32_t id;
        if ((rc = rule_id(p, x->ref, &id))) return rc;
        return lp__gr_seqb_edge(&nb->b, s, (gr_edge_t){id, GR_TAG_ANY, e, 0, 0, 0, 0});
    }
    case G_CAT: {
        uint32_t cur = s;
        for (uint32_t i = 0; i < x->n; i++) {
            uint32_t nx = e;
            if (i + 1 < x->n && (rc = nb_state(p, nb, &nx))) return rc;
            if ((rc = nb_build(p, nb, x->kids[i], cur, nx, name))) return rc;
            cur = nx;
        }
        return x->n ? 0 : nb_eps(p, nb, s, e);
    }
    case G_ALT:
        for (uint32_t i = 0; i < x->n; i++) {
            uint32_t a, b;
            if ((rc = nb_state(p, nb, &a)) || (rc = nb_state(p, nb, &b))) return rc;
            if ((rc = nb_eps(p, nb, s, a)) || (rc = nb_build(p, nb, x->kids[i], a, b, name)) ||
                (rc = nb_eps(p, nb, b, e)))
                return rc;
        }
        return 0;
    case G_REP: {
        uint32_t cur = s;
        if (x->min > 1000 || (x->max != GR_RE_INF && x->max > 1000))
            return gfail(p, LP_ERR(E2BIG), "repetition over 1000 of a recursive rule");
        for (uint32_t i = 0; i < x->min; i++) {
            uint32_t nx;
            if ((rc = nb_state(p, nb, &nx)) || (rc = nb_build(p, nb, x->kids[0], cur, nx, name))) return rc;
            cur = nx;
        }
        if (x->max == GR_RE_INF) {
            uint32_t l;
            if ((rc = nb_state(p, nb, &l)) || (rc = nb_eps(p, nb, cur, l)) ||
                (rc = nb_build(p, nb, x->kids[0], l, l, name)) || (rc = nb_eps(p, nb, l, e)))
                return rc;
            return 0;
        }
        for (uint32_t i = x->min; i < x->max; i++) {
            uint32_t nx;
            if ((rc = nb_eps(p, nb, cur, e)) || (rc = nb_state(p, nb, &nx)) ||
                (rc = nb_build(p, nb, x->kids[0], cur, nx, name)))
                return rc;
            cur = nx;
        }
        return nb_eps(p, nb, cur, e);
    }
    }
    return gfail(p, LP_ERR(EINVAL), "bad grammar node");
}

/* The IR rule of GBNF rule r (made on first use). */
static int rule_id(gp_t *p, uint32_t r, uint32_t *out)
{
    grule_t *g = &p->rules.v[r];
    if (g->id != GR_NONE) {
        *out = g->id;
        return 0;
    }
    char name[80];
    snprintf(name, sizeof(name), "%.*s", (int)(g->len > 70 ? 70 : g->len), g->name);
    if (g->ext) {
        /* compiled into the same grammar; its root is the rule */
        uint32_t root = p->g->root;
        int rc = lp__gr_compile_schema(p->g, g->ext->schema, g->ext->schema_len, p->jo);
        if (rc) {
            lp_error_prefix("gbnf: rule '%s': ", name);
            return p->rc = rc;
        }
        g->id = *out = p->g->root;
        p->g->root = root;
        return 0;
    }
    if (g->regular) {
        int rc = lex_of(p, rule_re(p, r), name, &g->id);
        *out = g->id;
        return rc;
    }
    int64_t id = lp__gr_add_seq(p->g, name);
    if (id < 0) return p->rc = (int)id;
    g->id = (uint32_t)id;
    nb_t nb = {0};
    uint32_t s0, f;
    int rc = nb_state(p, &nb, &s0);
    if (!rc) rc = nb_state(p, &nb, &f);
    if (!rc) rc = nb_build(p, &nb, g->body, s0, f, name);
    if (!rc) {
        /* remove epsilons: each state takes the calls and finality of its closure */
        uint32_t ns = nb.b.final.n;
        nb.b.final.v[f] = 1;
        uint8_t *seen = malloc(ns);
        uint32_t *stk = malloc(ns * sizeof(uint32_t));
        lp__gr_u32v_t *out_eps = calloc(ns, sizeof(*out_eps));
        gr_seqb_t fin = {0};
        if (!seen || !stk || !out_eps) rc = gfail(p, LP_ERR(ENOMEM), "out of memory");
        for (uint32_t k = 0; k < nb.eps.n && !rc; k++)
            if (GR_PUSH(out_eps[nb.eps.v[k].arg], nb.eps.v[k].to)) rc = gfail(p, LP_ERR(ENOMEM), "out of memory");
        /* call edges by source */
        lp__gr_u32v_t *out_call = rc ? NULL : calloc(ns, sizeof(*out_call));
        if (!rc && !out_call) rc = gfail(p, LP_ERR(ENOMEM), "out of memory");
        for (uint32_t k = 0; k < nb.b.e.n && !rc; k++)
            if (GR_PUSH(out_call[nb.b.from.v[k]], k)) rc = gfail(p, LP_ERR(ENOMEM), "out of memory");
        for (uint32_t st = 0; st < ns && !rc; st++)
            if (lp__gr_seqb_state(&fin) == GR_NONE) rc = gfail(p, LP_ERR(ENOMEM), "out of memory");
        for (uint32_t st = 0; st < ns && !rc; st++) {
            memset(seen, 0, ns);
            uint32_t sp = 0;
            stk[sp++] = st;
            seen[st] = 1;
            while (sp && !rc) {
                uint32_t u = stk[--sp];
                if (nb.b.final.v[u]) fin.final.v[st] = 1;
                for (uint32_t k = 0; k < out_call[u].n && !rc; k++) {
                    gr_edge_t e = nb.b.e.v[out_call[u].v[k]];
                    rc = lp__gr_seqb_edge(&fin, st, e);
                }
                for (uint32_t k = 0; k < out_eps[u].n; k++) {
                    uint32_t w = out_eps[u].v[k];
                    if (!seen[w]) {
                        seen[w] = 1;
                        stk[sp++] = w;
                    }
                }
            }
        }
        for (uint32_t st = 0; out_eps && st < ns; st++) GR_FREE(out_eps[st]);
        for (uint32_t st = 0; out_call && st < ns; st++) GR_FREE(out_call[st]);
        free(out_eps);
        free(out_call);
        free(seen);
        free(stk);
        if (!rc) rc = lp__gr_set_seq(p->g, g->id, &fin);
        else lp__gr_seqb_free(&fin);
    }
    lp__gr_seqb_free(&nb.b);
    GR_FREE(nb.eps);
    *out = g->id;
    return rc;
}

int lp__gr_compile_gbnf(gr_grammar_t *g, const char *text, size_t len, const lp_grammar_schema_rule_t *ext,
                        size_t n_ext, const gr_json_opts_t *o)
{
    gp_t p = {.s = text, .n = len, .g = g, .jo = o};
    p.rb.max_nodes = 400000;
    int rc = gparse(&p);
    uint32_t root = GR_NONE;
    for (size_t k = 0; k < n_ext && !rc; k++) {
        size_t nl = strlen(ext[k].name);
        for (uint32_t i = 0; i < p.rules.n; i++) {
            grule_t *r = &p.rules.v[i];
            if (r->len != nl || memcmp(r->name, ext[k].name, nl)) continue;
            if (r->body || r->ext)
                rc = lp_error_set(LP_ERR(EINVAL), "gbnf: rule '%.60s' is defined %s", ext[k].name,
                                  r->ext ? "by two JSON Schemas" : "both in the grammar and by a JSON Schema");
            r->ext = &ext[k];
        }
    }
    if (!rc) {
        for (uint32_t i = 0; i < p.rules.n && !rc; i++)
            if (!p.rules.v[i].body && !p.rules.v[i].ext) {
                p.i = p.rules.v[i].at;
                char msg[120];
                snprintf(msg, sizeof(msg), "rule '%.*s' is used but not defined",
                         (int)(p.rules.v[i].len > 60 ? 60 : p.rules.v[i].len), p.rules.v[i].name);
                rc = gfail(&p, LP_ERR(EINVAL), msg);
            }
        for (uint32_t i = 0; i < p.rules.n && root == GR_NONE; i++)
            if (p.rules.v[i].len == 4 && !memcmp(p.rules.v[i].name, "root", 4)) root = i;
        if (!rc && root == GR_NONE) rc = lp_error_set(LP_ERR(EINVAL), "gbnf: no rule named 'root'");
    }
    if (!rc) {
        /* recursion (SCC) and regularity (fixpoint: reaches no recursive rule) */
        uint32_t n = p.rules.n;
        scc_t s = {&p, calloc(n, sizeof(lp__gr_u32v_t)), calloc(n, sizeof(uint32_t)), calloc(n, sizeof(uint32_t)), 0,
                   {0}, calloc(n, 1)};
        if (!s.adj || !s.idx || !s.low || !s.on) rc = lp_error_set(LP_ERR(ENOMEM), "gbnf: out of memory");
        int err = 0;
        for (uint32_t i = 0; i < n && !rc; i++) collect_refs(p.rules.v[i].body, &s.adj[i], &err);
        if (err) rc = lp_error_set(LP_ERR(ENOMEM), "gbnf: out of memory");
        for (uint32_t i = 0; i < n && !rc; i++)
            if (!s.idx[i]) strong(&s, i, 0);
        for (uint32_t i = 0; i < n; i++) p.rules.v[i].regular = !p.rules.v[i].recursive && !p.rules.v[i].ext;
        bool ch = true;
        while (ch && !rc) {
            ch = false;
            for (uint32_t i = 0; i < n; i++) {
                if (!p.rules.v[i].regular) continue;
                for (uint32_t k = 0; k < s.adj[i].n; k++)
                    if (!p.rules.v[s.adj[i].v[k]].regular) {
                        p.rules.v[i].regular = false;
                        ch = true;
                        break;
                    }
            }
        }
        for (uint32_t i = 0; s.adj && i < n; i++) GR_FREE(s.adj[i]);
        free(s.adj);
        free(s.idx);
        free(s.low);
        free(s.on);
        GR_FREE(s.stack);
    }
    if (!rc) {
        uint32_t id;
        rc = rule_id(&p, root, &id);
        if (!rc) g->root = id;
        if (!rc && g->rules.v[id].kind == GR_LEX) {
            /* a regular grammar: a single lexeme must not match only "" */
            const gr_dfa_t *d = g->rules.v[id].dfa;
            if (!d->n_states || (d->tag[0] >= 0 && d->sink[0]))
                rc = lp_error_set(LP_ERR(EINVAL), "gbnf: the grammar matches %s", d->n_states ? "only the empty text" : "nothing");
        }
    }
    if (rc && !p.rc) p.rc = rc;
    GR_FREE(p.rules);
    lp__gr_rebuf_free(&p.rb);
    lp__gr_arena_free(&p.arena);
    return rc ? rc : p.rc;
}
