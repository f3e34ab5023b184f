/* jinja-internal.h - what the interpreter's files share: values as Python
 * has them, the syntax tree, and the render state.
 *
 * Memory: every object a render allocates (strings, lists, dicts, frames,
 * buffers) is linked into the render's list and counted against its cap.
 * Values are reference counted so that a long render frees what it no
 * longer uses; whatever is left (a cycle through a namespace, or anything
 * at all after an error) is freed in one sweep when the render ends.  An
 * error longjmps to the render's entry, which makes that sweep.  Objects
 * that belong to the template (string constants) are immortal. */
#ifndef LP_JINJA_INTERNAL_H
#define LP_JINJA_INTERNAL_H

#include "jinja.h"
#include "unicode-py.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct lp__jr jr_t; /* the render state */

/* ---- values ---------------------------------------------------------------- */

enum jtype {
    JT_UNDEF,  /* u.s: the message an error about it gives, or NULL */
    JT_NONE,
    JT_BOOL,
    JT_INT,
    JT_FLOAT,
    JT_STR,    /* f & JF_MARKUP: markupsafe.Markup */
    JT_LIST,   /* u.l; u.l->kind says list, tuple, generator or view */
    JT_DICT,
    JT_NS,     /* a namespace(): u.d, mutable */
    JT_FUNC,   /* a callable: builtin, bound method, macro, caller, ... */
    JT_LOOP,   /* the loop variable */
};
#define JF_MARKUP 1

typedef struct jobj jobj_t;
typedef struct jstr jstr_t;
typedef struct jlist jlist_t;
typedef struct jdict jdict_t;
typedef struct jfunc jfunc_t;
typedef struct jloop jloop_t;
typedef struct frame frame_t;
typedef struct node node_t;

typedef struct jv {
    uint8_t t, f;
    union {
        bool b;
        int64_t i;
        double d;
        jstr_t *s;
        jlist_t *l;
        jdict_t *dc;
        jfunc_t *fn;
        jloop_t *loop;
        jobj_t *o;
    } u;
} jv;

#define JRC_IMMORTAL INT32_MAX

struct jobj {
    jobj_t *prev, *next; /* the render's list; NULL for immortal objects */
    int32_t rc;
    uint8_t kind;        /* OBJ_* */
    size_t size;         /* bytes counted against the cap */
};
enum { OBJ_RAW, OBJ_STR, OBJ_LIST, OBJ_DICT, OBJ_FUNC, OBJ_LOOP, OBJ_FRAME };

struct jstr {
    jobj_t h;
    size_t len;
    size_t ncp; /* code points, or SIZE_MAX until counted */
    char p[];   /* len bytes and a NUL */
};

enum { JL_LIST, JL_TUPLE, JL_GEN, JL_ITEMS, JL_KEYS, JL_VALUES, JL_REVITER, JL_RANGE };
struct jlist {
    jobj_t h;
    uint8_t kind;
    bool named_group; /* a tuple from groupby: .grouper and .list */
    size_t n, pos;   /* pos: a generator's items before pos are consumed */
    size_t cap;      /* items the array holds (lists shrink with pop) */
    jv *v;           /* a raw object of cap items */
    int64_t r0, r1, rs; /* JL_RANGE: start, stop, step, for its repr */
    jstr_t *err;     /* JL_GEN: the error its first step raises (a lazy filter's) */
    struct jlazy *lazy; /* JL_GEN: map/select/reject, run item by item as it is consumed */
};

struct jdict {
    jobj_t h;
    size_t n, cap;
    jv *k, *v;       /* raw objects of cap items; n used, in insertion order */
    uint32_t *idx;   /* open addressing, icap slots: 0 empty, else item + 1 */
    size_t icap;
};

enum { JF_BUILTIN, JF_METHOD, JF_MACRO, JF_CALLER, JF_LOOPCALL, JF_JOINER, JF_CYCLER_NEXT,
       JF_UNSUPPORTED };
typedef struct jargs jargs_t;
typedef jv (*jbuiltin_fn)(jr_t *r, jv self, jargs_t *a);
struct jfunc {
    jobj_t h;
    uint8_t kind;
    const char *name;   /* for messages; static or template-owned */
    jbuiltin_fn fn;     /* BUILTIN, METHOD */
    jv self;            /* METHOD: the bound object; JOINER: the separator */
    const node_t *node; /* MACRO, CALLER: the macro or call block */
    frame_t *closure;   /* MACRO, CALLER: the frame it was defined in */
    bool used;          /* JOINER: called once */
};

