/* unicode.c - lookups into the generated tables (unicode-py.c) and UTF-8
 * helpers for the interpreter's strings. */
#include "unicode-py.h"

uint32_t lp__py_flags(uint32_t cp)
{
    if (cp >= 0x110000) return 0;
    size_t lo = 0, hi = lp__py_n_runs; /* last run starting at or before cp */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (lp__py_runs[mid][0] <= cp) lo = mid;
        else hi = mid;
    }
    return lp__py_runs[lo][1];
}

int lp__py_case_map(uint32_t cp, int which, uint32_t out[3])
{
    size_t lo = 0, hi = lp__py_n_case;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (lp__py_case[mid][0] < cp) lo = mid + 1;
        else hi = mid;
    }
    uint32_t m = lo < lp__py_n_case && lp__py_case[lo][0] == cp ? lp__py_case[lo][which] : 0;
    if (!m) {
        out[0] = cp;
        return 1;
    }
    if (!(m & 0x80000000u)) {
        out[0] = m;
        return 1;
    }
    const uint32_t *e = lp__py_case_exp[m & 0x7fffffffu];
    int n = 0;
    while (n < 3 && e[n]) {
        out[n] = e[n];
        n++;
    }
    return n;
}

size_t lp__u8_put(char *o, uint32_t cp)
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

size_t lp__u8_count(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xc0) != 0x80;
    return k;
}

size_t lp__u8_offset(const char *s, size_t n, size_t k)
{
    size_t i = 0;
    while (k && i < n) {
        lp__u8_next(s, n, &i);
        k--;
    }
    return i;
}

size_t lp__u8_valid_len(const unsigned char *p, size_t left)
{
    unsigned c = p[0];
    size_t n;
    uint32_t cp;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) n = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) n = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4) n = 4, cp = c & 0x07;
    else return 0;
    if (left < n) return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff))) return 0;
    if (cp >= 0xd800 && cp <= 0xdfff) return 0;
    return n;
}
