/* seq.c - per-sequence state (request parameters, token history, random
 * generator, chain) and the sampling of one row: guard, logprobs, chain. */
#include "cands-impl.h"
#include "store-impl.h"

#include "error.h"
#include "log.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct lp_sampler_seq {
    lp_sampler_store_t *st;    /* borrowed */
    lp_sampler_params_t req;   /* the request's own fields (set bits) */
    lp_sampler_params_t eff;   /* default of cfg overlaid with req */
    lp__config_t *cfg;         /* the strategy the chain was built from; a reference */
    lp_sampler_t *chain;
    lp_rng_t rng;
    uint64_t seed;
    bool seed_random;         /* the parameters gave -1: drawn at creation */
    uint64_t pos;              /* position of the next generated token: keys its draws */
    int32_t hist[LP_SAMPLER_HISTORY_MAX]; /* ring of accepted tokens */
    int32_t hist_first, hist_n;
    lp_cands_t cands;
    lp_token_data_t top[LP_SAMPLER_MAX_N_PROBS];
    bool warned;
    bool picked; /* _pick chose a token that _logprobs has not reported yet */
    bool kept;   /* and kept the guarded row (n_probs > 0) in cands */
    int32_t keep_n; /* its length (cands.n_row is 0 once the chain made a list) */
    float keep_max;
};

/* Build the chain for strategy c; on success the sequence moves to it. */
static int seq_rebuild(lp_sampler_seq_t *seq, lp__config_t *c)
{
    lp_sampler_params_t eff = c->params;
    lp_sampler_params_overlay(&eff, &seq->req);
    int32_t n_vocab = seq->st->n_real;
    lp_sampler_t *chain;
    /* DRY's breakers, text ones resolved against the vocabulary, only when
     * DRY runs (llama.cpp also skips them otherwise) */
    lp_dry_breakers_t *breakers = NULL;
    bool dry_on = eff.mirostat == 0 && eff.dry_multiplier != 0.0f && eff.dry_base >= 1.0f &&
                  eff.dry_penalty_last_n != 0;
    bool has_dry = false;
    for (int32_t i = 0; i < eff.n_steps; i++) has_dry |= eff.steps[i].kind == LP_SAMPLER_DRY;
    int rc = dry_on && has_dry ? lp__store_dry_breakers(seq->st, &eff, &breakers) : 0;
    if (!rc)
        rc = lp_sampler_chain_build(&eff, n_vocab, &seq->rng, lp__config_lookup, c, breakers,
                                    &chain);
    lp_dry_breakers_destroy(&breakers);
    if (rc) return rc;
    for (int32_t i = 0; i < seq->hist_n; i++)
        lp_sampler_accept(chain, seq->hist[(seq->hist_first + i) % LP_SAMPLER_HISTORY_MAX]);
    lp_sampler_destroy(&seq->chain);
    seq->chain = chain;
    seq->eff = eff;
    atomic_fetch_add(&c->refs, 1);
    lp__config_unref(&seq->cfg);
    seq->cfg = c;
    return 0;
}

int lp_sampler_seq_new_params(lp_sampler_store_t *st, const lp_sampler_params_t *req,
                              lp_sampler_seq_t **out)
{
    *out = NULL;
    int rc = lp_sampler_params_validate(req);
    if (rc) return rc;
    lp_sampler_seq_t *seq = calloc(1, sizeof(*seq));
    if (!seq) return lp_error_set(LP_ERR(ENOMEM), "sampler: out of memory");
    seq->st = st;
    lp_cands_init(&seq->cands);
    seq->req = *req;
    lp__config_t *c = lp__store_current(st);
    int64_t seed = (seq->req.set & (1ull << LP_SP_SEED)) ? seq->req.seed : c->params.seed;
    seq->seed_random = seed < 0;
    seq->seed = seed >= 0 ? (uint64_t)seed : lp_rng_random_seed();
    lp_rng_seed(&seq->rng, seq->seed);
    rc = seq_rebuild(seq, c);
    lp__config_unref(&c);
    if (rc) {
        lp_sampler_seq_destroy(&seq);
        return rc;
    }
    *out = seq;
    return 0;
}

