/* matmul.c - the matmul entry point: checks, kernel selection, threading,
 * the exact path and the fast path's driver. */
#include "matmul.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "quant.h"
#include "simd/kern.h"

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

/* Token t's activation row. */
static inline const float *x_row(const lp_matmul_t *mm, int64_t t)
{
    return mm->x + (mm->x_rows ? mm->x_rows[t] : t) * mm->x_stride;
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
            mm->y[t * mm->y_stride + o] = (float)dot_f64(row, x_row(mm, t), mm->n_in);
    }
}

/* LP_ERR(ENOMEM) naming the scratch size that could not be had. */
static int no_scratch(size_t bytes)
{
    return lp_error_set(LP_ERR(ENOMEM), "matmul: out of memory for %zu bytes of scratch", bytes);
}

static int matmul_exact(lp_threadpool_t *pool, const lp_matmul_t *mm)
{
    int nth = pool ? lp_threadpool_n_threads(pool) : 1;
    size_t bytes = (size_t)nth * (size_t)mm->n_in * sizeof(float);
    struct exact_ctx c = {mm, NULL};
    if (pool) {
        c.scratch = lp_threadpool_scratch(pool, bytes);
        if (!c.scratch) return no_scratch(bytes);
        lp_threadpool_run(pool, exact_work, &c);
    } else {
        c.scratch = malloc(bytes);
        if (!c.scratch) return no_scratch(bytes);
        exact_work(&c, 0, 1);
        free(c.scratch);
    }
    return 0;
}

/* ---- kernel selection ------------------------------------------------- */

static const lp__kern_t *const isas[] = {
    &lp__kern_scalar,
#if defined(LP_HAVE_X86_KERNELS)
    &lp__kern_avx2, &lp__kern_avx512, &lp__kern_vnni,
#endif
};

static bool cpu_has(const char *name)
{
    if (!strcmp(name, "scalar")) return true;
#if defined(LP_HAVE_X86_KERNELS)
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                __builtin_cpu_supports("f16c");
    bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                  __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
    if (!strcmp(name, "avx2")) return avx2;
    if (!strcmp(name, "avx512")) return avx512;
    if (!strcmp(name, "vnni")) return avx512 && __builtin_cpu_supports("avx512vnni");
#endif
    return false;
}

static _Atomic(const lp__kern_t *) cur_kern;
static pthread_once_t kern_once = PTHREAD_ONCE_INIT;

static const lp__kern_t *best_kern(void)
{
    const lp__kern_t *best = &lp__kern_scalar;
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++)
        if (cpu_has(isas[i]->name)) best = isas[i];
    return best;
}

static int set_isa(const char *name)
{
    if (!name || !*name || !strcmp(name, "auto")) {
        atomic_store(&cur_kern, best_kern());
        return 0;
    }
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        if (strcmp(isas[i]->name, name)) continue;
        if (!cpu_has(name))
            return lp_error_set(LP_ERR(ENOTSUP), "instruction set %s: not supported by this CPU",
                                name);
        atomic_store(&cur_kern, isas[i]);
        return 0;
    }
    return lp_error_set(LP_ERR(EINVAL), "instruction set %s: unknown (scalar, avx2, avx512, "
                        "vnni or auto)", name);
}

static void kern_init(void)
{
    const char *env = getenv("LMPIPE_ISA");
    if (set_isa(env) == 0) return;
    LP_WARN("LMPIPE_ISA=%s: %s; using %s", env, lp_error_msg(), best_kern()->name);
    atomic_store(&cur_kern, best_kern());
}

static const lp__kern_t *kern_get(void)
{
    pthread_once(&kern_once, kern_init);
    return atomic_load(&cur_kern);
}

const lp__kern_t *lp__kern_current(void)
{
    return kern_get();
}

const char *lp_matmul_isa(void)
{
    return kern_get()->name;
}

bool lp_matmul_isa_supported(const char *name)
{
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++)
        if (!strcmp(isas[i]->name, name)) return cpu_has(name);
    return false;
}

int lp_matmul_set_isa(const char *name)
{
    pthread_once(&kern_once, kern_init);
    return set_isa(name);
}

/* ---- fast path -------------------------------------------------------- */

