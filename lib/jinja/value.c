/* value.c - values as Python has them: memory, reference counts, truth,
 * equality and order, hashing, str() and repr(), iteration, attribute and
 * item access as jinja2's sandbox does them, and the operators. */
#include "jinja-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NESTING 200 /* repr, equality, hashing of nested values */

/* ---- errors and the budget --------------------------------------------------- */

static _Noreturn void vfail(jr_t *r, int code, const char *fmt, va_list ap)
{
    int k = r->line > 0 ? snprintf(r->msg, sizeof(r->msg), "line %d: ", r->line) : 0;
    if (k < 0 || (size_t)k >= sizeof(r->msg)) k = 0;
    vsnprintf(r->msg + k, sizeof(r->msg) - (size_t)k, fmt, ap);
    r->err = code;
    longjmp(r->jmp, 1);
}

void lp__jerr(jr_t *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(r, -EINVAL, fmt, ap);
}

void lp__jerr_big(jr_t *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(r, -E2BIG, fmt, ap);
}

void lp__jstep(jr_t *r, uint64_t n)
{
    r->steps += n;
    if (r->steps > r->max_steps)
        lp__jerr_big(r, "the template ran past its budget of %" PRIu64 " steps", r->max_steps);
}

/* ---- memory -------------------------------------------------------------------- */

void *lp__jalloc(jr_t *r, size_t size, int kind)
{
    if (size > r->max_mem || r->mem + size > r->max_mem)
        lp__jerr_big(r, "the template needs more than %zu bytes of memory", r->max_mem);
    jobj_t *o = calloc(1, size);
    if (!o) lp__jerr_big(r, "out of memory");
    o->kind = (uint8_t)kind;
    o->rc = 1;
    o->size = size;
    o->next = r->objs.next;
    o->prev = &r->objs;
    r->objs.next->prev = o;
    r->objs.next = o;
    r->mem += size;
    lp__jstep(r, 1 + size / 256); /* once linked: a longjmp here frees it in the sweep */
    return o;
}

void lp__jfree_obj(jr_t *r, jobj_t *o)
{
    if (!o || o->rc == JRC_IMMORTAL) return;
    o->prev->next = o->next;
    o->next->prev = o->prev;
    r->mem -= o->size;
    free(o);
}

typedef struct jraw {
    jobj_t h;
    _Alignas(16) unsigned char data[];
} jraw_t;

void *lp__jraw(jr_t *r, size_t bytes, jobj_t **obj)
{
    if (bytes > SIZE_MAX / 2) lp__jerr_big(r, "the template needs more than %zu bytes of memory", r->max_mem);
    jraw_t *o = lp__jalloc(r, sizeof(jraw_t) + bytes, OBJ_RAW);
    *obj = &o->h;
    return o->data;
}

jobj_t *lp__jraw_of(void *data) { return (jobj_t *)((char *)data - offsetof(jraw_t, data)); }

void *lp__jraw_grow(jr_t *r, jobj_t **obj, size_t bytes)
{
    jobj_t *old = *obj;
    size_t have = old ? old->size - sizeof(jraw_t) : 0;
    void *p = lp__jraw(r, bytes, obj);
    if (old) {
        memcpy(p, ((jraw_t *)old)->data, have < bytes ? have : bytes);
        lp__jfree_obj(r, old);
    }
    return p;
}

/* ---- reference counts: objects are freed from a work list, not by
 * recursion, so that a deeply nested value cannot exhaust the C stack ---- */

static _Thread_local jobj_t **dead;
static _Thread_local size_t n_dead, cap_dead;
static _Thread_local bool draining;

static void release(jr_t *r, jobj_t *o)
{
    if (!o || o->rc == JRC_IMMORTAL) return;
    if (--o->rc > 0) return;
    if (n_dead == cap_dead) {
        size_t cap = cap_dead ? cap_dead * 2 : 256;
        jobj_t **d = realloc(dead, cap * sizeof(*d));
        if (!d) return; /* leaked until the render's sweep */
        dead = d;
        cap_dead = cap;
    }
    dead[n_dead++] = o;
}

static void release_v(jr_t *r, jv v)
{
    if (v.t >= JT_STR || (v.t == JT_UNDEF && v.u.s)) release(r, v.u.o);
}

static void destroy(jr_t *r, jobj_t *o)
{
    switch (o->kind) {
    case OBJ_LIST: {
        jlist_t *l = (jlist_t *)o;
        for (size_t i = 0; i < l->n; i++) release_v(r, l->v[i]);
        if (l->err) release(r, &l->err->h);
        if (l->lazy) {
            jlazy_t *z = l->lazy;
            if (z->src) release(r, &z->src->h);
            release_v(r, z->srcval);
            release_v(r, z->nameval);
            release_v(r, z->attr);
            release_v(r, z->dflt);
            for (size_t i = 0; i < z->args.n; i++) release_v(r, z->args.v[i]);
            for (size_t i = 0; i < z->args.nk; i++) release_v(r, z->args.kv[i]);
            if (z->args.v) lp__jfree_obj(r, lp__jraw_of(z->args.v));
            if (z->args.kn) lp__jfree_obj(r, lp__jraw_of((void *)z->args.kn));
            if (z->args.kv) lp__jfree_obj(r, lp__jraw_of(z->args.kv));
            lp__jfree_obj(r, z->obj);
        }
        if (l->v) lp__jfree_obj(r, (jobj_t *)((char *)l->v - offsetof(jraw_t, data)));
        break;
    }
    case OBJ_DICT: {
        jdict_t *d = (jdict_t *)o;
        for (size_t i = 0; i < d->n; i++) {
            release_v(r, d->k[i]);
            release_v(r, d->v[i]);
        }
        if (d->k) lp__jfree_obj(r, (jobj_t *)((char *)d->k - offsetof(jraw_t, data)));
        if (d->v) lp__jfree_obj(r, (jobj_t *)((char *)d->v - offsetof(jraw_t, data)));
        if (d->idx) lp__jfree_obj(r, (jobj_t *)((char *)d->idx - offsetof(jraw_t, data)));
        break;
    }
    case OBJ_FUNC: {
        jfunc_t *f = (jfunc_t *)o;
        release_v(r, f->self);
        if (f->closure) release(r, &f->closure->h);
        break;
    }
    case OBJ_LOOP: {
        jloop_t *l = (jloop_t *)o;
        if (l->items) release(r, &l->items->h);
        release_v(r, l->changed);
        if (l->frame) release(r, &l->frame->h);
        break;
    }
    case OBJ_FRAME: {
        frame_t *f = (frame_t *)o;
        for (size_t i = 0; i < f->n; i++) release_v(r, f->vals[i]);
        if (f->vals) lp__jfree_obj(r, (jobj_t *)((char *)f->vals - offsetof(jraw_t, data)));
        if (f->names) lp__jfree_obj(r, (jobj_t *)((char *)f->names - offsetof(jraw_t, data)));
        if (f->parent) release(r, &f->parent->h);
        break;
    }
    default: break;
    }
    lp__jfree_obj(r, o);
}

static void drain(jr_t *r)
{
    if (draining) return;
    draining = true;
    while (n_dead) destroy(r, dead[--n_dead]);
    draining = false;
}

void lp__jdrop(jr_t *r, jv v)
{
    release_v(r, v);
    drain(r);
}

void lp__jdrop_obj(jr_t *r, jobj_t *o)
{
    release(r, o);
    drain(r);
}

/* After the render's sweep: forget the work list. */
void lp__jdead_reset(void);
void lp__jdead_reset(void)
{
    free(dead);
    dead = NULL;
    n_dead = cap_dead = 0;
    draining = false;
}

/* ---- constructors --------------------------------------------------------------- */

