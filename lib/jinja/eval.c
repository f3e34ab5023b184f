/* eval.c - run a template: scopes as jinja2 keeps them (a for loop's body,
 * a macro, a with block and a block set each have their own; if does not),
 * statements, expressions, calls of macros and builtins, and the render's
 * entry with its sweep of whatever a failed render left. */
#include "jinja-internal.h"

#include "error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 2000       /* nested evaluation: bounds the C stack */
#define MAX_MACRO_DEPTH 100  /* nested macro calls */

enum { EX_OK, EX_BREAK, EX_CONTINUE };

static jv eval(jr_t *r, const node_t *n);
static int exec(jr_t *r, const node_t *n);

/* ---- frames -------------------------------------------------------------------------- */

static frame_t *frame_new(jr_t *r, frame_t *parent)
{
    frame_t *f = lp__jalloc(r, sizeof(frame_t), OBJ_FRAME);
    f->parent = parent;
    if (parent) parent->h.rc++;
    return f;
}

static void frame_drop(jr_t *r, frame_t *f)
{
    if (f) lp__jdrop_obj(r, &f->h);
}

static jv *frame_find(frame_t *f, const char *name)
{
    for (size_t i = f->n; i-- > 0;)
        if (!strcmp(f->names[i], name)) return &f->vals[i];
    return NULL;
}

/* Set name in f; takes v.  name is borrowed for the render. */
void lp__jframe_set(jr_t *r, frame_t *f, const char *name, jv v)
{
    jv *x = frame_find(f, name);
    if (x) {
        jv old = *x;
        *x = v;
        lp__jdrop(r, old);
        return;
    }
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 8;
        jobj_t *nmo = f->names ? lp__jraw_of(f->names) : NULL, *vo = f->vals ? lp__jraw_of(f->vals) : NULL;
        f->names = lp__jraw_grow(r, &nmo, cap * sizeof(char *));
        f->vals = lp__jraw_grow(r, &vo, cap * sizeof(jv));
        f->cap = cap;
    }
    f->names[f->n] = name;
    f->vals[f->n] = v;
    f->n++;
}

static jv lookup(jr_t *r, const char *name)
{
    for (frame_t *f = r->frame; f; f = f->parent) {
        jv *x = frame_find(f, name);
        if (x) return lp__jref(*x);
    }
    return lp__jundef_msg(r, "'%s' is undefined", name);
}

/* ---- output ---------------------------------------------------------------------------- */

static void write_value(jr_t *r, jv v)
{
    if (v.t == JT_STR) {
        if (r->autoescape && !(v.f & JF_MARKUP)) lp__jescape(r, r->out, v.u.s->p, v.u.s->len);
        else lp__sb_put(r, r->out, v.u.s->p, v.u.s->len);
        return;
    }
    if (r->autoescape) {
        sb_t b = {0};
        lp__jstr_of(r, &b, v);
        lp__jescape(r, r->out, b.p ? b.p : "", b.n);
        lp__sb_free(r, &b);
        return;
    }
    lp__jstr_of(r, r->out, v);
}

/* A filter block's or a call block's result goes out as it is, not through
 * str(): jinja2 joins it with the text, which fails for anything but a string. */
static void write_block(jr_t *r, jv v)
{
    if (v.t != JT_STR) JERR(r, "sequence item 0: expected str instance, %s found", lp__jtype_name(v));
    write_value(r, v);
}

/* Run body in frame f (borrowed), writing into a new string; *status gets
 * the body's break/continue. */
static jv capture(jr_t *r, const node_t *body, frame_t *f, int *status)
{
    sb_t b = {0};
    sb_t *saved_out = r->out;
    frame_t *saved_frame = r->frame;
    r->out = &b;
    r->frame = f;
    int st = exec(r, body);
    r->out = saved_out;
    r->frame = saved_frame;
    if (status) *status = st;
    jv v = lp__jv_sb(r, &b);
    if (r->autoescape) v.f = JF_MARKUP;
    return v;
}

/* ---- assignment ------------------------------------------------------------------------ */

