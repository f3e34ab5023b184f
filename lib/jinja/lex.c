/* lex.c - template text to tokens (see lex.h).  The rules are jinja2's
 * regular expressions (lexer.py) written out: the earliest of {{ {% {# ends
 * the text before it; "-" after the opening strips the white space before
 * it, "+" keeps it, and otherwise lstrip_blocks removes the spaces that
 * start its line (not for {{); "%}" and "#}" eat one newline (trim_blocks),
 * "-%}", "-}}", "-#}" all the white space after them. */
#include "lex.h"
#include "unicode-py.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena -------------------------------------------------------------- */

struct arena {
    struct arena *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void *lp__arena_alloc(arena_t **a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    arena_t *c = *a;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 32768 ? n : 32768;
        c = malloc(sizeof(*c) + cap);
        if (!c) return NULL;
        c->next = *a;
        c->used = 0;
        c->cap = cap;
        *a = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

void lp__arena_free(arena_t **a)
{
    arena_t *c = *a;
    while (c) {
        arena_t *nx = c->next;
        free(c);
        c = nx;
    }
    *a = NULL;
}

/* ---- errors and tokens ------------------------------------------------------ */

void lp__lex_fail(lexer_t *lx, int line, const char *fmt, ...)
{
    int k = snprintf(lx->msg, lx->msg_cap, "line %d: ", line);
    va_list ap;
    va_start(ap, fmt);
    if (k >= 0 && (size_t)k < lx->msg_cap) vsnprintf(lx->msg + k, lx->msg_cap - (size_t)k, fmt, ap);
    va_end(ap);
    longjmp(*lx->jmp, 1);
}

static char *dup(lexer_t *lx, const char *s, size_t n)
{
    char *p = lp__arena_alloc(lx->arena, n + 1);
    if (!p) lp__lex_fail(lx, 0, "out of memory");
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

static tok_t *push(lexer_t *lx, int kind, int line)
{
    if (lx->n == lx->cap) {
        size_t cap = lx->cap ? lx->cap * 2 : 256;
        tok_t *t = realloc(lx->toks, cap * sizeof(*t));
        if (!t) lp__lex_fail(lx, line, "out of memory");
        lx->toks = t;
        lx->cap = cap;
    }
    tok_t *t = &lx->toks[lx->n++];
    memset(t, 0, sizeof(*t));
    t->kind = (uint8_t)kind;
    t->line = line;
    return t;
}

/* ---- white space as Python's \s and str.isspace see it ---------------------- */

/* Length of one white-space character at s[i], or 0. */
static size_t ws_at(const char *s, size_t n, size_t i)
{
    unsigned char c = (unsigned char)s[i];
    if (c < 0x80) return lp__py_isspace(c) ? 1 : 0;
    size_t j = i;
    uint32_t cp = lp__u8_next(s, n, &j);
    return lp__py_isspace(cp) ? j - i : 0;
}

static size_t skip_ws(const char *s, size_t n, size_t i)
{
    size_t k;
    while (i < n && (k = ws_at(s, n, i))) i += k;
    return i;
}

/* Start of the white space that ends s[0..n) (str.rstrip). */
static size_t rstrip_at(const char *s, size_t n)
{
    size_t end = n;
    while (end > 0) {
        size_t b = end - 1;
        while (b > 0 && ((unsigned char)s[b] & 0xc0) == 0x80) b--;
        if (ws_at(s, n, b) != end - b) break;
        end = b;
    }
    return end;
}

static int count_nl(const char *s, size_t n)
{
    int k = 0;
    for (size_t i = 0; i < n; i++) k += s[i] == '\n';
    return k;
}

/* ---- string literals: Python's unicode_escape decoding ---------------------- */

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static void decode_string(lexer_t *lx, tok_t *t, const char *s, size_t n)
{
    /* Decoded text is at most 4 bytes per source byte (\x escapes of
     * backslash-replaced characters grow). */
    char *o = lp__arena_alloc(lx->arena, n * 4 + 1);
    if (!o) lp__lex_fail(lx, t->line, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        if (s[i] != '\\') {
            o[k++] = s[i++];
            continue;
        }
        if (i + 1 >= n) lp__lex_fail(lx, t->line, "\\ at end of string");
        char e = s[i + 1];
        i += 2;
        uint32_t cp;
        int digits = 0;
        switch (e) {
        case '\n': continue;
        case '\\': o[k++] = '\\'; continue;
        case '\'': o[k++] = '\''; continue;
        case '"': o[k++] = '"'; continue;
        case 'a': o[k++] = 7; continue;
        case 'b': o[k++] = 8; continue;
        case 'f': o[k++] = 12; continue;
        case 'n': o[k++] = '\n'; continue;
        case 'r': o[k++] = '\r'; continue;
        case 't': o[k++] = '\t'; continue;
        case 'v': o[k++] = 11; continue;
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        case 'N': lp__lex_fail(lx, t->line, "\\N{...} escapes are not supported");
        default:
            if (e >= '0' && e <= '7') {
                cp = (uint32_t)(e - '0');
                for (int d = 0; d < 2 && i < n && s[i] >= '0' && s[i] <= '7'; d++) cp = cp * 8 + (uint32_t)(s[i++] - '0');
                k += lp_utf8_encode(cp, o + k);
                continue;
            }
            /* An unknown escape stays as it is; a backslash before a
             * non-ASCII character sees its backslashreplace form. */
            o[k++] = '\\';
            if ((unsigned char)e >= 0x80) {
                size_t j = i - 1;
                cp = lp__u8_next(s, n, &j);
                i = j;
                k += (size_t)sprintf(o + k, cp < 0x100 ? "x%02x" : cp < 0x10000 ? "u%04x" : "U%08x", cp);
            } else
                o[k++] = e;
            continue;
        }
        cp = 0;
        for (int d = 0; d < digits; d++) {
            int h = i < n ? hexval(s[i]) : -1;
            if (h < 0)
                lp__lex_fail(lx, t->line, "truncated \\%cXXXX escape", e);
            cp = cp * 16 + (uint32_t)h;
            i++;
        }
        if (cp > 0x10ffff) lp__lex_fail(lx, t->line, "illegal Unicode character");
        k += lp_utf8_encode(cp, o + k);
    }
    o[k] = 0;
    t->s = o;
    t->n = k;
}

/* ---- numbers ----------------------------------------------------------------- */

static bool isd(char c) { return c >= '0' && c <= '9'; }

/* (\d+_)*\d+ at s[i]: returns the end, or i when there is none. */
static size_t digits_us(const char *s, size_t n, size_t i)
{
    size_t j = i;
    if (j >= n || !isd(s[j])) return i;
    for (;;) {
        while (j < n && isd(s[j])) j++;
        if (j + 1 < n && s[j] == '_' && isd(s[j + 1])) {
            j++;
            continue;
        }
        return j;
    }
}

/* float_re: digits, then a fraction and/or an exponent; 0 when none. */
static size_t match_float(const char *s, size_t n, size_t i)
{
    if (i > 0 && s[i - 1] == '.') return 0;
    size_t j = digits_us(s, n, i);
    if (j == i) return 0;
    size_t frac = j;
    if (j < n && s[j] == '.') {
        size_t k = digits_us(s, n, j + 1);
        if (k > j + 1) frac = k;
    }
    size_t e = frac;
    if (e < n && (s[e] == 'e' || s[e] == 'E')) {
        size_t k = e + 1;
        if (k < n && (s[k] == '+' || s[k] == '-')) k++;
        size_t m = digits_us(s, n, k);
        if (m > k) return m - i;
    }
    return frac > j ? frac - i : 0;
}

static size_t match_int(const char *s, size_t n, size_t i, int64_t *out, bool *overflow)
{
    size_t j = i;
    int base = 10;
    *overflow = false;
    if (s[j] == '0' && j + 1 < n && strchr("bBoOxX", s[j + 1]) && s[j + 1]) {
        char b = (char)(s[j + 1] | 0x20);
        base = b == 'b' ? 2 : b == 'o' ? 8 : 16;
        j += 2;
    } else if (s[j] == '0') {
        j++;
        while (j + 1 < n && (s[j] == '0' || (s[j] == '_' && s[j + 1] == '0'))) j++;
        if (j < n && s[j] == '0') j++;
        *out = 0;
        return j - i;
    } else if (!(s[j] >= '1' && s[j] <= '9'))
        return 0;
    size_t start = j;
    uint64_t v = 0;
    for (;;) {
        if (j < n && s[j] == '_' && j + 1 < n && j > start) j++;
        int d = j < n ? hexval(s[j]) : -1;
        if (d < 0 || d >= base) {
            if (j > start && s[j - 1] == '_') j--;
            break;
        }
        if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) *overflow = true;
        v = v * (uint64_t)base + (uint64_t)d;
        j++;
    }
    if (j == start) { /* "0x" alone: the 0 is an integer, x a name */
        *out = 0;
        return 1;
    }
    if (v > INT64_MAX) *overflow = true;
    *out = (int64_t)v;
    return j - i;
}

/* ---- names ------------------------------------------------------------------- */

static size_t match_name(const char *s, size_t n, size_t i)
{
    size_t j = i;
    bool first = true;
    while (j < n) {
        unsigned char c = (unsigned char)s[j];
        if (c < 0x80) {
            bool ok = c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && isd((char)c));
            if (!ok) break;
            j++;
        } else {
            size_t k = j;
            uint32_t cp = lp__u8_next(s, n, &k);
            uint32_t f = lp__py_flags(cp);
            if (!(f & (first ? LP_PY_ALPHA : LP_PY_ALNUM))) break;
            j = k;
        }
        first = false;
    }
    return j - i;
}

/* ---- operators --------------------------------------------------------------- */

static size_t match_op(const char *s, size_t n, size_t i, uint8_t *op)
{
    char c = s[i], d = i + 1 < n ? s[i + 1] : 0;
    if (c == '/' && d == '/') return *op = 'F', 2;
    if (c == '*' && d == '*') return *op = 'P', 2;
    if (c == '=' && d == '=') return *op = 'E', 2;
    if (c == '!' && d == '=') return *op = 'N', 2;
    if (c == '>' && d == '=') return *op = 'G', 2;
    if (c == '<' && d == '=') return *op = 'L', 2;
    if (c && strchr("+-/*%~[](){}><=.:|,;", c)) return *op = (uint8_t)c, 1;
    return 0;
}

/* ---- the tag states -------------------------------------------------------- */

/* Inside {{ }} or {% %}: tokens until the end tag (when brackets balance). */
static size_t lex_tag(lexer_t *lx, const char *s, size_t n, size_t i, int *line, bool block,
                      bool *line_starting)
{
    char bal[256];
    int nb = 0;
    int open_line = *line;
    for (;;) {
        if (i >= n) {
            push(lx, T_EOF, *line); /* the parser reports the unclosed tag */
            (void)open_line;
            return n;
        }
        if (nb == 0) {
            /* the end tag first: "+%}", "-%}" + white space, "%}" + "\n" */
            char c0 = s[i];
            const char *e = block ? "%}" : "}}";
            if (block && c0 == '+' && i + 3 <= n && !strncmp(s + i + 1, e, 2)) {
                push(lx, T_BLOCK_END, *line);
                *line_starting = false;
                return i + 3;
            }
            if (c0 == '-' && i + 3 <= n && !strncmp(s + i + 1, e, 2)) {
                size_t j = skip_ws(s, n, i + 3);
                push(lx, block ? T_BLOCK_END : T_VAR_END, *line);
                *line += count_nl(s + i, j - i);
                *line_starting = j > i && s[j - 1] == '\n';
                return j;
            }
            if (i + 2 <= n && !strncmp(s + i, e, 2)) {
                size_t j = i + 2;
                if (block && j < n && s[j] == '\n') j++;
                push(lx, block ? T_BLOCK_END : T_VAR_END, *line);
                *line += count_nl(s + i, j - i);
                *line_starting = s[j - 1] == '\n';
                return j;
            }
        }
        size_t k;
        if ((k = ws_at(s, n, i))) {
            size_t j = skip_ws(s, n, i);
            *line += count_nl(s + i, j - i);
            i = j;
            continue;
        }
        if ((k = match_float(s, n, i))) {
            tok_t *t = push(lx, T_FLOAT, *line);
            char buf[128];
            size_t m = 0;
            for (size_t q = i; q < i + k && m + 1 < sizeof(buf); q++)
                if (s[q] != '_') buf[m++] = s[q];
            buf[m] = 0;
            t->d = strtod(buf, NULL);
            i += k;
            continue;
        }
        int64_t iv;
        bool ovf;
        if (isd(s[i]) && (k = match_int(s, n, i, &iv, &ovf))) {
            if (ovf) lp__lex_fail(lx, *line, "integer literal too large");
            tok_t *t = push(lx, T_INT, *line);
            t->i = iv;
            i += k;
            continue;
        }
        if ((k = match_name(s, n, i))) {
            tok_t *t = push(lx, T_NAME, *line);
            t->s = dup(lx, s + i, k);
            t->n = k;
            i += k;
            continue;
        }
        if (s[i] == '\'' || s[i] == '"') {
            char q = s[i];
            size_t j = i + 1;
            while (j < n && s[j] != q) j += s[j] == '\\' ? 2 : 1;
            if (j >= n) lp__lex_fail(lx, *line, "unexpected char %s at %zu", q == '\'' ? "\"'\"" : "'\"'", i);
            tok_t *t = push(lx, T_STRING, *line);
            decode_string(lx, t, s + i + 1, j - i - 1);
            *line += count_nl(s + i, j - i);
            i = j + 1;
            continue;
        }
        uint8_t op;
        if ((k = match_op(s, n, i, &op))) {
            if (op == '{' || op == '(' || op == '[') {
                if (nb == (int)sizeof(bal)) lp__lex_fail(lx, *line, "brackets nested too deeply");
                bal[nb++] = op == '{' ? '}' : op == '(' ? ')' : ']';
            } else if (op == '}' || op == ')' || op == ']') {
                if (!nb) lp__lex_fail(lx, *line, "unexpected '%c'", op);
                char want = bal[--nb];
                if (want != (char)op) lp__lex_fail(lx, *line, "unexpected '%c', expected '%c'", op, want);
            }
            tok_t *t = push(lx, T_OP, *line);
            t->op = op;
            i += k;
            continue;
        }
        size_t j = i;
        uint32_t cp = lp__u8_next(s, n, &j);
        if (cp >= 0x20 && cp < 0x7f)
            lp__lex_fail(lx, *line, "unexpected char '%c' at %zu", (char)cp, i);
        lp__lex_fail(lx, *line, "unexpected char U+%04X at %zu", cp, i);
    }
}

/* Apply the whitespace control to the text before a tag: sign is '-', '+'
 * or 0; lstrip for block and comment tags (not {{ }}). */
static size_t strip_before(const char *text, size_t n, char sign, bool lstrip, bool line_starting)
{
    if (sign == '-') return rstrip_at(text, n);
    if (sign == '+' || !lstrip) return n;
    size_t l = n;
    while (l > 0 && text[l - 1] != '\n') l--;
    if (l == 0 && !line_starting) return n;
    if (l == n) return n; /* \s+ needs one character */
    for (size_t i = l; i < n;) {
        size_t k = ws_at(text, n, i);
        if (!k) return n;
        i += k;
    }
    return l;
}

static void emit_data(lexer_t *lx, const char *s, size_t n, int line)
{
    if (!n) return;
    tok_t *t = push(lx, T_DATA, line);
    t->s = dup(lx, s, n);
    t->n = n;
}

/* {% raw %} at s[i] (i at "{%"): the end of its opening, or 0. */
static size_t match_raw_begin(const char *s, size_t n, size_t i)
{
    size_t j = i + 2;
    if (j < n && (s[j] == '-' || s[j] == '+')) j++;
    j = skip_ws(s, n, j);
    if (n - j < 3 || strncmp(s + j, "raw", 3)) return 0;
    j = skip_ws(s, n, j + 3);
    if (j + 3 <= n && !strncmp(s + j, "-%}", 3)) return skip_ws(s, n, j + 3);
    if (j + 2 <= n && !strncmp(s + j, "%}", 2)) return j + 2;
    return 0;
}

/* {% endraw %} from i on: where it starts (*at), its sign, and its end. */
static size_t find_endraw(const char *s, size_t n, size_t i, size_t *at, char *sign)
{
    for (size_t p = i; p + 1 < n; p++) {
        if (s[p] != '{' || s[p + 1] != '%') continue;
        size_t j = p + 2;
        char sg = 0;
        if (j < n && (s[j] == '-' || s[j] == '+')) sg = s[j++];
        j = skip_ws(s, n, j);
        if (n - j < 6 || strncmp(s + j, "endraw", 6)) continue;
        j = skip_ws(s, n, j + 6);
        size_t end = 0;
        if (j + 3 <= n && !strncmp(s + j, "+%}", 3)) end = j + 3;
        else if (j + 3 <= n && !strncmp(s + j, "-%}", 3)) end = skip_ws(s, n, j + 3);
        else if (j + 2 <= n && !strncmp(s + j, "%}", 2)) end = j + 2 + (j + 2 < n && s[j + 2] == '\n');
        if (!end) continue;
        *at = p;
        *sign = sg;
        return end;
    }
    return 0;
}

void lp__jinja_lex(lexer_t *lx, const char *src, size_t len)
{
    /* newlines: \r\n and \r are \n; one newline at the very end is dropped */
    char *s = lp__arena_alloc(lx->arena, len + 1);
    if (!s) lp__lex_fail(lx, 0, "out of memory");
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else
            s[n++] = src[i];
    }
    if (n && s[n - 1] == '\n') n--;
    s[n] = 0;

