/* gr-regex.c - the regular-expression syntax tree and the pattern parser
 * (ECMA-262 syntax, as JSON Schema's "pattern" uses it). */
#include "gr-fa.h"

#include "error.h"

#include <stdio.h>

#define DEFAULT_MAX_NODES 200000u

void lp__gr_rebuf_free(gr_rebuf_t *b)
{
    for (uint32_t i = 0; i < b->sets.n; i++) lp__gr_cs_free(b->sets.v[i]);
    GR_FREE(b->sets);
    lp__gr_arena_free(&b->arena);
    b->nodes = 0;
}

gr_re_t *lp__gr_re_new(gr_rebuf_t *b, enum gr_re_kind k)
{
    uint32_t lim = b->max_nodes ? b->max_nodes : DEFAULT_MAX_NODES;
    if (b->nodes >= lim) return NULL;
    gr_re_t *r = lp__gr_zalloc(&b->arena, sizeof(*r));
    if (!r) return NULL;
    b->nodes++;
    r->kind = (uint8_t)k;
    return r;
}

gr_re_t *lp__gr_re_chars(gr_rebuf_t *b, const gr_cset_t *cs)
{
    if (!cs->n) return lp__gr_re_new(b, GR_RE_NONE);
    gr_re_t *r = lp__gr_re_new(b, GR_RE_CHARS);
    if (!r || GR_PUSH(b->sets, &r->cs)) return NULL;
    if (lp__gr_cs_union(&r->cs, cs)) return NULL;
    return r;
}

gr_re_t *lp__gr_re_char(gr_rebuf_t *b, uint32_t cp)
{
    gr_range_t rg = {cp, cp};
    gr_cset_t cs = {&rg, 1, 1};
    return lp__gr_re_chars(b, &cs);
}

gr_re_t *lp__gr_re_byte(gr_rebuf_t *b, uint8_t lo, uint8_t hi, bool count)
{
    gr_re_t *r = lp__gr_re_new(b, GR_RE_BYTES);
    if (!r) return NULL;
    r->lo = lo;
    r->hi = hi;
    r->count = count;
    return r;
}

static gr_re_t *nary(gr_rebuf_t *b, enum gr_re_kind k, gr_re_t **kids, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (!kids[i]) return NULL;
    if (n == 1) return kids[0];
    if (n == 0) return lp__gr_re_new(b, k == GR_RE_CAT ? GR_RE_EMPTY : GR_RE_NONE);
    gr_re_t *r = lp__gr_re_new(b, k);
    if (!r) return NULL;
    r->kids = lp__gr_memdup(&b->arena, kids, n * sizeof(*kids));
    if (!r->kids) return NULL;
    r->n = n;
    return r;
}

gr_re_t *lp__gr_re_cat(gr_rebuf_t *b, gr_re_t **kids, uint32_t n)
{
    return nary(b, GR_RE_CAT, kids, n);
}

gr_re_t *lp__gr_re_alt(gr_rebuf_t *b, gr_re_t **kids, uint32_t n)
{
    return nary(b, GR_RE_ALT, kids, n);
}

gr_re_t *lp__gr_re_cat2(gr_rebuf_t *b, gr_re_t *x, gr_re_t *y)
{
    gr_re_t *k[2] = {x, y};
    return nary(b, GR_RE_CAT, k, 2);
}

gr_re_t *lp__gr_re_alt2(gr_rebuf_t *b, gr_re_t *x, gr_re_t *y)
{
    gr_re_t *k[2] = {x, y};
    return nary(b, GR_RE_ALT, k, 2);
}

gr_re_t *lp__gr_re_rep(gr_rebuf_t *b, gr_re_t *x, uint32_t min, uint32_t max)
{
    if (!x) return NULL;
    if (min == 1 && max == 1) return x;
    gr_re_t *r = lp__gr_re_new(b, GR_RE_REP);
    if (!r) return NULL;
    r->kids = lp__gr_alloc(&b->arena, sizeof(*r->kids));
    if (!r->kids) return NULL;
    r->kids[0] = x;
    r->n = 1;
    r->min = min;
    r->max = max;
    return r;
}

