/* json.c - a small, strict JSON reader (see json.h). */
#include "json.h"

#include "error.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena: every node, key and string of a document ------------------ */

typedef struct chunk {
    struct chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} chunk_t;

struct lp_json_doc {
    chunk_t *chunks;
    lp_json_t root;
};

static void *arena_alloc(lp_json_doc_t *d, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    chunk_t *c = d->chunks;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 16384 ? n : 16384;
        c = malloc(sizeof(*c) + cap);
        if (!c) return NULL;
        c->next = d->chunks;
        c->used = 0;
        c->cap = cap;
        d->chunks = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

/* ---- parser ------------------------------------------------------------ */

typedef struct parser {
    const char *start, *p, *end;
    lp_json_doc_t *doc;
    int depth;
} parser_t;

static int fail(parser_t *ps, const char *what)
{
    size_t off = (size_t)(ps->p - ps->start);
    if (ps->p >= ps->end)
        return lp_error_set(LP_ERR(EINVAL), "json: unexpected end of input at byte %zu: %s", off,
                            what);
    unsigned char ch = (unsigned char)*ps->p;
    if (ch >= 0x20 && ch < 0x7f)
        return lp_error_set(LP_ERR(EINVAL), "json: byte %zu ('%c'): %s", off, ch, what);
    return lp_error_set(LP_ERR(EINVAL), "json: byte %zu (0x%02x): %s", off, ch, what);
}

static void skip_ws(parser_t *ps)
{
    while (ps->p < ps->end &&
           (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static int literal(parser_t *ps, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n))
        return fail(ps, "expected a value");
    ps->p += n;
    return 0;
}

static int hex4(parser_t *ps, uint32_t *out)
{
    if (ps->end - ps->p < 4) return fail(ps, "\\u needs four hex digits");
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = ps->p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
        else {
            ps->p += i;
            return fail(ps, "\\u needs four hex digits");
        }
    }
    ps->p += 4;
    *out = v;
    return 0;
}

size_t lp_utf8_encode(uint32_t cp, char *o)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

size_t lp_utf8_seq_len(const unsigned char *p, const unsigned char *end)
{
    unsigned c = p[0];
    size_t n;
    uint32_t cp;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) n = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) n = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4) n = 4, cp = c & 0x07;
    else return 0;
    if ((size_t)(end - p) < n) return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff))) return 0;
    if (cp >= 0xd800 && cp <= 0xdfff) return 0;
    return n;
}

/* Parse a string at ps->p (on the opening quote) into arena memory. */
static int parse_string(parser_t *ps, const char **out, size_t *out_len)
{
    ps->p++; /* opening quote */
    /* The decoded text is never longer than the source. */
    const char *q = ps->p;
    while (q < ps->end && *q != '"') q += (*q == '\\' && q + 1 < ps->end) ? 2 : 1;
    if (q >= ps->end) {
        ps->p = ps->end;
        return fail(ps, "unterminated string");
    }
    char *buf = arena_alloc(ps->doc, (size_t)(q - ps->p) + 1);
    if (!buf) return lp_error_set(LP_ERR(ENOMEM), "json: out of memory");
    size_t n = 0;
    for (;;) {
        if (ps->p >= ps->end) return fail(ps, "unterminated string");
        unsigned char c = (unsigned char)*ps->p;
        if (c == '"') {
            ps->p++;
            break;
        }
        if (c < 0x20) return fail(ps, "raw control character in a string");
        if (c == '\\') {
            ps->p++;
            if (ps->p >= ps->end) return fail(ps, "unterminated escape");
            char e = *ps->p++;
            switch (e) {
            case '"': buf[n++] = '"'; break;
            case '\\': buf[n++] = '\\'; break;
            case '/': buf[n++] = '/'; break;
            case 'b': buf[n++] = '\b'; break;
            case 'f': buf[n++] = '\f'; break;
            case 'n': buf[n++] = '\n'; break;
            case 'r': buf[n++] = '\r'; break;
            case 't': buf[n++] = '\t'; break;
            case 'u': {
                uint32_t cp;
                int rc = hex4(ps, &cp);
                if (rc) return rc;
                if (cp >= 0xdc00 && cp <= 0xdfff) return fail(ps, "lone low surrogate in \\u escape");
                if (cp >= 0xd800 && cp <= 0xdbff) {
                    uint32_t lo;
                    if (ps->end - ps->p < 2 || ps->p[0] != '\\' || ps->p[1] != 'u')
                        return fail(ps, "high surrogate not followed by \\u low surrogate");
                    ps->p += 2;
                    if ((rc = hex4(ps, &lo))) return rc;
                    if (lo < 0xdc00 || lo > 0xdfff)
                        return fail(ps, "high surrogate not followed by a low surrogate");
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                }
                n += lp_utf8_encode(cp, buf + n);
                break;
            }
            default:
                ps->p--;
                return fail(ps, "unknown escape");
            }
            continue;
        }
        size_t k = lp_utf8_seq_len((const unsigned char *)ps->p, (const unsigned char *)ps->end);
        if (!k) return fail(ps, "invalid UTF-8 in a string");
        memcpy(buf + n, ps->p, k);
        n += k;
        ps->p += k;
    }
    buf[n] = '\0';
    *out = buf;
    *out_len = n;
    return 0;
}