    int line = 1;
    bool line_starting = true;
    size_t i = 0;
    while (i < n) {
        /* the earliest {{, {% or {# */
        size_t at = i;
        char kind = 0;
        while (at + 1 < n) {
            if (s[at] == '{' && (s[at + 1] == '{' || s[at + 1] == '%' || s[at + 1] == '#')) {
                kind = s[at + 1];
                break;
            }
            at++;
        }
        if (!kind) {
            emit_data(lx, s + i, n - i, line);
            break;
        }
        char sign = at + 2 < n && (s[at + 2] == '-' || s[at + 2] == '+') ? s[at + 2] : 0;
        size_t raw_end = kind == '%' ? match_raw_begin(s, n, at) : 0;
        size_t keep = strip_before(s + i, at - i, sign, kind != '{', line_starting);
        emit_data(lx, s + i, keep, line);
        line += count_nl(s + i, at - i);
        size_t body = at + 2 + (sign ? 1 : 0);
        line_starting = false;
        if (raw_end) {
            line += count_nl(s + at, raw_end - at);
            size_t e_at;
            char e_sign;
            size_t end = find_endraw(s, n, raw_end, &e_at, &e_sign);
            if (!end && raw_end == n) break; /* nothing after it: jinja2 ends there */
            if (!end) lp__lex_fail(lx, line, "Missing end of raw directive");
            bool ls = s[raw_end - 1] == '\n';
            size_t k = strip_before(s + raw_end, e_at - raw_end, e_sign, true, ls);
            emit_data(lx, s + raw_end, k, line);
            line += count_nl(s + raw_end, end - raw_end);
            line_starting = s[end - 1] == '\n';
            i = end;
            continue;
        }
        if (kind == '#') {
            size_t p = body, end = 0;
            for (; p + 1 < n; p++) {
                if (s[p] == '+' && p + 2 < n && s[p + 1] == '#' && s[p + 2] == '}') {
                    end = p + 3;
                    break;
                }
                if (s[p] == '-' && p + 2 < n && s[p + 1] == '#' && s[p + 2] == '}') {
                    end = skip_ws(s, n, p + 3);
                    break;
                }
                if (s[p] == '#' && s[p + 1] == '}') {
                    end = p + 2 + (p + 2 < n && s[p + 2] == '\n');
                    break;
                }
            }
            if (!end && body == n) break; /* nothing after it: jinja2 ends there */
            if (!end) lp__lex_fail(lx, line, "Missing end of comment tag");
            line += count_nl(s + body, end - body);
            line_starting = s[end - 1] == '\n';
            i = end;
            continue;
        }
        push(lx, kind == '%' ? T_BLOCK_BEGIN : T_VAR_BEGIN, line);
        i = lex_tag(lx, s, n, body, &line, kind == '%', &line_starting);
    }
    push(lx, T_EOF, line);
}
