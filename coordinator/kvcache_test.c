/* kvcache_test.c - the KV block manager alone: the hash chain, reference
 * counts, LRU eviction order, a block computed twice, a parent that was
 * evicted and reused, and hash collisions forced through the test hook,
 * which must never give a block whose tokens or prefix differ; twins (a
 * second pool's blocks registered against the first pool's blocks and
 * generations): found exactly, cached and evicted, stale once the twin's
 * block gets new content, deduplicated, never confused with a chain. */
#include "kvcache.h"

#include "../tests/check.h"
#include "error.h"

#include <string.h>

enum { B = 4 };

/* A sequence's blocks as the scheduler keeps them. */
typedef struct seq {
    uint32_t ids[8];
    int32_t n;
    uint64_t hash;
} seq_t;

/* Allocate and register the n/B full blocks of toks, as a finished prefill. */
static void fill(lp__kv_t *kv, seq_t *s, const int32_t *toks, int32_t n)
{
    memset(s, 0, sizeof(*s));
    for (int32_t i = 0; i < n / B; i++) {
        CHECK_RC(lp__kv_alloc(kv, &s->ids[i]), 0);
        s->ids[i] = lp__kv_commit(kv, s->ids[i], i ? (int32_t)s->ids[i - 1] : LP__KV_NONE, s->hash,
                                  toks + i * B, &s->hash);
        s->n = i + 1;
    }
}

static void drop(lp__kv_t *kv, seq_t *s)
{
    while (s->n > 0) lp__kv_release(kv, s->ids[--s->n]);
}

static void test_hash(void)
{
    int32_t a[B] = {1, 2, 3, 4}, b[B] = {1, 2, 3, 5};
    CHECK(lp__kv_hash(0, a, B) == lp__kv_hash(0, a, B));
    CHECK(lp__kv_hash(0, a, B) != lp__kv_hash(0, b, B));
    CHECK(lp__kv_hash(0, a, B) != lp__kv_hash(1, a, B), "the parent is part of the hash");
    CHECK(lp__kv_hash(0, a, 3) != lp__kv_hash(0, a, B));
}

static void test_chain(void)
{
    lp__kv_t kv;
    CHECK_RC(lp__kv_init(&kv, B, 8), 0);
    int32_t t[12], u[12], v[12];
    for (int i = 0; i < 12; i++) t[i] = u[i] = v[i] = 10 + i;
    u[6] = 99; /* differs in the second block */
    v[1] = 99; /* differs in the first block only */
    seq_t s;
    fill(&kv, &s, t, 12);
    CHECK(s.n == 3 && kv.n_used == 3 && kv.n_cached == 0 && kv.n_free == 5);
    drop(&kv, &s);
    CHECK(kv.n_used == 0 && kv.n_cached == 3 && kv.n_free == 5);
    CHECK(lp__kv_available(&kv) == 8);
    CHECK(lp__kv_match(&kv, t, 12, 8) == 3);
    CHECK(lp__kv_match(&kv, t, 12, 2) == 2, "max_blocks caps the match");
    CHECK(lp__kv_match(&kv, t, 11, 8) == 2, "full blocks only");
    CHECK(lp__kv_match(&kv, t, 3, 8) == 0);
    CHECK(lp__kv_match(&kv, u, 12, 8) == 1, "the chain stops at the first block that differs");
    CHECK(lp__kv_match(&kv, v, 12, 8) == 0, "later blocks equal after a different one do not match");
    uint32_t ids[3];
    uint64_t h = 0;
    CHECK(lp__kv_acquire_prefix(&kv, t, 12, 8, ids, &h) == 3);
    CHECK(h == s.hash && kv.n_used == 3 && kv.n_cached == 0);
    /* A second sequence shares them: one reference more, not more blocks. */
    uint32_t ids2[3];
    CHECK(lp__kv_acquire_prefix(&kv, t, 8, 8, ids2, NULL) == 2);
    CHECK(ids2[0] == ids[0] && ids2[1] == ids[1] && kv.b[ids[0]].ref == 2 && kv.n_used == 3);
    lp__kv_release(&kv, ids2[1]);
    lp__kv_release(&kv, ids2[0]);
    CHECK(kv.b[ids[0]].ref == 1 && kv.n_used == 3 && kv.n_cached == 0);
    for (int i = 3; i-- > 0;) lp__kv_release(&kv, ids[i]);
    CHECK(kv.n_used == 0 && kv.n_cached == 3);
    lp__kv_free(&kv);
}