void lp_sampler_seq_destroy(lp_sampler_seq_t **self_p)
{
    if (!self_p || !*self_p) return;
    lp_sampler_seq_t *seq = *self_p;
    lp_sampler_destroy(&seq->chain);
    lp__config_unref(&seq->cfg);
    lp_cands_free(&seq->cands);
    free(seq);
    *self_p = NULL;
}

int lp_sampler_seq_accept(lp_sampler_seq_t *seq, int32_t id)
{
    if (id < 0) return lp_error_set(LP_ERR(EINVAL), "accept: negative token %d", id);
    if (seq->hist_n < LP_SAMPLER_HISTORY_MAX) {
        seq->hist[(seq->hist_first + seq->hist_n) % LP_SAMPLER_HISTORY_MAX] = id;
        seq->hist_n++;
    } else {
        seq->hist[seq->hist_first] = id;
        seq->hist_first = (seq->hist_first + 1) % LP_SAMPLER_HISTORY_MAX;
    }
    lp_sampler_accept(seq->chain, id);
    return 0;
}

int lp_sampler_seq_resume(lp_sampler_seq_t *seq, const int32_t *generated, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (generated[i] < 0)
            return lp_error_set(LP_ERR(EINVAL), "resume: generated token %zu is negative (%d)", i,
                                generated[i]);
    for (size_t i = 0; i < n; i++) lp_sampler_seq_accept(seq, generated[i]);
    seq->pos = n;
    return 0;
}

uint64_t lp_sampler_seq_position(const lp_sampler_seq_t *seq)
{
    return seq->pos;
}

int lp_sampler_seq_set_mu(lp_sampler_seq_t *seq, float mu)
{
    if (!isfinite(mu))
        return lp_error_set(LP_ERR(EINVAL), "mirostat_mu: %g is not a finite number", (double)mu);
    if (!lp_sampler_chain_set_mu(seq->chain, mu))
        return lp_error_set(LP_ERR(EINVAL), "mirostat_mu: the sequence's strategy has no "
                            "mirostat step");
    return 0;
}

uint64_t lp_sampler_seq_seed(const lp_sampler_seq_t *seq)
{
    return seq->seed;
}

void lp_sampler_seq_set_random_seed(lp_sampler_seq_t *seq, uint64_t seed)
{
    if (!seq->seed_random) return;
    seq->seed = seed;
    lp_rng_seed(&seq->rng, seq->seed);
}

const lp_sampler_params_t *lp_sampler_seq_params(const lp_sampler_seq_t *seq)
{
    return &seq->eff;
}

/* Follow the store's strategy, load the row into the candidates with the
 * vocabulary guard (only real, unmasked tokens are candidates), and give
 * the guarded row's length and maximum. */
static int seq_guard(lp_sampler_seq_t *seq, const float *logits, int32_t n_vocab, int32_t *n_out,
                     float *max_out)
{
    lp_sampler_store_t *st = seq->st;
    if (!logits || n_vocab <= 0)
        return lp_error_set(LP_ERR(EINVAL), "sample: empty logit row (n_vocab %d)", n_vocab);

    /* follow the store: a new strategy takes effect at this step */
    lp__config_t *c = lp__store_current(st);
    if (c != seq->cfg) {
        int rc = seq_rebuild(seq, c);
        if (rc && !seq->warned) {
            LP_WARN("sequence stays on strategy %" PRIu64 ": version %" PRIu64 " fails: %s",
                    seq->cfg->version, c->version, lp_error_msg());
            seq->warned = true;
        }
    }
    lp__config_unref(&c);

    int32_t n = n_vocab;
    if (st->n_real > 0 && st->n_real < n) n = st->n_real;
    lp_cands_t *cd = &seq->cands;
    int rc = lp_cands_set_row(cd, logits, n);
    if (rc) return rc;
    float max = cd->row_max;
    bool max_masked = false;
    /* (written in place: the guard only lowers logits, so the block bounds
     * still hold and the row still counts as loaded) */
    for (int32_t i = 0; i < st->n_masked; i++) {
        int32_t m = st->masked[i];
        if (m >= n) continue;
        max_masked |= cd->row[m] == max;
        cd->row[m] = -INFINITY;
    }
    if (max_masked) cd->row_max = max = lp__row_max(cd->row, n, NULL);
    if (max == -INFINITY)
        return lp_error_set(LP_ERR(ENOENT), "sample: every token of the row is masked or NaN");
    *n_out = n;
    *max_out = max;
    return 0;
}

