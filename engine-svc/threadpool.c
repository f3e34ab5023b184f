/* threadpool.c - spin-then-sleep worker pool.
 *
 * A run publishes fn/ctx and bumps `gen`; workers that see a new generation
 * run their share and decrement `pending`; the caller runs share 0 and
 * waits until `pending` is 0.  Every wait (a worker for the next run, the
 * caller for the workers, a thread at a barrier) spins SPIN_LIMIT times and
 * then sleeps on a futex, so a machine with more runnable threads than
 * cores gets the core back instead of a spinning waiter.  Sleepers are
 * counted, and a waker makes the futex call only when someone sleeps (both
 * sides use sequentially consistent atomics: either the waker sees the
 * sleeper or the sleeper sees the new value before it sleeps; the futex
 * call itself rechecks the value). */
#include "threadpool.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "error.h"

#define SPIN_LIMIT 4000 /* pause instructions, roughly 50-100 us */

struct lp_threadpool {
    int n_threads;
    pthread_t *threads;     /* n_threads - 1 workers */
    struct worker_arg *args;
    lp_threadpool_fn fn;    /* the current run's function, borrowed */
    void *ctx;
    atomic_uint gen;        /* run generation */
    atomic_uint pending;    /* workers still inside the current run */
    atomic_int stop;
    atomic_int sleepers;    /* threads asleep on gen, pending or bar_gen */
    atomic_int bar_count;   /* barrier arrivals */
    atomic_uint bar_gen;    /* barrier generation */
    void *scratch;          /* lp_threadpool_scratch, owned */
    size_t scratch_bytes;
};

struct worker_arg {
    lp_threadpool_t *pool;
    int ith;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void futex_wait(void *addr, unsigned val)
{
    syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(void *addr)
{
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Wait while *addr == val: spin, then sleep. */
static void wait_while_eq(lp_threadpool_t *pool, atomic_uint *addr, unsigned val)
{
    for (int spins = 0; atomic_load(addr) == val; spins++) {
        if (spins < SPIN_LIMIT) {
            cpu_relax();
            continue;
        }
        atomic_fetch_add(&pool->sleepers, 1);
        if (atomic_load(addr) == val) futex_wait(addr, val);
        atomic_fetch_sub(&pool->sleepers, 1);
    }
}

/* Store-side of wait_while_eq: wake sleepers after changing *addr. */
static void wake_if_sleeping(lp_threadpool_t *pool, atomic_uint *addr)
{
    if (atomic_load(&pool->sleepers) > 0) futex_wake(addr);
}

static void *worker_main(void *p)
{
    struct worker_arg *a = p;
    lp_threadpool_t *pool = a->pool;
    unsigned seen = 0;
    for (;;) {
        wait_while_eq(pool, &pool->gen, seen);
        seen = atomic_load(&pool->gen);
        if (atomic_load(&pool->stop)) break;
        pool->fn(pool->ctx, a->ith, pool->n_threads);
        if (atomic_fetch_sub(&pool->pending, 1) == 1) wake_if_sleeping(pool, &pool->pending);
    }
    return NULL;
}

static void wake_workers(lp_threadpool_t *pool)
{
    atomic_fetch_add(&pool->gen, 1);
    wake_if_sleeping(pool, &pool->gen);
}

lp_threadpool_t *lp_threadpool_new(int n_threads)
{
    if (n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = n > 0 ? (int)n : 1;
    }
    lp_threadpool_t *pool = calloc(1, sizeof *pool);
    if (!pool) {
        lp_error_set(LP_ERR(ENOMEM), "thread pool: out of memory");
        return NULL;
    }
    pool->n_threads = n_threads;
    if (n_threads > 1) {
        pool->threads = calloc((size_t)n_threads - 1, sizeof *pool->threads);
        pool->args = calloc((size_t)n_threads - 1, sizeof *pool->args);
        if (!pool->threads || !pool->args) {
            lp_error_set(LP_ERR(ENOMEM), "thread pool: out of memory");
            pool->n_threads = 1;
            lp_threadpool_destroy(&pool);
            return NULL;
        }
    }
    for (int i = 1; i < n_threads; i++) {
        pool->args[i - 1] = (struct worker_arg){pool, i};
        int rc = pthread_create(&pool->threads[i - 1], NULL, worker_main, &pool->args[i - 1]);
        if (rc) {
            lp_error_set(LP_ERR(rc), "thread pool: cannot start thread %d of %d: %s", i,
                         n_threads, strerror(rc));
            pool->n_threads = i; /* join the ones that started */
            lp_threadpool_destroy(&pool);
            return NULL;
        }
    }
    return pool;
}

void lp_threadpool_destroy(lp_threadpool_t **self_p)
{
    lp_threadpool_t *pool = self_p ? *self_p : NULL;
    if (!pool) return;
    if (pool->n_threads > 1) {
        atomic_store(&pool->stop, 1);
        atomic_fetch_add(&pool->gen, 1);
        futex_wake(&pool->gen);
        for (int i = 1; i < pool->n_threads; i++) pthread_join(pool->threads[i - 1], NULL);
    }
    free(pool->threads);
    free(pool->args);
    free(pool->scratch);
    free(pool);
    *self_p = NULL;
}

int lp_threadpool_n_threads(const lp_threadpool_t *pool)
{
    return pool->n_threads;
}

void lp_threadpool_run(lp_threadpool_t *pool, lp_threadpool_fn fn, void *ctx)
{
    if (pool->n_threads == 1) {
        fn(ctx, 0, 1);
        return;
    }
    pool->fn = fn;
    pool->ctx = ctx;
    atomic_store(&pool->pending, pool->n_threads - 1);
    wake_workers(pool);
    fn(ctx, 0, pool->n_threads);
    for (unsigned left; (left = atomic_load(&pool->pending)) > 0;)
        wait_while_eq(pool, &pool->pending, left);
}

void lp_threadpool_barrier(lp_threadpool_t *pool)
{
    int n = pool->n_threads;
    if (n == 1) return;
    unsigned g = atomic_load(&pool->bar_gen);
    if (atomic_fetch_add(&pool->bar_count, 1) == n - 1) {
        atomic_store(&pool->bar_count, 0);
        atomic_fetch_add(&pool->bar_gen, 1);
        wake_if_sleeping(pool, &pool->bar_gen);
        return;
    }
    wait_while_eq(pool, &pool->bar_gen, g);
}

void *lp_threadpool_scratch(lp_threadpool_t *pool, size_t bytes)
{
    if (bytes <= pool->scratch_bytes) return pool->scratch;
    bytes = (bytes + 4095) & ~(size_t)4095;
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes)) return NULL;
    free(pool->scratch);
    pool->scratch = p;
    pool->scratch_bytes = bytes;
    return p;
}
