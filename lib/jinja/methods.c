/* methods.c - the methods templates call on str, list and dict values, as
 * the immutable sandbox allows them (list.append, dict.update and the
 * like are refused; list.pop is not, as in jinja2), and the globals:
 * range, dict, namespace, joiner, raise_exception, strftime_now. */
#include "jinja-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

jv lp__jstr_dot_format(jr_t *r, jv fmtv, jargs_t *a, jdict_t *map);

static int64_t int_arg(jr_t *r, jv v, const char *what, int64_t dflt)
{
    if (jmissing(v) || v.t == JT_NONE) return dflt;
    if (v.t == JT_INT) return v.u.i;
    if (v.t == JT_BOOL) return v.u.b;
    JERR(r, "%s: an integer is required, not '%s'", what, lp__jtype_name(v));
}

/* ---- str ------------------------------------------------------------------------------ */

#define ARGS(fname, ...)                                                  \
    static const char *const names_[] = {__VA_ARGS__};                    \
    jv av[sizeof(names_) / sizeof(names_[0])];                            \
    lp__jbind(r, fname, a, names_, (int)(sizeof(names_) / sizeof(names_[0])), n_req_, av)

#define NOARGS(fname)                                                          \
    do {                                                                       \
        if (a->n || a->nk) JERR(r, "%s() takes no arguments (%zu given)", fname, a->n + a->nk); \
    } while (0)

static jv m_strip(jr_t *r, jv s, jargs_t *a)
{
    int n_req_ = 0;
    ARGS("strip", "chars");
    return lp__jstr_strip(r, s, av[0], 3);
}
static jv m_lstrip(jr_t *r, jv s, jargs_t *a)
{
    int n_req_ = 0;
    ARGS("lstrip", "chars");
    return lp__jstr_strip(r, s, av[0], 1);
}
static jv m_rstrip(jr_t *r, jv s, jargs_t *a)
{
    int n_req_ = 0;
    ARGS("rstrip", "chars");
    return lp__jstr_strip(r, s, av[0], 2);
}
static jv m_split(jr_t *r, jv s, jargs_t *a)
{
    int n_req_ = 0;
    ARGS("split", "sep", "maxsplit");
    return lp__jstr_split(r, s, av[0], int_arg(r, av[1], "maxsplit", -1), false);
}
static jv m_rsplit(jr_t *r, jv s, jargs_t *a)
{
    int n_req_ = 0;
    ARGS("rsplit", "sep", "maxsplit");
    return lp__jstr_split(r, s, av[0], int_arg(r, av[1], "maxsplit", -1), true);
}
static jv m_splitlines(jr_t *r, jv s, jargs_t *a)
{
    int n_req_ = 0;
    ARGS("splitlines", "keepends");
    bool keep = !jmissing(av[0]) && lp__jtruthy(r, av[0]);
    jstr_t *str = s.u.s;
    jlist_t *l = lp__jlist_new(r, 0, JL_LIST);
    jv out = lp__jv_list(l);
    size_t cap = 0;
    jobj_t *o = NULL;
    for (size_t i = 0; i < str->len;) {
        size_t st = i, e;
        for (;;) {
            if (i >= str->len) {
                e = i;
                break;
            }
            size_t j = i;
            uint32_t cp = lp__u8_next(str->p, str->len, &j);
            bool br = cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || cp == 0x1c || cp == 0x1d ||
                      cp == 0x1e || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
            if (br) {
                e = i;
                if (cp == '\r' && j < str->len && str->p[j] == '\n') j++;
                i = j;
                if (keep) e = j;
                break;
            }
            i = j;
        }
        if (l->n == cap) {
            cap = cap ? cap * 2 : 8;
            l->v = lp__jraw_grow(r, &o, cap * sizeof(jv));
            l->cap = cap;
        }
        l->v[l->n] = lp__jv_str(r, str->p + st, e - st);
        l->v[l->n++].f = s.f;
    }
    return out;
}
static jv m_upper(jr_t *r, jv s, jargs_t *a) { NOARGS("upper"); return lp__jstr_case(r, s, 1); }
static jv m_lower(jr_t *r, jv s, jargs_t *a) { NOARGS("lower"); return lp__jstr_case(r, s, 2); }
static jv m_capitalize(jr_t *r, jv s, jargs_t *a) { NOARGS("capitalize"); return lp__jstr_case(r, s, 3); }
static jv m_title(jr_t *r, jv s, jargs_t *a) { NOARGS("title"); return lp__jstr_case(r, s, 5); }
static jv m_swapcase(jr_t *r, jv s, jargs_t *a) { NOARGS("swapcase"); return lp__jstr_case(r, s, 6); }

