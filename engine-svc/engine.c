/* engine.c - the engine object: picks a backend, sizes the KV pool, tracks
 * the lengths of the seq_ids' fallback tables, and validates every batch
 * (block tables included) before the backend sees it. */
#include "backend.h"

#include "arch/arch.h"
#include "error.h"
#include "log.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct lp_engine {
    lp_model_t *model;           /* borrowed */
    lp_engine_params_t params;   /* with defaults filled in */
    const lp_backend_ops_t *ops;
    void *ctx;
    int32_t *seq_len;            /* (max_seqs) cached positions of each fallback table */
    int32_t *rec_pos;            /* (max_seqs) where each seq_id's recurrent state is
                                    (-1: none); NULL when the model has no recurrent layers */
    uint8_t *seen;               /* (max_seqs) scratch for duplicate checks */
    /* KV pool: kv.kv_blocks blocks of kv.kv_block positions.  Not paged:
     * one block of n_ctx per seq_id, and no tables are taken. */
    lp_kv_pool_t kv;
    bool paged;
    int32_t per_seq;             /* blocks of one full context: ceil(n_ctx / kv_block) */
    bool fallback;               /* the pool holds max_seqs * per_seq blocks */
    uint32_t *identity;          /* (max_seqs * per_seq) k -> k: the fallback tables, or NULL */
    /* Sliding-window layers (hp->n_swa > 0): their pool, kv.kv_blocks_swa
     * blocks; a seq_id's fallback table there is a ring of swa_per blocks
     * (enough for a window and the longest step). */
    int32_t n_swa, swa_per;
    uint32_t *ring_swa;          /* (max_seqs * per_seq) the fallback tables there, or NULL */
    /* Checks, per pool (0: full attention, 1: sliding window): */
    uint32_t *mark[2];           /* (blocks) stamp per block: duplicates within a table */
    uint32_t stamp;
    int32_t *writer[2];          /* (blocks) the batch entry that writes a block this step */
    uint32_t *writer_stamp[2];   /* (blocks) writer[b] is current where this is wstamp */
    uint32_t wstamp;
    lp_batch_seq_t *run;         /* (max_seqs) the batch with fallback tables filled in */
};

static const lp_backend_ops_t *backends[] = {
#ifdef LP_HAVE_CUDA
    &lp_backend_cuda,
#endif
    &lp_backend_cpu,
};

/* Size the KV pool (params already defaulted): a bad value is an error
 * naming its engine-svc flag. */
static int kv_plan(lp_engine_t *e, const lp_hparams_t *hp)
{
    lp_engine_params_t *p = &e->params;
    if (!e->paged) {
        if (p->kv_pool_tokens || p->kv_pool_mb)
            return lp_error_set(LP_ERR(EINVAL), "--kv-pool-tokens/--kv-pool-mb size a paged KV "
                                "cache, and this one is not paged (--kv-block 0)");
        e->kv = (lp_kv_pool_t){p->n_ctx, p->max_seqs, e->n_swa ? p->max_seqs : 0};
        e->per_seq = 1;
        e->swa_per = 1;
        e->fallback = true;
        return 0;
    }
    if (p->kv_pool_tokens && p->kv_pool_mb)
        return lp_error_set(LP_ERR(EINVAL), "--kv-pool-tokens %lld and --kv-pool-mb %lld both "
                            "size the KV pool: give one", (long long)p->kv_pool_tokens,
                            (long long)p->kv_pool_mb);
    const int64_t B = p->kv_block;
    /* --kv-pool-mb sizes the full-attention layers' pool */
    const int64_t floats = hp->kv_floats > hp->kv_floats_swa ? hp->kv_floats - hp->kv_floats_swa
                                                             : hp->kv_floats;
    const int64_t block_bytes = 2 * floats * B * (int64_t)sizeof(float);
    e->per_seq = (int32_t)((p->n_ctx + B - 1) / B);
    int64_t blocks = (int64_t)p->max_seqs * e->per_seq;
    if (p->kv_pool_tokens) {
        blocks = (p->kv_pool_tokens + B - 1) / B;
    } else if (p->kv_pool_mb) {
        if (p->kv_pool_mb > (INT64_MAX >> 21))
            return lp_error_set(LP_ERR(EINVAL), "--kv-pool-mb %lld is too large",
                                (long long)p->kv_pool_mb);
        blocks = (p->kv_pool_mb << 20) / block_bytes;
        if (blocks == 0)
            return lp_error_set(LP_ERR(EINVAL), "--kv-pool-mb %lld holds no block: one block of %d "
                                "positions takes %lld bytes", (long long)p->kv_pool_mb,
                                p->kv_block, (long long)block_bytes);
    }
    if (blocks > INT32_MAX)
        return lp_error_set(LP_ERR(EINVAL), "KV pool of %lld blocks of %d positions: more than "
                            "%d blocks (--kv-pool-tokens, --kv-pool-mb)", (long long)blocks,
                            p->kv_block, INT32_MAX);
    int64_t swa_blocks = 0;
    if (e->n_swa) {
        /* a step of max_batch_tokens at pos reads pos - n_swa + 1 .. pos + n - 1 */
        int64_t per = (e->n_swa - 1 + p->max_batch_tokens + B - 1) / B + 1;
        e->swa_per = (int32_t)(per < e->per_seq ? per : e->per_seq);
        swa_blocks = p->kv_pool_swa_tokens ? (p->kv_pool_swa_tokens + B - 1) / B
                                           : (int64_t)p->max_seqs * e->swa_per;
        if (swa_blocks > INT32_MAX)
            return lp_error_set(LP_ERR(EINVAL), "--kv-pool-swa-tokens %lld: more than %d blocks",
                                (long long)p->kv_pool_swa_tokens, INT32_MAX);
    }
    e->kv = (lp_kv_pool_t){p->kv_block, (int32_t)blocks, (int32_t)swa_blocks};
    e->fallback = blocks >= (int64_t)p->max_seqs * e->per_seq &&
                  swa_blocks >= (int64_t)p->max_seqs * e->swa_per;
    return 0;
}

