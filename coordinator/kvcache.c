/* kvcache.c - an engine group's KV block manager (see kvcache.h). */
#include "kvcache.h"

#include "error.h"

#include <stdlib.h>
#include <string.h>

/* xxHash64's primes and round over 32-bit lanes, then its avalanche: every
 * token moves every bit, and the parent's hash seeds the chain. */
#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full
#define P3 0x165667B19E3779F9ull

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

uint64_t lp__kv_hash(uint64_t parent, const int32_t *toks, int32_t n)
{
    uint64_t h = parent ^ (P3 + (uint64_t)n * P1);
    for (int32_t i = 0; i < n; i++) {
        h ^= (uint64_t)(uint32_t)toks[i] * P1;
        h = rotl64(h, 23) * P2 + P3;
    }
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return h;
}

int lp__kv_init(lp__kv_t *kv, int32_t block, int32_t n_blocks)
{
    memset(kv, 0, sizeof(*kv));
    if (block < 1 || n_blocks < 1)
        return lp_error_set(LP_ERR(EINVAL), "kv cache: %d blocks of %d positions", n_blocks, block);
    kv->block = block;
    kv->n_blocks = n_blocks;
    kv->n_buckets = 16;
    while (kv->n_buckets < 2u * (uint32_t)n_blocks) kv->n_buckets <<= 1;
    kv->b = calloc((size_t)n_blocks, sizeof(*kv->b));
    kv->toks = calloc((size_t)n_blocks * (size_t)block, sizeof(int32_t));
    kv->buckets = malloc(kv->n_buckets * sizeof(int32_t));
    kv->free_ids = malloc((size_t)n_blocks * sizeof(int32_t));
    if (!kv->b || !kv->toks || !kv->buckets || !kv->free_ids) {
        lp__kv_free(kv);
        return lp_error_set(LP_ERR(ENOMEM), "kv cache: out of memory for %d blocks", n_blocks);
    }
    for (uint32_t i = 0; i < kv->n_buckets; i++) kv->buckets[i] = LP__KV_NONE;
    /* Lowest ids on top of the stack: a fresh pool hands out 0, 1, 2, ... */
    for (int32_t i = 0; i < n_blocks; i++) {
        kv->free_ids[i] = n_blocks - 1 - i;
        kv->b[i].parent = kv->b[i].hnext = kv->b[i].prev = kv->b[i].next = LP__KV_NONE;
    }
    kv->n_free = n_blocks;
    kv->lru_head = kv->lru_tail = LP__KV_NONE;
    kv->hash = lp__kv_hash;
    return 0;
}

void lp__kv_free(lp__kv_t *kv)
{
    free(kv->b);
    free(kv->toks);
    free(kv->buckets);
    free(kv->free_ids);
    memset(kv, 0, sizeof(*kv));
}

static void lru_unlink(lp__kv_t *kv, int32_t id)
{
    lp__kv_block_t *b = &kv->b[id];
    if (b->prev != LP__KV_NONE) kv->b[b->prev].next = b->next;
    else kv->lru_head = b->next;
    if (b->next != LP__KV_NONE) kv->b[b->next].prev = b->prev;
    else kv->lru_tail = b->prev;
    b->prev = b->next = LP__KV_NONE;
    kv->n_cached--;
}

static void lru_push(lp__kv_t *kv, int32_t id)
{
    lp__kv_block_t *b = &kv->b[id];
    b->prev = kv->lru_tail;
    b->next = LP__KV_NONE;
    if (kv->lru_tail != LP__KV_NONE) kv->b[kv->lru_tail].next = id;
    else kv->lru_head = id;
    kv->lru_tail = id;
    kv->n_cached++;
}

static void unhash(lp__kv_t *kv, int32_t id)
{
    lp__kv_block_t *b = &kv->b[id];
    int32_t *at = &kv->buckets[b->hash & (kv->n_buckets - 1)];
    while (*at != id) at = &kv->b[*at].hnext;
    *at = b->hnext;
    b->hnext = LP__KV_NONE;
    b->hashed = false;
    b->is_twin = false;
}

/* The cached block for toks (one block's worth) after `parent`: the same
 * hash, the same tokens, and the very parent block it was registered
 * after, still holding the content it had then. */
static int32_t find(const lp__kv_t *kv, uint64_t h, int32_t parent, const int32_t *toks)
{
    for (int32_t id = kv->buckets[h & (kv->n_buckets - 1)]; id != LP__KV_NONE; id = kv->b[id].hnext) {
        const lp__kv_block_t *b = &kv->b[id];
        if (b->is_twin || b->hash != h || b->parent != parent) continue;
        if (parent != LP__KV_NONE &&
            (!kv->b[parent].hashed || kv->b[parent].gen != b->parent_gen)) continue;
        if (memcmp(kv->toks + (size_t)id * (size_t)kv->block, toks, (size_t)kv->block * sizeof(int32_t)))
            continue;
        return id;
    }
    return LP__KV_NONE;
}

static void acquire(lp__kv_t *kv, int32_t id)
{
    if (kv->b[id].ref++ == 0) {
        lru_unlink(kv, id);
        kv->n_used++;
    }
}

