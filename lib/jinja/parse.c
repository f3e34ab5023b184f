/* parse.c - tokens to a syntax tree, following jinja2's parser.py: the same
 * statements (plus loopcontrols' break/continue and transformers'
 * generation block), the same operator precedence, and the same rule for
 * unknown filters and tests (an error when the template is parsed, unless
 * they sit in an if or an inline if, where they fail only when run). */
#include "jinja-internal.h"
#include "lex.h"

#include "error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NEST 200 /* nested expressions and blocks; Python's own limit is near */

typedef struct parser {
    lexer_t lx;
    size_t pos;
    int depth;
    int loops;       /* enclosing for loops (break/continue are allowed) */
    arena_t *arena;
} parser_t;

#define FAIL(p, line, ...) lp__lex_fail(&(p)->lx, line, __VA_ARGS__)

static tok_t *cur(parser_t *p) { return &p->lx.toks[p->pos]; }
static tok_t *peek(parser_t *p)
{
    return p->pos + 1 < p->lx.n ? &p->lx.toks[p->pos + 1] : &p->lx.toks[p->lx.n - 1];
}
static tok_t *next(parser_t *p)
{
    tok_t *t = cur(p);
    if (t->kind != T_EOF) p->pos++;
    return t;
}

static bool is_op(tok_t *t, char op) { return t->kind == T_OP && t->op == (uint8_t)op; }
static bool is_name(tok_t *t, const char *name) { return t->kind == T_NAME && !strcmp(t->s, name); }

static const char *describe(tok_t *t, char *buf, size_t cap)
{
    switch (t->kind) {
    case T_EOF: return "end of template";
    case T_VAR_END: return "end of print statement";
    case T_BLOCK_END: return "end of statement block";
    case T_VAR_BEGIN: return "begin of print statement";
    case T_BLOCK_BEGIN: return "begin of statement block";
    case T_DATA: return "template data";
    case T_NAME: snprintf(buf, cap, "%s", t->s); return buf;
    case T_STRING: return "string";
    case T_INT: return "integer";
    case T_FLOAT: return "float";
    case T_OP:
        switch (t->op) {
        case 'F': return "//";
        case 'P': return "**";
        case 'E': return "==";
        case 'N': return "!=";
        case 'G': return ">=";
        case 'L': return "<=";
        default: snprintf(buf, cap, "%c", t->op); return buf;
        }
    }
    return "token";
}

static void expect_op(parser_t *p, char op)
{
    tok_t *t = cur(p);
    if (!is_op(t, op)) {
        char b[64];
        if (t->kind == T_EOF) FAIL(p, t->line, "unexpected end of template, expected '%c'.", op);
        FAIL(p, t->line, "expected token '%c', got '%s'", op, describe(t, b, sizeof(b)));
    }
    next(p);
}

static void expect_kind(parser_t *p, int kind, const char *what)
{
    tok_t *t = cur(p);
    if (t->kind != kind) {
        char b[64];
        if (t->kind == T_EOF) FAIL(p, t->line, "unexpected end of template, expected '%s'.", what);
        FAIL(p, t->line, "expected token '%s', got '%s'", what, describe(t, b, sizeof(b)));
    }
    next(p);
}

static tok_t *expect_name(parser_t *p)
{
    tok_t *t = cur(p);
    if (t->kind != T_NAME) {
        char b[64];
        FAIL(p, t->line, "expected token 'name', got '%s'", describe(t, b, sizeof(b)));
    }
    return next(p);
}

static node_t *mk(parser_t *p, int kind, int line)
{
    node_t *n = lp__arena_alloc(&p->arena, sizeof(*n));
    if (!n) FAIL(p, line, "out of memory");
    n->kind = (uint8_t)kind;
    n->line = line;
    return n;
}

/* growable node lists while parsing; they grow inside the arena, so that
 * an error (a longjmp) leaves nothing to free but the arena */
typedef struct nlist {
    node_t **v;
    int n, cap;
} nlist_t;

static void nl_open(parser_t *p, nlist_t *l)
{
    (void)p;
    memset(l, 0, sizeof(*l));
}

static void nl_push(parser_t *p, nlist_t *l, node_t *x)
{
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 4;
        node_t **v = lp__arena_alloc(&p->arena, (size_t)cap * sizeof(*v));
        if (!v) FAIL(p, x ? x->line : 0, "out of memory");
        if (l->n) memcpy(v, l->v, (size_t)l->n * sizeof(*v));
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
}

static node_t **nl_close(parser_t *p, nlist_t *l, int *n)
{
    (void)p;
    *n = l->n;
    return l->v;
}

static const char *intern(parser_t *p, const char *s)
{
    size_t n = strlen(s);
    char *d = lp__arena_alloc(&p->arena, n + 1);
    if (!d) FAIL(p, 0, "out of memory");
    memcpy(d, s, n + 1);
    return d;
}

static jv const_str(parser_t *p, const char *s, size_t n, int line)
{
    jstr_t *js = lp__arena_alloc(&p->arena, sizeof(jstr_t) + n + 1);
    if (!js) FAIL(p, line, "out of memory");
    js->h.rc = JRC_IMMORTAL;
    js->h.kind = OBJ_STR;
    js->len = n;
    js->ncp = SIZE_MAX;
    memcpy(js->p, s, n);
    js->p[n] = 0;
    jv v = {JT_STR, 0, {.s = js}};
    return v;
}

static void enter(parser_t *p)
{
    if (++p->depth > MAX_NEST) FAIL(p, cur(p)->line, "template nested too deeply (more than %d levels)", MAX_NEST);
}
static void leave(parser_t *p) { p->depth--; }