_Static_assert(LP_MATMUL_PACK_ROWS == LP_PP_ROWS, "one row group");

struct lp_matmul_pack {
    const lp__kern_t *kern; /* whose layout */
    uint32_t type;
    int64_t n_in, n_groups;
    size_t group_bytes, bytes;
    uint8_t *data;          /* n_groups * group_bytes, the caller's */
};

#define ROW_BLOCK 16 /* weight rows per kernel call: their bytes stay in L1
                        while every token streams past them */

#define PRIVATE_XQ_TOK 4 /* up to this many tokens, no shared activations */

#define MAX_SEGS 4 /* products of one call (q, k and v; gate and up) */

struct fast_ctx {
    const lp_matmul_t *mm;  /* n products of the same activations */
    int n;
    lp_threadpool_t *pool;  /* NULL: one thread */
    lp__gemm_fn gemm[MAX_SEGS];
    lp__gemm_pp_fn gemm_pp[MAX_SEGS]; /* NULL: gemm for batches too */
    lp__gemm_pk_fn gemm_pk[MAX_SEGS]; /* non-NULL: mm[s].pk is used */
    uint8_t *pp_scratch;    /* LP_PP_SCRATCH(n_in) bytes per thread */
    size_t pp_stride;
    lp__act_fn quant;       /* NULL: float activations used in place */
    const void *xq;         /* activation rows */
    size_t xrb;             /* bytes per activation row */
    size_t xq_private;      /* non-zero: each thread quantizes every token
                               into its own copy, this many bytes apart */
};

/* True when mm's pack is there and in k's layout. */
static bool pk_usable(const lp__kern_t *k, const lp_matmul_t *mm)
{
    return mm->pk && mm->pk->kern == k;
}

/* Thread ith's rows of one product. */
static void fast_rows(const struct fast_ctx *c, int s, const void *xq, int ith, int nth)
{
    const lp_matmul_t *mm = &c->mm[s];
    size_t wrb = lp_type_row_bytes(mm->type, mm->n_in);
    int64_t per = (mm->n_out + nth - 1) / nth;
    per = (per + LP_PP_ROWS - 1) / LP_PP_ROWS * LP_PP_ROWS; /* whole row groups */
    int64_t o0 = per * ith, o1 = o0 + per < mm->n_out ? o0 + per : mm->n_out;
    if (o0 >= o1) return;
    if (c->gemm_pk[s]) {
        const lp_matmul_pack_t *pk = mm->pk;
        int64_t full = pk->n_groups * LP_PP_ROWS < o1 ? pk->n_groups * LP_PP_ROWS : o1;
        if (full > o0)
            c->gemm_pk[s](mm->n_in, pk->data + (size_t)(o0 / LP_PP_ROWS) * pk->group_bytes,
                          pk->group_bytes, (full - o0) / LP_PP_ROWS, xq, c->xrb, mm->n_tok,
                          mm->y + o0, mm->y_stride, c->pp_scratch + (size_t)ith * c->pp_stride);
        if (full < o1)
            c->gemm[s](mm->n_in, (const uint8_t *)mm->w + (size_t)full * wrb, wrb, o1 - full, xq,
                       c->xrb, mm->n_tok, mm->y + full, mm->y_stride);
        return;
    }
    if (c->gemm_pp[s]) {
        c->gemm_pp[s](mm->n_in, (const uint8_t *)mm->w + (size_t)o0 * wrb, wrb, o1 - o0, xq,
                      c->xrb, mm->n_tok, mm->y + o0, mm->y_stride,
                      c->pp_scratch + (size_t)ith * c->pp_stride);
        return;
    }
    /* One token (types without a gemv kernel) reuses no weight block, so it
     * takes the thread's rows in one call. */
    const int64_t block = mm->n_tok == 1 ? o1 - o0 : ROW_BLOCK;
    for (int64_t o = o0; o < o1; o += block) {
        int64_t nr = o1 - o < block ? o1 - o : block;
        c->gemm[s](mm->n_in, (const uint8_t *)mm->w + (size_t)o * wrb, wrb, nr, xq, c->xrb,
                   mm->n_tok, mm->y + o, mm->y_stride);
    }
}

