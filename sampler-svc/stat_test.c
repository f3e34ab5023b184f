/* stat_test.c - sampled frequencies against the expected distribution
 * (chi-square at a fixed seed, critical value at p = 0.001) for
 * temperature, top-k, top-p, min-p, XTC and mirostat, through the public
 * sequence API, on small rows and on a full 151936-token row (the dense
 * paths).  Also: same seed, same tokens; logprobs. */
#include "sampler.h"
#include "seq-json.h"

#include "check.h"
#include "error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DRAWS 20000
#define BIG 151936

/* chi-square critical values at p = 0.001 for 1..10 degrees of freedom */
static const double chi2_crit[11] = {0, 10.83, 13.82, 16.27, 18.47, 20.52,
                                     22.46, 24.32, 26.12, 27.88, 29.59};

static lp_sampler_store_t *g_st;

/* Draw DRAWS tokens from `row` with `params`; compare with want[0..k) over
 * ids[0..k) (every other id must never be drawn). */
static void chi2n(const char *what, const char *params, const float *row, int n, const int *ids,
                  const double *want, int k, int draws)
{
    lp_sampler_seq_t *seq;
    int rc = lp_sampler_seq_new(g_st, params, strlen(params), &seq);
    CHECK_RC(rc, 0);
    if (rc) return;
    static long counts[BIG];
    memset(counts, 0, sizeof(long) * (size_t)n);
    for (int d = 0; d < draws; d++) {
        lp_sampler_result_t r;
        int err = lp_sampler_seq_sample(seq, row, n, &r);
        CHECK(err == 0, "%s: %s", what, lp_error_msg());
        if (err) break;
        counts[r.id]++;
    }
    lp_sampler_seq_destroy(&seq);
    double x2 = 0;
    long seen = 0;
    int df = -1;
    for (int j = 0; j < k; j++) {
        seen += counts[ids[j]];
        if (want[j] == 0) {
            CHECK(!counts[ids[j]], "%s: id %d drawn %ld times, expected never", what, ids[j],
                  counts[ids[j]]);
            continue;
        }
        double e = want[j] * draws;
        x2 += (counts[ids[j]] - e) * (counts[ids[j]] - e) / e;
        df++;
    }
    CHECK(seen == draws, "%s: %ld draws outside the expected ids", what, draws - seen);
    CHECK(!(df >= 1 && x2 > chi2_crit[df]), "%s: chi-square %.2f > %.2f (df %d)", what, x2,
          chi2_crit[df], df);
}

static void chi2(const char *what, const char *params, const float *row, int n, const int *ids,
                 const double *want, int k)
{
    /* a full row costs more per draw: fewer draws there */
    chi2n(what, params, row, n, ids, want, k, n > 10000 ? DRAWS / 4 : DRAWS);
}

static const int ID4[4] = {0, 1, 2, 3};

