/* ggml-type.h - tensor element types of the GGUF format and their block
 * geometry.  The numeric values are the on-disk type IDs (ggml's enum). */
#ifndef LP_GGML_TYPE_H
#define LP_GGML_TYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum lp_type {
    LP_TYPE_F32 = 0,
    LP_TYPE_F16 = 1,
    LP_TYPE_Q4_0 = 2,
    LP_TYPE_Q4_1 = 3,
    LP_TYPE_Q5_0 = 6,
    LP_TYPE_Q5_1 = 7,
    LP_TYPE_Q8_0 = 8,
    LP_TYPE_Q8_1 = 9,
    LP_TYPE_Q2_K = 10,
    LP_TYPE_Q3_K = 11,
    LP_TYPE_Q4_K = 12,
    LP_TYPE_Q5_K = 13,
    LP_TYPE_Q6_K = 14,
    LP_TYPE_Q8_K = 15,
    LP_TYPE_IQ2_XXS = 16,
    LP_TYPE_IQ2_XS = 17,
    LP_TYPE_IQ3_XXS = 18,
    LP_TYPE_IQ1_S = 19,
    LP_TYPE_IQ4_NL = 20,
    LP_TYPE_IQ3_S = 21,
    LP_TYPE_IQ2_S = 22,
    LP_TYPE_IQ4_XS = 23,
    LP_TYPE_I8 = 24,
    LP_TYPE_I16 = 25,
    LP_TYPE_I32 = 26,
    LP_TYPE_I64 = 27,
    LP_TYPE_F64 = 28,
    LP_TYPE_IQ1_M = 29,
    LP_TYPE_BF16 = 30,
    LP_TYPE_TQ1_0 = 34,
    LP_TYPE_TQ2_0 = 35,
    LP_TYPE_MXFP4 = 39,
    LP_TYPE_COUNT = 40,
};

#define LP_QK 32   /* elements per block of the legacy quants */
#define LP_QK_K 256 /* elements per super-block of the K-quants */
#define LP_K_SCALE_SIZE 12

typedef struct lp_type_traits {
    const char *name;     /* "Q4_K"; NULL for an ID this reader does not know */
    uint32_t block_elems; /* elements per block */
    uint32_t block_bytes; /* bytes per block */
    int computable;       /* the engine can dequantize it */
} lp_type_traits_t;

/* Traits of a type ID; NULL when the ID is unknown. */
const lp_type_traits_t *lp_type_traits(uint32_t type);
const char *lp_type_name(uint32_t type);
/* Bytes of a row of `n` elements; 0 when n is not a whole number of blocks. */
size_t lp_type_row_bytes(uint32_t type, int64_t n);

/* Half and bfloat16 conversion (round to nearest even). */
static inline float lp_fp16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do { e++; mant <<= 1; } while (!(mant & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t lp_f32_to_fp16(float f);

static inline float lp_bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t lp_f32_to_bf16(float f);

#endif