/* ---- expressions --------------------------------------------------------- */

static node_t *parse_expression(parser_t *p, bool with_condexpr);
static node_t *parse_tuple(parser_t *p, bool simplified, bool with_condexpr, const char *const *extra_end,
                           bool explicit_parens);
static node_t *parse_primary(parser_t *p);
static node_t *parse_postfix(parser_t *p, node_t *n);
static node_t *parse_filter_expr(parser_t *p, node_t *n);
static node_t *parse_unary(parser_t *p, bool with_filter);

static node_t *parse_condexpr(parser_t *p)
{
    int line = cur(p)->line;
    node_t *e1 = parse_expression(p, false);
    while (is_name(cur(p), "if")) {
        next(p);
        node_t *c = mk(p, N_COND, line);
        c->a = parse_expression(p, false);
        c->b = e1;
        if (is_name(cur(p), "else")) {
            next(p);
            c->c = parse_condexpr(p);
        }
        e1 = c;
        line = cur(p)->line;
    }
    return e1;
}

static node_t *parse_not(parser_t *p);

/* `a and b and ...` over parse_not, or `a or b or ...` over that */
static node_t *parse_logic(parser_t *p, bool is_or)
{
    int line = cur(p)->line;
    node_t *l = is_or ? parse_logic(p, false) : parse_not(p);
    while (is_name(cur(p), is_or ? "or" : "and")) {
        next(p);
        node_t *n = mk(p, is_or ? N_OR : N_AND, line);
        n->a = l;
        n->b = is_or ? parse_logic(p, false) : parse_not(p);
        l = n;
        line = cur(p)->line;
    }
    return l;
}

static node_t *parse_or(parser_t *p) { return parse_logic(p, true); }

static node_t *parse_math1(parser_t *p);
static node_t *parse_compare(parser_t *p)
{
    int line = cur(p)->line;
    node_t *e = parse_math1(p);
    nlist_t ops;
    nl_open(p, &ops);
    for (;;) {
        tok_t *t = cur(p);
        char op = 0;
        if (t->kind == T_OP && strchr("ENGL<>", t->op) && t->op) {
            op = t->op == 'E' ? '=' : t->op == 'N' ? '!' : t->op == 'G' ? 'g' : t->op == 'L' ? 'l' : (char)t->op;
            next(p);
        } else if (is_name(t, "in")) {
            op = 'i';
            next(p);
        } else if (is_name(t, "not") && is_name(peek(p), "in")) {
            op = 'n';
            next(p);
            next(p);
        } else
            break;
        node_t *o = mk(p, N_OPERAND, t->line);
        o->op = (uint8_t)op;
        o->a = parse_math1(p);
        nl_push(p, &ops, o);
        line = cur(p)->line;
    }
    if (!ops.n) {
        nl_close(p, &ops, &(int){0});
        return e;
    }
    node_t *c = mk(p, N_COMPARE, line);
    c->a = e;
    c->v = nl_close(p, &ops, &c->nv);
    return c;
}

static node_t *parse_not(parser_t *p)
{
    if (is_name(cur(p), "not")) {
        int line = next(p)->line;
        enter(p);
        node_t *n = mk(p, N_NOT, line);
        n->a = parse_not(p);
        leave(p);
        return n;
    }
    return parse_compare(p);
}

static node_t *parse_concat(parser_t *p);
static node_t *parse_math1(parser_t *p)
{
    int line = cur(p)->line;
    node_t *l = parse_concat(p);
    while (is_op(cur(p), '+') || is_op(cur(p), '-')) {
        char op = (char)next(p)->op;
        node_t *n = mk(p, N_BIN, line);
        n->op = (uint8_t)op;
        n->a = l;
        n->b = parse_concat(p);
        l = n;
        line = cur(p)->line;
    }
    return l;
}

static node_t *parse_math2(parser_t *p);
static node_t *parse_concat(parser_t *p)
{
    int line = cur(p)->line;
    node_t *first = parse_math2(p);
    if (!is_op(cur(p), '~')) return first;
    nlist_t args;
    nl_open(p, &args);
    nl_push(p, &args, first);
    while (is_op(cur(p), '~')) {
        next(p);
        nl_push(p, &args, parse_math2(p));
    }
    node_t *n = mk(p, N_CONCAT, line);
    n->v = nl_close(p, &args, &n->nv);
    return n;
}

static node_t *parse_pow(parser_t *p);
static node_t *parse_math2(parser_t *p)
{
    int line = cur(p)->line;
    node_t *l = parse_pow(p);
    for (;;) {
        tok_t *t = cur(p);
        if (!(t->kind == T_OP && (t->op == '*' || t->op == '/' || t->op == 'F' || t->op == '%'))) break;
        next(p);
        node_t *n = mk(p, N_BIN, line);
        n->op = t->op == 'F' ? 'f' : t->op;
        n->a = l;
        n->b = parse_pow(p);
        l = n;
        line = cur(p)->line;
    }
    return l;
}

static node_t *parse_pow(parser_t *p)
{
    int line = cur(p)->line;
    node_t *l = parse_unary(p, true);
    while (is_op(cur(p), 'P')) {
        next(p);
        node_t *n = mk(p, N_BIN, line);
        n->op = 'p';
        n->a = l;
        n->b = parse_unary(p, true);
        l = n;
        line = cur(p)->line;
    }
    return l;
}

