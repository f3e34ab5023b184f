/* serve.h - engine-svc's request handling: the hello (vocabulary facts and
 * the shared-memory ring's name) and the batched step, whose logit rows go
 * into the ring or inline.  main.c builds it from flags and runs it in the
 * service skeleton (lib/service.h). */
#ifndef LP_ENGINE_SERVE_H
#define LP_ENGINE_SERVE_H

#include <stdbool.h>

#include "engine.h"
#include "service.h"

typedef struct lp_engine_svc_params {
    const char *model_path;
    lp_engine_params_t engine;
    bool no_shm;          /* rows always inline */
    const char *shm_name; /* NULL: a random name */
    int shm_slots;        /* 0: 2 * max_seqs */
    int ring_wait_ms;     /* how long a step waits for free slots; 0: 10000 */
} lp_engine_svc_params_t;

typedef struct lp_engine_svc lp_engine_svc_t;

int lp_engine_svc_new(const lp_engine_svc_params_t *p, lp_engine_svc_t **out);
void lp_engine_svc_destroy(lp_engine_svc_t **self_p);
/* The skeleton's callbacks; ctx is the lp_engine_svc_t. */
extern const lp_service_ops_t lp_engine_svc_ops;

#endif
