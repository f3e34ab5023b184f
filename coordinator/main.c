/* coordinator - owns the generation requests: tokenize, schedule engine
 * steps, sample, stop, stream (docs/PROTOCOL.md).  Its parameters:
 * coord-params.c. */
#include "coord-params.h"
#include "coord.h"

#include "error.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    lp_log_init("coordinator");
    static lp_coord_opts_t o = LP_COORD_OPTS_INIT;
    lp_params_ctx_t *ctx;
    int prc = lp_params_parse(&lp_coord_params, &o, argc, argv, &ctx);
    if (prc) return prc == 1 ? 0 : 2;
    static lp_coord_group_params_t groups[LP_COORD_MAX_GROUPS];
    size_t n_groups = 0;
    if (lp_coord_groups(lp_params_ctx_config(ctx), &o, groups, &n_groups)) {
        fprintf(stderr, "coordinator: %s\n", lp_error_msg());
        lp_params_ctx_destroy(&ctx);
        return 2;
    }
    if (!n_groups && (!o.engine_endpoint || !o.sampler_endpoint)) {
        fprintf(stderr, "coordinator: --engine and --sampler (config engine.endpoint, sampler.endpoint), or "
                        "engine groups (--group, group.NAME.*), are required\n");
        lp_params_ctx_destroy(&ctx);
        return 2;
    }
    /* with groups, engine.endpoint and sampler.endpoint are this host's own
     * engine-svc's and sampler-svc's (lmpipe up --only), not links */
    if (n_groups) o.engine_endpoint = o.sampler_endpoint = o.engine_key = o.sampler_key = NULL;
    lp_coord_params_t p = {0};
    p.tokenizer_endpoint = o.tokenizer_endpoint;
    p.tokenizer_key = o.tokenizer_key;
    p.groups = groups;
    p.n_groups = n_groups;
    p.engine_endpoint = o.engine_endpoint;
    p.sampler_endpoint = o.sampler_endpoint;
    p.engine_key = o.engine_key;
    p.sampler_key = o.sampler_key;
    p.no_shm = o.no_shm;
    p.max_seqs = (int)o.max_seqs;
    p.max_batch_tokens = (int)o.max_batch_tokens;
    p.prefill_chunk = (int)o.prefill_chunk;
    p.max_requests = (int)o.max_requests;
    p.max_queued_per_client = (int)o.max_queued_per_client;
    p.no_prefix_cache = o.no_prefix_cache;
    p.kv_blocks = (int)o.kv_blocks;
    p.drain_grace_ms = o.drain_grace_ms ? (int)o.drain_grace_ms : -1; /* 0: none */
    lp_coord_t *coord;
    if (lp_coord_new(&p, &coord)) {
        fprintf(stderr, "coordinator: %s\n", lp_error_msg());
        lp_params_ctx_destroy(&ctx);
        return 1;
    }
    int rc = lp_service_run_secure(&lp_coord_ops, coord, o.endpoint, &o.curve);
    if (rc) fprintf(stderr, "coordinator: %s\n", lp_error_msg());
    lp_coord_destroy(&coord);
    lp_params_ctx_destroy(&ctx);
    return rc ? 1 : 0;
}