static node_t *parse_unary(parser_t *p, bool with_filter)
{
    tok_t *t = cur(p);
    node_t *n;
    enter(p);
    if (is_op(t, '-') || is_op(t, '+')) {
        next(p);
        n = mk(p, is_op(t, '-') ? N_NEG : N_POS, t->line);
        n->a = parse_unary(p, false);
    } else
        n = parse_primary(p);
    n = parse_postfix(p, n);
    if (with_filter) n = parse_filter_expr(p, n);
    leave(p);
    return n;
}

static node_t *parse_list(parser_t *p)
{
    tok_t *t = cur(p);
    expect_op(p, '[');
    nlist_t items;
    nl_open(p, &items);
    while (!is_op(cur(p), ']')) {
        if (items.n) expect_op(p, ',');
        if (is_op(cur(p), ']')) break;
        nl_push(p, &items, parse_expression(p, true));
    }
    expect_op(p, ']');
    node_t *n = mk(p, N_LIST, t->line);
    n->v = nl_close(p, &items, &n->nv);
    return n;
}

static node_t *parse_dict(parser_t *p)
{
    tok_t *t = cur(p);
    expect_op(p, '{');
    nlist_t keys, vals;
    nl_open(p, &keys);
    nl_open(p, &vals);
    while (!is_op(cur(p), '}')) {
        if (keys.n) expect_op(p, ',');
        if (is_op(cur(p), '}')) break;
        nl_push(p, &keys, parse_expression(p, true));
        expect_op(p, ':');
        nl_push(p, &vals, parse_expression(p, true));
    }
    expect_op(p, '}');
    node_t *n = mk(p, N_DICT, t->line);
    n->w = nl_close(p, &vals, &n->nw);
    n->v = nl_close(p, &keys, &n->nv);
    return n;
}

static node_t *parse_primary(parser_t *p)
{
    tok_t *t = cur(p);
    node_t *n;
    char b[64];
    switch (t->kind) {
    case T_NAME:
        next(p);
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True") || !strcmp(t->s, "false") || !strcmp(t->s, "False")) {
            n = mk(p, N_CONST, t->line);
            n->val = jv_bool(t->s[0] == 't' || t->s[0] == 'T');
        } else if (!strcmp(t->s, "none") || !strcmp(t->s, "None")) {
            n = mk(p, N_CONST, t->line);
            n->val = jv_none();
        } else {
            n = mk(p, N_NAME, t->line);
            n->name = t->s;
        }
        return n;
    case T_STRING: {
        next(p);
        if (cur(p)->kind != T_STRING) {
            n = mk(p, N_CONST, t->line);
            n->val = const_str(p, t->s, t->n, t->line);
            return n;
        }
        /* adjacent literals join */
        size_t len = t->n;
        for (size_t k = p->pos; p->lx.toks[k].kind == T_STRING; k++) len += p->lx.toks[k].n;
        char *buf = lp__arena_alloc(&p->arena, len + 1);
        if (!buf) FAIL(p, t->line, "out of memory");
        memcpy(buf, t->s, t->n);
        size_t k = t->n;
        while (cur(p)->kind == T_STRING) {
            memcpy(buf + k, cur(p)->s, cur(p)->n);
            k += cur(p)->n;
            next(p);
        }
        n = mk(p, N_CONST, t->line);
        n->val = const_str(p, buf, len, t->line);
        return n;
    }
    case T_INT:
        next(p);
        n = mk(p, N_CONST, t->line);
        n->val = jv_int(t->i);
        return n;
    case T_FLOAT:
        next(p);
        n = mk(p, N_CONST, t->line);
        n->val = jv_float(t->d);
        return n;
    case T_OP:
        if (t->op == '(') {
            next(p);
            n = parse_tuple(p, false, true, NULL, true);
            expect_op(p, ')');
            return n;
        }
        if (t->op == '[') return parse_list(p);
        if (t->op == '{') return parse_dict(p);
        break;
    default: break;
    }
    if (t->kind == T_EOF) FAIL(p, t->line, "unexpected end of template");
    FAIL(p, t->line, "unexpected '%s'", describe(t, b, sizeof(b)));
}

/* jinja2 3.1 passes its extra end rules to test_any() as one tuple, which
 * never matches: `for x in a, recursive` iterates (a, recursive).  So do
 * we; the rules still end a tuple in parse_primary's callers. */
static bool is_tuple_end(parser_t *p, const char *const *extra)
{
    tok_t *t = cur(p);
    (void)extra;
    return t->kind == T_VAR_END || t->kind == T_BLOCK_END || is_op(t, ')');
}

static node_t *parse_tuple(parser_t *p, bool simplified, bool with_condexpr, const char *const *extra_end,
                           bool explicit_parens)
{
    int line = cur(p)->line;
    nlist_t args;
    nl_open(p, &args);
    bool is_tuple = false;
    enter(p);
    for (;;) {
        if (args.n) expect_op(p, ',');
        if (is_tuple_end(p, extra_end)) break;
        node_t *e = simplified ? parse_primary(p) : parse_expression(p, with_condexpr);
        nl_push(p, &args, e);
        if (is_op(cur(p), ','))
            is_tuple = true;
        else
            break;
        line = cur(p)->line;
    }
    leave(p);
    if (!is_tuple) {
        if (args.n) {
            node_t *only = args.v[0];
            nl_close(p, &args, &(int){0});
            return only;
        }
        if (!explicit_parens) {
            char b[64];
            tok_t *t = cur(p);
            nl_close(p, &args, &(int){0});
            FAIL(p, t->line, "Expected an expression, got '%s'", describe(t, b, sizeof(b)));
        }
    }
    node_t *n = mk(p, N_TUPLE, line);
    n->v = nl_close(p, &args, &n->nv);
    return n;
}

