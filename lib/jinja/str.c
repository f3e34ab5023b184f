/* str.c - Python's str methods on the interpreter's UTF-8 strings: strip,
 * case mappings (Unicode, with the final-sigma rule of lower()), split,
 * replace, find, and both formatting languages: "%" and str.format. */
#include "jinja-internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static jv with_flags(jv v, uint8_t f)
{
    v.f = f;
    return v;
}

static jstr_t *need_str(jr_t *r, jv v, const char *what)
{
    if (v.t != JT_STR) JERR(r, "%s must be str, not %s", what, lp__jtype_name(v));
    return v.u.s;
}

/* ---- strip ------------------------------------------------------------------------ */

static bool in_set(const char *set, size_t n, uint32_t cp)
{
    for (size_t i = 0; i < n;)
        if (lp__u8_next(set, n, &i) == cp) return true;
    return false;
}

jv lp__jstr_strip(jr_t *r, jv sv, jv chars, int which)
{
    jstr_t *s = sv.u.s;
    bool ws = chars.t == JT_NONE || jmissing(chars);
    if (!ws && chars.t != JT_STR) JERR(r, "strip arg must be None or str");
    const char *set = ws ? NULL : chars.u.s->p;
    size_t setn = ws ? 0 : chars.u.s->len;
    size_t a = 0, b = s->len;
    if (which & 1) {
        while (a < b) {
            size_t j = a;
            uint32_t cp = lp__u8_next(s->p, s->len, &j);
            if (ws ? !lp__py_isspace(cp) : !in_set(set, setn, cp)) break;
            a = j;
        }
    }
    if (which & 2) {
        while (b > a) {
            size_t k = b - 1;
            while (k > a && ((unsigned char)s->p[k] & 0xc0) == 0x80) k--;
            size_t j = k;
            uint32_t cp = lp__u8_next(s->p, s->len, &j);
            if (ws ? !lp__py_isspace(cp) : !in_set(set, setn, cp)) break;
            b = k;
        }
    }
    if (a == 0 && b == s->len) return lp__jref(sv);
    return with_flags(lp__jv_str(r, s->p + a, b - a), sv.f);
}

/* ---- case ------------------------------------------------------------------------- */

static void put_case(jr_t *r, sb_t *b, uint32_t cp, int which)
{
    uint32_t o[3];
    int k = lp__py_case_map(cp, which, o);
    for (int i = 0; i < k; i++) lp__sb_cp(r, b, o[i]);
}

/* Python's handle_capital_sigma: U+03A3 lowers to a final sigma after a
 * cased letter (case-ignorables skipped) and not before one. */
static uint32_t sigma(const char *s, size_t n, size_t at, size_t after)
{
    size_t j = at;
    uint32_t c = 0;
    bool found = false;
    while (j > 0) {
        size_t k = j - 1;
        while (k > 0 && ((unsigned char)s[k] & 0xc0) == 0x80) k--;
        size_t q = k;
        c = lp__u8_next(s, n, &q);
        j = k;
        if (!(lp__py_flags(c) & LP_PY_CASE_IGNORABLE)) {
            found = true;
            break;
        }
    }
    bool final = found && (lp__py_flags(c) & LP_PY_CASED);
    if (final) {
        size_t q = after;
        while (q < n) {
            c = lp__u8_next(s, n, &q);
            if (!(lp__py_flags(c) & LP_PY_CASE_IGNORABLE)) {
                if (lp__py_flags(c) & LP_PY_CASED) final = false;
                break;
            }
        }
    }
    return final ? 0x3c2 : 0x3c3;
}

static void lower_into(jr_t *r, sb_t *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t at = i;
        uint32_t cp = lp__u8_next(s, n, &i);
        if (cp < 0x80) {
            lp__sb_putc(r, b, (char)(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp));
        } else if (cp == 0x3a3)
            lp__sb_cp(r, b, sigma(s, n, at, i));
        else
            put_case(r, b, cp, 2);
    }
}

