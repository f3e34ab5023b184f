/* matmul.h - y = W x for quantized weight matrices, on the CPU.
 *
 * Two paths:
 *  - exact: dequantize each weight row (quant.h) and dot it with the float
 *    activations, accumulating in double.  The reference the `exact/`
 *    goldens check.
 *  - fast: quantize the activations once per call (Q8_0-style blocks for the
 *    legacy types, Q8_K-style super-blocks for the K-quants, as llama.cpp
 *    does) and take integer dot products with SIMD kernels chosen at run
 *    time (docs/KERNELS.md).  F32/F16/BF16 weights dot with float
 *    activations.
 *
 * Scratch memory: lp_matmul() keeps its temporaries in the pool's scratch
 * buffer (lp_threadpool_scratch), which grows to the largest call seen and
 * is then reused, so steady-state calls do not allocate. */
#ifndef LP_MATMUL_H
#define LP_MATMUL_H

#include <stdbool.h>
#include <stdint.h>

#include "ggml-type.h"
#include "threadpool.h"

typedef struct lp_matmul_pack lp_matmul_pack_t;

typedef struct lp_matmul {
    uint32_t type;        /* weight type (enum lp_type) */
    const void *w;        /* n_out rows of n_in elements, row-major (GGUF ne0 = n_in) */
    const lp_matmul_pack_t *pk; /* NULL, or w packed by lp_matmul_pack */
    int64_t n_in, n_out;
    const float *x;       /* n_tok rows of n_in floats, row stride x_stride floats */
    int64_t x_stride, n_tok;
    float *y;             /* n_tok rows of n_out floats, row stride y_stride floats */
    int64_t y_stride;
    const int32_t *x_rows; /* NULL, or n_tok row indices: token t's activations are row
                              x_rows[t] of x (lp_matmul_grouped and the exact path only) */
} lp_matmul_t;

/* True when lp_matmul handles weights of `type` (the types of quant.h). */
bool lp_matmul_supported(uint32_t type);

/* Check a call's shapes: supported type, n_in a whole number of blocks,
 * strides >= n_in / n_out, non-NULL pointers.  Returns 0 or LP_ERR(EINVAL)
 * with a message naming the field.  lp_matmul itself only asserts these,
 * so a loader checks each weight once with this. */
int lp_matmul_check(const lp_matmul_t *mm);

/* y[t][o] = sum_i w[o][i] * x[t][i].  exact: dequantize each weight row
 * and dot in float with no rounding of activations (the reference path).
 * `pool` may be NULL (runs on the caller, allocating its scratch).
 * Returns 0, or LP_ERR(ENOMEM) when the scratch cannot be allocated (y is
 * then not written). */
int lp_matmul(lp_threadpool_t *pool, const lp_matmul_t *mm, bool exact);

/* n products of the same activations (same x, n_in and n_tok): q, k and
 * v, or gate and up.  One token runs them in one pass of the pool.
 * Returns 0 or LP_ERR(ENOMEM) as lp_matmul (some products may then be
 * written, others not). */
int lp_matmul_multi(lp_threadpool_t *pool, const lp_matmul_t *mm, int n, bool exact);

/* n independent products, each with its own weights, activations (which
 * may be gathered rows of x: x_rows) and output, in one run of the pool:
 * the chosen experts of a mixture-of-experts step, each over the tokens
 * that chose it.  Products with the same x, x_rows contents and
 * activation format share one quantization of their activations.  Work is
 * shared out in chunks of rows of every product, as one decode matmul's
 * (one token: the gemv kernels).  Packed forms are not used.  Returns 0
 * or LP_ERR(ENOMEM) (some products may then be written). */
int lp_matmul_grouped(lp_threadpool_t *pool, const lp_matmul_t *mm, int n, bool exact);

/* ---- weights packed at load ------------------------------------------
 *
 * The batched kernel wants groups of 16 weight rows interleaved; without
 * a pack it rebuilds that order on every call, which for decode batches of
 * 8-16 tokens costs about what the dot products do.  lp_matmul_pack does
 * it once, into a copy about the size of w that the kernel reads directly
 * for any number of tokens.  Batches of 8 or more get bit for bit the
 * result of the unpacked batch kernel.  Rows past the last whole group and
 * the exact path still read w, which must stay mapped (its other pages
 * need not stay resident).  Types and ISAs without a packed form, and
 * matrices of fewer than 16 rows, give *out = NULL and return 0; a pack
 * made under one ISA is not read under another. */
#define LP_MATMUL_PACK_ROWS 16 /* rows per packed group */
/* Bytes of w's packed form, 0 when it has none (a multiple of 32). */
size_t lp_matmul_pack_size(uint32_t type, int64_t n_in, int64_t n_out);
/* dst: lp_matmul_pack_size bytes, 64-byte aligned, that the caller keeps
 * (the CPU backend lays all its packs out in one mapping) until
 * lp_matmul_pack_free. */
int lp_matmul_pack(lp_threadpool_t *pool, uint32_t type, const void *w, int64_t n_in,
                   int64_t n_out, void *dst, lp_matmul_pack_t **out);
/* The packed bytes: as many as the whole groups of rows they pack, so
 * they stand for the first *bytes bytes of w. */
const void *lp_matmul_pack_data(const lp_matmul_pack_t *pk, size_t *bytes);
void lp_matmul_pack_free(lp_matmul_pack_t **pk_p);

/* ---- instruction set of the fast path -------------------------------- */

/* The fast kernels in use: "scalar", "avx2", "avx512" or "vnni".  The
 * first call picks the best the CPU supports, or LMPIPE_ISA when it names
 * one the CPU supports (otherwise a warning and the best). */
const char *lp_matmul_isa(void);
/* True when `name` is compiled in and this CPU runs it. */
bool lp_matmul_isa_supported(const char *name);
/* Switch the fast kernels for the whole process ("auto" or NULL: the
 * best).  LP_ERR(ENOTSUP) when the CPU lacks it, LP_ERR(EINVAL) for an
 * unknown name.  Not to be called while a matmul runs. */
int lp_matmul_set_isa(const char *name);

#endif