static void fast_work(void *p, int ith, int nth)
{
    struct fast_ctx *c = p;
    const lp_matmul_t *mm = c->mm;
    const void *xq = c->xq;
    if (c->quant && c->xq_private) {
        /* a few tokens: quantizing them twice is cheaper than a barrier */
        xq = (const uint8_t *)c->xq + (size_t)ith * c->xq_private;
        for (int64_t t = 0; t < mm->n_tok; t++)
            c->quant(mm->x + t * mm->x_stride, (uint8_t *)xq + (size_t)t * c->xrb, mm->n_in);
    } else if (c->quant) {
        for (int64_t t = ith; t < mm->n_tok; t += nth)
            c->quant(mm->x + t * mm->x_stride, (uint8_t *)c->xq + (size_t)t * c->xrb, mm->n_in);
        if (c->pool) lp_threadpool_barrier(c->pool);
    }
    for (int s = 0; s < c->n; s++) fast_rows(c, s, xq, ith, nth);
}

/* How mm's weight type takes its activations: *quant the quantizer (NULL:
 * the float rows in place), and the bytes of one activation row. */
static size_t act_format(const lp__kern_t *k, const lp_matmul_t *mm, lp__act_fn *quant)
{
    switch (lp__act_of(mm->type)) {
    case LP_ACT_Q8A:
        *quant = k->quant_q8a ? k->quant_q8a : lp__quant_q8a_scalar;
        return (size_t)(mm->n_in / LP_QK) * sizeof(lp__q8a_t);
    case LP_ACT_Q8K:
        *quant = k->quant_q8k ? k->quant_q8k : lp__quant_q8k_scalar;
        return (size_t)(mm->n_in / LP_QK_K) * sizeof(lp__q8k_t);
    case LP_ACT_F32:
    default:
        *quant = NULL;
        return (size_t)mm->x_stride * sizeof(float);
    }
}

/* n products sharing x and the activation format of mm[0]. */
static int matmul_fast(lp_threadpool_t *pool, const lp_matmul_t *mm, int n)
{
    const lp__kern_t *k = kern_get();
    struct fast_ctx c = {.mm = mm, .n = n, .pool = pool};
    void *buf = NULL;
    c.xrb = act_format(k, mm, &c.quant);
    if (!c.quant) c.xq = mm->x;
    for (int s = 0; s < n; s++) {
        uint32_t type = mm[s].type;
        c.gemm[s] = k->gemm[type] ? k->gemm[type] : lp__kern_scalar.gemm[type];
        if (pk_usable(k, &mm[s])) {
            c.gemm_pk[s] = k->gemm_pk[type];
            c.pp_stride = (LP_PP_SCRATCH(mm->n_in) + 63) & ~(size_t)63;
        } else if (mm->n_tok >= LP_PP_MIN_TOK && k->gemm_pp[type]) {
            c.gemm_pp[s] = k->gemm_pp[type];
            c.pp_stride = (LP_PP_SCRATCH(mm->n_in) + 63) & ~(size_t)63;
        }
    }
    /* scratch: [quantized activations][per-thread repacking space] */
    int nth = pool ? lp_threadpool_n_threads(pool) : 1;
    size_t xbytes = c.quant ? (c.xrb * (size_t)mm->n_tok + 63) & ~(size_t)63 : 0;
    if (c.quant && nth > 1 && mm->n_tok <= PRIVATE_XQ_TOK) {
        c.xq_private = xbytes;
        xbytes *= (size_t)nth;
    }
    size_t bytes = xbytes + c.pp_stride * (size_t)nth;
    if (bytes) {
        buf = pool ? lp_threadpool_scratch(pool, bytes) : aligned_alloc(64, bytes);
        if (!buf) return no_scratch(bytes);
        if (c.quant) c.xq = buf;
        c.pp_scratch = (uint8_t *)buf + xbytes;
    }
    if (pool) lp_threadpool_run(pool, fast_work, &c);
    else fast_work(&c, 0, 1);
    if (!pool) free(buf);
    return 0;
}

/* ---- packed weights --------------------------------------------------- */

