/* sampler-svc - serves the sampler: one session per generation request,
 * rows read in place from the engine's ring (docs/PROTOCOL.md).  Its
 * parameters: sampler-params.c. */
#include "sampler-params.h"
#include "serve.h"

#include "error.h"
#include "log.h"

#include <stdio.h>

int main(int argc, char **argv)
{
    lp_log_init("sampler-svc");
    lp_sampler_opts_t o = LP_SAMPLER_OPTS_INIT;
    lp_params_ctx_t *ctx;
    int prc = lp_params_parse(&lp_sampler_params, &o, argc, argv, &ctx);
    if (prc) return prc == 1 ? 0 : 2;
    lp_sampler_svc_params_t p = {.plugin_timeout_ms = (int)o.plugin_timeout_ms};
    p.model_path = o.model;
    p.default_json = o.default_json;
    p.no_shm = o.no_shm;
    p.plugin_dir = o.plugin_dir;
    p.state_file = o.state_file;
    lp_sampler_svc_t *svc;
    if (lp_sampler_svc_new(&p, &svc)) {
        fprintf(stderr, "sampler-svc: %s\n", lp_error_msg());
        lp_params_ctx_destroy(&ctx);
        return 1;
    }
    int rc = lp_service_run_secure(&lp_sampler_svc_ops, svc, o.endpoint, &o.curve);
    if (rc) fprintf(stderr, "sampler-svc: %s\n", lp_error_msg());
    lp_sampler_svc_destroy(&svc);
    lp_params_ctx_destroy(&ctx);
    return rc ? 1 : 0;
}
