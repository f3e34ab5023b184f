/* forward-cpu.c - the CPU backend: the reference forward pass of llama and
 * qwen2 over a batch of sequences.
 *
 * Layout: activations are row-major [token][n_embd]; q is [token][head][dim],
 * k and v are [token][kv_head][dim].  The KV cache is a pool of blocks of
 * kv_block positions, [layer][block][kv_head][pos in block][dim] in float32
 * (head-major inside a block, so attention streams one head's positions of
 * a block); an entry reaches position p through its block table, block
 * blocks[p / kv_block].  The contiguous layout is the same pool with one
 * block of n_ctx positions per seq_id.  Each step turns every entry's table
 * into one offset per position (seq_off), which the cache writes, the
 * blocked attention and the exact path share.  Tokens of one batch are laid
 * out entry after entry, oldest first; token t of the batch belongs to batch
 * entry tok_seq[t] at position tok_pos[t].
 *
 * Attention: the fast path is attn.c's blocked attention (tiles of the
 * query rows of one GQA group over consecutive tokens of one sequence,
 * online softmax; its scratch layouts are in simd/attn-x86.c); the `exact`
 * path runs lp_op_attn_head per (token, head), accumulating its softmax sum
 * in double. */
#include "backend.h"

#include "attn.h"
#include "error.h"
#include "gguf.h"
#include "log.h"
#include "matmul.h"
#include "ops.h"
#include "quant.h"
#include "threadpool.h"
#include "vec.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

typedef struct cpu_ctx {
    const lp_model_t *m;
    lp_engine_params_t p;
    lp_threadpool_t *pool;
    /* KV pool: mapped, not reserved, so pages become resident only as
     * positions are written; K and V alike. */
    float *kv_k, *kv_v;   /* (n_layer, kv_blocks, n_head_kv, kv_block, head_dim) */
    size_t kv_bytes;      /* of each mapping */
    int64_t kv_layer;     /* floats per layer: kv_blocks * block_stride */
    int64_t block_stride; /* floats per block of one layer: n_head_kv * kv_block * head_dim */
    int64_t head_stride;  /* floats per KV head of a block: kv_block * head_dim */
    int32_t kv_block;
    int64_t *key_off;     /* (key_off_cap) offsets of each entry's positions, entry after entry */
    size_t key_off_cap;
    int64_t **seq_off;    /* (max_seqs) each batch entry's part of key_off */
    int32_t kv_dim;       /* n_head_kv * head_dim */
    int32_t q_dim;        /* n_head * head_dim */
    /* scratch, sized for max_batch_tokens */
    float *x;             /* (T, n_embd) residual stream */
    float *xn;            /* (T, n_embd) normalised */
    float *q;             /* (T, q_dim) */
    float *k;             /* (T, kv_dim) */
    float *v;             /* (T, kv_dim) */
    float *att;           /* (T, q_dim) attention output */
    float *proj;          /* (T, n_embd) output of wo and ffn_down */
    lp_matmul_pack_t **pk; /* (n_layer * N_LAYER_MATS + 1): packed matrices, the
                              output last; NULL when not packing */
    uint8_t *pk_arena;    /* their bytes, in that order (the order of use) */
    size_t pk_bytes;      /* of the arena's mapping */
    float *gate;          /* (T, n_ff) */
    float *up;            /* (T, n_ff) */
    float *scores;        /* (n_threads, n_ctx), exact attention only */
    float *gather;        /* (n_threads, 2, n_ctx, head_dim): an exact head's K and V rows
                             when they span blocks */
    const float **k_layer, **v_layer; /* (max_seqs) one layer's pool, per batch entry */
    float *logit_tmp;     /* (LOGIT_CHUNK, n_vocab) when rows are scattered */
    int32_t *tok_seq;     /* (T) batch entry of each token */
    int32_t *tok_pos;     /* (T) */
    float *rope_cs, *rope_sn; /* (T, n_rot/2) RoPE angles of each token's position */
} cpu_ctx_t;

#define LOGIT_CHUNK 8

static int cpu_available(void) { return 1; }

/* The matrices of a layer, in the order of cpu_ctx_t.pk. */
#define N_LAYER_MATS 7
static const size_t layer_mats[N_LAYER_MATS] = {
    offsetof(lp_layer_t, wq), offsetof(lp_layer_t, wk), offsetof(lp_layer_t, wv),
    offsetof(lp_layer_t, wo), offsetof(lp_layer_t, w_gate), offsetof(lp_layer_t, w_up),
    offsetof(lp_layer_t, w_down),
};

