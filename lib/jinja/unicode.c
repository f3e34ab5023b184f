/* unicode.c - lookups into the generated tables (unicode-py.c) and UTF-8
 * helpers for the interpreter's strings (encoding and validation are
 * lib/json.c's). */
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
