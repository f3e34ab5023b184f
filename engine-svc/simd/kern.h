/* kern.h - internal: the fast matmul kernels of one instruction set.
 *
 * The fast path quantizes activations once per matmul into one of two
 * formats and then runs a per-type GEMM kernel over a block of weight rows
 * and a block of tokens.  Each ISA (scalar, avx2, avx512, vnni) fills one
 * lp__kern_t; matmul.c picks one at run time. */
#ifndef LP_KERN_H
#define LP_KERN_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "ggml-type.h"

/* Activations for the legacy types: 32 values rounded to int8 with a
 * shared scale, as llama.cpp's block_q8_0/q8_1: d = fp16(amax/127),
 * qs = round_even(x * 127/amax).  sum = sum of qs; s = fp16(amax/127 * sum)
 * (llama.cpp's q8_1 s, used by Q4_1/Q5_1). */
typedef struct {
    int8_t qs[LP_QK];
    float d;      /* fp16-rounded */
    int16_t sum;
    uint16_t s;   /* fp16 */
    float fsum;   /* sum as a float, for the batched kernels */
    uint32_t pad;
} lp__q8a_t;

/* Activations for the K-quants, as llama.cpp's block_q8_K:
 * iscale = -127/max (max: the value of largest magnitude), qs =
 * min(127, round_even(iscale * x)), d = 1/iscale; bsums[j] = sum of
 * qs[16j .. 16j+15], also as floats in fbsums, and fbsums32[j] the sum of
 * qs[32j .. 32j+31].  448 bytes, so qs stays 64-byte aligned. */
typedef struct {
    int8_t qs[LP_QK_K];
    int16_t bsums[LP_QK_K / 16];
    float d;
    uint8_t pad[28];
    float fbsums[LP_QK_K / 16];
    float fbsums32[LP_QK_K / 32];
    uint8_t pad2[32];
} lp__q8k_t;

_Static_assert(sizeof(lp__q8a_t) == 48, "q8a block");
_Static_assert(sizeof(lp__q8k_t) == 448, "q8k block");

/* How a weight type wants its activations. */
enum lp__act { LP_ACT_F32, LP_ACT_Q8A, LP_ACT_Q8K };

/* y[t*ys + r] = dot(weight row r, activation row t) for r < nr, t < nt.
 * w: nr rows of wrb bytes; xq: nt activation rows of xrb bytes (floats for
 * LP_ACT_F32, lp__q8a_t / lp__q8k_t blocks otherwise); n elements per row. */
typedef void (*lp__gemm_fn)(int64_t n, const void *w, size_t wrb, int64_t nr,
                            const void *xq, size_t xrb, int64_t nt, float *y, int64_t ys);

/* The one-token (decode) variant: y[r] = dot(weight row r, xq) for r < nr;
 * rows nr .. nr_pf-1 follow in memory and may be prefetched, since the
 * caller reads them next. */
typedef void (*lp__gemv_fn)(int64_t n, const void *w, size_t wrb, int64_t nr, int64_t nr_pf,
                            const void *xq, float *y);

/* The batched (prefill) variant: the same result for nr rows and nt
 * tokens, reusing each unpacked weight block across many tokens.  scratch:
 * LP_PP_SCRATCH(n) bytes, 64-byte aligned, owned by the calling thread. */
typedef void (*lp__gemm_pp_fn)(int64_t n, const void *w, size_t wrb, int64_t nr,
                               const void *xq, size_t xrb, int64_t nt, float *y, int64_t ys,
                               void *scratch);
#define LP_PP_SCRATCH(n) ((size_t)(n) * 24 + 256)
#define LP_PP_ROWS 16 /* row-group size: callers give each thread a multiple */
#define LP_PP_MIN_TOK 8 /* fewer tokens: the per-row kernels */

/* Weights packed at load (lp_matmul_pack): pack writes one group of
 * LP_PP_ROWS rows (w: rows of wrb bytes) as lp__pk_group_bytes(type, n)
 * bytes at dst, using LP_PP_SCRATCH(n) bytes of 64-byte aligned scratch;
 * gemm_pk is gemm_pp over ng such groups, pk their first (scratch as
 * gemm_pp's). */
typedef void (*lp__pack_fn)(int64_t n, const void *w, size_t wrb, uint8_t *dst, void *scratch);
typedef void (*lp__gemm_pk_fn)(int64_t n, const void *pk, size_t gb, int64_t ng,
                               const void *xq, size_t xrb, int64_t nt, float *y, int64_t ys,
                               void *scratch);