static void cpu_destroy(void *vctx)
{
    cpu_ctx_t *c = vctx;
    if (!c) return;
    if (c->pk)
        for (int32_t i = 0; i < c->m->hp.n_layer * N_LAYER_MATS + 1; i++)
            lp_matmul_pack_free(&c->pk[i]);
    free(c->pk);
    if (c->pk_arena) munmap(c->pk_arena, c->pk_bytes);
    if (c->kv_k) munmap(c->kv_k, c->kv_bytes);
    if (c->kv_v) munmap(c->kv_v, c->kv_bytes);
    free(c->key_off);
    free(c->seq_off);
    lp_threadpool_destroy(&c->pool);
    free(c->x); free(c->xn); free(c->q); free(c->k); free(c->v); free(c->att); free(c->proj);
    free(c->gate); free(c->up); free(c->scores); free(c->gather); free(c->logit_tmp);
    free(c->k_layer); free(c->v_layer);
    free(c->tok_seq); free(c->tok_pos); free(c->rope_cs); free(c->rope_sn);
    free(c);
}

static float *map_pool(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Matrix i in the order of cpu_ctx_t.pk. */
static const lp_weight_t *mat_at(const cpu_ctx_t *c, int32_t i)
{
    if (i == c->m->hp.n_layer * N_LAYER_MATS) return &c->m->output;
    return (const lp_weight_t *)((const char *)&c->m->layers[i / N_LAYER_MATS] +
                                 layer_mats[i % N_LAYER_MATS]);
}

#define PK_ALIGN ((size_t)2 << 20)

/* Pack every matrix that has a packed form (lp_matmul_pack), one after
 * another in the order a step reads them, in one 2 MiB-aligned mapping:
 * all of it in huge pages, and one stream for the prefetchers. */
static int pack_weights(cpu_ctx_t *c)
{
    const int32_t n = c->m->hp.n_layer * N_LAYER_MATS + 1;
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        const lp_weight_t *w = mat_at(c, i);
        total += (lp_matmul_pack_size(w->type, w->n_in, w->n_out) + 63) & ~(size_t)63;
    }
    if (!total) return 0;
    if (!(c->pk = calloc((size_t)n, sizeof(*c->pk))))
        return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    size_t keep = (total + PK_ALIGN - 1) & ~(PK_ALIGN - 1), span = keep + PK_ALIGN;
    uint8_t *map = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED)
        return lp_error_set(LP_ERR(ENOMEM), "cannot map %zu MB for the packed weights", total >> 20);
    uint8_t *base = (uint8_t *)(((uintptr_t)map + PK_ALIGN - 1) & ~(uintptr_t)(PK_ALIGN - 1));
    if (base > map) munmap(map, (size_t)(base - map));
    if (map + span > base + keep) munmap(base + keep, (size_t)(map + span - (base + keep)));
    c->pk_arena = base;
    c->pk_bytes = keep;
    madvise(base, keep, MADV_HUGEPAGE);
    uint8_t *at = base;
    for (int32_t i = 0; i < n; i++) {
        const lp_weight_t *w = mat_at(c, i);
        size_t bytes = lp_matmul_pack_size(w->type, w->n_in, w->n_out);
        if (!bytes) continue;
        int rc = lp_matmul_pack(c->pool, w->type, w->data, w->n_in, w->n_out, at, &c->pk[i]);
        if (rc) return rc;
        at += (bytes + 63) & ~(size_t)63;
        /* Only the rows past the last whole group, and token_embd's rows
         * when tied, are still read from the file: the rest need not stay
         * resident twice. */
        lp_gguf_drop_pages(lp_model_gguf(c->m), w->data, bytes);
    }
    mprotect(base, keep, PROT_READ);
    LP_DEBUG("weights packed: %zu MB", total >> 20);
    return 0;
}

static const void *cpu_weight_copy(void *vctx, const void *data, size_t *bytes)
{
    const cpu_ctx_t *c = vctx;
    if (!c->pk) return NULL;
    for (int32_t i = 0; i < c->m->hp.n_layer * N_LAYER_MATS + 1; i++)
        if (c->pk[i] && mat_at(c, i)->data == data) return lp_matmul_pack_data(c->pk[i], bytes);
    return NULL;
}