/* Run the chain over the guarded candidates (it may change them). */
static int seq_choose(lp_sampler_seq_t *seq, int32_t n, lp_sampler_result_t *out)
{
    lp_sampler_store_t *st = seq->st;
    /* the draws of this token come from (seed, position) alone */
    lp_rng_seed_at(&seq->rng, seq->seed, seq->pos);
    int rc = lp_sampler_apply(seq->chain, &seq->cands);
    if (rc) return rc;
    int32_t id = seq->cands.selected_id;
    if (id < 0 || id >= n || (st->mask && st->mask[id]))
        return lp_error_set(LP_ERR(EPROTO), "sample: the chain chose token %d, which is outside "
                                            "the real vocabulary (%d) or masked", id, n);
    out->id = id;
    out->version = seq->cfg->version;
    out->has_mu = lp_sampler_chain_get_mu(seq->chain, &out->mu);
    seq->pos++;
    return 0;
}

/* logprobs are over the guarded row before the chain (llama.cpp's server
 * without post_sampling_probs): the log of its softmax sum, and the top
 * n_probs tokens.  Returns the log-sum-exp. */
static double seq_lse_top(lp_sampler_seq_t *seq, const float *row, const float *bmax, int32_t n,
                          float max, lp_sampler_result_t *out)
{
    double lse = (double)max + log(lp__row_expsum(row, NULL, n, max));
    int32_t n_top = (int32_t)lp__row_top_k(row, n, seq->eff.n_probs, bmax, seq->top);
    out->has_logprob = true;
    out->n_top = n_top;
    for (int32_t i = 0; i < n_top; i++) {
        out->top[i].id = seq->top[i].id;
        out->top[i].logprob = (float)((double)seq->top[i].logit - lse);
    }
    return lse;
}

int lp_sampler_seq_sample(lp_sampler_seq_t *seq, const float *logits, int32_t n_vocab,
                          lp_sampler_result_t *out)
{
    int32_t n;
    float max;
    int rc = seq_guard(seq, logits, n_vocab, &n, &max);
    if (rc) return rc;
    /* (the chain may change the candidates: the logprobs come first) */
    bool want = seq->eff.n_probs > 0;
    double lse = want ? seq_lse_top(seq, seq->cands.row, seq->cands.bmax, n, max, out) : 0.0;
    if ((rc = seq_choose(seq, n, out))) return rc;
    float x = fminf(logits[out->id], FLT_MAX); /* the row as loaded: +inf is FLT_MAX */
    out->has_logprob = want;
    out->logprob = want ? (float)((double)x - lse) : NAN;
    if (!want) out->n_top = 0;
    return 0;
}

int lp_sampler_seq_pick(lp_sampler_seq_t *seq, const float *logits, int32_t n_vocab,
                        lp_sampler_result_t *out)
{
    int32_t n;
    float max;
    seq->picked = seq->kept = false;
    int rc = seq_guard(seq, logits, n_vocab, &n, &max);
    if (rc) return rc;
    /* the row is copied only if a sampler of the chain changes it */
    bool want = seq->eff.n_probs > 0;
    if (want && (rc = lp__cands_keep_orig(&seq->cands))) return rc;
    if ((rc = seq_choose(seq, n, out))) return rc;
    seq->picked = true;
    seq->kept = want;
    seq->keep_n = n;
    seq->keep_max = max;
    out->has_logprob = false;
    out->logprob = NAN;
    out->n_top = 0;
    return 0;
}