struct jloop {
    jobj_t h;
    jlist_t *items;
    size_t i;            /* index0 */
    int depth0;
    bool has_changed;
    jv changed;          /* loop.changed's last arguments, a tuple */
    const node_t *node;  /* a recursive for: the loop to run again */
    frame_t *frame;      /* the frame the for loop ran in */
};

/* Arguments of a call: positional, then keyword (name, value). */
struct jargs {
    size_t n, nk;
    jv *v;
    const char **kn;
    jv *kv;
};

/* ---- the syntax tree ---------------------------------------------------------- */

enum nkind {
    /* statements */
    N_BODY,     /* v: statements */
    N_DATA,     /* val: template text */
    N_PRINT,    /* a: expression */
    N_IF,       /* a: test, b: body, c: else body or NULL (elif: an N_IF in it) */
    N_FOR,      /* a: target, b: iterable, c: body, d: else body, e: filter; flag: recursive */
    N_SET,      /* a: target, b: value */
    N_SETBLOCK, /* a: target, b: body, c: filter chain (input NULL) or NULL */
    N_MACRO,    /* name; a: body; v: parameters (N_NAME); w: defaults (the last nw) */
    N_CALLBLOCK,/* a: the call (N_CALL), b: body; v/w: the caller's parameters */
    N_FILTERBLK,/* a: filter chain (input NULL), b: body */
    N_WITH,     /* v: targets, w: values, a: body */
    N_SCOPE,    /* a: body run in a new frame (block) */
    N_PLAIN,    /* a: body (generation, autoescape) */
    N_BREAK,
    N_CONTINUE,
    N_NOLOADER, /* include, import, from, extends: an error when run; name: the tag */
    /* expressions */
    N_CONST,    /* val */
    N_NAME,     /* name */
    N_GETATTR,  /* a.name */
    N_GETITEM,  /* a[b] */
    N_SLICE,    /* a, b, c: start, stop, step, each may be NULL */
    N_CALL,     /* a(v..., w: N_KW...; c: *args, d: **kwargs) */
    N_FILTER,   /* a | name(v..., w...) ; a NULL in filter blocks */
    N_TEST,     /* a is name(v..., w...) */
    N_KW,       /* name = a */
    N_NOT,
    N_NEG,
    N_POS,
    N_BIN,      /* a op b; op: '+', '-', '*', '/', 'f' (//), '%', 'p' (**) */
    N_CONCAT,   /* v: operands of ~ */
    N_AND,
    N_OR,
    N_COMPARE,  /* a, then v: N_OPERAND (op, a) */
    N_OPERAND,  /* op: '=', '!', '<', 'l' (<=), '>', 'g' (>=), 'i' (in), 'n' (not in) */
    N_COND,     /* b if a else c (c may be NULL) */
    N_LIST,     /* v */
    N_TUPLE,    /* v */
    N_DICT,     /* v: keys, w: values */
    N_NSREF,    /* name.attr as a set target: name, attr in val (a string) */
};

struct node {
    uint8_t kind, op;
    bool flag;
    int line;
    node_t *a, *b, *c, *d, *e;
    node_t **v, **w;
    int nv, nw;
    jv val;
    const char *name; /* NUL-terminated, template-owned */
    const void *impl; /* N_FILTER, N_TEST: the implementation, NULL when unknown */
    bool soft;        /* unknown filter or test inside if/condexpr: fails when run */
    bool uses_caller, uses_varargs, uses_kwargs; /* N_MACRO, N_CALLBLOCK */
};

struct lp_jinja_tmpl {
    node_t *root;
    void *arena;     /* every node, name and constant */
};

/* ---- filters, tests, globals, methods ----------------------------------- */

typedef struct jfilter {
    const char *name;
    jbuiltin_fn fn; /* self: the input */
} jfilter_t;
const jfilter_t *lp__jinja_filter_find(const char *name);
const jfilter_t *lp__jinja_test_find(const char *name);

/* ---- the render state ------------------------------------------------------ */

typedef struct sb {
    char *p;
    size_t n, cap;
    jobj_t *obj; /* the raw object holding p */
} sb_t;

struct frame {
    jobj_t h;
    frame_t *parent;
    size_t n, cap;
    const char **names;
    jv *vals;
};

struct lp__jr {
    jmp_buf jmp;
    jobj_t objs;       /* list head */
    size_t mem, max_mem;
    uint64_t steps, max_steps;
    size_t max_output;
    int line;          /* the line being run, for messages */
    int depth;         /* macro calls and nested evaluation, against C stack use */
    sb_t *out;         /* where output goes now */
    sb_t *top;         /* the template's own output */
    frame_t *frame;    /* the innermost scope */
    int macro_depth;
    bool autoescape;   /* inside {% autoescape true %} */
    bool has_now;
    struct tm now;
    int err;
    char msg[512];
};

