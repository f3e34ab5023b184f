/* matmul.c - the matmul entry point: checks, threading, the exact path. */
#include "matmul.h"

#include <assert.h>
#include <stdlib.h>

#include "error.h"
#include "quant.h"

bool lp_matmul_supported(uint32_t type)
{
    return lp_quant_supported(type);
}

int lp_matmul_check(const lp_matmul_t *mm)
{
    if (!lp_matmul_supported(mm->type))
        return lp_error_set(LP_ERR(EINVAL), "matmul: weight type %s (%u) is not supported",
                            lp_type_name(mm->type), mm->type);
    const lp_type_traits_t *t = lp_type_traits(mm->type);
    if (mm->n_in <= 0 || mm->n_in % t->block_elems)
        return lp_error_set(LP_ERR(EINVAL), "matmul: n_in %lld is not a positive multiple of "
                            "the %s block size %u", (long long)mm->n_in, t->name, t->block_elems);
    if (mm->n_out <= 0 || mm->n_tok < 0)
        return lp_error_set(LP_ERR(EINVAL), "matmul: bad n_out %lld or n_tok %lld",
                            (long long)mm->n_out, (long long)mm->n_tok);
    if (mm->n_tok > 1 && mm->x_stride < mm->n_in)
        return lp_error_set(LP_ERR(EINVAL), "matmul: x_stride %lld < n_in %lld",
                            (long long)mm->x_stride, (long long)mm->n_in);
    if (mm->n_tok > 1 && mm->y_stride < mm->n_out)
        return lp_error_set(LP_ERR(EINVAL), "matmul: y_stride %lld < n_out %lld",
                            (long long)mm->y_stride, (long long)mm->n_out);
    if (!mm->w || (mm->n_tok > 0 && (!mm->x || !mm->y)))
        return lp_error_set(LP_ERR(EINVAL), "matmul: NULL w, x or y");
    return 0;
}

/* ---- exact path ------------------------------------------------------- */

struct exact_ctx {
    const lp_matmul_t *mm;
    float *scratch; /* one n_in row per thread */
};

static double dot_f64(const float *a, const float *b, int64_t n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += (double)a[i] * b[i];
        s1 += (double)a[i + 1] * b[i + 1];
        s2 += (double)a[i + 2] * b[i + 2];
        s3 += (double)a[i + 3] * b[i + 3];
    }
    for (; i < n; i++) s0 += (double)a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

static void exact_work(void *p, int ith, int nth)
{
    struct exact_ctx *c = p;
    const lp_matmul_t *mm = c->mm;
    size_t rb = lp_type_row_bytes(mm->type, mm->n_in);
    float *row = c->scratch + (size_t)ith * (size_t)mm->n_in;
    int64_t per = (mm->n_out + nth - 1) / nth;
    int64_t o0 = per * ith, o1 = o0 + per < mm->n_out ? o0 + per : mm->n_out;
    for (int64_t o = o0; o < o1; o++) {
        lp_dequant_row(mm->type, (const uint8_t *)mm->w + (size_t)o * rb, row, mm->n_in);
        for (int64_t t = 0; t < mm->n_tok; t++)
            mm->y[t * mm->y_stride + o] = (float)dot_f64(row, mm->x + t * mm->x_stride, mm->n_in);
    }
}

static void matmul_exact(lp_threadpool_t *pool, const lp_matmul_t *mm)
{
    int nth = pool ? lp_threadpool_n_threads(pool) : 1;
    size_t bytes = (size_t)nth * (size_t)mm->n_in * sizeof(float);
    struct exact_ctx c = {mm, NULL};
    if (pool) {
        c.scratch = lp_threadpool_scratch(pool, bytes);
        assert(c.scratch && "matmul: out of memory for scratch");
        lp_threadpool_run(pool, exact_work, &c);
    } else {
        c.scratch = malloc(bytes);
        assert(c.scratch && "matmul: out of memory for scratch");
        exact_work(&c, 0, 1);
        free(c.scratch);
    }
}

/* ---- entry point ------------------------------------------------------ */

void lp_matmul(lp_threadpool_t *pool, const lp_matmul_t *mm, bool exact)
{
    assert(lp_matmul_check(mm) == 0);
    if (mm->n_tok == 0) return;
    (void)exact; /* the fast kernels come in a later step; until then both
                    paths are the reference */
    matmul_exact(pool, mm);
}
