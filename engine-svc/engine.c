/* engine.c - the engine object: picks a backend, tracks sequence lengths,
 * and validates every batch before the backend sees it. */
#include "backend.h"

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
    int32_t *seq_len;            /* (max_seqs) cached positions */
    uint8_t *seen;               /* (max_seqs) scratch for duplicate checks */
};

static const lp_backend_ops_t *backends[] = {
#ifdef LP_HAVE_CUDA
    &lp_backend_cuda,
#endif
    &lp_backend_cpu,
};

int lp_engine_new(lp_model_t *model, const lp_engine_params_t *params, lp_engine_t **out)
{
    *out = NULL;
    lp_engine_params_t p = params ? *params : (lp_engine_params_t){0};
    const lp_hparams_t *hp = lp_model_hparams(model);
    if (p.n_ctx < 0 || p.max_seqs < 0 || p.max_batch_tokens < 0 || p.n_threads < 0)
        return lp_error_set(LP_ERR(EINVAL), "engine parameters must not be negative");
    if (p.n_ctx == 0) p.n_ctx = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    if (p.max_seqs == 0) p.max_seqs = 16;
    if (p.max_batch_tokens == 0) p.max_batch_tokens = 512;
    if (p.n_threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        p.n_threads = n > 0 ? (int32_t)n : 1;
    }
    if (p.n_ctx > hp->n_ctx_train)
        LP_WARN("context %d is longer than the model's training context %d", p.n_ctx,
                hp->n_ctx_train);

    const lp_backend_ops_t *ops = NULL;
    for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
        if (p.backend && strcmp(p.backend, backends[i]->name)) continue;
        if (backends[i]->available && !backends[i]->available()) continue;
        ops = backends[i];
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
    e->seq_len = calloc((size_t)p.max_seqs, sizeof(*e->seq_len));
    e->seen = calloc((size_t)p.max_seqs, 1);
    int rc = (!e->seq_len || !e->seen) ? lp_error_set(LP_ERR(ENOMEM), "out of memory")
                                       : ops->create(model, &e->params, &e->ctx);
    if (rc) {
        lp_engine_destroy(&e);
        return rc;
    }
    LP_INFO("engine: %s backend, %d threads, context %d, %d sequences, %d tokens per step",
            ops->name, p.n_threads, p.n_ctx, p.max_seqs, p.max_batch_tokens);
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
    free(e);
    *self_p = NULL;
}

const char *lp_engine_backend_name(const lp_engine_t *e) { return e->ops->name; }

int lp_engine_register_host(lp_engine_t *e, void *ptr, size_t len)
{
    if (!ptr || !len)
        return lp_error_set(LP_ERR(EINVAL), "register_host: empty range");
    return e->ops->register_host ? e->ops->register_host(e->ctx, ptr, len) : 0;
}

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
        else if (s->pos < 0 || s->pos > e->seq_len[s->seq_id])
            rc = lp_error_set(LP_ERR(EINVAL), "batch entry %d: position %d is past the end "
                              "of sequence %d (length %d)", i, s->pos, s->seq_id,
                              e->seq_len[s->seq_id]);
        else if ((int64_t)s->pos + s->n_tokens > e->params.n_ctx)
            rc = lp_error_set(LP_ERR(E2BIG), "batch entry %d: %d tokens at position %d "
                              "exceed the context of %d", i, s->n_tokens, s->pos,
                              e->params.n_ctx);
        else if (s->n_logits < 0 || s->n_logits > s->n_tokens)
            rc = lp_error_set(LP_ERR(EINVAL), "batch entry %d: n_logits %d is outside 0..%d",
                              i, s->n_logits, s->n_tokens);
        for (int32_t t = 0; !rc && t < s->n_tokens; t++)
            if (s->tokens[t] < 0 || s->tokens[t] >= hp->n_vocab)
                rc = lp_error_set(LP_ERR(EINVAL), "batch entry %d: token %d is outside the "
                                  "vocabulary (0..%d)", i, s->tokens[t], hp->n_vocab - 1);
        total += s->n_tokens;
    }
    *n_tokens_total = (int32_t)total;
    return rc;
}

int lp_engine_step(lp_engine_t *e, const lp_batch_seq_t *seqs, int32_t n_seqs,
                   float *const *logits)
{
    int32_t total = 0;
    int rc = check_batch(e, seqs, n_seqs, &total);
    if (rc) return rc;
    for (int32_t i = 0; i < n_seqs; i++)
        if (seqs[i].pos < e->seq_len[seqs[i].seq_id])
            e->ops->seq_truncate(e->ctx, seqs[i].seq_id, seqs[i].pos);
    rc = e->ops->step(e->ctx, seqs, n_seqs, total, logits);
    for (int32_t i = 0; i < n_seqs; i++)
        e->seq_len[seqs[i].seq_id] = rc ? 0 : seqs[i].pos + seqs[i].n_tokens;
    if (rc)
        for (int32_t i = 0; i < n_seqs; i++) e->ops->seq_truncate(e->ctx, seqs[i].seq_id, 0);
    return rc;
}
