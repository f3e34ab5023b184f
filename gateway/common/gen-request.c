/* gen-request.c - GenerateRequests from a schema-read request (see
 * gen-request.h). */
#include "gen-request.h"

#include "error.h"

#include <stdlib.h>
#include <string.h>

int lp_gen_batch_build(const lp_request_t *rq, const char *tenant, lp_gen_batch_t *b)
{
    memset(b, 0, sizeof(*b));
    size_t n_prompts = rq->chat_json ? 1 : rq->n_prompts;
    size_t n = n_prompts * (size_t)rq->n;
    if (!n) return lp_error_set(LP_ERR(EINVAL), "no prompt");
    b->reqs = calloc(n, sizeof(*b->reqs));
    b->prompt_idx = calloc(n, sizeof(int));
    if (!b->reqs || !b->prompt_idx) return LP_ERR(ENOMEM);
    b->n_reqs = n;
    for (size_t i = 0; i < rq->n_stops; i++) {
        b->stops[i].data = (uint8_t *)rq->stops[i];
        b->stops[i].len = rq->stop_lens[i];
    }
    /* sampling: none given keeps the strategy; a seed differs per choice */
    bool seeded = (rq->sp.set & (1ull << LP_SP_SEED)) && rq->sp.seed >= 0 && rq->n > 1;
    if (rq->sp.set) {
        b->n_pbs = seeded ? (size_t)rq->n : 1;
        if (!(b->pbs = calloc(b->n_pbs, sizeof(*b->pbs)))) return LP_ERR(ENOMEM);
        lp_sampler_params_t *sp = malloc(sizeof(*sp));
        if (!sp) return LP_ERR(ENOMEM);
        memcpy(sp, &rq->sp, sizeof(*sp));
        int rc = 0;
        for (size_t i = 0; !rc && i < b->n_pbs; i++) {
            sp->seed = rq->sp.seed + (int64_t)i;
            rc = lp_sampling_pb_new(sp, &b->pbs[i]);
        }
        free(sp);
        if (rc) return rc;
    }
    for (size_t i = 0; i < n; i++) {
        size_t pi = i / (size_t)rq->n, ci = i % (size_t)rq->n;
        Lmpipe__GenerateRequest *q = &b->reqs[i];
        lmpipe__generate_request__init(q);
        b->prompt_idx[i] = (int)pi;
        q->n_predict = rq->n_predict;
        q->stop = rq->n_stops ? b->stops : NULL;
        q->n_stop = rq->n_stops;
        q->ignore_eos = rq->ignore_eos;
        q->deadline_ms = rq->deadline_ms;
        q->t_max_predict_ms = rq->t_max_predict_ms;
        if (b->n_pbs) q->sampling = lp_sampling_pb_msg(b->pbs[b->n_pbs > 1 ? ci : 0]);
        if (tenant) {
            q->tenant.data = (uint8_t *)tenant;
            q->tenant.len = strlen(tenant);
        }
        if (rq->chat_json) {
            q->chat_json = rq->chat_json; /* passed on as it is, to the tokenizer's template */
            if (rq->chat_template) q->chat_template = (char *)rq->chat_template;
        } else if (rq->prompts[pi].ids) {
            q->prompt_ids = rq->prompts[pi].ids;
            q->n_prompt_ids = rq->prompts[pi].n_ids;
        } else {
            q->prompt.data = (uint8_t *)rq->prompts[pi].text;
            q->prompt.len = rq->prompts[pi].len;
        }
    }
    return 0;
}

void lp_gen_batch_clear(lp_gen_batch_t *b)
{
    for (size_t i = 0; b->pbs && i < b->n_pbs; i++) lp_sampling_pb_destroy(&b->pbs[i]);
    free(b->pbs);
    free(b->reqs);
    free(b->prompt_idx);
    memset(b, 0, sizeof(*b));
}