static void test_refcounts_full(void)
{
    lp__kv_t kv;
    CHECK_RC(lp__kv_init(&kv, B, 3), 0);
    uint32_t id[3], x;
    for (int i = 0; i < 3; i++) CHECK_RC(lp__kv_alloc(&kv, &id[i]), 0);
    CHECK(id[0] == 0 && id[1] == 1 && id[2] == 2);
    CHECK_RC(lp__kv_alloc(&kv, &x), LP_ERR(ENOSPC));
    /* Unregistered blocks go back to the free list, not the cache. */
    lp__kv_release(&kv, id[1]);
    CHECK(kv.n_free == 1 && kv.n_cached == 0 && kv.n_used == 2);
    CHECK_RC(lp__kv_alloc(&kv, &x), 0);
    CHECK(x == 1 && kv.n_evicted == 0);
    lp__kv_release(&kv, id[0]);
    lp__kv_release(&kv, x);
    lp__kv_release(&kv, id[2]);
    CHECK(kv.n_free == 3 && kv.n_used == 0);
    lp__kv_free(&kv);
}

static void test_lru(void)
{
    lp__kv_t kv;
    CHECK_RC(lp__kv_init(&kv, B, 4), 0);
    int32_t a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[8] = {11, 12, 13, 14, 15, 16, 17, 18};
    seq_t sa, sb;
    fill(&kv, &sa, a, 8);
    uint32_t a0 = sa.ids[0], a1 = sa.ids[1];
    drop(&kv, &sa); /* a1 then a0 enter the cache */
    fill(&kv, &sb, b, 8);
    uint32_t b0 = sb.ids[0], b1 = sb.ids[1];
    drop(&kv, &sb);
    CHECK(kv.n_cached == 4 && kv.n_free == 0);
    /* Nothing free: the least recently released goes first, a prefix's
     * last block before its first. */
    uint32_t x;
    CHECK_RC(lp__kv_alloc(&kv, &x), 0);
    CHECK(x == a1 && kv.n_evicted == 1);
    CHECK(lp__kv_match(&kv, a, 8, 8) == 1 && lp__kv_match(&kv, b, 8, 8) == 2);
    /* Taking b's prefix and releasing it makes b the most recent. */
    uint32_t ids[2];
    CHECK(lp__kv_acquire_prefix(&kv, b, 8, 8, ids, NULL) == 2);
    CHECK(ids[0] == b0 && ids[1] == b1);
    lp__kv_release(&kv, ids[1]);
    lp__kv_release(&kv, ids[0]);
    uint32_t y;
    CHECK_RC(lp__kv_alloc(&kv, &y), 0);
    CHECK(y == a0, "a0 was released before b's blocks were touched again");
    CHECK(lp__kv_match(&kv, a, 8, 8) == 0 && lp__kv_match(&kv, b, 8, 8) == 2);
    uint32_t z;
    CHECK_RC(lp__kv_alloc(&kv, &z), 0);
    CHECK(z == b1 && lp__kv_match(&kv, b, 8, 8) == 1);
    lp__kv_release(&kv, x);
    lp__kv_release(&kv, y);
    lp__kv_release(&kv, z);
    lp__kv_free(&kv);
}

static uint64_t collide(uint64_t parent, const int32_t *toks, int32_t n)
{
    (void)parent, (void)toks, (void)n;
    return 42;
}

/* Run once with the real hash, once with every hash equal (then only the
 * parent's identity tells the stale child apart). */
