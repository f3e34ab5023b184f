/* chain.h - the sampler interface, the candidate set, the built-in samplers
 * and the chain (itself a sampler), in the style of llama.cpp's
 * llama-sampling.
 *
 * Candidates come in two forms.  A full logit row is kept "dense": row[i] is
 * the logit of token i for i < n_row, and excluded tokens hold -INFINITY, so
 * the samplers that can work on a row (penalties, bias, top-k, top-p, min-p,
 * temperature, greedy, dist) never build a 151936-entry list.  A sampler that
 * needs a list calls lp_cands_materialize(); top-k and top-p produce a short
 * list directly by partial selection (never a sort of the whole row). */
#ifndef LP_SAMPLER_CHAIN_H
#define LP_SAMPLER_CHAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sampling-params.h"
#include "rng.h"
#include "sampler-plugin.h"

/* ---- candidates ---------------------------------------------------------- */

typedef struct lp_cands {
    bool dense;
    float *row;           /* dense: n_row logits, owned; -INFINITY = excluded */
    int32_t n_row;
    int32_t row_cap;
    float row_max;        /* maximum of row as loaded and guarded (before any sampler) */
    float *bmax;          /* while row_fresh: an upper bound of each 64-logit block of row */
    int32_t bmax_cap;
    bool row_fresh;       /* no sampler has changed row since it was loaded (only the
                           * guard, which only lowers logits): row_max and bmax hold */
    float *orig;          /* with keep_orig: row as loaded, once a sampler changed it */
    int32_t orig_cap;
    bool keep_orig;       /* the first change to row copies it to orig first */
    lp_token_array_t arr; /* list form: arr.data points into buf */
    lp_token_data_t *buf; /* owned */
    size_t buf_cap;
    lp_token_data_t *tmp; /* scratch, owned */
    size_t tmp_cap;
    float *fscratch;      /* scratch row, owned */
    int32_t fscratch_cap;
    int32_t selected_id;  /* set by the final step; -1 before */
} lp_cands_t;

void lp_cands_init(lp_cands_t *c);
void lp_cands_free(lp_cands_t *c);
/* Load a row: copies logits[0..n), NaN becomes -INFINITY; dense form. */
int lp_cands_set_row(lp_cands_t *c, const float *logits, int32_t n);
/* Load an explicit list (tests, plugins); list form, unsorted. */
int lp_cands_set_list(lp_cands_t *c, const lp_token_data_t *data, size_t n);
/* Turn the dense form into the list form (every id, -INFINITY ones dropped). */
int lp_cands_materialize(lp_cands_t *c);
/* Make sure buf can hold n entries (keeps contents). */
int lp_cands_reserve(lp_cands_t *c, size_t n);
/* List form: softmax into .p; with sort, lists of at most 4096 entries are
 * first sorted by logit (descending). */
void lp_cands_softmax(lp_cands_t *c, bool sort);
/* List form: keep the k highest logits (quickselect); sorted descending
 * when k <= 4096, so the vocabulary is never sorted whole. */
void lp_cands_top_k(lp_cands_t *c, int32_t k);
/* Number of candidates in either form (dense: n_row). */
size_t lp_cands_size(const lp_cands_t *c);

/* ---- the sampler interface ----------------------------------------------- */

typedef struct lp_sampler lp_sampler_t;

typedef struct lp_sampler_i {
    const char *(*name)(const lp_sampler_t *s);       /* required */
    void (*accept)(lp_sampler_t *s, int32_t token);   /* may be NULL */
    int (*apply)(lp_sampler_t *s, lp_cands_t *c);     /* required; 0 or LP_ERR() */
    void (*reset)(lp_sampler_t *s);                   /* may be NULL */
    lp_sampler_t *(*clone)(const lp_sampler_t *s);    /* may be NULL when ctx is NULL */
    void (*free)(lp_sampler_t *s);                    /* may be NULL; frees ctx only */
} lp_sampler_i;

struct lp_sampler {
    const lp_sampler_i *iface; /* borrowed, static */
    void *ctx;                 /* owned through iface->free */
};

