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
    uint8_t *seen;               /* (max_seqs) scratch for duplicate checks */
    /* KV pool: kv.kv_blocks blocks of kv.kv_block positions.  Not paged:
     * one block of n_ctx per seq_id, and no tables are taken. */
    lp_kv_pool_t kv;
    bool paged;
    int32_t per_seq;             /* blocks of one full context: ceil(n_ctx / kv_block) */
    bool fallback;               /* the pool holds max_seqs * per_seq blocks */
    uint32_t *identity;          /* (max_seqs * per_seq) k -> k: the fallback tables, or NULL */
    uint32_t *mark;              /* (kv_blocks) stamp per block: duplicates within a table */
    uint32_t stamp;
    int32_t *writer;             /* (kv_blocks) the batch entry that writes a block this step */
    uint32_t *writer_stamp;      /* (kv_blocks) writer[b] is current where this is wstamp */
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
        e->kv = (lp_kv_pool_t){p->n_ctx, p->max_seqs, p->max_seqs};
        e->per_seq = 1;
        e->fallback = true;
        return 0;
    }
    if (p->kv_pool_tokens && p->kv_pool_mb)
        return lp_error_set(LP_ERR(EINVAL), "--kv-pool-tokens %lld and --kv-pool-mb %lld both "
                            "size the KV pool: give one", (long long)p->kv_pool_tokens,
                            (long long)p->kv_pool_mb);
    const int64_t B = p->kv_block;
    const int64_t block_bytes = 2 * hp->kv_floats * B * (int64_t)sizeof(float);
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
    e->kv = (lp_kv_pool_t){p->kv_block, (int32_t)blocks, (int32_t)blocks};
    e->fallback = blocks >= (int64_t)p->max_seqs * e->per_seq;
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
    if (p.kv_pool_tokens < 0 || p.kv_pool_mb < 0)
        return lp_error_set(LP_ERR(EINVAL), "--kv-pool-tokens %lld / --kv-pool-mb %lld must not "
                            "be negative", (long long)p.kv_pool_tokens, (long long)p.kv_pool_mb);
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
        char why[160];
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
    const size_t nb = (size_t)e->kv.kv_blocks;
    e->seq_len = calloc((size_t)p.max_seqs, sizeof(*e->seq_len));
    e->seen = calloc((size_t)p.max_seqs, 1);
    e->run = calloc((size_t)p.max_seqs, sizeof(*e->run));
    if (e->paged) {
        e->mark = calloc(nb, sizeof(*e->mark));
        e->writer = calloc(nb, sizeof(*e->writer));
        e->writer_stamp = calloc(nb, sizeof(*e->writer_stamp));
    }
    if (e->fallback) {
        size_t n = (size_t)p.max_seqs * (size_t)e->per_seq;
        if ((e->identity = malloc(n * sizeof(*e->identity))))
            for (size_t k = 0; k < n; k++) e->identity[k] = (uint32_t)k;
    }
    rc = (!e->seq_len || !e->seen || !e->run || (e->paged && (!e->mark || !e->writer ||
          !e->writer_stamp)) || (e->fallback && !e->identity))
             ? lp_error_set(LP_ERR(ENOMEM), "out of memory")
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
    *out = e;
    return 0;
}

void lp_engine_destroy(lp_engine_t **self_p)
{
    lp_engine_t *e = self_p ? *self_p : NULL;
    if (!e) return;
    if (e->ctx) e->ops->destroy(e->ctx);
    free(e->seq_len);
    free(e->seen);
    free(e->identity);
    free(e->mark);
    free(e->writer);
    free(e->writer_stamp);
    free(e->run);
    free(e);
    *self_p = NULL;
}

const char *lp_engine_backend_name(const lp_engine_t *e) { return e->ops->name; }

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

void lp_engine_seq_reset(lp_engine_t *e, int32_t seq_id)
{
    if (seq_id < 0 || seq_id >= e->params.max_seqs) return;
    e->seq_len[seq_id] = 0;
    e->ops->seq_truncate(e->ctx, seq_id, 0);
}

int32_t lp_engine_seq_len(const lp_engine_t *e, int32_t seq_id)
{
    if (seq_id < 0 || seq_id >= e->params.max_seqs) return -1;
    return e->seq_len[seq_id];
}

