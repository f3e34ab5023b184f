/* cands-impl.h - internals shared by the candidate set and the samplers. */
#ifndef LP_SAMPLER_CANDS_IMPL_H
#define LP_SAMPLER_CANDS_IMPL_H

#include "chain.h"
#include "row.h"

int lp__cands_tmp(lp_cands_t *c, size_t n);
int lp__cands_fscratch(lp_cands_t *c, int32_t n);
void lp__sort_desc(lp_token_data_t *d, size_t n);
/* Move the k largest logits to d[0..k), unordered; expected O(n). */
void lp__select_top(lp_token_data_t *d, size_t n, size_t k);
/* The k highest of a row, sorted descending, into out (k entries); returns
 * how many (min(k, n)).  A heap with whole blocks skipped: O(n) in practice. */
size_t lp__row_top_k(const float *x, int32_t n, int32_t k, lp_token_data_t *out);
/* Dense to list: the k highest logits, sorted, without touching the rest. */
int lp__dense_top_k(lp_cands_t *c, int32_t k);
/* Move to the front the fewest highest-logit entries whose masses (.p) sum
 * to at least `need`, and at least min_keep of them; returns how many. */
size_t lp__select_mass(lp_token_data_t *d, size_t n, double need, size_t min_keep);

#endif