static void test_twice_and_stale_parent(lp__kv_hash_cb hash)
{
    lp__kv_t kv;
    CHECK_RC(lp__kv_init(&kv, B, 6), 0);
    kv.hash = hash;
    int32_t t[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    /* Two sequences prefill the same prompt at once: the second one's
     * commit moves it to the first one's block. */
    seq_t s1, s2;
    fill(&kv, &s1, t, 8);
    fill(&kv, &s2, t, 8);
    CHECK(s2.ids[0] == s1.ids[0] && s2.ids[1] == s1.ids[1] && s2.hash == s1.hash);
    CHECK(kv.n_used == 2 && kv.n_free == 4 && kv.b[s1.ids[0]].ref == 2);
    drop(&kv, &s2);
    drop(&kv, &s1);
    CHECK(kv.n_cached == 2 && kv.n_free == 4);
    /* The parent evicted and reused for other content: its old child must
     * not follow the new content. */
    lp__kv_free(&kv);
    CHECK_RC(lp__kv_init(&kv, B, 2), 0);
    kv.hash = hash;
    fill(&kv, &s1, t, 8);
    uint32_t p = s1.ids[0], c = s1.ids[1];
    lp__kv_release(&kv, p); /* the parent first: it is evicted first */
    lp__kv_release(&kv, c);
    int32_t q[8] = {9, 9, 9, 9, 5, 6, 7, 8};
    uint32_t x;
    uint64_t h;
    CHECK_RC(lp__kv_alloc(&kv, &x), 0);
    CHECK(x == p);
    x = lp__kv_commit(&kv, x, LP__KV_NONE, 0, q, &h);
    CHECK(x == p && lp__kv_match(&kv, q, 4, 8) == 1);
    CHECK(lp__kv_match(&kv, q, 8, 8) == 1, "a child registered under the old content is not reused");
    CHECK(lp__kv_match(&kv, t, 8, 8) == 0);
    lp__kv_release(&kv, x);
    lp__kv_free(&kv);
}

static void test_collisions(void)
{
    lp__kv_t kv;
    CHECK_RC(lp__kv_init(&kv, B, 8), 0);
    kv.hash = collide; /* every block has the same hash */
    int32_t x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8] = {1, 2, 3, 9, 5, 6, 7, 8};
    int32_t z[8] = {21, 22, 23, 24, 5, 6, 7, 8};
    seq_t sx, sy;
    fill(&kv, &sx, x, 8);
    CHECK(lp__kv_match(&kv, y, 8, 8) == 0, "same hash, other tokens: no reuse");
    CHECK(lp__kv_match(&kv, z, 8, 8) == 0);
    fill(&kv, &sy, y, 8);
    CHECK(sy.ids[0] != sx.ids[0] && sy.ids[1] != sx.ids[1], "a collision is not a block computed twice");
    drop(&kv, &sx);
    drop(&kv, &sy);
    CHECK(kv.n_cached == 4);
    uint32_t ids[2];
    CHECK(lp__kv_acquire_prefix(&kv, y, 8, 8, ids, NULL) == 2);
    CHECK(!memcmp(kv.toks + ids[0] * B, y, sizeof(int32_t) * B) &&
          !memcmp(kv.toks + ids[1] * B, y + B, sizeof(int32_t) * B));
    CHECK(kv.b[ids[1]].parent == (int32_t)ids[0], "the second block follows this prompt's first");
    lp__kv_release(&kv, ids[1]);
    lp__kv_release(&kv, ids[0]);
    /* Equal second blocks after different first ones: the chain tells them
     * apart even with equal hashes. */
    seq_t sz;
    int32_t w[4] = {21, 22, 23, 24};
    fill(&kv, &sz, w, 4);
    drop(&kv, &sz);
    CHECK(lp__kv_match(&kv, z, 8, 8) == 1);
    lp__kv_free(&kv);
}

static void test_bad_init(void)
{
    lp__kv_t kv;
    CHECK_RC(lp__kv_init(&kv, 0, 8), LP_ERR(EINVAL));
    CHECK(strstr(lp_error_msg(), "blocks") != NULL);
    CHECK_RC(lp__kv_init(&kv, 16, 0), LP_ERR(EINVAL));
}