static void assign(jr_t *r, frame_t *f, const node_t *target, jv v)
{
    if (target->kind == N_NAME) {
        lp__jframe_set(r, f, target->name, v);
        return;
    }
    /* a tuple: unpack */
    jlist_t *items = lp__jiter_or_null(r, v);
    if (!items) {
        jv copy = v;
        const char *tn = lp__jtype_name(copy);
        JERR(r, "cannot unpack non-iterable %s object", tn);
    }
    size_t want = (size_t)target->nv;
    if (items->n < want) JERR(r, "not enough values to unpack (expected %zu, got %zu)", want, items->n);
    if (items->n > want) JERR(r, "too many values to unpack (expected %zu)", want);
    for (size_t i = 0; i < want; i++) assign(r, f, target->v[i], lp__jref(items->v[i]));
    lp__jdrop(r, lp__jv_list(items));
    lp__jdrop(r, v);
}

/* ---- calls ------------------------------------------------------------------------------ */

static void args_free(jr_t *r, jargs_t *a)
{
    for (size_t i = 0; i < a->n; i++) lp__jdrop(r, a->v[i]);
    for (size_t i = 0; i < a->nk; i++) lp__jdrop(r, a->kv[i]);
}

/* Evaluate a call's arguments (n->v, n->w, n->c, n->d) into a. */
static void eval_args(jr_t *r, const node_t *n, jargs_t *a, int extra_kw)
{
    jobj_t *o;
    jlist_t *star = NULL;
    jdict_t *dstar = NULL;
    jv sv = jv_undef(), dv = jv_undef();
    if (n->c) {
        sv = eval(r, n->c);
        star = lp__jiter(r, sv);
    }
    if (n->d) {
        dv = eval(r, n->d);
        if (dv.t != JT_DICT) JERR(r, "argument after ** must be a mapping, not %s", lp__jtype_name(dv));
        dstar = dv.u.dc;
    }
    size_t np = (size_t)n->nv + (star ? star->n : 0);
    size_t nk = (size_t)n->nw + (dstar ? dstar->n : 0) + (size_t)extra_kw;
    memset(a, 0, sizeof(*a));
    a->v = lp__jraw(r, (np + 1) * sizeof(jv), &o);
    a->kn = lp__jraw(r, (nk + 1) * sizeof(char *), &o);
    a->kv = lp__jraw(r, (nk + 1) * sizeof(jv), &o);
    for (int i = 0; i < n->nv; i++) a->v[a->n++] = eval(r, n->v[i]);
    if (star)
        for (size_t i = 0; i < star->n; i++) a->v[a->n++] = lp__jref(star->v[i]);
    for (int i = 0; i < n->nw; i++) {
        a->kn[a->nk] = n->w[i]->name;
        a->kv[a->nk++] = eval(r, n->w[i]->a);
    }
    if (dstar)
        for (size_t i = 0; i < dstar->n; i++) {
            if (dstar->k[i].t != JT_STR) JERR(r, "keywords must be strings");
            for (size_t k = 0; k < a->nk; k++)
                if (!strcmp(a->kn[k], dstar->k[i].u.s->p))
                    JERR(r, "got multiple values for keyword argument '%s'", a->kn[k]);
            a->kn[a->nk] = dstar->k[i].u.s->p;
            a->kv[a->nk++] = lp__jref(dstar->v[i]);
        }
    if (star) lp__jdrop(r, lp__jv_list(star));
    lp__jdrop(r, sv);
    /* dv stays alive until the render's end: the keyword names point into it */
    (void)dv;
}

static jv run_for(jr_t *r, const node_t *n, jv iterable, int depth0, frame_t *outer, bool capture_out);