static int parse_number(parser_t *ps, lp_json_t *jv)
{
    double *out = &jv->u.num;
    const char *s = ps->p, *q = s;
    if (q < ps->end && *q == '-') q++;
    if (q >= ps->end || !(*q >= '0' && *q <= '9')) {
        ps->p = q;
        return fail(ps, "expected a digit");
    }
    if (*q == '0') {
        q++;
        if (q < ps->end && *q >= '0' && *q <= '9') {
            ps->p = q;
            return fail(ps, "leading zero in a number");
        }
    } else
        while (q < ps->end && *q >= '0' && *q <= '9') q++;
    if (q < ps->end && *q == '.') {
        q++;
        if (q >= ps->end || !(*q >= '0' && *q <= '9')) {
            ps->p = q;
            return fail(ps, "expected a digit after '.'");
        }
        while (q < ps->end && *q >= '0' && *q <= '9') q++;
    }
    if (q < ps->end && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < ps->end && (*q == '+' || *q == '-')) q++;
        if (q >= ps->end || !(*q >= '0' && *q <= '9')) {
            ps->p = q;
            return fail(ps, "expected a digit in the exponent");
        }
        while (q < ps->end && *q >= '0' && *q <= '9') q++;
    }
    char tmp[64];
    size_t n = (size_t)(q - s);
    char *heap = NULL, *txt = tmp;
    if (n >= sizeof(tmp)) {
        heap = malloc(n + 1);
        if (!heap) return lp_error_set(LP_ERR(ENOMEM), "json: out of memory");
        txt = heap;
    }
    memcpy(txt, s, n);
    txt[n] = '\0';
    double v = strtod(txt, NULL);
    jv->is_intlike = !memchr(txt, '.', n) && !memchr(txt, 'e', n) && !memchr(txt, 'E', n);
    if (jv->is_intlike) {
        errno = 0;
        long long ll = strtoll(txt, NULL, 10);
        jv->is_int = errno != ERANGE;
        jv->inum = ll;
    }
    free(heap);
    if (!isfinite(v)) return fail(ps, "number out of range");
    ps->p = q;
    *out = v;
    return 0;
}

static int parse_value(parser_t *ps, lp_json_t *v);

/* Grow a temporary item list (heap) while a container is parsed. */
typedef struct items {
    lp_json_t *v;
    size_t n, cap;
} items_t;

static lp_json_t *items_push(items_t *it)
{
    if (it->n == it->cap) {
        size_t cap = it->cap ? it->cap * 2 : 8;
        lp_json_t *nv = realloc(it->v, cap * sizeof(*nv));
        if (!nv) return NULL;
        it->v = nv;
        it->cap = cap;
    }
    lp_json_t *x = &it->v[it->n++];
    memset(x, 0, sizeof(*x));
    return x;
}

