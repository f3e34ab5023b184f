/* rng.h - a small, seedable, portable random generator (xoshiro256**,
 * seeded through splitmix64), one per sequence, so that the same seed gives
 * the same tokens on every machine.  A sequence keys it afresh for each
 * generated token from (seed, position): the draws of token k never depend
 * on how many numbers earlier tokens took, so a restarted sampler resumes
 * from the seed and k alone (docs/SAMPLER.md). */
#ifndef LP_SAMPLER_RNG_H
#define LP_SAMPLER_RNG_H

#include <stdint.h>

typedef struct lp_rng {
    uint64_t s[4];
} lp_rng_t;

void lp_rng_seed(lp_rng_t *r, uint64_t seed);
/* The stream of generated token `pos` (0 for the first) of seed `seed`. */
void lp_rng_seed_at(lp_rng_t *r, uint64_t seed, uint64_t pos);
uint64_t lp_rng_next(lp_rng_t *r);
/* Uniform in [0, 1), 53 random bits. */
double lp_rng_uniform(lp_rng_t *r);
/* A seed from the system's entropy (for seed -1). */
uint64_t lp_rng_random_seed(void);

#endif