static jv call_macro(jr_t *r, jfunc_t *fn, jargs_t *a)
{
    const node_t *m = fn->node;
    bool is_caller = fn->kind == JF_CALLER;
    const char *name = is_caller ? "caller" : m->name;
    size_t nparams = (size_t)m->nv;
    if (++r->macro_depth > MAX_MACRO_DEPTH) JERR(r, "maximum recursion depth exceeded (macro '%s')", name);
    frame_t *f = frame_new(r, fn->closure);
    jobj_t *o;
    jv *vals = lp__jraw(r, (nparams + 1) * sizeof(jv), &o);
    bool *given = lp__jraw(r, nparams + 1, &o);
    memset(given, 0, nparams + 1);
    size_t npos = a->n < nparams ? a->n : nparams;
    for (size_t i = 0; i < npos; i++) {
        vals[i] = lp__jref(a->v[i]);
        given[i] = true;
    }
    /* keyword arguments fill the parameters left */
    bool *used = lp__jraw(r, a->nk + 1, &o);
    memset(used, 0, a->nk + 1);
    bool found_caller = false;
    if (npos != nparams) {
        for (size_t i = npos; i < nparams; i++) {
            const char *pn = m->v[i]->name;
            for (size_t k = 0; k < a->nk; k++)
                if (!used[k] && !strcmp(a->kn[k], pn)) {
                    vals[i] = lp__jref(a->kv[k]);
                    given[i] = true;
                    used[k] = true;
                    break;
                }
            if (!strcmp(pn, "caller")) found_caller = true;
        }
    }
    jv caller = jv_undef();
    bool have_caller = false;
    if (m->uses_caller && !found_caller) {
        for (size_t k = 0; k < a->nk; k++)
            if (!used[k] && !strcmp(a->kn[k], "caller")) {
                caller = lp__jref(a->kv[k]);
                used[k] = true;
                have_caller = true;
            }
        if (!have_caller) caller = lp__jundef_msg(r, "No caller defined");
    }
    jdict_t *kw = NULL;
    if (m->uses_kwargs) {
        kw = lp__jdict_new(r);
        for (size_t k = 0; k < a->nk; k++)
            if (!used[k]) lp__jdict_set(r, kw, lp__jv_cstr(r, a->kn[k]), lp__jref(a->kv[k]));
    } else {
        for (size_t k = 0; k < a->nk; k++)
            if (!used[k]) {
                if (!strcmp(a->kn[k], "caller"))
                    JERR(r, "macro '%s' was invoked with two values for the special caller argument. This is "
                            "most likely a bug.", name);
                JERR(r, "macro '%s' takes no keyword argument '%s'", name, a->kn[k]);
            }
    }
    jlist_t *varargs = NULL;
    if (m->uses_varargs) {
        size_t extra = a->n > nparams ? a->n - nparams : 0;
        varargs = lp__jlist_new(r, extra, JL_TUPLE);
        for (size_t i = 0; i < extra; i++) varargs->v[i] = lp__jref(a->v[nparams + i]);
    } else if (a->n > nparams)
        JERR(r, "macro '%s' takes not more than %zu argument(s)", name, nparams);

    /* parameters in order; defaults are evaluated in the macro's scope */
    frame_t *saved = r->frame;
    r->frame = f;
    size_t first_default = nparams - (size_t)m->nw;
    for (size_t i = 0; i < nparams; i++) {
        jv v;
        if (given[i]) v = vals[i];
        else if (i >= first_default) v = eval(r, m->w[i - first_default]);
        else v = lp__jundef_msg(r, "parameter '%s' was not provided", m->v[i]->name);
        lp__jframe_set(r, f, m->v[i]->name, v);
    }
    if (m->uses_caller) lp__jframe_set(r, f, "caller", caller);
    if (kw) lp__jframe_set(r, f, "kwargs", lp__jv_dict(kw));
    if (varargs) lp__jframe_set(r, f, "varargs", lp__jv_list(varargs));
    r->frame = saved;
    jv out = capture(r, is_caller ? m->b : m->a, f, NULL);
    frame_drop(r, f);
    r->macro_depth--;
    return out;
}

