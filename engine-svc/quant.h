/* quant.h - reference dequantization and quantization of GGUF rows.
 *
 * These are the plain-C reference implementations: the exact matmul path,
 * `lmpipe synth` and the tests use them.  Block layouts follow the GGUF
 * format (ggml's block_q4_0 ... block_q6_K); docs/KERNELS.md lists them. */
#ifndef LP_QUANT_H
#define LP_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "ggml-type.h"

/* True when lp_dequant_row / lp_quant_row handle `type`: F32, F16, BF16,
 * Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, MXFP4. */
bool lp_quant_supported(uint32_t type);

/* Expand `n` elements (a whole number of blocks) of `src` into `dst`.
 * The caller checks the type with lp_quant_supported() and the length with
 * lp_type_row_bytes(); an unsupported type or length is a programmer error. */
void lp_dequant_row(uint32_t type, const void *src, float *dst, int64_t n);

/* Quantize `n` floats into lp_type_row_bytes(type, n) bytes at `dst`
 * (round to nearest; every block is valid).  Returns 0, or LP_ERR(EINVAL)
 * with a message when the type is unsupported or n is not a whole number of
 * blocks. */
int lp_quant_row(uint32_t type, const float *src, void *dst, int64_t n);

/* ---- block layouts (bytes are little-endian halves) ------------------- */

typedef struct { uint16_t d; uint8_t qs[LP_QK / 2]; } lp_block_q4_0_t;
typedef struct { uint16_t d, m; uint8_t qs[LP_QK / 2]; } lp_block_q4_1_t;
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[LP_QK / 2]; } lp_block_q5_0_t;
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[LP_QK / 2]; } lp_block_q5_1_t;
typedef struct { uint16_t d; int8_t qs[LP_QK]; } lp_block_q8_0_t;
/* MXFP4 (OCP microscaling FP4): an E8M0 exponent e, then 32 E2M1 values as
 * nibbles (element j low nibble of qs[j], j+16 the high one); a value is
 * lp_mxfp4_kvalues[nibble] * 2^(e - 128) (the table holds twice the E2M1
 * values, hence -128 instead of -127). */
typedef struct { uint8_t e; uint8_t qs[LP_QK / 2]; } lp_block_mxfp4_t;
extern const int8_t lp_mxfp4_kvalues[16];

/* 2^(e - 128) as ggml's GGML_E8M0_TO_FP32_HALF builds it (a subnormal for
 * e 0 and 1). */
static inline float lp_e8m0_half(uint8_t e)
{
    union { uint32_t u; float f; } v;
    v.u = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    return v.f;
}
typedef struct {
    uint16_t d, dmin;                 /* super-block scales of scales and mins */
    uint8_t scales[LP_K_SCALE_SIZE];  /* 8 x (6-bit scale, 6-bit min) */
    uint8_t qs[LP_QK_K / 2];          /* 4-bit values */
} lp_block_q4_k_t;
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[LP_K_SCALE_SIZE];
    uint8_t qh[LP_QK_K / 8];          /* 5th bit */
    uint8_t qs[LP_QK_K / 2];          /* low 4 bits */
} lp_block_q5_k_t;
typedef struct {
    uint8_t ql[LP_QK_K / 2];          /* low 4 bits */
    uint8_t qh[LP_QK_K / 4];          /* high 2 bits */
    int8_t scales[LP_QK_K / 16];      /* 16 x 8-bit scales */
    uint16_t d;
} lp_block_q6_k_t;

_Static_assert(sizeof(lp_block_q4_0_t) == 18, "q4_0 block");
_Static_assert(sizeof(lp_block_q4_1_t) == 20, "q4_1 block");
_Static_assert(sizeof(lp_block_q5_0_t) == 22, "q5_0 block");
_Static_assert(sizeof(lp_block_q5_1_t) == 24, "q5_1 block");
_Static_assert(sizeof(lp_block_q8_0_t) == 34, "q8_0 block");
_Static_assert(sizeof(lp_block_mxfp4_t) == 17, "mxfp4 block");
_Static_assert(sizeof(lp_block_q4_k_t) == 144, "q4_K block");
_Static_assert(sizeof(lp_block_q5_k_t) == 176, "q5_K block");
_Static_assert(sizeof(lp_block_q6_k_t) == 210, "q6_K block");

/* The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block. */
static inline void lp_k_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

#endif