static int finish_items(parser_t *ps, items_t *it, lp_json_t *v)
{
    v->n = it->n;
    v->u.items = NULL;
    if (it->n) {
        v->u.items = arena_alloc(ps->doc, it->n * sizeof(lp_json_t));
        if (!v->u.items) return lp_error_set(LP_ERR(ENOMEM), "json: out of memory");
        memcpy(v->u.items, it->v, it->n * sizeof(lp_json_t));
    }
    return 0;
}

static int parse_container(parser_t *ps, lp_json_t *v, bool object)
{
    if (++ps->depth > LP_JSON_MAX_DEPTH) return fail(ps, "nesting deeper than 64 levels");
    ps->p++; /* [ or { */
    v->type = object ? LP_JSON_OBJECT : LP_JSON_ARRAY;
    items_t it = {0};
    int rc = 0;
    char close = object ? '}' : ']';
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        goto done;
    }
    for (;;) {
        lp_json_t *x = items_push(&it);
        if (!x) {
            rc = lp_error_set(LP_ERR(ENOMEM), "json: out of memory");
            goto done;
        }
        skip_ws(ps);
        if (object) {
            if (ps->p >= ps->end || *ps->p != '"') {
                rc = fail(ps, "expected a member name");
                goto done;
            }
            const char *key_at = ps->p;
            if ((rc = parse_string(ps, &x->key, &x->key_len))) goto done;
            for (size_t i = 0; i + 1 < it.n; i++)
                if (it.v[i].key_len == x->key_len && !memcmp(it.v[i].key, x->key, x->key_len)) {
                    ps->p = key_at;
                    rc = fail(ps, "duplicate member name");
                    goto done;
                }
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                rc = fail(ps, "expected ':'");
                goto done;
            }
            ps->p++;
            skip_ws(ps);
        }
        const char *key = x->key;
        size_t key_len = x->key_len;
        if ((rc = parse_value(ps, x))) goto done;
        it.v[it.n - 1].key = key; /* parse_value may not touch these, but be sure */
        it.v[it.n - 1].key_len = key_len;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            break;
        }
        rc = fail(ps, object ? "expected ',' or '}'" : "expected ',' or ']'");
        goto done;
    }
done:
    if (!rc) rc = finish_items(ps, &it, v);
    free(it.v);
    ps->depth--;
    return rc;
}

static int parse_value(parser_t *ps, lp_json_t *v)
{
    skip_ws(ps);
    if (ps->p >= ps->end) return fail(ps, "expected a value");
    switch (*ps->p) {
    case '{': return parse_container(ps, v, true);
    case '[': return parse_container(ps, v, false);
    case '"':
        v->type = LP_JSON_STRING;
        return parse_string(ps, &v->u.str, &v->n);
    case 't':
        v->type = LP_JSON_BOOL;
        v->u.b = true;
        return literal(ps, "true");
    case 'f':
        v->type = LP_JSON_BOOL;
        v->u.b = false;
        return literal(ps, "false");
    case 'n':
        v->type = LP_JSON_NULL;
        return literal(ps, "null");
    default:
        if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9')) {
            const char *s = ps->p;
            v->type = LP_JSON_NUMBER;
            int rc = parse_number(ps, v);
            if (rc) return rc;
            /* the text as written: exact where a double is not (big
             * integers, "1.0" against "1") */
            v->n = (size_t)(ps->p - s);
            char *t = arena_alloc(ps->doc, v->n + 1);
            if (!t) return lp_error_set(LP_ERR(ENOMEM), "json: out of memory");
            memcpy(t, s, v->n);
            t[v->n] = '\0';
            v->num_text = t;
            return 0;
        }
        if (*ps->p == 'N' || *ps->p == 'I')
            return fail(ps, "expected a value (NaN and Infinity are not JSON numbers)");
        return fail(ps, "expected a value");
    }
}