jv lp__jcall(jr_t *r, jv fn, jargs_t *a)
{
    switch (fn.t) {
    case JT_UNDEF: JERR(r, "%s", fn.u.s ? fn.u.s->p : "an undefined value was called");
    case JT_FUNC: {
        jfunc_t *f = fn.u.fn;
        switch (f->kind) {
        case JF_BUILTIN: return f->fn(r, jv_none(), a);
        case JF_METHOD: return f->fn(r, f->self, a);
        case JF_MACRO: case JF_CALLER: return call_macro(r, f, a);
        case JF_JOINER:
            if (!f->used) {
                f->used = true;
                return lp__jv_str(r, "", 0);
            }
            return lp__jref(f->self);
        default: JERR(r, "'%s' is not supported", f->name ? f->name : "function");
        }
    }
    case JT_LOOP: {
        jloop_t *l = fn.u.loop;
        if (!l->node || !l->node->flag) JERR(r, "The loop must be marked as 'recursive' to call it.");
        if (a->n != 1 || a->nk) JERR(r, "loop() takes exactly one argument");
        return run_for(r, l->node, a->v[0], l->depth0 + 1, l->frame, true);
    }
    default: JERR(r, "'%s' object is not callable", lp__jtype_name(fn));
    }
}

/* ---- filters and tests by name (map, select, ...) ------------------------------ */

jv lp__jcall_filter(jr_t *r, const char *name, jv input, jargs_t *a)
{
    const jfilter_t *f = lp__jinja_filter_find(name);
    if (!f) JERR(r, "No filter named '%s'.", name);
    return f->fn(r, input, a);
}

bool lp__jcall_test(jr_t *r, const char *name, jv input, jargs_t *a)
{
    const jfilter_t *f = lp__jinja_test_find(name);
    if (!f) JERR(r, "No test named '%s'.", name);
    jv v = f->fn(r, input, a);
    bool b = lp__jtruthy(r, v);
    lp__jdrop(r, v);
    return b;
}

/* ---- statements -------------------------------------------------------------------- */

static jv run_for(jr_t *r, const node_t *n, jv iterable, int depth0, frame_t *outer, bool capture_out)
{
    jlist_t *items = lp__jiter(r, iterable);
    if (n->e) {
        /* the loop's filter sees the target, not loop */
        jlist_t *kept = lp__jlist_new(r, items->n, JL_LIST);
        size_t k = 0;
        for (size_t i = 0; i < items->n; i++) {
            frame_t *tf = frame_new(r, outer);
            assign(r, tf, n->a, lp__jref(items->v[i]));
            frame_t *saved = r->frame;
            r->frame = tf;
            jv t = eval(r, n->e);
            r->frame = saved;
            if (lp__jtruthy(r, t)) kept->v[k++] = lp__jref(items->v[i]);
            lp__jdrop(r, t);
            frame_drop(r, tf);
        }
        kept->n = k;
        lp__jdrop(r, lp__jv_list(items));
        items = kept;
    }
    sb_t b = {0};
    sb_t *saved_out = r->out;
    if (capture_out) r->out = &b;
    frame_t *saved = r->frame;
    if (!items->n) {
        if (n->d) {
            frame_t *ef = frame_new(r, outer);
            r->frame = ef;
            exec(r, n->d);
            r->frame = saved;
            frame_drop(r, ef);
        }
    } else {
        jloop_t *l = lp__jalloc(r, sizeof(jloop_t), OBJ_LOOP);
        l->items = items;
        items->h.rc++;
        l->depth0 = depth0;
        l->changed = jv_undef();
        if (n->flag) {
            l->node = n;
            l->frame = outer;
            outer->h.rc++;
        }
        jv lv = {JT_LOOP, 0, {.loop = l}};
        for (size_t i = 0; i < items->n; i++) {
            lp__jstep(r, 1);
            l->i = i;
            frame_t *f = frame_new(r, outer);
            lp__jframe_set(r, f, "loop", lp__jref(lv));
            assign(r, f, n->a, lp__jref(items->v[i]));
            r->frame = f;
            int st = exec(r, n->c);
            r->frame = saved;
            frame_drop(r, f);
            if (st == EX_BREAK) break;
        }
        lp__jdrop(r, lv);
    }
    lp__jdrop(r, lp__jv_list(items));
    r->out = saved_out;
    if (!capture_out) return jv_none();
    jv v = lp__jv_sb(r, &b);
    return v;
}