int lp_engine_new(lp_model_t *model, const lp_engine_params_t *params, lp_engine_t **out)
{
    *out = NULL;
    lp_engine_params_t p = params ? *params : (lp_engine_params_t){0};
    const lp_hparams_t *hp = lp_model_hparams(model);
    if (p.n_ctx < 0 || p.max_seqs < 0 || p.max_batch_tokens < 0 || p.n_threads < 0)
        return lp_error_set(LP_ERR(EINVAL), "engine parameters must not be negative");
    if (p.kv_block < LP_ENGINE_KV_CONTIGUOUS)
        return lp_error_set(LP_ERR(EINVAL), "--kv-block %d: positions per KV block must not be "
                            "negative (0: no paging)", p.kv_block);
    if (p.kv_pool_tokens < 0 || p.kv_pool_mb < 0 || p.kv_pool_swa_tokens < 0)
        return lp_error_set(LP_ERR(EINVAL), "--kv-pool-tokens %lld / --kv-pool-mb %lld / "
                            "--kv-pool-swa-tokens %lld must not be negative",
                            (long long)p.kv_pool_tokens, (long long)p.kv_pool_mb,
                            (long long)p.kv_pool_swa_tokens);
    if (p.n_ctx == 0) p.n_ctx = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    if (p.max_seqs == 0) p.max_seqs = 16;
    if (p.max_batch_tokens == 0) p.max_batch_tokens = 512;
    if (p.n_threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        p.n_threads = n > 0 ? (int32_t)n : 1;
    }
    if (p.kv_block == 0) p.kv_block = 16;
    if (p.kv_block > p.n_ctx) p.kv_block = p.n_ctx; /* a block never holds more than a context */
    if (p.n_ctx > hp->n_ctx_train)
        LP_WARN("context %d is longer than the model's training context %d", p.n_ctx,
                hp->n_ctx_train);

    const lp_backend_ops_t *ops = NULL;
    for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
        const lp_backend_ops_t *b = backends[i];
        if (p.backend && strcmp(p.backend, b->name)) continue;
        /* a backend never runs a model it would compute otherwise */
        char why[640];
        if (lp_model_missing_feature(model, b->features, why, sizeof(why))) {
            if (p.backend)
                return lp_error_set(LP_ERR(ENOTSUP), "the %s backend does not implement %s of "
                                    "this %s model: run it with --backend cpu", b->name, why,
                                    hp->arch);
            if (!b->available || b->available())
                LP_WARN("the %s backend does not implement %s of this %s model: not using it",
                        b->name, why, hp->arch);
            continue;
        }
        if (b->available && !b->available()) continue;
        ops = b;
        break;
    }
    if (!ops)
        return lp_error_set(LP_ERR(ENODEV), "backend '%s' is not available here%s", p.backend,
                            strcmp(p.backend, "cuda") ? " (known: cpu, cuda)"
                                                      : " (not built, or no GPU found)");

    lp_engine_t *e = calloc(1, sizeof(*e));
    if (!e) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    e->model = model;
    e->params = p;
    e->ops = ops;
    e->paged = ops->paged && p.kv_block > 0;
    e->n_swa = hp->n_swa;
    if (!e->n_swa && p.kv_pool_swa_tokens) {
        LP_WARN("--kv-pool-swa-tokens: this %s model has no sliding-window layers: ignored",
                hp->arch);
        e->params.kv_pool_swa_tokens = 0;
    }
    if (!ops->paged && p.kv_block > 0 && (p.kv_pool_tokens || p.kv_pool_mb)) {
        LP_WARN("the %s backend does not page its KV cache: --kv-pool-tokens/--kv-pool-mb "
                "ignored", ops->name);
        e->params.kv_pool_tokens = e->params.kv_pool_mb = 0;
    }
    int rc = kv_plan(e, hp);
    if (rc) {
        lp_engine_destroy(&e);
        return rc;
    }
    e->seq_len = calloc((size_t)p.max_seqs, sizeof(*e->seq_len));
    if (hp->n_layer_rec) e->rec_pos = calloc((size_t)p.max_seqs, sizeof(*e->rec_pos));
    e->seen = calloc((size_t)p.max_seqs, 1);
    e->run = calloc((size_t)p.max_seqs, sizeof(*e->run));
    bool oom = !e->seq_len || !e->seen || !e->run || (hp->n_layer_rec && !e->rec_pos);
    for (int g = 0; e->paged && g < 2; g++) {
        const size_t nb = (size_t)(g ? e->kv.kv_blocks_swa : e->kv.kv_blocks) + 1;
        e->mark[g] = calloc(nb, sizeof(*e->mark[g]));
        e->writer[g] = calloc(nb, sizeof(*e->writer[g]));
        e->writer_stamp[g] = calloc(nb, sizeof(*e->writer_stamp[g]));
        oom |= !e->mark[g] || !e->writer[g] || !e->writer_stamp[g];
    }
    if (e->fallback) {
        size_t n = (size_t)p.max_seqs * (size_t)e->per_seq;
        if ((e->identity = malloc(n * sizeof(*e->identity))))
            for (size_t k = 0; k < n; k++) e->identity[k] = (uint32_t)k;
        oom |= !e->identity;
        if (e->n_swa && (e->ring_swa = malloc(n * sizeof(*e->ring_swa))))
            for (size_t k = 0; k < n; k++)
                e->ring_swa[k] = (uint32_t)(k / (size_t)e->per_seq * (size_t)e->swa_per +
                                            k % (size_t)e->per_seq % (size_t)e->swa_per);
        oom |= e->n_swa && !e->ring_swa;
    }
    rc = oom ? lp_error_set(LP_ERR(ENOMEM), "out of memory")
             : ops->create(model, &e->params, &e->kv, &e->ctx);
    if (rc) {
        lp_engine_destroy(&e);
        return rc;
    }
    LP_INFO("engine: %s backend, %d threads, context %d, %d sequences, %d tokens per step",
            ops->name, p.n_threads, p.n_ctx, p.max_seqs, p.max_batch_tokens);
    if (e->paged)
        LP_INFO("engine: KV pool of %d blocks of %d positions (%lld positions)%s",
                e->kv.kv_blocks, e->kv.kv_block, (long long)e->kv.kv_blocks * e->kv.kv_block,
                e->fallback ? "" : "; no per-seq_id fallback tables: steps carry block tables");
    if (hp->n_layer_rec)
        LP_INFO("engine: %d recurrent layers: a state of %lld KB per sequence, kept per seq_id "
                "(a step goes on from it, or starts again at position 0)", hp->n_layer_rec,
                (long long)(hp->rec_floats * 4 / 1024));
    if (e->paged && e->n_swa)
        LP_INFO("engine: sliding-window layers (window %d): their own pool of %d blocks, %d per "
                "sequence at most", e->n_swa, e->kv.kv_blocks_swa, e->swa_per);
    *out = e;
    return 0;
}