/* start/end arguments as Python's slice of the string, in bytes */
static void str_window(jr_t *r, jstr_t *s, jv start, jv end, size_t *b0, size_t *b1)
{
    int64_t n = (int64_t)lp__jstr_ncp(s);
    int64_t a = int_arg(r, start, "slice indices", 0), e = int_arg(r, end, "slice indices", n);
    if (a < 0) a = a + n < 0 ? 0 : a + n;
    if (e < 0) e = e + n < 0 ? 0 : e + n;
    if (a > n) a = n;
    if (e > n) e = n;
    if (e < a) e = a;
    *b0 = lp__u8_offset(s->p, s->len, (size_t)a);
    *b1 = *b0 + lp__u8_offset(s->p + *b0, s->len - *b0, (size_t)(e - a));
}

static jv startsend(jr_t *r, jv s, jargs_t *a, bool end)
{
    int n_req_ = 1;
    ARGS(end ? "endswith" : "startswith", "prefix", "start", "end");
    size_t b0, b1;
    str_window(r, s.u.s, av[1], av[2], &b0, &b1);
    if (b0 > s.u.s->len) return jv_bool(false);
    jv sub = lp__jv_str(r, s.u.s->p + b0, b1 - b0);
    bool res = lp__jstr_startswith(r, sub, av[0], end);
    lp__jdrop(r, sub);
    return jv_bool(res);
}
static jv m_startswith(jr_t *r, jv s, jargs_t *a) { return startsend(r, s, a, false); }
static jv m_endswith(jr_t *r, jv s, jargs_t *a) { return startsend(r, s, a, true); }

static jv m_replace(jr_t *r, jv s, jargs_t *a)
{
    int n_req_ = 2;
    ARGS("replace", "old", "new", "count");
    return lp__jstr_replace(r, s, av[0], av[1], int_arg(r, av[2], "count", -1));
}

/* find family: which 0 find, 1 rfind, 2 index, 3 rindex, 4 count */
static jv finder(jr_t *r, jv s, jargs_t *a, int which)
{
    static const char *const fn[] = {"find", "rfind", "index", "rindex", "count"};
    int n_req_ = 1;
    ARGS(fn[which], "sub", "start", "end");
    if (av[0].t != JT_STR) JERR(r, "must be str, not %s", lp__jtype_name(av[0]));
    jstr_t *str = s.u.s, *sub = av[0].u.s;
    size_t b0, b1;
    str_window(r, str, av[1], av[2], &b0, &b1);
    if (which == 4) {
        int64_t c = 0;
        if (!sub->len) return jv_int((int64_t)lp__u8_count(str->p + b0, b1 - b0) + 1);
        for (size_t i = b0; i + sub->len <= b1;) {
            const char *h = memmem(str->p + i, b1 - i, sub->p, sub->len);
            if (!h) break;
            c++;
            i = (size_t)(h - str->p) + sub->len;
        }
        return jv_int(c);
    }
    size_t at = SIZE_MAX;
    if (sub->len <= b1 - b0) {
        if (which == 0 || which == 2) {
            const char *h = memmem(str->p + b0, b1 - b0, sub->p, sub->len);
            if (h) at = (size_t)(h - str->p);
        } else
            for (size_t k = b1 - sub->len + 1; k-- > b0;)
                if (!memcmp(str->p + k, sub->p, sub->len)) {
                    at = k;
                    break;
                }
    }
    if (at == SIZE_MAX) {
        if (which >= 2) JERR(r, "substring not found");
        return jv_int(-1);
    }
    return jv_int((int64_t)lp__u8_count(str->p, at));
}
static jv m_find(jr_t *r, jv s, jargs_t *a) { return finder(r, s, a, 0); }
static jv m_rfind(jr_t *r, jv s, jargs_t *a) { return finder(r, s, a, 1); }
static jv m_index(jr_t *r, jv s, jargs_t *a) { return finder(r, s, a, 2); }
static jv m_rindex(jr_t *r, jv s, jargs_t *a) { return finder(r, s, a, 3); }
static jv m_count(jr_t *r, jv s, jargs_t *a) { return finder(r, s, a, 4); }