static int32_t walk(lp__kv_t *kv, const int32_t *toks, int32_t n, int32_t max_blocks, bool take,
                    uint32_t *out, uint64_t *last_hash)
{
    int32_t full = n / kv->block, count = 0, parent = LP__KV_NONE;
    uint64_t h = 0;
    if (max_blocks < full) full = max_blocks;
    while (count < full) {
        const int32_t *t = toks + (size_t)count * (size_t)kv->block;
        uint64_t hh = kv->hash(h, t, kv->block);
        int32_t id = find(kv, hh, parent, t);
        if (id == LP__KV_NONE) break;
        if (take) {
            acquire(kv, id);
            out[count] = (uint32_t)id;
        }
        h = hh;
        parent = id;
        count++;
    }
    if (last_hash) *last_hash = h;
    return count;
}

int32_t lp__kv_match(const lp__kv_t *kv, const int32_t *toks, int32_t n, int32_t max_blocks)
{
    return walk((lp__kv_t *)kv, toks, n, max_blocks, false, NULL, NULL);
}

int32_t lp__kv_acquire_prefix(lp__kv_t *kv, const int32_t *toks, int32_t n, int32_t max_blocks,
                              uint32_t *out, uint64_t *last_hash)
{
    return walk(kv, toks, n, max_blocks, true, out, last_hash);
}

int lp__kv_alloc(lp__kv_t *kv, uint32_t *id)
{
    int32_t k;
    if (kv->n_free > 0) {
        k = kv->free_ids[--kv->n_free];
    } else if (kv->lru_head != LP__KV_NONE) {
        k = kv->lru_head;
        lru_unlink(kv, k);
        unhash(kv, k);
        kv->n_evicted++;
    } else {
        return LP_ERR(ENOSPC);
    }
    lp__kv_block_t *b = &kv->b[k];
    b->gen++;
    b->ref = 1;
    b->parent = LP__KV_NONE;
    b->is_twin = false;
    kv->n_used++;
    *id = (uint32_t)k;
    return 0;
}

void lp__kv_release(lp__kv_t *kv, uint32_t id)
{
    lp__kv_block_t *b = &kv->b[id];
    if (--b->ref > 0) return;
    kv->n_used--;
    if (b->hashed) lru_push(kv, (int32_t)id);
    else kv->free_ids[kv->n_free++] = (int32_t)id;
}

uint32_t lp__kv_commit(lp__kv_t *kv, uint32_t id, int32_t parent, uint64_t parent_hash,
                       const int32_t *toks, uint64_t *hash)
{
    uint64_t h = kv->hash(parent_hash, toks, kv->block);
    *hash = h;
    lp__kv_block_t *b = &kv->b[id];
    if (b->hashed) return id; /* taken from the cache: registered already */
    int32_t same = find(kv, h, parent, toks);
    if (same != LP__KV_NONE) {
        /* Computed twice (two prompts prefilled at once): the sequence
         * moves to the cached copy, and its own goes back to the pool. */
        acquire(kv, same);
        lp__kv_release(kv, id);
        return (uint32_t)same;
    }
    b->hash = h;
    b->parent = parent;
    b->parent_gen = parent != LP__KV_NONE ? kv->b[parent].gen : 0;
    b->hashed = true;
    memcpy(kv->toks + (size_t)id * (size_t)kv->block, toks, (size_t)kv->block * sizeof(int32_t));
    int32_t *head = &kv->buckets[h & (kv->n_buckets - 1)];
    b->hnext = *head;
    *head = (int32_t)id;
    return id;
}

/* ---- twins ---------------------------------------------------------------- */

static uint64_t twin_hash(int32_t twin, uint32_t gen)
{
    const int32_t key[2] = {twin, (int32_t)gen};
    return lp__kv_hash(0x74776976ull, key, 2); /* "twin": apart from the chains' seeds */
}

int32_t lp__kv_find_twin(const lp__kv_t *kv, int32_t twin, uint32_t twin_gen)
{
    uint64_t h = twin_hash(twin, twin_gen);
    for (int32_t id = kv->buckets[h & (kv->n_buckets - 1)]; id != LP__KV_NONE; id = kv->b[id].hnext) {
        const lp__kv_block_t *b = &kv->b[id];
        if (b->is_twin && b->twin == twin && b->twin_gen == twin_gen) return id;
    }
    return LP__KV_NONE;
}

void lp__kv_acquire(lp__kv_t *kv, uint32_t id) { acquire(kv, (int32_t)id); }

uint32_t lp__kv_commit_twin(lp__kv_t *kv, uint32_t id, int32_t twin, uint32_t twin_gen)
{
    lp__kv_block_t *b = &kv->b[id];
    if (b->is_twin && b->twin == twin && b->twin_gen == twin_gen) return id;
    int32_t same = lp__kv_find_twin(kv, twin, twin_gen);
    if (same != LP__KV_NONE) {
        acquire(kv, same);
        lp__kv_release(kv, id);
        return (uint32_t)same;
    }
    if (b->hashed) unhash(kv, (int32_t)id); /* registered for another twin: now this one's */
    b->hash = twin_hash(twin, twin_gen);
    b->parent = LP__KV_NONE;
    b->hashed = true;
    b->is_twin = true;
    b->twin = twin;
    b->twin_gen = twin_gen;
    int32_t *head = &kv->buckets[b->hash & (kv->n_buckets - 1)];
    b->hnext = *head;
    *head = (int32_t)id;
    return id;
}
