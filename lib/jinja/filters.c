/* filters.c - jinja2's builtin filters and tests (filters.py, tests.py),
 * with transformers' tojson (json.dumps with ensure_ascii=False). */
#include "jinja-internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARGS(fname, nreq, ...)                                          \
    static const char *const names_[] = {__VA_ARGS__};                  \
    jv av[sizeof(names_) / sizeof(names_[0])];                          \
    lp__jbind(r, fname, a, names_, (int)(sizeof(names_) / sizeof(names_[0])), nreq, av)

#define NOARGS(fname)                                                                           \
    do {                                                                                        \
        if (a->n || a->nk) JERR(r, "%s() takes 1 positional argument but %zu were given", fname, \
                                1 + a->n + a->nk);                                             \
    } while (0)

static bool given(jv v) { return !jmissing(v); }
static bool given_not_none(jv v) { return !jmissing(v) && v.t != JT_NONE; }

static jv gen_of(jlist_t *l)
{
    l->kind = JL_GEN;
    return lp__jv_list(l);
}

/* soft_str: a string stays (Markup too), anything else becomes str(). */
static jv soft_str(jr_t *r, jv v) { return lp__jto_str(r, v); }

static jv str_of(jr_t *r, jv v)
{
    jv s = lp__jto_str(r, v);
    if (s.f) {
        jv t = lp__jv_str(r, s.u.s->p, s.u.s->len);
        lp__jdrop(r, s);
        return t;
    }
    return s;
}

static int64_t as_int(jr_t *r, jv v, const char *what)
{
    if (v.t == JT_INT) return v.u.i;
    if (v.t == JT_BOOL) return v.u.b;
    JERR(r, "%s: '%s' object cannot be interpreted as an integer", what, lp__jtype_name(v));
}

/* ---- attribute paths ("a.b.0"), as make_attrgetter ------------------------------ */

jv lp__jattr_path(jr_t *r, jv obj, jv attribute)
{
    if (attribute.t == JT_NONE || jmissing(attribute)) return lp__jref(obj);
    if (attribute.t != JT_STR) return lp__jgetitem(r, obj, attribute);
    jstr_t *s = attribute.u.s;
    jv cur = lp__jref(obj);
    size_t i = 0;
    for (;;) {
        size_t j = i;
        while (j < s->len && s->p[j] != '.') j++;
        bool digits = j > i;
        for (size_t k = i; k < j; k++) digits = digits && s->p[k] >= '0' && s->p[k] <= '9';
        jv key = digits ? jv_int(strtoll(s->p + i, NULL, 10)) : lp__jv_str(r, s->p + i, j - i);
        jv next = lp__jgetitem(r, cur, key);
        lp__jdrop(r, key);
        lp__jdrop(r, cur);
        cur = next;
        if (j >= s->len) break;
        i = j + 1;
    }
    return cur;
}

static jv lower_if_str(jr_t *r, jv v)
{
    if (v.t != JT_STR) return v;
    jv l = lp__jstr_case(r, v, 2);
    lp__jdrop(r, v);
    return l;
}

/* ---- sorting (stable, by precomputed keys) --------------------------------------------- */

typedef struct sortent {
    jv key, item;
} sortent_t;

static _Thread_local jr_t *sort_r;
static _Thread_local const char *sort_op;

static void merge_sort(sortent_t *a, sortent_t *tmp, size_t n, bool reverse)
{
    if (n < 2) return;
    size_t h = n / 2;
    merge_sort(a, tmp, h, reverse);
    merge_sort(a + h, tmp, n - h, reverse);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        /* take from the right only when it is strictly before the left */
        int c = lp__jcmp(sort_r, a[j].key, a[i].key, sort_op);
        bool right_first = reverse ? (c == 2 ? false : lp__jcmp(sort_r, a[i].key, a[j].key, sort_op) < 0)
                                   : (c != 2 && c < 0);
        tmp[k++] = right_first ? a[j++] : a[i++];
    }
    while (i < h) tmp[k++] = a[i++];
    while (j < n) tmp[k++] = a[j++];
    memcpy(a, tmp, n * sizeof(*a));
}

static void sort_entries(jr_t *r, sortent_t *e, size_t n, bool reverse)
{
    jobj_t *o;
    sortent_t *tmp = lp__jraw(r, (n + 1) * sizeof(*tmp), &o);
    sort_r = r;
    sort_op = "<";
    lp__jstep(r, n * 8);
    merge_sort(e, tmp, n, reverse);
    lp__jfree_obj(r, o);
}

/* ---- filters ------------------------------------------------------------------------- */

static bool parse_float_str(const char *s, double *out);

/* soft_str(value).upper() and the like */
static jv case_filter(jr_t *r, jv v, jargs_t *a, const char *name, int which)
{
    NOARGS(name);
    jv s = soft_str(r, v);
    jv o = lp__jstr_case(r, s, which);
    lp__jdrop(r, s);
    return o;
}

static jv f_abs(jr_t *r, jv v, jargs_t *a)
{
    NOARGS("abs");
    if (v.t == JT_INT) {
        if (v.u.i == INT64_MIN) JERR(r, "integer overflow");
        return jv_int(v.u.i < 0 ? -v.u.i : v.u.i);
    }
    if (v.t == JT_BOOL) return jv_int(v.u.b);
    if (v.t == JT_FLOAT) return jv_float(fabs(v.u.d));
    if (v.t == JT_UNDEF) JERR(r, "%s", v.u.s ? v.u.s->p : "undefined");
    JERR(r, "bad operand type for abs(): '%s'", lp__jtype_name(v));
}

static jv f_attr(jr_t *r, jv v, jargs_t *a)
{
    ARGS("attr", 1, "name");
    if (av[0].t != JT_STR) JERR(r, "attribute name must be string");
    if (v.t == JT_DICT) {
        /* getattr, without falling back to the item */
        bool unsafe;
        jv m = lp__jmethod(r, v, av[0].u.s->p, av[0].u.s->len, &unsafe);
        if (unsafe) return lp__jundef_msg(r, "access to attribute '%s' of 'dict' object is unsafe.", av[0].u.s->p);
        if (m.t != JT_UNDEF) return m;
        return lp__jundef_msg(r, "'dict object' has no attribute '%s'", av[0].u.s->p);
    }
    return lp__jgetattr(r, v, av[0].u.s->p, av[0].u.s->len);
}

static jv f_batch(jr_t *r, jv v, jargs_t *a)
{
    ARGS("batch", 1, "linecount", "fill_with");
    /* do_batch's loop: a row is given out when it holds linecount items,
     * compared as Python compares (0 or a negative count behave as there) */
    jlist_t *items = lp__jiter(r, v);
    jlist_t *out = lp__jlist_new(r, 0, JL_LIST);
    jobj_t *obj = NULL;
    jlist_t *tmp = lp__jlist_new(r, 0, JL_LIST);
    jobj_t *tobj = NULL;
    for (size_t i = 0; i <= items->n; i++) {
        bool last = i == items->n;
        if (last && !tmp->n) break;
        if (last || lp__jeq(r, jv_int((int64_t)tmp->n), av[0])) {
            if (last && given_not_none(av[1])) {
                int c = lp__jcmp(r, jv_int((int64_t)tmp->n), av[0], "<");
                if (c != 2 && c < 0) {
                    int64_t want = as_int(r, av[0], "batch");
                    while ((int64_t)tmp->n < want) {
                        if (tmp->n == tmp->cap) {
                            tmp->cap = tmp->cap ? tmp->cap * 2 : 8;
                            tmp->v = lp__jraw_grow(r, &tobj, tmp->cap * sizeof(jv));
                        }
                        tmp->v[tmp->n++] = lp__jref(av[1]);
                    }
                }
            }
            if (out->n == out->cap) {
                out->cap = out->cap ? out->cap * 2 : 8;
                out->v = lp__jraw_grow(r, &obj, out->cap * sizeof(jv));
            }
            out->v[out->n++] = lp__jv_list(tmp);
            if (last) break;
            tmp = lp__jlist_new(r, 0, JL_LIST);
            tobj = NULL;
        }
        if (tmp->n == tmp->cap) {
            tmp->cap = tmp->cap ? tmp->cap * 2 : 8;
            tmp->v = lp__jraw_grow(r, &tobj, tmp->cap * sizeof(jv));
        }
        tmp->v[tmp->n++] = lp__jref(items->v[i]);
    }
    if (!items->n) lp__jdrop(r, lp__jv_list(tmp));
    lp__jdrop(r, lp__jv_list(items));
    return gen_of(out);
}