static node_t *parse_expression(parser_t *p, bool with_condexpr)
{
    enter(p);
    node_t *n = with_condexpr ? parse_condexpr(p) : parse_or(p);
    leave(p);
    return n;
}

/* (args, kw=..., *dyn, **dynkw) into n->v, n->w, n->c, n->d */
static void parse_call_args(parser_t *p, node_t *n)
{
    tok_t *open = cur(p);
    expect_op(p, '(');
    nlist_t args, kws;
    nl_open(p, &args);
    nl_open(p, &kws);
    bool need_comma = false;
    while (!is_op(cur(p), ')')) {
        if (need_comma) {
            expect_op(p, ',');
            if (is_op(cur(p), ')')) break;
        }
        if (is_op(cur(p), '*')) {
            if (n->c || n->d) FAIL(p, open->line, "invalid syntax for function call expression");
            next(p);
            n->c = parse_expression(p, true);
        } else if (is_op(cur(p), 'P')) {
            if (n->d) FAIL(p, open->line, "invalid syntax for function call expression");
            next(p);
            n->d = parse_expression(p, true);
        } else if (cur(p)->kind == T_NAME && is_op(peek(p), '=')) {
            if (n->d) FAIL(p, open->line, "invalid syntax for function call expression");
            tok_t *k = next(p);
            next(p);
            node_t *kw = mk(p, N_KW, k->line);
            kw->name = k->s;
            kw->a = parse_expression(p, true);
            nl_push(p, &kws, kw);
        } else {
            if (n->c || n->d || kws.n) FAIL(p, open->line, "invalid syntax for function call expression");
            nl_push(p, &args, parse_expression(p, true));
        }
        need_comma = true;
    }
    expect_op(p, ')');
    n->w = nl_close(p, &kws, &n->nw);
    n->v = nl_close(p, &args, &n->nv);
}

static node_t *parse_call(parser_t *p, node_t *callee)
{
    node_t *n = mk(p, N_CALL, cur(p)->line);
    n->a = callee;
    parse_call_args(p, n);
    return n;
}

static const char *dotted_name(parser_t *p)
{
    tok_t *t = expect_name(p);
    if (!is_op(cur(p), '.')) return t->s;
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", t->s);
    while (is_op(cur(p), '.')) {
        next(p);
        size_t k = strlen(buf);
        snprintf(buf + k, sizeof(buf) - k, ".%s", expect_name(p)->s);
    }
    return intern(p, buf);
}

static node_t *parse_filter(parser_t *p, node_t *input, bool start_inline)
{
    while (is_op(cur(p), '|') || start_inline) {
        if (!start_inline) next(p);
        int line = cur(p)->line;
        node_t *f = mk(p, N_FILTER, line);
        f->name = dotted_name(p);
        f->a = input;
        if (is_op(cur(p), '(')) parse_call_args(p, f);
        input = f;
        start_inline = false;
    }
    return input;
}

static node_t *parse_test(parser_t *p, node_t *input)
{
    tok_t *is = next(p);
    bool negated = false;
    if (is_name(cur(p), "not")) {
        next(p);
        negated = true;
    }
    node_t *t = mk(p, N_TEST, is->line);
    t->name = dotted_name(p);
    t->a = input;
    tok_t *c = cur(p);
    if (is_op(c, '(')) {
        parse_call_args(p, t);
    } else if ((c->kind == T_NAME || c->kind == T_STRING || c->kind == T_INT || c->kind == T_FLOAT ||
                is_op(c, '[') || is_op(c, '{')) &&
               !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
        if (is_name(c, "is")) FAIL(p, c->line, "You cannot chain multiple tests with is");
        node_t *arg = parse_postfix(p, parse_primary(p));
        t->v = lp__arena_alloc(&p->arena, sizeof(node_t *));
        if (!t->v) FAIL(p, c->line, "out of memory");
        t->v[0] = arg;
        t->nv = 1;
    }
    if (negated) {
        node_t *n = mk(p, N_NOT, is->line);
        n->a = t;
        return n;
    }
    return t;
}

static node_t *parse_subscribed(parser_t *p)
{
    int line = cur(p)->line;
    node_t *args[3] = {NULL, NULL, NULL};
    if (is_op(cur(p), ':')) {
        next(p);
    } else {
        node_t *e = parse_expression(p, true);
        if (!is_op(cur(p), ':')) return e;
        next(p);
        args[0] = e;
    }
    if (!is_op(cur(p), ':') && !is_op(cur(p), ']') && !is_op(cur(p), ','))
        args[1] = parse_expression(p, true);
    if (is_op(cur(p), ':')) {
        next(p);
        if (!is_op(cur(p), ']') && !is_op(cur(p), ',')) args[2] = parse_expression(p, true);
    }
    node_t *s = mk(p, N_SLICE, line);
    s->a = args[0];
    s->b = args[1];
    s->c = args[2];
    return s;
}

static node_t *parse_subscript(parser_t *p, node_t *obj)
{
    tok_t *t = next(p);
    if (is_op(t, '.')) {
        tok_t *a = next(p);
        if (a->kind == T_NAME) {
            node_t *n = mk(p, N_GETATTR, t->line);
            n->a = obj;
            n->name = a->s;
            return n;
        }
        if (a->kind != T_INT) FAIL(p, a->line, "expected name or number");
        node_t *k = mk(p, N_CONST, a->line);
        k->val = jv_int(a->i);
        node_t *n = mk(p, N_GETITEM, t->line);
        n->a = obj;
        n->b = k;
        return n;
    }
    /* [ ... ] */
    nlist_t args;
    nl_open(p, &args);
    while (!is_op(cur(p), ']')) {
        if (args.n) expect_op(p, ',');
        nl_push(p, &args, parse_subscribed(p));
    }
    expect_op(p, ']');
    node_t *n = mk(p, N_GETITEM, t->line);
    n->a = obj;
    if (args.n == 1) {
        n->b = args.v[0];
        nl_close(p, &args, &(int){0});
    } else {
        node_t *tu = mk(p, N_TUPLE, t->line);
        tu->v = nl_close(p, &args, &tu->nv);
        n->b = tu;
    }
    return n;
}

