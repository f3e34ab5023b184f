/* resume_test.c - a sequence reopened after a sampler restart goes on as if
 * nothing happened: N tokens from one sequence against k tokens, a new
 * sequence (a new store: the restarted process) given the prompt, those k
 * as generated tokens (lp_sampler_seq_resume) and mirostat's mu, then N - k
 * more.  Same tokens, for greedy, seeded temperature/top-k/top-p/min-p,
 * penalties and DRY, XTC, mirostat v1 and v2.  The rows depend on the
 * history, so one wrong token changes all that follow.  And the check
 * has teeth: a reopened sequence whose draws ignore the position (the
 * generated tokens given as history only) draws other tokens. */
#include "sampler.h"
#include "seq-json.h"

#include "check.h"
#include "error.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define NV 96 /* vocabulary */
#define N 40  /* tokens per run */

static const int32_t prompt[] = {1, 17, 42, 17, 5};
#define N_PROMPT (sizeof(prompt) / sizeof(prompt[0]))

/* The row at a step: a fixed shape plus a push from the last tokens, so
 * penalties and DRY have repeats to act on and a changed token changes
 * every later row. */
static void make_row(const int32_t *hist, size_t n_hist, float *row)
{
    int32_t a = hist[n_hist - 1], b = n_hist > 1 ? hist[n_hist - 2] : 0;
    for (int32_t i = 0; i < NV; i++)
        row[i] = 2.5f * sinf(0.37f * (float)i + 0.11f * (float)(a * 7 + b)) -
                 0.02f * (float)((i * 13 + a) % 29);
    row[(a * 5 + 3) % NV] += 2.0f;
    row[b] += 1.5f; /* repeats, for the penalties and DRY */
}

typedef struct run {
    int32_t tok[N];
    float mu[N];
    bool has_mu[N];
} run_t;

static lp_sampler_store_t *new_store(void)
{
    lp_sampler_store_t *st = NULL;
    if (lp_sampler_store_new(NULL, &st) || lp_sampler_store_set_vocab(st, NV - 4, NULL, 0)) {
        CHECK(0, "store: %s", lp_error_msg());
        lp_sampler_store_destroy(&st);
    }
    return st;
}

/* Sample tokens from..N-1 into r with seq, whose history holds the prompt
 * and r->tok[0..from). */
static void sample_on(lp_sampler_seq_t *seq, size_t from, run_t *r, const char *what)
{
    int32_t hist[N_PROMPT + N];
    memcpy(hist, prompt, sizeof(prompt));
    memcpy(hist + N_PROMPT, r->tok, from * sizeof(int32_t));
    for (size_t t = from; t < N; t++) {
        float row[NV];
        make_row(hist, N_PROMPT + t, row);
        lp_sampler_result_t res;
        if (lp_sampler_seq_sample(seq, row, NV, &res) || lp_sampler_seq_accept(seq, res.id)) {
            CHECK(0, "%s: token %zu: %s", what, t, lp_error_msg());
            return;
        }
        r->tok[t] = hist[N_PROMPT + t] = res.id;
        r->mu[t] = res.mu;
        r->has_mu[t] = res.has_mu;
    }
}

static lp_sampler_seq_t *open_seq(lp_sampler_store_t *st, const char *params)
{
    lp_sampler_seq_t *seq = NULL;
    if (lp_sampler_seq_new(st, params, strlen(params), &seq)) {
        CHECK(0, "%s: %s", params, lp_error_msg());
        return NULL;
    }
    for (size_t i = 0; i < N_PROMPT; i++) lp_sampler_seq_accept(seq, prompt[i]);
    return seq;
}

/* how: 0 = resume (position k), 1 = generated tokens as history only
 * (position 0), 2 = resume without mirostat's mu */