jstr_t *lp__jstr_new(jr_t *r, const char *s, size_t n)
{
    jstr_t *js = lp__jalloc(r, sizeof(jstr_t) + n + 1, OBJ_STR);
    js->len = n;
    js->ncp = SIZE_MAX;
    if (n && s) memcpy(js->p, s, n);
    js->p[n] = 0;
    return js;
}

jv lp__jv_str(jr_t *r, const char *s, size_t n)
{
    jv v = {JT_STR, 0, {.s = lp__jstr_new(r, s, n)}};
    return v;
}

jv lp__jv_cstr(jr_t *r, const char *s) { return lp__jv_str(r, s, strlen(s)); }

jv lp__jv_sb(jr_t *r, sb_t *b)
{
    jv v = lp__jv_str(r, b->p ? b->p : "", b->n);
    lp__sb_free(r, b);
    return v;
}

jv lp__jundef_msg(jr_t *r, const char *fmt, ...)
{
    char buf[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    jv v = {JT_UNDEF, 0, {.s = lp__jstr_new(r, buf, strlen(buf))}};
    return v;
}

jlist_t *lp__jlist_new(jr_t *r, size_t n, int kind)
{
    jlist_t *l = lp__jalloc(r, sizeof(jlist_t), OBJ_LIST);
    l->kind = (uint8_t)kind;
    if (n) {
        if (n > r->max_mem / sizeof(jv)) lp__jerr_big(r, "the template needs more than %zu bytes of memory", r->max_mem);
        jobj_t *o;
        l->v = lp__jraw(r, n * sizeof(jv), &o);
        memset(l->v, 0, n * sizeof(jv));
    }
    l->n = l->cap = n;
    return l;
}

jv lp__jv_list(jlist_t *l)
{
    jv v = {JT_LIST, 0, {.l = l}};
    return v;
}

jv lp__jgen_failing(jr_t *r, jv source, const char *msg)
{
    jlist_t *l = lp__jlist_new(r, 0, JL_GEN);
    if (lp__jtruthy(r, source)) l->err = lp__jstr_new(r, msg, strlen(msg));
    return lp__jv_list(l);
}

jlazy_t *lp__jlazy_new(jr_t *r, jv source, int op)
{
    jobj_t *o;
    jlazy_t *z = lp__jraw(r, sizeof(jlazy_t), &o);
    memset(z, 0, sizeof(*z));
    z->obj = o;
    z->op = op;
    z->srcval = lp__jref(source);
    z->nameval = z->attr = z->dflt = jv_none();
    return z;
}

jv lp__jgen_lazy(jr_t *r, jlazy_t *z)
{
    jlist_t *l = lp__jlist_new(r, 0, JL_GEN);
    l->lazy = z;
    return lp__jv_list(l);
}

bool lp__jgen_next(jr_t *r, jlist_t *l, jv *out)
{
    if (l->err) JERR(r, "%s", l->err->p);
    jlazy_t *z = l->lazy;
    if (!z) {
        if (l->pos >= l->n) return false;
        *out = lp__jref(l->v[l->pos++]);
        return true;
    }
    if (!z->src) {
        /* the first step: `if value:`, then iterate it */
        z->src = lp__jtruthy(r, z->srcval) ? lp__jiter(r, z->srcval) : lp__jlist_new(r, 0, JL_LIST);
    }
    while (z->at < z->src->n) {
        jv item = z->src->v[z->at++];
        lp__jstep(r, 1);
        switch (z->op) {
        case LZ_MAP_FILTER:
            *out = lp__jcall_filter(r, z->name, item, &z->args);
            return true;
        case LZ_MAP_ATTR: {
            jv x = lp__jattr_path(r, item, z->attr);
            if (z->has_dflt && x.t == JT_UNDEF) {
                lp__jdrop(r, x);
                x = lp__jref(z->dflt);
            }
            *out = x;
            return true;
        }
        default: {
            jv x = z->use_attr ? lp__jattr_path(r, item, z->attr) : lp__jref(item);
            bool t = z->name ? lp__jcall_test(r, z->name, x, &z->args) : lp__jtruthy(r, x);
            lp__jdrop(r, x);
            if (t == z->keep_true) {
                *out = lp__jref(item);
                return true;
            }
        }
        }
    }
    return false;
}

jdict_t *lp__jdict_new(jr_t *r) { return lp__jalloc(r, sizeof(jdict_t), OBJ_DICT); }

jv lp__jv_dict(jdict_t *d)
{
    jv v = {JT_DICT, 0, {.dc = d}};
    return v;
}

jfunc_t *lp__jfunc_new(jr_t *r, int kind, const char *name)
{
    jfunc_t *f = lp__jalloc(r, sizeof(jfunc_t), OBJ_FUNC);
    f->kind = (uint8_t)kind;
    f->name = name;
    return f;
}

jv lp__jv_func(jfunc_t *f)
{
    jv v = {JT_FUNC, 0, {.fn = f}};
    return v;
}

jv lp__jv_method(jr_t *r, const char *name, jbuiltin_fn fn, jv self)
{
    jfunc_t *f = lp__jfunc_new(r, JF_METHOD, name);
    f->fn = fn;
    f->self = self;
    return lp__jv_func(f);
}

/* ---- string builder ----------------------------------------------------------- */

void lp__sb_put(jr_t *r, sb_t *b, const char *s, size_t n)
{
    if (!n) return;
    if (b->cap - b->n < n + 1) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap - b->n < n + 1) {
            if (cap > SIZE_MAX / 4) lp__jerr_big(r, "the template needs more than %zu bytes of memory", r->max_mem);
            cap *= 2;
        }
        b->p = lp__jraw_grow(r, &b->obj, cap);
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    if (b == r->top && b->n > r->max_output)
        lp__jerr_big(r, "the rendered text is longer than %zu bytes", r->max_output);
}

void lp__sb_puts(jr_t *r, sb_t *b, const char *s) { lp__sb_put(r, b, s, strlen(s)); }

void lp__sb_printf(jr_t *r, sb_t *b, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (k < 0) return;
    lp__sb_put(r, b, buf, (size_t)k < sizeof(buf) ? (size_t)k : sizeof(buf) - 1);
}

void lp__sb_cp(jr_t *r, sb_t *b, uint32_t cp)
{
    char t[4];
    lp__sb_put(r, b, t, lp_utf8_encode(cp, t));
}

void lp__sb_free(jr_t *r, sb_t *b)
{
    if (b->obj) lp__jfree_obj(r, b->obj);
    memset(b, 0, sizeof(*b));
}

/* ---- dicts ---------------------------------------------------------------------- */

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static uint64_t hash_depth(jr_t *r, jv v, int depth)
{
    if (depth > MAX_NESTING) JERR(r, "a value nested too deeply");
    switch (v.t) {
    case JT_UNDEF: return 0x5555;
    case JT_NONE: return 0x1234567;
    case JT_BOOL: return mix((uint64_t)v.u.b);
    case JT_INT: return mix((uint64_t)v.u.i);
    case JT_FLOAT:
        if (v.u.d == floor(v.u.d) && fabs(v.u.d) < 9.2e18) return mix((uint64_t)(int64_t)v.u.d);
        {
            uint64_t bits;
            memcpy(&bits, &v.u.d, sizeof(bits));
            return mix(bits);
        }
    case JT_STR: {
        uint64_t h = 1469598103934665603ULL;
        for (size_t i = 0; i < v.u.s->len; i++) h = (h ^ (unsigned char)v.u.s->p[i]) * 1099511628211ULL;
        return h;
    }
    case JT_LIST:
        if (v.u.l->kind == JL_TUPLE) {
            uint64_t h = 0x345678;
            for (size_t i = 0; i < v.u.l->n; i++) h = mix(h ^ hash_depth(r, v.u.l->v[i], depth + 1));
            return h;
        }
        if (v.u.l->kind == JL_GEN || v.u.l->kind == JL_REVITER) return mix((uint64_t)(uintptr_t)v.u.l);
        JERR(r, "unhashable type: '%s'", lp__jtype_name(v));
    case JT_DICT: JERR(r, "unhashable type: 'dict'");
    default: return mix((uint64_t)(uintptr_t)v.u.o);
    }
}