static jv m_join(jr_t *r, jv s, jargs_t *a)
{
    int n_req_ = 1;
    ARGS("join", "iterable");
    jlist_t *l = lp__jiter(r, av[0]);
    sb_t b = {0};
    lp__sb_put(r, &b, "", 0);
    bool markup = s.f & JF_MARKUP;
    for (size_t i = 0; i < l->n; i++) {
        if (l->v[i].t != JT_STR && !markup)
            JERR(r, "sequence item %zu: expected str instance, %s found", i, lp__jtype_name(l->v[i]));
        if (i) lp__sb_put(r, &b, s.u.s->p, s.u.s->len);
        if (markup && !(l->v[i].f & JF_MARKUP)) {
            sb_t t = {0};
            lp__jstr_of(r, &t, l->v[i]);
            lp__jescape(r, &b, t.p ? t.p : "", t.n);
            lp__sb_free(r, &t);
        } else
            lp__jstr_of(r, &b, l->v[i]);
    }
    lp__jdrop(r, lp__jv_list(l));
    jv v = lp__jv_sb(r, &b);
    v.f = s.f;
    return v;
}

static jv m_format(jr_t *r, jv s, jargs_t *a) { return lp__jstr_dot_format(r, s, a, NULL); }
static jv m_format_map(jr_t *r, jv s, jargs_t *a)
{
    if (a->nk) JERR(r, "format_map() takes no keyword arguments");
    if (a->n != 1) JERR(r, "format_map() takes exactly one argument (%zu given)", a->n);
    if (a->v[0].t != JT_DICT) JERR(r, "format_map: the argument must be a mapping");
    jargs_t none = {0};
    return lp__jstr_dot_format(r, s, &none, a->v[0].u.dc);
}

static jv is_class(jr_t *r, jv s, jargs_t *a, const char *name, uint32_t flag)
{
    NOARGS(name);
    jstr_t *str = s.u.s;
    if (!str->len) return jv_bool(false);
    for (size_t i = 0; i < str->len;)
        if (!(lp__py_flags(lp__u8_next(str->p, str->len, &i)) & flag)) return jv_bool(false);
    return jv_bool(true);
}
static jv m_isalpha(jr_t *r, jv s, jargs_t *a) { return is_class(r, s, a, "isalpha", LP_PY_ALPHA); }
static jv m_isdigit(jr_t *r, jv s, jargs_t *a) { return is_class(r, s, a, "isdigit", LP_PY_DIGIT); }
static jv m_isdecimal(jr_t *r, jv s, jargs_t *a) { return is_class(r, s, a, "isdecimal", LP_PY_DECIMAL); }
static jv m_isnumeric(jr_t *r, jv s, jargs_t *a) { return is_class(r, s, a, "isnumeric", LP_PY_NUMERIC); }
static jv m_isalnum(jr_t *r, jv s, jargs_t *a) { return is_class(r, s, a, "isalnum", LP_PY_ALNUM); }
static jv m_isspace(jr_t *r, jv s, jargs_t *a) { return is_class(r, s, a, "isspace", LP_PY_SPACE); }
static jv m_isprintable(jr_t *r, jv s, jargs_t *a)
{
    if (!s.u.s->len) return jv_bool(true);
    return is_class(r, s, a, "isprintable", LP_PY_PRINT);
}
static jv m_isascii(jr_t *r, jv s, jargs_t *a)
{
    NOARGS("isascii");
    for (size_t i = 0; i < s.u.s->len; i++)
        if ((unsigned char)s.u.s->p[i] >= 0x80) return jv_bool(false);
    return jv_bool(true);
}