int lp_json_parse(const char *text, size_t len, lp_json_doc_t **out)
{
    *out = NULL;
    if (!text && len) return lp_error_set(LP_ERR(EINVAL), "json: no input");
    if (len > LP_JSON_MAX_INPUT)
        return lp_error_set(LP_ERR(E2BIG), "json: input of %zu bytes exceeds the limit of %u",
                            len, LP_JSON_MAX_INPUT);
    lp_json_doc_t *d = calloc(1, sizeof(*d));
    if (!d) return lp_error_set(LP_ERR(ENOMEM), "json: out of memory");
    parser_t ps = {.start = text, .p = text, .end = text + len, .doc = d};
    int rc = parse_value(&ps, &d->root);
    if (!rc) {
        skip_ws(&ps);
        if (ps.p != ps.end) rc = fail(&ps, "unexpected text after the value");
    }
    if (rc) {
        lp_json_doc_destroy(&d);
        return rc;
    }
    *out = d;
    return 0;
}

void lp_json_doc_destroy(lp_json_doc_t **self_p)
{
    if (!self_p || !*self_p) return;
    chunk_t *c = (*self_p)->chunks;
    while (c) {
        chunk_t *next = c->next;
        free(c);
        c = next;
    }
    free(*self_p);
    *self_p = NULL;
}

const lp_json_t *lp_json_root(const lp_json_doc_t *doc)
{
    return &doc->root;
}

/* ---- access -------------------------------------------------------------- */

const lp_json_t *lp_json_get(const lp_json_t *obj, const char *key)
{
    if (!obj || obj->type != LP_JSON_OBJECT) return NULL;
    size_t n = strlen(key);
    for (size_t i = 0; i < obj->n; i++)
        if (obj->u.items[i].key_len == n && !memcmp(obj->u.items[i].key, key, n))
            return &obj->u.items[i];
    return NULL;
}

const char *lp_json_type_name(enum lp_json_type t)
{
    static const char *names[] = {"null", "boolean", "number", "string", "array", "object"};
    return (unsigned)t < sizeof(names) / sizeof(names[0]) ? names[t] : "?";
}

int lp_json_int(const lp_json_t *v, int64_t lo, int64_t hi, int64_t *out)
{
    if (!v || v->type != LP_JSON_NUMBER) return LP_ERR(EINVAL);
    double d = v->u.num;
    if (d != floor(d) || d < (double)lo || d > (double)hi) return LP_ERR(EINVAL);
    *out = (int64_t)d;
    return 0;
}

/* ---- writing ---------------------------------------------------------------- */

void lp_json_buf_put(lp_json_buf_t *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->cap - b->n < n + 1) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->n < n + 1) {
            if (cap > SIZE_MAX / 2) {
                b->oom = true;
                return;
            }
            cap *= 2;
        }
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void lp_json_buf_puts(lp_json_buf_t *b, const char *s) { lp_json_buf_put(b, s, strlen(s)); }

void lp_json_buf_printf(lp_json_buf_t *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof(tmp)) {
        lp_json_buf_put(b, tmp, (size_t)n);
        return;
    }
    lp_json_buf_put(b, "", 0);
    if (b->oom) return;
    size_t at = b->n;
    lp_json_buf_put(b, tmp, (size_t)n); /* room for all of it (the first bytes for now) */
    if (b->oom) return;
    va_start(ap, fmt);
    vsnprintf(b->p + at, (size_t)n + 1, fmt, ap);
    va_end(ap);
}

void lp_json_buf_str(lp_json_buf_t *b, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s, *end = u + n;
    lp_json_buf_put(b, "\"", 1);
    size_t run = 0; /* the first byte not yet copied */
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        const char *esc = NULL;
        char tmp[8];
        size_t k = 1;
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c < 0x20 || c == 0x7f) {
            snprintf(tmp, sizeof(tmp), "\\u%04x", c);
            esc = tmp;
        } else if (c >= 0x80 && !(k = lp_utf8_seq_len(u + i, end))) {
            esc = "\xef\xbf\xbd"; /* U+FFFD: a byte that is not UTF-8 */
            k = 1;
        }
        if (esc) {
            lp_json_buf_put(b, s + run, i - run);
            lp_json_buf_puts(b, esc);
            run = i + k;
        }
        i += k;
    }
    lp_json_buf_put(b, s + run, n - run);
    lp_json_buf_put(b, "\"", 1);
}

