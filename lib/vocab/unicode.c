/* unicode.c - UTF-8 helpers and GPT-2's byte map (see unicode.h). */
#include "unicode.h"

int32_t lp__utf8_decode(const uint8_t *s, size_t n, size_t *off)
{
    size_t i = *off;
    uint8_t b = s[i];
    if (b < 0x80) {
        *off = i + 1;
        return b;
    }
    size_t len;
    uint32_t cp;
    if (!(b & 0x40)) goto bad;
    if (!(b & 0x20)) len = 2, cp = b & 0x1f;
    else if (!(b & 0x10)) len = 3, cp = b & 0x0f;
    else if (!(b & 0x08)) len = 4, cp = b & 0x07;
    else goto bad;
    if (i + len > n) goto bad;
    for (size_t k = 1; k < len; k++) {
        if ((s[i + k] & 0xc0) != 0x80) goto bad;
        cp = (cp << 6) | (s[i + k] & 0x3f);
    }
    /* llama.cpp would throw re-encoding these; treat them as invalid. */
    if (cp >= 0x110000) goto bad;
    *off = i + len;
    return (int32_t)cp;
bad:
    *off = i + 1;
    return -1;
}

size_t lp__utf8_encode(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Printable Latin-1 bytes map to themselves; the other 68 bytes map, in
 * order, to U+0100.. (GPT-2's bytes_to_unicode). */
static int keeps_itself(unsigned b)
{
    return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

static uint32_t byte_cp[256];
static int16_t cp_byte[256 + 68];

/* Built before main(), so before any thread can read them. */
__attribute__((constructor)) static void build_maps(void)
{
    uint32_t n = 0;
    for (unsigned c = 0; c < 256 + 68; c++) cp_byte[c] = -1;
    for (unsigned b = 0; b < 256; b++) {
        byte_cp[b] = keeps_itself(b) ? b : 256 + n++;
        cp_byte[byte_cp[b]] = (int16_t)b;
    }
}

uint32_t lp__byte_to_cp(uint8_t b)
{
    return byte_cp[b];
}

int lp__cp_to_byte(uint32_t cp)
{
    return cp < 256 + 68 ? cp_byte[cp] : -1;
}