/* islower/isupper: at least one cased character, none of the other case */
static jv case_test(jr_t *r, jv s, jargs_t *a, bool upper)
{
    NOARGS(upper ? "isupper" : "islower");
    bool cased = false;
    for (size_t i = 0; i < s.u.s->len;) {
        uint32_t f = lp__py_flags(lp__u8_next(s.u.s->p, s.u.s->len, &i));
        if (f & (upper ? LP_PY_LOWER : LP_PY_UPPER)) return jv_bool(false);
        if (f & LP_PY_TITLE) return jv_bool(false);
        if (f & (upper ? LP_PY_UPPER : LP_PY_LOWER)) cased = true;
    }
    return jv_bool(cased);
}
static jv m_islower(jr_t *r, jv s, jargs_t *a) { return case_test(r, s, a, false); }
static jv m_isupper(jr_t *r, jv s, jargs_t *a) { return case_test(r, s, a, true); }
static jv m_istitle(jr_t *r, jv s, jargs_t *a)
{
    NOARGS("istitle");
    bool cased = false, prev = false;
    for (size_t i = 0; i < s.u.s->len;) {
        uint32_t f = lp__py_flags(lp__u8_next(s.u.s->p, s.u.s->len, &i));
        if (f & (LP_PY_UPPER | LP_PY_TITLE)) {
            if (prev) return jv_bool(false);
            prev = cased = true;
        } else if (f & LP_PY_LOWER) {
            if (!prev) return jv_bool(false);
            prev = cased = true;
        } else
            prev = false;
    }
    return jv_bool(cased);
}

static jv justify(jr_t *r, jv s, jargs_t *a, const char *name, int how)
{
    int n_req_ = 1;
    ARGS(name, "width", "fillchar");
    int64_t w = int_arg(r, av[0], "width", 0);
    uint32_t fill = ' ';
    if (!jmissing(av[1])) {
        if (av[1].t != JT_STR || lp__jstr_ncp(av[1].u.s) != 1)
            JERR(r, "The fill character must be exactly one character long");
        size_t q = 0;
        fill = lp__u8_next(av[1].u.s->p, av[1].u.s->len, &q);
    }
    int64_t n = (int64_t)lp__jstr_ncp(s.u.s);
    if (w <= n) return lp__jref(s);
    if (w > 1 << 24) lp__jerr_big(r, "width too large");
    int64_t padn = w - n, left;
    if (how == 0) left = 0;                                      /* ljust */
    else if (how == 1) left = padn;                              /* rjust */
    else left = padn / 2 + (padn & w & 1);                       /* center, as CPython */
    sb_t b = {0};
    for (int64_t i = 0; i < left; i++) lp__sb_cp(r, &b, fill);
    lp__sb_put(r, &b, s.u.s->p, s.u.s->len);
    for (int64_t i = left; i < padn; i++) lp__sb_cp(r, &b, fill);
    jv v = lp__jv_sb(r, &b);
    v.f = s.f;
    return v;
}
static jv m_ljust(jr_t *r, jv s, jargs_t *a) { return justify(r, s, a, "ljust", 0); }
static jv m_rjust(jr_t *r, jv s, jargs_t *a) { return justify(r, s, a, "rjust", 1); }
static jv m_center(jr_t *r, jv s, jargs_t *a) { return justify(r, s, a, "center", 2); }

static jv m_zfill(jr_t *r, jv s, jargs_t *a)
{
    int n_req_ = 1;
    ARGS("zfill", "width");
    int64_t w = int_arg(r, av[0], "width", 0), n = (int64_t)lp__jstr_ncp(s.u.s);
    if (w <= n) return lp__jref(s);
    if (w > 1 << 24) lp__jerr_big(r, "width too large");
    sb_t b = {0};
    const char *p = s.u.s->p;
    size_t off = 0;
    if (s.u.s->len && (p[0] == '+' || p[0] == '-')) {
        lp__sb_putc(r, &b, p[0]);
        off = 1;
    }
    for (int64_t i = n; i < w; i++) lp__sb_putc(r, &b, '0');
    lp__sb_put(r, &b, p + off, s.u.s->len - off);
    return lp__jv_sb(r, &b);
}

static jv partition(jr_t *r, jv s, jargs_t *a, bool right)
{
    int n_req_ = 1;
    ARGS(right ? "rpartition" : "partition", "sep");
    if (av[0].t != JT_STR) JERR(r, "must be str, not %s", lp__jtype_name(av[0]));
    jstr_t *str = s.u.s, *sep = av[0].u.s;
    if (!sep->len) JERR(r, "empty separator");
    size_t at = SIZE_MAX;
    if (sep->len <= str->len) {
        if (!right) {
            const char *h = memmem(str->p, str->len, sep->p, sep->len);
            if (h) at = (size_t)(h - str->p);
        } else
            for (size_t k = str->len - sep->len + 1; k-- > 0;)
                if (!memcmp(str->p + k, sep->p, sep->len)) {
                    at = k;
                    break;
                }
    }
    jlist_t *t = lp__jlist_new(r, 3, JL_TUPLE);
    if (at == SIZE_MAX) {
        t->v[right ? 2 : 0] = lp__jref(s);
        t->v[1] = lp__jv_str(r, "", 0);
        t->v[right ? 0 : 2] = lp__jv_str(r, "", 0);
    } else {
        t->v[0] = lp__jv_str(r, str->p, at);
        t->v[1] = lp__jref(av[0]);
        t->v[2] = lp__jv_str(r, str->p + at + sep->len, str->len - at - sep->len);
    }
    return lp__jv_list(t);
}
static jv m_partition(jr_t *r, jv s, jargs_t *a) { return partition(r, s, a, false); }
static jv m_rpartition(jr_t *r, jv s, jargs_t *a) { return partition(r, s, a, true); }

