/* rng.c - xoshiro256** (Blackman and Vigna, public domain algorithm). */
#include "rng.h"

#include <stdio.h>
#include <sys/random.h>
#include <time.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void lp_rng_seed(lp_rng_t *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

void lp_rng_seed_at(lp_rng_t *r, uint64_t seed, uint64_t pos)
{
    /* splitmix64's finaliser spreads the position over all 64 bits, so that
     * nearby (seed, pos) pairs start unrelated streams */
    uint64_t x = pos;
    lp_rng_seed(r, seed ^ splitmix64(&x));
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t lp_rng_next(lp_rng_t *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double lp_rng_uniform(lp_rng_t *r)
{
    return (double)(lp_rng_next(r) >> 11) * 0x1.0p-53;
}

uint64_t lp_rng_random_seed(void)
{
    uint64_t v;
    if (getrandom(&v, sizeof(v), 0) == (ssize_t)sizeof(v)) return v;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