/* Bytes of one packed record: a group's rows over one block (32 weights,
 * a 256-weight super-block for Q6_K); the layouts are in kern-x86.c.
 * 0: no packed form. */
static inline size_t lp__pk_rec_bytes(uint32_t type)
{
    switch (type) {
    case LP_TYPE_Q4_0: return 288;
    case LP_TYPE_Q5_0: return 352;
    case LP_TYPE_Q8_0: return 544;
    case LP_TYPE_Q6_K: return 3360;
    default: return 0;
    }
}

/* Bytes of one packed group of n weights a row. */
static inline size_t lp__pk_group_bytes(uint32_t type, int64_t n)
{
    return (size_t)(n / (type == LP_TYPE_Q6_K ? LP_QK_K : LP_QK)) * lp__pk_rec_bytes(type);
}

/* Quantize n floats (a whole number of blocks) into activation blocks. */
typedef void (*lp__act_fn)(const float *x, void *xq, int64_t n);

typedef struct lp__kern {
    const char *name;
    lp__gemm_fn gemm[LP_TYPE_COUNT]; /* NULL: use the scalar kernel */
    lp__gemv_fn gemv[LP_TYPE_COUNT];       /* may be NULL: gemm serves one token too */
    lp__gemm_pp_fn gemm_pp[LP_TYPE_COUNT]; /* may be NULL: gemm serves batches too */
    lp__pack_fn pack[LP_TYPE_COUNT];       /* may be NULL: no packed form */
    lp__gemm_pk_fn gemm_pk[LP_TYPE_COUNT]; /* set where pack is */
    lp__act_fn quant_q8a;            /* NULL: scalar */
    lp__act_fn quant_q8k;
    float (*dot_f32)(const float *a, const float *b, int64_t n);
    void (*axpy_f32)(float *y, float s, const float *x, int64_t n);
    /* out[i] = silu(g[i]) * u[i]; out may alias g */
    void (*swiglu_f32)(float *out, const float *g, const float *u, int64_t n);
    /* NULL: lp_vec.c falls back on the references of ops.c */
    void (*add_rmsnorm_f32)(float *y, float *x, const float *r, const float *w, int64_t n,
                            float eps);
    void (*rope_f32)(float *x, int32_t n_heads, int32_t head_dim, int32_t n_rot,
                     const float *cs, const float *sn, bool neox);
    /* lp_op_geglu with the table of lp_op_gelu_table(); may be NULL */
    void (*geglu_f32)(float *out, const float *g, const float *u, int64_t n, const float *table);
    /* x = tanh(x / cap) * cap; may be NULL */
    void (*softcap_f32)(float *x, int64_t n, float cap);
} lp__kern_t;

/* The kernel set in use (matmul.c chooses it). */
const lp__kern_t *lp__kern_current(void);

/* Activation format of a weight type (the type must be supported). */
enum lp__act lp__act_of(uint32_t type);

extern const lp__kern_t lp__kern_scalar;
#if defined(LP_HAVE_X86_KERNELS)
extern const lp__kern_t lp__kern_avx2;
extern const lp__kern_t lp__kern_avx512;
extern const lp__kern_t lp__kern_vnni;
#endif
/* act-x86.c (x86-64 only), one per float vector width */
void lp__swiglu_avx2(float *out, const float *g, const float *u, int64_t n);
void lp__swiglu_avx512(float *out, const float *g, const float *u, int64_t n);
void lp__add_rmsnorm_avx2(float *y, float *x, const float *r, const float *w, int64_t n, float eps);
void lp__add_rmsnorm_avx512(float *y, float *x, const float *r, const float *w, int64_t n, float eps);
void lp__rope_avx2(float *x, int32_t n_heads, int32_t head_dim, int32_t n_rot, const float *cs,
                   const float *sn, bool neox);
void lp__rope_avx512(float *x, int32_t n_heads, int32_t head_dim, int32_t n_rot, const float *cs,
                     const float *sn, bool neox);
void lp__geglu_avx2(float *out, const float *g, const float *u, int64_t n, const float *table);
void lp__geglu_avx512(float *out, const float *g, const float *u, int64_t n, const float *table);
void lp__softcap_avx2(float *x, int64_t n, float cap);
void lp__softcap_avx512(float *x, int64_t n, float cap);

/* Scalar activation quantizers (the reference for the SIMD ones). */
void lp__quant_q8a_scalar(const float *x, void *xq, int64_t n);
void lp__quant_q8k_scalar(const float *x, void *xq, int64_t n);

#endif
