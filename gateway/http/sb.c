/* sb.c - output buffers and JSON writing for the gateway (see gw.h). */
#include "gw.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool grow(lp_sb_t *b, size_t n)
{
    if (b->oom) return false;
    if (b->len + n + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

void lp_sb_putn(lp_sb_t *b, const void *s, size_t n)
{
    if (!grow(b, n)) return;
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void lp_sb_puts(lp_sb_t *b, const char *s) { lp_sb_putn(b, s, strlen(s)); }

void lp_sb_printf(lp_sb_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char tmp[256];
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof(tmp)) {
        lp_sb_putn(b, tmp, (size_t)n);
        return;
    }
    if (!grow(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* Length of the valid UTF-8 sequence at s (RFC 3629), 0 when invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t k;
    unsigned min;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) k = 2, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef) k = 3, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4) k = 4, min = 0x10000;
    else return 0;
    if (n < k) return 0;
    unsigned cp = c & (0xff >> (k + 1));
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return k;
}

void lp_sb_json_str(lp_sb_t *b, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    lp_sb_putn(b, "\"", 1);
    size_t run = 0; /* start of the bytes not yet copied */
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
        } else if (c >= 0x80) {
            k = utf8_len(u + i, n - i);
            if (!k) {
                esc = "\xef\xbf\xbd"; /* U+FFFD for a byte that is not UTF-8 */
                k = 1;
            }
        }
        if (esc) {
            lp_sb_putn(b, s + run, i - run);
            lp_sb_puts(b, esc);
            run = i + k;
        }
        i += k;
    }
    lp_sb_putn(b, s + run, n - run);
    lp_sb_putn(b, "\"", 1);
}

void lp_sb_json_num(lp_sb_t *b, double x)
{
    if (!isfinite(x)) {
        /* JSON has no infinities: logprobs of -inf are written as a very
         * small number, as llama-server does. */
        lp_sb_puts(b, x < 0 ? "-1e30" : "1e30");
    } else if (x == floor(x) && fabs(x) < 9007199254740992.0)
        lp_sb_printf(b, "%lld", (long long)x);
    else
        lp_sb_printf(b, "%.17g", x);
}

void lp_sb_json_value(lp_sb_t *b, const lp_json_t *v)
{
    switch (v->type) {
    case LP_JSON_NULL: lp_sb_puts(b, "null"); break;
    case LP_JSON_BOOL: lp_sb_puts(b, v->u.b ? "true" : "false"); break;
    case LP_JSON_NUMBER: lp_sb_json_num(b, v->u.num); break;
    case LP_JSON_STRING: lp_sb_json_str(b, v->u.str, v->n); break;
    case LP_JSON_ARRAY:
    case LP_JSON_OBJECT:
        lp_sb_putn(b, v->type == LP_JSON_ARRAY ? "[" : "{", 1);
        for (size_t i = 0; i < v->n; i++) {
            const lp_json_t *it = &v->u.items[i];
            if (i) lp_sb_putn(b, ",", 1);
            if (v->type == LP_JSON_OBJECT) {
                lp_sb_json_str(b, it->key, it->key_len);
                lp_sb_putn(b, ":", 1);
            }
            lp_sb_json_value(b, it);
        }
        lp_sb_putn(b, v->type == LP_JSON_ARRAY ? "]" : "}", 1);
        break;
    }
}

void lp_sb_free(lp_sb_t *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}