static int exec_body(jr_t *r, const node_t *n)
{
    for (int i = 0; i < n->nv; i++) {
        int st = exec(r, n->v[i]);
        if (st != EX_OK) return st;
    }
    return EX_OK;
}

static jv apply_filters(jr_t *r, const node_t *chain, jv input);

/* {% set %}'s target: names in the current scope, or a namespace's
 * attribute; takes v */
static void set_target(jr_t *r, const node_t *n, jv v)
{
    if (n->a->kind != N_NSREF) {
        assign(r, r->frame, n->a, v);
        return;
    }
    jv ns = lookup(r, n->a->name);
    r->line = n->line;
    if (ns.t != JT_NS) JERR(r, "cannot assign attribute on non-namespace object");
    lp__jdict_set(r, ns.u.dc, lp__jref(n->a->val), v);
    lp__jdrop(r, ns);
}

static int exec(jr_t *r, const node_t *n)
{
    if (++r->depth > MAX_DEPTH) JERR(r, "template nested too deeply");
    lp__jstep(r, 1);
    r->line = n->line;
    int st = EX_OK;
    switch (n->kind) {
    case N_BODY: st = exec_body(r, n); break;
    case N_DATA: lp__sb_put(r, r->out, n->val.u.s->p, n->val.u.s->len); break;
    case N_PRINT: {
        jv v = eval(r, n->a);
        write_value(r, v);
        lp__jdrop(r, v);
        break;
    }
    case N_IF: {
        jv t = eval(r, n->a);
        bool yes = lp__jtruthy(r, t);
        lp__jdrop(r, t);
        if (yes) st = exec(r, n->b);
        else if (n->c) st = exec(r, n->c);
        break;
    }
    case N_FOR: {
        jv it = eval(r, n->b);
        run_for(r, n, it, 0, r->frame, false);
        lp__jdrop(r, it);
        break;
    }
    case N_SET:
        set_target(r, n, eval(r, n->b));
        break;
    case N_SETBLOCK: {
        frame_t *f = frame_new(r, r->frame);
        jv v = capture(r, n->b, f, &st);
        frame_drop(r, f);
        if (n->c) v = apply_filters(r, n->c, v);
        set_target(r, n, v);
        break;
    }
    case N_MACRO: {
        jfunc_t *f = lp__jfunc_new(r, JF_MACRO, n->name);
        f->node = n;
        f->closure = r->frame;
        r->frame->h.rc++;
        lp__jframe_set(r, r->frame, n->name, lp__jv_func(f));
        break;
    }
    case N_CALLBLOCK: {
        jfunc_t *c = lp__jfunc_new(r, JF_CALLER, "caller");
        c->node = n;
        c->closure = r->frame;
        r->frame->h.rc++;
        jv cv = lp__jv_func(c);
        const node_t *call = n->a;
        jv fn = eval(r, call->a);
        jargs_t a;
        eval_args(r, call, &a, 1);
        a.kn[a.nk] = "caller";
        a.kv[a.nk++] = cv;
        r->line = n->line;
        jv res = lp__jcall(r, fn, &a);
        write_block(r, res);
        lp__jdrop(r, res);
        args_free(r, &a);
        lp__jdrop(r, fn);
        break;
    }
    case N_FILTERBLK: {
        frame_t *f = frame_new(r, r->frame);
        jv v = capture(r, n->b, f, &st);
        frame_drop(r, f);
        v = apply_filters(r, n->a, v);
        write_block(r, v);
        lp__jdrop(r, v);
        break;
    }
    case N_WITH: {
        frame_t *f = frame_new(r, r->frame);
        for (int i = 0; i < n->nv; i++) assign(r, f, n->v[i], eval(r, n->w[i]));
        frame_t *saved = r->frame;
        r->frame = f;
        st = exec(r, n->a);
        r->frame = saved;
        frame_drop(r, f);
        break;
    }
    case N_SCOPE: {
        frame_t *f = frame_new(r, r->frame);
        frame_t *saved = r->frame;
        r->frame = f;
        st = exec(r, n->a);
        r->frame = saved;
        frame_drop(r, f);
        break;
    }
    case N_PLAIN:
        if (n->flag) { /* autoescape */
            jv v = eval(r, n->b);
            bool saved = r->autoescape;
            r->autoescape = lp__jtruthy(r, v);
            lp__jdrop(r, v);
            st = exec(r, n->a);
            r->autoescape = saved;
        } else
            st = exec(r, n->a);
        break;
    case N_BREAK: st = EX_BREAK; break;
    case N_CONTINUE: st = EX_CONTINUE; break;
    case N_NOLOADER: JERR(r, "no loader for this environment specified (%s is not available)", n->name);
    default: JERR(r, "internal error: statement kind %d", n->kind);
    }
    r->depth--;
    return st;
}