uint64_t lp__jhash(jr_t *r, jv v) { return hash_depth(r, v, 0); }

static void dict_reindex(jr_t *r, jdict_t *d, size_t icap)
{
    jobj_t *o = d->idx ? (jobj_t *)((char *)d->idx - offsetof(jraw_t, data)) : NULL;
    if (o) lp__jfree_obj(r, o);
    d->idx = lp__jraw(r, icap * sizeof(uint32_t), &o);
    memset(d->idx, 0, icap * sizeof(uint32_t));
    d->icap = icap;
    for (size_t i = 0; i < d->n; i++) {
        size_t s = (size_t)lp__jhash(r, d->k[i]) & (icap - 1);
        while (d->idx[s]) s = (s + 1) & (icap - 1);
        d->idx[s] = (uint32_t)(i + 1);
    }
}

static size_t dict_find(jr_t *r, jdict_t *d, jv key, uint64_t h)
{
    if (!d->icap) return SIZE_MAX;
    size_t s = (size_t)h & (d->icap - 1);
    while (d->idx[s]) {
        size_t i = d->idx[s] - 1;
        if (lp__jeq(r, d->k[i], key)) return i;
        s = (s + 1) & (d->icap - 1);
    }
    return SIZE_MAX;
}

jv *lp__jdict_get(jr_t *r, jdict_t *d, jv key)
{
    size_t i = dict_find(r, d, key, lp__jhash(r, key));
    return i == SIZE_MAX ? NULL : &d->v[i];
}

jv *lp__jdict_get_str(jdict_t *d, const char *k, size_t n)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == JT_STR && d->k[i].u.s->len == n && !memcmp(d->k[i].u.s->p, k, n)) return &d->v[i];
    return NULL;
}

void lp__jdict_set(jr_t *r, jdict_t *d, jv key, jv val)
{
    uint64_t h = lp__jhash(r, key);
    size_t i = dict_find(r, d, key, h);
    if (i != SIZE_MAX) {
        lp__jdrop(r, key);
        jv old = d->v[i];
        d->v[i] = val;
        lp__jdrop(r, old);
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        jobj_t *ko = d->k ? (jobj_t *)((char *)d->k - offsetof(jraw_t, data)) : NULL;
        jobj_t *vo = d->v ? (jobj_t *)((char *)d->v - offsetof(jraw_t, data)) : NULL;
        d->k = lp__jraw_grow(r, &ko, cap * sizeof(jv));
        d->v = lp__jraw_grow(r, &vo, cap * sizeof(jv));
        d->cap = cap;
    }
    d->k[d->n] = key;
    d->v[d->n] = val;
    d->n++;
    if (d->n * 2 > d->icap) {
        dict_reindex(r, d, d->icap ? d->icap * 2 : 16);
    } else {
        size_t s = (size_t)h & (d->icap - 1);
        while (d->idx[s]) s = (s + 1) & (d->icap - 1);
        d->idx[s] = (uint32_t)d->n;
    }
}

/* ---- type names, truth ---------------------------------------------------------- */

const char *lp__jtype_name(jv v)
{
    switch (v.t) {
    case JT_UNDEF: return "Undefined";
    case JT_NONE: return "NoneType";
    case JT_BOOL: return "bool";
    case JT_INT: return "int";
    case JT_FLOAT: return "float";
    case JT_STR: return v.f & JF_MARKUP ? "Markup" : "str";
    case JT_LIST:
        switch (v.u.l->kind) {
        case JL_TUPLE: return "tuple";
        case JL_GEN: return "generator";
        case JL_ITEMS: return "dict_items";
        case JL_KEYS: return "dict_keys";
        case JL_VALUES: return "dict_values";
        case JL_REVITER: return "list_reverseiterator";
        case JL_RANGE: return "range";
        default: return "list";
        }
    case JT_DICT: return "dict";
    case JT_NS: return "Namespace";
    case JT_FUNC: return v.u.fn->kind == JF_MACRO || v.u.fn->kind == JF_CALLER ? "Macro" : "builtin_function_or_method";
    case JT_LOOP: return "LoopContext";
    }
    return "object";
}

bool lp__jtruthy(jr_t *r, jv v)
{
    (void)r;
    switch (v.t) {
    case JT_UNDEF: case JT_NONE: return false;
    case JT_BOOL: return v.u.b;
    case JT_INT: return v.u.i != 0;
    case JT_FLOAT: return v.u.d != 0;
    case JT_STR: return v.u.s->len > 0;
    case JT_LIST: return v.u.l->kind == JL_GEN || v.u.l->kind == JL_REVITER || v.u.l->n > 0;
    case JT_DICT: return v.u.dc->n > 0;
    default: return true;
    }
}

/* ---- equality and order ------------------------------------------------------------ */

static bool is_num(jv v) { return v.t == JT_BOOL || v.t == JT_INT || v.t == JT_FLOAT; }
static double num_d(jv v) { return v.t == JT_FLOAT ? v.u.d : v.t == JT_INT ? (double)v.u.i : v.u.b; }
static int64_t num_i(jv v) { return v.t == JT_INT ? v.u.i : v.u.b; }

/* Compare an integer with a double exactly, as Python does. */
static int cmp_int_float(int64_t i, double d)
{
    if (isnan(d)) return 2; /* unordered */
    if (d >= 9223372036854775808.0) return -1;
    if (d < -9223372036854775808.0) return 1;
    double fl = floor(d);
    int64_t di = (int64_t)fl;
    if (i < di) return -1;
    if (i > di) return 1;
    return fl < d ? -1 : 0;
}

static int num_cmp(jv a, jv b)
{
    if (a.t != JT_FLOAT && b.t != JT_FLOAT) {
        int64_t x = num_i(a), y = num_i(b);
        return x < y ? -1 : x > y;
    }
    if (a.t == JT_FLOAT && b.t == JT_FLOAT) {
        if (isnan(a.u.d) || isnan(b.u.d)) return 2;
        return a.u.d < b.u.d ? -1 : a.u.d > b.u.d;
    }
    if (a.t == JT_FLOAT) {
        int c = cmp_int_float(num_i(b), a.u.d);
        return c == 2 ? 2 : -c;
    }
    return cmp_int_float(num_i(a), b.u.d);
}

static bool eq_depth(jr_t *r, jv a, jv b, int depth)
{
    if (depth > MAX_NESTING) JERR(r, "a value nested too deeply");
    if (is_num(a) && is_num(b)) return num_cmp(a, b) == 0;
    if (a.t != b.t) return false;
    switch (a.t) {
    case JT_UNDEF: case JT_NONE: return true;
    case JT_STR: return a.u.s->len == b.u.s->len && !memcmp(a.u.s->p, b.u.s->p, a.u.s->len);
    case JT_LIST: {
        jlist_t *x = a.u.l, *y = b.u.l;
        if (x == y) return true;
        int kx = x->kind == JL_TUPLE ? JL_TUPLE : x->kind, ky = y->kind;
        if (kx != ky || (kx != JL_LIST && kx != JL_TUPLE && kx != JL_ITEMS && kx != JL_KEYS && kx != JL_RANGE))
            return false;
        if (x->n != y->n) return false;
        for (size_t i = 0; i < x->n; i++)
            if (!eq_depth(r, x->v[i], y->v[i], depth + 1)) return false;
        return true;
    }
    case JT_DICT: {
        jdict_t *x = a.u.dc, *y = b.u.dc;
        if (x->n != y->n) return false;
        for (size_t i = 0; i < x->n; i++) {
            jv *o = lp__jdict_get(r, y, x->k[i]);
            if (!o || !eq_depth(r, x->v[i], *o, depth + 1)) return false;
        }
        return true;
    }
    default: return a.u.o == b.u.o;
    }
}