static void test_twins(void)
{
    lp__kv_t kv, sw;
    CHECK_RC(lp__kv_init(&kv, B, 8), 0);
    CHECK_RC(lp__kv_init(&sw, B, 3), 0);
    int32_t toks[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    seq_t a;
    fill(&kv, &a, toks, 8);
    uint32_t t0, t1;
    CHECK_RC(lp__kv_alloc(&sw, &t0), 0);
    CHECK_RC(lp__kv_alloc(&sw, &t1), 0);
    CHECK(lp__kv_commit_twin(&sw, t0, (int32_t)a.ids[0], kv.b[a.ids[0]].gen) == t0);
    CHECK(lp__kv_commit_twin(&sw, t1, (int32_t)a.ids[1], kv.b[a.ids[1]].gen) == t1);
    CHECK(lp__kv_find_twin(&sw, (int32_t)a.ids[1], kv.b[a.ids[1]].gen) == (int32_t)t1);
    CHECK(lp__kv_find_twin(&sw, (int32_t)a.ids[1], kv.b[a.ids[1]].gen + 1) == LP__KV_NONE,
          "another generation of the block finds nothing");
    CHECK(lp__kv_match(&sw, toks, 8, 2) == 0, "twins are no chain");
    /* released twins are cached, and taken back */
    lp__kv_release(&sw, t0);
    lp__kv_release(&sw, t1);
    CHECK(sw.n_cached == 2 && sw.n_used == 0);
    lp__kv_acquire(&sw, t1);
    CHECK(sw.n_cached == 1 && sw.n_used == 1 && sw.b[t1].ref == 1);
    /* a second block registered for the same twin: the sequence moves to
     * the registered one */
    uint32_t t2;
    CHECK_RC(lp__kv_alloc(&sw, &t2), 0);
    CHECK(lp__kv_commit_twin(&sw, t2, (int32_t)a.ids[1], kv.b[a.ids[1]].gen) == t1);
    CHECK(sw.b[t1].ref == 2 && sw.b[t2].ref == 0);
    lp__kv_release(&sw, t1);
    lp__kv_release(&sw, t1);
    /* the pool runs out: the least recently released twin is evicted */
    uint32_t x[3];
    for (int i = 0; i < 3; i++) CHECK_RC(lp__kv_alloc(&sw, &x[i]), 0);
    CHECK(lp__kv_find_twin(&sw, (int32_t)a.ids[0], kv.b[a.ids[0]].gen) == LP__KV_NONE &&
          lp__kv_find_twin(&sw, (int32_t)a.ids[1], kv.b[a.ids[1]].gen) == LP__KV_NONE,
          "evicted twins are forgotten");
    for (int i = 0; i < 3; i++) lp__kv_release(&sw, x[i]);
    /* the twin's block reused for other content: the old twin is stale */
    CHECK_RC(lp__kv_alloc(&sw, &t0), 0);
    CHECK(lp__kv_commit_twin(&sw, t0, (int32_t)a.ids[0], kv.b[a.ids[0]].gen) == t0);
    lp__kv_release(&sw, t0);
    uint32_t old_gen = kv.b[a.ids[0]].gen;
    drop(&kv, &a);
    for (int i = 0; i < 8; i++) CHECK_RC(lp__kv_alloc(&kv, &x[0]), 0); /* evicts a's blocks */
    CHECK(lp__kv_find_twin(&sw, (int32_t)a.ids[0], kv.b[a.ids[0]].gen) == LP__KV_NONE &&
          kv.b[a.ids[0]].gen != old_gen, "new content in the block: its old twin is not found");
    lp__kv_free(&kv);
    lp__kv_free(&sw);
}

int main(void)
{
    test_hash();
    test_chain();
    test_refcounts_full();
    test_lru();
    test_twice_and_stale_parent(lp__kv_hash);
    test_twice_and_stale_parent(collide);
    test_collisions();
    test_bad_init();
    test_twins();
    return CHECK_DONE();
}