gr_re_t *lp__gr_re_dfa(gr_rebuf_t *b, const struct gr_dfa *d)
{
    gr_re_t *r = lp__gr_re_new(b, GR_RE_DFA);
    if (r) r->dfa = d;
    return r;
}

gr_re_t *lp__gr_re_text(gr_rebuf_t *b, const char *s, size_t n)
{
    GR_VEC(gr_re_t *) k = {0};
    gr_re_t *out = NULL;
    for (size_t i = 0; i < n;) {
        size_t len;
        int32_t cp = lp__gr_utf8_next((const uint8_t *)s + i, n - i, &len);
        gr_re_t *c = cp >= 0 ? lp__gr_re_char(b, (uint32_t)cp)
                             : lp__gr_re_byte(b, (uint8_t)s[i], (uint8_t)s[i], false);
        if (!c || GR_PUSH(k, c)) goto done;
        i += len;
    }
    out = lp__gr_re_cat(b, k.v, k.n);
done:
    GR_FREE(k);
    return out;
}

gr_re_t *lp__gr_re_bytes(gr_rebuf_t *b, const char *s, size_t n)
{
    GR_VEC(gr_re_t *) k = {0};
    gr_re_t *out = NULL;
    for (size_t i = 0; i < n; i++) {
        gr_re_t *c = lp__gr_re_byte(b, (uint8_t)s[i], (uint8_t)s[i], false);
        if (!c || GR_PUSH(k, c)) goto done;
    }
    out = lp__gr_re_cat(b, k.v, k.n);
done:
    GR_FREE(k);
    return out;
}

int lp__gr_re_serialize(const gr_re_t *r, lp__gr_u32v_t *b)
{
    if (GR_RESERVE(*b, 8)) return LP_ERR(ENOMEM);
    b->v[b->n++] = r->kind;
    switch (r->kind) {
    case GR_RE_BYTES:
        b->v[b->n++] = (uint32_t)r->lo << 16 | (uint32_t)r->hi << 8 | r->count;
        return 0;
    case GR_RE_CHARS:
        if (GR_RESERVE(*b, 1 + 2 * r->cs.n)) return LP_ERR(ENOMEM);
        b->v[b->n++] = r->cs.n;
        for (uint32_t i = 0; i < r->cs.n; i++) {
            b->v[b->n++] = r->cs.r[i].lo;
            b->v[b->n++] = r->cs.r[i].hi;
        }
        return 0;
    case GR_RE_DFA: {
        /* the whole table: DFAs here come from anywhere, their identity is their content */
        const gr_dfa_t *d = r->dfa;
        size_t cells = (size_t)d->n_states * d->n_cls;
        if (GR_RESERVE(*b, 4 + 64 + cells + d->n_states + (d->cnt ? cells : 0))) return LP_ERR(ENOMEM);
        b->v[b->n++] = d->n_states;
        b->v[b->n++] = d->n_cls;
        b->v[b->n++] = d->cnt != NULL;
        for (int i = 0; i < 64; i++)
            b->v[b->n++] = (uint32_t)d->cls[4 * i] | (uint32_t)d->cls[4 * i + 1] << 8 |
                           (uint32_t)d->cls[4 * i + 2] << 16 | (uint32_t)d->cls[4 * i + 3] << 24;
        memcpy(b->v + b->n, d->next, cells * sizeof(uint32_t));
        b->n += (uint32_t)cells;
        memcpy(b->v + b->n, d->tag, d->n_states * sizeof(uint32_t));
        b->n += d->n_states;
        for (size_t i = 0; d->cnt && i < cells; i++) b->v[b->n++] = d->cnt[i];
        return 0;
    }
    default:
        break;
    }
    b->v[b->n++] = r->min;
    b->v[b->n++] = r->max;
    b->v[b->n++] = r->n;
    for (uint32_t i = 0; i < r->n; i++) {
        int rc = lp__gr_re_serialize(r->kids[i], b);
        if (rc) return rc;
    }
    return 0;
}

bool lp__gr_re_has_anchor(const gr_re_t *r)
{
    if (r->kind == GR_RE_BOL || r->kind == GR_RE_EOL) return true;
    for (uint32_t i = 0; i < r->n; i++)
        if (lp__gr_re_has_anchor(r->kids[i])) return true;
    return false;
}

/* ---- the pattern parser -------------------------------------------------------- */