/* w's packed form, or NULL. */
static const lp_matmul_pack_t *pack_of(const cpu_ctx_t *c, const lp_weight_t *w)
{
    if (!c->pk) return NULL;
    const int32_t n_layer = c->m->hp.n_layer;
    if (w == &c->m->output) return c->pk[n_layer * N_LAYER_MATS];
    ptrdiff_t off = (const char *)w - (const char *)c->m->layers;
    if (off < 0 || off >= (ptrdiff_t)(sizeof(lp_layer_t) * (size_t)n_layer)) return NULL;
    size_t in = (size_t)off % sizeof(lp_layer_t);
    for (int j = 0; j < N_LAYER_MATS; j++)
        if (layer_mats[j] == in) return c->pk[(size_t)off / sizeof(lp_layer_t) * N_LAYER_MATS + j];
    return NULL;
}

static int cpu_create(const lp_model_t *m, const lp_engine_params_t *p, const lp_kv_pool_t *kv,
                      void **out)
{
    const lp_hparams_t *hp = &m->hp;
    cpu_ctx_t *c = calloc(1, sizeof(*c));
    if (!c) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    c->m = m;
    c->p = *p;
    c->kv_dim = hp->n_head_kv * hp->head_dim;
    c->q_dim = hp->n_head * hp->head_dim;
    size_t T = (size_t)p->max_batch_tokens;
    c->kv_block = kv->kv_block;
    c->head_stride = (int64_t)kv->kv_block * hp->head_dim;
    c->block_stride = hp->n_head_kv * c->head_stride;
    c->kv_layer = (int64_t)kv->kv_blocks * c->block_stride;
    c->kv_bytes = sizeof(float) * (size_t)hp->n_layer * (size_t)c->kv_layer;
    c->kv_k = map_pool(c->kv_bytes);
    c->kv_v = c->kv_k ? map_pool(c->kv_bytes) : NULL;
    if (!c->kv_k || !c->kv_v) {
        int rc = lp_error_set(LP_ERR(ENOMEM), "cannot map a KV pool of %d blocks of %d positions "
                              "(2 x %zu MB): give a smaller --kv-pool-tokens or --kv-pool-mb",
                              kv->kv_blocks, kv->kv_block, c->kv_bytes >> 20);
        cpu_destroy(c);
        return rc;
    }
    c->seq_off = calloc((size_t)p->max_seqs, sizeof(*c->seq_off));
    c->x = malloc(sizeof(float) * T * (size_t)hp->n_embd);
    c->xn = malloc(sizeof(float) * T * (size_t)hp->n_embd);
    c->q = malloc(sizeof(float) * T * (size_t)c->q_dim);
    c->k = malloc(sizeof(float) * T * (size_t)c->kv_dim);
    c->v = malloc(sizeof(float) * T * (size_t)c->kv_dim);
    c->att = malloc(sizeof(float) * T * (size_t)c->q_dim);
    c->proj = malloc(sizeof(float) * T * (size_t)hp->n_embd);
    c->gate = malloc(sizeof(float) * T * (size_t)hp->n_ff);
    c->up = malloc(sizeof(float) * T * (size_t)hp->n_ff);
    if (p->exact) c->scores = malloc(sizeof(float) * (size_t)p->n_threads * (size_t)p->n_ctx);
    if (p->exact && kv->kv_block < p->n_ctx)
        c->gather = malloc(sizeof(float) * 2 * (size_t)p->n_threads * (size_t)p->n_ctx *
                           (size_t)hp->head_dim);
    c->logit_tmp = malloc(sizeof(float) * LOGIT_CHUNK * (size_t)hp->n_vocab);
    c->k_layer = calloc((size_t)p->max_seqs, sizeof(*c->k_layer));
    c->v_layer = calloc((size_t)p->max_seqs, sizeof(*c->v_layer));
    c->tok_seq = malloc(sizeof(int32_t) * T);
    c->tok_pos = malloc(sizeof(int32_t) * T);
    c->rope_cs = malloc(sizeof(float) * T * (size_t)(hp->n_rot / 2));
    c->rope_sn = malloc(sizeof(float) * T * (size_t)(hp->n_rot / 2));
    int rc = 0;
    if (!c->seq_off || !c->x || !c->xn || !c->q || !c->k || !c->v || !c->att || !c->proj || !c->gate || !c->up ||
        (p->exact && !c->scores) || (p->exact && kv->kv_block < p->n_ctx && !c->gather) ||
        !c->logit_tmp || !c->k_layer || !c->v_layer || !c->tok_seq || !c->tok_pos ||
        !c->rope_cs || !c->rope_sn)
        rc = lp_error_set(LP_ERR(ENOMEM), "out of memory for the CPU backend's buffers");
    /* decode reads every weight once per token: 2 MiB pages spare the TLB */
    if (!rc)
        LP_DEBUG("weights in huge pages: %s", lp_gguf_map_huge(lp_model_gguf(m)) ? "yes" : "no");
    if (!rc && !(c->pool = lp_threadpool_new(p->n_threads)))
        rc = lp_error_set(LP_ERR(ENOMEM), "cannot start %d worker threads", p->n_threads);
    if (!rc && !p->no_pack && !p->exact) rc = pack_weights(c);
    if (rc) {
        cpu_destroy(c);
        return rc;
    }
    *out = c;
    return 0;
}

