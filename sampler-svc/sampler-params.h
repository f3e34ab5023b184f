/* sampler-params.h - sampler-svc's parameters: one table (lib/params.h),
 * read from the config file (--config FILE --service sampler) and the flags. */
#ifndef LP_SAMPLER_SVC_PARAMS_H
#define LP_SAMPLER_SVC_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "curve.h"
#include "params.h"

typedef struct lp_sampler_opts {
    const char *model, *endpoint, *default_json, *plugin_dir, *state_file;
    bool no_shm;
    int64_t plugin_timeout_ms;
    lp_curve_opts_t curve;
} lp_sampler_opts_t;

#define LP_SAMPLER_OPTS_INIT {.plugin_timeout_ms = 2000}

extern const lp_params_t lp_sampler_params;

#endif