/* Wrappers that check the optional slots. */
lp_sampler_t *lp_sampler_new(const lp_sampler_i *iface, void *ctx);
const char *lp_sampler_name(const lp_sampler_t *s);
void lp_sampler_accept(lp_sampler_t *s, int32_t token);
int lp_sampler_apply(lp_sampler_t *s, lp_cands_t *c);
void lp_sampler_reset(lp_sampler_t *s);
lp_sampler_t *lp_sampler_clone(const lp_sampler_t *s); /* NULL on failure */
void lp_sampler_destroy(lp_sampler_t **self_p);

/* ---- built-in samplers ----------------------------------------------------
 * Meanings follow llama.cpp's llama-sampling.cpp.  Samplers that draw random
 * numbers borrow `rng`, which must outlive them (the sequence owns it). */

lp_sampler_t *lp_sampler_greedy_new(void);
lp_sampler_t *lp_sampler_dist_new(lp_rng_t *rng);
lp_sampler_t *lp_sampler_temp_new(float temp);
lp_sampler_t *lp_sampler_temp_ext_new(float temp, float delta, float exponent);
lp_sampler_t *lp_sampler_top_k_new(int32_t k);
lp_sampler_t *lp_sampler_top_p_new(float p, size_t min_keep);
lp_sampler_t *lp_sampler_min_p_new(float p, size_t min_keep);
lp_sampler_t *lp_sampler_typical_new(float p, size_t min_keep);
lp_sampler_t *lp_sampler_top_n_sigma_new(float n);
lp_sampler_t *lp_sampler_xtc_new(float probability, float threshold, size_t min_keep,
                                  lp_rng_t *rng);
lp_sampler_t *lp_sampler_mirostat_new(int32_t n_vocab, float tau, float eta, int32_t m,
                                       lp_rng_t *rng);
lp_sampler_t *lp_sampler_mirostat_v2_new(float tau, float eta, lp_rng_t *rng);
/* last_n: tokens of history considered (> 0). */
lp_sampler_t *lp_sampler_penalties_new(int32_t last_n, float repeat, float freq, float present);
/* last_n: tokens of history considered (> 0); breakers (copied; may be
 * NULL) from lp_dry_breakers_build(). */
struct lp_dry_breakers;
lp_sampler_t *lp_sampler_dry_new(float multiplier, float base, int32_t allowed_length,
                                  int32_t last_n, const struct lp_dry_breakers *breakers);
lp_sampler_t *lp_sampler_logit_bias_new(const lp_logit_bias_t *bias, int32_t n);
/* A plugin step; `config` is copied.  NULL with lp_error_msg() on failure. */
lp_sampler_t *lp_sampler_plugin_step_new(const lp_sampler_plugin_t *desc, const char *config);

/* ---- the chain -------------------------------------------------------------- */

lp_sampler_t *lp_sampler_chain_new(void);
/* Takes ownership of s (also on failure, when it is destroyed). */
int lp_sampler_chain_add(lp_sampler_t *chain, lp_sampler_t *s);
int32_t lp_sampler_chain_n(const lp_sampler_t *chain);
lp_sampler_t *lp_sampler_chain_get(const lp_sampler_t *chain, int32_t i); /* borrowed */

/* Resolves a plugin step by name: the descriptor and its load-time config,
 * or non-zero when no such plugin is loaded. */
typedef int (*lp_sampler_plugin_lookup_cb)(void *user, const char *name,
                                           const lp_sampler_plugin_t **desc,
                                           const char **config);

/* Mirostat's mu in a chain: the one piece of a chain's state that its token
 * history does not rebuild (it follows each step's candidate probabilities).
 * Both return false when the chain has no mirostat step. */
bool lp_sampler_chain_get_mu(lp_sampler_t *chain, float *mu);
bool lp_sampler_chain_set_mu(lp_sampler_t *chain, float mu);

/* Build the chain for a parameter set, as llama.cpp's common_sampler_init:
 * logit bias, then the steps of "samplers" (or mirostat), then the final
 * choice (dist, greedy when temperature <= 0, or mirostat).  `n_vocab` is the
 * count of real tokens (mirostat v1 uses it).  `rng` is borrowed.
 * `dry_breakers` is p's breakers resolved (lp_dry_breakers_build); NULL:
 * only p's token-ID breakers. */
int lp_sampler_chain_build(const lp_sampler_params_t *p, int32_t n_vocab, lp_rng_t *rng,
                           lp_sampler_plugin_lookup_cb lookup, void *lookup_user,
                           const struct lp_dry_breakers *dry_breakers, lp_sampler_t **out);

#endif