static void cpu_seq_truncate(void *vctx, int32_t seq_id, int32_t len)
{
    /* Positions past len are simply overwritten by the next step. */
    (void)vctx; (void)seq_id; (void)len;
}

/* Offsets (floats, from a layer's pool) of positions 0 .. n-1 of a block
 * table; key and value pools share them. */
static void table_offsets(const cpu_ctx_t *c, const uint32_t *blocks, int32_t n, int64_t *off)
{
    const int64_t hd = c->m->hp.head_dim;
    for (int32_t k = 0, p = 0; p < n; k++) {
        const int64_t base = (int64_t)blocks[k] * c->block_stride;
        for (int32_t r = 0; r < c->kv_block && p < n; r++, p++) off[p] = base + r * hd;
    }
}

/* Every entry's offsets, for positions 0 .. pos + n_tokens - 1. */
static int entry_offsets(cpu_ctx_t *c, const lp_batch_seq_t *seqs, int32_t n_seqs)
{
    size_t need = 0;
    for (int32_t i = 0; i < n_seqs; i++) need += (size_t)(seqs[i].pos + seqs[i].n_tokens);
    if (need > c->key_off_cap) {
        int64_t *o = realloc(c->key_off, need * sizeof(*o));
        if (!o)
            return lp_error_set(LP_ERR(ENOMEM), "out of memory for %zu KV offsets", need);
        c->key_off = o;
        c->key_off_cap = need;
    }
    int64_t *o = c->key_off;
    for (int32_t i = 0; i < n_seqs; i++) {
        c->seq_off[i] = o;
        table_offsets(c, seqs[i].blocks, seqs[i].pos + seqs[i].n_tokens, o);
        o += seqs[i].pos + seqs[i].n_tokens;
    }
    return 0;
}

static lp_matmul_t mm_of(const cpu_ctx_t *c, const lp_weight_t *w, const float *x, int64_t n_tok,
                         float *y, int64_t y_stride)
{
    return (lp_matmul_t){
        .type = w->type, .w = w->data, .pk = pack_of(c, w), .n_in = w->n_in, .n_out = w->n_out,
        .x = x, .x_stride = w->n_in, .n_tok = n_tok, .y = y, .y_stride = y_stride,
    };
}

static int matmul(cpu_ctx_t *c, const lp_weight_t *w, const float *x, int64_t n_tok, float *y,
                  int64_t y_stride)
{
    lp_matmul_t mm = mm_of(c, w, x, n_tok, y, y_stride);
    return lp_matmul(c->pool, &mm, c->p.exact);
}

/* ---- exact attention, split over (token, head) pairs across the pool ---- */

typedef struct attn_job {
    cpu_ctx_t *c;
    int32_t layer, n_tok;
} attn_job_t;

