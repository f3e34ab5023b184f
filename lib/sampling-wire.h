/* sampling-wire.h - sampling parameters on the wire: lp_sampler_params_t
 * (lib/sampling-params.h) to and from the SamplingParams message, field for
 * field, with `given` (1 << the field's number) for lp_sampler_params_t.set.
 * The edges write it; the coordinator and the sampler read it, so that none
 * of them parses request JSON. */
#ifndef LP_SAMPLING_WIRE_H
#define LP_SAMPLING_WIRE_H

#include "lmpipe.pb-c.h"
#include "sampling-params.h"

/* A SamplingParams message and the storage its repeated fields point into. */
typedef struct lp_sampling_pb lp_sampling_pb_t;

/* The given fields of p as a message (only those in p->set).  *out (caller
 * destroys) holds the message; lp_sampling_pb_msg() borrows it. */
int lp_sampling_pb_new(const lp_sampler_params_t *p, lp_sampling_pb_t **out);
Lmpipe__SamplingParams *lp_sampling_pb_msg(lp_sampling_pb_t *w);
void lp_sampling_pb_destroy(lp_sampling_pb_t **self_p);

/* The message of sampling fields given as a JSON object with llama.cpp's
 * names (strict: other keys are refused), for clients and tests that write
 * them by hand; the edges read requests through lib/request-schema.h. */
int lp_sampling_pb_from_json(const char *json, lp_sampling_pb_t **out);

/* Lay the message's given fields over *p (its other fields keep their
 * values) and validate the result; LP_ERR(EINVAL) naming the field, as
 * lp_sampler_params_validate.  A set constraint is refused (not supported
 * by this sampler yet). */
int lp_sampling_pb_read(const Lmpipe__SamplingParams *m, lp_sampler_params_t *p);

#endif