static jv removefix(jr_t *r, jv s, jargs_t *a, bool suffix)
{
    int n_req_ = 1;
    ARGS(suffix ? "removesuffix" : "removeprefix", "fix");
    if (av[0].t != JT_STR) JERR(r, "must be str, not %s", lp__jtype_name(av[0]));
    jstr_t *str = s.u.s, *fx = av[0].u.s;
    if (!fx->len || fx->len > str->len || memcmp(suffix ? str->p + str->len - fx->len : str->p, fx->p, fx->len))
        return lp__jref(s);
    jv v = lp__jv_str(r, suffix ? str->p : str->p + fx->len, str->len - fx->len);
    v.f = s.f;
    return v;
}
static jv m_removeprefix(jr_t *r, jv s, jargs_t *a) { return removefix(r, s, a, false); }
static jv m_removesuffix(jr_t *r, jv s, jargs_t *a) { return removefix(r, s, a, true); }

static jv m_casefold(jr_t *r, jv s, jargs_t *a) { NOARGS("casefold"); return lp__jstr_case(r, s, 2); }

/* ---- list and tuple ---------------------------------------------------------------- */

static jv m_list_index(jr_t *r, jv s, jargs_t *a)
{
    int n_req_ = 1;
    ARGS("index", "value", "start", "stop");
    jlist_t *l = s.u.l;
    int64_t n = (int64_t)l->n;
    int64_t b = int_arg(r, av[1], "start", 0), e = int_arg(r, av[2], "stop", n);
    if (b < 0) b = b + n < 0 ? 0 : b + n;
    if (e < 0) e = e + n < 0 ? 0 : e + n;
    for (int64_t i = b; i < e && i < n; i++)
        if (lp__jeq(r, l->v[i], av[0])) return jv_int(i);
    JERR(r, "%s.index(x): x not in %s", lp__jtype_name(s), lp__jtype_name(s));
}
static jv m_list_count(jr_t *r, jv s, jargs_t *a)
{
    int n_req_ = 1;
    ARGS("count", "value");
    int64_t c = 0;
    for (size_t i = 0; i < s.u.l->n; i++) c += lp__jeq(r, s.u.l->v[i], av[0]);
    return jv_int(c);
}
static jv m_list_copy(jr_t *r, jv s, jargs_t *a)
{
    NOARGS("copy");
    jlist_t *o = lp__jlist_new(r, s.u.l->n, JL_LIST);
    for (size_t i = 0; i < s.u.l->n; i++) o->v[i] = lp__jref(s.u.l->v[i]);
    return lp__jv_list(o);
}
/* list.pop and list.clear: jinja2's immutable sandbox lets them through */
static jv m_list_pop(jr_t *r, jv s, jargs_t *a)
{
    int n_req_ = 0;
    ARGS("pop", "index");
    jlist_t *l = s.u.l;
    if (!l->n) JERR(r, "pop from empty list");
    int64_t n = (int64_t)l->n, i = int_arg(r, av[0], "index", -1);
    if (i < 0) i += n;
    if (i < 0 || i >= n) JERR(r, "pop index out of range");
    jv v = l->v[i];
    memmove(&l->v[i], &l->v[i + 1], (size_t)(n - i - 1) * sizeof(jv));
    l->n--;
    return v;
}
static jv m_list_clear(jr_t *r, jv s, jargs_t *a)
{
    NOARGS("clear");
    jlist_t *l = s.u.l;
    size_t n = l->n;
    l->n = 0;
    for (size_t i = 0; i < n; i++) lp__jdrop(r, l->v[i]);
    return jv_none();
}