static void reopen(const char *params, const run_t *ref, size_t k, int how, run_t *out)
{
    lp_sampler_store_t *st = new_store();
    lp_sampler_seq_t *seq = st ? open_seq(st, params) : NULL;
    if (!seq) {
        lp_sampler_store_destroy(&st);
        return;
    }
    memcpy(out->tok, ref->tok, k * sizeof(int32_t));
    int rc = 0;
    if (how == 1) {
        for (size_t i = 0; i < k; i++) rc |= lp_sampler_seq_accept(seq, ref->tok[i]);
    } else {
        rc = lp_sampler_seq_resume(seq, ref->tok, k);
        CHECK(lp_sampler_seq_position(seq) == k, "%s: position %llu after resuming %zu tokens",
              params, (unsigned long long)lp_sampler_seq_position(seq), k);
        if (!rc && how == 0 && k > 0 && ref->has_mu[k - 1])
            rc = lp_sampler_seq_set_mu(seq, ref->mu[k - 1]);
    }
    CHECK(rc == 0, "%s: reopen at %zu: %s", params, k, lp_error_msg());
    if (!rc) sample_on(seq, k, out, params);
    lp_sampler_seq_destroy(&seq);
    lp_sampler_store_destroy(&st);
}

static size_t first_diff(const run_t *a, const run_t *b)
{
    for (size_t t = 0; t < N; t++)
        if (a->tok[t] != b->tok[t]) return t;
    return N;
}

static void check_params(const char *params, bool random, bool mirostat)
{
    lp_sampler_store_t *st = new_store();
    lp_sampler_seq_t *seq = st ? open_seq(st, params) : NULL;
    if (!seq) {
        lp_sampler_store_destroy(&st);
        return;
    }
    run_t ref = {0};
    sample_on(seq, 0, &ref, params);
    lp_sampler_seq_destroy(&seq);
    lp_sampler_store_destroy(&st);
    int distinct = 0;
    for (size_t t = 0; t < N; t++) {
        bool seen = false;
        for (size_t u = 0; u < t; u++) seen |= ref.tok[u] == ref.tok[t];
        distinct += !seen;
    }
    CHECK(distinct >= 4, "%s: only %d distinct tokens in %d: the test rows are too easy", params,
          distinct, N);
    CHECK(ref.has_mu[0] == mirostat, "%s: has_mu %d", params, ref.has_mu[0]);

    static const size_t ks[] = {0, 1, 2, 7, 20, N - 1};
    size_t ignored_differs = 0;
    for (size_t i = 0; i < sizeof(ks) / sizeof(ks[0]); i++) {
        size_t k = ks[i];
        run_t got = {0};
        reopen(params, &ref, k, 0, &got);
        size_t d = first_diff(&ref, &got);
        CHECK(d == N, "%s: reopened after %zu tokens: token %zu is %d, not %d", params, k, d,
              d < N ? got.tok[d] : -1, d < N ? ref.tok[d] : -1);
        for (size_t t = k; mirostat && t < N; t++)
            CHECK(got.mu[t] == ref.mu[t], "%s: reopened after %zu: mu at %zu is %g, not %g", params,
                  k, t, (double)got.mu[t], (double)ref.mu[t]);
        if (k > 0 && k < N - 1) {
            run_t bad = {0};
            reopen(params, &ref, k, 1, &bad);
            ignored_differs += first_diff(&ref, &bad) < N;
        }
    }
    /* the draws must depend on the position: a reopened sequence that
     * starts again at position 0 differs (greedy does not draw) */
    if (random)
        CHECK(ignored_differs > 0, "%s: reopening at position 0 gave the same tokens every time: "
              "the test cannot see a lost position", params);
    else
        CHECK(ignored_differs == 0, "%s: greedy depends on the position", params);
    /* and mirostat's mu matters: without it the run goes elsewhere */
    if (mirostat) {
        run_t nomu = {0};
        reopen(params, &ref, 20, 2, &nomu);
        CHECK(first_diff(&ref, &nomu) < N, "%s: mu made no difference to the tokens", params);
    }
}

static void check_refusals(void)
{
    lp_sampler_store_t *st = new_store();
    if (!st) return;
    lp_sampler_seq_t *seq = open_seq(st, "{\"seed\":1}");
    if (seq) {
        int32_t bad[] = {3, -2};
        CHECK(lp_sampler_seq_resume(seq, bad, 2) == LP_ERR(EINVAL) &&
                  strstr(lp_error_msg(), "generated token 1"),
              "a negative generated token is refused by index: %s", lp_error_msg());
        CHECK(lp_sampler_seq_position(seq) == 0, "a refused resume moved the position");
        CHECK(lp_sampler_seq_set_mu(seq, 1.0f) == LP_ERR(EINVAL) && strstr(lp_error_msg(), "mirostat"),
              "mu without a mirostat step is refused: %s", lp_error_msg());
    }
    lp_sampler_seq_destroy(&seq);
    seq = open_seq(st, "{\"seed\":1,\"mirostat\":2}");
    if (seq)
        CHECK(lp_sampler_seq_set_mu(seq, NAN) == LP_ERR(EINVAL) && strstr(lp_error_msg(), "finite"),
              "a NaN mu is refused: %s", lp_error_msg());
    lp_sampler_seq_destroy(&seq);
    lp_sampler_store_destroy(&st);
}