jv lp__jstr_case(jr_t *r, jv sv, int which)
{
    jstr_t *s = sv.u.s;
    sb_t b = {0};
    const char *p = s->p;
    size_t n = s->len;
    lp__jstep(r, n / 16);
    switch (which) {
    case 1: /* upper */
        for (size_t i = 0; i < n;) {
            uint32_t cp = lp__u8_next(p, n, &i);
            if (cp < 0x80) lp__sb_putc(r, &b, (char)(cp >= 'a' && cp <= 'z' ? cp - 32 : cp));
            else put_case(r, &b, cp, 1);
        }
        break;
    case 2: lower_into(r, &b, p, n); break;
    case 3: { /* capitalize: the first in title case, the rest lower */
        size_t i = 0;
        if (n) {
            uint32_t cp = lp__u8_next(p, n, &i);
            put_case(r, &b, cp, 3);
        }
        /* lower the rest, with the sigma rule seeing the whole string */
        for (size_t j = i; j < n;) {
            size_t at = j;
            uint32_t cp = lp__u8_next(p, n, &j);
            if (cp == 0x3a3) lp__sb_cp(r, &b, sigma(p, n, at, j));
            else put_case(r, &b, cp, 2);
        }
        break;
    }
    case 4: { /* jinja's title filter: words split at runs of [-\s({[<]; each
               * word's first character upper, the rest lower (as a string) */
        size_t i = 0;
        while (i < n) {
            size_t j = i;
            uint32_t cp = lp__u8_next(p, n, &j);
            bool sep = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || lp__py_isspace(cp);
            if (sep) {
                lp__sb_put(r, &b, p + i, j - i);
                i = j;
                continue;
            }
            put_case(r, &b, cp, 1);
            size_t e = j;
            while (e < n) {
                size_t k = e;
                uint32_t c2 = lp__u8_next(p, n, &k);
                if (c2 == '-' || c2 == '(' || c2 == '{' || c2 == '[' || c2 == '<' || lp__py_isspace(c2)) break;
                e = k;
            }
            lower_into(r, &b, p + j, e - j);
            i = e;
        }
        break;
    }
    case 5: { /* str.title */
        bool prev_cased = false;
        for (size_t i = 0; i < n;) {
            size_t at = i;
            uint32_t cp = lp__u8_next(p, n, &i);
            if (prev_cased && cp == 0x3a3) lp__sb_cp(r, &b, sigma(p, n, at, i));
            else put_case(r, &b, cp, prev_cased ? 2 : 3);
            prev_cased = lp__py_flags(cp) & LP_PY_CASED;
        }
        break;
    }
    case 6: /* swapcase */
        for (size_t i = 0; i < n;) {
            size_t at = i;
            uint32_t cp = lp__u8_next(p, n, &i);
            uint32_t f = lp__py_flags(cp);
            if (cp == 0x3a3) lp__sb_cp(r, &b, sigma(p, n, at, i));
            else put_case(r, &b, cp, f & LP_PY_UPPER ? 2 : f & LP_PY_LOWER ? 1 : 0);
        }
        break;
    }
    return with_flags(lp__jv_sb(r, &b), sv.f);
}

/* ---- replace, split ----------------------------------------------------------------- */

static void put_maybe_escaped(jr_t *r, sb_t *b, jv v, bool markup)
{
    if (markup && !(v.f & JF_MARKUP)) lp__jescape(r, b, v.u.s->p, v.u.s->len);
    else lp__sb_put(r, b, v.u.s->p, v.u.s->len);
}

jv lp__jstr_replace(jr_t *r, jv sv, jv old, jv new_, int64_t count)
{
    jstr_t *s = sv.u.s;
    need_str(r, old, "replace() argument 1");
    need_str(r, new_, "replace() argument 2");
    bool markup = sv.f & JF_MARKUP;
    sb_t b = {0};
    const char *o = old.u.s->p;
    size_t on = old.u.s->len;
    if (count < 0) count = INT64_MAX;
    if (!on) {
        /* between every character, and at both ends */
        size_t i = 0;
        int64_t done = 0;
        if (done < count) {
            put_maybe_escaped(r, &b, new_, markup);
            done++;
        }
        while (i < s->len) {
            size_t j = i;
            lp__u8_next(s->p, s->len, &j);
            lp__sb_put(r, &b, s->p + i, j - i);
            i = j;
            if (done < count) {
                put_maybe_escaped(r, &b, new_, markup);
                done++;
            }
            lp__jstep(r, 1);
        }
        return with_flags(lp__jv_sb(r, &b), sv.f);
    }
    size_t i = 0;
    int64_t done = 0;
    while (i < s->len && done < count) {
        const char *hit = memmem(s->p + i, s->len - i, o, on);
        if (!hit) break;
        size_t at = (size_t)(hit - s->p);
        lp__sb_put(r, &b, s->p + i, at - i);
        put_maybe_escaped(r, &b, new_, markup);
        i = at + on;
        done++;
        lp__jstep(r, 1);
    }
    if (!done) return lp__jref(sv);
    lp__sb_put(r, &b, s->p + i, s->len - i);
    if (!b.p) lp__sb_put(r, &b, "", 0);
    return with_flags(lp__jv_sb(r, &b), sv.f);
}

typedef struct pieces {
    jv *v;
    size_t n, cap;
    jobj_t *obj;
} pieces_t;