_Noreturn void lp__jerr(jr_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
_Noreturn void lp__jerr_big(jr_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define JERR(r, ...) lp__jerr(r, __VA_ARGS__)
void lp__jstep(jr_t *r, uint64_t n);

/* allocation */
void *lp__jalloc(jr_t *r, size_t size, int kind); /* zeroed; the jobj_t header at the start */
void lp__jfree_obj(jr_t *r, jobj_t *o);
void *lp__jraw(jr_t *r, size_t bytes, jobj_t **obj);   /* a raw buffer */
void *lp__jraw_grow(jr_t *r, jobj_t **obj, size_t bytes);
jobj_t *lp__jraw_of(void *data);                        /* the raw object behind a buffer */
void lp__jdrop_obj(jr_t *r, jobj_t *o);

/* reference counting */
static inline jv lp__jref(jv v)
{
    if (v.t >= JT_STR || (v.t == JT_UNDEF && v.u.s)) {
        jobj_t *o = v.u.o;
        if (o->rc != JRC_IMMORTAL) o->rc++;
    }
    return v;
}
void lp__jdrop(jr_t *r, jv v);

/* constructors */
static inline jv jv_undef(void) { jv v = {JT_UNDEF, 0, {.s = NULL}}; return v; }
static inline jv jv_none(void) { jv v = {JT_NONE, 0, {.i = 0}}; return v; }
static inline jv jv_bool(bool b) { jv v = {JT_BOOL, 0, {.b = b}}; return v; }
static inline jv jv_int(int64_t i) { jv v = {JT_INT, 0, {.i = i}}; return v; }
static inline jv jv_float(double d) { jv v = {JT_FLOAT, 0, {.d = d}}; return v; }
jv lp__jundef_msg(jr_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
jstr_t *lp__jstr_new(jr_t *r, const char *s, size_t n);
jv lp__jv_str(jr_t *r, const char *s, size_t n);
jv lp__jv_cstr(jr_t *r, const char *s);
jv lp__jv_sb(jr_t *r, sb_t *b); /* the builder's text as a string; frees the builder */
jlist_t *lp__jlist_new(jr_t *r, size_t n, int kind); /* n items, all undefined until set */
jv lp__jv_list(jlist_t *l);
/* A generator whose first step fails (when `source`, borrowed, is truthy:
 * jinja2's map and select test their input before anything else). */
jv lp__jgen_failing(jr_t *r, jv source, const char *msg);

/* A lazy generator: map, select, reject (and their attr forms) do their
 * work item by item when consumed, as jinja2's generators do, so that an
 * item never reached is never tested. */
enum { LZ_MAP_FILTER, LZ_MAP_ATTR, LZ_SELECT };
typedef struct jlazy {
    int op;
    jv srcval;             /* the input (a reference) */
    jlist_t *src;          /* its items, at the first step */
    size_t at;             /* the next item of src */
    const char *name;      /* the filter or test; NULL: truthiness */
    jv nameval;            /* owns name */
    jv attr, dflt;         /* MAP_ATTR, SELECT with attr */
    bool has_dflt, keep_true, use_attr;
    jargs_t args;          /* the filter's or test's own arguments (references) */
    jobj_t *obj;           /* the raw object holding this */
} jlazy_t;
jlazy_t *lp__jlazy_new(jr_t *r, jv source, int op); /* the generator owns it once attached */
jv lp__jgen_lazy(jr_t *r, jlazy_t *z);
/* The next item of a generator (or a reverse iterator): false at its end. */
bool lp__jgen_next(jr_t *r, jlist_t *l, jv *out);
jdict_t *lp__jdict_new(jr_t *r);
jv lp__jv_dict(jdict_t *d);
jfunc_t *lp__jfunc_new(jr_t *r, int kind, const char *name);
jv lp__jv_func(jfunc_t *f);
jv lp__jv_method(jr_t *r, const char *name, jbuiltin_fn fn, jv self); /* takes self */

/* dicts: keys are hashable values compared as Python compares them */
jv *lp__jdict_get(jr_t *r, jdict_t *d, jv key);           /* borrowed, or NULL */
jv *lp__jdict_get_str(jdict_t *d, const char *k, size_t n);
void lp__jdict_set(jr_t *r, jdict_t *d, jv key, jv val); /* takes both */

/* string builder (tracked memory) */
void lp__sb_put(jr_t *r, sb_t *b, const char *s, size_t n);
static inline void lp__sb_putc(jr_t *r, sb_t *b, char c) { lp__sb_put(r, b, &c, 1); }
void lp__sb_puts(jr_t *r, sb_t *b, const char *s);
void lp__sb_printf(jr_t *r, sb_t *b, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void lp__sb_cp(jr_t *r, sb_t *b, uint32_t cp);
void lp__sb_free(jr_t *r, sb_t *b);

/* Python semantics (value.c) */
const char *lp__jtype_name(jv v);          /* Python's type name: 'NoneType', 'str', 'dict', ... */
bool lp__jtruthy(jr_t *r, jv v);
bool lp__jeq(jr_t *r, jv a, jv b);
int lp__jcmp(jr_t *r, jv a, jv b, const char *op); /* <0, 0, >0; an error for unorderable types */
uint64_t lp__jhash(jr_t *r, jv v);          /* an error for unhashable types */
void lp__jstr_of(jr_t *r, sb_t *b, jv v);    /* str(v) */
void lp__jrepr(jr_t *r, sb_t *b, jv v);      /* repr(v) */
jv lp__jto_str(jr_t *r, jv v);              /* str(v) as a value (markup kept: soft_str) */
void lp__jfloat_repr(char *buf, size_t cap, double d);
size_t lp__jstr_ncp(jstr_t *s);
jlist_t *lp__jiter(jr_t *r, jv v);          /* iter(v) materialised; caller drops */
jlist_t *lp__jiter_or_null(jr_t *r, jv v);  /* NULL when not iterable */
bool lp__jcontains(jr_t *r, jv container, jv item);
int64_t lp__jlen(jr_t *r, jv v);             /* len(v); an error when it has none */
bool lp__jhas_len(jv v);
void lp__jescape(jr_t *r, sb_t *b, const char *s, size_t n); /* markupsafe.escape */

/* operators (value.c) */
jv lp__jbinop(jr_t *r, int op, jv a, jv b); /* borrowed operands */
jv lp__jgetattr(jr_t *r, jv obj, const char *name, size_t n);
jv lp__jgetitem(jr_t *r, jv obj, jv key);
jv lp__jslice(jr_t *r, jv obj, jv start, jv stop, jv step, bool folded); /* folded: all constants */
jv lp__jmethod(jr_t *r, jv obj, const char *name, size_t n, bool *unsafe); /* methods.c */
jv lp__jcall(jr_t *r, jv fn, jargs_t *a);   /* eval.c */

/* arguments: bind positional and keyword arguments to names, Python style;
 * slots not given stay JT_UNDEF with f = 1 ("missing").  n_req: how many
 * must be given. */
void lp__jbind(jr_t *r, const char *fname, jargs_t *a, const char *const *names, int n_names,
               int n_req, jv *out);
static inline bool jmissing(jv v) { return v.t == JT_UNDEF && v.f == 1; }

/* JSON (json.c) */
jv lp__jfrom_json(jr_t *r, const lp_json_t *j);
void lp__jtojson(jr_t *r, sb_t *b, jv v, bool ensure_ascii, const char *indent, size_t indent_len,
                 bool has_indent, const char *item_sep, const char *key_sep, bool sort_keys);

/* the interpreter (eval.c) */
jv lp__jcall_filter(jr_t *r, const char *name, jv input, jargs_t *a); /* for map/select */
bool lp__jcall_test(jr_t *r, const char *name, jv input, jargs_t *a);
jv lp__jattr_path(jr_t *r, jv obj, jv attribute); /* "a.b.0" as environment.getitem does */

/* scopes (eval.c) */
void lp__jframe_set(jr_t *r, frame_t *f, const char *name, jv v); /* takes v */

/* the time strftime_now formats */
void lp__jnow(jr_t *r, struct tm *out);

/* strings (methods.c) */
jv lp__jstr_strip(jr_t *r, jv s, jv chars, int which); /* which: 1 left, 2 right, 3 both */
jv lp__jstr_case(jr_t *r, jv s, int which);            /* 1 upper, 2 lower, 3 capitalize, 4 title (jinja's) */
jv lp__jstr_replace(jr_t *r, jv s, jv old, jv new_, int64_t count);
jv lp__jstr_split(jr_t *r, jv s, jv sep, int64_t maxsplit, bool right);
bool lp__jstr_startswith(jr_t *r, jv s, jv prefix, bool end);
jv lp__jstr_format(jr_t *r, jv fmt, jv args); /* fmt % args */

#endif