/* An unseeded session (seed -1) given a seed at open (SamplerOpen.random_seed,
 * lp_sampler_seq_set_random_seed) is reopened with the same one and goes on
 * as if nothing happened; an explicit seed is not replaced. */
static void check_random_seed(void)
{
    const char *params = "{\"seed\":-1,\"temperature\":1,\"top_k\":40}";
    run_t ref = {0}, got = {0}, other = {0};
    lp_sampler_store_t *st = new_store();
    lp_sampler_seq_t *seq = st ? open_seq(st, params) : NULL;
    if (seq) {
        lp_sampler_seq_set_random_seed(seq, 424242);
        CHECK(lp_sampler_seq_seed(seq) == 424242, "the session's seed is the one given");
        sample_on(seq, 0, &ref, params);
    }
    lp_sampler_seq_destroy(&seq);
    lp_sampler_store_destroy(&st);
    /* the restarted process: a new store, the same seed, resumed at 20 */
    st = new_store();
    seq = st ? open_seq(st, params) : NULL;
    if (seq) {
        lp_sampler_seq_set_random_seed(seq, 424242);
        memcpy(got.tok, ref.tok, 20 * sizeof(int32_t));
        CHECK(lp_sampler_seq_resume(seq, ref.tok, 20) == 0, "resume: %s", lp_error_msg());
        sample_on(seq, 20, &got, params);
        size_t d = first_diff(&ref, &got);
        CHECK(d == N, "unseeded, reopened with its seed after 20: token %zu differs", d);
    }
    lp_sampler_seq_destroy(&seq);
    /* another seed draws other tokens: the check above can fail */
    seq = st ? open_seq(st, params) : NULL;
    if (seq) {
        lp_sampler_seq_set_random_seed(seq, 424243);
        sample_on(seq, 0, &other, params);
        CHECK(first_diff(&ref, &other) < N, "seeds 424242 and 424243 drew the same %d tokens", N);
    }
    lp_sampler_seq_destroy(&seq);
    seq = st ? open_seq(st, "{\"seed\":11,\"temperature\":1}") : NULL;
    if (seq) {
        lp_sampler_seq_set_random_seed(seq, 424242);
        CHECK(lp_sampler_seq_seed(seq) == 11, "an explicit seed was replaced: %llu",
              (unsigned long long)lp_sampler_seq_seed(seq));
    }
    lp_sampler_seq_destroy(&seq);
    lp_sampler_store_destroy(&st);
}

int main(void)
{
    check_params("{\"temperature\":0}", false, false);
    check_params("{\"seed\":5,\"temperature\":0.9,\"top_k\":30,\"top_p\":0.9,\"min_p\":0.02}", true,
                 false);
    check_params("{\"seed\":6,\"temperature\":1.1,\"repeat_penalty\":1.3,\"repeat_last_n\":16,"
                 "\"frequency_penalty\":0.4,\"presence_penalty\":0.3,\"dry_multiplier\":0.8,"
                 "\"dry_allowed_length\":1,\"dry_sequence_breakers\":[[11]]}",
                 true, false);
    check_params("{\"seed\":7,\"temperature\":1,\"xtc_probability\":0.5,\"xtc_threshold\":0.05}",
                 true, false);
    check_params("{\"seed\":8,\"temperature\":1,\"mirostat\":1,\"mirostat_tau\":4,"
                 "\"mirostat_eta\":0.3}", true, true);
    check_params("{\"seed\":9,\"temperature\":1,\"mirostat\":2,\"mirostat_tau\":3,"
                 "\"mirostat_eta\":0.2}", true, true);
    check_refusals();
    check_random_seed();
    return CHECK_DONE();
}