void lp_engine_destroy(lp_engine_t **self_p)
{
    lp_engine_t *e = self_p ? *self_p : NULL;
    if (!e) return;
    if (e->ctx) e->ops->destroy(e->ctx);
    free(e->seq_len);
    free(e->rec_pos);
    free(e->seen);
    free(e->identity);
    free(e->ring_swa);
    for (int g = 0; g < 2; g++) {
        free(e->mark[g]);
        free(e->writer[g]);
        free(e->writer_stamp[g]);
    }
    free(e->run);
    free(e);
    *self_p = NULL;
}

const char *lp_engine_backend_name(const lp_engine_t *e) { return e->ops->name; }

void lp_engine_moe_counts(const lp_engine_t *e, lp_moe_counts_t *out)
{
    memset(out, 0, sizeof(*out));
    if (e->ops->moe_counts) e->ops->moe_counts(e->ctx, out);
}

const void *lp_engine_weight_copy(const lp_engine_t *e, const void *w, size_t *bytes)
{
    *bytes = 0;
    return e->ops->weight_copy ? e->ops->weight_copy(e->ctx, w, bytes) : NULL;
}

int lp_engine_register_host(lp_engine_t *e, void *ptr, size_t len)
{
    if (!ptr || !len)
        return lp_error_set(LP_ERR(EINVAL), "register_host: empty range");
    return e->ops->register_host ? e->ops->register_host(e->ctx, ptr, len) : 0;
}