/* The shortest %.Ng text that reads back to x (as a double, or as a float
 * when `single`); JSON has no infinities, so they are written as +-1e30
 * (llama-server's choice for a logprob of -inf). */
static void put_shortest(lp_json_buf_t *b, double x, bool single)
{
    char tmp[40];
    if (!isfinite(x)) {
        lp_json_buf_puts(b, x < 0 ? "-1e30" : "1e30");
        return;
    }
    if (x == floor(x) && fabs(x) < 9007199254740992.0) {
        snprintf(tmp, sizeof(tmp), "%lld", (long long)x);
        lp_json_buf_puts(b, tmp);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof(tmp), "%.*g", prec, x);
        if (single ? strtof(tmp, NULL) == (float)x : strtod(tmp, NULL) == x) break;
    }
    lp_json_buf_puts(b, tmp);
}

void lp_json_buf_num(lp_json_buf_t *b, double x) { put_shortest(b, x, false); }
void lp_json_buf_float(lp_json_buf_t *b, float x) { put_shortest(b, (double)x, true); }

void lp_json_buf_value(lp_json_buf_t *b, const lp_json_t *v)
{
    switch (v->type) {
    case LP_JSON_NULL: lp_json_buf_puts(b, "null"); break;
    case LP_JSON_BOOL: lp_json_buf_puts(b, v->u.b ? "true" : "false"); break;
    case LP_JSON_NUMBER:
        /* as read: an integer exactly; a number written with a fraction or
         * an exponent keeps one, so that it reads back as a float (a chat
         * template tells 1 from 1.0) */
        if (v->is_int) lp_json_buf_printf(b, "%lld", (long long)v->inum);
        else {
            size_t at = b->n;
            lp_json_buf_num(b, v->u.num);
            if (!v->is_intlike && !b->oom && !strpbrk(b->p + at, ".eE")) lp_json_buf_puts(b, ".0");
        }
        break;
    case LP_JSON_STRING: lp_json_buf_str(b, v->u.str, v->n); break;
    case LP_JSON_ARRAY:
    case LP_JSON_OBJECT:
        lp_json_buf_puts(b, v->type == LP_JSON_ARRAY ? "[" : "{");
        for (size_t i = 0; i < v->n; i++) {
            if (i) lp_json_buf_puts(b, ",");
            const lp_json_t *it = &v->u.items[i];
            if (v->type == LP_JSON_OBJECT) {
                lp_json_buf_str(b, it->key, it->key_len);
                lp_json_buf_puts(b, ":");
            }
            lp_json_buf_value(b, it);
        }
        lp_json_buf_puts(b, v->type == LP_JSON_ARRAY ? "]" : "}");
        break;
    }
}

char *lp_json_buf_take(lp_json_buf_t *b, size_t *len)
{
    char *p = b->oom ? NULL : b->p;
    if (len) *len = p ? b->n : 0;
    if (!p) free(b->p);
    memset(b, 0, sizeof(*b));
    return p;
}

void lp_json_buf_free(lp_json_buf_t *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

size_t lp_json_quote(char *buf, size_t cap, const char *s, size_t len)
{
    lp_json_buf_t b = {0};
    lp_json_buf_str(&b, s, len);
    /* out of memory: the quotes alone, so that the text still parses */
    const char *q = b.oom ? "\"\"" : b.p;
    size_t n = strlen(q);
    if (cap) {
        size_t k = n < cap ? n : cap - 1;
        memcpy(buf, q, k);
        buf[k] = '\0';
    }
    lp_json_buf_free(&b);
    return n;
}