static void attn_worker(void *arg, int ith, int nth)
{
    attn_job_t *j = arg;
    cpu_ctx_t *c = j->c;
    const lp_hparams_t *hp = &c->m->hp;
    const int32_t hd = hp->head_dim, group = hp->n_head / hp->n_head_kv;
    const float scale = 1.0f / sqrtf((float)hd);
    float *scores = c->scores + (size_t)ith * (size_t)c->p.n_ctx;
    const int64_t n_work = (int64_t)j->n_tok * hp->n_head;
    const float *kl = c->kv_k + j->layer * c->kv_layer, *vl = c->kv_v + j->layer * c->kv_layer;
    for (int64_t w = ith; w < n_work; w += nth) {
        const int32_t t = (int32_t)(w / hp->n_head), h = (int32_t)(w % hp->n_head);
        const int32_t n = c->tok_pos[t] + 1;
        const int64_t *off = c->seq_off[c->tok_seq[t]], head = (h / group) * c->head_stride;
        const float *k = kl + off[0] + head, *v = vl + off[0] + head;
        if (n > c->kv_block) {
            /* lp_op_attn_head takes evenly spaced rows: gather the blocks' */
            float *kg = c->gather + (size_t)ith * 2 * (size_t)c->p.n_ctx * (size_t)hd;
            float *vg = kg + (size_t)c->p.n_ctx * (size_t)hd;
            for (int32_t p = 0; p < n; p++) {
                memcpy(kg + (size_t)p * hd, kl + off[p] + head, sizeof(float) * (size_t)hd);
                memcpy(vg + (size_t)p * hd, vl + off[p] + head, sizeof(float) * (size_t)hd);
            }
            k = kg;
            v = vg;
        }
        lp_op_attn_head(c->att + (size_t)t * c->q_dim + (size_t)h * hd,
                        c->q + (size_t)t * c->q_dim + (size_t)h * hd, k, v, hd, n, hd, scale,
                        NULL, scores);
    }
}

/* Attention of layer `layer` for the batch's T tokens over n_seqs entries:
 * c->att from c->q and the pool. */
static int attention(cpu_ctx_t *c, int32_t layer, int32_t T, int32_t n_seqs)
{
    const lp_hparams_t *hp = &c->m->hp;
    if (c->p.exact) {
        attn_job_t job = {c, layer, T};
        lp_threadpool_run(c->pool, attn_worker, &job);
        return 0;
    }
    for (int32_t i = 0; i < n_seqs; i++) {
        c->k_layer[i] = c->kv_k + layer * c->kv_layer;
        c->v_layer[i] = c->kv_v + layer * c->kv_layer;
    }
    lp_attn_batch_t b = {
        .out = c->att, .q = c->q, .tok_seq = c->tok_seq, .tok_pos = c->tok_pos,
        .k = c->k_layer, .v = c->v_layer, .key_stride = hp->head_dim,
        .head_stride = c->head_stride, .key_off = (const int64_t *const *)c->seq_off,
        .n_tok = T, .n_head = hp->n_head, .n_head_kv = hp->n_head_kv, .head_dim = hp->head_dim,
        .scale = 1.0f / sqrtf((float)hp->head_dim),
    };
    return lp_attn_run(c->pool, &b);
}

/* ---- output: final norm and logits for the requested rows --------------- */

static int same_stride(float *const *rows, int32_t n, int64_t *stride)
{
    if (n == 1) {
        *stride = 0;
        return 1;
    }
    ptrdiff_t d = rows[1] - rows[0];
    if (d <= 0) return 0;
    for (int32_t i = 2; i < n; i++)
        if (rows[i] - rows[i - 1] != d) return 0;
    *stride = d;
    return 1;
}

/* x += r (r may be NULL), then xn = norm(x) * w: the reference op for an
 * exact engine, one fused vector pass otherwise. */
static void add_norm(const cpu_ctx_t *c, float *xn, float *x, const float *r, const float *w)
{
    (c->p.exact ? lp_op_add_rmsnorm : lp_vec_add_rmsnorm)(xn, x, r, w, c->m->hp.n_embd,
                                                           c->m->hp.rms_eps);
}

static int compute_logits(cpu_ctx_t *c, const int32_t *rows_tok, int32_t n_rows,
                          float *const *logits)
{
    const lp_hparams_t *hp = &c->m->hp;
    const int64_t n_embd = hp->n_embd, n_vocab = hp->n_vocab;
    /* Gather the requested rows of the residual stream into xn, normalised. */
    for (int32_t r = 0; r < n_rows; r++)
        add_norm(c, c->xn + r * n_embd, c->x + (int64_t)rows_tok[r] * n_embd, NULL,
                 c->m->output_norm);
    int64_t stride;
    if (same_stride(logits, n_rows, &stride) && (stride == 0 || stride >= n_vocab))
        return matmul(c, &c->m->output, c->xn, n_rows, logits[0], stride ? stride : n_vocab);
    for (int32_t r0 = 0; r0 < n_rows; r0 += LOGIT_CHUNK) {
        int32_t n = n_rows - r0 < LOGIT_CHUNK ? n_rows - r0 : LOGIT_CHUNK;
        int rc = matmul(c, &c->m->output, c->xn + r0 * n_embd, n, c->logit_tmp, n_vocab);
        if (rc) return rc;
        for (int32_t r = 0; r < n; r++)
            memcpy(logits[r0 + r], c->logit_tmp + r * n_vocab, sizeof(float) * (size_t)n_vocab);
    }
    return 0;
}