int32_t lp_engine_kv_block(const lp_engine_t *e) { return e->paged ? e->kv.kv_block : 0; }
int32_t lp_engine_kv_blocks(const lp_engine_t *e) { return e->paged ? e->kv.kv_blocks : 0; }
int32_t lp_engine_kv_blocks_swa(const lp_engine_t *e) { return e->paged ? e->kv.kv_blocks_swa : 0; }
int32_t lp_engine_kv_swa_window(const lp_engine_t *e) { return e->paged ? e->n_swa : 0; }

void lp_engine_seq_reset(lp_engine_t *e, int32_t seq_id)
{
    if (seq_id < 0 || seq_id >= e->params.max_seqs) return;
    e->seq_len[seq_id] = 0;
    if (e->rec_pos) e->rec_pos[seq_id] = 0;
    e->ops->seq_truncate(e->ctx, seq_id, 0);
}

int32_t lp_engine_seq_state_pos(const lp_engine_t *e, int32_t seq_id)
{
    if (!e->rec_pos || seq_id < 0 || seq_id >= e->params.max_seqs) return -1;
    return e->rec_pos[seq_id];
}

int32_t lp_engine_seq_len(const lp_engine_t *e, int32_t seq_id)
{
    if (seq_id < 0 || seq_id >= e->params.max_seqs) return -1;
    return e->seq_len[seq_id];
}

/* The first block a sliding layer reads for an entry at pos. */
static int32_t swa_first_block(const lp_engine_t *e, int32_t pos)
{
    int32_t p = pos - e->n_swa + 1;
    return p > 0 ? p / e->kv.kv_block : 0;
}

/* One table of an entry: entries from `first` on are blocks of a pool of
 * n_pool, each once; the earlier ones are not read. */
static int check_table(lp_engine_t *e, int g, const char *field, const uint32_t *t, int32_t n,
                       int32_t first, int32_t n_pool)
{
    if (++e->stamp == 0) { /* wrapped: old stamps could match again */
        for (int k = 0; k < 2; k++)
            memset(e->mark[k], 0, sizeof(*e->mark[k]) *
                   (size_t)((k ? e->kv.kv_blocks_swa : e->kv.kv_blocks) + 1));
        e->stamp = 1;
    }
    for (int32_t k = first; k < n; k++) {
        const uint32_t b = t[k];
        if (b >= (uint32_t)n_pool)
            return lp_error_set(LP_ERR(EINVAL), "%s[%d] = %u is not in 0..%d", field, k, b,
                                n_pool - 1);
        if (e->mark[g][b] == e->stamp) {
            int32_t prev = first;
            while (t[prev] != b) prev++;
            return lp_error_set(LP_ERR(EINVAL), "%s[%d] = %u repeats %s[%d]", field, k, b, field,
                                prev);
        }
        e->mark[g][b] = e->stamp;
    }
    return 0;
}

