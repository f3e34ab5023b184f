/* fuzz-sampler.c - arbitrary bytes as sampling parameters and as a control
 * message: the parser must refuse or accept cleanly, and whatever it accepts
 * must build a chain that samples a fixed row without a crash, always
 * within the guarded vocabulary, and sampler-svc's pick-then-logprobs must
 * give the tokens and logprobs of one lp_sampler_seq_sample call. */
#include "sampler.h"
#include "seq-json.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define N 96

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static float row[N];
    static uint8_t mask[N];
    for (int i = 0; i < N; i++) {
        row[i] = (float)((i * 37) % 23) * 0.7f - 5.0f;
        mask[i] = i % 11 == 5;
    }
    row[7] = 1e30f; /* an excluded token with a huge logit */
    mask[7] = 1;
    lp_sampler_store_t *st;
    if (lp_sampler_store_new(NULL, &st)) abort();
    if (lp_sampler_store_set_vocab(st, N - 6, mask, N)) abort();
    char *reply = NULL;
    lp_sampler_store_control(st, (const char *)data, size, &reply);
    free(reply);
    lp_sampler_seq_t *seq, *split = NULL;
    if (lp_sampler_seq_new(st, (const char *)data, size, &seq) == 0) {
        /* sampler-svc's two calls (pick, then logprobs) on a twin with the
         * same seed must give what one call gives */
        if (lp_sampler_seq_new(st, (const char *)data, size, &split) == 0 &&
            lp_sampler_seq_seed(split) != lp_sampler_seq_seed(seq))
            lp_sampler_seq_destroy(&split);
        for (int t = 0; t < 12; t++) {
            lp_sampler_result_t r, r2;
            if (lp_sampler_seq_sample(seq, row, N, &r)) break;
            if (r.id < 0 || r.id >= N - 6 || mask[r.id]) abort(); /* the guard held */
            lp_sampler_seq_accept(seq, r.id);
            if (!split) continue;
            if (lp_sampler_seq_pick(split, row, N, &r2) || lp_sampler_seq_accept(split, r2.id) ||
                lp_sampler_seq_logprobs(split, &r2))
                abort();
            if (r2.id != r.id || r2.has_logprob != r.has_logprob || r2.n_top != r.n_top ||
                memcmp(&r2.logprob, &r.logprob, sizeof(float)))
                abort();
            for (int32_t k = 0; k < r.n_top; k++)
                if (r2.top[k].id != r.top[k].id || r2.top[k].logprob != r.top[k].logprob) abort();
        }
        lp_sampler_seq_destroy(&split);
        lp_sampler_seq_destroy(&seq);
    }
    lp_sampler_store_destroy(&st);
    return 0;
}
