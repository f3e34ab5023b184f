/* unicode.h - the little Unicode the tokenizer needs: general category
 * classes and White_Space per code point (unicode-data.c, generated from
 * UnicodeData.txt by gen-unicode-data.py), UTF-8 decoding with llama.cpp's
 * rules, and GPT-2's byte-to-code-point map. */
#ifndef LP_TOKENIZER_UNICODE_H
#define LP_TOKENIZER_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* Category class bits; exactly one is set for every code point below
 * 0x110000 (unassigned code points are C).  LP_UCD_WS is White_Space. */
enum {
    LP_UCD_N = 1,   /* \p{N} */
    LP_UCD_L = 2,   /* \p{L} */
    LP_UCD_Z = 4,   /* \p{Z} */
    LP_UCD_M = 8,   /* \p{M} */
    LP_UCD_P = 16,  /* \p{P} */
    LP_UCD_S = 32,  /* \p{S} */
    LP_UCD_C = 64,  /* \p{C} */
    LP_UCD_WS = 128,
};

/* Flags of one code point; 0 for values >= 0x110000. */
uint8_t lp__ucd_flags(uint32_t cp);

/* Length of the UTF-8 sequence a lead byte announces, from its high nibble
 * alone (1 for continuation bytes), as llama.cpp's unicode_len_utf8. */
static inline size_t lp__utf8_len(uint8_t b)
{
    static const uint8_t lut[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lut[b >> 4];
}

/* Decode one code point at s[*off] with llama.cpp's structural rules (lead
 * byte and continuation bytes checked; overlongs and surrogates accepted).
 * Returns the code point and advances *off, or returns -1 and advances *off
 * by one byte when the sequence is invalid (the caller substitutes U+FFFD). */
int32_t lp__utf8_decode(const uint8_t *s, size_t n, size_t *off);

/* Encode cp (< 0x110000) as UTF-8 into out[4]; returns the byte count. */
size_t lp__utf8_encode(uint32_t cp, char *out);


/* GPT-2 byte-level encoding: byte -> code point, and back (-1 when the code
 * point stands for no byte). */
uint32_t lp__byte_to_cp(uint8_t b);
int lp__cp_to_byte(uint32_t cp);

#endif
