/* attn.c - blocked causal attention: the work list of tiles and its run
 * over the pool (the kernels are in simd/attn-*.c).
 *
 * A run is a stretch of consecutive batch tokens of one sequence.  For KV
 * head g, the rows of a run are its (token, query head) pairs with the
 * heads of g's group, token-major: row r is token r / group, head
 * g * group + r % group.  A tile is up to `rows` consecutive rows of one
 * run and one KV head (a tile may end inside a token: Qwen2's group of 7
 * fills 32 rows with 4 4/7 tokens).  Its cost grows with its last token's
 * position, so each run lists its tiles from the last backwards and the
 * threads take them from one shared counter. */
#include "attn.h"

#include "error.h"
#include "matmul.h"
#include "simd/attn-kern.h"
#include "simd/kern.h"

#include <stdatomic.h>
#include <stddef.h>

typedef struct attn_unit {
    int32_t t0;      /* first token of the run */
    int32_t r0, nr;  /* rows r0 .. r0 + nr - 1 of the run */
    int32_t kv_head;
} attn_unit_t;

typedef struct attn_job {
    const lp_attn_batch_t *b;
    const lp__attn_kern_t *kern;
    const lp__attn_kern_t *narrow; /* tiles of at most 8 rows (decode), or NULL */
    const attn_unit_t *units;
    int32_t n_units;
    float *scratch;        /* (n_threads, per_thread) */
    const int64_t *lin_off; /* j * key_stride, for caches without key_off */
    size_t per_thread;     /* floats */
    atomic_int next;
} attn_job_t;

/* The kernel of the current kernel set, and for AVX-512 the AVX2 one for
 * tiles of at most 8 rows: a decode step's GQA group (8 rows on TinyLlama,
 * 7 on Qwen2.5) would fill half of each 16-lane vector. */
static void attn_kern(attn_job_t *j)
{
    j->kern = &lp__attn_scalar;
    j->narrow = NULL;
#if defined(LP_HAVE_X86_KERNELS)
    const lp__kern_t *k = lp__kern_current();
    if (k == &lp__kern_avx512 || k == &lp__kern_vnni) {
        j->kern = &lp__attn_avx512;
        j->narrow = &lp__attn_avx2;
    } else if (k == &lp__kern_avx2) {
        j->kern = &lp__attn_avx2;
    }
#endif
}

/* Fill units (when not NULL) and return how many there are. */
static int32_t plan(const lp_attn_batch_t *b, int32_t rows, attn_unit_t *units)
{
    const int32_t group = b->n_head / b->n_head_kv;
    int32_t n = 0;
    for (int32_t t0 = 0, t1; t0 < b->n_tok; t0 = t1) {
        for (t1 = t0 + 1; t1 < b->n_tok && b->tok_seq[t1] == b->tok_seq[t0]; t1++) {}
        const int32_t n_rows = (t1 - t0) * group, n_tiles = (n_rows + rows - 1) / rows;
        for (int32_t i = n_tiles - 1; i >= 0; i--) {
            for (int32_t g = 0; g < b->n_head_kv; g++, n++) {
                if (!units) continue;
                const int32_t r0 = i * rows;
                units[n] = (attn_unit_t){t0, r0, n_rows - r0 < rows ? n_rows - r0 : rows, g};
            }
        }
    }
    return n;
}

static void run_unit(const attn_job_t *j, const attn_unit_t *u, float *scratch)
{
    const lp_attn_batch_t *b = j->b;
    const int32_t group = b->n_head / b->n_head_kv, hd = b->head_dim;
    const float *q[LP_ATTN_ROWS_MAX];
    float *out[LP_ATTN_ROWS_MAX];
    int32_t n_keys[LP_ATTN_ROWS_MAX], k_lo[LP_ATTN_ROWS_MAX];
    float sink[LP_ATTN_ROWS_MAX];
    for (int32_t r = 0; r < u->nr; r++) {
        const int32_t t = u->t0 + (u->r0 + r) / group;
        const int32_t h = u->kv_head * group + (u->r0 + r) % group;
        const size_t off = ((size_t)t * (size_t)b->n_head + (size_t)h) * (size_t)hd;
        q[r] = b->q + off;
        out[r] = b->out + off;
        n_keys[r] = b->tok_pos[t] + 1;
        k_lo[r] = b->tok_lo ? b->tok_lo[t] : 0;
        sink[r] = b->sinks ? b->sinks[h] : 0;
    }
    const int32_t seq = b->tok_seq[u->t0];
    const int64_t head_off = u->kv_head * b->head_stride;
    const lp__attn_kern_t *kern = j->narrow && u->nr <= 8 ? j->narrow : j->kern;
    const int64_t *off = b->key_off ? b->key_off[seq] : j->lin_off;
    kern->tile(u->nr, q, out, b->tok_lo ? k_lo : NULL, n_keys, b->k[seq] + head_off,
               b->v[seq] + head_off, off, hd, b->scale, b->sinks ? sink : NULL, scratch);
}

static void attn_worker(void *arg, int ith, int nth)
{
    attn_job_t *j = arg;
    float *scratch = j->scratch + (size_t)ith * j->per_thread;
    (void)nth;
    for (int u; (u = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed)) < j->n_units;)
        run_unit(j, &j->units[u], scratch);
}

int lp_attn_run(lp_threadpool_t *pool, const lp_attn_batch_t *b)
{
    if (b->key_stride < b->head_dim || b->head_stride < b->head_dim)
        return lp_error_set(LP_ERR(EINVAL), "attention: key stride %lld and head stride %lld must "
                            "be at least head_dim %d", (long long)b->key_stride,
                            (long long)b->head_stride, b->head_dim);
    attn_job_t j = {.b = b};
    attn_kern(&j);
    j.n_units = plan(b, j.kern->rows, NULL);
    const int nth = lp_threadpool_n_threads(pool);
    const size_t units_bytes = ((size_t)j.n_units * sizeof(attn_unit_t) + 63) & ~(size_t)63;
    /* Stretched caches get one shared table of row offsets, so the kernels
     * have a single way to find a key's row. */
    int32_t n_lin = 0;
    for (int32_t t = 0; !b->key_off && t < b->n_tok; t++)
        if (b->tok_pos[t] + 1 > n_lin) n_lin = b->tok_pos[t] + 1;
    const size_t lin_bytes = ((size_t)n_lin * sizeof(int64_t) + 63) & ~(size_t)63;
    j.per_thread = lp__attn_scratch_floats(j.kern->rows, b->head_dim); /* >= narrow's */
    void *mem = lp_threadpool_scratch(pool, units_bytes + lin_bytes +
                                            (size_t)nth * j.per_thread * sizeof(float));
    if (!mem)
        return lp_error_set(LP_ERR(ENOMEM), "out of memory for the attention scratch (%d tiles, "
                            "head_dim %d)", j.n_units, b->head_dim);
    attn_unit_t *units = mem;
    plan(b, j.kern->rows, units);
    j.units = units;
    int64_t *lin = (int64_t *)((char *)mem + units_bytes);
    for (int32_t p = 0; p < n_lin; p++) lin[p] = (int64_t)p * b->key_stride;
    j.lin_off = lin;
    j.scratch = (float *)((char *)mem + units_bytes + lin_bytes);
    atomic_init(&j.next, 0);
    lp_threadpool_run(pool, attn_worker, &j);
    return 0;
}