/* ---- fused per-token work, split over the pool ------------------------ */

enum tok_stage {
    STAGE_ATTN_NORM,  /* xn = norm(x) * attn_norm of `layer` */
    STAGE_QKV_ROPE,   /* biases, RoPE on q and k, k and v into the cache */
    STAGE_FFN_NORM,   /* x += proj; xn = norm(x) * ffn_norm */
    STAGE_SWIGLU,     /* gate = silu(gate) * up */
    STAGE_FFN_OUT,    /* x += proj; then the next layer's attn norm, if any */
};

typedef struct tok_job {
    cpu_ctx_t *c;
    enum tok_stage stage;
    int32_t layer, n_tok;
} tok_job_t;

static void tok_worker(void *arg, int ith, int nth)
{
    const tok_job_t *j = arg;
    cpu_ctx_t *c = j->c;
    const lp_hparams_t *hp = &c->m->hp;
    const lp_layer_t *L = &c->m->layers[j->layer];
    const int64_t n_embd = hp->n_embd, q_dim = c->q_dim, kv_dim = c->kv_dim;
    if (j->stage == STAGE_SWIGLU) {
        const int64_t n = (int64_t)j->n_tok * hp->n_ff, per = (n + nth - 1) / nth;
        const int64_t lo = per * ith, hi = lo + per < n ? lo + per : n;
        if (lo < hi) (c->p.exact ? lp_op_swiglu : lp_vec_swiglu)(c->gate + lo, c->gate + lo, c->up + lo, hi - lo);
        return;
    }
    for (int32_t t = ith; t < j->n_tok; t += nth) {
        float *x = c->x + t * n_embd, *xn = c->xn + t * n_embd, *proj = c->proj + t * n_embd;
        switch (j->stage) {
        case STAGE_ATTN_NORM:
            add_norm(c, xn, x, NULL, L->attn_norm);
            break;
        case STAGE_QKV_ROPE: {
            float *q = c->q + t * q_dim, *k = c->k + t * kv_dim, *v = c->v + t * kv_dim;
            if (L->bq) for (int64_t i = 0; i < q_dim; i++) q[i] += L->bq[i];
            if (L->bk) for (int64_t i = 0; i < kv_dim; i++) k[i] += L->bk[i];
            if (L->bv) for (int64_t i = 0; i < kv_dim; i++) v[i] += L->bv[i];
            const float *cs = c->rope_cs + t * (hp->n_rot / 2), *sn = c->rope_sn + t * (hp->n_rot / 2);
            (c->p.exact ? lp_op_rope_apply : lp_vec_rope)(q, hp->n_head, hp->head_dim, hp->n_rot,
                                                          cs, sn, hp->rope_neox);
            (c->p.exact ? lp_op_rope_apply : lp_vec_rope)(k, hp->n_head_kv, hp->head_dim,
                                                          hp->n_rot, cs, sn, hp->rope_neox);
            const int64_t off = j->layer * c->kv_layer + c->seq_off[c->tok_seq[t]][c->tok_pos[t]];
            for (int32_t g = 0; g < hp->n_head_kv; g++) {
                memcpy(c->kv_k + off + g * c->head_stride, k + g * hp->head_dim,
                       sizeof(float) * (size_t)hp->head_dim);
                memcpy(c->kv_v + off + g * c->head_stride, v + g * hp->head_dim,
                       sizeof(float) * (size_t)hp->head_dim);
            }
            break;
        }
        case STAGE_FFN_NORM:
            add_norm(c, xn, x, proj, L->ffn_norm);
            break;
        case STAGE_FFN_OUT:
            if (j->layer + 1 < hp->n_layer) add_norm(c, xn, x, proj, c->m->layers[j->layer + 1].attn_norm);
            else for (int64_t i = 0; i < n_embd; i++) x[i] += proj[i];
            break;
        case STAGE_SWIGLU:
            break;
        }
    }
}