struct pack_ctx {
    lp_matmul_pack_t *pk;
    const void *w;
    size_t wrb, stride;
    uint8_t *scratch;       /* stride bytes per thread */
};

static void pack_work(void *p, int ith, int nth)
{
    struct pack_ctx *c = p;
    lp_matmul_pack_t *pk = c->pk;
    for (int64_t g = ith; g < pk->n_groups; g += nth)
        pk->kern->pack[pk->type](pk->n_in, (const uint8_t *)c->w + (size_t)g * LP_PP_ROWS * c->wrb,
                                 c->wrb, pk->data + (size_t)g * pk->group_bytes,
                                 c->scratch + (size_t)ith * c->stride);
}

size_t lp_matmul_pack_size(uint32_t type, int64_t n_in, int64_t n_out)
{
    const lp__kern_t *k = kern_get();
    if (!lp_matmul_supported(type) || !k->pack[type] || !k->gemm_pk[type] ||
        n_out < LP_PP_ROWS || n_in <= 0 || n_in % lp_type_traits(type)->block_elems)
        return 0;
    return (size_t)(n_out / LP_PP_ROWS) * lp__pk_group_bytes(type, n_in);
}

int lp_matmul_pack(lp_threadpool_t *pool, uint32_t type, const void *w, int64_t n_in,
                   int64_t n_out, void *dst, lp_matmul_pack_t **out)
{
    *out = NULL;
    size_t size = lp_matmul_pack_size(type, n_in, n_out);
    if (!size) return 0;
    lp_matmul_pack_t *pk = calloc(1, sizeof(*pk));
    if (!pk) return lp_error_set(LP_ERR(ENOMEM), "matmul: out of memory for a packed weight");
    pk->kern = kern_get();
    pk->type = type;
    pk->n_in = n_in;
    pk->n_groups = n_out / LP_PP_ROWS;
    pk->group_bytes = lp__pk_group_bytes(type, n_in);
    pk->bytes = size;
    pk->data = dst;
    int nth = pool ? lp_threadpool_n_threads(pool) : 1;
    struct pack_ctx c = {.pk = pk, .w = w, .wrb = lp_type_row_bytes(type, n_in)};
    c.stride = (LP_PP_SCRATCH(n_in) + 63) & ~(size_t)63;
    size_t bytes = c.stride * (size_t)nth;
    c.scratch = pool ? lp_threadpool_scratch(pool, bytes) : aligned_alloc(64, bytes);
    if (!c.scratch) {
        lp_matmul_pack_free(&pk);
        return no_scratch(bytes);
    }
    if (pool) lp_threadpool_run(pool, pack_work, &c);
    else pack_work(&c, 0, 1);
    if (!pool) free(c.scratch);
    *out = pk;
    return 0;
}

const void *lp_matmul_pack_data(const lp_matmul_pack_t *pk, size_t *bytes)
{
    *bytes = pk->bytes;
    return pk->data;
}

void lp_matmul_pack_free(lp_matmul_pack_t **pk_p)
{
    lp_matmul_pack_t *pk = *pk_p;
    if (!pk) return;
    free(pk);
    *pk_p = NULL;
}

/* ---- decode: rows shared out in chunks --------------------------------
 *
 * One token reads every weight byte once, so a decode matmul is a stream
 * of rows, and a thread that the OS delays would hold up the whole step
 * under a static split.  The rows of every matrix in a call (one, or q, k
 * and v, or gate and up) form one list of chunks of about CHUNK_BYTES.
 * Thread t owns a contiguous share of the list and works through it from
 * the front; a thread done with its own share takes chunks still unclaimed
 * from the back of the others'.  Each chunk is claimed by an atomic
 * exchange on its flag.  Within its share a thread's chunks are
 * consecutive rows, so its kernel prefetches across their boundaries. */

#define CHUNK_BYTES (64 << 10)

struct dec_seg {
    const lp_matmul_t *mm;
    lp__gemv_fn gemv;
    size_t wrb;
    int64_t rows;     /* rows per chunk (even: the kernels pair rows) */
    int64_t first;    /* index of the segment's first chunk */
};

