/* allowed_test.c - a constraint's bitset on a sequence's draws
 * (lp_sampler_seq_set_allowed): the drawn token is always one the bits
 * allow, for greedy, top-k/top-p/min-p with temperature, typical-p and
 * mirostat, over a row of 300 logits and a bitset of 280 ids (the ids past
 * it, as a grammar's vocabulary leaves a padded row's, are never drawn
 * even with the largest logit); the
 * logprob is that of the constrained row (its allowed tokens' softmax sums
 * to one); bits that leave nothing finite are LP_ERR(ENOENT), never a NaN;
 * the bits count for one draw only, and the caller's row is not written. */
#include "sampler.h"
#include "seq-json.h"

#include "check.h"
#include "error.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define NV 300     /* the row */
#define NREAL 280  /* the bitset's length: ids past it are padding */
#define WORDS ((NREAL + 63) / 64)

static const char *const params[] = {
    "{\"temperature\":0}",
    "{\"seed\":3,\"temperature\":1,\"top_k\":40,\"top_p\":0.9,\"min_p\":0.01,\"n_probs\":5}",
    "{\"seed\":4,\"temperature\":1.2,\"typical_p\":0.8}",
    "{\"seed\":5,\"temperature\":1,\"mirostat\":2,\"mirostat_tau\":3,\"mirostat_eta\":0.2}",
    "{\"seed\":6,\"temperature\":1,\"top_k\":0,\"top_p\":1,\"min_p\":0,\"n_probs\":3}",
};

static bool allowed(const uint64_t *bits, int32_t id)
{
    return id >= 0 && id < NREAL && ((bits[id / 64] >> (id % 64)) & 1);
}

int main(void)
{
    lp_sampler_store_t *st = NULL;
    if (lp_sampler_store_new(NULL, &st) || lp_sampler_store_set_vocab(st, NV, NULL, 0)) {
        fprintf(stderr, "store: %s\n", lp_error_msg());
        return 1;
    }
    float row[NV], copy[NV];
    uint64_t bits[WORDS];
    int n_draws = 0;
    for (size_t p = 0; p < sizeof(params) / sizeof(params[0]); p++) {
        lp_sampler_seq_t *seq = NULL;
        if (lp_sampler_seq_new(st, params[p], strlen(params[p]), &seq)) {
            CHECK(0, "%s: %s", params[p], lp_error_msg());
            continue;
        }
        for (int t = 0; t < 200; t++) {
            for (int32_t i = 0; i < NV; i++) row[i] = 3.0f * sinf(0.7f * (float)i + 0.3f * (float)t);
            row[NV - 1] = 50.0f; /* a padding id with the largest logit */
            row[(t * 37) % NREAL] = 40.0f; /* and a real one, allowed or not */
            /* masks of every shape: one token, a handful, most, a whole block */
            memset(bits, 0, sizeof(bits));
            int shape = t % 4;
            for (int32_t i = 0; i < NREAL; i++) {
                bool on = shape == 0 ? i == (t * 11) % NREAL
                        : shape == 1 ? (i * 7 + t) % 53 == 0
                        : shape == 2 ? (i + t) % 13 != 0
                        : i / 64 == t % WORDS;
                if (on) bits[i / 64] |= 1ull << (i % 64);
            }
            memcpy(copy, row, sizeof(row));
            lp_sampler_result_t r;
            lp_sampler_seq_set_allowed(seq, bits, NREAL);
            int rc = lp_sampler_seq_sample(seq, row, NV, &r);
            CHECK(!rc, "%s step %d: %s", params[p], t, lp_error_msg());
            if (rc) break;
            n_draws++;
            CHECK(allowed(bits, r.id), "%s step %d (shape %d): drew %d, not allowed", params[p], t, shape, r.id);
            CHECK(!memcmp(copy, row, sizeof(row)), "%s: the caller's row was written", params[p]);
            if (r.has_logprob) {
                double sum = 0;
                for (int32_t k = 0; k < r.n_top; k++)
                    CHECK(allowed(bits, r.top[k].id) && isfinite(r.top[k].logprob),
                          "%s: alternative %d is %d (logprob %g)", params[p], k, r.top[k].id, (double)r.top[k].logprob);
                /* the constrained row's softmax: the allowed tokens' probabilities sum to one */
                float mx = -INFINITY;
                for (int32_t i = 0; i < NREAL; i++)
                    if (allowed(bits, i) && row[i] > mx) mx = row[i];
                for (int32_t i = 0; i < NREAL; i++)
                    if (allowed(bits, i)) sum += exp((double)row[i] - mx);
                double want = (double)row[r.id] - mx - log(sum);
                CHECK(fabs((double)r.logprob - want) < 1e-4, "%s step %d: logprob %g, the constrained row's %g",
                      params[p], t, (double)r.logprob, want);
            }
            lp_sampler_seq_accept(seq, r.id);
            /* the bits were for that draw only: greedy takes the largest logit next */
            rc = lp_sampler_seq_pick(seq, row, NV, &r);
            CHECK(!rc && r.id >= 0 && r.id < NV && (p != 0 || r.id == NV - 1), "%s: unconstrained draw %d (%s)",
                  params[p], r.id, rc ? lp_error_msg() : "");
        }
        /* nothing left: an error, not a NaN */
        memset(bits, 0, sizeof(bits));
        bits[0] = 1ull << 5;
        for (int32_t i = 0; i < NV; i++) row[i] = 1.0f;
        row[5] = -INFINITY;
        lp_sampler_result_t r;
        lp_sampler_seq_set_allowed(seq, bits, NREAL);
        int rc = lp_sampler_seq_sample(seq, row, NV, &r);
        CHECK(rc == LP_ERR(ENOENT), "%s: an empty constrained row gave rc %d, id %d", params[p], rc, r.id);
        lp_sampler_seq_destroy(&seq);
    }
    printf("%d constrained draws over %zu strategies, each allowed\n", n_draws, sizeof(params) / sizeof(params[0]));
    lp_sampler_store_destroy(&st);
    return CHECK_DONE();
}
