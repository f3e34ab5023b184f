/* coord-params.h - the coordinator's parameters: one table (lib/params.h),
 * read from the config file (--config FILE --service coordinator) and the
 * flags, and its engine groups (config group.NAME.*, or --group). */
#ifndef LP_COORD_PARAMS_H
#define LP_COORD_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "coord.h"
#include "curve.h"
#include "params.h"

typedef struct lp_coord_opts {
    const char *endpoint, *tokenizer_endpoint, *engine_endpoint, *sampler_endpoint;
    const char *tokenizer_key, *engine_key, *sampler_key;
    lp_param_list_t groups;        /* --group NAME,ENGINE_EP,SAMPLER_EP[,KEY[,SAMPLER_KEY]] */
    bool no_shm, no_prefix_cache;
    int64_t max_seqs, max_batch_tokens, prefill_chunk, max_requests, max_queued_per_client, kv_blocks;
    int64_t drain_grace_ms;
    lp_curve_opts_t curve;
    /* group.NAME.* and --group, read by lp_coord_groups */
    const char *group_fields[5 * LP_COORD_MAX_GROUPS];
    char group_names[LP_COORD_MAX_GROUPS][65];
} lp_coord_opts_t;

#define LP_COORD_OPTS_INIT {.drain_grace_ms = LP_COORD_DRAIN_GRACE_MS}

extern const lp_params_t lp_coord_params;

/* The engine groups: config group.NAME.{engine,sampler,server_key,
 * sampler_key} (in the order the config first names each) and --group
 * NAME,ENGINE_EP,SAMPLER_EP[,KEY[,SAMPLER_KEY]] (an empty key: none).
 * Strings borrow from cfg and o.  LP_ERR(EINVAL) naming a bad one. */
int lp_coord_groups(const lp_config_t *cfg, lp_coord_opts_t *o, lp_coord_group_params_t *out, size_t *n);

#endif
