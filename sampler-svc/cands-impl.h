/* cands-impl.h - internals shared by the candidate set and the samplers. */
#ifndef LP_SAMPLER_CANDS_IMPL_H
#define LP_SAMPLER_CANDS_IMPL_H

#include "chain.h"
#include "row.h"

int lp__cands_tmp(lp_cands_t *c, size_t n);
/* The dense row, for a sampler that is about to change it: the block bounds
 * stop holding, and with keep_orig the row as loaded is copied first.
 * Every write to c->row goes through this. */
float *lp__cands_row_w(lp_cands_t *c);
/* Keep the row as loaded through the chain (for logprobs after it): room
 * for the copy is made now, the copy itself only if a sampler changes it. */
int lp__cands_keep_orig(lp_cands_t *c);
/* The row as loaded (and guarded) after the chain ran, with its block
 * bounds (NULL when they no longer hold); NULL without lp__cands_keep_orig. */
const float *lp__cands_orig(const lp_cands_t *c, const float **bmax);
/* First index of the largest logit of the dense row; -1 when all are
 * -INFINITY.  Reads only the blocks that can hold it while row_fresh. */
int32_t lp__cands_argmax(const lp_cands_t *c);
int lp__cands_fscratch(lp_cands_t *c, int32_t n);
void lp__sort_desc(lp_token_data_t *d, size_t n);
/* Move the k largest logits to d[0..k), unordered; expected O(n). */
void lp__select_top(lp_token_data_t *d, size_t n, size_t k);
/* The k highest of a row, sorted descending, into out (k entries); returns
 * how many (min(k, n)).  A heap with whole 64-logit blocks skipped: O(n) in
 * practice.  bmax: upper bounds of the blocks (lp_cands_t.bmax), or NULL. */
size_t lp__row_top_k(const float *x, int32_t n, int32_t k, const float *bmax,
                     lp_token_data_t *out);
/* Dense to list: the k highest logits, sorted, without touching the rest. */
int lp__dense_top_k(lp_cands_t *c, int32_t k);
/* Move to the front the fewest highest-logit entries whose masses (.p) sum
 * to at least `need`, and at least min_keep of them; returns how many. */
size_t lp__select_mass(lp_token_data_t *d, size_t n, double need, size_t min_keep);
/* A mirostat step's mu; NULL for any other sampler. */
float *lp__sampler_mu(lp_sampler_t *s);

#endif