int lp_engine_check_kv(lp_engine_t *e, const lp_batch_seq_t *s)
{
    if (!s->blocks) {
        if (s->n_blocks)
            return lp_error_set(LP_ERR(EINVAL), "n_blocks %d without blocks", s->n_blocks);
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
    if (++e->stamp == 0) { /* wrapped: old stamps could match again */
        memset(e->mark, 0, sizeof(*e->mark) * (size_t)e->kv.kv_blocks);
        e->stamp = 1;
    }
    for (int32_t k = 0; k < s->n_blocks; k++) {
        const uint32_t b = s->blocks[k];
        if (b >= (uint32_t)e->kv.kv_blocks)
            return lp_error_set(LP_ERR(EINVAL), "blocks[%d] = %u is not in 0..%d", k, b,
                                e->kv.kv_blocks - 1);
        if (e->mark[b] == e->stamp) {
            int32_t first = 0;
            while (s->blocks[first] != b) first++;
            return lp_error_set(LP_ERR(EINVAL), "blocks[%d] = %u repeats blocks[%d]", k, b, first);
        }
        e->mark[b] = e->stamp;
    }
    return 0;
}

/* The table an entry reads through (its own, or its seq_id's fallback). */
static void entry_table(const lp_engine_t *e, const lp_batch_seq_t *s, const uint32_t **t,
                        int32_t *n)
{
    if (s->blocks) {
        *t = s->blocks;
        *n = s->n_blocks;
    } else {
        *t = e->identity + (size_t)s->seq_id * (size_t)e->per_seq;
        *n = e->per_seq;
    }
}

/* No entry may write a block that another entry of the batch names: shared
 * blocks are read-only (only positions >= pos are written, and a caller
 * shares only full blocks below them). */
static int check_writes(lp_engine_t *e, const lp_batch_seq_t *seqs, int32_t n_seqs)
{
    if (++e->wstamp == 0) {
        memset(e->writer_stamp, 0, sizeof(*e->writer_stamp) * (size_t)e->kv.kv_blocks);
        e->wstamp = 1;
    }
    const int32_t B = e->kv.kv_block;
    for (int32_t i = 0; i < n_seqs; i++) {
        const uint32_t *t;
        int32_t n;
        entry_table(e, &seqs[i], &t, &n);
        for (int32_t k = seqs[i].pos / B; k <= (seqs[i].pos + seqs[i].n_tokens - 1) / B; k++) {
            e->writer_stamp[t[k]] = e->wstamp;
            e->writer[t[k]] = i;
        }
    }
    for (int32_t i = 0; i < n_seqs; i++) {
        const uint32_t *t;
        int32_t n;
        entry_table(e, &seqs[i], &t, &n);
        const int32_t n_read = (seqs[i].pos + seqs[i].n_tokens + B - 1) / B;
        for (int32_t k = 0; k < n_read; k++)
            if (e->writer_stamp[t[k]] == e->wstamp && e->writer[t[k]] != i)
                return lp_error_set(LP_ERR(EINVAL), "batch entry %d: block %u (its table's entry "
                                    "%d) is written in this step by batch entry %d", i, t[k], k,
                                    e->writer[t[k]]);
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
    for (int32_t k = s->pos / B; k <= (s->pos + s->n_tokens - 1) / B; k++) {
        const uint32_t b = s->blocks[k];
        if (b >= n_fb) continue;
        const int32_t owner = (int32_t)(b / (uint32_t)e->per_seq);
        const int32_t start = (int32_t)(b % (uint32_t)e->per_seq) * B;
        if (e->seq_len[owner] > start) {
            e->seq_len[owner] = start;
            e->ops->seq_truncate(e->ctx, owner, start);
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
        if (seqs[i].blocks) cut_fallback_owners(e, &seqs[i]);
        else entry_table(e, &seqs[i], &e->run[i].blocks, &e->run[i].n_blocks);
    }
    for (int32_t i = 0; i < n_seqs; i++)
        if (!seqs[i].blocks && seqs[i].pos < e->seq_len[seqs[i].seq_id])
            e->ops->seq_truncate(e->ctx, seqs[i].seq_id, seqs[i].pos);
    rc = e->ops->step(e->ctx, e->run, n_seqs, total, logits);
    for (int32_t i = 0; i < n_seqs; i++) {
        if (seqs[i].blocks) continue;
        e->seq_len[seqs[i].seq_id] = rc ? 0 : seqs[i].pos + seqs[i].n_tokens;
        if (rc) e->ops->seq_truncate(e->ctx, seqs[i].seq_id, 0);
    }
    return rc;
}