bool lp__jeq(jr_t *r, jv a, jv b) { return eq_depth(r, a, b, 0); }

static _Noreturn void undef_fail(jr_t *r, jv u)
{
    JERR(r, "%s", u.u.s ? u.u.s->p : "an undefined value was used");
}

static int cmp_depth(jr_t *r, jv a, jv b, const char *op, int depth)
{
    if (depth > MAX_NESTING) JERR(r, "a value nested too deeply");
    if (a.t == JT_UNDEF) undef_fail(r, a);
    if (b.t == JT_UNDEF) undef_fail(r, b);
    if (is_num(a) && is_num(b)) {
        int c = num_cmp(a, b);
        return c == 2 ? 2 : c;
    }
    if (a.t == JT_STR && b.t == JT_STR) {
        size_t n = a.u.s->len < b.u.s->len ? a.u.s->len : b.u.s->len;
        int c = memcmp(a.u.s->p, b.u.s->p, n);
        if (c) return c < 0 ? -1 : 1;
        return a.u.s->len < b.u.s->len ? -1 : a.u.s->len > b.u.s->len;
    }
    if (a.t == JT_LIST && b.t == JT_LIST && a.u.l->kind == b.u.l->kind &&
        (a.u.l->kind == JL_LIST || a.u.l->kind == JL_TUPLE)) {
        jlist_t *x = a.u.l, *y = b.u.l;
        for (size_t i = 0; i < x->n && i < y->n; i++) {
            if (eq_depth(r, x->v[i], y->v[i], depth + 1)) continue;
            return cmp_depth(r, x->v[i], y->v[i], op, depth + 1);
        }
        return x->n < y->n ? -1 : x->n > y->n;
    }
    JERR(r, "'%s' not supported between instances of '%s' and '%s'", op, lp__jtype_name(a), lp__jtype_name(b));
}

int lp__jcmp(jr_t *r, jv a, jv b, const char *op) { return cmp_depth(r, a, b, op, 0); }

/* ---- str() and repr() ----------------------------------------------------------------- */

void lp__jfloat_repr(char *buf, size_t cap, double d)
{
    if (isnan(d)) {
        snprintf(buf, cap, "nan");
        return;
    }
    if (isinf(d)) {
        snprintf(buf, cap, d < 0 ? "-inf" : "inf");
        return;
    }
    if (d == 0) {
        snprintf(buf, cap, signbit(d) ? "-0.0" : "0.0");
        return;
    }
    /* the shortest digits that read back as d */
    char e[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(e, sizeof(e), "%.*e", prec - 1, d);
        if (strtod(e, NULL) == d) break;
    }
    /* e: [-]d[.ddd]e[+-]XX */
    const char *q = e;
    bool neg = *q == '-';
    if (neg) q++;
    char digits[24];
    int nd = 0;
    for (; *q && *q != 'e'; q++)
        if (*q != '.') digits[nd++] = *q;
    digits[nd] = 0;
    while (nd > 1 && digits[nd - 1] == '0') digits[--nd] = 0;
    int exp10 = atoi(q + 1);
    int decpt = exp10 + 1;
    char out[64];
    size_t k = 0;
    if (neg) out[k++] = '-';
    if (decpt <= -4 || decpt > 16) {
        out[k++] = digits[0];
        if (nd > 1) {
            out[k++] = '.';
            for (int i = 1; i < nd; i++) out[k++] = digits[i];
        }
        k += (size_t)snprintf(out + k, sizeof(out) - k, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    } else if (decpt <= 0) {
        out[k++] = '0';
        out[k++] = '.';
        for (int i = 0; i < -decpt; i++) out[k++] = '0';
        for (int i = 0; i < nd; i++) out[k++] = digits[i];
        out[k] = 0;
    } else {
        for (int i = 0; i < decpt; i++) out[k++] = i < nd ? digits[i] : '0';
        out[k++] = '.';
        if (nd > decpt)
            for (int i = decpt; i < nd; i++) out[k++] = digits[i];
        else
            out[k++] = '0';
        out[k] = 0;
    }
    out[k] = 0;
    snprintf(buf, cap, "%s", out);
}

static void repr_str(jr_t *r, sb_t *b, const char *s, size_t n)
{
    bool has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    lp__sb_putc(r, b, q);
    size_t run = 0; /* bytes copied as they are, in one put */
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char tmp[16];
        size_t adv = 1;
        if (c == (unsigned char)q || c == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)c;
            tmp[2] = 0;
            esc = tmp;
        } else if (c == '\t') esc = "\\t";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c < 0x20 || c == 0x7f) {
            snprintf(tmp, sizeof(tmp), "\\x%02x", c);
            esc = tmp;
        } else if (c >= 0x80) {
            size_t j = i;
            uint32_t cp = lp__u8_next(s, n, &j);
            adv = j - i;
            if (!(lp__py_flags(cp) & LP_PY_PRINT) || (cp >= 0xd800 && cp <= 0xdfff)) {
                snprintf(tmp, sizeof(tmp), cp <= 0xff ? "\\x%02x" : cp <= 0xffff ? "\\u%04x" : "\\U%08x", cp);
                esc = tmp;
            }
        }
        if (esc) {
            lp__sb_put(r, b, s + i - run, run);
            run = 0;
            lp__sb_puts(r, b, esc);
        } else
            run += adv;
        i += adv;
    }
    lp__sb_put(r, b, s + n - run, run);
    lp__sb_putc(r, b, q);
}

static void repr_depth(jr_t *r, sb_t *b, jv v, int depth);

static void repr_items(jr_t *r, sb_t *b, jlist_t *l, int depth)
{
    for (size_t i = 0; i < l->n; i++) {
        if (i) lp__sb_puts(r, b, ", ");
        repr_depth(r, b, l->v[i], depth + 1);
    }
}

static void repr_dict(jr_t *r, sb_t *b, jdict_t *d, int depth)
{
    lp__sb_putc(r, b, '{');
    for (size_t i = 0; i < d->n; i++) {
        if (i) lp__sb_puts(r, b, ", ");
        repr_depth(r, b, d->k[i], depth + 1);
        lp__sb_puts(r, b, ": ");
        repr_depth(r, b, d->v[i], depth + 1);
    }
    lp__sb_putc(r, b, '}');
}

static void str_depth(jr_t *r, sb_t *b, jv v, int depth)
{
    char buf[64];
    switch (v.t) {
    case JT_UNDEF: return;
    case JT_NONE: lp__sb_puts(r, b, "None"); return;
    case JT_BOOL: lp__sb_puts(r, b, v.u.b ? "True" : "False"); return;
    case JT_INT: lp__sb_printf(r, b, "%" PRId64, v.u.i); return;
    case JT_FLOAT:
        lp__jfloat_repr(buf, sizeof(buf), v.u.d);
        lp__sb_puts(r, b, buf);
        return;
    case JT_STR: lp__sb_put(r, b, v.u.s->p, v.u.s->len); return;
    default: repr_depth(r, b, v, depth);
    }
}