/* ---- dict ------------------------------------------------------------------------------ */

static jv dict_view(jr_t *r, jdict_t *d, int kind)
{
    jlist_t *l = lp__jlist_new(r, d->n, kind);
    for (size_t i = 0; i < d->n; i++) {
        if (kind == JL_KEYS) l->v[i] = lp__jref(d->k[i]);
        else if (kind == JL_VALUES) l->v[i] = lp__jref(d->v[i]);
        else {
            jlist_t *t = lp__jlist_new(r, 2, JL_TUPLE);
            t->v[0] = lp__jref(d->k[i]);
            t->v[1] = lp__jref(d->v[i]);
            l->v[i] = lp__jv_list(t);
        }
    }
    return lp__jv_list(l);
}
static jv m_items(jr_t *r, jv s, jargs_t *a) { NOARGS("items"); return dict_view(r, s.u.dc, JL_ITEMS); }
static jv m_keys(jr_t *r, jv s, jargs_t *a) { NOARGS("keys"); return dict_view(r, s.u.dc, JL_KEYS); }
static jv m_values(jr_t *r, jv s, jargs_t *a) { NOARGS("values"); return dict_view(r, s.u.dc, JL_VALUES); }
static jv m_get(jr_t *r, jv s, jargs_t *a)
{
    if (a->nk) JERR(r, "get() takes no keyword arguments");
    if (a->n < 1 || a->n > 2) JERR(r, "get expected 1 or 2 arguments, got %zu", a->n);
    jv key = a->v[0];
    if (key.t == JT_DICT || (key.t == JT_LIST && key.u.l->kind != JL_TUPLE)) JERR(r, "unhashable type: '%s'", lp__jtype_name(key));
    jv *x = lp__jdict_get(r, s.u.dc, key);
    if (x) return lp__jref(*x);
    return a->n > 1 ? lp__jref(a->v[1]) : jv_none();
}
static jv m_dict_copy(jr_t *r, jv s, jargs_t *a)
{
    NOARGS("copy");
    jdict_t *d = lp__jdict_new(r);
    for (size_t i = 0; i < s.u.dc->n; i++) lp__jdict_set(r, d, lp__jref(s.u.dc->k[i]), lp__jref(s.u.dc->v[i]));
    return lp__jv_dict(d);
}

/* ---- dispatch -------------------------------------------------------------------------- */

typedef struct method {
    const char *name;
    jbuiltin_fn fn;   /* NULL: unsafe (refused by the sandbox) or unsupported */
    bool unsafe;
} method_t;

static const method_t str_methods[] = {
    {"strip", m_strip, 0}, {"lstrip", m_lstrip, 0}, {"rstrip", m_rstrip, 0}, {"split", m_split, 0},
    {"rsplit", m_rsplit, 0}, {"splitlines", m_splitlines, 0}, {"upper", m_upper, 0}, {"lower", m_lower, 0},
    {"capitalize", m_capitalize, 0}, {"title", m_title, 0}, {"swapcase", m_swapcase, 0},
    {"casefold", m_casefold, 0}, {"startswith", m_startswith, 0}, {"endswith", m_endswith, 0},
    {"replace", m_replace, 0}, {"find", m_find, 0}, {"rfind", m_rfind, 0}, {"index", m_index, 0},
    {"rindex", m_rindex, 0}, {"count", m_count, 0}, {"join", m_join, 0}, {"format", m_format, 0},
    {"isalpha", m_isalpha, 0}, {"isdigit", m_isdigit, 0}, {"isdecimal", m_isdecimal, 0},
    {"isnumeric", m_isnumeric, 0}, {"isalnum", m_isalnum, 0}, {"isspace", m_isspace, 0},
    {"islower", m_islower, 0}, {"isupper", m_isupper, 0}, {"istitle", m_istitle, 0},
    {"isascii", m_isascii, 0}, {"isprintable", m_isprintable, 0}, {"ljust", m_ljust, 0},
    {"rjust", m_rjust, 0}, {"center", m_center, 0}, {"zfill", m_zfill, 0}, {"partition", m_partition, 0},
    {"rpartition", m_rpartition, 0}, {"removeprefix", m_removeprefix, 0}, {"removesuffix", m_removesuffix, 0},
    {"encode", NULL, 0}, {"expandtabs", NULL, 0}, {"format_map", m_format_map, 0}, {"isidentifier", NULL, 0},
    {"maketrans", NULL, 0}, {"translate", NULL, 0},
    {NULL, NULL, 0},
};