/* A recurrent state cannot rewind or skip: an entry goes on from its
 * seq_id's state, or starts again at 0. */
static int check_state(const lp_engine_t *e, const lp_batch_seq_t *s)
{
    if (!e->rec_pos || s->pos == 0 || s->pos == e->rec_pos[s->seq_id]) return 0;
    const int32_t at = e->rec_pos[s->seq_id];
    if (at < 0)
        return lp_error_set(LP_ERR(EINVAL), "position %d: sequence %d has no recurrent state "
                            "(its last step failed): the model's %d recurrent layers must start "
                            "again at position 0", s->pos, s->seq_id,
                            lp_model_hparams(e->model)->n_layer_rec);
    return lp_error_set(LP_ERR(EINVAL), "position %d: sequence %d's recurrent state is at "
                        "position %d, and the model's %d recurrent layers can only go on from "
                        "there or start again at 0", s->pos, s->seq_id, at,
                        lp_model_hparams(e->model)->n_layer_rec);
}

int lp_engine_check_kv(lp_engine_t *e, const lp_batch_seq_t *s)
{
    int src = check_state(e, s);
    if (src) return src;
    if (!s->blocks) {
        if (s->n_blocks || s->swa_blocks || s->n_swa_blocks)
            return lp_error_set(LP_ERR(EINVAL), "n_blocks %d / swa_blocks without blocks",
                                s->n_blocks);
        if (!e->fallback)
            return lp_error_set(LP_ERR(EINVAL), "blocks: no block table, and this engine's KV "
                                "pool (%d blocks of %d) keeps no fallback table per seq_id",
                                e->kv.kv_blocks, e->kv.kv_block);
        if (s->pos < 0 || s->pos > e->seq_len[s->seq_id])
            return lp_error_set(LP_ERR(EINVAL), "position %d is past the end of sequence %d "
                                "(length %d)", s->pos, s->seq_id, e->seq_len[s->seq_id]);
        return 0;
    }
    if (!e->paged)
        return lp_error_set(LP_ERR(EINVAL), "blocks: a block table given, but this engine does "
                            "not page its KV cache (kv_block 0)");
    const int64_t B = e->kv.kv_block, end = (int64_t)s->pos + (s->n_tokens > 0 ? s->n_tokens : 0);
    const int64_t need = (end + B - 1) / B;
    if (s->pos < 0)
        return lp_error_set(LP_ERR(EINVAL), "position %d is negative", s->pos);
    if (s->n_blocks < need)
        return lp_error_set(LP_ERR(EINVAL), "blocks: %d blocks of %d positions do not cover "
                            "positions 0..%lld (%lld blocks needed)", s->n_blocks, e->kv.kv_block,
                            (long long)end - 1, (long long)need);
    if (s->n_blocks > e->per_seq)
        return lp_error_set(LP_ERR(EINVAL), "blocks: %d blocks, more than a context of %d "
                            "positions needs (%d)", s->n_blocks, e->params.n_ctx, e->per_seq);
    int rc = check_table(e, 0, "blocks", s->blocks, s->n_blocks, 0, e->kv.kv_blocks);
    if (rc || !e->n_swa) {
        if (!rc && (s->swa_blocks || s->n_swa_blocks))
            rc = lp_error_set(LP_ERR(EINVAL), "swa_blocks: given, but the model has no "
                              "sliding-window layers");
        return rc;
    }
    if (!s->swa_blocks)
        return lp_error_set(LP_ERR(EINVAL), "swa_blocks: missing: the model's sliding-window "
                            "layers (window %d) keep their KV in a pool of their own", e->n_swa);
    if (s->n_swa_blocks != s->n_blocks)
        return lp_error_set(LP_ERR(EINVAL), "swa_blocks: %d entries for %d in blocks",
                            s->n_swa_blocks, s->n_blocks);
    return check_table(e, 1, "swa_blocks", s->swa_blocks, s->n_swa_blocks,
                       swa_first_block(e, s->pos), e->kv.kv_blocks_swa);
}

/* The table an entry reads through in pool g (its own, or its seq_id's
 * fallback), and the first entry read. */
