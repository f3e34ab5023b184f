/* ggml-type.c - block geometry of the GGUF tensor types. */
#include "ggml-type.h"

#include <math.h>

/* Sizes follow the block structs of the GGUF format: a legacy block is a
 * half scale (plus a half min or 4 bytes of high bits) and 32 packed values;
 * a K-quant super-block covers 256 values. */
static const lp_type_traits_t traits[LP_TYPE_COUNT] = {
    [LP_TYPE_F32] = {"F32", 1, 4, 1},
    [LP_TYPE_F16] = {"F16", 1, 2, 1},
    [LP_TYPE_Q4_0] = {"Q4_0", LP_QK, 2 + LP_QK / 2, 1},
    [LP_TYPE_Q4_1] = {"Q4_1", LP_QK, 4 + LP_QK / 2, 1},
    [LP_TYPE_Q5_0] = {"Q5_0", LP_QK, 2 + 4 + LP_QK / 2, 1},
    [LP_TYPE_Q5_1] = {"Q5_1", LP_QK, 4 + 4 + LP_QK / 2, 1},
    [LP_TYPE_Q8_0] = {"Q8_0", LP_QK, 2 + LP_QK, 1},
    [LP_TYPE_Q8_1] = {"Q8_1", LP_QK, 4 + LP_QK, 0},
    [LP_TYPE_Q2_K] = {"Q2_K", LP_QK_K, LP_QK_K / 16 + LP_QK_K / 4 + 4, 0},
    [LP_TYPE_Q3_K] = {"Q3_K", LP_QK_K, LP_QK_K / 8 + LP_QK_K / 4 + 12 + 2, 0},
    [LP_TYPE_Q4_K] = {"Q4_K", LP_QK_K, 4 + LP_K_SCALE_SIZE + LP_QK_K / 2, 1},
    [LP_TYPE_Q5_K] = {"Q5_K", LP_QK_K, 4 + LP_K_SCALE_SIZE + LP_QK_K / 8 + LP_QK_K / 2, 1},
    [LP_TYPE_Q6_K] = {"Q6_K", LP_QK_K, LP_QK_K / 2 + LP_QK_K / 4 + LP_QK_K / 16 + 2, 1},
    [LP_TYPE_Q8_K] = {"Q8_K", LP_QK_K, 4 + LP_QK_K + LP_QK_K / 16 * 2, 0},
    /* The i-quants, ternary and MXFP4 types: known so that a file holding them
     * can be read (its vocabulary, its table); the engine refuses them by name. */
    [LP_TYPE_IQ2_XXS] = {"IQ2_XXS", LP_QK_K, 2 + LP_QK_K / 8 * 2, 0},
    [LP_TYPE_IQ2_XS] = {"IQ2_XS", LP_QK_K, 2 + LP_QK_K / 8 * 2 + LP_QK_K / 32, 0},
    [LP_TYPE_IQ3_XXS] = {"IQ3_XXS", LP_QK_K, 2 + 3 * (LP_QK_K / 8), 0},
    [LP_TYPE_IQ1_S] = {"IQ1_S", LP_QK_K, 2 + LP_QK_K / 8 + LP_QK_K / 16, 0},
    [LP_TYPE_IQ4_NL] = {"IQ4_NL", LP_QK, 2 + LP_QK / 2, 0},
    [LP_TYPE_IQ3_S] = {"IQ3_S", LP_QK_K,
                       2 + LP_QK_K / 4 + LP_QK_K / 32 + LP_QK_K / 8 + LP_QK_K / 64, 0},
    [LP_TYPE_IQ2_S] = {"IQ2_S", LP_QK_K, 2 + LP_QK_K / 4 + LP_QK_K / 16, 0},
    [LP_TYPE_IQ4_XS] = {"IQ4_XS", LP_QK_K, 2 + 2 + LP_QK_K / 64 + LP_QK_K / 2, 0},
    [LP_TYPE_IQ1_M] = {"IQ1_M", LP_QK_K, LP_QK_K / 8 + LP_QK_K / 16 + LP_QK_K / 32, 0},
    [LP_TYPE_TQ1_0] = {"TQ1_0", LP_QK_K, (LP_QK_K - 4 * LP_QK_K / 64) / 5 + LP_QK_K / 64 + 2, 0},
    [LP_TYPE_TQ2_0] = {"TQ2_0", LP_QK_K, LP_QK_K / 4 + 2, 0},
    [LP_TYPE_MXFP4] = {"MXFP4", LP_QK, 1 + LP_QK / 2, 1},
    [LP_TYPE_I8] = {"I8", 1, 1, 0},
    [LP_TYPE_I16] = {"I16", 1, 2, 0},
    [LP_TYPE_I32] = {"I32", 1, 4, 0},
    [LP_TYPE_I64] = {"I64", 1, 8, 0},
    [LP_TYPE_F64] = {"F64", 1, 8, 0},
    [LP_TYPE_BF16] = {"BF16", 1, 2, 1},
};

const lp_type_traits_t *lp_type_traits(uint32_t type)
{
    if (type >= LP_TYPE_COUNT || !traits[type].name) return NULL;
    return &traits[type];
}

const char *lp_type_name(uint32_t type)
{
    const lp_type_traits_t *t = lp_type_traits(type);
    return t ? t->name : "unknown";
}

size_t lp_type_row_bytes(uint32_t type, int64_t n)
{
    const lp_type_traits_t *t = lp_type_traits(type);
    if (!t || n < 0 || n % t->block_elems) return 0;
    return (size_t)(n / t->block_elems) * t->block_bytes;
}

uint16_t lp_f32_to_fp16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t absx = x & 0x7fffffff;
    if (absx >= 0x7f800000) /* inf or nan */
        return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000 ? 0x200 : 0));
    if (absx >= 0x477ff000) /* rounds to >= 65520: overflow to inf */
        return (uint16_t)(sign | 0x7c00);
    if (absx < 0x38800000) { /* below the smallest normal half: subnormal */
        float a;
        memcpy(&a, &absx, 4);
        /* a * 2^24 rounded to nearest even is the subnormal mantissa */
        return (uint16_t)(sign | (uint32_t)lrintf(a * 16777216.0f));
    }
    uint32_t mant_odd = (absx >> 13) & 1;
    absx += 0xfff + mant_odd; /* round to nearest even */
    return (uint16_t)(sign | (((absx >> 23) - 112) << 10) | ((absx >> 13) & 0x3ff));
}

uint16_t lp_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}