typedef struct {
    gr_rebuf_t *b;
    const char *s;
    size_t n, i;
    int depth;
    int rc;
} rp_t;

static gr_re_t *rp_fail(rp_t *p, int code, const char *what)
{
    if (!p->rc) {
        p->rc = lp_error_set(code, "regex at offset %zu: %s", p->i, what);
    }
    return NULL;
}

static gr_re_t *rp_oom(rp_t *p)
{
    if (!p->rc) {
        if (p->b->nodes >= (p->b->max_nodes ? p->b->max_nodes : DEFAULT_MAX_NODES))
            p->rc = lp_error_set(LP_ERR(E2BIG), "regex: pattern too large");
        else
            p->rc = lp_error_set(LP_ERR(ENOMEM), "regex: out of memory");
    }
    return NULL;
}

static bool rp_eof(const rp_t *p) { return p->i >= p->n; }
static char rp_peek(const rp_t *p) { return p->i < p->n ? p->s[p->i] : 0; }

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One code point of UTF-8 input. */
static int32_t rp_cp(rp_t *p)
{
    size_t len;
    int32_t cp = lp__gr_utf8_next((const uint8_t *)p->s + p->i, p->n - p->i, &len);
    if (cp < 0) {
        rp_fail(p, LP_ERR(EINVAL), "invalid UTF-8");
        return -1;
    }
    p->i += len;
    return cp;
}

/* Read n hex digits (n == 0: \u{...}); -1 on error. */
static int32_t rp_hex(rp_t *p, int n)
{
    uint32_t v = 0;
    if (n == 0) {
        p->i++; /* '{' */
        int k = 0;
        while (!rp_eof(p) && rp_peek(p) != '}') {
            int h = hexval(rp_peek(p));
            if (h < 0 || ++k > 6) {
                rp_fail(p, LP_ERR(EINVAL), "bad \\u{...} escape");
                return -1;
            }
            v = v * 16 + (uint32_t)h;
            p->i++;
        }
        if (rp_eof(p) || !k || v > GR_CP_MAX) {
            rp_fail(p, LP_ERR(EINVAL), "bad \\u{...} escape");
            return -1;
        }
        p->i++;
        return (int32_t)v;
    }
    for (int k = 0; k < n; k++) {
        int h = p->i < p->n ? hexval(p->s[p->i]) : -1;
        if (h < 0) {
            rp_fail(p, LP_ERR(EINVAL), "bad hex escape");
            return -1;
        }
        v = v * 16 + (uint32_t)h;
        p->i++;
    }
    return (int32_t)v;
}

/* An escape after '\' (p->i at the letter).  Either a single code point
 * (*cp >= 0) or a class added to cls (*cp == -2).  in_class: inside [...],
 * where \b is a backspace and \B is an error. */