static void entry_table(const lp_engine_t *e, const lp_batch_seq_t *s, int g, const uint32_t **t,
                        int32_t *n, int32_t *first)
{
    *first = g ? swa_first_block(e, s->pos) : 0;
    if (s->blocks) {
        *t = g ? s->swa_blocks : s->blocks;
        *n = s->n_blocks;
    } else {
        *t = (g ? e->ring_swa : e->identity) + (size_t)s->seq_id * (size_t)e->per_seq;
        *n = e->per_seq;
    }
}

/* No entry may write a block that another entry of the batch reads: shared
 * blocks are read-only (only positions >= pos are written, and a caller
 * shares only full blocks below them).  In each pool. */
static int check_writes(lp_engine_t *e, const lp_batch_seq_t *seqs, int32_t n_seqs)
{
    if (++e->wstamp == 0) {
        for (int g = 0; g < 2; g++)
            memset(e->writer_stamp[g], 0, sizeof(*e->writer_stamp[g]) *
                   (size_t)((g ? e->kv.kv_blocks_swa : e->kv.kv_blocks) + 1));
        e->wstamp = 1;
    }
    const int32_t B = e->kv.kv_block;
    for (int g = 0; g < (e->n_swa ? 2 : 1); g++) {
        for (int32_t i = 0; i < n_seqs; i++) {
            const uint32_t *t;
            int32_t n, first;
            entry_table(e, &seqs[i], g, &t, &n, &first);
            for (int32_t k = seqs[i].pos / B; k <= (seqs[i].pos + seqs[i].n_tokens - 1) / B; k++) {
                e->writer_stamp[g][t[k]] = e->wstamp;
                e->writer[g][t[k]] = i;
            }
        }
        for (int32_t i = 0; i < n_seqs; i++) {
            const uint32_t *t;
            int32_t n, first;
            entry_table(e, &seqs[i], g, &t, &n, &first);
            const int32_t n_read = (seqs[i].pos + seqs[i].n_tokens + B - 1) / B;
            for (int32_t k = first; k < n_read; k++)
                if (e->writer_stamp[g][t[k]] == e->wstamp && e->writer[g][t[k]] != i)
                    return lp_error_set(LP_ERR(EINVAL), "batch entry %d: block %u (its %s "
                                        "table's entry %d) is written in this step by batch "
                                        "entry %d", i, t[k], g ? "swa_blocks" : "blocks", k,
                                        e->writer[g][t[k]]);
        }
    }
    return 0;
}

static int check_batch(lp_engine_t *e, const lp_batch_seq_t *seqs, int32_t n_seqs,
                       int32_t *n_tokens_total)
{
    const lp_hparams_t *hp = lp_model_hparams(e->model);
    int64_t total = 0;
    int rc = 0;
    if (n_seqs <= 0 || !seqs)
        return lp_error_set(LP_ERR(EINVAL), "empty batch");
    memset(e->seen, 0, (size_t)e->params.max_seqs);
    for (int32_t i = 0; i < n_seqs && !rc; i++) {
        const lp_batch_seq_t *s = &seqs[i];
        if (s->seq_id < 0 || s->seq_id >= e->params.max_seqs)
            rc = lp_error_set(LP_ERR(EINVAL), "batch entry %d: sequence id %d is outside "
                              "0..%d", i, s->seq_id, e->params.max_seqs - 1);
        else if (e->seen[s->seq_id]++)
            rc = lp_error_set(LP_ERR(EINVAL), "batch entry %d: sequence %d appears twice", i,
                              s->seq_id);
        else if (s->n_tokens <= 0 || !s->tokens)
            rc = lp_error_set(LP_ERR(EINVAL), "batch entry %d: no tokens", i);
        else if (s->n_tokens > e->params.max_batch_tokens - total)
            rc = lp_error_set(LP_ERR(E2BIG), "batch entry %d: %lld tokens in all exceed "
                              "max_batch_tokens %d", i, (long long)total + s->n_tokens,
                              e->params.max_batch_tokens);
        else if ((int64_t)s->pos + s->n_tokens > e->params.n_ctx)
            rc = lp_error_set(LP_ERR(E2BIG), "batch entry %d: %d tokens at position %d "
                              "exceed the context of %d", i, s->n_tokens, s->pos,
                              e->params.n_ctx);
        else if (s->n_logits < 0 || s->n_logits > s->n_tokens)
            rc = lp_error_set(LP_ERR(EINVAL), "batch entry %d: n_logits %d is outside 0..%d",
                              i, s->n_logits, s->n_tokens);
        else if ((rc = lp_engine_check_kv(e, s)))
            lp_error_prefix("batch entry %d: ", i);
        for (int32_t t = 0; !rc && t < s->n_tokens; t++)
            if (s->tokens[t] < 0 || s->tokens[t] >= hp->n_vocab)
                rc = lp_error_set(LP_ERR(EINVAL), "batch entry %d: token %d is outside the "
                                  "vocabulary (0..%d)", i, s->tokens[t], hp->n_vocab - 1);
        total += s->n_tokens;
    }
    if (!rc && e->paged) rc = check_writes(e, seqs, n_seqs);
    *n_tokens_total = (int32_t)total;
    return rc;
}

