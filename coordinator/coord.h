/* coord.h - the coordinator: owns the generation requests.  It tokenizes
 * each prompt through tokenizer-svc, schedules engine steps (prefill chunks
 * bounded by max_batch_tokens plus one decode token per active request:
 * continuous batching), has sampler-svc pick each next token, checks the
 * stop conditions, and streams the text the sampler's decoder gives to the
 * client.
 *
 * It serves the client API on a ROUTER (through the service skeleton) and
 * holds one DEALER to each of the three services. */
#ifndef LP_COORD_H
#define LP_COORD_H

#include <stdbool.h>

#include "service.h"

typedef struct lp_coord_params {
    const char *tokenizer_endpoint;
    const char *engine_endpoint;
    const char *sampler_endpoint;
    /* The services' CURVE public keys (KEY values, curve.h) for tcp://
     * links; NULL: no CURVE (then ipc://, or allow_insecure_tcp). */
    const char *tokenizer_key, *engine_key, *sampler_key;
    bool no_shm;          /* rows inline even where the ring would work */
    int max_seqs;         /* 0: the engine's */
    int max_batch_tokens; /* 0: the engine's */
    int max_requests;     /* queued + active; 0: 1024 */
    int max_queued_per_client; /* one client's requests waiting for a slot; 0: max_requests / 4 */
} lp_coord_params_t;

typedef struct lp_coord lp_coord_t;

int lp_coord_new(const lp_coord_params_t *p, lp_coord_t **out);
void lp_coord_destroy(lp_coord_t **self_p);
extern const lp_service_ops_t lp_coord_ops;

#endif