static void piece(jr_t *r, pieces_t *p, const char *s, size_t n, uint8_t f)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 8;
        p->v = lp__jraw_grow(r, &p->obj, cap * sizeof(jv));
        p->cap = cap;
    }
    p->v[p->n++] = with_flags(lp__jv_str(r, s, n), f);
    lp__jstep(r, 1);
}

static jv pieces_list(jr_t *r, pieces_t *p, bool reverse)
{
    jlist_t *l = lp__jlist_new(r, p->n, JL_LIST);
    for (size_t i = 0; i < p->n; i++) l->v[i] = p->v[reverse ? p->n - 1 - i : i];
    if (p->obj) lp__jfree_obj(r, p->obj);
    return lp__jv_list(l);
}

/* previous code point start before byte b */
static size_t prev_cp(const char *s, size_t b)
{
    size_t k = b - 1;
    while (k > 0 && ((unsigned char)s[k] & 0xc0) == 0x80) k--;
    return k;
}

jv lp__jstr_split(jr_t *r, jv sv, jv sep, int64_t maxsplit, bool right)
{
    jstr_t *s = sv.u.s;
    pieces_t p = {0};
    if (maxsplit < 0) maxsplit = INT64_MAX;
    const char *str = s->p;
    size_t n = s->len;
    if (sep.t == JT_NONE || jmissing(sep)) {
        if (!right) {
            size_t i = 0;
            int64_t done = 0;
            for (;;) {
                while (i < n) {
                    size_t j = i;
                    if (!lp__py_isspace(lp__u8_next(str, n, &j))) break;
                    i = j;
                }
                if (i >= n) break;
                if (done == maxsplit) {
                    piece(r, &p, str + i, n - i, sv.f);
                    break;
                }
                size_t st = i;
                while (i < n) {
                    size_t j = i;
                    if (lp__py_isspace(lp__u8_next(str, n, &j))) break;
                    i = j;
                }
                piece(r, &p, str + st, i - st, sv.f);
                done++;
            }
            return pieces_list(r, &p, false);
        }
        size_t e = n;
        int64_t done = 0;
        for (;;) {
            while (e > 0) {
                size_t k = prev_cp(str, e), q = k;
                if (!lp__py_isspace(lp__u8_next(str, n, &q))) break;
                e = k;
            }
            if (e == 0) break;
            if (done == maxsplit) {
                piece(r, &p, str, e, sv.f);
                break;
            }
            size_t st = e;
            while (st > 0) {
                size_t k = prev_cp(str, st), q = k;
                if (lp__py_isspace(lp__u8_next(str, n, &q))) break;
                st = k;
            }
            piece(r, &p, str + st, e - st, sv.f);
            e = st;
            done++;
        }
        return pieces_list(r, &p, true);
    }
    jstr_t *sp = need_str(r, sep, "separator");
    if (!sp->len) JERR(r, "empty separator");
    if (!right) {
        size_t i = 0;
        int64_t done = 0;
        while (done < maxsplit) {
            const char *hit = memmem(str + i, n - i, sp->p, sp->len);
            if (!hit) break;
            size_t at = (size_t)(hit - str);
            piece(r, &p, str + i, at - i, sv.f);
            i = at + sp->len;
            done++;
        }
        piece(r, &p, str + i, n - i, sv.f);
        return pieces_list(r, &p, false);
    }
    size_t e = n;
    int64_t done = 0;
    while (done < maxsplit && e >= sp->len) {
        size_t at = SIZE_MAX;
        for (size_t k = e - sp->len + 1; k-- > 0;)
            if (!memcmp(str + k, sp->p, sp->len)) {
                at = k;
                break;
            }
        if (at == SIZE_MAX) break;
        piece(r, &p, str + at + sp->len, e - at - sp->len, sv.f);
        e = at;
        done++;
    }
    piece(r, &p, str, e, sv.f);
    return pieces_list(r, &p, true);
}

bool lp__jstr_startswith(jr_t *r, jv sv, jv prefix, bool end)
{
    jstr_t *s = sv.u.s;
    if (prefix.t == JT_LIST && prefix.u.l->kind == JL_TUPLE) {
        for (size_t i = 0; i < prefix.u.l->n; i++)
            if (lp__jstr_startswith(r, sv, prefix.u.l->v[i], end)) return true;
        return false;
    }
    if (prefix.t != JT_STR)
        JERR(r, "%s first arg must be str or a tuple of str, not %s", end ? "endswith" : "startswith",
             lp__jtype_name(prefix));
    jstr_t *p = prefix.u.s;
    if (p->len > s->len) return false;
    return !memcmp(end ? s->p + s->len - p->len : s->p, p->p, p->len);
}

/* ---- "%" formatting --------------------------------------------------------------- */

/* one more decimal digit of a width or precision, saturating (too big is
 * refused afterwards) */