struct dec_ctx {
    struct dec_seg seg[MAX_SEGS];
    int n_seg;
    int64_t n_chunks;
    lp__act_fn quant;       /* NULL: float activations */
    size_t xq_private;      /* bytes of each thread's activation copy */
    uint8_t *xq;            /* n_threads copies */
    atomic_uchar *claimed;  /* n_chunks flags */
};

static int seg_of(const struct dec_ctx *c, int64_t k)
{
    int s = 0;
    while (s + 1 < c->n_seg && k >= c->seg[s + 1].first) s++;
    return s;
}

/* Run chunk k; own_end: the first chunk past the caller's own run of
 * consecutive chunks, for the prefetch limit. */
static void dec_chunk(const struct dec_ctx *c, const void *xq, int64_t k, int64_t own_end)
{
    const struct dec_seg *g = &c->seg[seg_of(c, k)];
    const lp_matmul_t *mm = g->mm;
    int64_t r0 = (k - g->first) * g->rows;
    int64_t r1 = r0 + g->rows < mm->n_out ? r0 + g->rows : mm->n_out;
    int64_t pf_end = (own_end - g->first) * g->rows;
    if (pf_end > mm->n_out) pf_end = mm->n_out;
    if (pf_end < r1) pf_end = r1;
    g->gemv(mm->n_in, (const uint8_t *)mm->w + (size_t)r0 * g->wrb, g->wrb, r1 - r0, pf_end - r0,
            xq, mm->y + r0);
}

static void dec_work(void *p, int ith, int nth)
{
    struct dec_ctx *c = p;
    const void *xq = c->seg[0].mm->x;
    if (c->quant) {
        xq = c->xq + (size_t)ith * c->xq_private;
        c->quant(c->seg[0].mm->x, (void *)xq, c->seg[0].mm->n_in);
    }
    int64_t b = c->n_chunks * ith / nth, e = c->n_chunks * (ith + 1) / nth;
    for (int64_t k = b; k < e; k++) {
        if (atomic_exchange_explicit(&c->claimed[k], 1, memory_order_relaxed)) break;
        dec_chunk(c, xq, k, e);
    }
    for (int d = 1; d < nth; d++) { /* the others' shares, from their ends */
        int u = (ith + d) % nth;
        int64_t ub = c->n_chunks * u / nth, ue = c->n_chunks * (u + 1) / nth;
        for (int64_t k = ue - 1; k >= ub; k--) {
            if (atomic_exchange_explicit(&c->claimed[k], 1, memory_order_relaxed)) break;
            dec_chunk(c, xq, k, k + 1);
        }
    }
}

/* True when every product has the activation format of the first (and at
 * most MAX_SEGS): they can share one quantization and one pool run. */
static bool same_act(const lp_matmul_t *mm, int n)
{
    if (n > MAX_SEGS) return false;
    for (int i = 1; i < n; i++)
        if (lp__act_of(mm[i].type) != lp__act_of(mm[0].type)) return false;
    return true;
}

/* ... and decode: one token, a gemv kernel for each (a packed weight is
 * read faster through the batched kernel, even for one token). */
static bool dec_ok(const lp__kern_t *k, const lp_matmul_t *mm, int n)
{
    if (mm[0].n_tok != 1 || !same_act(mm, n)) return false;
    for (int i = 0; i < n; i++)
        if (!k->gemv[mm[i].type] || pk_usable(k, &mm[i])) return false;
    return true;
}

static int matmul_dec(lp_threadpool_t *pool, const lp__kern_t *k, const lp_matmul_t *mm, int n)
{
    struct dec_ctx c = {.n_seg = n};
    for (int i = 0; i < n; i++) {
        struct dec_seg *g = &c.seg[i];
        g->mm = &mm[i];
        g->gemv = k->gemv[mm[i].type];
        g->wrb = lp_type_row_bytes(mm[i].type, mm[i].n_in);
        int64_t rows = (int64_t)(CHUNK_BYTES / g->wrb);
        g->rows = rows < 2 ? 2 : (rows + 1) & ~(int64_t)1;
        g->first = c.n_chunks;
        c.n_chunks += (mm[i].n_out + g->rows - 1) / g->rows;
    }
    size_t xrb = act_format(k, mm, &c.quant);
    int nth = pool ? lp_threadpool_n_threads(pool) : 1;
    c.xq_private = c.quant ? (xrb + 63) & ~(size_t)63 : 0;
    size_t flags = ((size_t)c.n_chunks + 63) & ~(size_t)63;
    size_t bytes = c.xq_private * (size_t)nth + flags;
    uint8_t *buf = pool ? lp_threadpool_scratch(pool, bytes) : aligned_alloc(64, bytes);
    if (!buf) return no_scratch(bytes);
    c.xq = buf;
    c.claimed = (atomic_uchar *)(buf + c.xq_private * (size_t)nth);
    memset((void *)c.claimed, 0, (size_t)c.n_chunks);
    if (pool) lp_threadpool_run(pool, dec_work, &c);
    else dec_work(&c, 0, 1);
    if (!pool) free(buf);
    return 0;
}

