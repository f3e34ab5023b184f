/* moe.h - the CPU backend's mixture-of-experts feed-forward (the `moe`
 * forward op, arch/arch.h's lp_moe_t).
 *
 * A step routes every token (router product, gating, top k), groups the
 * step's (token, expert) pairs by expert, and runs each chosen expert once
 * for all its tokens: one grouped product (lp_matmul_grouped) for every
 * chosen expert's gate and up, one for the downs.  So a decode step reads
 * the weights of the chosen experts only, and a batch reads each chosen
 * expert's weights once, however many of its tokens chose it.  The expert
 * matrices are read in place from the mapping. */
#ifndef LP_MOE_H
#define LP_MOE_H

#include "arch/arch.h"
#include "threadpool.h"

typedef struct lp_moe_cpu lp_moe_cpu_t;

/* Scratch for steps of up to max_tok tokens of model m (which has experts). */
int lp_moe_cpu_new(const lp_model_t *m, int32_t max_tok, lp_moe_cpu_t **out);
void lp_moe_cpu_destroy(lp_moe_cpu_t **self_p);

/* out (n_tok rows of n_embd) = the mixture moe of x (n_tok rows of
 * n_embd).  exact: the reference arithmetic (products in double, as
 * lp_matmul's exact path). */
int lp_moe_cpu_run(lp_moe_cpu_t *mc, lp_threadpool_t *pool, bool exact, const lp_moe_t *moe,
                   const float *x, int32_t n_tok, float *out);

void lp_moe_cpu_counts(const lp_moe_cpu_t *mc, lp_moe_counts_t *out);

#endif