static int64_t digit(int64_t v, char c) { return v > 100000000 ? v : v * 10 + (c - '0'); }

static void pad(jr_t *r, sb_t *b, const char *s, size_t n, int64_t width, bool left, char fill)
{
    int64_t len = (int64_t)lp__u8_count(s, n);
    if (!left)
        for (int64_t i = len; i < width; i++) lp__sb_putc(r, b, fill);
    lp__sb_put(r, b, s, n);
    if (left)
        for (int64_t i = len; i < width; i++) lp__sb_putc(r, b, ' ');
}

static bool as_double(jv v, double *d)
{
    if (v.t == JT_FLOAT) *d = v.u.d;
    else if (v.t == JT_INT) *d = (double)v.u.i;
    else if (v.t == JT_BOOL) *d = v.u.b;
    else return false;
    return true;
}

jv lp__jstr_format(jr_t *r, jv fmtv, jv args)
{
    jstr_t *fmt = fmtv.u.s;
    const char *f = fmt->p;
    size_t n = fmt->len;
    jlist_t *tuple = args.t == JT_LIST && args.u.l->kind == JL_TUPLE ? args.u.l : NULL;
    jdict_t *map = args.t == JT_DICT ? args.u.dc : NULL;
    size_t ai = 0, an = tuple ? tuple->n : 1;
    bool used_map = false;
    sb_t b = {0};
    lp__sb_put(r, &b, "", 0);
    for (size_t i = 0; i < n;) {
        if (f[i] != '%') {
            size_t j = i;
            while (j < n && f[j] != '%') j++;
            lp__sb_put(r, &b, f + i, j - i);
            i = j;
            continue;
        }
        i++;
        if (i >= n) JERR(r, "incomplete format");
        jv val = jv_undef();
        bool have = false;
        if (f[i] == '(') {
            if (!map) JERR(r, "format requires a mapping");
            size_t j = i + 1;
            int depth = 1;
            while (j < n && depth) {
                if (f[j] == '(') depth++;
                else if (f[j] == ')') depth--;
                j++;
            }
            if (depth) JERR(r, "incomplete format key");
            jv key = lp__jv_str(r, f + i + 1, j - i - 2);
            jv *x = lp__jdict_get(r, map, key);
            if (!x) JERR(r, "KeyError: '%s'", key.u.s->p);
            lp__jdrop(r, key);
            val = *x;
            have = true;
            used_map = true;
            i = j;
        }
        bool left = false, plus = false, space = false, alt = false, zero = false;
        for (; i < n && strchr("-+ #0", f[i]) && f[i]; i++) {
            if (f[i] == '-') left = true;
            else if (f[i] == '+') plus = true;
            else if (f[i] == ' ') space = true;
            else if (f[i] == '#') alt = true;
            else zero = true;
        }
        int64_t width = -1, prec = -1;
        if (i < n && f[i] == '*') {
            if (!tuple || ai >= an) JERR(r, "not enough arguments for format string");
            jv w = tuple->v[ai++];
            if (w.t != JT_INT) JERR(r, "* wants int");
            width = w.u.i;
            if (width < 0) {
                left = true;
                width = -width;
            }
            i++;
        } else
            for (; i < n && f[i] >= '0' && f[i] <= '9'; i++) width = digit(width < 0 ? 0 : width, f[i]);
        if (i < n && f[i] == '.') {
            i++;
            prec = 0;
            if (i < n && f[i] == '*') {
                if (!tuple || ai >= an) JERR(r, "not enough arguments for format string");
                jv w = tuple->v[ai++];
                if (w.t != JT_INT) JERR(r, "* wants int");
                prec = w.u.i < 0 ? 0 : w.u.i;
                i++;
            } else
                for (; i < n && f[i] >= '0' && f[i] <= '9'; i++) prec = digit(prec, f[i]);
        }
        if (width > 100000 || prec > 100000) JERR(r, "width or precision too big");
        if (i < n && (f[i] == 'h' || f[i] == 'l' || f[i] == 'L')) i++; /* one length modifier, ignored */
        if (i >= n) JERR(r, "incomplete format");
        char conv = f[i++];
        if (conv == '%') {
            lp__sb_putc(r, &b, '%');
            continue;
        }
        if (!have) {
            if (tuple) {
                if (ai >= an) JERR(r, "not enough arguments for format string");
                val = tuple->v[ai++];
            } else {
                if (ai >= 1) JERR(r, "not enough arguments for format string");
                val = args;
                ai++;
            }
        }
        char nb[512], spec[32];
        sb_t t = {0};
        switch (conv) {
        case 's': case 'r': case 'a':
            if (conv == 's') lp__jstr_of(r, &t, val);
            else lp__jrepr(r, &t, val);
            if (prec >= 0 && t.n) {
                size_t cut = lp__u8_offset(t.p, t.n, (size_t)prec);
                t.n = cut;
            }
            pad(r, &b, t.p ? t.p : "", t.n, width, left, ' ');
            break;
        case 'd': case 'i': case 'u': case 'x': case 'X': case 'o': {
            int64_t iv;
            double d;
            if (val.t == JT_INT) iv = val.u.i;
            else if (val.t == JT_BOOL) iv = val.u.b;
            else if ((conv == 'd' || conv == 'i' || conv == 'u') && val.t == JT_FLOAT) {
                d = val.u.d;
                if (!isfinite(d)) JERR(r, "cannot convert float %s to integer", isnan(d) ? "NaN" : "infinity");
                iv = (int64_t)d;
            } else if (conv == 'd' || conv == 'i' || conv == 'u')
                JERR(r, "%%%c format: a real number is required, not %s", conv, lp__jtype_name(val));
            else
                JERR(r, "%%%c format: an integer is required, not %s", conv, lp__jtype_name(val));
            char cc = conv == 'i' || conv == 'u' ? 'd' : conv;
            bool negv = iv < 0;
            uint64_t mag = negv ? (uint64_t)0 - (uint64_t)iv : (uint64_t)iv;
            char digits[80];
            if (cc == 'd') snprintf(digits, sizeof(digits), "%" PRIu64, mag);
            else if (cc == 'x') snprintf(digits, sizeof(digits), "%" PRIx64, mag);
            else if (cc == 'X') snprintf(digits, sizeof(digits), "%" PRIX64, mag);
            else snprintf(digits, sizeof(digits), "%" PRIo64, mag);
            char prefix[8] = "";
            size_t pk = 0;
            if (negv) prefix[pk++] = '-';
            else if (plus) prefix[pk++] = '+';
            else if (space) prefix[pk++] = ' ';
            if (alt && cc != 'd') {
                prefix[pk++] = '0';
                prefix[pk++] = cc == 'o' ? 'o' : cc;
            }
            prefix[pk] = 0;
            size_t dl = strlen(digits);
            int64_t zeros = prec > (int64_t)dl ? prec - (int64_t)dl : 0;
            int64_t total = (int64_t)pk + zeros + (int64_t)dl;
            if (zero && !left && width > total) zeros += width - total, total = width;
            if (!left)
                for (int64_t k = total; k < width; k++) lp__sb_putc(r, &b, ' ');
            lp__sb_puts(r, &b, prefix);
            for (int64_t k = 0; k < zeros; k++) lp__sb_putc(r, &b, '0');
            lp__sb_puts(r, &b, digits);
            if (left)
                for (int64_t k = total; k < width; k++) lp__sb_putc(r, &b, ' ');
            break;
        }
        case 'e': case 'E': case 'f': case 'F': case 'g': case 'G': {
            double d;
            if (!as_double(val, &d))
                JERR(r, "must be real number, not %s", lp__jtype_name(val));
            snprintf(spec, sizeof(spec), "%%%s%s%s%s%s%s.%d%c", left ? "-" : "", plus ? "+" : "", space ? " " : "",
                     alt ? "#" : "", zero ? "0" : "", width >= 0 ? "*" : "", (int)(prec < 0 ? 6 : prec), conv);
            if (width >= 0) snprintf(nb, sizeof(nb), spec, (int)width, d);
            else snprintf(nb, sizeof(nb), spec, d);
            /* C writes inf/nan; Python the same lower case, "INF" for E/F/G */
            lp__sb_puts(r, &b, nb);
            break;
        }
        case 'c': {
            uint32_t cp;
            if (val.t == JT_INT) {
                if (val.u.i < 0 || val.u.i > 0x10ffff) JERR(r, "%%c arg not in range(0x110000)");
                cp = (uint32_t)val.u.i;
            } else if (val.t == JT_STR && lp__jstr_ncp(val.u.s) == 1) {
                size_t q = 0;
                cp = lp__u8_next(val.u.s->p, val.u.s->len, &q);
            } else
                JERR(r, "%%c requires int or char");
            char c4[4];
            size_t k = lp_utf8_encode(cp, c4);
            pad(r, &b, c4, k, width, left, ' ');
            break;
        }
        default: JERR(r, "unsupported format character '%c' (0x%x)", conv, (unsigned char)conv);
        }
        lp__sb_free(r, &t);
    }
    if (tuple && ai < an) JERR(r, "not all arguments converted during string formatting");
    if (!tuple && !map && ai == 0) JERR(r, "not all arguments converted during string formatting");
    (void)used_map;
    return with_flags(lp__jv_sb(r, &b), fmtv.f);
}