int lp_sampler_seq_logprobs(lp_sampler_seq_t *seq, lp_sampler_result_t *out)
{
    int32_t n = seq->keep_n;
    if (!seq->picked || out->id < 0 || out->id >= n)
        return lp_error_set(LP_ERR(EINVAL), "logprobs: no token picked from a row");
    seq->picked = false;
    if (!seq->kept) return 0; /* n_probs 0: none asked for */
    const float *bmax, *row = lp__cands_orig(&seq->cands, &bmax);
    double lse = seq_lse_top(seq, row, bmax, n, seq->keep_max, out);
    /* the guarded row holds the row as loaded at a chosen token */
    out->logprob = (float)((double)row[out->id] - lse);
    return 0;
}

/* ---- registry ---------------------------------------------------------------------- */

struct lp_sampler_registry {
    pthread_mutex_t lock;
    struct entry {
        uint64_t key;
        lp_sampler_seq_t *seq;
    } *v;
    size_t n, cap;
};

int lp_sampler_registry_new(lp_sampler_registry_t **out)
{
    lp_sampler_registry_t *r = calloc(1, sizeof(*r));
    if (!r) return lp_error_set(LP_ERR(ENOMEM), "sampler registry: out of memory");
    pthread_mutex_init(&r->lock, NULL);
    *out = r;
    return 0;
}

void lp_sampler_registry_destroy(lp_sampler_registry_t **self_p)
{
    if (!self_p || !*self_p) return;
    lp_sampler_registry_t *r = *self_p;
    for (size_t i = 0; i < r->n; i++) lp_sampler_seq_destroy(&r->v[i].seq);
    free(r->v);
    pthread_mutex_destroy(&r->lock);
    free(r);
    *self_p = NULL;
}

static size_t find(const lp_sampler_registry_t *r, uint64_t key)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->v[i].key == key) return i;
    return (size_t)-1;
}

int lp_sampler_registry_put(lp_sampler_registry_t *r, uint64_t key, lp_sampler_seq_t *seq)
{
    pthread_mutex_lock(&r->lock);
    int rc = 0;
    if (find(r, key) != (size_t)-1) {
        rc = lp_error_set(LP_ERR(EEXIST), "sampler registry: sequence %" PRIu64 " exists", key);
    } else if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        struct entry *nv = realloc(r->v, cap * sizeof(*nv));
        if (!nv) rc = lp_error_set(LP_ERR(ENOMEM), "sampler registry: out of memory");
        else {
            r->v = nv;
            r->cap = cap;
        }
    }
    if (!rc) {
        r->v[r->n].key = key;
        r->v[r->n].seq = seq;
        r->n++;
    }
    pthread_mutex_unlock(&r->lock);
    if (rc) lp_sampler_seq_destroy(&seq);
    return rc;
}

lp_sampler_seq_t *lp_sampler_registry_get(lp_sampler_registry_t *r, uint64_t key)
{
    pthread_mutex_lock(&r->lock);
    size_t i = find(r, key);
    lp_sampler_seq_t *s = i == (size_t)-1 ? NULL : r->v[i].seq;
    pthread_mutex_unlock(&r->lock);
    return s;
}

int lp_sampler_registry_remove(lp_sampler_registry_t *r, uint64_t key)
{
    pthread_mutex_lock(&r->lock);
    size_t i = find(r, key);
    lp_sampler_seq_t *s = NULL;
    if (i != (size_t)-1) {
        s = r->v[i].seq;
        r->v[i] = r->v[--r->n];
    }
    pthread_mutex_unlock(&r->lock);
    if (!s) return lp_error_set(LP_ERR(ENOENT), "sampler registry: no sequence %" PRIu64, key);
    lp_sampler_seq_destroy(&s);
    return 0;
}

size_t lp_sampler_registry_count(lp_sampler_registry_t *r)
{
    pthread_mutex_lock(&r->lock);
    size_t n = r->n;
    pthread_mutex_unlock(&r->lock);
    return n;
}