static void repr_depth(jr_t *r, sb_t *b, jv v, int depth)
{
    if (depth > MAX_NESTING) JERR(r, "maximum recursion depth exceeded while getting the repr of an object");
    lp__jstep(r, 1);
    switch (v.t) {
    case JT_UNDEF: lp__sb_puts(r, b, "Undefined"); return;
    case JT_STR:
        if (v.f & JF_MARKUP) lp__sb_puts(r, b, "Markup(");
        repr_str(r, b, v.u.s->p, v.u.s->len);
        if (v.f & JF_MARKUP) lp__sb_putc(r, b, ')');
        return;
    case JT_LIST: {
        jlist_t *l = v.u.l;
        switch (l->kind) {
        case JL_LIST:
            lp__sb_putc(r, b, '[');
            repr_items(r, b, l, depth);
            lp__sb_putc(r, b, ']');
            return;
        case JL_TUPLE:
            lp__sb_putc(r, b, '(');
            repr_items(r, b, l, depth);
            lp__sb_puts(r, b, l->n == 1 ? ",)" : ")");
            return;
        case JL_ITEMS: case JL_KEYS: case JL_VALUES:
            lp__sb_puts(r, b, l->kind == JL_ITEMS ? "dict_items([" : l->kind == JL_KEYS ? "dict_keys([" : "dict_values([");
            repr_items(r, b, l, depth);
            lp__sb_puts(r, b, "])");
            return;
        /* Python prints an address here; a render must not depend on one */
        case JL_GEN: lp__sb_puts(r, b, "<generator object>"); return;
        case JL_RANGE:
            if (l->rs == 1) lp__sb_printf(r, b, "range(%" PRId64 ", %" PRId64 ")", l->r0, l->r1);
            else lp__sb_printf(r, b, "range(%" PRId64 ", %" PRId64 ", %" PRId64 ")", l->r0, l->r1, l->rs);
            return;
        default: lp__sb_puts(r, b, "<list_reverseiterator object>"); return;
        }
    }
    case JT_DICT: repr_dict(r, b, v.u.dc, depth); return;
    case JT_NS:
        lp__sb_puts(r, b, "<Namespace ");
        repr_dict(r, b, v.u.dc, depth);
        lp__sb_putc(r, b, '>');
        return;
    case JT_FUNC: {
        jfunc_t *f = v.u.fn;
        if (f->kind == JF_BUILTIN && !strcmp(f->name, "dict")) lp__sb_puts(r, b, "<class 'dict'>");
        else if (f->kind == JF_BUILTIN && !strcmp(f->name, "range")) lp__sb_puts(r, b, "<function safe_range>");
        else if (f->kind == JF_BUILTIN && !strcmp(f->name, "namespace"))
            lp__sb_puts(r, b, "<class 'jinja2.utils.Namespace'>");
        else if (f->kind == JF_BUILTIN && !strcmp(f->name, "joiner")) lp__sb_puts(r, b, "<class 'jinja2.utils.Joiner'>");
        else if (f->kind == JF_MACRO) lp__sb_printf(r, b, "<Macro '%s'>", f->name);
        else if (f->kind == JF_CALLER) lp__sb_puts(r, b, "<Macro anonymous>");
        else if (f->kind == JF_METHOD && f->self.t == JT_LOOP)
            lp__sb_printf(r, b, "<bound method LoopContext.%s of <LoopContext %zu/%zu>>", f->name,
                          f->self.u.loop->i + 1, f->self.u.loop->items->n);
        else if (f->kind == JF_METHOD) lp__sb_printf(r, b, "<built-in method %s of %s object>", f->name,
                                                      lp__jtype_name(f->self));
        else lp__sb_printf(r, b, "<function %s>", f->name ? f->name : "?");
        return;
    }
    case JT_LOOP:
        lp__sb_printf(r, b, "<LoopContext %zu/%zu>", v.u.loop->i + 1, v.u.loop->items->n);
        return;
    default: str_depth(r, b, v, depth);
    }
}

void lp__jstr_of(jr_t *r, sb_t *b, jv v) { str_depth(r, b, v, 0); }
void lp__jrepr(jr_t *r, sb_t *b, jv v) { repr_depth(r, b, v, 0); }

jv lp__jto_str(jr_t *r, jv v)
{
    if (v.t == JT_STR) return lp__jref(v);
    sb_t b = {0};
    lp__jstr_of(r, &b, v);
    return lp__jv_sb(r, &b);
}

size_t lp__jstr_ncp(jstr_t *s)
{
    if (s->ncp == SIZE_MAX) s->ncp = lp__u8_count(s->p, s->len);
    return s->ncp;
}

void lp__jescape(jr_t *r, sb_t *b, const char *s, size_t n)
{
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        const char *e = NULL;
        switch (s[i]) {
        case '&': e = "&amp;"; break;
        case '<': e = "&lt;"; break;
        case '>': e = "&gt;"; break;
        case '\'': e = "&#39;"; break;
        case '"': e = "&#34;"; break;
        default: run++; continue;
        }
        lp__sb_put(r, b, s + i - run, run);
        run = 0;
        lp__sb_puts(r, b, e);
    }
    lp__sb_put(r, b, s + n - run, run);
}

/* ---- iteration, membership, length ------------------------------------------------ */

jlist_t *lp__jiter_or_null(jr_t *r, jv v)
{
    switch (v.t) {
    case JT_UNDEF: return lp__jlist_new(r, 0, JL_LIST);
    case JT_LIST: {
        jlist_t *l = v.u.l;
        if (l->kind != JL_GEN && l->kind != JL_REVITER) {
            l->h.rc += l->h.rc != JRC_IMMORTAL;
            return l;
        }
        /* an iterator: what is left of it, once */
        jlist_t *o = lp__jlist_new(r, 0, JL_LIST);
        jobj_t *buf = NULL;
        jv x;
        while (lp__jgen_next(r, l, &x)) {
            if (o->n == o->cap) {
                o->cap = o->cap ? o->cap * 2 : 8;
                o->v = lp__jraw_grow(r, &buf, o->cap * sizeof(jv));
            }
            o->v[o->n++] = x;
        }
        return o;
    }
    case JT_STR: {
        jstr_t *s = v.u.s;
        jlist_t *o = lp__jlist_new(r, lp__jstr_ncp(s), JL_LIST);
        size_t i = 0, k = 0;
        while (i < s->len) {
            size_t j = i;
            lp__u8_next(s->p, s->len, &j);
            o->v[k++] = lp__jv_str(r, s->p + i, j - i); /* plain str, even from Markup */
            i = j;
        }
        return o;
    }
    case JT_DICT: {
        jdict_t *d = v.u.dc;
        jlist_t *o = lp__jlist_new(r, d->n, JL_LIST);
        for (size_t i = 0; i < d->n; i++) o->v[i] = lp__jref(d->k[i]);
        return o;
    }
    default: return NULL;
    }
}

jlist_t *lp__jiter(jr_t *r, jv v)
{
    jlist_t *l = lp__jiter_or_null(r, v);
    if (!l) JERR(r, "'%s' object is not iterable", lp__jtype_name(v));
    return l;
}

bool lp__jcontains(jr_t *r, jv c, jv item)
{
    switch (c.t) {
    case JT_UNDEF: return false;
    case JT_STR:
        if (item.t != JT_STR)
            JERR(r, "'in <string>' requires string as left operand, not %s", lp__jtype_name(item));
        if (!item.u.s->len) return true;
        return memmem(c.u.s->p, c.u.s->len, item.u.s->p, item.u.s->len) != NULL;
    case JT_DICT: return lp__jdict_get(r, c.u.dc, item) != NULL;
    case JT_LIST: {
        jlist_t *l = c.u.l;
        if (l->kind == JL_KEYS) {
            lp__jhash(r, item);
        }
        if (l->kind == JL_GEN || l->kind == JL_REVITER) {
            jv x;
            while (lp__jgen_next(r, l, &x)) {
                bool eq = lp__jeq(r, x, item);
                lp__jdrop(r, x);
                if (eq) return true;
            }
            return false;
        }
        for (size_t i = 0; i < l->n; i++)
            if (lp__jeq(r, l->v[i], item)) return true;
        return false;
    }
    default: JERR(r, "argument of type '%s' is not iterable", lp__jtype_name(c));
    }
}