static node_t *parse_postfix(parser_t *p, node_t *n)
{
    for (;;) {
        tok_t *t = cur(p);
        if (is_op(t, '.') || is_op(t, '['))
            n = parse_subscript(p, n);
        else if (is_op(t, '('))
            n = parse_call(p, n);
        else
            return n;
    }
}

static node_t *parse_filter_expr(parser_t *p, node_t *n)
{
    for (;;) {
        tok_t *t = cur(p);
        if (is_op(t, '|'))
            n = parse_filter(p, n, false);
        else if (is_name(t, "is"))
            n = parse_test(p, n);
        else if (is_op(t, '('))
            n = parse_call(p, n);
        else
            return n;
    }
}

/* ---- statements ---------------------------------------------------------- */

static node_t *subparse(parser_t *p, const char *const *end_tokens, const char *opened, int open_line);

static void expect_block_end(parser_t *p)
{
    if (is_op(cur(p), ':')) next(p); /* Python-style colon */
    expect_kind(p, T_BLOCK_END, "end of statement block");
}

/* the body up to one of end_tokens; the end tag's name is current after */
static node_t *parse_statements(parser_t *p, const char *const *end_tokens, const char *opened, int line)
{
    expect_block_end(p);
    return subparse(p, end_tokens, opened, line);
}

static void drop_needle(parser_t *p) { next(p); }

static node_t *assign_target(parser_t *p, bool with_tuple, bool name_only, const char *const *extra_end,
                             bool with_namespace)
{
    node_t *t;
    if (with_namespace && is_op(peek(p), '.')) {
        tok_t *nm = expect_name(p);
        next(p);
        tok_t *attr = expect_name(p);
        t = mk(p, N_NSREF, nm->line);
        t->name = nm->s;
        t->val = const_str(p, attr->s, attr->n, attr->line);
        return t;
    }
    if (name_only) {
        tok_t *nm = expect_name(p);
        t = mk(p, N_NAME, nm->line);
        t->name = nm->s;
        return t;
    }
    t = with_tuple ? parse_tuple(p, true, true, extra_end, false) : parse_primary(p);
    /* names, or tuples of them */
    bool ok = t->kind == N_NAME;
    if (t->kind == N_TUPLE) {
        ok = true;
        for (int i = 0; i < t->nv; i++)
            ok = ok && (t->v[i]->kind == N_NAME || t->v[i]->kind == N_TUPLE);
    }
    if (t->kind == N_NAME && (!strcmp(t->name, "true") || !strcmp(t->name, "false") || !strcmp(t->name, "none")))
        ok = false;
    if (!ok) FAIL(p, t->line, "can't assign to '%s'", t->kind == N_CONST ? "const" : "expression");
    return t;
}

static const char *const END_FOR[] = {"endfor", "else", NULL};
static const char *const END_FOR_ONLY[] = {"endfor", NULL};
static const char *const END_IF[] = {"elif", "else", "endif", NULL};
static const char *const END_IF_ONLY[] = {"endif", NULL};
static const char *const IN_ONLY[] = {"in", NULL};
static const char *const RECURSIVE[] = {"recursive", NULL};

static node_t *parse_for(parser_t *p)
{
    int line = next(p)->line;
    node_t *n = mk(p, N_FOR, line);
    n->a = assign_target(p, true, false, IN_ONLY, false);
    if (!is_name(cur(p), "in")) {
        char b[64];
        FAIL(p, cur(p)->line, "expected token 'in', got '%s'", describe(cur(p), b, sizeof(b)));
    }
    next(p);
    n->b = parse_tuple(p, false, false, RECURSIVE, false);
    if (is_name(cur(p), "if")) {
        next(p);
        n->e = parse_expression(p, true);
    }
    if (is_name(cur(p), "recursive")) {
        next(p);
        n->flag = true;
    }
    p->loops++;
    n->c = parse_statements(p, END_FOR, "for", line);
    p->loops--;
    if (!strcmp(next(p)->s, "else")) {
        n->d = parse_statements(p, END_FOR_ONLY, "for", line);
        drop_needle(p);
    }
    return n;
}

static node_t *parse_if(parser_t *p)
{
    int line = next(p)->line;
    node_t *top = mk(p, N_IF, line), *n = top;
    for (;;) {
        n->a = parse_tuple(p, false, false, NULL, false);
        n->b = parse_statements(p, END_IF, "if", line);
        tok_t *t = next(p);
        if (!strcmp(t->s, "elif")) {
            node_t *e = mk(p, N_IF, t->line);
            node_t *body = mk(p, N_BODY, t->line);
            body->v = lp__arena_alloc(&p->arena, sizeof(node_t *));
            if (!body->v) FAIL(p, t->line, "out of memory");
            body->v[0] = e;
            body->nv = 1;
            n->c = body;
            n = e;
            continue;
        }
        if (!strcmp(t->s, "else")) {
            n->c = parse_statements(p, END_IF_ONLY, "if", line);
            drop_needle(p);
        }
        break;
    }
    return top;
}

static const char *const END_SET[] = {"endset", NULL};

