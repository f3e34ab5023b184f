/* engine-svc - serves the compute engine: batched forward steps whose logit
 * rows go into the shared-memory ring (docs/PROTOCOL.md).  Its parameters:
 * engine-params.c. */
#include "engine-params.h"
#include "serve.h"

#include "error.h"
#include "log.h"

#include <stdio.h>

int main(int argc, char **argv)
{
    lp_log_init("engine-svc");
    lp_engine_opts_t o = LP_ENGINE_OPTS_INIT;
    lp_params_ctx_t *ctx;
    int prc = lp_params_parse(&lp_engine_params, &o, argc, argv, &ctx);
    if (prc) return prc == 1 ? 0 : 2;
    lp_engine_svc_params_t p = {0};
    p.model_path = o.model;
    p.engine.max_seqs = (int32_t)o.max_seqs;
    p.engine.max_batch_tokens = (int32_t)o.max_batch_tokens;
    p.engine.n_ctx = (int32_t)o.n_ctx;
    p.engine.n_threads = (int)o.threads;
    p.engine.backend = o.backend;
    p.engine.exact = o.exact;
    /* kv_block 0 is the contiguous layout; the engine's 0 means its default */
    if (o.kv_block >= 0) p.engine.kv_block = o.kv_block ? (int32_t)o.kv_block : LP_ENGINE_KV_CONTIGUOUS;
    p.engine.kv_pool_tokens = o.kv_pool_tokens;
    p.engine.kv_pool_mb = o.kv_pool_mb;
    p.engine.kv_pool_swa_tokens = o.kv_pool_swa_tokens;
    p.no_shm = o.no_shm;
    p.shm_name = o.shm_name;
    p.shm_slots = (int)o.shm_slots;
    lp_engine_svc_t *svc;
    if (lp_engine_svc_new(&p, &svc)) {
        fprintf(stderr, "engine-svc: %s\n", lp_error_msg());
        lp_params_ctx_destroy(&ctx);
        return 1;
    }
    int rc = lp_service_run_secure(&lp_engine_svc_ops, svc, o.endpoint, &o.curve);
    if (rc) fprintf(stderr, "engine-svc: %s\n", lp_error_msg());
    lp_engine_svc_destroy(&svc);
    lp_params_ctx_destroy(&ctx);
    return rc ? 1 : 0;
}
