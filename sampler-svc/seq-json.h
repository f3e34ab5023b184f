/* seq-json.h - a sequence from sampling parameters given as JSON
 * (llama.cpp's /completion names), for the unit tests, benchmarks and
 * in-process tools.  sampler-svc itself takes typed parameters
 * (SamplerOpen.params, lib/sampling-wire.h) and parses no request JSON. */
#ifndef LP_SAMPLER_SEQ_JSON_H
#define LP_SAMPLER_SEQ_JSON_H

#include <stdlib.h>

#include "error.h"
#include "sampler.h"

/* A sequence with these parameters (`json` may be NULL; non-strict: keys
 * that are not sampling parameters are skipped).  The store is borrowed and
 * must outlive the sequence. */
static inline int lp_sampler_seq_new(lp_sampler_store_t *st, const char *json, size_t len, lp_sampler_seq_t **out)
{
    *out = NULL;
    lp_sampler_params_t *req = (lp_sampler_params_t *)malloc(sizeof(*req));
    if (!req) return lp_error_set(LP_ERR(ENOMEM), "sampler: out of memory");
    lp_sampler_params_default(req);
    int rc = json && len ? lp_sampler_params_parse(json, len, 0, req) : 0;
    if (!rc) rc = lp_sampler_seq_new_params(st, req, out);
    free(req);
    return rc;
}

#endif
