/* gen-request.h - a request read through the request schema
 * (lib/request-schema.h) as the coordinator's GenerateRequests, one per
 * choice (prompt x n), for both edges: the same typed fields whatever door
 * a request came in by. */
#ifndef LP_GEN_REQUEST_H
#define LP_GEN_REQUEST_H

#include <stddef.h>

#include "frame.h"
#include "request-schema.h"
#include "sampling-wire.h"

typedef struct lp_gen_batch {
    Lmpipe__GenerateRequest *reqs; /* n_reqs, choice i of prompt p at p * rq->n + i */
    size_t n_reqs;
    int *prompt_idx;               /* each request's prompt */
    /* what the requests point into (besides the request's document) */
    ProtobufCBinaryData stops[LP_RS_MAX_STOPS];
    lp_sampling_pb_t **pbs;        /* one per choice (seed + i), or one shared */
    size_t n_pbs;
} lp_gen_batch_t;

/* Build the GenerateRequests of rq (a generation endpoint's) with `tenant`
 * (copied pointer: the caller keeps it alive while the batch lives).  With a
 * seed, choice i of each prompt uses seed + i, so that the choices differ and
 * each is reproducible.  LP_ERR(ENOMEM); lp_gen_batch_clear after either. */
int lp_gen_batch_build(const lp_request_t *rq, const char *tenant, lp_gen_batch_t *b);
void lp_gen_batch_clear(lp_gen_batch_t *b);

#endif
