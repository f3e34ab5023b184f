/* kvcache.h - an engine group's KV block manager, kept by the coordinator
 * (docs/ARCHITECTURE.md, "Prefix cache").
 *
 * A paged engine (Hello.kv_block > 0) holds kv_blocks blocks of kv_block
 * positions; the coordinator decides which sequence writes into which block
 * and sends each sequence's block table with its steps.  A block is:
 *
 *   free     unreferenced, no content worth keeping
 *   used     referenced by one or more running sequences (ref > 0)
 *   cached   unreferenced, but full and registered by its hash: a later
 *            prompt with the same prefix takes it back without prefill;
 *            evicted, oldest release first, only when a block is needed
 *
 * A full block is keyed by a hash chain: the hash of its parent's hash and
 * its own token ids.  A hit is checked against the stored tokens and the
 * parent block itself, so that a hash collision can never give another
 * prefix's KV.  Pure C, no sockets: tested alone (kvcache_test.c). */
#ifndef LP_COORD_KVCACHE_H
#define LP_COORD_KVCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LP__KV_NONE (-1)

typedef struct lp__kv_block {
    uint64_t hash;        /* when hashed: chain hash of the prefix up to this block's end */
    uint32_t gen;         /* bumped whenever the block gets new content */
    int32_t ref;          /* sequences holding it */
    int32_t parent;       /* hashed: the previous block of the prefix; LP__KV_NONE at 0 */
    uint32_t parent_gen;  /* the parent's gen when this one was registered */
    int32_t hnext;        /* next in its hash bucket */
    int32_t prev, next;   /* the LRU list (cached blocks) */
    bool hashed;
    bool is_twin;         /* hashed as the twin of another pool's block (below) */
    int32_t twin;         /* is_twin: that block, and its gen when registered */
    uint32_t twin_gen;
} lp__kv_block_t;

/* The hash function; a test may swap it to force collisions. */
typedef uint64_t (*lp__kv_hash_cb)(uint64_t parent, const int32_t *toks, int32_t n);

typedef struct lp__kv {
    int32_t block;        /* positions per block */
    int32_t n_blocks;
    lp__kv_block_t *b;    /* n_blocks */
    int32_t *toks;        /* (n_blocks, block): the token ids of hashed blocks */
    int32_t *buckets;     /* n_buckets heads of hash chains */
    uint32_t n_buckets;   /* a power of two */
    int32_t *free_ids;    /* stack of free blocks */
    int32_t n_free;
    int32_t lru_head, lru_tail; /* cached blocks, least recently released first */
    int32_t n_used, n_cached;
    uint64_t n_evicted;
    lp__kv_hash_cb hash;  /* lp__kv_hash unless a test swaps it */
} lp__kv_t;

/* A 64-bit hash of a block's tokens chained on its parent's hash (0 for
 * the first block). */
uint64_t lp__kv_hash(uint64_t parent, const int32_t *toks, int32_t n);

/* A pool of n_blocks blocks of `block` positions, all free. */
int lp__kv_init(lp__kv_t *kv, int32_t block, int32_t n_blocks);
void lp__kv_free(lp__kv_t *kv);

/* Blocks a sequence may still get: free plus cached (evictable). */
static inline int32_t lp__kv_available(const lp__kv_t *kv) { return kv->n_free + kv->n_cached; }

/* Positions needed -> blocks needed. */
static inline int32_t lp__kv_blocks_for(const lp__kv_t *kv, int32_t n_pos)
{
    return (n_pos + kv->block - 1) / kv->block;
}

/* The number of leading full blocks of toks[0..n) that are cached, at most
 * max_blocks.  Changes nothing. */
int32_t lp__kv_match(const lp__kv_t *kv, const int32_t *toks, int32_t n, int32_t max_blocks);

/* The same, taking a reference on each block matched: their ids go to
 * out[0..count), the chain hash of the last one to *last_hash.  Returns
 * the count. */
int32_t lp__kv_acquire_prefix(lp__kv_t *kv, const int32_t *toks, int32_t n, int32_t max_blocks,
                              uint32_t *out, uint64_t *last_hash);

/* A block for new content, referenced once: a free one, else the least
 * recently released cached one (forgotten).  LP_ERR(ENOSPC) when every
 * block is in use. */
int lp__kv_alloc(lp__kv_t *kv, uint32_t *id);

/* Drop one reference; an unreferenced block becomes cached (hashed) or
 * free. */
void lp__kv_release(lp__kv_t *kv, uint32_t id);

/* Register the full block `id` (referenced by the caller) whose tokens are
 * toks[0..block), after `parent` (the previous block of the sequence, or
 * LP__KV_NONE) whose chain hash is parent_hash.  Returns the block the
 * sequence should hold from now on: `id`, or an identical block already
 * cached (then `id` is released and that one referenced).  *hash gets the
 * block's chain hash. */
uint32_t lp__kv_commit(lp__kv_t *kv, uint32_t id, int32_t parent, uint64_t parent_hash,
                       const int32_t *toks, uint64_t *hash);

/* Twins: a pool whose blocks hold other layers' KV of the same positions
 * as another pool's blocks (the sliding-window layers' pool beside the
 * full-attention one, docs/ARCHITECTURE.md "Sliding windows").  A block is
 * registered as the twin of block `twin` of the other pool at generation
 * `twin_gen`: it is found again exactly while that block holds the same
 * content (same id, same gen), so the other pool's verified hash chain
 * vouches for it.  Registered twins are cached and evicted like hashed
 * blocks. */

/* Register the referenced block `id` as the twin of (twin, twin_gen).
 * Returns the block the sequence should hold from now on: `id`, or the
 * block already registered for that twin (then `id` is released and that
 * one referenced). */
uint32_t lp__kv_commit_twin(lp__kv_t *kv, uint32_t id, int32_t twin, uint32_t twin_gen);
/* The block registered as the twin of (twin, twin_gen), or LP__KV_NONE. */
int32_t lp__kv_find_twin(const lp__kv_t *kv, int32_t twin, uint32_t twin_gen);
/* Take one more reference on a block (a cached one leaves the LRU). */
void lp__kv_acquire(lp__kv_t *kv, uint32_t id);

#endif