/* ---- str.format ------------------------------------------------------------------ */

/* Format one value by a format spec (Python's mini-language, the common
 * part: fill, align, sign, #, 0, width, ",", precision, type). */
static void format_spec(jr_t *r, sb_t *b, jv v, const char *spec, size_t sn)
{
    /* format(x, ""): str(x), for every type (True stays True) */
    if (!sn) {
        lp__jstr_of(r, b, v);
        return;
    }
    if (v.t != JT_STR && v.t != JT_INT && v.t != JT_BOOL && v.t != JT_FLOAT)
        JERR(r, "unsupported format string passed to %s.__format__", lp__jtype_name(v));
    char fill = ' ', align = 0, sign = '-', type = 0;
    bool alt = false, zero = false, comma = false;
    int64_t width = -1, prec = -1;
    size_t i = 0;
    if (sn >= 2 && strchr("<>=^", spec[1]) && spec[1]) {
        fill = spec[0];
        align = spec[1];
        i = 2;
    } else if (sn >= 1 && strchr("<>=^", spec[0]) && spec[0]) {
        align = spec[0];
        i = 1;
    }
    if (i < sn && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) sign = spec[i++];
    if (i < sn && spec[i] == '#') alt = true, i++;
    if (i < sn && spec[i] == '0') zero = true, i++;
    while (i < sn && spec[i] >= '0' && spec[i] <= '9') width = digit(width < 0 ? 0 : width, spec[i++]);
    if (i < sn && spec[i] == ',') comma = true, i++;
    if (i < sn && spec[i] == '.') {
        i++;
        if (i >= sn || spec[i] < '0' || spec[i] > '9') JERR(r, "Format specifier missing precision");
        prec = 0;
        while (i < sn && spec[i] >= '0' && spec[i] <= '9') prec = digit(prec, spec[i++]);
    }
    if (i < sn) type = spec[i++];
    if (i < sn) JERR(r, "Invalid format specifier");
    if (width > 100000 || prec > 100000) JERR(r, "width or precision too big");
    if (zero && !align) {
        fill = '0';
        align = '=';
    }
    sb_t body = {0};
    char sgn[2] = {0, 0};
    bool numeric = v.t == JT_INT || v.t == JT_BOOL || v.t == JT_FLOAT;
    if (v.t == JT_STR || (!numeric && (!type || type == 's'))) {
        if (type && type != 's') JERR(r, "Unknown format code '%c' for object of type 'str'", type);
        sb_t t = {0};
        lp__jstr_of(r, &t, v);
        size_t n = t.n;
        if (prec >= 0) n = lp__u8_offset(t.p ? t.p : "", t.n, (size_t)prec);
        lp__sb_put(r, &body, t.p ? t.p : "", n);
        lp__sb_free(r, &t);
        if (!align) align = '<';
    } else if (numeric) {
        char nb[400];
        double d = v.t == JT_FLOAT ? v.u.d : v.t == JT_INT ? (double)v.u.i : v.u.b;
        bool is_int = v.t != JT_FLOAT;
        if (is_int && (!type || type == 'd' || type == 'n')) {
            int64_t iv = v.t == JT_INT ? v.u.i : v.u.b;
            if (prec >= 0) JERR(r, "Precision not allowed in integer format specifier");
            snprintf(nb, sizeof(nb), "%" PRIu64, iv < 0 ? (uint64_t)0 - (uint64_t)iv : (uint64_t)iv);
            if (iv < 0) sgn[0] = '-';
        } else if (is_int && strchr("xXob", type)) {
            int64_t iv = v.t == JT_INT ? v.u.i : v.u.b;
            uint64_t mag = iv < 0 ? (uint64_t)0 - (uint64_t)iv : (uint64_t)iv;
            if (type == 'b') {
                char t[70];
                int k = 0;
                do t[k++] = (char)('0' + (mag & 1)); while (mag >>= 1);
                size_t o = 0;
                if (alt) nb[o++] = '0', nb[o++] = 'b';
                while (k) nb[o++] = t[--k];
                nb[o] = 0;
            } else
                snprintf(nb, sizeof(nb), type == 'x' ? (alt ? "0x%" PRIx64 : "%" PRIx64)
                                         : type == 'X' ? (alt ? "0X%" PRIX64 : "%" PRIX64)
                                                       : (alt ? "0o%" PRIo64 : "%" PRIo64), mag);
            if (iv < 0) sgn[0] = '-';
        } else if (type == 'c' && is_int) {
            int64_t iv = v.t == JT_INT ? v.u.i : v.u.b;
            if (iv < 0 || iv > 0x10ffff) JERR(r, "%%c arg not in range(0x110000)");
            nb[lp_utf8_encode((uint32_t)iv, nb)] = 0;
        } else {
            if (type && !strchr("eEfFgG%n", type))
                JERR(r, "Unknown format code '%c' for object of type '%s'", type, lp__jtype_name(v));
            if (d < 0 || (d == 0 && signbit(d))) sgn[0] = '-';
            double m = fabs(d);
            if (!type) {
                if (prec < 0) {
                    if (is_int) snprintf(nb, sizeof(nb), "%.0f", m);
                    else lp__jfloat_repr(nb, sizeof(nb), m);
                } else {
                    /* like 'g', but a fixed-point result keeps one decimal */
                    snprintf(nb, sizeof(nb), "%.*g", (int)(prec ? prec : 1), m);
                    if (!strpbrk(nb, ".e") && isfinite(m) && !is_int) strcat(nb, ".0");
                }
            } else if (type == '%') {
                snprintf(nb, sizeof(nb), "%.*f%%", (int)(prec < 0 ? 6 : prec), m * 100);
            } else {
                char f2[16];
                snprintf(f2, sizeof(f2), "%%%s.*%c", alt ? "#" : "", type == 'n' ? 'g' : type);
                snprintf(nb, sizeof(nb), f2, (int)(prec < 0 ? 6 : prec), m);
            }
        }
        if (!sgn[0] && (sign == '+' || sign == ' ')) sgn[0] = sign;
        if (comma) {
            /* group the integer digits in threes */
            char *dot = strpbrk(nb, ".e%");
            size_t intlen = dot ? (size_t)(dot - nb) : strlen(nb);
            char g[400];
            size_t o = 0;
            for (size_t k = 0; k < intlen; k++) {
                if (k && (intlen - k) % 3 == 0) g[o++] = ',';
                g[o++] = nb[k];
            }
            snprintf(g + o, sizeof(g) - o, "%s", nb + intlen);
            memcpy(nb, g, sizeof(nb) - 1);
            nb[sizeof(nb) - 1] = 0;
        }
        lp__sb_puts(r, &body, nb);
        if (!align) align = '>';
    } else
        JERR(r, "unsupported format string passed to %s.__format__", lp__jtype_name(v));
    int64_t len = (int64_t)lp__u8_count(body.p ? body.p : "", body.n) + (sgn[0] ? 1 : 0);
    int64_t padn = width > len ? width - len : 0;
    if (align == '=') {
        if (sgn[0]) lp__sb_putc(r, b, sgn[0]);
        for (int64_t k = 0; k < padn; k++) lp__sb_putc(r, b, fill);
        lp__sb_put(r, b, body.p ? body.p : "", body.n);
    } else {
        int64_t before = align == '>' ? padn : align == '^' ? padn / 2 : 0;
        for (int64_t k = 0; k < before; k++) lp__sb_putc(r, b, fill);
        if (sgn[0]) lp__sb_putc(r, b, sgn[0]);
        lp__sb_put(r, b, body.p ? body.p : "", body.n);
        for (int64_t k = before; k < padn; k++) lp__sb_putc(r, b, fill);
    }
    lp__sb_free(r, &body);
}