/* ---- expressions ---------------------------------------------------------------------- */

/* One filter node on an input (taken). */
static jv run_filter(jr_t *r, const node_t *f, jv in)
{
    r->line = f->line;
    if (!f->impl) JERR(r, "No filter named '%s' found.", f->name);
    jargs_t a;
    eval_args(r, f, &a, 0);
    r->line = f->line;
    jv out = ((const jfilter_t *)f->impl)->fn(r, in, &a);
    args_free(r, &a);
    lp__jdrop(r, in);
    return out;
}

/* Apply a filter chain whose innermost input is NULL to v (taken). */
static jv apply_filters(jr_t *r, const node_t *chain, jv v)
{
    if (!chain) return v;
    if (chain->a) v = apply_filters(r, chain->a, v);
    return run_filter(r, chain, v);
}

static bool compare(jr_t *r, int op, jv a, jv b)
{
    switch (op) {
    case '=': return lp__jeq(r, a, b);
    case '!': return !lp__jeq(r, a, b);
    case '<': { int c = lp__jcmp(r, a, b, "<"); return c != 2 && c < 0; }
    case 'l': { int c = lp__jcmp(r, a, b, "<="); return c != 2 && c <= 0; }
    case '>': { int c = lp__jcmp(r, a, b, ">"); return c != 2 && c > 0; }
    case 'g': { int c = lp__jcmp(r, a, b, ">="); return c != 2 && c >= 0; }
    case 'i': return lp__jcontains(r, b, a);
    case 'n': return !lp__jcontains(r, b, a);
    }
    return false;
}

/* An expression jinja2's optimizer folds at compile time: constants and
 * what is built of them (operators, literals, filters). */
static bool is_const(const node_t *n, int depth)
{
    if (!n || depth > 64) return false;
    switch (n->kind) {
    case N_CONST: return true;
    case N_LIST: case N_TUPLE: case N_DICT: case N_NEG: case N_POS: case N_NOT: case N_BIN: case N_CONCAT:
    case N_AND: case N_OR: case N_COMPARE: case N_OPERAND: case N_FILTER:
        if (n->kind == N_FILTER && (!n->impl || !n->a || n->c || n->d)) return false;
        if ((n->a && !is_const(n->a, depth + 1)) || (n->b && !is_const(n->b, depth + 1))) return false;
        for (int i = 0; i < n->nv; i++)
            if (!is_const(n->v[i], depth + 1)) return false;
        for (int i = 0; i < n->nw; i++)
            if (!is_const(n->kind == N_FILTER ? n->w[i]->a : n->w[i], depth + 1)) return false;
        return true;
    default: return false;
    }
}

