/* rng.h - a small, seedable, portable random generator (xoshiro256**,
 * seeded through splitmix64), one per sequence, so that the same seed gives
 * the same tokens on every machine. */
#ifndef LP_SAMPLER_RNG_H
#define LP_SAMPLER_RNG_H

#include <stdint.h>

typedef struct lp_rng {
    uint64_t s[4];
} lp_rng_t;

void lp_rng_seed(lp_rng_t *r, uint64_t seed);
uint64_t lp_rng_next(lp_rng_t *r);
/* Uniform in [0, 1), 53 random bits. */
double lp_rng_uniform(lp_rng_t *r);
/* A seed from the system's entropy (for seed -1). */
uint64_t lp_rng_random_seed(void);

#endif