bool lp__jhas_len(jv v)
{
    return v.t == JT_UNDEF || v.t == JT_STR || v.t == JT_DICT ||
           (v.t == JT_LIST && v.u.l->kind != JL_GEN && v.u.l->kind != JL_REVITER);
}

int64_t lp__jlen(jr_t *r, jv v)
{
    if (!lp__jhas_len(v)) JERR(r, "object of type '%s' has no len()", lp__jtype_name(v));
    switch (v.t) {
    case JT_UNDEF: return 0;
    case JT_STR: return (int64_t)lp__jstr_ncp(v.u.s);
    case JT_DICT: return (int64_t)v.u.dc->n;
    default: return (int64_t)v.u.l->n;
    }
}

/* ---- attributes and items, as the sandbox resolves them --------------------------- */

static const char *obj_desc(jv v, char *buf, size_t cap)
{
    if (v.t == JT_NONE) return "None";
    snprintf(buf, cap, "%s object", lp__jtype_name(v));
    return buf;
}

static jv no_attr(jr_t *r, jv obj, const char *name, size_t n)
{
    char d[64];
    return lp__jundef_msg(r, "'%s' has no attribute '%.*s'", obj_desc(obj, d, sizeof(d)), (int)n, name);
}

static jv loop_attr(jr_t *r, jv obj, const char *name, size_t n, bool *found);

jv lp__jgetattr(jr_t *r, jv obj, const char *name, size_t n)
{
    if (obj.t == JT_UNDEF) undef_fail(r, obj);
    bool unsafe = false;
    jv m;
    switch (obj.t) {
    case JT_NS: {
        jv *x = lp__jdict_get_str(obj.u.dc, name, n);
        return x ? lp__jref(*x) : no_attr(r, obj, name, n);
    }
    case JT_LOOP: {
        bool found;
        jv x = loop_attr(r, obj, name, n, &found);
        return found ? x : no_attr(r, obj, name, n);
    }
    case JT_INT: case JT_BOOL: case JT_FLOAT: {
        bool fl = obj.t == JT_FLOAT;
        if (n == 4 && !memcmp(name, "real", 4)) return fl ? obj : jv_int(obj.t == JT_INT ? obj.u.i : obj.u.b);
        if (n == 4 && !memcmp(name, "imag", 4)) return fl ? jv_float(0) : jv_int(0);
        if (!fl && n == 9 && !memcmp(name, "numerator", 9)) return jv_int(obj.t == JT_INT ? obj.u.i : obj.u.b);
        if (!fl && n == 11 && !memcmp(name, "denominator", 11)) return jv_int(1);
        break;
    }
    case JT_LIST:
        /* groupby's (grouper, list) named tuples */
        if (obj.u.l->named_group && obj.u.l->n == 2) {
            if (n == 7 && !memcmp(name, "grouper", 7)) return lp__jref(obj.u.l->v[0]);
            if (n == 4 && !memcmp(name, "list", 4)) return lp__jref(obj.u.l->v[1]);
        }
        break;
    default: break;
    }
    m = lp__jmethod(r, obj, name, n, &unsafe);
    if (unsafe)
        return lp__jundef_msg(r, "access to attribute '%.*s' of '%s' object is unsafe.", (int)n, name,
                              lp__jtype_name(obj));
    if (m.t != JT_UNDEF) return m;
    if (obj.t == JT_DICT) {
        jv *x = lp__jdict_get_str(obj.u.dc, name, n);
        if (x) return lp__jref(*x);
    }
    return no_attr(r, obj, name, n);
}

static bool as_index(jv k, int64_t *i)
{
    if (k.t == JT_INT) *i = k.u.i;
    else if (k.t == JT_BOOL) *i = k.u.b;
    else return false;
    return true;
}

jv lp__jgetitem(jr_t *r, jv obj, jv key)
{
    if (obj.t == JT_UNDEF) undef_fail(r, obj);
    int64_t i;
    switch (obj.t) {
    case JT_DICT: {
        bool hashable = !(key.t == JT_DICT || key.t == JT_NS ||
                          (key.t == JT_LIST && key.u.l->kind != JL_TUPLE && key.u.l->kind != JL_GEN &&
                           key.u.l->kind != JL_REVITER));
        if (hashable) {
            jv *x = lp__jdict_get(r, obj.u.dc, key);
            if (x) return lp__jref(*x);
        }
        break;
    }
    case JT_LIST:
        if ((obj.u.l->kind == JL_LIST || obj.u.l->kind == JL_TUPLE || obj.u.l->kind == JL_RANGE) &&
            as_index(key, &i)) {
            int64_t n = (int64_t)obj.u.l->n;
            if (i < 0) i += n;
            if (i >= 0 && i < n) return lp__jref(obj.u.l->v[i]);
        }
        break;
    case JT_STR:
        if (as_index(key, &i)) {
            jstr_t *s = obj.u.s;
            int64_t n = (int64_t)lp__jstr_ncp(s);
            if (i < 0) i += n;
            if (i >= 0 && i < n) {
                size_t off = lp__u8_offset(s->p, s->len, (size_t)i), e = off;
                lp__u8_next(s->p, s->len, &e);
                jv c = lp__jv_str(r, s->p + off, e - off);
                c.f = obj.f;
                return c;
            }
        }
        break;
    default: break;
    }
    if (key.t == JT_STR) {
        if (obj.t == JT_NS || obj.t == JT_LOOP || obj.t == JT_DICT || obj.t == JT_LIST || obj.t == JT_STR) {
            jv a = lp__jgetattr(r, obj, key.u.s->p, key.u.s->len);
            return a;
        }
        return no_attr(r, obj, key.u.s->p, key.u.s->len);
    }
    char d[64];
    sb_t b = {0};
    lp__jrepr(r, &b, key);
    jv u = lp__jundef_msg(r, "'%s' has no element %s", obj_desc(obj, d, sizeof(d)), b.p ? b.p : "");
    lp__sb_free(r, &b);
    return u;
}

static bool slice_index(jr_t *r, jv v, int64_t *out, bool *given)
{
    (void)r;
    *given = false;
    if (v.t == JT_NONE || (v.t == JT_UNDEF && v.f == 1)) return true;
    if (!as_index(v, out)) return false;
    *given = true;
    return true;
}

