/* utf8_test.c - lp_utf8_valid (gguf.c) against a byte-at-a-time reference
 * written from Unicode's table of well-formed sequences (Table 3-7): every
 * 1- to 3-byte sequence, every 4-byte lead with every second and third byte,
 * each inside ASCII runs of every length around it (the fast path reads 8
 * and 4 bytes at a time), and random strings.  Run under ASan+UBSan in the
 * sanitize suite, where a read past the end is caught. */
#include "gguf.h"

#include "../tests/check.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Table 3-7: lead byte ranges, the range of the second byte, the length. */
static int ref_valid(const unsigned char *s, size_t n)
{
    static const struct {
        unsigned lo, hi, b2lo, b2hi, len;
    } rows[] = {
        {0x00, 0x7f, 0, 0, 1},       {0xc2, 0xdf, 0x80, 0xbf, 2}, {0xe0, 0xe0, 0xa0, 0xbf, 3},
        {0xe1, 0xec, 0x80, 0xbf, 3}, {0xed, 0xed, 0x80, 0x9f, 3}, {0xee, 0xef, 0x80, 0xbf, 3},
        {0xf0, 0xf0, 0x90, 0xbf, 4}, {0xf1, 0xf3, 0x80, 0xbf, 4}, {0xf4, 0xf4, 0x80, 0x8f, 4},
    };
    size_t i = 0;
    while (i < n) {
        unsigned len = 0, b2lo = 0, b2hi = 0;
        for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++)
            if (s[i] >= rows[r].lo && s[i] <= rows[r].hi) {
                len = rows[r].len;
                b2lo = rows[r].b2lo;
                b2hi = rows[r].b2hi;
            }
        if (!len || n - i < len) return 0;
        if (len > 1 && (s[i + 1] < b2lo || s[i + 1] > b2hi)) return 0;
        for (unsigned k = 2; k < len; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xbf) return 0;
        i += len;
    }
    return 1;
}

static int failures_shown;

/* s (n bytes) exactly, in a heap block of its own size so that ASan sees
 * any read past the end. */
static void check_exact(const unsigned char *s, size_t n)
{
    unsigned char *b = malloc(n ? n : 1);
    if (n) memcpy(b, s, n);
    int want = ref_valid(b, n), got = lp_utf8_valid((const char *)b, n);
    if (want != got && failures_shown++ < 10) {
        fprintf(stderr, "lp_utf8_valid = %d, want %d for", got, want);
        for (size_t i = 0; i < n; i++) fprintf(stderr, " %02x", b[i]);
        fprintf(stderr, "\n");
    }
    CHECK(want == got);
    free(b);
}

/* seq inside `pre` ASCII bytes before and `post` after. */
static void check_padded(const unsigned char *seq, size_t k, size_t pre, size_t post)
{
    unsigned char buf[64];
    memset(buf, 'a', pre);
    memcpy(buf + pre, seq, k);
    memset(buf + pre + k, 'z', post);
    check_exact(buf, pre + k + post);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) { return (uint32_t)(lp_check_rand(&rng) >> 11); }

int main(void)
{
    unsigned char s[8];
    /* every 1-, 2- and 3-byte sequence (3 bytes: leads >= 0x80 only, the
     * others are ASCII followed by a 2-byte case) */
    for (unsigned a = 0; a < 256; a++) {
        s[0] = (unsigned char)a;
        check_exact(s, 1);
        for (unsigned b = 0; b < 256; b++) {
            s[1] = (unsigned char)b;
            check_exact(s, 2);
            if (a < 0x80) continue;
            for (unsigned c = 0; c < 256; c++) {
                s[2] = (unsigned char)c;
                check_exact(s, 3);
            }
        }
    }
    /* 4-byte leads with every second and third byte, a few last bytes */
    static const unsigned char last[] = {0x00, 0x41, 0x7f, 0x80, 0xbf, 0xc0, 0xff};
    for (unsigned a = 0xf0; a < 0x100; a++)
        for (unsigned b = 0; b < 256; b++)
            for (unsigned c = 0; c < 256; c++)
                for (size_t d = 0; d < sizeof(last); d++) {
                    s[0] = (unsigned char)a, s[1] = (unsigned char)b, s[2] = (unsigned char)c;
                    s[3] = last[d];
                    check_exact(s, 4);
                }
    /* boundary sequences inside ASCII runs of 0..17 bytes on either side,
     * so that each lands at every position of the 8- and 4-byte reads */
    static const char *const seqs[] = {
        "\x7f", "\x80", "\xbf", "\xc0\x80", "\xc1\xbf", "\xc2\x80", "\xdf\xbf", "\xe0\x9f\xbf",
        "\xe0\xa0\x80", "\xed\x9f\xbf", "\xed\xa0\x80", "\xef\xbf\xbf", "\xf0\x8f\xbf\xbf",
        "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xff",
        "\xc3\xa9\xc3", "\xe2\x96\x81\xe2\x96", "\xc4\xa0\xc4\xa0\xc4\xa0\xc4\xa0\xc4\xa0",
    };
    for (size_t q = 0; q < sizeof(seqs) / sizeof(seqs[0]); q++)
        for (size_t pre = 0; pre < 18; pre++)
            for (size_t post = 0; post < 18; post++)
                check_padded((const unsigned char *)seqs[q], strlen(seqs[q]), pre, post);
    /* random strings, mostly ASCII with some UTF-8 and some junk */
    static const unsigned char alpha[] = {'a', ' ', 'Z', 0x00, 0x7f, 0x80, 0xa0, 0xbf, 0xc2,
                                          0xc4, 0xdf, 0xe0, 0xe2, 0xed, 0xf0, 0xf4, 0xf8};
    for (int it = 0; it < 300000; it++) {
        unsigned char buf[48];
        size_t n = rnd() % sizeof(buf);
        for (size_t i = 0; i < n; i++) {
            uint32_t r = rnd();
            buf[i] = r % 4 ? (unsigned char)('a' + r % 26) : alpha[(r >> 8) % sizeof(alpha)];
        }
        /* often make it valid: replace junk by a well-formed sequence */
        if (it & 1)
            for (size_t i = 0; i + 3 <= n; i++)
                if (buf[i] >= 0x80) memcpy(buf + i, "\xe2\x96\x81", 3), i += 2;
        check_exact(buf, n);
    }
    return CHECK_DONE();
}