/* str.format through the sandbox's formatter */
typedef struct fstate {
    jargs_t *a;
    jdict_t *map;     /* format_map's mapping, or NULL */
    size_t auto_idx;
    bool manual, autonum;
} fstate_t;

static void vformat(jr_t *r, sb_t *out, const char *f, size_t n, fstate_t *st, int depth)
{
    jargs_t *a = st->a;
    sb_t b = {0};
    lp__sb_put(r, &b, "", 0);
    if (depth > 2) JERR(r, "Max string recursion exceeded");
    for (size_t i = 0; i < n;) {
        char c = f[i];
        if (c == '}') {
            if (i + 1 < n && f[i + 1] == '}') {
                lp__sb_putc(r, &b, '}');
                i += 2;
                continue;
            }
            JERR(r, "Single '}' encountered in format string");
        }
        if (c != '{') {
            lp__sb_putc(r, &b, c);
            i++;
            continue;
        }
        if (i + 1 < n && f[i + 1] == '{') {
            lp__sb_putc(r, &b, '{');
            i += 2;
            continue;
        }
        size_t j = i + 1;
        int depth = 1;
        while (j < n && depth) {
            if (f[j] == '{') depth++;
            else if (f[j] == '}') depth--;
            if (depth) j++;
        }
        if (j >= n) JERR(r, "expected '}' before end of string");
        const char *field = f + i + 1;
        size_t fl = j - i - 1;
        i = j + 1;
        size_t k = 0;
        while (k < fl && field[k] != '.' && field[k] != '[' && field[k] != '!' && field[k] != ':') k++;
        size_t name_end = 0; /* string.Formatter numbers only a wholly empty field name */
        while (name_end < fl && field[name_end] != '!' && field[name_end] != ':') name_end++;
        jv v;
        if (k == 0 && name_end > 0) JERR(r, "KeyError: ''");
        if (k == 0) {
            if (st->manual) JERR(r, "cannot switch from manual field specification to automatic field numbering");
            st->autonum = true;
            if (st->auto_idx >= a->n)
                JERR(r, "Replacement index %zu out of range for positional args tuple", st->auto_idx);
            v = lp__jref(a->v[st->auto_idx++]);
        } else if (field[0] >= '0' && field[0] <= '9') {
            if (st->autonum) JERR(r, "cannot switch from automatic field numbering to manual field specification");
            st->manual = true;
            size_t idx = 0;
            for (size_t q = 0; q < k; q++) {
                if (field[q] < '0' || field[q] > '9') JERR(r, "invalid format field");
                idx = idx * 10 + (size_t)(field[q] - '0');
                if (idx > 1000000) JERR(r, "invalid format field");
            }
            if (idx >= a->n) JERR(r, "Replacement index %zu out of range for positional args tuple", idx);
            v = lp__jref(a->v[idx]);
        } else if (st->map) {
            jv *x = lp__jdict_get_str(st->map, field, k);
            if (!x) JERR(r, "KeyError: '%.*s'", (int)k, field);
            v = lp__jref(*x);
        } else {
            size_t q = 0;
            while (q < a->nk && (strlen(a->kn[q]) != k || memcmp(a->kn[q], field, k))) q++;
            if (q == a->nk) JERR(r, "KeyError: '%.*s'", (int)k, field);
            v = lp__jref(a->kv[q]);
        }
        /* .attr and [key] */
        while (k < fl && (field[k] == '.' || field[k] == '[')) {
            if (field[k] == '.') {
                size_t s = ++k;
                while (k < fl && field[k] != '.' && field[k] != '[' && field[k] != '!' && field[k] != ':') k++;
                if (k == s) JERR(r, "Empty attribute in format string");
                jv nv = lp__jgetattr(r, v, field + s, k - s);
                lp__jdrop(r, v);
                v = nv;
            } else {
                size_t s = ++k;
                while (k < fl && field[k] != ']') k++;
                if (k >= fl) JERR(r, "Missing ']' in format string");
                jv key;
                bool digits = k > s;
                for (size_t q = s; q < k; q++) digits = digits && field[q] >= '0' && field[q] <= '9';
                if (digits) key = jv_int(strtoll(field + s, NULL, 10));
                else key = lp__jv_str(r, field + s, k - s);
                jv nv = lp__jgetitem(r, v, key);
                lp__jdrop(r, key);
                lp__jdrop(r, v);
                v = nv;
                k++;
            }
        }
        char conv = 0;
        if (k < fl && field[k] == '!') {
            if (k + 1 >= fl) JERR(r, "end of string while looking for conversion specifier");
            conv = field[k + 1];
            k += 2;
            if (conv != 'r' && conv != 's' && conv != 'a') JERR(r, "Unknown conversion specifier %c", conv);
        }
        const char *spec = "";
        size_t sn = 0;
        if (k < fl && field[k] == ':') {
            spec = field + k + 1;
            sn = fl - k - 1;
        } else if (k < fl)
            JERR(r, "expected ':' after conversion specifier");
        sb_t nested = {0};
        if (memchr(spec, '{', sn)) {
            vformat(r, &nested, spec, sn, st, depth + 1);
            spec = nested.p ? nested.p : "";
            sn = nested.n;
        }
        if (conv) {
            sb_t t = {0};
            if (conv == 's') lp__jstr_of(r, &t, v);
            else lp__jrepr(r, &t, v);
            jv s = lp__jv_sb(r, &t);
            lp__jdrop(r, v);
            v = s;
        }
        if (v.t == JT_UNDEF && v.u.s && sn == 0) {
            /* str(undefined) is "" */
        }
        format_spec(r, &b, v, spec, sn);
        lp__sb_free(r, &nested);
        lp__jdrop(r, v);
    }
    lp__sb_put(r, out, b.p, b.n);
    lp__sb_free(r, &b);
}

jv lp__jstr_dot_format(jr_t *r, jv fmtv, jargs_t *a, jdict_t *map);
jv lp__jstr_dot_format(jr_t *r, jv fmtv, jargs_t *a, jdict_t *map)
{
    fstate_t st = {a, map, 0, false, false};
    sb_t b = {0};
    lp__sb_put(r, &b, "", 0);
    vformat(r, &b, fmtv.u.s->p, fmtv.u.s->len, &st, 0);
    return with_flags(lp__jv_sb(r, &b), fmtv.f);
}