jv lp__jslice(jr_t *r, jv obj, jv start, jv stop, jv step, bool folded)
{
    /* slices bypass the sandbox's getitem: Python's own errors; but jinja2's
     * optimizer folds a slice of constants through the sandbox's getitem,
     * which makes its TypeErrors Undefined */
    if (obj.t == JT_UNDEF) undef_fail(r, obj);
    if (folded) {
        bool ok_obj = obj.t == JT_STR || (obj.t == JT_LIST && (obj.u.l->kind == JL_LIST || obj.u.l->kind == JL_TUPLE));
        bool ok_idx = true;
        jv parts[3] = {start, stop, step};
        for (int k = 0; k < 3; k++)
            ok_idx = ok_idx && (parts[k].t == JT_NONE || parts[k].t == JT_INT || parts[k].t == JT_BOOL);
        if (!ok_obj || !ok_idx) return lp__jundef_msg(r, "'%s' object has no element slice", lp__jtype_name(obj));
    }
    int64_t a = 0, b = 0, s = 1;
    bool ga = false, gb = false, gs = false;
    bool seq = obj.t == JT_STR || (obj.t == JT_LIST && (obj.u.l->kind == JL_LIST || obj.u.l->kind == JL_TUPLE ||
                                                        obj.u.l->kind == JL_RANGE));
    if (obj.t == JT_DICT) JERR(r, "unhashable type: 'slice'");
    if (!seq) JERR(r, "'%s' object is not subscriptable", lp__jtype_name(obj));
    bool ok = slice_index(r, start, &a, &ga) && slice_index(r, stop, &b, &gb) && slice_index(r, step, &s, &gs);
    if (!ok) JERR(r, "slice indices must be integers or None or have an __index__ method");
    if (gs && s == 0) JERR(r, "slice step cannot be zero");
    if (!gs) s = 1;
    int64_t n = obj.t == JT_STR ? (int64_t)lp__jstr_ncp(obj.u.s) : (int64_t)obj.u.l->n;
    /* PySlice_AdjustIndices */
    if (!ga) a = s < 0 ? n - 1 : 0;
    else {
        if (a < 0) {
            a += n;
            if (a < 0) a = s < 0 ? -1 : 0;
        } else if (a >= n)
            a = s < 0 ? n - 1 : n;
    }
    if (!gb) b = s < 0 ? -1 : n;
    else {
        if (b < 0) {
            b += n;
            if (b < 0) b = s < 0 ? -1 : 0;
        } else if (b >= n)
            b = s < 0 ? n - 1 : n;
    }
    int64_t count = 0;
    if (s < 0) {
        if (b < a) count = (a - b - 1) / (-s) + 1;
    } else if (a < b)
        count = (b - a - 1) / s + 1;
    if (obj.t == JT_LIST) {
        jlist_t *o = lp__jlist_new(r, (size_t)count, obj.u.l->kind);
        for (int64_t k = 0; k < count; k++) o->v[k] = lp__jref(obj.u.l->v[a + k * s]);
        if (o->kind == JL_RANGE) {
            o->r0 = obj.u.l->r0 + a * obj.u.l->rs;
            o->r1 = obj.u.l->r0 + b * obj.u.l->rs;
            o->rs = obj.u.l->rs * s;
        }
        return lp__jv_list(o);
    }
    jstr_t *str = obj.u.s;
    sb_t out = {0};
    if (s == 1) {
        size_t x = lp__u8_offset(str->p, str->len, (size_t)a);
        size_t y = x + lp__u8_offset(str->p + x, str->len - x, (size_t)count);
        lp__sb_put(r, &out, str->p + x, y - x);
    } else {
        /* code point offsets, then pick */
        size_t ncp = lp__jstr_ncp(str);
        jobj_t *o;
        size_t *offs = lp__jraw(r, (ncp + 1) * sizeof(size_t), &o);
        size_t i = 0, k = 0;
        while (i < str->len) {
            offs[k++] = i;
            lp__u8_next(str->p, str->len, &i);
        }
        offs[k] = str->len;
        for (int64_t c = 0; c < count; c++) {
            int64_t at = a + c * s;
            lp__sb_put(r, &out, str->p + offs[at], offs[at + 1] - offs[at]);
        }
        lp__jfree_obj(r, o);
    }
    jv v = lp__jv_sb(r, &out);
    v.f = obj.f;
    return v;
}

/* ---- the loop variable -------------------------------------------------------------- */

static jv loop_cycle(jr_t *r, jv self, jargs_t *a)
{
    jloop_t *l = self.u.loop;
    if (!a->n) JERR(r, "no items for cycling given");
    return lp__jref(a->v[l->i % a->n]);
}

static jv loop_changed(jr_t *r, jv self, jargs_t *a)
{
    jloop_t *l = self.u.loop;
    jlist_t *t = lp__jlist_new(r, a->n, JL_TUPLE);
    for (size_t i = 0; i < a->n; i++) t->v[i] = lp__jref(a->v[i]);
    jv now = lp__jv_list(t);
    if (l->has_changed && lp__jeq(r, now, l->changed)) {
        lp__jdrop(r, now);
        return jv_bool(false);
    }
    lp__jdrop(r, l->changed);
    l->changed = now;
    l->has_changed = true;
    return jv_bool(true);
}

static jv loop_attr(jr_t *r, jv obj, const char *name, size_t n, bool *found)
{
    jloop_t *l = obj.u.loop;
    int64_t len = (int64_t)l->items->n, i = (int64_t)l->i;
    *found = true;
#define IS(s) (n == sizeof(s) - 1 && !memcmp(name, s, n))
    if (IS("index")) return jv_int(i + 1);
    if (IS("index0")) return jv_int(i);
    if (IS("revindex")) return jv_int(len - i);
    if (IS("revindex0")) return jv_int(len - i - 1);
    if (IS("first")) return jv_bool(i == 0);
    if (IS("last")) return jv_bool(i == len - 1);
    if (IS("length")) return jv_int(len);
    if (IS("depth")) return jv_int(l->depth0 + 1);
    if (IS("depth0")) return jv_int(l->depth0);
    if (IS("previtem"))
        return i > 0 ? lp__jref(l->items->v[i - 1]) : lp__jundef_msg(r, "there is no previous item");
    if (IS("nextitem"))
        return i + 1 < len ? lp__jref(l->items->v[i + 1]) : lp__jundef_msg(r, "there is no next item");
    if (IS("cycle")) return lp__jv_method(r, "cycle", loop_cycle, lp__jref(obj));
    if (IS("changed")) return lp__jv_method(r, "changed", loop_changed, lp__jref(obj));
#undef IS
    *found = false;
    return jv_undef();
}

/* ---- operators ---------------------------------------------------------------------- */

static _Noreturn void bad_operands(jr_t *r, const char *op, jv a, jv b)
{
    JERR(r, "unsupported operand type(s) for %s: '%s' and '%s'", op, lp__jtype_name(a), lp__jtype_name(b));
}

static jv repeat(jr_t *r, jv seq, int64_t k)
{
    if (k < 0) k = 0;
    if (seq.t == JT_STR) {
        size_t n = seq.u.s->len;
        if (k && n > r->max_mem / (uint64_t)k)
            lp__jerr_big(r, "the template needs more than %zu bytes of memory", r->max_mem);
        jstr_t *s = lp__jstr_new(r, NULL, n * (size_t)k);
        for (int64_t i = 0; i < k; i++) memcpy(s->p + (size_t)i * n, seq.u.s->p, n);
        s->p[n * (size_t)k] = 0;
        lp__jstep(r, (uint64_t)k);
        jv v = {JT_STR, seq.f, {.s = s}};
        return v;
    }
    jlist_t *l = seq.u.l;
    if (k && l->n > r->max_mem / sizeof(jv) / (uint64_t)k)
        lp__jerr_big(r, "the template needs more than %zu bytes of memory", r->max_mem);
    jlist_t *o = lp__jlist_new(r, l->n * (size_t)k, l->kind);
    for (int64_t i = 0; i < k; i++)
        for (size_t j = 0; j < l->n; j++) o->v[(size_t)i * l->n + j] = lp__jref(l->v[j]);
    return lp__jv_list(o);
}

static double py_fmod(double a, double b, double *floordiv)
{
    double mod = fmod(a, b);
    double div = (a - mod) / b;
    if (mod) {
        if ((b < 0) != (mod < 0)) {
            mod += b;
            div -= 1.0;
        }
    } else
        mod = copysign(0.0, b);
    if (div) {
        double fl = floor(div);
        if (div - fl > 0.5) fl += 1.0;
        div = fl;
    } else
        div = copysign(0.0, a / b);
    if (floordiv) *floordiv = div;
    return mod;
}