static const method_t list_methods[] = {
    {"index", m_list_index, 0}, {"count", m_list_count, 0}, {"copy", m_list_copy, 0}, {"pop", m_list_pop, 0},
    {"clear", m_list_clear, 0}, {"append", NULL, 1}, {"reverse", NULL, 1}, {"insert", NULL, 1},
    {"sort", NULL, 1}, {"extend", NULL, 1}, {"remove", NULL, 1},
    {NULL, NULL, 0},
};

static const method_t tuple_methods[] = {
    {"index", m_list_index, 0}, {"count", m_list_count, 0},
    {NULL, NULL, 0},
};

static const method_t dict_methods[] = {
    {"items", m_items, 0}, {"keys", m_keys, 0}, {"values", m_values, 0}, {"get", m_get, 0},
    {"copy", m_dict_copy, 0}, {"clear", NULL, 1}, {"pop", NULL, 1}, {"popitem", NULL, 1},
    {"setdefault", NULL, 1}, {"update", NULL, 1}, {"fromkeys", NULL, 0},
    {NULL, NULL, 0},
};

jv lp__jmethod(jr_t *r, jv obj, const char *name, size_t n, bool *unsafe)
{
    const method_t *tab = NULL;
    *unsafe = false;
    if (obj.t == JT_STR) tab = str_methods;
    else if (obj.t == JT_DICT) tab = dict_methods;
    else if (obj.t == JT_LIST && obj.u.l->kind == JL_LIST) tab = list_methods;
    else if (obj.t == JT_LIST && (obj.u.l->kind == JL_TUPLE || obj.u.l->kind == JL_RANGE)) tab = tuple_methods;
    if (!tab) return jv_undef();
    for (const method_t *m = tab; m->name; m++) {
        if (strlen(m->name) != n || memcmp(m->name, name, n)) continue;
        if (m->unsafe) {
            *unsafe = true;
            return jv_undef();
        }
        if (!m->fn) {
            jfunc_t *f = lp__jfunc_new(r, JF_UNSUPPORTED, m->name);
            return lp__jv_func(f);
        }
        return lp__jv_method(r, m->name, m->fn, lp__jref(obj));
    }
    return jv_undef();
}

/* ---- globals --------------------------------------------------------------------------- */

#define MAX_RANGE 100000

static jv g_range(jr_t *r, jv self, jargs_t *a)
{
    (void)self;
    if (a->nk) JERR(r, "range() takes no keyword arguments");
    if (a->n < 1 || a->n > 3) JERR(r, "range expected at most 3 arguments, got %zu", a->n);
    int64_t v[3];
    for (size_t i = 0; i < a->n; i++) {
        if (a->v[i].t == JT_INT) v[i] = a->v[i].u.i;
        else if (a->v[i].t == JT_BOOL) v[i] = a->v[i].u.b;
        else JERR(r, "'%s' object cannot be interpreted as an integer", lp__jtype_name(a->v[i]));
    }
    int64_t start = a->n == 1 ? 0 : v[0], stop = a->n == 1 ? v[0] : v[1], step = a->n == 3 ? v[2] : 1;
    if (step == 0) JERR(r, "range() arg 3 must not be zero");
    double count = 0;
    if (step > 0 && stop > start) count = ((double)stop - (double)start - 1) / (double)step + 1;
    if (step < 0 && stop < start) count = ((double)start - (double)stop - 1) / (double)-step + 1;
    if (count > MAX_RANGE)
        JERR(r, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).", MAX_RANGE);
    size_t n = (size_t)count;
    jlist_t *l = lp__jlist_new(r, n, JL_RANGE);
    for (size_t i = 0; i < n; i++) l->v[i] = jv_int(start + (int64_t)i * step);
    l->r0 = start;
    l->r1 = stop;
    l->rs = step;
    return lp__jv_list(l);
}

