/* sampler-params.c - sampler-svc's parameter table (see sampler-params.h). */
#include "sampler-params.h"

#include <stddef.h>

#define O(f) offsetof(lp_sampler_opts_t, f)
static const lp_param_t rows[] = {
    {"model", "model", LP_P_STR, 0, 0, NULL, O(model), "the GGUF model (its vocabulary)", true, false},
    {"sampler.endpoint", "endpoint", LP_P_STR, 0, 0, "ipc://RUN_DIR/sampler.sock", O(endpoint),
     "the endpoint it binds", true, false},
    {"sampler.default", "default", LP_P_STR, 0, 0, "llama.cpp's", O(default_json),
     "the default strategy: sampling parameters as JSON (docs/SAMPLER.md)", false, false},
    {"no_shm", "no-shm", LP_P_BOOL, 0, 0, "false", O(no_shm), "logit rows inline, not through shared memory",
     false, false},
    {"sampler.plugin_dir", "plugin-dir", LP_P_STR, 0, 0, "none: loads refused", O(plugin_dir),
     "the only folder SamplerControl \"load\" takes plugins from (docs/SAMPLER.md)", false, false},
    {"sampler.state_file", "state-file", LP_P_STR, 0, 0, "none (lmpipe up: RUN_DIR/sampler-state.json)",
     O(state_file), "every strategy change is saved there and read back at start", false, false},
    {"sampler.plugin_timeout_ms", "plugin-timeout-ms", LP_P_INT, 0, 3600000, "2000", O(plugin_timeout_ms),
     "a plugin that runs longer in one call is a poison pill (docs/SAMPLER.md; 0: no limit)", false, false},
    LP_CURVE_PARAMS(lp_sampler_opts_t, curve),
};
#undef O

const lp_params_t lp_sampler_params = {"sampler", "sampler-svc",
                                       "serves the sampler: one session per request, rows read in place from the "
                                       "engine's ring (docs/PROTOCOL.md)",
                                       rows, sizeof(rows) / sizeof(rows[0]), sizeof(lp_sampler_opts_t)};
