/* threadpool.h - a persistent pool of worker threads for the CPU kernels.
 *
 * lp_threadpool_run() runs fn(ctx, ith, nth) on every thread, the caller
 * included as ith = 0, and returns when all have finished.  Workers spin
 * briefly between runs (a forward pass issues hundreds of runs per token)
 * and then sleep on a condition variable, so an idle pool costs no CPU.
 *
 * One thread at a time may call lp_threadpool_run() on a pool. */
#ifndef LP_THREADPOOL_H
#define LP_THREADPOOL_H

#include <stddef.h>

typedef struct lp_threadpool lp_threadpool_t;
typedef void (*lp_threadpool_fn)(void *ctx, int ith, int nth);

/* A pool of n_threads threads counting the caller (n_threads - 1 workers);
 * n_threads <= 0 means one per online CPU.  Returns NULL with a message
 * (lp_error_msg) when threads cannot be created.  Caller destroys. */
lp_threadpool_t *lp_threadpool_new(int n_threads);
/* Joins the workers and frees the pool; sets *self_p = NULL; NULL-safe. */
void lp_threadpool_destroy(lp_threadpool_t **self_p);

int lp_threadpool_n_threads(const lp_threadpool_t *pool);

/* Run fn on every thread and wait for all of them.  `ctx` is borrowed for
 * the call. */
void lp_threadpool_run(lp_threadpool_t *pool, lp_threadpool_fn fn, void *ctx);

/* Inside fn only: wait until every thread of the run has reached the
 * barrier.  Every thread must call it the same number of times. */
void lp_threadpool_barrier(lp_threadpool_t *pool);

/* A scratch buffer of at least `bytes` bytes (64-byte aligned) owned by the
 * pool, for the kernels' temporaries.  It only grows, so after the largest
 * request has been seen no call allocates.  Call it outside a run (before
 * lp_threadpool_run); the pointer is valid until the next call.  Returns
 * NULL when memory runs out. */
void *lp_threadpool_scratch(lp_threadpool_t *pool, size_t bytes);

#endif