/* A step with its own table that writes into fallback blocks of a seq_id
 * cuts that seq_id's length to the first position of the block: its
 * fallback cache is no longer whole from there on. */
static void cut_fallback_owners(lp_engine_t *e, const lp_batch_seq_t *s)
{
    const int32_t B = e->kv.kv_block;
    const uint32_t n_fb = e->fallback ? (uint32_t)e->params.max_seqs * (uint32_t)e->per_seq : 0;
    const uint32_t n_fb_swa = e->fallback ? (uint32_t)e->params.max_seqs * (uint32_t)e->swa_per : 0;
    for (int32_t k = s->pos / B; k <= (s->pos + s->n_tokens - 1) / B; k++) {
        const uint32_t b = s->blocks[k];
        if (b < n_fb) {
            const int32_t owner = (int32_t)(b / (uint32_t)e->per_seq);
            const int32_t start = (int32_t)(b % (uint32_t)e->per_seq) * B;
            if (e->seq_len[owner] > start) {
                e->seq_len[owner] = start;
                e->ops->seq_truncate(e->ctx, owner, start);
            }
        }
        /* a sliding layer's ring block holds positions of every lap: the
         * owner's fallback cache is whole no more */
        const uint32_t w = e->n_swa ? s->swa_blocks[k] : UINT32_MAX;
        if (w < n_fb_swa) {
            const int32_t owner = (int32_t)(w / (uint32_t)e->swa_per);
            if (e->seq_len[owner] > 0) {
                e->seq_len[owner] = 0;
                e->ops->seq_truncate(e->ctx, owner, 0);
            }
        }
    }
}

int lp_engine_step(lp_engine_t *e, const lp_batch_seq_t *seqs, int32_t n_seqs,
                   float *const *logits)
{
    int32_t total = 0;
    int rc = check_batch(e, seqs, n_seqs, &total);
    if (rc) return rc;
    for (int32_t i = 0; i < n_seqs; i++) {
        e->run[i] = seqs[i];
        if (!e->ops->paged) continue; /* (the CPU backend's contiguous layout reads tables too) */
        if (seqs[i].blocks) {
            cut_fallback_owners(e, &seqs[i]);
        } else {
            int32_t first;
            entry_table(e, &seqs[i], 0, &e->run[i].blocks, &e->run[i].n_blocks, &first);
            if (e->n_swa)
                entry_table(e, &seqs[i], 1, &e->run[i].swa_blocks, &e->run[i].n_swa_blocks, &first);
        }
    }
    for (int32_t i = 0; i < n_seqs; i++)
        if (!seqs[i].blocks && seqs[i].pos < e->seq_len[seqs[i].seq_id])
            e->ops->seq_truncate(e->ctx, seqs[i].seq_id, seqs[i].pos);
    rc = e->ops->step(e->ctx, e->run, n_seqs, total, logits);
    for (int32_t i = 0; e->rec_pos && i < n_seqs; i++)
        e->rec_pos[seqs[i].seq_id] = rc ? -1 : seqs[i].pos + seqs[i].n_tokens;
    for (int32_t i = 0; i < n_seqs; i++) {
        if (seqs[i].blocks) continue;
        e->seq_len[seqs[i].seq_id] = rc ? 0 : seqs[i].pos + seqs[i].n_tokens;
        if (rc) e->ops->seq_truncate(e->ctx, seqs[i].seq_id, 0);
    }
    return rc;
}