static jv eval_inner(jr_t *r, const node_t *n)
{
    switch (n->kind) {
    case N_CONST: return lp__jref(n->val);
    case N_NAME: return lookup(r, n->name);
    case N_GETATTR: {
        jv o = eval(r, n->a);
        r->line = n->line;
        jv v = lp__jgetattr(r, o, n->name, strlen(n->name));
        lp__jdrop(r, o);
        return v;
    }
    case N_GETITEM: {
        jv o = eval(r, n->a);
        jv v;
        if (n->b->kind == N_SLICE) {
            const node_t *s = n->b;
            jv a = s->a ? eval(r, s->a) : jv_none(), b = s->b ? eval(r, s->b) : jv_none(),
               c = s->c ? eval(r, s->c) : jv_none();
            r->line = n->line;
            bool folded = is_const(n->a, 0) && (!s->a || is_const(s->a, 0)) && (!s->b || is_const(s->b, 0)) &&
                          (!s->c || is_const(s->c, 0));
            v = lp__jslice(r, o, a, b, c, folded);
            lp__jdrop(r, a);
            lp__jdrop(r, b);
            lp__jdrop(r, c);
        } else {
            jv k = eval(r, n->b);
            r->line = n->line;
            v = lp__jgetitem(r, o, k);
            lp__jdrop(r, k);
        }
        lp__jdrop(r, o);
        return v;
    }
    case N_CALL: {
        jv fn = eval(r, n->a);
        jargs_t a;
        eval_args(r, n, &a, 0);
        r->line = n->line;
        jv v = lp__jcall(r, fn, &a);
        args_free(r, &a);
        lp__jdrop(r, fn);
        return v;
    }
    case N_FILTER: return run_filter(r, n, n->a ? eval(r, n->a) : jv_undef());
    case N_TEST: {
        jv in = eval(r, n->a);
        r->line = n->line;
        if (!n->impl) JERR(r, "No test named '%s' found.", n->name);
        jargs_t a;
        eval_args(r, n, &a, 0);
        r->line = n->line;
        jv v = ((const jfilter_t *)n->impl)->fn(r, in, &a);
        bool b = lp__jtruthy(r, v);
        lp__jdrop(r, v);
        args_free(r, &a);
        lp__jdrop(r, in);
        return jv_bool(b);
    }
    case N_NOT: {
        jv v = eval(r, n->a);
        bool b = !lp__jtruthy(r, v);
        lp__jdrop(r, v);
        return jv_bool(b);
    }
    case N_NEG: case N_POS: {
        jv v = eval(r, n->a);
        r->line = n->line;
        bool neg = n->kind == N_NEG;
        if (v.t == JT_UNDEF) JERR(r, "%s", v.u.s ? v.u.s->p : "an undefined value was used");
        if (v.t == JT_INT || v.t == JT_BOOL) {
            int64_t i = v.t == JT_INT ? v.u.i : v.u.b;
            if (neg && i == INT64_MIN) JERR(r, "integer overflow");
            return jv_int(neg ? -i : i);
        }
        if (v.t == JT_FLOAT) return jv_float(neg ? -v.u.d : v.u.d);
        JERR(r, "bad operand type for unary %c: '%s'", neg ? '-' : '+', lp__jtype_name(v));
    }
    case N_BIN: {
        jv a = eval(r, n->a);
        jv b = eval(r, n->b);
        r->line = n->line;
        jv v = lp__jbinop(r, n->op, a, b);
        lp__jdrop(r, a);
        lp__jdrop(r, b);
        return v;
    }
    case N_CONCAT: {
        sb_t b = {0};
        for (int i = 0; i < n->nv; i++) {
            jv v = eval(r, n->v[i]);
            lp__jstr_of(r, &b, v);
            lp__jdrop(r, v);
        }
        return lp__jv_sb(r, &b);
    }
    case N_AND: case N_OR: {
        jv a = eval(r, n->a);
        bool t = lp__jtruthy(r, a);
        if ((n->kind == N_AND) != t) return a;
        lp__jdrop(r, a);
        return eval(r, n->b);
    }
    case N_COMPARE: {
        jv left = eval(r, n->a);
        bool ok = true;
        for (int i = 0; i < n->nv && ok; i++) {
            jv right = eval(r, n->v[i]->a);
            r->line = n->line;
            ok = compare(r, n->v[i]->op, left, right);
            lp__jdrop(r, left);
            left = right;
        }
        lp__jdrop(r, left);
        return jv_bool(ok);
    }
    case N_COND: {
        jv t = eval(r, n->a);
        bool yes = lp__jtruthy(r, t);
        lp__jdrop(r, t);
        if (yes) return eval(r, n->b);
        if (n->c) return eval(r, n->c);
        return lp__jundef_msg(r, "the inline if-expression on line %d evaluated to false and no else section "
                                 "was defined.", n->line);
    }
    case N_LIST: case N_TUPLE: {
        jlist_t *l = lp__jlist_new(r, (size_t)n->nv, n->kind == N_LIST ? JL_LIST : JL_TUPLE);
        for (int i = 0; i < n->nv; i++) l->v[i] = eval(r, n->v[i]);
        return lp__jv_list(l);
    }
    case N_DICT: {
        jdict_t *d = lp__jdict_new(r);
        jv dv = lp__jv_dict(d);
        for (int i = 0; i < n->nv; i++) {
            jv k = eval(r, n->v[i]);
            jv v = eval(r, n->w[i]);
            r->line = n->line;
            lp__jdict_set(r, d, k, v);
        }
        return dv;
    }
    default: JERR(r, "internal error: expression kind %d", n->kind);
    }
}