static node_t *parse_set(parser_t *p)
{
    int line = next(p)->line;
    node_t *target = assign_target(p, true, false, NULL, true);
    if (is_op(cur(p), '=')) {
        next(p);
        node_t *n = mk(p, N_SET, line);
        n->a = target;
        n->b = parse_tuple(p, false, true, NULL, false);
        return n;
    }
    node_t *n = mk(p, N_SETBLOCK, line);
    n->a = target;
    n->c = parse_filter(p, NULL, false);
    n->b = parse_statements(p, END_SET, "set", line);
    drop_needle(p);
    return n;
}

static void parse_signature(parser_t *p, node_t *n)
{
    nlist_t args, defs;
    nl_open(p, &args);
    nl_open(p, &defs);
    expect_op(p, '(');
    while (!is_op(cur(p), ')')) {
        if (args.n) expect_op(p, ',');
        node_t *a = assign_target(p, false, true, NULL, false);
        if (is_op(cur(p), '=')) {
            next(p);
            nl_push(p, &defs, parse_expression(p, true));
        } else if (defs.n)
            FAIL(p, a->line, "non-default argument follows default argument");
        nl_push(p, &args, a);
    }
    expect_op(p, ')');
    n->w = nl_close(p, &defs, &n->nw);
    n->v = nl_close(p, &args, &n->nv);
}

static bool refers_to(parser_t *p, const node_t *n, const char *name, int depth);

static void mark_uses(parser_t *p, node_t *n, node_t *body)
{
    n->uses_caller = refers_to(p, body, "caller", 0);
    n->uses_varargs = refers_to(p, body, "varargs", 0);
    n->uses_kwargs = refers_to(p, body, "kwargs", 0);
}

/* A macro's or a call block's body: its own function in jinja2, where an
 * enclosing loop's break and continue do not reach. */
static node_t *function_body(parser_t *p, node_t *n, const char *const *end, const char *opened, int line)
{
    int loops = p->loops;
    p->loops = 0;
    node_t *body = parse_statements(p, end, opened, line);
    p->loops = loops;
    drop_needle(p);
    mark_uses(p, n, body);
    return body;
}

static const char *const END_MACRO[] = {"endmacro", NULL};

static node_t *parse_macro(parser_t *p)
{
    int line = next(p)->line;
    node_t *n = mk(p, N_MACRO, line);
    n->name = expect_name(p)->s;
    parse_signature(p, n);
    n->a = function_body(p, n, END_MACRO, "macro", line);
    return n;
}

static const char *const END_CALL[] = {"endcall", NULL};

static node_t *parse_call_block(parser_t *p)
{
    int line = next(p)->line;
    node_t *n = mk(p, N_CALLBLOCK, line);
    if (is_op(cur(p), '('))
        parse_signature(p, n);
    node_t *call = parse_expression(p, true);
    if (call->kind != N_CALL) FAIL(p, line, "expected call");
    n->a = call;
    n->b = function_body(p, n, END_CALL, "call", line);
    return n;
}

static const char *const END_FILTER[] = {"endfilter", NULL};

static node_t *parse_filter_block(parser_t *p)
{
    int line = next(p)->line;
    node_t *n = mk(p, N_FILTERBLK, line);
    n->a = parse_filter(p, NULL, true);
    n->b = parse_statements(p, END_FILTER, "filter", line);
    drop_needle(p);
    return n;
}

static const char *const END_WITH[] = {"endwith", NULL};

static node_t *parse_with(parser_t *p)
{
    int line = next(p)->line;
    node_t *n = mk(p, N_WITH, line);
    nlist_t targets, values;
    nl_open(p, &targets);
    nl_open(p, &values);
    while (cur(p)->kind != T_BLOCK_END) {
        if (targets.n) expect_op(p, ',');
        nl_push(p, &targets, assign_target(p, true, false, NULL, false));
        expect_op(p, '=');
        nl_push(p, &values, parse_expression(p, true));
    }
    n->w = nl_close(p, &values, &n->nw);
    n->v = nl_close(p, &targets, &n->nv);
    n->a = parse_statements(p, END_WITH, "with", line);
    drop_needle(p);
    return n;
}

static const char *const END_BLOCK[] = {"endblock", NULL};
static const char *const END_AUTOESCAPE[] = {"endautoescape", NULL};
static const char *const END_GENERATION[] = {"endgeneration", NULL};

static node_t *parse_block(parser_t *p)
{
    int line = next(p)->line;
    tok_t *nm = expect_name(p);
    if (is_name(cur(p), "scoped")) next(p);
    if (is_name(cur(p), "required")) next(p);
    if (is_op(cur(p), '-'))
        FAIL(p, cur(p)->line, "Block names in Jinja have to be valid Python identifiers and may not contain "
                              "hyphens, use an underscore instead.");
    node_t *n = mk(p, N_SCOPE, line);
    n->a = parse_statements(p, END_BLOCK, "block", line);
    drop_needle(p);
    if (is_name(cur(p), nm->s)) next(p);
    return n;
}

static node_t *parse_print(parser_t *p)
{
    int line = next(p)->line;
    node_t *body = mk(p, N_BODY, line);
    nlist_t outs;
    nl_open(p, &outs);
    while (cur(p)->kind != T_BLOCK_END) {
        if (outs.n) expect_op(p, ',');
        node_t *o = mk(p, N_PRINT, cur(p)->line);
        o->a = parse_expression(p, true);
        nl_push(p, &outs, o);
    }
    body->v = nl_close(p, &outs, &body->nv);
    return body;
}

