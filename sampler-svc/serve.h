/* serve.h - sampler-svc's request handling: sampling sessions (one per
 * generation request, holding its parameters, RNG and history) and batches
 * of rows to sample, read in place from the engine's shared-memory ring or
 * from an inline raw frame. */
#ifndef LP_SAMPLER_SERVE_H
#define LP_SAMPLER_SERVE_H

#include "service.h"

typedef struct lp_sampler_svc_params {
    const char *model_path;   /* the vocabulary guard: real tokens and the mask */
    const char *default_json; /* the service default strategy; may be NULL */
    bool no_shm;              /* refuse the ring: rows must come inline */
    const char *plugin_dir;   /* the only folder plugins load from; NULL: no loads */
    const char *state_file;   /* the strategy store is saved here and read back; NULL: none */
    int plugin_timeout_ms;    /* a plugin call longer than this restarts the service; 0: no watchdog */
} lp_sampler_svc_params_t;

typedef struct lp_sampler_svc lp_sampler_svc_t;

int lp_sampler_svc_new(const lp_sampler_svc_params_t *p, lp_sampler_svc_t **out);
void lp_sampler_svc_destroy(lp_sampler_svc_t **self_p);
extern const lp_service_ops_t lp_sampler_svc_ops;

#endif