static void small_rows(void)
{
    float p4[4] = {logf(0.1f), logf(0.2f), logf(0.3f), logf(0.4f)};
    /* temperature 0.5: p^2 / sum p^2 = 1 4 9 16 / 30 */
    const double t05[4] = {1 / 30.0, 4 / 30.0, 9 / 30.0, 16 / 30.0};
    chi2("temperature 0.5", "{\"seed\":11,\"temperature\":0.5,\"samplers\":[\"temperature\"]}", p4,
         4, ID4, t05, 4);
    /* temperature 2: sqrt p / sum sqrt p */
    double z = sqrt(0.1) + sqrt(0.2) + sqrt(0.3) + sqrt(0.4);
    const double t2[4] = {sqrt(0.1) / z, sqrt(0.2) / z, sqrt(0.3) / z, sqrt(0.4) / z};
    chi2("temperature 2", "{\"seed\":12,\"temperature\":2,\"samplers\":[\"temperature\"]}", p4, 4,
         ID4, t2, 4);
    /* top-k 2: 3/7 4/7 */
    const double k2[4] = {0, 0, 3 / 7.0, 4 / 7.0};
    chi2("top-k 2", "{\"seed\":13,\"temperature\":1,\"top_k\":2,\"samplers\":[\"top_k\"]}", p4, 4,
         ID4, k2, 4);
    /* top-p 0.8: .4+.3+.2 = .9 >= .8: 2/9 3/9 4/9 */
    const double p08[4] = {0, 2 / 9.0, 3 / 9.0, 4 / 9.0};
    chi2("top-p 0.8", "{\"seed\":14,\"temperature\":1,\"top_p\":0.8,\"samplers\":[\"top_p\"]}", p4,
         4, ID4, p08, 4);
    /* min-p 0.45: p >= 0.18: 2/9 3/9 4/9 */
    chi2("min-p 0.45", "{\"seed\":15,\"temperature\":1,\"min_p\":0.45,\"samplers\":[\"min_p\"]}",
         p4, 4, ID4, p08, 4);
    /* XTC with probability 0.5, threshold 0.15: half the time {.1,.2} -> 1/3 2/3 */
    const double xtc[4] = {0.05 + 1 / 6.0, 0.1 + 1 / 3.0, 0.15, 0.2};
    chi2("xtc 0.5/0.15",
         "{\"seed\":16,\"temperature\":1,\"xtc_probability\":0.5,\"xtc_threshold\":0.15,"
         "\"samplers\":[\"xtc\"]}",
         p4, 4, ID4, xtc, 4);
    /* mirostat v2, tau 1 (mu 2), eta 0: keep -log2 p <= 2, i.e. p >= .25: 3/7 4/7 */
    chi2("mirostat v2", "{\"seed\":17,\"temperature\":1,\"mirostat\":2,\"mirostat_tau\":1,"
                        "\"mirostat_eta\":0}", p4, 4, ID4, k2, 4);
    /* mirostat v1 on Zipf p ~ 1/i^2 (i = 1..4): s_hat = 2 exactly, eps = 1;
     * tau 1.5 -> mu 3: k = (1 * 2^3 / (1 - 4^-1))^(1/2) = sqrt(10.67) = 3.27 -> 3;
     * the top 3 renormalised: 1, 1/4, 1/9 over 49/36 = 36/49 9/49 4/49 */
    float zipf[4] = {0.0f, logf(0.25f), logf(1 / 9.0f), logf(1 / 16.0f)};
    const double m1[4] = {36 / 49.0, 9 / 49.0, 4 / 49.0, 0};
    chi2("mirostat v1", "{\"seed\":18,\"temperature\":1,\"mirostat\":1,\"mirostat_tau\":1.5,"
                        "\"mirostat_eta\":0}", zipf, 4, ID4, m1, 4);
    /* the default chain from llama.cpp with temperature 1 on p4: top-k 40,
     * top-p .95 (keeps all: .4+.3+.2 = .9 < .95), min-p .05 (all >= .02) */
    const double all[4] = {0.1, 0.2, 0.3, 0.4};
    chi2("default chain, temperature 1", "{\"seed\":19,\"temperature\":1}", p4, 4, ID4, all, 4);
}

