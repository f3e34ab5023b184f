/* forward-cpu.c - the CPU backend: the reference forward pass over a batch
 * of sequences, for every architecture (each layer is its arch's layer
 * function, arch/arch.h, run on the ops below).
 *
 * Layout: activations are row-major [token][width]; q is [token][head][dim],
 * k and v are [token][kv_head][dim].  The KV cache is two pools of blocks of
 * kv_block positions, float32: group 0 holds the full-attention layers,
 * group 1 the sliding-window layers (its own block tables: a sliding layer
 * needs only the blocks of its window).  Within a pool a layer's part is
 * [block][kv_head][pos in block][dim] (head-major inside a block, so
 * attention streams one head's positions of a block), the layers one after
 * another; an entry reaches position p through its table's block
 * blocks[p / kv_block].  The contiguous layout is the same pools with one
 * block of n_ctx positions per seq_id.  Each step turns every entry's table
 * into one offset per position for each KV geometry (pool, KV heads, head
 * size), which the cache writes, the blocked attention and the exact path
 * share.  Tokens of one batch are laid out entry after entry, oldest
 * first; token t of the batch belongs to batch entry tok_seq[t] at position
 * tok_pos[t].
 *
 * Recurrent layers (Gated DeltaNet) keep no KV: each seq_id has a state,
 * one mapping of max_seqs parts of rec_floats floats, each layer's part
 * [channel][d_conv - 1] (the conv's last inputs, oldest first) then
 * [v head][d_state][d_state] (the delta rule's matrix, row j the value
 * dim).  An entry at position 0 starts from zeros; any other entry goes on
 * from the state its seq_id's last step left (engine.c checks that pos is
 * where that state is).  Within an entry the recurrence runs token after
 * token, so a sequence's state is the same whole, chunked or batched.
 *
 * Attention: the fast path is attn.c's blocked attention (tiles of the
 * query rows of one GQA group over consecutive tokens of one sequence,
 * online softmax; its scratch layouts are in simd/attn-x86.c); the `exact`
 * path runs lp_op_attn_head per (token, head), accumulating its softmax sum
 * in double. */
#include "backend.h"

#include "arch/arch.h"
#include "attn.h"
#include "error.h"
#include "gguf.h"
#include "log.h"
#include "matmul.h"
#include "moe.h"
#include "ops.h"
#include "quant.h"
#include "threadpool.h"
#include "vec.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MAX_GEOM 8

/* A KV geometry: layers of one pool with the same KV heads and head size
 * share their positions' offsets. */
typedef struct kv_geom {
    int32_t group, n_head_kv, head_dim;
    int64_t head_stride;  /* floats per KV head of a block: kv_block * head_dim */
    int64_t block_stride; /* floats per block of one layer: n_head_kv * head_stride */
    int64_t **seq_off;    /* (max_seqs) each batch entry's offsets, positions 0 .. end-1 */
} kv_geom_t;

typedef struct kv_pool {
    float *k, *v;         /* mapped, not reserved: pages become resident as written */
    size_t bytes;         /* of each mapping */
    int32_t blocks;
} kv_pool_t;

typedef struct cpu_ctx {
    const lp_model_t *m;
    lp_engine_params_t p;
    lp_threadpool_t *pool;
    kv_pool_t kv[2];      /* group 0: full attention; 1: sliding window */
    int32_t kv_block;
    int64_t *layer_base;  /* (n_layer) floats from the start of its pool's mappings */
    int32_t *layer_geom;  /* (n_layer) index into geom */
    kv_geom_t geom[MAX_GEOM];
    int32_t n_geom;
    int64_t *key_off;     /* (key_off_cap) the geometries' offsets, entry after entry */
    size_t key_off_cap;
    /* scratch, sized for max_batch_tokens */
    float *buf[LP_BUF_COUNT]; /* (T, the widest row each holds) */
    float *ones;          /* (max(n_embd, head_dim)) the weight of a norm without one */
    lp_matmul_pack_t **pk; /* (n_layer * N_LAYER_MATS + 1): packed matrices, the
                              output last; NULL when not packing */
    uint8_t *pk_arena;    /* their bytes, in that order (the order of use) */
    size_t pk_bytes;      /* of the arena's mapping */
    float *scores;        /* (n_threads, n_ctx), exact attention only */
    float *gather;        /* (n_threads, 2, n_ctx, head_dim): an exact head's K and V rows
                             when they span blocks */
    const float **k_layer, **v_layer; /* (max_seqs) one layer's pool, per batch entry */
    float *logit_tmp;     /* (LOGIT_CHUNK, n_vocab) when rows are scattered */
    int32_t *tok_seq;     /* (T) batch entry of each token */
    int32_t *tok_pos;     /* (T) */
    int32_t *tok_lo;      /* (T) first position a sliding layer's query sees */
    float *rope_cs[LP_MAX_ROPES], *rope_sn[LP_MAX_ROPES]; /* (T, n_rot/2) each RoPE's angles */
    lp_moe_cpu_t *moe;    /* the mixture-of-experts scratch and counters, or NULL */
    int32_t n_tok;        /* tokens of the step being run */
    int32_t n_seqs;       /* its entries */
    /* recurrent layers */
    float *rec;           /* (max_seqs, rec_floats) mapped, not reserved */
    size_t rec_bytes;
    int64_t *rec_off;     /* (n_layer) a recurrent layer's part of a seq_id's state */
    const lp_batch_seq_t *ents; /* the step's entries, borrowed for the step */
    int32_t *ent_t0;      /* (max_seqs) each entry's first token in the batch */
} cpu_ctx_t;

#define LOGIT_CHUNK 8

static int cpu_available(void) { return 1; }