/* include, import, from, extends: parsed as jinja2 does, refused when run
 * (the sandbox has no loader). */
static node_t *parse_noloader(parser_t *p, const char *tag)
{
    int line = next(p)->line;
    node_t *n = mk(p, N_NOLOADER, line);
    n->name = tag;
    n->a = parse_expression(p, true);
    if (!strcmp(tag, "include")) {
        if (is_name(cur(p), "ignore") && is_name(peek(p), "missing")) {
            next(p);
            next(p);
        }
    } else if (!strcmp(tag, "import")) {
        if (!is_name(cur(p), "as")) FAIL(p, cur(p)->line, "expected token 'as'");
        next(p);
        expect_name(p);
    } else if (!strcmp(tag, "from")) {
        if (!is_name(cur(p), "import")) FAIL(p, cur(p)->line, "expected token 'import'");
        next(p);
        bool first = true;
        for (;;) {
            if (!first) expect_op(p, ',');
            first = false;
            if (cur(p)->kind != T_NAME) {
                expect_name(p);
            }
            if ((is_name(cur(p), "with") || is_name(cur(p), "without")) && is_name(peek(p), "context")) break;
            expect_name(p);
            if (is_name(cur(p), "as")) {
                next(p);
                expect_name(p);
            }
            if (!is_op(cur(p), ',')) break;
        }
    }
    if (strcmp(tag, "extends") && (is_name(cur(p), "with") || is_name(cur(p), "without")) &&
        is_name(peek(p), "context")) {
        next(p);
        next(p);
    }
    return n;
}

static node_t *parse_statement(parser_t *p)
{
    tok_t *t = cur(p);
    if (t->kind != T_NAME) FAIL(p, t->line, "tag name expected");
    const char *s = t->s;
    if (!strcmp(s, "for")) return parse_for(p);
    if (!strcmp(s, "if")) return parse_if(p);
    if (!strcmp(s, "set")) return parse_set(p);
    if (!strcmp(s, "macro")) return parse_macro(p);
    if (!strcmp(s, "call")) return parse_call_block(p);
    if (!strcmp(s, "filter")) return parse_filter_block(p);
    if (!strcmp(s, "with")) return parse_with(p);
    if (!strcmp(s, "block")) return parse_block(p);
    if (!strcmp(s, "print")) return parse_print(p);
    if (!strcmp(s, "include") || !strcmp(s, "import") || !strcmp(s, "from") || !strcmp(s, "extends"))
        return parse_noloader(p, s);
    if (!strcmp(s, "autoescape")) {
        int line = next(p)->line;
        node_t *n = mk(p, N_PLAIN, line);
        n->b = parse_expression(p, true);
        n->flag = true;
        n->a = parse_statements(p, END_AUTOESCAPE, "autoescape", line);
        drop_needle(p);
        return n;
    }
    if (!strcmp(s, "generation")) {
        int line = next(p)->line;
        node_t *n = mk(p, N_PLAIN, line);
        n->a = parse_statements(p, END_GENERATION, "generation", line);
        drop_needle(p);
        return n;
    }
    if (!strcmp(s, "break") || !strcmp(s, "continue")) {
        next(p);
        if (!p->loops) FAIL(p, t->line, "'%s' outside loop", s);
        return mk(p, s[0] == 'b' ? N_BREAK : N_CONTINUE, t->line);
    }
    FAIL(p, t->line, "Encountered unknown tag '%s'.", s);
}

static node_t *subparse(parser_t *p, const char *const *end_tokens, const char *opened, int open_line)
{
    node_t *body = mk(p, N_BODY, cur(p)->line);
    nlist_t stmts;
    nl_open(p, &stmts);
    enter(p);
    for (;;) {
        tok_t *t = cur(p);
        if (t->kind == T_EOF) {
            if (end_tokens) {
                char want[128] = "";
                for (int i = 0; end_tokens[i]; i++) {
                    size_t k = strlen(want);
                    snprintf(want + k, sizeof(want) - k, "%s'%s'", i ? " or " : "", end_tokens[i]);
                }
                FAIL(p, t->line, "Unexpected end of template. Jinja was looking for the following tags: %s. "
                                 "The innermost block that needs to be closed is '%s' (line %d).",
                     want, opened, open_line);
            }
            break;
        }
        if (t->kind == T_DATA) {
            node_t *d = mk(p, N_DATA, t->line);
            d->val = const_str(p, t->s, t->n, t->line);
            nl_push(p, &stmts, d);
            next(p);
        } else if (t->kind == T_VAR_BEGIN) {
            next(p);
            node_t *o = mk(p, N_PRINT, t->line);
            o->a = parse_tuple(p, false, true, NULL, false);
            expect_kind(p, T_VAR_END, "end of print statement");
            nl_push(p, &stmts, o);
        } else if (t->kind == T_BLOCK_BEGIN) {
            next(p);
            tok_t *tag = cur(p);
            bool is_end = false;
            for (int i = 0; end_tokens && end_tokens[i]; i++)
                if (is_name(tag, end_tokens[i])) is_end = true;
            if (is_end) break;
            if (tag->kind == T_NAME && !strncmp(tag->s, "end", 3) && strlen(tag->s) > 3) {
                if (end_tokens)
                    FAIL(p, tag->line, "Encountered unknown tag '%s'. You probably made a nesting mistake. "
                                       "The innermost block that needs to be closed is '%s'.", tag->s, opened);
                FAIL(p, tag->line, "Encountered unknown tag '%s'.", tag->s);
            }
            nl_push(p, &stmts, parse_statement(p));
            expect_kind(p, T_BLOCK_END, "end of statement block");
        } else {
            char b[64];
            FAIL(p, t->line, "unexpected '%s'", describe(t, b, sizeof(b)));
        }
    }
    leave(p);
    body->v = nl_close(p, &stmts, &body->nv);
    return body;
}

