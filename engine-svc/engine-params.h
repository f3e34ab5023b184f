/* engine-params.h - engine-svc's parameters: one table (lib/params.h), read
 * from the config file (--config FILE --service engine) and the flags. */
#ifndef LP_ENGINE_PARAMS_H
#define LP_ENGINE_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "curve.h"
#include "params.h"

typedef struct lp_engine_opts {
    const char *model, *endpoint, *backend, *shm_name;
    int64_t max_seqs, max_batch_tokens, n_ctx, threads, shm_slots;
    int64_t kv_block;              /* -1: not given (the engine's default) */
    int64_t kv_pool_tokens, kv_pool_mb;
    int64_t kv_pool_swa_tokens;    /* the sliding-window layers' pool; 0: the engine's default */
    bool exact, no_shm;
    lp_curve_opts_t curve;
} lp_engine_opts_t;

/* The defaults the table's rows start from. */
#define LP_ENGINE_OPTS_INIT {.kv_block = -1}

extern const lp_params_t lp_engine_params;

#endif
