/* gr-util.h - the grammar engine's small tools: an arena, growable arrays,
 * bitsets and a hash.  Internal to sampler-svc/grammar. */
#ifndef LP_GR_UTIL_H
#define LP_GR_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>

/* ---- arena: many small objects freed at once ---------------------------- */

typedef struct lp__gr_chunk lp__gr_chunk_t;
typedef struct {
    lp__gr_chunk_t *head;
    size_t used;    /* bytes handed out, all chunks */
    size_t limit;   /* 0: none; else alloc fails past it */
} lp__gr_arena_t;

/* A position to roll the arena back to (stack discipline). */
typedef struct {
    lp__gr_chunk_t *chunk;
    size_t off, used;
} lp__gr_mark_t;

void *lp__gr_alloc(lp__gr_arena_t *a, size_t n);     /* 16-aligned, NULL on failure */
void *lp__gr_zalloc(lp__gr_arena_t *a, size_t n);
void *lp__gr_memdup(lp__gr_arena_t *a, const void *p, size_t n);
char *lp__gr_strndup(lp__gr_arena_t *a, const char *s, size_t n);
lp__gr_mark_t lp__gr_mark(const lp__gr_arena_t *a);
void lp__gr_release(lp__gr_arena_t *a, lp__gr_mark_t m);
void lp__gr_arena_free(lp__gr_arena_t *a);

/* ---- growable arrays: vec of T is {T *v; uint32_t n, cap;} --------------- */

int lp__gr_grow(void **v, uint32_t *cap, uint32_t need, size_t elem);
#define GR_VEC(T) struct { T *v; uint32_t n, cap; }
/* Append x; evaluates to 0 or LP_ERR(ENOMEM). */
#define GR_PUSH(vec, x)                                                                  \
    ((vec).n < (vec).cap || !lp__gr_grow((void **)&(vec).v, &(vec).cap, (vec).n + 1,     \
                                         sizeof(*(vec).v))                               \
         ? ((vec).v[(vec).n++] = (x), 0)                                                 \
         : -ENOMEM)
#define GR_RESERVE(vec, k) \
    ((vec).n + (k) <= (vec).cap ? 0 : lp__gr_grow((void **)&(vec).v, &(vec).cap, (vec).n + (k), sizeof(*(vec).v)))
typedef GR_VEC(uint32_t) lp__gr_u32v_t;
#define GR_FREE(vec) (free((vec).v), (vec).v = NULL, (vec).n = (vec).cap = 0)

/* ---- bitsets ------------------------------------------------------------- */

static inline size_t lp__gr_words(size_t nbits) { return (nbits + 63) / 64; }
static inline void lp__gr_bset(uint64_t *b, size_t i) { b[i >> 6] |= 1ull << (i & 63); }
static inline void lp__gr_bclr(uint64_t *b, size_t i) { b[i >> 6] &= ~(1ull << (i & 63)); }
static inline bool lp__gr_btest(const uint64_t *b, size_t i) { return b[i >> 6] >> (i & 63) & 1; }
void lp__gr_bor(uint64_t *dst, const uint64_t *src, size_t nwords);

/* ---- hashing ------------------------------------------------------------- */

static inline uint64_t lp__gr_mix(uint64_t h, uint64_t x)
{
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 32);
}
uint64_t lp__gr_hash_bytes(const void *p, size_t n, uint64_t seed);

/* ---- UTF-8 --------------------------------------------------------------- */

/* Strict decode (no overlongs, no surrogates, <= U+10FFFF): the code point,
 * or -1; *len gets the bytes used (1 on failure). */
int32_t lp__gr_utf8_next(const uint8_t *s, size_t n, size_t *len);
size_t lp__gr_utf8_put(uint32_t cp, uint8_t out[4]);

#endif