/* The matrices of a layer, in the order of cpu_ctx_t.pk. */
#define N_LAYER_MATS 12
static const size_t layer_mats[N_LAYER_MATS] = {
    offsetof(lp_layer_t, wq), offsetof(lp_layer_t, wk), offsetof(lp_layer_t, wv),
    offsetof(lp_layer_t, w_qkv), offsetof(lp_layer_t, w_z), offsetof(lp_layer_t, w_beta),
    offsetof(lp_layer_t, w_alpha), offsetof(lp_layer_t, wo), offsetof(lp_layer_t, w_ssm_out),
    offsetof(lp_layer_t, w_gate), offsetof(lp_layer_t, w_up), offsetof(lp_layer_t, w_down),
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
    lp_moe_cpu_destroy(&c->moe);
    for (int g = 0; g < 2; g++) {
        if (c->kv[g].k) munmap(c->kv[g].k, c->kv[g].bytes);
        if (c->kv[g].v) munmap(c->kv[g].v, c->kv[g].bytes);
    }
    for (int32_t i = 0; i < c->n_geom; i++) free(c->geom[i].seq_off);
    if (c->rec) munmap(c->rec, c->rec_bytes);
    free(c->rec_off);
    free(c->ent_t0);
    free(c->layer_base);
    free(c->layer_geom);
    free(c->key_off);
    lp_threadpool_destroy(&c->pool);
    for (int i = 0; i < LP_BUF_COUNT; i++) free(c->buf[i]);
    for (int i = 0; i < LP_MAX_ROPES; i++) {
        free(c->rope_cs[i]);
        free(c->rope_sn[i]);
    }
    free(c->ones); free(c->scores); free(c->gather); free(c->logit_tmp);
    free(c->k_layer); free(c->v_layer);
    free(c->tok_seq); free(c->tok_pos); free(c->tok_lo);
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

static size_t pack_size(const lp_weight_t *w)
{
    return w->data ? lp_matmul_pack_size(w->type, w->n_in, w->n_out) : 0;
}

#define PK_ALIGN ((size_t)2 << 20)

/* Pack every matrix that has a packed form (lp_matmul_pack), one after
 * another in the order a step reads them, in one 2 MiB-aligned mapping:
 * all of it in huge pages, and one stream for the prefetchers. */
static int pack_weights(cpu_ctx_t *c)
{
    const int32_t n = c->m->hp.n_layer * N_LAYER_MATS + 1;
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) total += (pack_size(mat_at(c, i)) + 63) & ~(size_t)63;
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
        size_t bytes = pack_size(w);
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

/* ---- create: the KV pools and their geometries, the scratch ------------ */

static int plan_kv(cpu_ctx_t *c, const lp_kv_pool_t *kv)
{
    const lp_model_t *m = c->m;
    const int32_t n_layer = m->hp.n_layer;
    c->kv_block = kv->kv_block;
    c->kv[0].blocks = kv->kv_blocks;
    c->kv[1].blocks = kv->kv_blocks_swa;
    c->layer_base = calloc((size_t)n_layer, sizeof(*c->layer_base));
    c->layer_geom = calloc((size_t)n_layer, sizeof(*c->layer_geom));
    if (!c->layer_base || !c->layer_geom) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    int64_t floats[2] = {0, 0};
    for (int32_t l = 0; l < n_layer; l++) {
        const lp_layer_hp_t *L = &m->layers[l].hp;
        if (L->mixer != LP_MIXER_ATTN) {
            c->layer_geom[l] = -1; /* no KV */
            continue;
        }
        int32_t g = 0;
        while (g < c->n_geom && (c->geom[g].group != L->kv_group ||
                                 c->geom[g].n_head_kv != L->n_head_kv ||
                                 c->geom[g].head_dim != L->head_dim))
            g++;
        if (g == c->n_geom) {
            if (g == MAX_GEOM)
                return lp_error_set(LP_ERR(ENOTSUP), "CPU backend: more than %d KV layouts",
                                    MAX_GEOM);
            kv_geom_t *G = &c->geom[c->n_geom++];
            G->group = L->kv_group;
            G->n_head_kv = L->n_head_kv;
            G->head_dim = L->head_dim;
            G->head_stride = (int64_t)kv->kv_block * L->head_dim;
            G->block_stride = L->n_head_kv * G->head_stride;
            if (!(G->seq_off = calloc((size_t)c->p.max_seqs, sizeof(*G->seq_off))))
                return lp_error_set(LP_ERR(ENOMEM), "out of memory");
        }
        c->layer_geom[l] = g;
        c->layer_base[l] = floats[L->kv_group];
        floats[L->kv_group] += (int64_t)c->kv[L->kv_group].blocks * c->geom[g].block_stride;
    }
    for (int g = 0; g < 2; g++) {
        if (!floats[g]) continue;
        c->kv[g].bytes = sizeof(float) * (size_t)floats[g];
        c->kv[g].k = map_pool(c->kv[g].bytes);
        c->kv[g].v = c->kv[g].k ? map_pool(c->kv[g].bytes) : NULL;
        if (!c->kv[g].k || !c->kv[g].v)
            return lp_error_set(LP_ERR(ENOMEM), "cannot map a KV pool of %d blocks of %d positions "
                                "(2 x %zu MB): give a smaller --kv-pool-tokens or --kv-pool-mb",
                                c->kv[g].blocks, kv->kv_block, c->kv[g].bytes >> 20);
    }
    return 0;
}

/* The recurrent layers' states, one part per seq_id. */
static int plan_rec(cpu_ctx_t *c)
{
    const lp_model_t *m = c->m;
    const lp_ssm_t *S = &m->ssm;
    if (!m->hp.n_layer_rec) return 0;
    if (!(c->rec_off = calloc((size_t)m->hp.n_layer, sizeof(*c->rec_off))))
        return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    int64_t at = 0;
    for (int32_t l = 0; l < m->hp.n_layer; l++) {
        if (m->layers[l].hp.mixer != LP_MIXER_DELTANET) continue;
        c->rec_off[l] = at;
        at += (int64_t)S->n_channels * (S->d_conv - 1) + (int64_t)S->n_v_heads * S->d_state * S->d_state;
    }
    c->rec_bytes = sizeof(float) * (size_t)at * (size_t)c->p.max_seqs;
    if (!(c->rec = map_pool(c->rec_bytes)))
        return lp_error_set(LP_ERR(ENOMEM), "cannot map the recurrent states of %d sequences "
                            "(%zu MB): give fewer sequences", c->p.max_seqs, c->rec_bytes >> 20);
    return 0;
}

static int cpu_create(const lp_model_t *m, const lp_engine_params_t *p, const lp_kv_pool_t *kv,
                      void **out)
{
    const lp_hparams_t *hp = &m->hp;
    cpu_ctx_t *c = calloc(1, sizeof(*c));
    if (!c) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    c->m = m;
    c->p = *p;
    const size_t T = (size_t)p->max_batch_tokens, F = sizeof(float);
    int rc = plan_kv(c, kv);
    if (!rc) rc = plan_rec(c);
    if (rc) {
        cpu_destroy(c);
        return rc;
    }
    const size_t q_max = (size_t)hp->n_head * (size_t)hp->head_dim;
    size_t kv_max = 0;
    for (int32_t l = 0; l < hp->n_layer; l++) {
        const size_t w = (size_t)m->layers[l].hp.n_head_kv * (size_t)m->layers[l].hp.head_dim;
        if (w > kv_max) kv_max = w;
    }
    bool gated = false;
    for (int32_t l = 0; l < hp->n_layer; l++) gated |= m->layers[l].hp.attn_gate;
    const lp_ssm_t *S = &m->ssm;
    const bool rec = hp->n_layer_rec > 0;
    const size_t inner = rec ? (size_t)S->d_inner : 0;
    const size_t widths[LP_BUF_COUNT] = {
        [LP_BUF_X] = (size_t)hp->n_embd, [LP_BUF_XN] = (size_t)hp->n_embd, [LP_BUF_Q] = q_max,
        [LP_BUF_K] = kv_max, [LP_BUF_V] = kv_max, [LP_BUF_ATT] = q_max > inner ? q_max : inner,
        [LP_BUF_PROJ] = (size_t)hp->n_embd, [LP_BUF_GATE] = (size_t)hp->n_ff,
        [LP_BUF_UP] = (size_t)hp->n_ff, [LP_BUF_QG] = gated ? 2 * q_max : 0,
        [LP_BUF_AGATE] = gated ? q_max : 0, [LP_BUF_MIX] = rec ? (size_t)S->n_channels : 0,
        [LP_BUF_Z] = inner, [LP_BUF_BETA] = rec ? (size_t)S->n_v_heads : 0,
        [LP_BUF_ALPHA] = rec ? (size_t)S->n_v_heads : 0,
    };
    bool oom = false;
    for (int i = 0; i < LP_BUF_COUNT; i++)
        if (widths[i]) oom |= !(c->buf[i] = malloc(F * T * widths[i]));
    oom |= !(c->ent_t0 = calloc((size_t)p->max_seqs, sizeof(*c->ent_t0)));
    const size_t n_ones = (size_t)(hp->n_embd > hp->head_dim ? hp->n_embd : hp->head_dim);
    if ((c->ones = malloc(F * n_ones)))
        for (size_t i = 0; i < n_ones; i++) c->ones[i] = 1.0f;
    if (p->exact) {
        c->scores = malloc(F * (size_t)p->n_threads * (size_t)p->n_ctx);
        c->gather = malloc(F * 2 * (size_t)p->n_threads * (size_t)p->n_ctx * (size_t)hp->head_dim);
        oom |= !c->scores || !c->gather;
    }
    c->logit_tmp = malloc(F * LOGIT_CHUNK * (size_t)hp->n_vocab);
    c->k_layer = calloc((size_t)p->max_seqs, sizeof(*c->k_layer));
    c->v_layer = calloc((size_t)p->max_seqs, sizeof(*c->v_layer));
    c->tok_seq = malloc(sizeof(int32_t) * T);
    c->tok_pos = malloc(sizeof(int32_t) * T);
    c->tok_lo = malloc(sizeof(int32_t) * T);
    for (int32_t r = 0; r < m->n_ropes; r++) {
        c->rope_cs[r] = malloc(F * T * (size_t)(m->ropes[r].n_rot / 2));
        c->rope_sn[r] = malloc(F * T * (size_t)(m->ropes[r].n_rot / 2));
        oom |= !c->rope_cs[r] || !c->rope_sn[r];
    }
    if (oom || !c->ones || !c->logit_tmp || !c->k_layer || !c->v_layer || !c->tok_seq ||
        !c->tok_pos || !c->tok_lo)
        rc = lp_error_set(LP_ERR(ENOMEM), "out of memory for the CPU backend's buffers");
    if (hp->features & LP_FEAT_GEGLU) lp_op_gelu_table(); /* built once, before any step */
    if (!rc && hp->n_expert > 0) rc = lp_moe_cpu_new(m, p->max_batch_tokens, &c->moe);
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

/* Offsets (floats, from a layer's part of its pool) of positions 0 .. n-1
 * of a block table, for one geometry; key and value pools share them.
 * Entries of a sliding table below the window may name no block: their
 * offsets are computed but never read. */
static void table_offsets(const cpu_ctx_t *c, const kv_geom_t *G, const uint32_t *blocks, int32_t n,
                          int64_t *off)
{
    for (int32_t k = 0, p = 0; p < n; k++) {
        const int64_t base = (int64_t)blocks[k] * G->block_stride;
        for (int32_t r = 0; r < c->kv_block && p < n; r++, p++) off[p] = base + r * G->head_dim;
    }
}

/* Every entry's offsets for every geometry, positions 0 .. pos + n_tokens - 1. */
static int entry_offsets(cpu_ctx_t *c, const lp_batch_seq_t *seqs, int32_t n_seqs)
{
    size_t need = 0;
    for (int32_t i = 0; i < n_seqs; i++) need += (size_t)(seqs[i].pos + seqs[i].n_tokens);
    need *= (size_t)c->n_geom;
    if (need > c->key_off_cap) {
        int64_t *o = realloc(c->key_off, need * sizeof(*o));
        if (!o)
            return lp_error_set(LP_ERR(ENOMEM), "out of memory for %zu KV offsets", need);
        c->key_off = o;
        c->key_off_cap = need;
    }
    int64_t *o = c->key_off;
    for (int32_t g = 0; g < c->n_geom; g++) {
        kv_geom_t *G = &c->geom[g];
        for (int32_t i = 0; i < n_seqs; i++) {
            const int32_t n = seqs[i].pos + seqs[i].n_tokens;
            const uint32_t *t = G->group && seqs[i].swa_blocks ? seqs[i].swa_blocks : seqs[i].blocks;
            G->seq_off[i] = o;
            table_offsets(c, G, t, n, o);
            o += n;
        }
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

/* ---- token-wise ops, split over the pool ------------------------------ */

typedef struct tok_job tok_job_t;
typedef void (*tok_fn)(cpu_ctx_t *c, const tok_job_t *j, int32_t t);

struct tok_job {
    cpu_ctx_t *c;
    tok_fn fn;
    enum lp_buf a, b, d;
    const float *w;
    int32_t n_groups, width, layer;
    float s;
    enum lp_act act;
};

static void tok_worker(void *arg, int ith, int nth)
{
    const tok_job_t *j = arg;
    for (int32_t t = ith; t < j->c->n_tok; t += nth) j->fn(j->c, j, t);
}

/* Small batches run on the calling thread: waking the pool costs more. */
static int run_tokens(cpu_ctx_t *c, tok_job_t *j)
{
    j->c = c;
    if (c->n_tok < 4) tok_worker(j, 0, 1);
    else lp_threadpool_run(c->pool, tok_worker, j);
    return 0;
}

static inline float *row(const cpu_ctx_t *c, enum lp_buf b, int32_t t, int64_t width)
{
    return c->buf[b] + (int64_t)t * width;
}

static void norm_tok(cpu_ctx_t *c, const tok_job_t *j, int32_t t)
{
    const float eps = c->m->hp.rms_eps, *w = j->w ? j->w : c->ones;
    const int64_t n = (int64_t)j->n_groups * j->width;
    float *x = row(c, j->a, t, n), *y = row(c, j->d, t, n);
    for (int32_t g = 0; g < j->n_groups; g++) {
        float *xg = x + (int64_t)g * j->width, *yg = y + (int64_t)g * j->width;
        if (c->p.exact) lp_op_rmsnorm(yg, xg, w, j->width, eps);
        else lp_vec_add_rmsnorm(yg, xg, NULL, w, j->width, eps); /* in place is safe */
    }
}

static void add_norm_tok(cpu_ctx_t *c, const tok_job_t *j, int32_t t)
{
    const int64_t n = c->m->hp.n_embd;
    (c->p.exact ? lp_op_add_rmsnorm : lp_vec_add_rmsnorm)(row(c, j->d, t, n), row(c, j->a, t, n),
                                                           row(c, j->b, t, n), j->w, n,
                                                           c->m->hp.rms_eps);
}

static void add_tok(cpu_ctx_t *c, const tok_job_t *j, int32_t t)
{
    const int64_t n = c->m->hp.n_embd;
    float *x = row(c, j->a, t, n);
    const float *r = row(c, j->b, t, n);
    for (int64_t i = 0; i < n; i++) x[i] += r[i];
}

static void scale_tok(cpu_ctx_t *c, const tok_job_t *j, int32_t t)
{
    const int64_t n = c->m->hp.n_embd;
    float *x = row(c, j->a, t, n);
    for (int64_t i = 0; i < n; i++) x[i] *= j->s;
}

static void bias_tok(cpu_ctx_t *c, const tok_job_t *j, int32_t t)
{
    float *x = row(c, j->a, t, j->width);
    for (int32_t i = 0; i < j->width; i++) x[i] += j->w[i];
}

static void copy_tok(cpu_ctx_t *c, const tok_job_t *j, int32_t t)
{
    memcpy(row(c, j->d, t, j->width), row(c, j->a, t, j->width), sizeof(float) * (size_t)j->width);
}

static void rope_tok(cpu_ctx_t *c, const tok_job_t *j, int32_t t)
{
    const lp_layer_hp_t *L = &c->m->layers[j->layer].hp;
    const lp_rope_t *r = &c->m->ropes[L->rope];
    const int32_t half = r->n_rot / 2;
    const float *cs = c->rope_cs[L->rope] + (int64_t)t * half;
    const float *sn = c->rope_sn[L->rope] + (int64_t)t * half;
    (c->p.exact ? lp_op_rope_apply : lp_vec_rope)(row(c, j->a, t, (int64_t)j->n_groups * L->head_dim),
                                                  j->n_groups, L->head_dim, r->n_rot, cs, sn,
                                                  r->neox);
}

/* K and V rows of token t into its sequence's cache. */
static void store_tok(cpu_ctx_t *c, const tok_job_t *j, int32_t t)
{
    const lp_layer_hp_t *L = &c->m->layers[j->layer].hp;
    const kv_geom_t *G = &c->geom[c->layer_geom[j->layer]];
    const kv_pool_t *P = &c->kv[L->kv_group];
    const int64_t w = (int64_t)L->n_head_kv * L->head_dim;
    const int64_t off = c->layer_base[j->layer] + G->seq_off[c->tok_seq[t]][c->tok_pos[t]];
    const float *k = row(c, LP_BUF_K, t, w), *v = row(c, LP_BUF_V, t, w);
    for (int32_t g = 0; g < L->n_head_kv; g++) {
        memcpy(P->k + off + g * G->head_stride, k + (int64_t)g * L->head_dim,
               sizeof(float) * (size_t)L->head_dim);
        memcpy(P->v + off + g * G->head_stride, v + (int64_t)g * L->head_dim,
               sizeof(float) * (size_t)L->head_dim);
    }
}

static int op_norm(void *vc, enum lp_buf dst, enum lp_buf src, const float *w, int32_t n_groups,
                   int32_t width)
{
    tok_job_t j = {.fn = norm_tok, .a = src, .d = dst, .w = w, .n_groups = n_groups, .width = width};
    return run_tokens(vc, &j);
}

static int op_add_norm(void *vc, enum lp_buf dst, enum lp_buf x, enum lp_buf r, const float *w)
{
    tok_job_t j = {.fn = add_norm_tok, .a = x, .b = r, .d = dst, .w = w};
    return run_tokens(vc, &j);
}

static int op_add(void *vc, enum lp_buf x, enum lp_buf r)
{
    tok_job_t j = {.fn = add_tok, .a = x, .b = r};
    return run_tokens(vc, &j);
}

static int op_scale(void *vc, enum lp_buf x, float s)
{
    tok_job_t j = {.fn = scale_tok, .a = x, .s = s};
    return run_tokens(vc, &j);
}

static int op_bias(void *vc, enum lp_buf x, const float *b, int32_t width)
{
    tok_job_t j = {.fn = bias_tok, .a = x, .w = b, .width = width};
    return run_tokens(vc, &j);
}

static int op_copy(void *vc, enum lp_buf dst, enum lp_buf src, int32_t width)
{
    tok_job_t j = {.fn = copy_tok, .a = src, .d = dst, .width = width};
    return run_tokens(vc, &j);
}

static int op_rope(void *vc, enum lp_buf x, int32_t n_heads, int32_t layer)
{
    tok_job_t j = {.fn = rope_tok, .a = x, .n_groups = n_heads, .layer = layer};
    return run_tokens(vc, &j);
}

static int op_matmul(void *vc, int n, const lp_weight_t *const *w, enum lp_buf src,
                     const enum lp_buf *dst)
{
    cpu_ctx_t *c = vc;
    lp_matmul_t mm[4];
    if (n < 1 || n > 4) return lp_error_set(LP_ERR(EINVAL), "internal: %d products at once", n);
    for (int i = 0; i < n; i++) mm[i] = mm_of(c, w[i], c->buf[src], c->n_tok, c->buf[dst[i]], w[i]->n_out);
    return n == 1 ? lp_matmul(c->pool, &mm[0], c->p.exact)
                  : lp_matmul_multi(c->pool, mm, n, c->p.exact);
}

typedef struct glu_job {
    cpu_ctx_t *c;
    enum lp_act act;
    int64_t n;
} glu_job_t;

static void glu_worker(void *arg, int ith, int nth)
{
    const glu_job_t *j = arg;
    cpu_ctx_t *c = j->c;
    const int64_t per = (j->n + nth - 1) / nth, lo = per * ith, hi = lo + per < j->n ? lo + per : j->n;
    if (lo >= hi) return;
    float *g = c->buf[LP_BUF_GATE] + lo;
    const float *u = c->buf[LP_BUF_UP] + lo;
    if (j->act == LP_ACT_GELU_TANH) /* llama.cpp's fp16 table on both paths */
        (c->p.exact ? lp_op_geglu : lp_vec_geglu)(g, g, u, hi - lo);
    else (c->p.exact ? lp_op_swiglu : lp_vec_swiglu)(g, g, u, hi - lo);
}

static int op_glu(void *vc, enum lp_act act, int32_t width)
{
    cpu_ctx_t *c = vc;
    glu_job_t j = {c, act, (int64_t)c->n_tok * width};
    if (c->n_tok < 4) glu_worker(&j, 0, 1);
    else lp_threadpool_run(c->pool, glu_worker, &j);
    return 0;
}

static void split_tok(cpu_ctx_t *c, const tok_job_t *j, int32_t t)
{
    const int64_t w = j->width, n = (int64_t)j->n_groups * w;
    const float *x = row(c, j->a, t, 2 * n);
    float *ya = row(c, j->d, t, n), *yb = row(c, j->b, t, n);
    for (int32_t g = 0; g < j->n_groups; g++) {
        memcpy(ya + g * w, x + 2 * g * w, sizeof(float) * (size_t)w);
        memcpy(yb + g * w, x + (2 * g + 1) * w, sizeof(float) * (size_t)w);
    }
}

static int op_split(void *vc, enum lp_buf dst_a, enum lp_buf dst_b, enum lp_buf src,
                    int32_t n_groups, int32_t width)
{
    tok_job_t j = {.fn = split_tok, .a = src, .b = dst_b, .d = dst_a, .n_groups = n_groups,
                   .width = width};
    return run_tokens(vc, &j);
}

static void gate_tok(cpu_ctx_t *c, const tok_job_t *j, int32_t t)
{
    float *x = row(c, j->a, t, j->width);
    const float *g = row(c, j->b, t, j->width);
    if (j->act == LP_ACT_SILU) {
        (c->p.exact ? lp_op_swiglu : lp_vec_swiglu)(x, g, x, j->width);
        return;
    }
    for (int32_t i = 0; i < j->width; i++) x[i] *= 1.0f / (1.0f + expf(-g[i]));
}

static int op_gate(void *vc, enum lp_buf x, enum lp_buf g, enum lp_act act, int32_t width)
{
    if (act != LP_ACT_SILU && act != LP_ACT_SIGMOID)
        return lp_error_set(LP_ERR(EINVAL), "internal: gate with activation %d", (int)act);
    tok_job_t j = {.fn = gate_tok, .a = x, .b = g, .act = act, .width = width};
    return run_tokens(vc, &j);
}

/* ---- recurrent layers (Gated DeltaNet) ------------------------------------ */

/* seq_id's state of recurrent layer l. */
static float *rec_state(const cpu_ctx_t *c, int32_t seq_id, int32_t l)
{
    return c->rec + (size_t)seq_id * (size_t)c->m->hp.rec_floats + (size_t)c->rec_off[l];
}

typedef struct rec_job {
    cpu_ctx_t *c;
    int32_t layer;
    int64_t n_work, per_ent; /* items: entries x per_ent */
} rec_job_t;

#define CONV_CHUNK 64 /* channels per work item */

/* The short convolution of one entry's channels [c0, c1): llama.cpp's
 * ssm_conv (the sum over the window oldest first, in float), then SiLU. */
static void conv_worker(void *arg, int ith, int nth)
{
    const rec_job_t *j = arg;
    cpu_ctx_t *c = j->c;
    const lp_ssm_t *S = &c->m->ssm;
    const int32_t K = S->d_conv, nc = S->n_channels;
    const float *w_all = c->m->layers[j->layer].ssm_conv;
    for (int64_t it = ith; it < j->n_work; it += nth) {
        const int32_t e = (int32_t)(it / j->per_ent);
        const int32_t c0 = (int32_t)(it % j->per_ent) * CONV_CHUNK;
        const int32_t c1 = c0 + CONV_CHUNK < nc ? c0 + CONV_CHUNK : nc;
        const lp_batch_seq_t *ent = &c->ents[e];
        float *st = rec_state(c, ent->seq_id, j->layer);
        float *mix = c->buf[LP_BUF_MIX] + (int64_t)c->ent_t0[e] * nc;
        float win[64];
        for (int32_t ch = c0; ch < c1; ch++) {
            const float *w = w_all + (int64_t)ch * K;
            float *sc = st + (int64_t)ch * (K - 1);
            for (int32_t k = 0; k < K - 1; k++) win[k] = ent->pos ? sc[k] : 0.0f;
            for (int32_t t = 0; t < ent->n_tokens; t++) {
                float *x = mix + (int64_t)t * nc + ch;
                win[K - 1] = *x;
                float sum = 0.0f;
                for (int32_t k = 0; k < K; k++) sum += win[k] * w[k];
                *x = sum / (1.0f + expf(-sum));
                memmove(win, win + 1, sizeof(float) * (size_t)(K - 1));
            }
            memcpy(sc, win, sizeof(float) * (size_t)(K - 1));
        }
    }
}

static int op_conv(void *vc, int32_t layer)
{
    cpu_ctx_t *c = vc;
    rec_job_t j = {c, layer, 0, (c->m->ssm.n_channels + CONV_CHUNK - 1) / CONV_CHUNK};
    j.n_work = (int64_t)c->n_seqs * j.per_ent;
    lp_threadpool_run(c->pool, conv_worker, &j);
    return 0;
}

/* Per token: q and k L2-normalised per key head as ggml_l2_norm (the
 * squares summed in double, x / max(norm, eps)), q then times
 * 1/sqrt(d_state); BETA = sigmoid; ALPHA = exp(softplus(ALPHA + dt) * a),
 * the decay. */
static void gdn_prep_tok(cpu_ctx_t *c, const tok_job_t *j, int32_t t)
{
    const lp_ssm_t *S = &c->m->ssm;
    const lp_layer_t *L = &c->m->layers[j->layer];
    const int32_t d = S->d_state;
    const float eps = c->m->hp.rms_eps, scale = 1.0f / sqrtf((float)d);
    float *qk = row(c, LP_BUF_MIX, t, S->n_channels);
    for (int32_t h = 0; h < 2 * S->n_group; h++) {
        float *x = qk + (int64_t)h * d;
        double sum = 0;
        for (int32_t i = 0; i < d; i++) sum += (double)x[i] * x[i];
        const float inv = 1.0f / fmaxf(sqrtf((float)sum), eps);
        for (int32_t i = 0; i < d; i++) x[i] *= inv;
        if (h < S->n_group)
            for (int32_t i = 0; i < d; i++) x[i] *= scale;
    }
    float *beta = row(c, LP_BUF_BETA, t, S->n_v_heads), *alpha = row(c, LP_BUF_ALPHA, t, S->n_v_heads);
    for (int32_t h = 0; h < S->n_v_heads; h++) {
        beta[h] = 1.0f / (1.0f + expf(-beta[h]));
        const float a = alpha[h] + L->ssm_dt[h];
        const float sp = a > 20.0f ? a : logf(1.0f + expf(a));
        alpha[h] = expf(sp * L->ssm_a[h]);
    }
}

/* The delta rule of one entry's value head, token after token: per row j
 * of S (value dim), S_j *= decay; S_j += k * beta (v_j - S_j.k); o_j =
 * S_j.q, one pass over the row. */
static void gdn_worker(void *arg, int ith, int nth)
{
    const rec_job_t *j = arg;
    cpu_ctx_t *c = j->c;
    const lp_ssm_t *S = &c->m->ssm;
    const int32_t d = S->d_state, nc = S->n_channels, hv = S->n_v_heads;
    const int64_t conv_floats = (int64_t)nc * (S->d_conv - 1);
    for (int64_t it = ith; it < j->n_work; it += nth) {
        const int32_t e = (int32_t)(it / j->per_ent), h = (int32_t)(it % j->per_ent);
        const int32_t kh = h % S->n_group;
        const lp_batch_seq_t *ent = &c->ents[e];
        float *st = rec_state(c, ent->seq_id, j->layer) + conv_floats + (int64_t)h * d * d;
        if (ent->pos == 0) memset(st, 0, sizeof(float) * (size_t)d * (size_t)d);
        for (int32_t t = c->ent_t0[e]; t < c->ent_t0[e] + ent->n_tokens; t++) {
            const float *mix = row(c, LP_BUF_MIX, t, nc);
            const float *q = mix + (int64_t)kh * d, *k = mix + (int64_t)(S->n_group + kh) * d;
            const float *v = mix + (int64_t)2 * S->n_group * d + (int64_t)h * d;
            const float b = row(c, LP_BUF_BETA, t, hv)[h], g = row(c, LP_BUF_ALPHA, t, hv)[h];
            float *o = row(c, LP_BUF_ATT, t, (int64_t)hv * d) + (int64_t)h * d;
            for (int32_t r = 0; r < d; r++) {
                float *sr = st + (int64_t)r * d;
                for (int32_t i = 0; i < d; i++) sr[i] *= g;
                const float dr = b * (v[r] - lp_vec_dot(sr, k, d));
                lp_vec_axpy(sr, dr, k, d);
                o[r] = lp_vec_dot(sr, q, d);
            }
        }
    }
}

static int op_delta_net(void *vc, int32_t layer)
{
    cpu_ctx_t *c = vc;
    tok_job_t prep = {.fn = gdn_prep_tok, .layer = layer};
    run_tokens(c, &prep);
    rec_job_t j = {c, layer, 0, c->m->ssm.n_v_heads};
    j.n_work = (int64_t)c->n_seqs * j.per_ent;
    lp_threadpool_run(c->pool, gdn_worker, &j);
    return 0;
}

/* ---- attention ---------------------------------------------------------- */

typedef struct attn_job {
    cpu_ctx_t *c;
    int32_t layer;
} attn_job_t;

/* Exact attention, split over (token, head) pairs across the pool. */
static void attn_worker(void *arg, int ith, int nth)
{
    attn_job_t *j = arg;
    cpu_ctx_t *c = j->c;
    const lp_hparams_t *hp = &c->m->hp;
    const lp_layer_hp_t *L = &c->m->layers[j->layer].hp;
    const kv_geom_t *G = &c->geom[c->layer_geom[j->layer]];
    const int32_t hd = L->head_dim, group = hp->n_head / L->n_head_kv;
    const int64_t q_w = (int64_t)hp->n_head * hd;
    float *scores = c->scores + (size_t)ith * (size_t)c->p.n_ctx;
    const int64_t n_work = (int64_t)c->n_tok * hp->n_head;
    const float *kl = c->kv[L->kv_group].k + c->layer_base[j->layer];
    const float *vl = c->kv[L->kv_group].v + c->layer_base[j->layer];
    const float *sinks = c->m->layers[j->layer].attn_sinks;
    for (int64_t w = ith; w < n_work; w += nth) {
        const int32_t t = (int32_t)(w / hp->n_head), h = (int32_t)(w % hp->n_head);
        const int32_t lo = L->n_swa ? c->tok_lo[t] : 0, n = c->tok_pos[t] + 1 - lo;
        const int64_t *off = G->seq_off[c->tok_seq[t]] + lo, head = (h / group) * G->head_stride;
        const float *k = kl + off[0] + head, *v = vl + off[0] + head;
        if (off[n - 1] - off[0] != (int64_t)(n - 1) * hd) {
            /* lp_op_attn_head takes evenly spaced rows: gather the blocks' */
            float *kg = c->gather + (size_t)ith * 2 * (size_t)c->p.n_ctx * (size_t)hp->head_dim;
            float *vg = kg + (size_t)c->p.n_ctx * (size_t)hp->head_dim;
            for (int32_t p = 0; p < n; p++) {
                memcpy(kg + (size_t)p * hd, kl + off[p] + head, sizeof(float) * (size_t)hd);
                memcpy(vg + (size_t)p * hd, vl + off[p] + head, sizeof(float) * (size_t)hd);
            }
            k = kg;
            v = vg;
        }
        lp_op_attn_head_sink(c->buf[LP_BUF_ATT] + t * q_w + (int64_t)h * hd,
                             c->buf[LP_BUF_Q] + t * q_w + (int64_t)h * hd, k, v, hd, n, hd,
                             L->attn_scale, NULL, sinks ? &sinks[h] : NULL, scores);
    }
}

/* K and V of the step's tokens into the cache, then the attention of layer
 * `layer` for them: ATT from Q and the cache. */
static int op_attention(void *vc, int32_t layer)
{
    cpu_ctx_t *c = vc;
    const lp_hparams_t *hp = &c->m->hp;
    const lp_layer_hp_t *L = &c->m->layers[layer].hp;
    tok_job_t store = {.fn = store_tok, .layer = layer};
    run_tokens(c, &store);
    if (c->p.exact) {
        attn_job_t job = {c, layer};
        lp_threadpool_run(c->pool, attn_worker, &job);
        return 0;
    }
    const kv_geom_t *G = &c->geom[c->layer_geom[layer]];
    for (int32_t i = 0; i < c->n_seqs; i++) {
        c->k_layer[i] = c->kv[L->kv_group].k + c->layer_base[layer];
        c->v_layer[i] = c->kv[L->kv_group].v + c->layer_base[layer];
    }
    lp_attn_batch_t b = {
        .out = c->buf[LP_BUF_ATT], .q = c->buf[LP_BUF_Q], .tok_seq = c->tok_seq,
        .tok_pos = c->tok_pos, .tok_lo = L->n_swa ? c->tok_lo : NULL,
        .k = c->k_layer, .v = c->v_layer, .key_stride = L->head_dim,
        .head_stride = G->head_stride, .key_off = (const int64_t *const *)G->seq_off,
        .n_tok = c->n_tok, .n_head = hp->n_head, .n_head_kv = L->n_head_kv,
        .head_dim = L->head_dim, .scale = L->attn_scale,
        .sinks = c->m->layers[layer].attn_sinks,
    };
    return lp_attn_run(c->pool, &b);
}

/* ---- mixture of experts (moe.c) ----------------------------------------- */

static int op_moe(void *vc, enum lp_buf dst, enum lp_buf src, const lp_moe_t *moe)
{
    cpu_ctx_t *c = vc;
    if (!c->moe || dst == src)
        return lp_error_set(LP_ERR(EINVAL), "internal: a mixture of experts in a model without "
                            "expert_count, or in place");
    return lp_moe_cpu_run(c->moe, c->pool, c->p.exact, moe, c->buf[src], c->n_tok, c->buf[dst]);
}

static void cpu_moe_counts(void *vctx, lp_moe_counts_t *out)
{
    const cpu_ctx_t *c = vctx;
    if (c->moe) lp_moe_cpu_counts(c->moe, out);
}

static const lp_fwd_ops_t cpu_fwd_ops = {
    .norm = op_norm,
    .add_norm = op_add_norm,
    .add = op_add,
    .scale = op_scale,
    .matmul = op_matmul,
    .bias = op_bias,
    .copy = op_copy,
    .rope = op_rope,
    .attention = op_attention,
    .glu = op_glu,
    .moe = op_moe,
    .split = op_split,
    .gate = op_gate,
    .conv = op_conv,
    .delta_net = op_delta_net,
};

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

/* logits = cap * tanh(logits / cap), as llama.cpp's three ops (the exact
 * path with tanhf). */
static void softcap(const cpu_ctx_t *c, float *r, int64_t n, float cap)
{
    if (!c->p.exact) {
        lp_vec_softcap(r, n, cap);
        return;
    }
    const float inv = 1.0f / cap;
    for (int64_t i = 0; i < n; i++) r[i] = tanhf(r[i] * inv) * cap;
}

static int compute_logits(cpu_ctx_t *c, const int32_t *rows_tok, int32_t n_rows,
                          float *const *logits)
{
    const lp_hparams_t *hp = &c->m->hp;
    const int64_t n_embd = hp->n_embd, n_vocab = hp->n_vocab;
    float *x = c->buf[LP_BUF_X], *xn = c->buf[LP_BUF_XN];
    /* Gather the requested rows of the residual stream into xn, normalised. */
    for (int32_t r = 0; r < n_rows; r++)
        (c->p.exact ? lp_op_add_rmsnorm : lp_vec_add_rmsnorm)(xn + r * n_embd,
                                                               x + (int64_t)rows_tok[r] * n_embd,
                                                               NULL, c->m->output_norm, n_embd,
                                                               hp->rms_eps);
    int64_t stride;
    int rc = 0;
    if (same_stride(logits, n_rows, &stride) && (stride == 0 || stride >= n_vocab)) {
        rc = matmul(c, &c->m->output, xn, n_rows, logits[0], stride ? stride : n_vocab);
    } else {
        for (int32_t r0 = 0; !rc && r0 < n_rows; r0 += LOGIT_CHUNK) {
            int32_t n = n_rows - r0 < LOGIT_CHUNK ? n_rows - r0 : LOGIT_CHUNK;
            rc = matmul(c, &c->m->output, xn + r0 * n_embd, n, c->logit_tmp, n_vocab);
            for (int32_t r = 0; !rc && r < n; r++)
                memcpy(logits[r0 + r], c->logit_tmp + r * n_vocab, sizeof(float) * (size_t)n_vocab);
        }
    }
    if (!rc && hp->logit_softcap > 0)
        for (int32_t r = 0; r < n_rows; r++) softcap(c, logits[r], n_vocab, hp->logit_softcap);
    return rc;
}

/* ---- the step --------------------------------------------------------- */

static int cpu_step(void *vctx, const lp_batch_seq_t *seqs, int32_t n_seqs, int32_t T,
                    float *const *logits)
{
    cpu_ctx_t *c = vctx;
    const lp_model_t *m = c->m;
    const lp_hparams_t *hp = &m->hp;
    const int64_t n_embd = hp->n_embd;
    int rc;

    /* load: token metadata, where each entry's positions lie, RoPE angles,
     * embeddings */
    if ((rc = entry_offsets(c, seqs, n_seqs))) return rc;
    c->n_tok = T;
    c->n_seqs = n_seqs;
    c->ents = seqs;
    int32_t t = 0;
    for (int32_t i = 0; i < n_seqs; i++) {
        const lp_batch_seq_t *s = &seqs[i];
        c->ent_t0[i] = t;
        for (int32_t k = 0; k < s->n_tokens; k++, t++) {
            const int32_t pos = s->pos + k;
            c->tok_seq[t] = i;
            c->tok_pos[t] = pos;
            c->tok_lo[t] = hp->n_swa && pos >= hp->n_swa ? pos - hp->n_swa + 1 : 0;
            for (int32_t r = 0; r < m->n_ropes; r++) {
                const lp_rope_t *R = &m->ropes[r];
                const int32_t half = R->n_rot / 2;
                if (R->yarn_ext != 0)
                    lp_op_rope_angles_yarn(pos, R->n_rot, R->base, R->freq_scale, R->freq_factors,
                                           R->yarn_ext, R->yarn_lo, R->yarn_hi, R->yarn_mscale,
                                           c->rope_cs[r] + t * half, c->rope_sn[r] + t * half);
                else if (R->freq_scale == 1.0f && !R->freq_factors)
                    lp_op_rope_angles(pos, R->n_rot, R->base, c->rope_cs[r] + t * half,
                                      c->rope_sn[r] + t * half);
                else
                    lp_op_rope_angles_ext(pos, R->n_rot, R->base, R->freq_scale, R->freq_factors,
                                          c->rope_cs[r] + t * half, c->rope_sn[r] + t * half);
            }
            const lp_weight_t *e = &m->tok_embd;
            float *x = c->buf[LP_BUF_X] + (int64_t)t * n_embd;
            lp_dequant_row(e->type, (const uint8_t *)e->data + (size_t)s->tokens[k] * e->row_bytes,
                           x, n_embd);
            if (hp->embd_scale != 1.0f)
                for (int64_t i2 = 0; i2 < n_embd; i2++) x[i2] *= hp->embd_scale;
        }
    }

    const lp_fwd_t fwd = {&cpu_fwd_ops, c};
    for (int32_t l = 0; l < hp->n_layer; l++) {
        if ((rc = m->arch->layer(&fwd, m, l))) return rc;
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
    .features = ~0u, /* the reference: every feature */
    .available = cpu_available,
    .create = cpu_create,
    .destroy = cpu_destroy,
    .seq_truncate = cpu_seq_truncate,
    .step = cpu_step,
    .weight_copy = cpu_weight_copy,
    .moe_counts = cpu_moe_counts,
};