static jv eval(jr_t *r, const node_t *n)
{
    if (++r->depth > MAX_DEPTH) JERR(r, "template nested too deeply");
    lp__jstep(r, 1);
    r->line = n->line;
    jv v = eval_inner(r, n);
    r->depth--;
    return v;
}

/* ---- the render ---------------------------------------------------------------------- */

void lp__jglobals(jr_t *r, frame_t *f); /* methods.c */
void lp__jdead_reset(void);

void lp__jnow(jr_t *r, struct tm *out)
{
    if (r->has_now) {
        *out = r->now;
        return;
    }
    time_t t = time(NULL);
    localtime_r(&t, out);
}

static void sweep(jr_t *r)
{
    jobj_t *o = r->objs.next;
    while (o != &r->objs) {
        jobj_t *nx = o->next;
        free(o);
        o = nx;
    }
    r->objs.next = r->objs.prev = &r->objs;
    r->mem = 0;
    lp__jdead_reset();
}

int lp_jinja_render(const lp_jinja_tmpl_t *t, const lp_jinja_var_t *vars, size_t n_vars,
                    const lp_jinja_opts_t *opts, char **out, size_t *out_len)
{
    *out = NULL;
    if (out_len) *out_len = 0;
    jr_t *r = calloc(1, sizeof(*r));
    if (!r) return lp_error_set(LP_ERR(ENOMEM), "template: out of memory");
    r->objs.next = r->objs.prev = &r->objs;
    r->max_steps = opts && opts->max_steps ? opts->max_steps : 20000000;
    r->max_mem = opts && opts->max_bytes ? opts->max_bytes : (size_t)128 << 20;
    r->max_output = opts && opts->max_output ? opts->max_output : (size_t)32 << 20;
    if (opts && opts->has_now) {
        r->has_now = true;
        r->now = opts->now;
    }
    if (setjmp(r->jmp)) {
        int rc = r->err ? r->err : LP_ERR(EINVAL);
        lp_error_set(rc, "%s", r->msg);
        sweep(r);
        free(r);
        return rc;
    }
    frame_t *builtins = frame_new(r, NULL);
    lp__jglobals(r, builtins);
    frame_t *top = frame_new(r, builtins);
    for (size_t i = 0; i < n_vars; i++)
        lp__jframe_set(r, top, vars[i].name, vars[i].value ? lp__jfrom_json(r, vars[i].value) : jv_none());
    r->frame = top;
    sb_t *o = lp__jraw(r, sizeof(sb_t), &(jobj_t *){0});
    memset(o, 0, sizeof(*o));
    r->top = r->out = o;
    exec(r, t->root);
    char *res = malloc(o->n + 1);
    if (!res) JERR(r, "out of memory");
    if (o->n) memcpy(res, o->p, o->n);
    res[o->n] = 0;
    *out = res;
    if (out_len) *out_len = o->n;
    sweep(r);
    free(r);
    return 0;
}