static int rp_escape(rp_t *p, gr_cset_t *cls, int32_t *cp, bool in_class)
{
    if (rp_eof(p)) return rp_fail(p, LP_ERR(EINVAL), "pattern ends with '\\'"), -1;
    char c = p->s[p->i++];
    *cp = -2;
    switch (c) {
    case 'd': case 'D': case 'w': case 'W': case 's': case 'S':
        if (lp__gr_cs_class(cls, c)) return rp_oom(p), -1;
        return 0;
    case 'p': case 'P': {
        if (rp_peek(p) != '{') return rp_fail(p, LP_ERR(EINVAL), "\\p needs {name}"), -1;
        size_t st = ++p->i;
        while (!rp_eof(p) && rp_peek(p) != '}') p->i++;
        if (rp_eof(p)) return rp_fail(p, LP_ERR(EINVAL), "unterminated \\p{"), -1;
        int rc = lp__gr_cs_category(cls, p->s + st, p->i - st, c == 'P');
        p->i++;
        if (rc == LP_ERR(ENOTSUP)) {
            p->i = st;
            return rp_fail(p, LP_ERR(ENOTSUP), "unsupported Unicode property (only L N Z M P S C)"), -1;
        }
        if (rc) return rp_oom(p), -1;
        return 0;
    }
    case 'b':
        if (in_class) {
            *cp = 8;
            return 0;
        }
        p->i--;
        return rp_fail(p, LP_ERR(ENOTSUP), "word boundary \\b is not supported"), -1;
    case 'B':
        p->i--;
        return rp_fail(p, LP_ERR(ENOTSUP), "\\B is not supported"), -1;
    case 'n': *cp = '\n'; return 0;
    case 'r': *cp = '\r'; return 0;
    case 't': *cp = '\t'; return 0;
    case 'f': *cp = '\f'; return 0;
    case 'v': *cp = '\v'; return 0;
    case '0':
        if (rp_peek(p) >= '0' && rp_peek(p) <= '9')
            return rp_fail(p, LP_ERR(ENOTSUP), "octal escapes are not supported"), -1;
        *cp = 0;
        return 0;
    case 'c': {
        char l = rp_peek(p);
        if (!((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z')))
            return rp_fail(p, LP_ERR(EINVAL), "bad \\c escape"), -1;
        p->i++;
        *cp = l % 32;
        return 0;
    }
    case 'x':
        *cp = rp_hex(p, 2);
        return *cp < 0 ? -1 : 0;
    case 'u':
        if (rp_peek(p) == '{') {
            *cp = rp_hex(p, 0);
        } else {
            *cp = rp_hex(p, 4);
            /* a surrogate pair written as two escapes is one character */
            if (*cp >= 0xD800 && *cp <= 0xDBFF && p->i + 6 <= p->n && p->s[p->i] == '\\' &&
                p->s[p->i + 1] == 'u') {
                size_t save = p->i;
                p->i += 2;
                int32_t lo = rp_hex(p, 4);
                if (lo >= 0xDC00 && lo <= 0xDFFF)
                    *cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
                else
                    p->i = save;
            }
        }
        if (*cp < 0) return -1;
        if (*cp >= 0xD800 && *cp <= 0xDFFF)
            return rp_fail(p, LP_ERR(ENOTSUP), "a lone surrogate is not a character"), -1;
        return 0;
    case 'k':
        p->i--;
        return rp_fail(p, LP_ERR(ENOTSUP), "backreferences are not supported"), -1;
    default:
        if (c >= '1' && c <= '9') {
            p->i--;
            return rp_fail(p, LP_ERR(ENOTSUP), "backreferences are not supported"), -1;
        }
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
            p->i--;
            return rp_fail(p, LP_ERR(ENOTSUP), "unknown escape"), -1;
        }
        p->i--;
        *cp = rp_cp(p);
        return *cp < 0 ? -1 : 0;
    }
}

static gr_re_t *rp_class(rp_t *p)
{
    /* p->i after '[' */
    bool neg = false;
    if (rp_peek(p) == '^') {
        neg = true;
        p->i++;
    }
    gr_cset_t cs = {0};
    gr_re_t *out = NULL;
    bool first = true;
    for (;;) {
        if (rp_eof(p)) {
            rp_fail(p, LP_ERR(EINVAL), "unterminated character class");
            goto done;
        }
        char c = rp_peek(p);
        if (c == ']' && !first) {
            p->i++;
            break;
        }
        if (c == ']' && first) { /* ECMA: "[]" is empty, "[^]" is everything */
            p->i++;
            break;
        }
        first = false;
        int32_t lo;
        if (c == '\\') {
            p->i++;
            if (rp_escape(p, &cs, &lo, true)) goto done;
        } else if (c == '[' && p->i + 1 < p->n && p->s[p->i + 1] == ':') {
            rp_fail(p, LP_ERR(ENOTSUP), "POSIX classes [:name:] are not supported");
            goto done;
        } else {
            lo = rp_cp(p);
            if (lo < 0) goto done;
        }
        if (lo == -2) continue; /* a class: no range can follow it */
        int32_t hi = lo;
        if (rp_peek(p) == '-' && p->i + 1 < p->n && p->s[p->i + 1] != ']') {
            p->i++;
            if (rp_peek(p) == '\\') {
                p->i++;
                if (rp_escape(p, &cs, &hi, true)) goto done;
                if (hi == -2) {
                    rp_fail(p, LP_ERR(EINVAL), "a class cannot end a range");
                    goto done;
                }
            } else {
                hi = rp_cp(p);
                if (hi < 0) goto done;
            }
            if (hi < lo) {
                rp_fail(p, LP_ERR(EINVAL), "range out of order");
                goto done;
            }
        }
        if (lp__gr_cs_add(&cs, (uint32_t)lo, (uint32_t)hi)) {
            rp_oom(p);
            goto done;
        }
    }
    if (neg && lp__gr_cs_negate(&cs)) {
        rp_oom(p);
        goto done;
    }
    out = lp__gr_re_chars(p->b, &cs);
    if (!out) rp_oom(p);
done:
    lp__gr_cs_free(&cs);
    return out;
}

static gr_re_t *rp_alt(rp_t *p);

static gr_re_t *rp_atom(rp_t *p)
{
    char c = rp_peek(p);
    gr_cset_t cs = {0};
    gr_re_t *r;
    switch (c) {
    case '(': {
        p->i++;
        if (rp_peek(p) == '?') {
            p->i++;
            char k = rp_peek(p);
            if (k == ':') {
                p->i++;
            } else if (k == '<' && p->i + 1 < p->n && p->s[p->i + 1] != '=' &&
                       p->s[p->i + 1] != '!') {
                while (!rp_eof(p) && rp_peek(p) != '>') p->i++;
                if (rp_eof(p)) return rp_fail(p, LP_ERR(EINVAL), "unterminated group name");
                p->i++;
            } else if (k == 'P' && p->i + 1 < p->n && p->s[p->i + 1] == '<') {
                while (!rp_eof(p) && rp_peek(p) != '>') p->i++;
                if (rp_eof(p)) return rp_fail(p, LP_ERR(EINVAL), "unterminated group name");
                p->i++;
            } else if (k == '=' || k == '!' || k == '<') {
                return rp_fail(p, LP_ERR(ENOTSUP), "lookaround is not supported");
            } else {
                return rp_fail(p, LP_ERR(ENOTSUP), "inline flags are not supported");
            }
        }
        if (++p->depth > 200) return rp_fail(p, LP_ERR(E2BIG), "groups nested too deep");
        r = rp_alt(p);
        p->depth--;
        if (!r) return NULL;
        if (rp_peek(p) != ')') return rp_fail(p, LP_ERR(EINVAL), "missing ')'");
        p->i++;
        return r;
    }
    case '[':
        p->i++;
        return rp_class(p);
    case '.':
        p->i++;
        if (lp__gr_cs_dot(&cs)) return rp_oom(p);
        r = lp__gr_re_chars(p->b, &cs);
        lp__gr_cs_free(&cs);
        return r ? r : rp_oom(p);
    case '^':
        p->i++;
        r = lp__gr_re_new(p->b, GR_RE_BOL);
        return r ? r : rp_oom(p);
    case '$':
        p->i++;
        r = lp__gr_re_new(p->b, GR_RE_EOL);
        return r ? r : rp_oom(p);
    case '\\': {
        p->i++;
        int32_t cp;
        if (rp_escape(p, &cs, &cp, false)) {
            lp__gr_cs_free(&cs);
            return NULL;
        }
        if (cp >= 0 && lp__gr_cs_add(&cs, (uint32_t)cp, (uint32_t)cp)) {
            lp__gr_cs_free(&cs);
            return rp_oom(p);
        }
        r = lp__gr_re_chars(p->b, &cs);
        lp__gr_cs_free(&cs);
        return r ? r : rp_oom(p);
    }
    case '*': case '+': case '?':
        return rp_fail(p, LP_ERR(EINVAL), "nothing to repeat");
    default: {
        int32_t cp = rp_cp(p);
        if (cp < 0) return NULL;
        r = lp__gr_re_char(p->b, (uint32_t)cp);
        return r ? r : rp_oom(p);
    }
    }
}

/* {n}, {n,}, {n,m} at p->i; false (and p->i unchanged) when it is not one,
 * in which case '{' is a literal (Annex B, and Python's rule). */
static bool rp_braces(rp_t *p, uint32_t *min, uint32_t *max)
{
    size_t i = p->i + 1;
    uint64_t a = 0, b;
    size_t st = i;
    while (i < p->n && p->s[i] >= '0' && p->s[i] <= '9') {
        a = a * 10 + (uint64_t)(p->s[i] - '0');
        if (a > 100000) a = 100000;
        i++;
    }
    if (i == st) return false;
    if (i < p->n && p->s[i] == '}') {
        b = a;
    } else if (i < p->n && p->s[i] == ',') {
        i++;
        st = i;
        b = 0;
        while (i < p->n && p->s[i] >= '0' && p->s[i] <= '9') {
            b = b * 10 + (uint64_t)(p->s[i] - '0');
            if (b > 100000) b = 100000;
            i++;
        }
        if (i == st) b = GR_RE_INF;
        if (i >= p->n || p->s[i] != '}') return false;
    } else {
        return false;
    }
    *min = (uint32_t)a;
    *max = (uint32_t)b;
    p->i = i + 1;
    return true;
}

static gr_re_t *rp_piece(rp_t *p)
{
    gr_re_t *a;
    if (rp_peek(p) == '{') {
        uint32_t mn, mx;
        size_t save = p->i;
        if (rp_braces(p, &mn, &mx)) {
            p->i = save;
            return rp_fail(p, LP_ERR(EINVAL), "nothing to repeat");
        }
        p->i++;
        a = lp__gr_re_char(p->b, '{');
        if (!a) return rp_oom(p);
    } else {
        a = rp_atom(p);
        if (!a) return NULL;
    }
    for (;;) {
        char c = rp_peek(p);
        uint32_t mn, mx;
        if (c == '*') {
            mn = 0, mx = GR_RE_INF;
            p->i++;
        } else if (c == '+') {
            mn = 1, mx = GR_RE_INF;
            p->i++;
        } else if (c == '?') {
            mn = 0, mx = 1;
            p->i++;
        } else if (c == '{' && rp_braces(p, &mn, &mx)) {
            if (mx < mn) return rp_fail(p, LP_ERR(EINVAL), "numbers out of order in {}");
        } else {
            break;
        }
        if (rp_peek(p) == '?') p->i++; /* lazy: the same language */
        else if (rp_peek(p) == '+')    /* possessive changes the language */
            return rp_fail(p, LP_ERR(ENOTSUP), "possessive quantifiers are not supported");
        if (a->kind == GR_RE_BOL || a->kind == GR_RE_EOL) {
            /* ^* and the like: an anchor repeated is the anchor or nothing */
            if (mn == 0) {
                a = lp__gr_re_alt2(p->b, a, lp__gr_re_new(p->b, GR_RE_EMPTY));
                if (!a) return rp_oom(p);
            }
            continue;
        }
        a = lp__gr_re_rep(p->b, a, mn, mx);
        if (!a) return rp_oom(p);
    }
    return a;
}

static gr_re_t *rp_seq(rp_t *p)
{
    GR_VEC(gr_re_t *) k = {0};
    gr_re_t *out = NULL;
    while (!rp_eof(p) && rp_peek(p) != '|' && rp_peek(p) != ')') {
        gr_re_t *a = rp_piece(p);
        if (!a) goto done;
        if (GR_PUSH(k, a)) {
            rp_oom(p);
            goto done;
        }
    }
    out = lp__gr_re_cat(p->b, k.v, k.n);
    if (!out) rp_oom(p);
done:
    GR_FREE(k);
    return out;
}

static gr_re_t *rp_alt(rp_t *p)
{
    GR_VEC(gr_re_t *) k = {0};
    gr_re_t *out = NULL;
    for (;;) {
        gr_re_t *a = rp_seq(p);
        if (!a) goto done;
        if (GR_PUSH(k, a)) {
            rp_oom(p);
            goto done;
        }
        if (rp_peek(p) != '|') break;
        p->i++;
    }
    out = lp__gr_re_alt(p->b, k.v, k.n);
    if (!out) rp_oom(p);
done:
    GR_FREE(k);
    return out;
}

int lp__gr_re_parse(gr_rebuf_t *b, const char *pat, size_t len, gr_re_t **out)
{
    rp_t p = {b, pat, len, 0, 0, 0};
    gr_re_t *r = rp_alt(&p);
    if (r && !rp_eof(&p)) {
        r = rp_fail(&p, LP_ERR(EINVAL), "unmatched ')'");
    }
    if (!r) return p.rc ? p.rc : lp_error_set(LP_ERR(ENOMEM), "regex: out of memory");
    *out = r;
    return 0;
}