static jv f_capitalize(jr_t *r, jv v, jargs_t *a) { return case_filter(r, v, a, "capitalize", 3); }

static jv f_center(jr_t *r, jv v, jargs_t *a)
{
    ARGS("center", 0, "width");
    jv s = soft_str(r, v);
    int64_t w = given(av[0]) ? as_int(r, av[0], "center") : 80;
    int64_t n = (int64_t)lp__jstr_ncp(s.u.s);
    if (w <= n) return s;
    if (w > 1 << 24) lp__jerr_big(r, "width too large");
    int64_t padn = w - n, left = padn / 2 + (padn & w & 1);
    sb_t b = {0};
    for (int64_t i = 0; i < left; i++) lp__sb_putc(r, &b, ' ');
    lp__sb_put(r, &b, s.u.s->p, s.u.s->len);
    for (int64_t i = left; i < padn; i++) lp__sb_putc(r, &b, ' ');
    jv o = lp__jv_sb(r, &b);
    o.f = s.f;
    lp__jdrop(r, s);
    return o;
}

static jv f_default(jr_t *r, jv v, jargs_t *a)
{
    ARGS("default", 0, "default_value", "boolean");
    bool boolean = given(av[1]) && lp__jtruthy(r, av[1]);
    if (v.t == JT_UNDEF || (boolean && !lp__jtruthy(r, v)))
        return given(av[0]) ? lp__jref(av[0]) : lp__jv_str(r, "", 0);
    return lp__jref(v);
}

static jv f_dictsort(jr_t *r, jv v, jargs_t *a)
{
    ARGS("dictsort", 0, "case_sensitive", "by", "reverse");
    bool cs = given(av[0]) && lp__jtruthy(r, av[0]);
    int pos = 0;
    if (given(av[1])) {
        if (av[1].t == JT_STR && !strcmp(av[1].u.s->p, "value")) pos = 1;
        else if (!(av[1].t == JT_STR && !strcmp(av[1].u.s->p, "key")))
            JERR(r, "You can only sort by either \"key\" or \"value\"");
    }
    if (given(av[2]) && av[2].t != JT_BOOL && av[2].t != JT_INT)
        JERR(r, "'%s' object cannot be interpreted as an integer", lp__jtype_name(av[2]));
    bool rev = given(av[2]) && lp__jtruthy(r, av[2]);
    if (v.t == JT_UNDEF) JERR(r, "%s", v.u.s ? v.u.s->p : "undefined");
    if (v.t != JT_DICT) JERR(r, "'%s' object has no attribute 'items'", lp__jtype_name(v));
    jdict_t *d = v.u.dc;
    jobj_t *o;
    sortent_t *e = lp__jraw(r, (d->n + 1) * sizeof(*e), &o);
    for (size_t i = 0; i < d->n; i++) {
        jlist_t *t = lp__jlist_new(r, 2, JL_TUPLE);
        t->v[0] = lp__jref(d->k[i]);
        t->v[1] = lp__jref(d->v[i]);
        e[i].item = lp__jv_list(t);
        e[i].key = lp__jref(pos ? d->v[i] : d->k[i]);
        if (!cs) e[i].key = lower_if_str(r, e[i].key);
    }
    sort_entries(r, e, d->n, rev);
    jlist_t *out = lp__jlist_new(r, d->n, JL_LIST);
    for (size_t i = 0; i < d->n; i++) {
        out->v[i] = e[i].item;
        lp__jdrop(r, e[i].key);
    }
    lp__jfree_obj(r, o);
    return lp__jv_list(out);
}

static jv f_escape(jr_t *r, jv v, jargs_t *a)
{
    NOARGS("escape");
    if (v.t == JT_STR && (v.f & JF_MARKUP)) return lp__jref(v);
    sb_t b = {0}, t = {0};
    lp__jstr_of(r, &t, v);
    lp__jescape(r, &b, t.p ? t.p : "", t.n);
    lp__sb_free(r, &t);
    jv o = lp__jv_sb(r, &b);
    o.f = JF_MARKUP;
    return o;
}

static jv f_forceescape(jr_t *r, jv v, jargs_t *a)
{
    NOARGS("forceescape");
    sb_t b = {0}, t = {0};
    lp__jstr_of(r, &t, v);
    lp__jescape(r, &b, t.p ? t.p : "", t.n);
    lp__sb_free(r, &t);
    jv o = lp__jv_sb(r, &b);
    o.f = JF_MARKUP;
    return o;
}