/* dict(mapping or pairs, **kwargs); namespace() takes the same */
static jdict_t *dict_from_args(jr_t *r, jargs_t *a, const char *fname)
{
    if (a->n > 1) JERR(r, "%s expected at most 1 argument, got %zu", fname, a->n);
    jdict_t *d = lp__jdict_new(r);
    if (a->n) {
        jv src = a->v[0];
        if (src.t == JT_UNDEF) JERR(r, "%s", src.u.s ? src.u.s->p : "undefined");
        if (src.t == JT_DICT || src.t == JT_NS) {
            for (size_t i = 0; i < src.u.dc->n; i++) lp__jdict_set(r, d, lp__jref(src.u.dc->k[i]), lp__jref(src.u.dc->v[i]));
        } else {
            jlist_t *l = lp__jiter(r, src);
            for (size_t i = 0; i < l->n; i++) {
                jlist_t *pair = lp__jiter_or_null(r, l->v[i]);
                if (!pair) JERR(r, "cannot convert dictionary update sequence element #%zu to a sequence", i);
                if (pair->n != 2)
                    JERR(r, "dictionary update sequence element #%zu has length %zu; 2 is required", i, pair->n);
                lp__jdict_set(r, d, lp__jref(pair->v[0]), lp__jref(pair->v[1]));
                lp__jdrop(r, lp__jv_list(pair));
            }
            lp__jdrop(r, lp__jv_list(l));
        }
    }
    for (size_t k = 0; k < a->nk; k++) lp__jdict_set(r, d, lp__jv_cstr(r, a->kn[k]), lp__jref(a->kv[k]));
    return d;
}

static jv g_dict(jr_t *r, jv self, jargs_t *a)
{
    (void)self;
    return lp__jv_dict(dict_from_args(r, a, "dict"));
}

static jv g_namespace(jr_t *r, jv self, jargs_t *a)
{
    (void)self;
    jv v = {JT_NS, 0, {.dc = dict_from_args(r, a, "namespace")}};
    return v;
}

static jv g_joiner(jr_t *r, jv self, jargs_t *a)
{
    (void)self;
    int n_req_ = 0;
    ARGS("joiner", "sep");
    jfunc_t *f = lp__jfunc_new(r, JF_JOINER, "joiner");
    f->self = jmissing(av[0]) ? lp__jv_str(r, ", ", 2) : lp__jref(av[0]);
    return lp__jv_func(f);
}

static jv g_raise_exception(jr_t *r, jv self, jargs_t *a)
{
    (void)self;
    int n_req_ = 1;
    ARGS("raise_exception", "message");
    sb_t b = {0};
    lp__jstr_of(r, &b, av[0]);
    JERR(r, "%s", b.p ? b.p : "");
}

static jv g_strftime_now(jr_t *r, jv self, jargs_t *a)
{
    (void)self;
    int n_req_ = 1;
    ARGS("strftime_now", "format");
    if (av[0].t != JT_STR) JERR(r, "strftime() argument 1 must be str, not %s", lp__jtype_name(av[0]));
    struct tm tm;
    lp__jnow(r, &tm);
    /* Python formats a naive datetime: %z and %Z are empty, %f is 000000 */
    sb_t fmt = {0};
    const char *f = av[0].u.s->p;
    size_t n = av[0].u.s->len;
    for (size_t i = 0; i < n; i++) {
        if (f[i] == '%' && i + 1 < n) {
            char c = f[i + 1];
            if (c == 'z' || c == 'Z') {
                i++;
                continue;
            }
            if (c == 'f') {
                lp__sb_puts(r, &fmt, "000000");
                i++;
                continue;
            }
            lp__sb_put(r, &fmt, f + i, 2);
            i++;
            continue;
        }
        lp__sb_putc(r, &fmt, f[i]);
    }
    if (fmt.n > 4096) JERR(r, "strftime format too long");
    char out[16384];
    size_t k = fmt.n ? strftime(out, sizeof(out), fmt.p, &tm) : 0;
    lp__sb_free(r, &fmt);
    return lp__jv_str(r, out, k);
}

static void global(jr_t *r, frame_t *f, const char *name, jbuiltin_fn fn)
{
    jfunc_t *fu = lp__jfunc_new(r, JF_BUILTIN, name);
    fu->fn = fn;
    lp__jframe_set(r, f, name, lp__jv_func(fu));
}

void lp__jglobals(jr_t *r, frame_t *f);
void lp__jglobals(jr_t *r, frame_t *f)
{
    global(r, f, "range", g_range);
    global(r, f, "dict", g_dict);
    global(r, f, "namespace", g_namespace);
    global(r, f, "joiner", g_joiner);
    global(r, f, "raise_exception", g_raise_exception);
    global(r, f, "strftime_now", g_strftime_now);
}
