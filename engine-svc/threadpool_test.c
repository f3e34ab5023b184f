/* threadpool_test.c - every thread runs each job once; barriers order
 * phases; pools of several sizes start and stop cleanly. */
#include "threadpool.h"
#include "../tests/check.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { MAX_THREADS = 8, ROUNDS = 64 };

struct count_ctx {
    atomic_int calls[MAX_THREADS];
    atomic_int bad_nth;
};

static void count_fn(void *p, int ith, int nth)
{
    struct count_ctx *c = p;
    atomic_fetch_add(&c->calls[ith], 1);
    if (nth < 1 || nth > MAX_THREADS || ith >= nth) atomic_fetch_add(&c->bad_nth, 1);
}

struct barrier_ctx {
    lp_threadpool_t *pool;
    int nth;
    atomic_int phase_done[MAX_THREADS];
    atomic_int errors;
};

/* Each thread marks phase k done, waits at the barrier, then checks that
 * every other thread has marked phase k too. */
static void barrier_fn(void *p, int ith, int nth)
{
    struct barrier_ctx *c = p;
    for (int k = 1; k <= ROUNDS; k++) {
        atomic_store(&c->phase_done[ith], k);
        lp_threadpool_barrier(c->pool);
        for (int t = 0; t < nth; t++)
            if (atomic_load(&c->phase_done[t]) < k) atomic_fetch_add(&c->errors, 1);
        lp_threadpool_barrier(c->pool);
    }
}

int main(void)
{
    const int sizes[] = {1, 2, 3, 8};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int n = sizes[s];
        lp_threadpool_t *pool = lp_threadpool_new(n);
        CHECK(pool, "pool of %d", n);
        if (!pool) continue;
        CHECK(lp_threadpool_n_threads(pool) == n, "n_threads");

        struct count_ctx c;
        memset(&c, 0, sizeof c);
        for (int r = 0; r < ROUNDS; r++) lp_threadpool_run(pool, count_fn, &c);
        for (int t = 0; t < MAX_THREADS; t++) {
            int want = t < n ? ROUNDS : 0;
            CHECK(atomic_load(&c.calls[t]) == want, "pool %d thread %d ran %d times, expected %d",
                  n, t, atomic_load(&c.calls[t]), want);
        }
        CHECK(atomic_load(&c.bad_nth) == 0, "bad ith/nth");

        struct barrier_ctx b;
        memset(&b, 0, sizeof b);
        b.pool = pool;
        b.nth = n;
        lp_threadpool_run(pool, barrier_fn, &b);
        CHECK(atomic_load(&b.errors) == 0, "pool %d: %d threads passed a barrier early", n,
              atomic_load(&b.errors));

        void *s1 = lp_threadpool_scratch(pool, 1000);
        CHECK(s1 && ((uintptr_t)s1 % 64) == 0, "scratch aligned");
        CHECK(lp_threadpool_scratch(pool, 500) == s1, "smaller request reuses the buffer");

        lp_threadpool_destroy(&pool);
        CHECK(pool == NULL, "destroy clears the pointer");
        lp_threadpool_destroy(&pool); /* NULL-safe */
    }
    /* n_threads <= 0: one per CPU */
    lp_threadpool_t *pool = lp_threadpool_new(0);
    CHECK(pool && lp_threadpool_n_threads(pool) >= 1, "default size");
    lp_threadpool_destroy(&pool);
    return CHECK_DONE();
}