static jv str_concat(jr_t *r, jv a, jv b)
{
    bool markup = (a.f | b.f) & JF_MARKUP;
    sb_t s = {0};
    if (markup && !(a.f & JF_MARKUP)) lp__jescape(r, &s, a.u.s->p, a.u.s->len);
    else lp__sb_put(r, &s, a.u.s->p, a.u.s->len);
    if (markup && !(b.f & JF_MARKUP)) lp__jescape(r, &s, b.u.s->p, b.u.s->len);
    else lp__sb_put(r, &s, b.u.s->p, b.u.s->len);
    jv v = lp__jv_sb(r, &s);
    v.f = markup ? JF_MARKUP : 0;
    return v;
}

jv lp__jbinop(jr_t *r, int op, jv a, jv b)
{
    if (a.t == JT_UNDEF) undef_fail(r, a);
    /* str % Undefined is str.__mod__'s: '%s' of it is "" */
    if (b.t == JT_UNDEF && !(op == '%' && a.t == JT_STR)) undef_fail(r, b);
    bool na = is_num(a), nb = is_num(b);
    bool ints = na && nb && a.t != JT_FLOAT && b.t != JT_FLOAT;
    int64_t x = ints ? num_i(a) : 0, y = ints ? num_i(b) : 0, z;
    double fx = na ? num_d(a) : 0, fy = nb ? num_d(b) : 0;
    switch (op) {
    case '+':
        if (ints) {
            if (__builtin_add_overflow(x, y, &z)) JERR(r, "integer overflow");
            return jv_int(z);
        }
        if (na && nb) return jv_float(fx + fy);
        if (a.t == JT_STR && b.t == JT_STR) return str_concat(r, a, b);
        if (a.t == JT_LIST && b.t == JT_LIST && a.u.l->kind == b.u.l->kind &&
            (a.u.l->kind == JL_LIST || a.u.l->kind == JL_TUPLE)) {
            jlist_t *o = lp__jlist_new(r, a.u.l->n + b.u.l->n, a.u.l->kind);
            for (size_t i = 0; i < a.u.l->n; i++) o->v[i] = lp__jref(a.u.l->v[i]);
            for (size_t i = 0; i < b.u.l->n; i++) o->v[a.u.l->n + i] = lp__jref(b.u.l->v[i]);
            return lp__jv_list(o);
        }
        if (a.t == JT_STR && !(a.f & JF_MARKUP))
            JERR(r, "can only concatenate str (not \"%s\") to str", lp__jtype_name(b));
        if (a.t == JT_LIST && (a.u.l->kind == JL_LIST || a.u.l->kind == JL_TUPLE))
            JERR(r, "can only concatenate %s (not \"%s\") to %s", lp__jtype_name(a), lp__jtype_name(b),
                 lp__jtype_name(a));
        bad_operands(r, "+", a, b);
    case '-':
        if (ints) {
            if (__builtin_sub_overflow(x, y, &z)) JERR(r, "integer overflow");
            return jv_int(z);
        }
        if (na && nb) return jv_float(fx - fy);
        bad_operands(r, "-", a, b);
    case '*':
        if (ints) {
            if (__builtin_mul_overflow(x, y, &z)) JERR(r, "integer overflow");
            return jv_int(z);
        }
        if (na && nb) return jv_float(fx * fy);
        if ((a.t == JT_STR || (a.t == JT_LIST && (a.u.l->kind == JL_LIST || a.u.l->kind == JL_TUPLE))) &&
            (b.t == JT_INT || b.t == JT_BOOL))
            return repeat(r, a, num_i(b));
        if ((b.t == JT_STR || (b.t == JT_LIST && (b.u.l->kind == JL_LIST || b.u.l->kind == JL_TUPLE))) &&
            (a.t == JT_INT || a.t == JT_BOOL))
            return repeat(r, b, num_i(a));
        if (a.t == JT_STR || b.t == JT_STR)
            JERR(r, "can't multiply sequence by non-int of type '%s'", lp__jtype_name(a.t == JT_STR ? b : a));
        bad_operands(r, "*", a, b);
    case '/':
        if (na && nb) {
            if (fy == 0) JERR(r, "division by zero");
            if (ints) return jv_float((double)x / (double)y);
            return jv_float(fx / fy);
        }
        bad_operands(r, "/", a, b);
    case 'f':
        if (ints) {
            if (y == 0) JERR(r, "integer division or modulo by zero");
            if (x == INT64_MIN && y == -1) JERR(r, "integer overflow");
            int64_t q = x / y;
            if ((x % y != 0) && ((x < 0) != (y < 0))) q--;
            return jv_int(q);
        }
        if (na && nb) {
            if (fy == 0) JERR(r, "float floor division by zero");
            double d;
            py_fmod(fx, fy, &d);
            return jv_float(d);
        }
        bad_operands(r, "//", a, b);
    case '%':
        if (ints) {
            if (y == 0) JERR(r, "integer division or modulo by zero");
            if (y == -1) return jv_int(0);
            int64_t m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) m += y;
            return jv_int(m);
        }
        if (na && nb) {
            if (fy == 0) JERR(r, "float modulo");
            return jv_float(py_fmod(fx, fy, NULL));
        }
        if (a.t == JT_STR) return lp__jstr_format(r, a, b);
        bad_operands(r, "%", a, b);
    case 'p':
        if (ints) {
            if (y < 0) {
                if (x == 0) JERR(r, "0.0 cannot be raised to a negative power");
                return jv_float(pow((double)x, (double)y));
            }
            int64_t res = 1, base = x;
            int64_t e = y;
            while (e) {
                if (e & 1)
                    if (__builtin_mul_overflow(res, base, &res)) JERR(r, "integer overflow");
                e >>= 1;
                if (e && __builtin_mul_overflow(base, base, &base)) JERR(r, "integer overflow");
                lp__jstep(r, 1);
            }
            return jv_int(res);
        }
        if (na && nb) {
            if (fx == 0 && fy < 0) JERR(r, "0.0 cannot be raised to a negative power");
            if (fx < 0 && fy != floor(fy)) JERR(r, "complex results are not supported");
            double p = pow(fx, fy);
            if (isinf(p) && !isinf(fx) && !isinf(fy)) JERR(r, "(34, 'Numerical result out of range')");
            return jv_float(p);
        }
        bad_operands(r, "** or pow()", a, b);
    }
    JERR(r, "unknown operator");
}

/* ---- argument binding ------------------------------------------------------------------ */

void lp__jbind(jr_t *r, const char *fname, jargs_t *a, const char *const *names, int n_names, int n_req,
               jv *out)
{
    for (int i = 0; i < n_names; i++) {
        out[i] = jv_undef();
        out[i].f = 1;
    }
    if (a->n > (size_t)n_names)
        JERR(r, "%s() takes at most %d argument%s (%zu given)", fname, n_names, n_names == 1 ? "" : "s", a->n);
    for (size_t i = 0; i < a->n; i++) out[i] = a->v[i];
    for (size_t k = 0; k < a->nk; k++) {
        int i = 0;
        while (i < n_names && strcmp(names[i], a->kn[k])) i++;
        if (i == n_names) JERR(r, "%s() got an unexpected keyword argument '%s'", fname, a->kn[k]);
        if (!jmissing(out[i])) JERR(r, "%s() got multiple values for argument '%s'", fname, a->kn[k]);
        out[i] = a->kv[k];
    }
    for (int i = 0; i < n_req; i++)
        if (jmissing(out[i])) JERR(r, "%s() missing required argument '%s'", fname, names[i]);
}