/* ---- entry point ------------------------------------------------------ */

int lp_matmul(lp_threadpool_t *pool, const lp_matmul_t *mm, bool exact)
{
    return lp_matmul_multi(pool, mm, 1, exact);
}

int lp_matmul_multi(lp_threadpool_t *pool, const lp_matmul_t *mm, int n, bool exact)
{
    for (int i = 0; i < n; i++) {
        assert(lp_matmul_check(&mm[i]) == 0);
        assert(mm[i].x == mm[0].x && mm[i].n_in == mm[0].n_in && mm[i].n_tok == mm[0].n_tok);
    }
    if (n == 0 || mm[0].n_tok == 0) return 0;
    for (int i = 0; i < n; i++)
        if (mm[i].x_rows) return lp_matmul_grouped(pool, mm, n, exact);
    const lp__kern_t *k = kern_get();
    int rc = 0;
    if (exact) {
        for (int i = 0; i < n && !rc; i++) rc = matmul_exact(pool, &mm[i]);
    } else if (dec_ok(k, mm, n)) {
        rc = matmul_dec(pool, k, mm, n);
    } else if (same_act(mm, n)) {
        rc = matmul_fast(pool, mm, n);
    } else {
        for (int i = 0; i < n && !rc; i++) rc = lp_matmul_multi(pool, &mm[i], 1, false);
    }
    return rc;
}

/* ---- grouped products --------------------------------------------------
 *
 * Each product's activations are quantized (or, for float weights with
 * gathered rows, copied) once into a buffer of its own, shared with the
 * products before it that have the same rows; then every product's rows
 * form one list of chunks, claimed as decode's are (dec_work).  A few
 * rows in all are quantized by every thread into a copy of its own, which
 * spares the barrier; more are split over the threads, then a barrier. */

#define GRP_PRIVATE_ROWS 16

struct grp_prod {
    const lp_matmul_t *mm;
    lp__gemm_fn gemm;
    lp__gemv_fn gemv;       /* one token with a gemv kernel, or NULL */
    lp__gemm_pp_fn gemm_pp; /* enough tokens and a batched kernel, or NULL */
    lp__act_fn quant;       /* NULL: float rows */
    size_t xrb;             /* bytes per activation row */
    int src;                /* the product whose activation buffer it reads */
    bool in_place;          /* float rows read from x itself */
    size_t xq_off;          /* its activation buffer within a copy */
    size_t wrb;
    int64_t rows;           /* rows per chunk */
    int64_t first;          /* its first chunk */
};

struct grp_ctx {
    struct grp_prod *p;
    int n;
    int64_t n_chunks;
    lp_threadpool_t *pool;
    uint8_t *xq;            /* activation copies */
    size_t xq_bytes;        /* of one copy */
    bool private_xq;        /* one copy per thread, xq_bytes apart */
    int64_t n_rows;         /* activation rows to fill in all */
    uint8_t *pp_scratch;
    size_t pp_stride;
    atomic_uchar *claimed;
};

static bool same_rows(const lp_matmul_t *a, const lp_matmul_t *b)
{
    if (a->x != b->x || a->n_tok != b->n_tok || a->n_in != b->n_in || a->x_stride != b->x_stride)
        return false;
    if (a->x_rows == b->x_rows) return true;
    for (int64_t t = 0; t < a->n_tok; t++)
        if ((a->x_rows ? a->x_rows[t] : t) != (b->x_rows ? b->x_rows[t] : t)) return false;
    return true;
}