/* ---- after parsing: resolve filters and tests ------------------------------ */

/* Chains of attributes or operators build deep trees without recursing in
 * the parser: walks of the tree bound their depth. */
static bool refers_to(parser_t *p, const node_t *n, const char *name, int depth)
{
    if (!n) return false;
    if (depth > 4 * MAX_NEST) FAIL(p, n->line, "template nested too deeply");
    if (n->kind == N_NAME && !strcmp(n->name, name)) return true;
    const node_t *kids[] = {n->a, n->b, n->c, n->d, n->e};
    for (int i = 0; i < 5; i++)
        if (refers_to(p, kids[i], name, depth + 1)) return true;
    for (int i = 0; i < n->nv; i++)
        if (refers_to(p, n->v[i], name, depth + 1)) return true;
    for (int i = 0; i < n->nw; i++)
        if (refers_to(p, n->w[i], name, depth + 1)) return true;
    return false;
}

/* Unknown filters and tests are errors now, except in a soft frame (an if
 * statement or an inline if), as jinja2's compiler decides. */
static void resolve(parser_t *p, node_t *n, bool soft, int depth)
{
    if (!n) return;
    if (depth > 4 * MAX_NEST) FAIL(p, n->line, "template nested too deeply");
    if (n->kind == N_FILTER || n->kind == N_TEST) {
        const jfilter_t *f = n->kind == N_FILTER ? lp__jinja_filter_find(n->name) : lp__jinja_test_find(n->name);
        n->impl = f;
        if (!f) {
            if (!soft) FAIL(p, n->line, "No %s named '%s'.", n->kind == N_FILTER ? "filter" : "test", n->name);
            n->soft = true;
        }
    }
    switch (n->kind) {
    case N_IF:
    case N_COND:
        soft = true;
        break;
    case N_FOR:
        resolve(p, n->b, soft, depth + 1);
        resolve(p, n->a, false, depth + 1);
        resolve(p, n->c, false, depth + 1);
        resolve(p, n->d, false, depth + 1);
        resolve(p, n->e, false, depth + 1);
        return;
    case N_MACRO:
    case N_SETBLOCK:
    case N_FILTERBLK:
        soft = false;
        break;
    case N_CALLBLOCK:
        resolve(p, n->a, soft, depth + 1);
        resolve(p, n->b, false, depth + 1);
        for (int i = 0; i < n->nw; i++) resolve(p, n->w[i], false, depth + 1);
        return;
    case N_WITH:
        for (int i = 0; i < n->nw; i++) resolve(p, n->w[i], soft, depth + 1);
        resolve(p, n->a, false, depth + 1);
        return;
    default: break;
    }
    resolve(p, n->a, soft, depth + 1);
    resolve(p, n->b, soft, depth + 1);
    resolve(p, n->c, soft, depth + 1);
    resolve(p, n->d, soft, depth + 1);
    resolve(p, n->e, soft, depth + 1);
    for (int i = 0; i < n->nv; i++) resolve(p, n->v[i], soft, depth + 1);
    for (int i = 0; i < n->nw; i++) resolve(p, n->w[i], soft, depth + 1);
}

/* ---- entry ---------------------------------------------------------------- */

int lp_jinja_parse(const char *src, size_t len, lp_jinja_tmpl_t **out)
{
    *out = NULL;
    if (len > LP_JINJA_MAX_SOURCE)
        return lp_error_set(LP_ERR(E2BIG), "template: %zu bytes (at most %u)", len, LP_JINJA_MAX_SOURCE);
    /* The reference reads the template as UTF-8: invalid bytes are its error too. */
    for (size_t i = 0; i < len;) {
        size_t k = lp_utf8_seq_len((const unsigned char *)src + i, (const unsigned char *)src + len);
        if (!k) {
            int line = 1;
            for (size_t j = 0; j < i; j++) line += src[j] == '\n';
            return lp_error_set(LP_ERR(EINVAL), "line %d: the template is not valid UTF-8 (byte %zu)", line, i);
        }
        i += k;
    }
    parser_t *p = calloc(1, sizeof(*p));
    char *msg = malloc(512);
    jmp_buf jmp;
    if (!p || !msg) {
        free(p);
        free(msg);
        return lp_error_set(LP_ERR(ENOMEM), "template: out of memory");
    }
    p->lx.jmp = &jmp;
    p->lx.msg = msg;
    p->lx.msg_cap = 512;
    p->lx.arena = &p->arena;
    if (setjmp(jmp)) {
        int rc = lp_error_set(LP_ERR(EINVAL), "%s", msg);
        free(p->lx.toks);
        lp__arena_free(&p->arena);
        free(p);
        free(msg);
        return rc;
    }
    lp__jinja_lex(&p->lx, src, len);
    node_t *root = subparse(p, NULL, NULL, 0);
    resolve(p, root, false, 0);
    lp_jinja_tmpl_t *t = lp__arena_alloc(&p->arena, sizeof(*t));
    if (!t) FAIL(p, 0, "out of memory");
    t->root = root;
    t->arena = p->arena;
    free(p->lx.toks);
    free(p);
    free(msg);
    *out = t;
    return 0;
}

void lp_jinja_tmpl_destroy(lp_jinja_tmpl_t **self_p)
{
    if (!self_p || !*self_p) return;
    arena_t *a = (*self_p)->arena;
    lp__arena_free(&a);
    *self_p = NULL;
}
