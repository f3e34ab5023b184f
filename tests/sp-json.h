/* sp-json.h - typed sampling parameters (SamplingParams) from llama.cpp-named
 * JSON, as a client writes them by hand, for the tests that talk to the
 * services directly; each is kept until sp_free_all(). */
#ifndef LP_TEST_SP_JSON_H
#define LP_TEST_SP_JSON_H

#include <stdio.h>

#include "error.h"
#include "sampling-wire.h"

static lp_sampling_pb_t *sp_kept[256];
static int n_sp_kept;

/* NULL (and a message on stderr) when the JSON is refused. */
static inline Lmpipe__SamplingParams *sp_json(const char *json)
{
    lp_sampling_pb_t *w = NULL;
    if (!json) return NULL;
    if (n_sp_kept >= 256 || lp_sampling_pb_from_json(json, &w) != 0) {
        fprintf(stderr, "sp_json %s: %s\n", json, n_sp_kept >= 256 ? "too many" : lp_error_msg());
        lp_sampling_pb_destroy(&w);
        return NULL;
    }
    sp_kept[n_sp_kept++] = w;
    return lp_sampling_pb_msg(w);
}

static inline void sp_free_all(void)
{
    for (int i = 0; i < n_sp_kept; i++) lp_sampling_pb_destroy(&sp_kept[i]);
    n_sp_kept = 0;
}

#endif