/* Activation row t of product s into copy xq. */
static void grp_fill(const struct grp_ctx *c, uint8_t *xq, int s, int64_t t)
{
    const struct grp_prod *g = &c->p[s];
    const lp_matmul_t *mm = g->mm;
    uint8_t *dst = xq + g->xq_off + (size_t)t * g->xrb;
    if (g->quant) g->quant(x_row(mm, t), dst, mm->n_in);
    else memcpy(dst, x_row(mm, t), sizeof(float) * (size_t)mm->n_in);
}

static int grp_of(const struct grp_ctx *c, int64_t k)
{
    int lo = 0, hi = c->n - 1; /* the last product whose first chunk is <= k */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (c->p[mid].first <= k) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

static void grp_chunk(const struct grp_ctx *c, const uint8_t *xq, int ith, int64_t k, int64_t own_end)
{
    const int s = grp_of(c, k);
    const struct grp_prod *g = &c->p[s];
    const lp_matmul_t *mm = g->mm;
    const int64_t r0 = (k - g->first) * g->rows;
    const int64_t r1 = r0 + g->rows < mm->n_out ? r0 + g->rows : mm->n_out;
    const uint8_t *w = (const uint8_t *)mm->w + (size_t)r0 * g->wrb;
    const void *x = g->in_place ? (const void *)mm->x : xq + c->p[g->src].xq_off;
    if (g->gemv) {
        int64_t pf_end = (own_end - g->first) * g->rows;
        if (pf_end > mm->n_out) pf_end = mm->n_out;
        if (pf_end < r1) pf_end = r1;
        g->gemv(mm->n_in, w, g->wrb, r1 - r0, pf_end - r0, x, mm->y + r0);
    } else if (g->gemm_pp) {
        g->gemm_pp(mm->n_in, w, g->wrb, r1 - r0, x, g->xrb, mm->n_tok, mm->y + r0, mm->y_stride,
                   c->pp_scratch + (size_t)ith * c->pp_stride);
    } else {
        for (int64_t o = r0; o < r1; o += ROW_BLOCK) {
            int64_t nr = r1 - o < ROW_BLOCK ? r1 - o : ROW_BLOCK;
            g->gemm(mm->n_in, (const uint8_t *)mm->w + (size_t)o * g->wrb, g->wrb, nr, x, g->xrb,
                    mm->n_tok, mm->y + o, mm->y_stride);
        }
    }
}

static void grp_work(void *p, int ith, int nth)
{
    struct grp_ctx *c = p;
    uint8_t *xq = c->xq;
    if (c->private_xq) {
        xq += (size_t)ith * c->xq_bytes;
        for (int s = 0; s < c->n; s++)
            if (c->p[s].src == s && !c->p[s].in_place)
                for (int64_t t = 0; t < c->p[s].mm->n_tok; t++) grp_fill(c, xq, s, t);
    } else if (c->n_rows) {
        int64_t i = 0;
        for (int s = 0; s < c->n; s++) {
            if (c->p[s].src != s || c->p[s].in_place) continue;
            for (int64_t t = 0; t < c->p[s].mm->n_tok; t++, i++)
                if (i % nth == ith) grp_fill(c, xq, s, t);
        }
        if (c->pool) lp_threadpool_barrier(c->pool);
    }
    int64_t b = c->n_chunks * ith / nth, e = c->n_chunks * (ith + 1) / nth;
    for (int64_t k = b; k < e; k++) {
        if (atomic_exchange_explicit(&c->claimed[k], 1, memory_order_relaxed)) break;
        grp_chunk(c, xq, ith, k, e);
    }
    for (int d = 1; d < nth; d++) { /* the others' shares, from their ends */
        int u = (ith + d) % nth;
        int64_t ub = c->n_chunks * u / nth, ue = c->n_chunks * (u + 1) / nth;
        for (int64_t k = ue - 1; k >= ub; k--) {
            if (atomic_exchange_explicit(&c->claimed[k], 1, memory_order_relaxed)) break;
            grp_chunk(c, xq, ith, k, k + 1);
        }
    }
}

int lp_matmul_grouped(lp_threadpool_t *pool, const lp_matmul_t *mm, int n, bool exact)
{
    int rc = 0;
    if (exact) {
        for (int i = 0; i < n && !rc; i++)
            if (mm[i].n_tok > 0) rc = matmul_exact(pool, &mm[i]);
        return rc;
    }
    const lp__kern_t *k = kern_get();
    int nth = pool ? lp_threadpool_n_threads(pool) : 1;
    /* the product table lives on the heap: a step has up to a few hundred */
    struct grp_prod *p = malloc(sizeof(*p) * (size_t)(n > 0 ? n : 1));
    if (!p) return no_scratch(sizeof(*p) * (size_t)n);
    struct grp_ctx c = {.p = p, .pool = pool};
    size_t xq_bytes = 0;
    for (int i = 0; i < n; i++) {
        const lp_matmul_t *m = &mm[i];
        assert(lp_matmul_check(m) == 0 && !m->pk);
        if (m->n_tok == 0) continue;
        struct grp_prod *g = &p[c.n];
        memset(g, 0, sizeof(*g));
        g->mm = m;
        const uint32_t type = m->type;
        g->gemm = k->gemm[type] ? k->gemm[type] : lp__kern_scalar.gemm[type];
        g->wrb = lp_type_row_bytes(type, m->n_in);
        lp__act_fn quant;
        size_t xrb = act_format(k, m, &quant);
        g->quant = quant;
        if (!quant) xrb = sizeof(float) * (size_t)m->n_in;
        g->in_place = !quant && !m->x_rows;
        g->xrb = g->in_place ? sizeof(float) * (size_t)m->x_stride : xrb;
        g->src = c.n;
        for (int j = 0; j < c.n && !g->in_place; j++)
            if (!p[j].in_place && p[j].src == j && p[j].quant == quant && same_rows(p[j].mm, m)) {
                g->src = j;
                break;
            }
        if (g->src == c.n && !g->in_place) {
            g->xq_off = xq_bytes;
            xq_bytes += (g->xrb * (size_t)m->n_tok + 63) & ~(size_t)63;
            c.n_rows += m->n_tok;
        }
        int64_t rows = (int64_t)(CHUNK_BYTES / g->wrb);
        if (m->n_tok == 1 && k->gemv[type]) {
            g->gemv = k->gemv[type];
            g->rows = rows < 2 ? 2 : (rows + 1) & ~(int64_t)1;
        } else {
            if (m->n_tok >= LP_PP_MIN_TOK && k->gemm_pp[type]) {
                g->gemm_pp = k->gemm_pp[type];
                const size_t st = (LP_PP_SCRATCH(m->n_in) + 63) & ~(size_t)63;
                if (st > c.pp_stride) c.pp_stride = st;
            }
            g->rows = (rows + LP_PP_ROWS - 1) / LP_PP_ROWS * LP_PP_ROWS;
            if (g->rows < LP_PP_ROWS) g->rows = LP_PP_ROWS;
        }
        g->first = c.n_chunks;
        c.n_chunks += (m->n_out + g->rows - 1) / g->rows;
        c.n++;
    }
    if (!c.n) {
        free(p);
        return 0;
    }
    c.private_xq = nth > 1 && c.n_rows <= GRP_PRIVATE_ROWS;
    c.xq_bytes = xq_bytes;
    size_t copies = c.private_xq ? (size_t)nth : 1;
    size_t flags = ((size_t)c.n_chunks + 63) & ~(size_t)63;
    size_t bytes = xq_bytes * copies + c.pp_stride * (size_t)nth + flags;
    uint8_t *buf = pool ? lp_threadpool_scratch(pool, bytes) : aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!buf) {
        free(p);
        return no_scratch(bytes);
    }
    c.xq = buf;
    c.pp_scratch = buf + xq_bytes * copies;
    c.claimed = (atomic_uchar *)(c.pp_scratch + c.pp_stride * (size_t)nth);
    memset((void *)c.claimed, 0, (size_t)c.n_chunks);
    if (pool) lp_threadpool_run(pool, grp_work, &c);
    else grp_work(&c, 0, 1);
    if (!pool) free(buf);
    free(p);
    return 0;
}