static void big_row(void)
{
    /* 151936 tokens: eight with probabilities .3 .25 .15 .1 .08 .06 .04 .02
     * scattered over the row, everything else 40 nats below (total mass
     * ~1e-12, never drawn at these draw counts). */
    static float row[BIG];
    for (int i = 0; i < BIG; i++) row[i] = logf(0.3f) - 40.0f;
    const double p8[8] = {.3, .25, .15, .1, .08, .06, .04, .02};
    const int ids[8] = {151935, 7, 100000, 42, 65536, 3, 120000, 99};
    for (int j = 0; j < 8; j++) row[ids[j]] = logf((float)p8[j]);
    /* top-p 0.95: cumulative .3 .55 .70 .80 .88 .94 .98: the first seven, / .98 */
    double w[8];
    for (int j = 0; j < 8; j++) w[j] = j < 7 ? p8[j] / 0.98 : 0;
    chi2("top-p 0.95, full row", "{\"seed\":21,\"temperature\":1,\"top_p\":0.95,\"samplers\":[\"top_p\"]}",
         row, BIG, ids, w, 8);
    /* top-k 3 then temperature 0.5: .3^2 .25^2 .15^2 / sum */
    double z = .09 + .0625 + .0225;
    const double k3[8] = {.09 / z, .0625 / z, .0225 / z, 0, 0, 0, 0, 0};
    chi2("top-k 3 + temperature 0.5, full row",
         "{\"seed\":22,\"temperature\":0.5,\"top_k\":3,\"samplers\":[\"top_k\",\"temperature\"]}",
         row, BIG, ids, k3, 8);
    /* min-p 0.3: p >= .09: .3 .25 .15 .1 over .8 */
    const double mp[8] = {.3 / .8, .25 / .8, .15 / .8, .1 / .8, 0, 0, 0, 0};
    chi2("min-p 0.3, full row", "{\"seed\":23,\"temperature\":1,\"min_p\":0.3,\"samplers\":[\"min_p\"]}",
         row, BIG, ids, mp, 8);
    /* temperature 1 alone: the row itself */
    chi2("temperature 1, full row", "{\"seed\":24,\"temperature\":1,\"samplers\":[\"temperature\"]}",
         row, BIG, ids, p8, 8);
}

static void same_seed_and_logprobs(void)
{
    static float row[1000];
    for (int i = 0; i < 1000; i++) row[i] = (float)((i * 37) % 101) / 20.0f;
    const char *params = "{\"seed\":777,\"temperature\":1.2,\"top_k\":0,\"top_p\":0.99,"
                         "\"repeat_penalty\":1.3}";
    int32_t a[200], b[200], c[200];
    for (int run = 0; run < 3; run++) {
        lp_sampler_seq_t *seq;
        const char *p = run < 2 ? params
                                : "{\"seed\":778,\"temperature\":1.2,\"top_k\":0,\"top_p\":0.99,"
                                  "\"repeat_penalty\":1.3}";
        CHECK_RC(lp_sampler_seq_new(g_st, p, strlen(p), &seq), 0);
        int32_t *out = run == 0 ? a : run == 1 ? b : c;
        for (int t = 0; t < 200; t++) {
            lp_sampler_result_t r;
            CHECK_RC(lp_sampler_seq_sample(seq, row, 1000, &r), 0);
            out[t] = r.id;
            lp_sampler_seq_accept(seq, r.id);
        }
        CHECK(lp_sampler_seq_seed(seq) == (run < 2 ? 777u : 778u));
        lp_sampler_seq_destroy(&seq);
    }
    CHECK(!memcmp(a, b, sizeof(a)));
    CHECK(memcmp(a, c, sizeof(a)) != 0);

    /* logprob of the chosen token and the top-n: log-softmax of the row */
    float p4[4] = {logf(0.1f), logf(0.2f), logf(0.3f), logf(0.4f)};
    lp_sampler_seq_t *seq;
    const char *pp = "{\"seed\":5,\"temperature\":0,\"n_probs\":3}";
    CHECK_RC(lp_sampler_seq_new(g_st, pp, strlen(pp), &seq), 0);
    lp_sampler_result_t r;
    CHECK_RC(lp_sampler_seq_sample(seq, p4, 4, &r), 0);
    CHECK(r.id == 3 && fabsf(r.logprob - logf(0.4f)) < 1e-5f);
    CHECK(r.n_top == 3 && r.top[0].id == 3 && r.top[1].id == 2 && r.top[2].id == 1);
    CHECK(fabsf(r.top[1].logprob - logf(0.3f)) < 1e-5f && fabsf(r.top[2].logprob - logf(0.2f)) < 1e-5f);
    CHECK(r.version == 1);
    lp_sampler_seq_destroy(&seq);
}

int main(void)
{
    CHECK_RC(lp_sampler_store_new(NULL, &g_st), 0);
    small_rows();
    big_row();
    same_seed_and_logprobs();
    lp_sampler_store_destroy(&g_st);
    return CHECK_DONE();
}