static jv f_filesizeformat(jr_t *r, jv v, jargs_t *a)
{
    ARGS("filesizeformat", 0, "binary");
    bool bin = given(av[0]) && lp__jtruthy(r, av[0]);
    double bytes;
    if (v.t == JT_INT) bytes = (double)v.u.i;
    else if (v.t == JT_FLOAT) bytes = v.u.d;
    else if (v.t == JT_BOOL) bytes = v.u.b;
    else if (v.t == JT_STR) {
        if (!parse_float_str(v.u.s->p, &bytes)) JERR(r, "could not convert string to float: '%.60s'", v.u.s->p);
    } else
        JERR(r, "float() argument must be a string or a real number, not '%s'", lp__jtype_name(v));
    double base = bin ? 1024 : 1000;
    static const char *const pd[] = {"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
    static const char *const pb[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
    char buf[64];
    if (bytes == 1) return lp__jv_cstr(r, "1 Byte");
    if (bytes < base) {
        snprintf(buf, sizeof(buf), "%" PRId64 " Bytes", (int64_t)bytes);
        return lp__jv_cstr(r, buf);
    }
    double unit = base;
    int i;
    for (i = 0; i < 8; i++) {
        unit = pow(base, i + 2);
        if (bytes < unit) break;
    }
    if (i == 8) i = 7;
    snprintf(buf, sizeof(buf), "%.1f %s", base * bytes / unit, bin ? pb[i] : pd[i]);
    return lp__jv_cstr(r, buf);
}

static jv f_first(jr_t *r, jv v, jargs_t *a)
{
    NOARGS("first");
    if (v.t == JT_LIST && (v.u.l->kind == JL_GEN || v.u.l->kind == JL_REVITER)) {
        jv x;
        if (!lp__jgen_next(r, v.u.l, &x)) return lp__jundef_msg(r, "No first item, sequence was empty.");
        return x;
    }
    jlist_t *l = lp__jiter(r, v);
    jv out = l->n ? lp__jref(l->v[0]) : lp__jundef_msg(r, "No first item, sequence was empty.");
    lp__jdrop(r, lp__jv_list(l));
    return out;
}

static jv f_last(jr_t *r, jv v, jargs_t *a)
{
    NOARGS("last");
    if (v.t == JT_UNDEF) return lp__jundef_msg(r, "No last item, sequence was empty.");
    bool reversible = v.t == JT_STR || v.t == JT_DICT ||
                      (v.t == JT_LIST && v.u.l->kind != JL_GEN && v.u.l->kind != JL_REVITER && v.u.l->kind != JL_ITEMS &&
                       v.u.l->kind != JL_KEYS && v.u.l->kind != JL_VALUES);
    if (v.t == JT_LIST && (v.u.l->kind == JL_ITEMS || v.u.l->kind == JL_KEYS || v.u.l->kind == JL_VALUES))
        reversible = true;
    if (!reversible) JERR(r, "'%s' object is not reversible", lp__jtype_name(v));
    jlist_t *l = lp__jiter(r, v);
    jv out = l->n ? lp__jref(l->v[l->n - 1]) : lp__jundef_msg(r, "No last item, sequence was empty.");
    lp__jdrop(r, lp__jv_list(l));
    return out;
}

static bool parse_float_str(const char *s, double *out)
{
    /* Python float(): surrounding white space, inf, nan, underscores between digits */
    while (*s == ' ' || (*s >= 9 && *s <= 13)) s++;
    char buf[128];
    size_t k = 0;
    for (const char *p = s; *p && k + 1 < sizeof(buf); p++) {
        if (*p == '_') {
            if (p == s || !(p[-1] >= '0' && p[-1] <= '9') || !(p[1] >= '0' && p[1] <= '9')) return false;
            continue;
        }
        buf[k++] = *p;
    }
    buf[k] = 0;
    while (k && (buf[k - 1] == ' ' || (buf[k - 1] >= 9 && buf[k - 1] <= 13))) buf[--k] = 0;
    if (!k) return false;
    const char *b = buf + (buf[0] == '+' || buf[0] == '-');
    if (!strcasecmp(b, "inf") || !strcasecmp(b, "infinity") || !strcasecmp(b, "nan")) {
        double d = !strcasecmp(b, "nan") ? NAN : INFINITY;
        *out = buf[0] == '-' ? -d : d;
        return true;
    }
    if (strpbrk(b, "xXpP") || !strpbrk(b, "0123456789")) return false;
    char *end;
    *out = strtod(buf, &end);
    return *end == 0;
}

static bool parse_int_str(const char *s, int64_t base, int64_t *out, bool *overflow)
{
    *overflow = false;
    while (*s == ' ' || (*s >= 9 && *s <= 13)) s++;
    bool neg = false;
    if (*s == '+' || *s == '-') neg = *s++ == '-';
    if (base == 0 || base == 16 || base == 8 || base == 2) {
        if (s[0] == '0' && (s[1] | 0x20) == 'x' && (base == 0 || base == 16)) s += 2, base = 16;
        else if (s[0] == '0' && (s[1] | 0x20) == 'o' && (base == 0 || base == 8)) s += 2, base = 8;
        else if (s[0] == '0' && (s[1] | 0x20) == 'b' && (base == 0 || base == 2)) s += 2, base = 2;
        else if (base == 0) base = 10;
    }
    if (base < 2 || base > 36) return false;
    uint64_t v = 0;
    bool any = false;
    for (; *s; s++) {
        if (*s == '_' && any && s[1] && s[1] != '_') continue;
        int d;
        char c = (char)(*s | 0x20);
        if (*s >= '0' && *s <= '9') d = *s - '0';
        else if (c >= 'a' && c <= 'z') d = c - 'a' + 10;
        else break;
        if (d >= base) return false;
        if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) {
            *overflow = true; /* Python's int is unbounded: not this one's */
            return false;
        }
        v = v * (uint64_t)base + (uint64_t)d;
        any = true;
    }
    while (*s == ' ' || (*s >= 9 && *s <= 13)) s++;
    if (*s || !any) return false;
    if (v > (uint64_t)INT64_MAX + neg) {
        *overflow = true;
        return false;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

static jv f_float(jr_t *r, jv v, jargs_t *a)
{
    ARGS("float", 0, "default");
    if (v.t == JT_FLOAT) return v;
    if (v.t == JT_INT) return jv_float((double)v.u.i);
    if (v.t == JT_BOOL) return jv_float(v.u.b);
    if (v.t == JT_UNDEF) JERR(r, "%s", v.u.s ? v.u.s->p : "undefined");
    double d;
    if (v.t == JT_STR && parse_float_str(v.u.s->p, &d)) return jv_float(d);
    return given(av[0]) ? lp__jref(av[0]) : jv_float(0.0);
}

static jv f_int(jr_t *r, jv v, jargs_t *a)
{
    ARGS("int", 0, "default", "base");
    /* a bad base is int()'s TypeError, which do_int turns into the default */
    bool base_ok = !given(av[1]) || av[1].t == JT_INT || av[1].t == JT_BOOL;
    int64_t base = given(av[1]) && base_ok ? as_int(r, av[1], "int") : 10;
    if (v.t == JT_INT) return v;
    if (v.t == JT_BOOL) return jv_int(v.u.b);
    if (v.t == JT_FLOAT) {
        if (isfinite(v.u.d) && fabs(v.u.d) < 9.2e18) return jv_int((int64_t)v.u.d);
        if (isfinite(v.u.d)) JERR(r, "integer overflow");
        return given(av[0]) ? lp__jref(av[0]) : jv_int(0);
    }
    if (v.t == JT_UNDEF) JERR(r, "%s", v.u.s ? v.u.s->p : "undefined");
    int64_t i;
    double d;
    bool ovf = false;
    if (v.t == JT_STR && base_ok && parse_int_str(v.u.s->p, base, &i, &ovf)) return jv_int(i);
    if (ovf) JERR(r, "integer overflow: '%.40s' does not fit 64 bits", v.u.s->p);
    if (v.t == JT_STR && parse_float_str(v.u.s->p, &d) && isfinite(d)) {
        if (fabs(d) >= 9.2e18) JERR(r, "integer overflow: '%.40s' does not fit 64 bits", v.u.s->p);
        return jv_int((int64_t)d);
    }
    return given(av[0]) ? lp__jref(av[0]) : jv_int(0);
}

static jv f_format(jr_t *r, jv v, jargs_t *a)
{
    if (a->n && a->nk) JERR(r, "can't handle positional and keyword arguments at the same time");
    jv s = soft_str(r, v);
    jv args;
    if (a->nk) {
        jdict_t *d = lp__jdict_new(r);
        for (size_t k = 0; k < a->nk; k++) lp__jdict_set(r, d, lp__jv_cstr(r, a->kn[k]), lp__jref(a->kv[k]));
        args = lp__jv_dict(d);
    } else {
        jlist_t *t = lp__jlist_new(r, a->n, JL_TUPLE);
        for (size_t i = 0; i < a->n; i++) t->v[i] = lp__jref(a->v[i]);
        args = lp__jv_list(t);
    }
    jv o = lp__jstr_format(r, s, args);
    lp__jdrop(r, args);
    lp__jdrop(r, s);
    return o;
}

static jv f_groupby(jr_t *r, jv v, jargs_t *a)
{
    ARGS("groupby", 1, "attribute", "default", "case_sensitive");
    bool cs = given(av[2]) && lp__jtruthy(r, av[2]);
    jv dflt = given_not_none(av[1]) ? av[1] : jv_none();
    bool has_dflt = given_not_none(av[1]);
    jlist_t *items = lp__jiter(r, v);
    size_t n = items->n;
    jobj_t *o;
    sortent_t *e = lp__jraw(r, (n + 1) * sizeof(*e), &o);
    for (size_t i = 0; i < n; i++) {
        jv k = lp__jattr_path(r, items->v[i], av[0]);
        if (has_dflt && k.t == JT_UNDEF) {
            lp__jdrop(r, k);
            k = lp__jref(dflt);
        }
        e[i].item = lp__jref(items->v[i]);
        e[i].key = cs ? k : lower_if_str(r, k);
    }
    sort_entries(r, e, n, false);
    jlist_t *out = lp__jlist_new(r, n, JL_LIST);
    size_t ng = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && lp__jeq(r, e[j].key, e[i].key)) j++;
        jlist_t *members = lp__jlist_new(r, j - i, JL_LIST);
        for (size_t k = i; k < j; k++) members->v[k - i] = lp__jref(e[k].item);
        jlist_t *t = lp__jlist_new(r, 2, JL_TUPLE);
        t->named_group = true;
        if (cs) t->v[0] = lp__jref(e[i].key);
        else {
            jv k = lp__jattr_path(r, e[i].item, av[0]);
            if (has_dflt && k.t == JT_UNDEF) {
                lp__jdrop(r, k);
                k = lp__jref(dflt);
            }
            t->v[0] = k;
        }
        t->v[1] = lp__jv_list(members);
        out->v[ng++] = lp__jv_list(t);
        i = j;
    }
    out->n = ng;
    for (size_t i = 0; i < n; i++) {
        lp__jdrop(r, e[i].key);
        lp__jdrop(r, e[i].item);
    }
    lp__jfree_obj(r, o);
    lp__jdrop(r, lp__jv_list(items));
    return lp__jv_list(out);
}

static jv f_indent(jr_t *r, jv v, jargs_t *a)
{
    ARGS("indent", 0, "width", "first", "blank");
    sb_t ind = {0};
    if (given(av[0]) && av[0].t == JT_STR) lp__sb_put(r, &ind, av[0].u.s->p, av[0].u.s->len);
    else {
        int64_t w = given(av[0]) ? as_int(r, av[0], "indent") : 4;
        if (w > 1 << 20) lp__jerr_big(r, "width too large");
        for (int64_t i = 0; i < w; i++) lp__sb_putc(r, &ind, ' ');
    }
    bool first = given(av[1]) && lp__jtruthy(r, av[1]);
    bool blank = given(av[2]) && lp__jtruthy(r, av[2]);
    /* s += "\n" */
    if (v.t == JT_UNDEF) JERR(r, "%s", v.u.s ? v.u.s->p : "undefined");
    if (v.t != JT_STR) JERR(r, "unsupported operand type(s) for +=: '%s' and 'str'", lp__jtype_name(v));
    jv s = soft_str(r, v);
    /* s + "\n", split into lines (str.splitlines) */
    sb_t src = {0};
    lp__sb_put(r, &src, s.u.s->p, s.u.s->len);
    lp__sb_putc(r, &src, '\n');
    jv sv = lp__jv_sb(r, &src);
    jargs_t none = {0};
    jv sl = lp__jmethod(r, sv, "splitlines", 10, &(bool){0});
    jv lines = lp__jcall(r, sl, &none);
    lp__jdrop(r, sl);
    jlist_t *l = lines.u.l;
    sb_t b = {0};
    lp__sb_put(r, &b, "", 0);
    if (first) lp__sb_put(r, &b, ind.p ? ind.p : "", ind.n);
    for (size_t i = 0; i < l->n; i++) {
        jstr_t *line = l->v[i].u.s;
        if (i) lp__sb_putc(r, &b, '\n');
        if (i && (blank || line->len)) lp__sb_put(r, &b, ind.p ? ind.p : "", ind.n);
        lp__sb_put(r, &b, line->p, line->len);
    }
    lp__jdrop(r, lines);
    lp__jdrop(r, sv);
    lp__sb_free(r, &ind);
    jv o = lp__jv_sb(r, &b);
    o.f = s.f;
    lp__jdrop(r, s);
    return o;
}

static jv f_items(jr_t *r, jv v, jargs_t *a)
{
    NOARGS("items");
    if (v.t == JT_UNDEF) return gen_of(lp__jlist_new(r, 0, JL_LIST));
    if (v.t != JT_DICT) {
        jlist_t *l = lp__jlist_new(r, 0, JL_GEN);
        l->err = lp__jstr_new(r, "Can only get item pairs from a mapping.", 39);
        return lp__jv_list(l);
    }
    jdict_t *d = v.u.dc;
    jlist_t *l = lp__jlist_new(r, d->n, JL_LIST);
    for (size_t i = 0; i < d->n; i++) {
        jlist_t *t = lp__jlist_new(r, 2, JL_TUPLE);
        t->v[0] = lp__jref(d->k[i]);
        t->v[1] = lp__jref(d->v[i]);
        l->v[i] = lp__jv_list(t);
    }
    return gen_of(l);
}

static jv f_join(jr_t *r, jv v, jargs_t *a)
{
    ARGS("join", 0, "d", "attribute");
    jlist_t *l = lp__jiter(r, v);
    sb_t b = {0};
    lp__sb_put(r, &b, "", 0);
    jv sep = given(av[0]) ? str_of(r, av[0]) : lp__jv_str(r, "", 0);
    for (size_t i = 0; i < l->n; i++) {
        if (i) lp__sb_put(r, &b, sep.u.s->p, sep.u.s->len);
        if (given_not_none(av[1])) {
            jv x = lp__jattr_path(r, l->v[i], av[1]);
            lp__jstr_of(r, &b, x);
            lp__jdrop(r, x);
        } else
            lp__jstr_of(r, &b, l->v[i]);
    }
    lp__jdrop(r, sep);
    lp__jdrop(r, lp__jv_list(l));
    return lp__jv_sb(r, &b);
}

static jv f_length(jr_t *r, jv v, jargs_t *a)
{
    if (a->n || a->nk) JERR(r, "len() takes exactly one argument (%zu given)", 1 + a->n + a->nk);
    return jv_int(lp__jlen(r, v));
}

static jv f_list(jr_t *r, jv v, jargs_t *a)
{
    NOARGS("list");
    jlist_t *l = lp__jiter(r, v);
    if (l->h.rc == 1 && l->kind == JL_LIST && (v.t != JT_LIST || v.u.l != l)) return lp__jv_list(l);
    jlist_t *o = lp__jlist_new(r, l->n, JL_LIST);
    for (size_t i = 0; i < l->n; i++) o->v[i] = lp__jref(l->v[i]);
    lp__jdrop(r, lp__jv_list(l));
    return lp__jv_list(o);
}

static jv f_lower(jr_t *r, jv v, jargs_t *a) { return case_filter(r, v, a, "lower", 2); }

static jv f_upper(jr_t *r, jv v, jargs_t *a) { return case_filter(r, v, a, "upper", 1); }

static jv f_title(jr_t *r, jv v, jargs_t *a) { return case_filter(r, v, a, "title", 4); }

/* copy arguments into a lazy generator (references) */
static void keep_args(jr_t *r, jlazy_t *z, jargs_t *a, size_t from)
{
    jobj_t *o;
    size_t n = a->n > from ? a->n - from : 0;
    z->args.v = lp__jraw(r, (n + 1) * sizeof(jv), &o);
    z->args.kn = lp__jraw(r, (a->nk + 1) * sizeof(char *), &o);
    z->args.kv = lp__jraw(r, (a->nk + 1) * sizeof(jv), &o);
    for (size_t i = 0; i < n; i++) z->args.v[i] = lp__jref(a->v[from + i]);
    for (size_t k = 0; k < a->nk; k++) {
        z->args.kn[k] = a->kn[k];
        z->args.kv[k] = lp__jref(a->kv[k]);
    }
    z->args.n = n;
    z->args.nk = a->nk;
}

/* map(filter, args...) or map(attribute=..., default=...) */
static jv f_map(jr_t *r, jv v, jargs_t *a)
{
    if (!a->n && !a->nk) return lp__jgen_failing(r, v, "map requires a filter argument");
    if (!a->n) {
        jv attr = jv_undef(), dflt = jv_none();
        bool has_attr = false, has_dflt = false;
        for (size_t k = 0; k < a->nk; k++) {
            if (!strcmp(a->kn[k], "attribute")) attr = a->kv[k], has_attr = true;
            else if (!strcmp(a->kn[k], "default")) dflt = a->kv[k], has_dflt = true;
            else if (has_attr) return lp__jgen_failing(r, v, "Unexpected keyword argument");
        }
        if (has_attr) {
            for (size_t k = 0; k < a->nk; k++)
                if (strcmp(a->kn[k], "attribute") && strcmp(a->kn[k], "default"))
                    return lp__jgen_failing(r, v, "Unexpected keyword argument");
            jlazy_t *z = lp__jlazy_new(r, v, LZ_MAP_ATTR);
            z->attr = lp__jref(attr);
            z->dflt = lp__jref(dflt);
            z->has_dflt = has_dflt && dflt.t != JT_NONE;
            return lp__jgen_lazy(r, z);
        }
        return lp__jgen_failing(r, v, "map requires a filter argument");
    }
    if (a->v[0].t != JT_STR) return lp__jgen_failing(r, v, "map: the filter name must be a string");
    jlazy_t *z = lp__jlazy_new(r, v, LZ_MAP_FILTER);
    z->nameval = lp__jref(a->v[0]);
    z->name = a->v[0].u.s->p;
    keep_args(r, z, a, 1);
    return lp__jgen_lazy(r, z);
}

static jv minmax(jr_t *r, jv v, jargs_t *a, bool max)
{
    ARGS(max ? "max" : "min", 0, "case_sensitive", "attribute");
    bool cs = given(av[0]) && lp__jtruthy(r, av[0]);
    jlist_t *items = lp__jiter(r, v);
    if (!items->n) {
        lp__jdrop(r, lp__jv_list(items));
        return lp__jundef_msg(r, "No aggregated item, sequence was empty.");
    }
    size_t best = 0;
    jv bk = jv_undef();
    for (size_t i = 0; i < items->n; i++) {
        jv k = lp__jattr_path(r, items->v[i], av[1]);
        if (!cs) k = lower_if_str(r, k);
        if (i == 0) {
            bk = k;
            continue;
        }
        int c = lp__jcmp(r, k, bk, max ? ">" : "<");
        if (c != 2 && (max ? c > 0 : c < 0)) {
            lp__jdrop(r, bk);
            bk = k;
            best = i;
        } else
            lp__jdrop(r, k);
    }
    lp__jdrop(r, bk);
    jv o = lp__jref(items->v[best]);
    lp__jdrop(r, lp__jv_list(items));
    return o;
}
static jv f_max(jr_t *r, jv v, jargs_t *a) { return minmax(r, v, a, true); }
static jv f_min(jr_t *r, jv v, jargs_t *a) { return minmax(r, v, a, false); }

/* select, reject, selectattr, rejectattr */
static jv select_reject(jr_t *r, jv v, jargs_t *a, bool keep_true, bool attr)
{
    if (attr && !a->n) return lp__jgen_failing(r, v, "Missing parameter for attribute name");
    size_t off = attr ? 1 : 0;
    jlazy_t *z = lp__jlazy_new(r, v, LZ_SELECT);
    z->keep_true = keep_true;
    z->use_attr = attr;
    if (attr) z->attr = lp__jref(a->v[0]);
    if (a->n > off && a->v[off].t != JT_STR) return lp__jgen_failing(r, v, "the test name must be a string");
    if (a->n > off) {
        z->nameval = lp__jref(a->v[off]);
        z->name = a->v[off].u.s->p;
        keep_args(r, z, a, off + 1);
    }
    return lp__jgen_lazy(r, z);
}
static jv f_select(jr_t *r, jv v, jargs_t *a) { return select_reject(r, v, a, true, false); }
static jv f_reject(jr_t *r, jv v, jargs_t *a) { return select_reject(r, v, a, false, false); }
static jv f_selectattr(jr_t *r, jv v, jargs_t *a) { return select_reject(r, v, a, true, true); }
static jv f_rejectattr(jr_t *r, jv v, jargs_t *a) { return select_reject(r, v, a, false, true); }

static jv f_replace(jr_t *r, jv v, jargs_t *a)
{
    ARGS("replace", 2, "old", "new", "count");
    jv s = str_of(r, v), o = str_of(r, av[0]), n = str_of(r, av[1]);
    int64_t count = given_not_none(av[2]) ? as_int(r, av[2], "replace") : -1;
    jv out = lp__jstr_replace(r, s, o, n, count);
    lp__jdrop(r, s);
    lp__jdrop(r, o);
    lp__jdrop(r, n);
    return out;
}

static jv f_reverse(jr_t *r, jv v, jargs_t *a)
{
    NOARGS("reverse");
    if (v.t == JT_STR) {
        jv none = jv_none();
        return lp__jslice(r, v, none, none, jv_int(-1), false);
    }
    if (v.t == JT_UNDEF) return lp__jv_list(lp__jlist_new(r, 0, JL_REVITER));
    jlist_t *l = lp__jiter_or_null(r, v);
    if (!l) JERR(r, "argument must be iterable");
    bool was_iter = v.t == JT_LIST && (v.u.l->kind == JL_GEN || v.u.l->kind == JL_REVITER);
    bool is_view = v.t == JT_LIST && (v.u.l->kind == JL_ITEMS || v.u.l->kind == JL_KEYS || v.u.l->kind == JL_VALUES);
    jlist_t *o = lp__jlist_new(r, l->n, JL_LIST);
    for (size_t i = 0; i < l->n; i++) o->v[i] = lp__jref(l->v[l->n - 1 - i]);
    lp__jdrop(r, lp__jv_list(l));
    if (!was_iter && !is_view) o->kind = JL_REVITER;
    return lp__jv_list(o);
}

static jv f_round(jr_t *r, jv v, jargs_t *a)
{
    ARGS("round", 0, "precision", "method");
    int64_t prec = given(av[0]) ? as_int(r, av[0], "round") : 0;
    const char *method = "common";
    if (given(av[1])) {
        if (av[1].t != JT_STR) JERR(r, "method must be common, ceil or floor");
        method = av[1].u.s->p;
    }
    if (strcmp(method, "common") && strcmp(method, "ceil") && strcmp(method, "floor"))
        JERR(r, "method must be common, ceil or floor");
    if (v.t == JT_UNDEF) JERR(r, "%s", v.u.s ? v.u.s->p : "undefined");
    if (v.t != JT_INT && v.t != JT_FLOAT && v.t != JT_BOOL)
        JERR(r, "type %s doesn't define __round__ method", lp__jtype_name(v));
    if (!strcmp(method, "common")) {
        if (v.t != JT_FLOAT) {
            int64_t i = v.t == JT_INT ? v.u.i : v.u.b;
            if (prec >= 0) return jv_int(i);
            /* round half to even at 10^-prec */
            int64_t p = 1;
            for (int64_t k = 0; k < -prec && p < INT64_MAX / 10; k++) p *= 10;
            int64_t q = i / p, rem = i % p;
            if (rem < 0) rem += p, q--;
            if (rem * 2 > p || (rem * 2 == p && (q & 1))) q++;
            return jv_int(q * p);
        }
        double d = v.u.d;
        if (!isfinite(d)) return jv_float(d);
        /* Python: exact decimal rounding, half to even */
        char buf[400];
        if (prec > 300) return jv_float(d);
        if (prec < -308) return jv_float(0.0 * d);
        if (prec >= 0) {
            snprintf(buf, sizeof(buf), "%.*f", (int)prec, d);
            return jv_float(strtod(buf, NULL));
        }
        double p = pow(10.0, (double)-prec);
        double y = d / p;
        double z = nearbyint(y);
        if (fabs(y - z) == 0.5) z = 2.0 * nearbyint(y / 2.0);
        return jv_float(z * p);
    }
    double d = v.t == JT_FLOAT ? v.u.d : v.t == JT_INT ? (double)v.u.i : v.u.b;
    double p = pow(10.0, (double)prec);
    double x = !strcmp(method, "ceil") ? ceil(d * p) : floor(d * p);
    return jv_float(x / p);
}

static jv f_safe(jr_t *r, jv v, jargs_t *a)
{
    NOARGS("safe");
    jv s = lp__jto_str(r, v);
    s.f = JF_MARKUP;
    return s;
}

static jv f_slice(jr_t *r, jv v, jargs_t *a)
{
    ARGS("slice", 1, "slices", "fill_with");
    /* a generator: a bad count fails when it is first read */
    if (av[0].t != JT_INT && av[0].t != JT_BOOL)
        return lp__jgen_failing(r, jv_bool(true), "slice: the number of slices must be an integer");
    int64_t slices = as_int(r, av[0], "slice");
    if (slices <= 0) JERR(r, "integer division or modulo by zero");
    jlist_t *seq = lp__jiter(r, v);
    size_t length = seq->n, per = length / (size_t)slices, extra = length % (size_t)slices, offset = 0;
    if ((uint64_t)slices > (uint64_t)1 << 20) lp__jerr_big(r, "too many slices");
    jlist_t *out = lp__jlist_new(r, (size_t)slices, JL_LIST);
    for (size_t i = 0; i < (size_t)slices; i++) {
        size_t start = offset + i * per;
        if (i < extra) offset++;
        size_t end = offset + (i + 1) * per;
        bool fill = given_not_none(av[1]) && i >= extra;
        jlist_t *part = lp__jlist_new(r, end - start + (fill ? 1 : 0), JL_LIST);
        for (size_t k = start; k < end; k++) part->v[k - start] = lp__jref(seq->v[k]);
        if (fill) part->v[end - start] = lp__jref(av[1]);
        out->v[i] = lp__jv_list(part);
    }
    lp__jdrop(r, lp__jv_list(seq));
    return gen_of(out);
}

static jv f_sort(jr_t *r, jv v, jargs_t *a)
{
    ARGS("sort", 0, "reverse", "case_sensitive", "attribute");
    if (given(av[0]) && av[0].t != JT_BOOL && av[0].t != JT_INT)
        JERR(r, "'%s' object cannot be interpreted as an integer", lp__jtype_name(av[0]));
    bool rev = given(av[0]) && lp__jtruthy(r, av[0]);
    bool cs = given(av[1]) && lp__jtruthy(r, av[1]);
    jlist_t *items = lp__jiter(r, v);
    size_t n = items->n;
    jobj_t *o;
    sortent_t *e = lp__jraw(r, (n + 1) * sizeof(*e), &o);
    /* attribute may name several, comma separated: the key is then a list */
    jlist_t *attrs = NULL;
    if (given_not_none(av[2]) && av[2].t == JT_STR && strchr(av[2].u.s->p, ',')) {
        jv parts = lp__jstr_split(r, av[2], lp__jv_cstr(r, ","), -1, false);
        attrs = parts.u.l;
    }
    for (size_t i = 0; i < n; i++) {
        e[i].item = lp__jref(items->v[i]);
        if (attrs) {
            jlist_t *k = lp__jlist_new(r, attrs->n, JL_LIST);
            for (size_t j = 0; j < attrs->n; j++) {
                jv x = lp__jattr_path(r, items->v[i], attrs->v[j]);
                k->v[j] = cs ? x : lower_if_str(r, x);
            }
            e[i].key = lp__jv_list(k);
        } else {
            jv x = lp__jattr_path(r, items->v[i], given(av[2]) ? av[2] : jv_none());
            e[i].key = cs ? x : lower_if_str(r, x);
        }
    }
    sort_entries(r, e, n, rev);
    jlist_t *out = lp__jlist_new(r, n, JL_LIST);
    for (size_t i = 0; i < n; i++) {
        out->v[i] = e[i].item;
        lp__jdrop(r, e[i].key);
    }
    lp__jfree_obj(r, o);
    lp__jdrop(r, lp__jv_list(items));
    return lp__jv_list(out);
}

static jv f_string(jr_t *r, jv v, jargs_t *a)
{
    NOARGS("string");
    return soft_str(r, v);
}

static jv f_striptags(jr_t *r, jv v, jargs_t *a)
{
    NOARGS("striptags");
    jv s = str_of(r, v);
    /* remove comments and tags, collapse white space, unescape entities */
    sb_t b = {0};
    const char *p = s.u.s->p;
    size_t n = s.u.s->len;
    for (size_t i = 0; i < n;) {
        if (p[i] == '<' && i + 3 < n && !strncmp(p + i, "<!--", 4)) {
            const char *e = memmem(p + i + 4, n - i - 4, "-->", 3);
            if (e) {
                i = (size_t)(e - p) + 3;
                continue;
            }
        }
        if (p[i] == '<') {
            const char *e = memchr(p + i + 1, '>', n - i - 1);
            if (e) {
                i = (size_t)(e - p) + 1;
                continue;
            }
        }
        lp__sb_putc(r, &b, p[i++]);
    }
    jv t = lp__jv_sb(r, &b);
    jv words = lp__jstr_split(r, t, jv_none(), -1, false);
    sb_t o = {0};
    lp__sb_put(r, &o, "", 0);
    for (size_t i = 0; i < words.u.l->n; i++) {
        if (i) lp__sb_putc(r, &o, ' ');
        jstr_t *w = words.u.l->v[i].u.s;
        /* the entities markupsafe unescapes */
        for (size_t k = 0; k < w->len; k++) {
            static const struct { const char *e; char c; } ents[] = {
                {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&#39;", '\''}, {"&#34;", '"'}, {"&quot;", '"'}};
            bool done = false;
            for (size_t q = 0; q < sizeof(ents) / sizeof(ents[0]) && !done; q++) {
                size_t el = strlen(ents[q].e);
                if (w->len - k >= el && !memcmp(w->p + k, ents[q].e, el)) {
                    lp__sb_putc(r, &o, ents[q].c);
                    k += el - 1;
                    done = true;
                }
            }
            if (!done) lp__sb_putc(r, &o, w->p[k]);
        }
    }
    lp__jdrop(r, words);
    lp__jdrop(r, t);
    lp__jdrop(r, s);
    return lp__jv_sb(r, &o);
}

static jv f_sum(jr_t *r, jv v, jargs_t *a)
{
    ARGS("sum", 0, "attribute", "start");
    jv acc = given(av[1]) ? lp__jref(av[1]) : jv_int(0);
    jlist_t *items = lp__jiter(r, v);
    for (size_t i = 0; i < items->n; i++) {
        jv x = given_not_none(av[0]) ? lp__jattr_path(r, items->v[i], av[0]) : lp__jref(items->v[i]);
        if (acc.t == JT_STR) JERR(r, "sum() can't sum strings [use ''.join(seq) instead]");
        jv s = lp__jbinop(r, '+', acc, x);
        lp__jdrop(r, acc);
        lp__jdrop(r, x);
        acc = s;
    }
    lp__jdrop(r, lp__jv_list(items));
    return acc;
}

static jv f_tojson(jr_t *r, jv v, jargs_t *a)
{
    ARGS("tojson", 0, "ensure_ascii", "indent", "separators", "sort_keys");
    bool ascii = given(av[0]) && lp__jtruthy(r, av[0]);
    bool sort = given(av[3]) && lp__jtruthy(r, av[3]);
    const char *ind = NULL;
    size_t ind_n = 0;
    bool has_indent = given_not_none(av[1]);
    char spaces[1024];
    if (has_indent) {
        if (av[1].t == JT_STR) {
            ind = av[1].u.s->p;
            ind_n = av[1].u.s->len;
        } else if (av[1].t == JT_INT || av[1].t == JT_BOOL) {
            int64_t w = av[1].t == JT_INT ? av[1].u.i : av[1].u.b;
            if (w > (int64_t)sizeof(spaces)) lp__jerr_big(r, "tojson: indent too large");
            ind_n = w > 0 ? (size_t)w : 0;
            memset(spaces, ' ', ind_n);
            ind = spaces;
        } else
            JERR(r, "can't multiply sequence by non-int of type '%s'", lp__jtype_name(av[1]));
    }
    const char *item_sep = has_indent ? "," : ", ", *key_sep = ": ";
    sb_t isep = {0}, ksep = {0};
    if (given_not_none(av[2])) {
        jlist_t *p = lp__jiter_or_null(r, av[2]);
        if (!p || p->n != 2 || p->v[0].t != JT_STR || p->v[1].t != JT_STR)
            JERR(r, "tojson: separators must be a pair of strings");
        lp__sb_put(r, &isep, p->v[0].u.s->p, p->v[0].u.s->len);
        lp__sb_put(r, &isep, "", 0);
        lp__sb_put(r, &ksep, p->v[1].u.s->p, p->v[1].u.s->len);
        lp__sb_put(r, &ksep, "", 0);
        item_sep = isep.p ? isep.p : "";
        key_sep = ksep.p ? ksep.p : "";
        lp__jdrop(r, lp__jv_list(p));
    }
    sb_t b = {0};
    lp__sb_put(r, &b, "", 0);
    lp__jtojson(r, &b, v, ascii, ind, ind_n, has_indent, item_sep, key_sep, sort);
    lp__sb_free(r, &isep);
    lp__sb_free(r, &ksep);
    return lp__jv_sb(r, &b);
}

static jv f_trim(jr_t *r, jv v, jargs_t *a)
{
    ARGS("trim", 0, "chars");
    jv s = soft_str(r, v);
    jv o = lp__jstr_strip(r, s, av[0], 3);
    lp__jdrop(r, s);
    return o;
}

static jv f_truncate(jr_t *r, jv v, jargs_t *a)
{
    ARGS("truncate", 0, "length", "killwords", "end", "leeway");
    int64_t length = given(av[0]) ? as_int(r, av[0], "truncate") : 255;
    bool kill = given(av[1]) && lp__jtruthy(r, av[1]);
    jv end = given(av[2]) ? lp__jref(av[2]) : lp__jv_cstr(r, "...");
    int64_t leeway = given_not_none(av[3]) ? as_int(r, av[3], "truncate") : 5;
    if (end.t != JT_STR) JERR(r, "truncate: end must be a string");
    int64_t endn = (int64_t)lp__jstr_ncp(end.u.s);
    if (length < endn) JERR(r, "expected length >= %" PRId64 ", got %" PRId64, endn, length);
    if (leeway < 0) JERR(r, "expected leeway >= 0, got %" PRId64, leeway);
    int64_t n = lp__jlen(r, v);
    if (n <= length + leeway) {
        lp__jdrop(r, end);
        return lp__jref(v);
    }
    if (v.t != JT_STR) JERR(r, "truncate: the value is not a string");
    jv head = lp__jslice(r, v, jv_none(), jv_int(length - endn), jv_none(), false);
    jv res;
    if (kill) {
        res = lp__jbinop(r, '+', head, end);
    } else {
        jv sp = lp__jv_cstr(r, " ");
        jv parts = lp__jstr_split(r, head, sp, 1, true);
        res = lp__jbinop(r, '+', parts.u.l->v[0], end);
        lp__jdrop(r, parts);
        lp__jdrop(r, sp);
    }
    lp__jdrop(r, head);
    lp__jdrop(r, end);
    return res;
}

static jv f_unique(jr_t *r, jv v, jargs_t *a)
{
    ARGS("unique", 0, "case_sensitive", "attribute");
    bool cs = given(av[0]) && lp__jtruthy(r, av[0]);
    jlist_t *items = lp__jiter(r, v);
    jdict_t *seen = lp__jdict_new(r);
    jv sv = lp__jv_dict(seen);
    jlist_t *out = lp__jlist_new(r, items->n, JL_LIST);
    size_t k = 0;
    for (size_t i = 0; i < items->n; i++) {
        jv key = lp__jattr_path(r, items->v[i], given(av[1]) ? av[1] : jv_none());
        if (!cs) key = lower_if_str(r, key);
        if (lp__jdict_get(r, seen, key)) {
            lp__jdrop(r, key);
            continue;
        }
        lp__jdict_set(r, seen, key, jv_none());
        out->v[k++] = lp__jref(items->v[i]);
    }
    out->n = k;
    lp__jdrop(r, sv);
    lp__jdrop(r, lp__jv_list(items));
    return gen_of(out);
}

static void url_quote(jr_t *r, sb_t *b, jv v, bool for_qs)
{
    jv s = str_of(r, v);
    static const char *safe = "/";
    for (size_t i = 0; i < s.u.s->len; i++) {
        unsigned char c = (unsigned char)s.u.s->p[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                  c == '.' || c == '-' || c == '~' || (!for_qs && strchr(safe, c) && c);
        if (ok) lp__sb_putc(r, b, (char)c);
        else if (for_qs && c == ' ') lp__sb_putc(r, b, '+');
        else lp__sb_printf(r, b, "%%%02X", c);
    }
    lp__jdrop(r, s);
}

static jv f_urlencode(jr_t *r, jv v, jargs_t *a)
{
    NOARGS("urlencode");
    sb_t b = {0};
    lp__sb_put(r, &b, "", 0);
    jlist_t *l = v.t == JT_STR ? NULL : lp__jiter_or_null(r, v);
    if (!l || v.t == JT_UNDEF) {
        if (l) lp__jdrop(r, lp__jv_list(l));
        url_quote(r, &b, v, false);
        return lp__jv_sb(r, &b);
    }
    jdict_t *d = v.t == JT_DICT ? v.u.dc : NULL;
    size_t n = d ? d->n : l->n;
    for (size_t i = 0; i < n; i++) {
        jv k, x;
        if (d) {
            k = d->k[i];
            x = d->v[i];
        } else {
            jlist_t *pair = lp__jiter(r, l->v[i]);
            if (pair->n != 2) JERR(r, "urlencode: expected pairs");
            k = pair->v[0];
            x = pair->v[1];
        }
        if (i) lp__sb_putc(r, &b, '&');
        url_quote(r, &b, k, true);
        lp__sb_putc(r, &b, '=');
        url_quote(r, &b, x, true);
    }
    lp__jdrop(r, lp__jv_list(l));
    return lp__jv_sb(r, &b);
}

static jv f_wordcount(jr_t *r, jv v, jargs_t *a)
{
    NOARGS("wordcount");
    jv s = soft_str(r, v);
    int64_t n = 0;
    bool in = false;
    for (size_t i = 0; i < s.u.s->len;) {
        uint32_t cp = lp__u8_next(s.u.s->p, s.u.s->len, &i);
        bool w = cp == '_' || (lp__py_flags(cp) & LP_PY_ALNUM);
        if (w && !in) n++;
        in = w;
    }
    lp__jdrop(r, s);
    return jv_int(n);
}

static jv f_xmlattr(jr_t *r, jv v, jargs_t *a)
{
    ARGS("xmlattr", 0, "autospace");
    bool autospace = !given(av[0]) || lp__jtruthy(r, av[0]);
    if (v.t != JT_DICT) JERR(r, "'%s' object has no attribute 'items'", lp__jtype_name(v));
    sb_t b = {0};
    lp__sb_put(r, &b, "", 0);
    bool any = false;
    for (size_t i = 0; i < v.u.dc->n; i++) {
        jv k = v.u.dc->k[i], x = v.u.dc->v[i];
        if (x.t == JT_NONE || x.t == JT_UNDEF) continue;
        sb_t ks = {0}, xs = {0};
        if (k.t != JT_STR) JERR(r, "expected string or bytes-like object, got '%s'", lp__jtype_name(k));
        lp__jstr_of(r, &ks, k);
        for (size_t q = 0; q < ks.n; q++)
            if (strchr(" \t\n\r\f\v/>=", ks.p[q]))
                JERR(r, "Invalid character in attribute name: '%s'", ks.p);
        lp__jstr_of(r, &xs, x);
        lp__sb_putc(r, &b, any || autospace ? ' ' : 0);
        if (!any && !autospace) b.n--;
        any = true;
        lp__jescape(r, &b, ks.p ? ks.p : "", ks.n);
        lp__sb_puts(r, &b, "=\"");
        lp__jescape(r, &b, xs.p ? xs.p : "", xs.n);
        lp__sb_putc(r, &b, '"');
        lp__sb_free(r, &ks);
        lp__sb_free(r, &xs);
    }
    return lp__jv_sb(r, &b);
}

static const jfilter_t filters[] = {
    {"abs", f_abs}, {"attr", f_attr}, {"batch", f_batch}, {"capitalize", f_capitalize},
    {"center", f_center}, {"count", f_length}, {"d", f_default}, {"default", f_default},
    {"dictsort", f_dictsort}, {"e", f_escape}, {"escape", f_escape}, {"filesizeformat", f_filesizeformat},
    {"first", f_first}, {"float", f_float}, {"forceescape", f_forceescape}, {"format", f_format},
    {"groupby", f_groupby}, {"indent", f_indent}, {"int", f_int}, {"items", f_items}, {"join", f_join},
    {"last", f_last}, {"length", f_length}, {"list", f_list}, {"lower", f_lower}, {"map", f_map},
    {"max", f_max}, {"min", f_min}, {"reject", f_reject}, {"rejectattr", f_rejectattr},
    {"replace", f_replace}, {"reverse", f_reverse}, {"round", f_round}, {"safe", f_safe},
    {"select", f_select}, {"selectattr", f_selectattr}, {"slice", f_slice}, {"sort", f_sort},
    {"string", f_string}, {"striptags", f_striptags}, {"sum", f_sum}, {"title", f_title},
    {"tojson", f_tojson}, {"trim", f_trim}, {"truncate", f_truncate}, {"unique", f_unique},
    {"upper", f_upper}, {"urlencode", f_urlencode}, {"wordcount", f_wordcount}, {"xmlattr", f_xmlattr},
    {NULL, NULL},
};

const jfilter_t *lp__jinja_filter_find(const char *name)
{
    for (const jfilter_t *f = filters; f->name; f++)
        if (!strcmp(f->name, name)) return f;
    return NULL;
}

/* ---- tests -------------------------------------------------------------------------- */

#define T(b) return jv_bool(b)

static jv t_boolean(jr_t *r, jv v, jargs_t *a) { NOARGS("test_boolean"); T(v.t == JT_BOOL); }
static jv t_callable(jr_t *r, jv v, jargs_t *a) { NOARGS("test_callable"); T(v.t == JT_FUNC || v.t == JT_UNDEF || v.t == JT_LOOP); }
static jv t_defined(jr_t *r, jv v, jargs_t *a) { NOARGS("test_defined"); T(v.t != JT_UNDEF); }
static jv t_undefined(jr_t *r, jv v, jargs_t *a) { NOARGS("test_undefined"); T(v.t == JT_UNDEF); }
static jv t_none(jr_t *r, jv v, jargs_t *a) { NOARGS("test_none"); T(v.t == JT_NONE); }
static jv t_true(jr_t *r, jv v, jargs_t *a) { NOARGS("test_true"); T(v.t == JT_BOOL && v.u.b); }
static jv t_false(jr_t *r, jv v, jargs_t *a) { NOARGS("test_false"); T(v.t == JT_BOOL && !v.u.b); }
static jv t_integer(jr_t *r, jv v, jargs_t *a) { NOARGS("test_integer"); T(v.t == JT_INT); }
static jv t_float(jr_t *r, jv v, jargs_t *a) { NOARGS("test_float"); T(v.t == JT_FLOAT); }
static jv t_number(jr_t *r, jv v, jargs_t *a) { NOARGS("test_number"); T(v.t == JT_INT || v.t == JT_FLOAT || v.t == JT_BOOL); }
static jv t_string(jr_t *r, jv v, jargs_t *a) { NOARGS("test_string"); T(v.t == JT_STR); }
static jv t_mapping(jr_t *r, jv v, jargs_t *a) { NOARGS("test_mapping"); T(v.t == JT_DICT); }
static jv t_escaped(jr_t *r, jv v, jargs_t *a) { NOARGS("test_escaped"); T(v.t == JT_STR && (v.f & JF_MARKUP)); }
static jv t_sequence(jr_t *r, jv v, jargs_t *a)
{
    NOARGS("test_sequence");
    T(v.t == JT_UNDEF || v.t == JT_STR || v.t == JT_DICT ||
      (v.t == JT_LIST && (v.u.l->kind == JL_LIST || v.u.l->kind == JL_TUPLE || v.u.l->kind == JL_RANGE)));
}
static jv t_iterable(jr_t *r, jv v, jargs_t *a)
{
    NOARGS("test_iterable");
    T(v.t == JT_UNDEF || v.t == JT_STR || v.t == JT_DICT || v.t == JT_LIST || v.t == JT_LOOP);
}
static jv t_odd(jr_t *r, jv v, jargs_t *a)
{
    NOARGS("test_odd");
    jv m = lp__jbinop(r, '%', v, jv_int(2));
    bool b = lp__jeq(r, m, jv_int(1));
    lp__jdrop(r, m);
    T(b);
}
static jv t_even(jr_t *r, jv v, jargs_t *a)
{
    NOARGS("test_even");
    jv m = lp__jbinop(r, '%', v, jv_int(2));
    bool b = lp__jeq(r, m, jv_int(0));
    lp__jdrop(r, m);
    T(b);
}
static jv t_divisibleby(jr_t *r, jv v, jargs_t *a)
{
    ARGS("test_divisibleby", 1, "num");
    jv m = lp__jbinop(r, '%', v, av[0]);
    bool b = lp__jeq(r, m, jv_int(0));
    lp__jdrop(r, m);
    T(b);
}
/* str(value).islower() / .isupper() */
static jv case_test(jr_t *r, jv v, jargs_t *a, bool upper)
{
    NOARGS(upper ? "test_upper" : "test_lower");
    jv s = str_of(r, v);
    bool cased = false, ok = true;
    for (size_t i = 0; i < s.u.s->len && ok;) {
        uint32_t f = lp__py_flags(lp__u8_next(s.u.s->p, s.u.s->len, &i));
        if (f & ((upper ? LP_PY_LOWER : LP_PY_UPPER) | LP_PY_TITLE)) ok = false;
        if (f & (upper ? LP_PY_UPPER : LP_PY_LOWER)) cased = true;
    }
    lp__jdrop(r, s);
    T(ok && cased);
}
static jv t_lower(jr_t *r, jv v, jargs_t *a) { return case_test(r, v, a, false); }
static jv t_upper(jr_t *r, jv v, jargs_t *a) { return case_test(r, v, a, true); }
static jv t_in(jr_t *r, jv v, jargs_t *a) { ARGS("test_in", 1, "seq"); T(lp__jcontains(r, av[0], v)); }
static jv t_eq(jr_t *r, jv v, jargs_t *a) { ARGS("eq", 1, "b"); T(lp__jeq(r, v, av[0])); }
static jv t_ne(jr_t *r, jv v, jargs_t *a) { ARGS("ne", 1, "b"); T(!lp__jeq(r, v, av[0])); }
static jv t_lt(jr_t *r, jv v, jargs_t *a) { ARGS("lt", 1, "b"); int c = lp__jcmp(r, v, av[0], "<"); T(c != 2 && c < 0); }
static jv t_le(jr_t *r, jv v, jargs_t *a) { ARGS("le", 1, "b"); int c = lp__jcmp(r, v, av[0], "<="); T(c != 2 && c <= 0); }
static jv t_gt(jr_t *r, jv v, jargs_t *a) { ARGS("gt", 1, "b"); int c = lp__jcmp(r, v, av[0], ">"); T(c != 2 && c > 0); }
static jv t_ge(jr_t *r, jv v, jargs_t *a) { ARGS("ge", 1, "b"); int c = lp__jcmp(r, v, av[0], ">="); T(c != 2 && c >= 0); }
static jv t_sameas(jr_t *r, jv v, jargs_t *a)
{
    ARGS("test_sameas", 1, "other");
    jv o = av[0];
    if (v.t != o.t) T(false);
    switch (v.t) {
    case JT_NONE: case JT_UNDEF: T(v.t == JT_NONE || v.u.s == o.u.s);
    case JT_BOOL: T(v.u.b == o.u.b);
    case JT_INT: T(v.u.i == o.u.i && v.u.i >= -5 && v.u.i <= 256); /* CPython's small ints */
    case JT_FLOAT: T(false);
    default: T(v.u.o == o.u.o);
    }
}
static jv t_filter(jr_t *r, jv v, jargs_t *a) { NOARGS("test_filter"); T(v.t == JT_STR && lp__jinja_filter_find(v.u.s->p)); }
static jv t_test(jr_t *r, jv v, jargs_t *a) { NOARGS("test_test"); T(v.t == JT_STR && lp__jinja_test_find(v.u.s->p)); }

static const jfilter_t tests[] = {
    {"boolean", t_boolean}, {"callable", t_callable}, {"defined", t_defined}, {"divisibleby", t_divisibleby},
    {"eq", t_eq}, {"equalto", t_eq}, {"==", t_eq}, {"escaped", t_escaped}, {"even", t_even},
    {"false", t_false}, {"filter", t_filter}, {"float", t_float}, {"ge", t_ge}, {">=", t_ge},
    {"gt", t_gt}, {">", t_gt}, {"greaterthan", t_gt}, {"in", t_in}, {"integer", t_integer},
    {"iterable", t_iterable}, {"le", t_le}, {"<=", t_le}, {"lower", t_lower}, {"lt", t_lt}, {"<", t_lt},
    {"lessthan", t_lt}, {"mapping", t_mapping}, {"ne", t_ne}, {"!=", t_ne}, {"none", t_none},
    {"number", t_number}, {"odd", t_odd}, {"sameas", t_sameas}, {"sequence", t_sequence},
    {"string", t_string}, {"test", t_test}, {"true", t_true}, {"undefined", t_undefined},
    {"upper", t_upper},
    {NULL, NULL},
};

const jfilter_t *lp__jinja_test_find(const char *name)
{
    for (const jfilter_t *f = tests; f->name; f++)
        if (!strcmp(f->name, name)) return f;
    return NULL;
}