/* Small batches run on the calling thread: waking the pool costs more. */
static void run_tokens(cpu_ctx_t *c, enum tok_stage stage, int32_t layer, int32_t n_tok)
{
    tok_job_t job = {c, stage, layer, n_tok};
    if (n_tok < 4) tok_worker(&job, 0, 1);
    else lp_threadpool_run(c->pool, tok_worker, &job);
}

/* ---- the step --------------------------------------------------------- */

static int cpu_step(void *vctx, const lp_batch_seq_t *seqs, int32_t n_seqs, int32_t T,
                    float *const *logits)
{
    cpu_ctx_t *c = vctx;
    const lp_model_t *m = c->m;
    const lp_hparams_t *hp = &m->hp;
    const int64_t n_embd = hp->n_embd, q_dim = c->q_dim, kv_dim = c->kv_dim, n_ff = hp->n_ff;
    int rc;

    /* load: token metadata, where each entry's positions lie, embeddings */
    if ((rc = entry_offsets(c, seqs, n_seqs))) return rc;
    int32_t t = 0;
    for (int32_t i = 0; i < n_seqs; i++) {
        const lp_batch_seq_t *s = &seqs[i];
        for (int32_t k = 0; k < s->n_tokens; k++, t++) {
            c->tok_seq[t] = i;
            c->tok_pos[t] = s->pos + k;
            lp_op_rope_angles(s->pos + k, hp->n_rot, hp->rope_base, c->rope_cs + t * (hp->n_rot / 2),
                              c->rope_sn + t * (hp->n_rot / 2));
            const lp_weight_t *e = &m->tok_embd;
            lp_dequant_row(e->type, (const uint8_t *)e->data + (size_t)s->tokens[k] * e->row_bytes,
                           c->x + (int64_t)t * n_embd, n_embd);
        }
    }

    run_tokens(c, STAGE_ATTN_NORM, 0, T);
    for (int32_t l = 0; l < hp->n_layer; l++) {
        const lp_layer_t *L = &m->layers[l];
        /* attention block: xn holds norm(x) * attn_norm */
        const lp_matmul_t qkv[3] = {mm_of(c, &L->wq, c->xn, T, c->q, q_dim),
                                    mm_of(c, &L->wk, c->xn, T, c->k, kv_dim),
                                    mm_of(c, &L->wv, c->xn, T, c->v, kv_dim)};
        if ((rc = lp_matmul_multi(c->pool, qkv, 3, c->p.exact))) return rc;
        run_tokens(c, STAGE_QKV_ROPE, l, T);
        if ((rc = attention(c, l, T, n_seqs))) return rc;
        if ((rc = matmul(c, &L->wo, c->att, T, c->proj, n_embd))) return rc;
        run_tokens(c, STAGE_FFN_NORM, l, T);

        /* feed-forward block */
        const lp_matmul_t gate_up[2] = {mm_of(c, &L->w_gate, c->xn, T, c->gate, n_ff),
                                        mm_of(c, &L->w_up, c->xn, T, c->up, n_ff)};
        if ((rc = lp_matmul_multi(c->pool, gate_up, 2, c->p.exact))) return rc;
        run_tokens(c, STAGE_SWIGLU, l, T);
        if ((rc = matmul(c, &L->w_down, c->gate, T, c->proj, n_embd))) return rc;
        run_tokens(c, STAGE_FFN_OUT, l, T);
        LP_DEBUG("layer %d done (%d tokens)", l, T);
    }

    /* logits for the last n_logits tokens of each entry */
    int32_t n_rows = 0, base = 0;
    int32_t *rows_tok = c->tok_pos; /* positions are no longer needed: reuse */
    for (int32_t i = 0; i < n_seqs; i++) {
        for (int32_t k = seqs[i].n_tokens - seqs[i].n_logits; k < seqs[i].n_tokens; k++)
            rows_tok[n_rows++] = base + k;
        base += seqs[i].n_tokens;
    }
    return n_rows ? compute_logits(c, rows_tok, n_rows, logits) : 0;
}

const lp_backend_ops_t lp_backend_cpu = {
    .name = "cpu",
    .paged = 1,
    .available = cpu_available,
    .create = cpu_create,
    .destroy = cpu_destroy,
    .seq_truncate = cpu_seq_truncate,
    .step = cpu_step,
    .weight_copy = cpu_weight_copy,
};
