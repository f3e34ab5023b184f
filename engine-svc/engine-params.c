/* engine-params.c - engine-svc's parameter table (see engine-params.h). */
#include "engine-params.h"

#include <stddef.h>

#define O(f) offsetof(lp_engine_opts_t, f)
static const lp_param_t rows[] = {
    {"model", "model", LP_P_STR, 0, 0, NULL, O(model), "the GGUF model", true, false},
    {"engine.endpoint", "endpoint", LP_P_STR, 0, 0, "ipc://RUN_DIR/engine.sock", O(endpoint),
     "the endpoint it binds", true, false},
    {"max_seqs", "max-seqs", LP_P_INT, 0, 4096, "16", O(max_seqs), "sequence slots (0: the default)", false, false},
    {"max_batch_tokens", "max-batch-tokens", LP_P_INT, 0, 1 << 20, "512", O(max_batch_tokens),
     "tokens per step (0: the default)", false, false},
    {"n_ctx", "n-ctx", LP_P_INT, 0, 1 << 24, "the model's, at most 4096", O(n_ctx),
     "positions per sequence (0: the default)", false, false},
    {"threads", "threads", LP_P_INT, 0, 1024, "the cores", O(threads), "compute threads (0: the default)", false,
     false},
    {"engine.backend", "backend", LP_P_STR, 0, 0, "the best available", O(backend), "cpu or cuda", false, false},
    {"engine.exact", "exact", LP_P_BOOL, 0, 0, "false", O(exact), "the reference kernels (bit-exact, slower)",
     false, false},
    {"no_shm", "no-shm", LP_P_BOOL, 0, 0, "false", O(no_shm), "logit rows inline, not through shared memory",
     false, false},
    {NULL, "shm-name", LP_P_STR, 0, 0, "a random name", O(shm_name), "the shared-memory ring's name (lmpipe up's)",
     false, false},
    {"engine.shm_slots", "shm-slots", LP_P_INT, 0, 4096, "2 * max_seqs", O(shm_slots),
     "slots in the ring (0: the default)", false, false},
    {"engine.kv_block", "kv-block", LP_P_INT, 0, 1 << 16, "the backend's", O(kv_block),
     "positions per KV block (0: one contiguous stretch per sequence)", false, false},
    {"engine.kv_pool_tokens", "kv-pool-tokens", LP_P_INT, 1, 1LL << 40, "max_seqs * n_ctx", O(kv_pool_tokens),
     "the KV pool in positions", false, false},
    {"engine.kv_pool_mb", "kv-pool-mb", LP_P_INT, 1, 1LL << 30, "max_seqs * n_ctx", O(kv_pool_mb),
     "the KV pool in MiB", false, false},
    {"engine.kv_pool_swa_tokens", "kv-pool-swa-tokens", LP_P_INT, 1, 1LL << 40,
     "per sequence, the blocks of a window and of the longest step", O(kv_pool_swa_tokens),
     "the sliding-window layers' KV pool in positions (Gemma 3, Gemma 4; docs/ARCHITECTURE.md)", false, false},
    LP_CURVE_PARAMS(lp_engine_opts_t, curve),
};
#undef O

const lp_params_t lp_engine_params = {"engine", "engine-svc",
                                      "serves the compute engine: batched forward steps (docs/PROTOCOL.md)", rows,
                                      sizeof(rows) / sizeof(rows[0]), sizeof(lp_engine_opts_t)};
