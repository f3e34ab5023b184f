/* samplers_test.c - each built-in sampler's exact output probabilities on
 * small hand-made distributions.  Expected values are worked out by hand
 * in the comments.  Every case runs twice where the sampler has two paths:
 * on a dense row and on an explicit list. */
#include "breakers.h"
#include "cands-impl.h"

#include "check.h"
#include "error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NMAX 4096
#define EPS 1e-5

static const float L1 = 0.0f; /* log(1) */

/* Apply the samplers (taking ownership) to logits[0..n) in the given form
 * and return the final probabilities per id in probs[0..n). */
static int run(lp_sampler_t **steps, int n_steps, const float *logits, int n, bool dense,
               double *probs)
{
    lp_cands_t c;
    lp_cands_init(&c);
    int rc;
    if (dense) {
        rc = lp_cands_set_row(&c, logits, n);
    } else {
        lp_token_data_t *d = malloc((size_t)n * sizeof(*d));
        for (int i = 0; i < n; i++) d[i] = (lp_token_data_t){i, logits[i], 0.0f};
        /* a list in scrambled order, to catch samplers that assume sorting */
        for (int i = n - 1; i > 0; i--) {
            int j = (i * 7 + 3) % (i + 1);
            lp_token_data_t t = d[i];
            d[i] = d[j];
            d[j] = t;
        }
        rc = lp_cands_set_list(&c, d, (size_t)n);
        free(d);
    }
    for (int s = 0; s < n_steps && !rc; s++) rc = lp_sampler_apply(steps[s], &c);
    for (int s = 0; s < n_steps; s++) lp_sampler_destroy(&steps[s]);
    for (int i = 0; i < n; i++) probs[i] = 0.0;
    if (!rc) rc = lp_cands_materialize(&c);
    if (!rc) {
        lp_cands_softmax(&c, false);
        for (size_t i = 0; i < c.arr.size; i++)
            if (c.arr.data[i].logit != -INFINITY) probs[c.arr.data[i].id] += c.arr.data[i].p;
    }
    lp_cands_free(&c);
    return rc;
}

static void expect(const char *what, bool dense, const double *got, const double *want, int n)
{
    for (int i = 0; i < n; i++)
        CHECK(!(fabs(got[i] - want[i]) > EPS), "%s (%s): id %d: got %.7f, want %.7f", what,
              dense ? "dense" : "list", i, got[i], want[i]);
}

/* The distribution p = (0.1, 0.2, 0.3, 0.4) as logits log p. */
static void base4(float *l)
{
    l[0] = logf(0.1f);
    l[1] = logf(0.2f);
    l[2] = logf(0.3f);
    l[3] = logf(0.4f);
}

typedef lp_sampler_t *(*make_fn)(void);

static void case4(const char *what, lp_sampler_t *(*make)(void), const double *want)
{
    float l[4];
    double got[4];
    base4(l);
    for (int d = 0; d < 2; d++) {
        lp_sampler_t *s = make();
        CHECK_RC(run(&s, 1, l, 4, d == 0, got), 0);
        expect(what, d == 0, got, want, 4);
    }
}

static lp_sampler_t *mk_temp_half(void) { return lp_sampler_temp_new(0.5f); }
static lp_sampler_t *mk_temp_zero(void) { return lp_sampler_temp_new(0.0f); }
static lp_sampler_t *mk_top_k2(void) { return lp_sampler_top_k_new(2); }
static lp_sampler_t *mk_top_k0(void) { return lp_sampler_top_k_new(0); }
static lp_sampler_t *mk_top_p05(void) { return lp_sampler_top_p_new(0.5f, 0); }
static lp_sampler_t *mk_top_p08(void) { return lp_sampler_top_p_new(0.8f, 0); }
static lp_sampler_t *mk_top_p01_keep3(void) { return lp_sampler_top_p_new(0.1f, 3); }
static lp_sampler_t *mk_min_p06(void) { return lp_sampler_min_p_new(0.6f, 0); }
static lp_sampler_t *mk_min_p045(void) { return lp_sampler_min_p_new(0.45f, 0); }
static lp_sampler_t *mk_typ045(void) { return lp_sampler_typical_new(0.45f, 0); }
static lp_sampler_t *mk_typ06(void) { return lp_sampler_typical_new(0.6f, 0); }

static lp_rng_t g_rng;
static lp_sampler_t *mk_xtc(void) { return lp_sampler_xtc_new(1.0f, 0.15f, 0, &g_rng); }
static lp_sampler_t *mk_xtc_keep4(void) { return lp_sampler_xtc_new(1.0f, 0.15f, 4, &g_rng); }

static void test_basic4(void)
{
    /* temperature 0.5: p^(1/0.5) = p^2 = .01 .04 .09 .16, sum .30 */
    const double temp[4] = {1 / 30.0, 4 / 30.0, 9 / 30.0, 16 / 30.0};
    case4("temp 0.5", mk_temp_half, temp);
    /* temperature 0: only the maximum survives */
    const double t0[4] = {0, 0, 0, 1};
    case4("temp 0", mk_temp_zero, t0);
    /* top-k 2: .3 and .4 renormalised: 3/7, 4/7 */
    const double k2[4] = {0, 0, 3 / 7.0, 4 / 7.0};
    case4("top-k 2", mk_top_k2, k2);
    const double all[4] = {0.1, 0.2, 0.3, 0.4};
    case4("top-k 0 (off)", mk_top_k0, all);
    /* top-p 0.5: .4 < .5, .4+.3 = .7 >= .5: keep {.4,.3} */
    case4("top-p 0.5", mk_top_p05, k2);
    /* top-p 0.8: .4+.3 = .7 < .8, +.2 = .9 >= .8: keep {.4,.3,.2} -> 2/9 3/9 4/9 */
    const double p08[4] = {0, 2 / 9.0, 3 / 9.0, 4 / 9.0};
    case4("top-p 0.8", mk_top_p08, p08);
    /* top-p 0.1 would keep {.4} alone; min_keep 3 keeps three */
    case4("top-p 0.1 min_keep 3", mk_top_p01_keep3, p08);
    /* min-p 0.6: keep p >= 0.6 * 0.4 = 0.24: {.3,.4} */
    case4("min-p 0.6", mk_min_p06, k2);
    /* min-p 0.45: keep p >= 0.18: {.2,.3,.4} */
    case4("min-p 0.45", mk_min_p045, p08);
    /* typical: H = -sum p ln p = .2302585 + .3218876 + .3611918 + .3665163
     * = 1.2798542.  |-ln p - H|: .1: 1.0227308, .2: 0.3295837, .3: 0.0758810,
     * .4: 0.3635634.  Ascending: .3, .2, .4, .1.  typical 0.45: .3 (cum .3),
     * .2 (cum .5 > .45): keep {.3,.2} -> 2/5, 3/5 */
    const double typ045[4] = {0, 2 / 5.0, 3 / 5.0, 0};
    case4("typical 0.45", mk_typ045, typ045);
    /* typical 0.6: .3, .2 (.5), .4 (.9 > .6): keep {.3,.2,.4} -> 2/9 3/9 4/9 */
    case4("typical 0.6", mk_typ06, p08);
    /* XTC probability 1, threshold 0.15: .2 .3 .4 are at or above it; all
     * but the least likely of them (.2) go: keep {.1,.2} -> 1/3, 2/3 */
    const double xtc[4] = {1 / 3.0, 2 / 3.0, 0, 0};
    case4("xtc 1/0.15", mk_xtc, xtc);
    /* the same with min_keep 4: removing two would leave 2 < 4, so nothing goes */
    case4("xtc min_keep 4", mk_xtc_keep4, all);
}

static void test_top_n_sigma(void)
{
    /* logits 0 1 2 3 10: mean 3.2, squared deviations 10.24 4.84 1.44 0.04
     * 46.24, sum 62.8, variance 12.56, sd 3.5440090.
     * n = 1: cut at 10 - 3.544 = 6.456: only 10 stays.
     * n = 2.5: cut at 10 - 8.860 = 1.140: 2, 3 and 10 stay, with
     * probabilities e^2, e^3, e^10 over their sum. */
    float l[5] = {0, 1, 2, 3, 10};
    double got[5];
    for (int d = 0; d < 2; d++) {
        lp_sampler_t *s = lp_sampler_top_n_sigma_new(1.0f);
        CHECK_RC(run(&s, 1, l, 5, d == 0, got), 0);
        const double w1[5] = {0, 0, 0, 0, 1};
        expect("top-n-sigma 1", d == 0, got, w1, 5);
        s = lp_sampler_top_n_sigma_new(2.5f);
        CHECK_RC(run(&s, 1, l, 5, d == 0, got), 0);
        double z = exp(2) + exp(3) + exp(10);
        const double w25[5] = {0, 0, exp(2) / z, exp(3) / z, exp(10) / z};
        expect("top-n-sigma 2.5", d == 0, got, w25, 5);
    }
}

static void test_penalties(void)
{
    /* logits 2, -1, 0.5, 1; history 0 0 1; repeat 2, frequency 0.5,
     * presence 0.25.  token 0 (count 2): 2/2 = 1, 1 - 2*0.5 - 0.25 = -0.25.
     * token 1 (count 1): -1*2 = -2, -2 - 0.5 - 0.25 = -2.75.  2, 3 unchanged. */
    float l[4] = {2, -1, 0.5f, 1};
    double got[4];
    double z = exp(-0.25) + exp(-2.75) + exp(0.5) + exp(1.0);
    const double want[4] = {exp(-0.25) / z, exp(-2.75) / z, exp(0.5) / z, exp(1.0) / z};
    for (int d = 0; d < 2; d++) {
        lp_sampler_t *s = lp_sampler_penalties_new(64, 2.0f, 0.5f, 0.25f);
        lp_sampler_accept(s, 0);
        lp_sampler_accept(s, 0);
        lp_sampler_accept(s, 1);
        CHECK_RC(run(&s, 1, l, 4, d == 0, got), 0);
        expect("penalties", d == 0, got, want, 4);
    }
    /* last_n 1: only the newest token (1) counts: token 0 untouched */
    {
        lp_sampler_t *s = lp_sampler_penalties_new(1, 2.0f, 0.5f, 0.25f);
        lp_sampler_accept(s, 0);
        lp_sampler_accept(s, 0);
        lp_sampler_accept(s, 1);
        CHECK_RC(run(&s, 1, l, 4, true, got), 0);
        double z2 = exp(2) + exp(-2.75) + exp(0.5) + exp(1.0);
        const double w[4] = {exp(2) / z2, exp(-2.75) / z2, exp(0.5) / z2, exp(1.0) / z2};
        expect("penalties last_n 1", true, got, w, 4);
    }
}

static void test_dry(void)
{
    /* history 0 1 2 0 1, logits all 0 over tokens 0..3.  The suffix "0 1"
     * also ends at position 1, followed by 2: emitting 2 would extend a
     * repeat of length 2.  multiplier 1, base 2, allowed_length 1: penalty
     * 1 * 2^(2-1) = 2 on token 2 only.  p = 1,1,e^-2,1 over 3 + e^-2. */
    float l[4] = {0, 0, 0, 0};
    double got[4];
    const int hist[5] = {0, 1, 2, 0, 1};
    double z = 3 + exp(-2.0);
    const double want[4] = {1 / z, 1 / z, exp(-2.0) / z, 1 / z};
    for (int d = 0; d < 2; d++) {
        lp_sampler_t *s = lp_sampler_dry_new(1.0f, 2.0f, 1, 64, NULL);
        for (int i = 0; i < 5; i++) lp_sampler_accept(s, hist[i]);
        CHECK_RC(run(&s, 1, l, 4, d == 0, got), 0);
        expect("dry", d == 0, got, want, 4);
    }
    /* allowed_length 2: exponent 0, penalty 1 */
    {
        lp_sampler_t *s = lp_sampler_dry_new(1.0f, 2.0f, 2, 64, NULL);
        for (int i = 0; i < 5; i++) lp_sampler_accept(s, hist[i]);
        CHECK_RC(run(&s, 1, l, 4, true, got), 0);
        double z2 = 3 + exp(-1.0);
        const double w[4] = {1 / z2, 1 / z2, exp(-1.0) / z2, 1 / z2};
        expect("dry allowed 2", true, got, w, 4);
    }
    /* a single-token sequence breaker (2) is never penalised */
    {
        lp_sampler_params_t p;
        lp_sampler_params_default(&p);
        p.n_breakers = 1;
        p.breaker_len[0] = 1;
        p.breakers[0][0] = 2;
        p.n_text_breakers = 0;
        lp_dry_breakers_t *t;
        CHECK_RC(lp_dry_breakers_build(NULL, &p, &t), 0);
        lp_sampler_t *s = lp_sampler_dry_new(1.0f, 2.0f, 1, 64, t);
        lp_dry_breakers_destroy(&t);
        for (int i = 0; i < 5; i++) lp_sampler_accept(s, hist[i]);
        CHECK_RC(run(&s, 1, l, 4, true, got), 0);
        const double w[4] = {0.25, 0.25, 0.25, 0.25};
        expect("dry breaker", true, got, w, 4);
    }
}

static void test_bias(void)
{
    /* logits 0 0 0 0; +ln 3 on token 1, -inf on token 3: 1/5, 3/5, 1/5, 0 */
    float l[4] = {L1, L1, L1, L1};
    double got[4];
    lp_logit_bias_t b[3] = {{1, logf(3.0f)}, {3, -INFINITY}, {99, 5.0f}};
    const double want[4] = {0.2, 0.6, 0.2, 0};
    for (int d = 0; d < 2; d++) {
        lp_sampler_t *s = lp_sampler_logit_bias_new(b, 3);
        CHECK_RC(run(&s, 1, l, 4, d == 0, got), 0);
        expect("logit bias", d == 0, got, want, 4);
    }
}

/* top-p and top-k on a longer row: the histogram, tie and heap paths. */
static void test_long_rows(void)
{
    /* 2000 tokens: odd IDs logit ln 3, even IDs logit 0.  Mass 1000*3 +
     * 1000*1 = 4000.  top-p 0.5 needs 2000: k*3 >= 2000 -> k = 667 of the
     * ln 3 tokens (all tied).  They stay at 1/667 each. */
    static float l[2000];
    static double got[2000];
    for (int i = 0; i < 2000; i++) l[i] = i % 2 ? logf(3.0f) : 0.0f;
    for (int d = 0; d < 2; d++) {
        lp_sampler_t *s = lp_sampler_top_p_new(0.5f, 0);
        CHECK_RC(run(&s, 1, l, 2000, d == 0, got), 0);
        int kept = 0, wrong = 0;
        for (int i = 0; i < 2000; i++) {
            if (got[i] > 0) kept++;
            if (got[i] > 0 && (i % 2 == 0 || fabs(got[i] - 1 / 667.0) > EPS)) wrong++;
        }
        CHECK(kept == 667);
        CHECK(wrong == 0);
        /* top-p 0.2995 needs 1198 of 4000: k*3 >= 1198 -> k = 400 (399.3), few
         * enough to become a list */
        s = lp_sampler_top_p_new(0.2995f, 0);
        CHECK_RC(run(&s, 1, l, 2000, d == 0, got), 0);
        kept = wrong = 0;
        for (int i = 0; i < 2000; i++) {
            if (got[i] > 0) kept++;
            if (got[i] > 0 && (i % 2 == 0 || fabs(got[i] - 1 / 400.0) > EPS)) wrong++;
        }
        if (kept != 400) fprintf(stderr, "top-p 0.2995 %s: kept %d\n", d ? "list" : "dense", kept);
        CHECK(kept == 400);
        CHECK(wrong == 0);
    }
    /* top-k 40 of 4096 distinct logits (a permutation): IDs of the 40
     * largest values, each value v_i = (i*1237) % 4096 / 100. Tokens with
     * the values 4095..4056 (/100) stay. */
    static float m[NMAX];
    for (int i = 0; i < NMAX; i++) m[i] = (float)((i * 1237) % NMAX) / 100.0f;
    static double g2[NMAX];
    lp_sampler_t *s = lp_sampler_top_k_new(40);
    CHECK_RC(run(&s, 1, m, NMAX, true, g2), 0);
    double z = 0;
    for (int v = NMAX - 40; v < NMAX; v++) z += exp(v / 100.0 - 40.95);
    int bad = 0, kept = 0;
    for (int i = 0; i < NMAX; i++) {
        int v = (i * 1237) % NMAX;
        double w = v >= NMAX - 40 ? exp(v / 100.0 - 40.95) / z : 0.0;
        if (fabs(g2[i] - w) > EPS) bad++;
        kept += g2[i] > 0;
    }
    CHECK(bad == 0);
    CHECK(kept == 40);
}

/* The block bounds the row load keeps: each is its block's maximum, top-k
 * with them equals top-k without, and greedy after a penalty that lowered
 * the maximum (the bounds no longer hold) still finds the new one. */
static void test_block_bounds(void)
{
    enum { N = 1000 }; /* 15 blocks of 64 and a tail of 40 */
    static float l[N];
    lp_rng_t r;
    lp_rng_seed(&r, 7);
    for (int i = 0; i < N; i++) l[i] = (float)lp_rng_uniform(&r) * 10.0f;
    l[517] = 20.0f; /* the maximum, in block 8 */
    l[990] = 19.0f; /* the runner-up, in the tail */
    l[3] = NAN;
    lp_cands_t c;
    lp_cands_init(&c);
    CHECK_RC(lp_cands_set_row(&c, l, N), 0);
    CHECK(c.row_fresh && c.row_max == 20.0f);
    int bad = 0;
    for (int b = 0; b < (N + 63) / 64; b++) {
        float m = -INFINITY;
        for (int i = b * 64; i < N && i < b * 64 + 64; i++) m = c.row[i] > m ? c.row[i] : m;
        bad += c.bmax[b] != m;
    }
    CHECK(bad == 0);
    CHECK(lp__cands_argmax(&c) == 517);
    static lp_token_data_t with[100], without[100];
    int ks[3] = {1, 40, 100};
    for (int j = 0; j < 3; j++) {
        size_t a = lp__row_top_k(c.row, N, ks[j], c.bmax, with);
        size_t b = lp__row_top_k(c.row, N, ks[j], NULL, without);
        CHECK(a == (size_t)ks[j] && b == a && !memcmp(with, without, a * sizeof(with[0])));
    }
    CHECK(with[0].id == 517 && with[1].id == 990);
    /* a penalty on 517 (repeat penalty 100: 20 -> 0.2) */
    lp_sampler_t *ch = lp_sampler_chain_new();
    CHECK_RC(lp_sampler_chain_add(ch, lp_sampler_penalties_new(8, 100.0f, 0.0f, 0.0f)), 0);
    CHECK_RC(lp_sampler_chain_add(ch, lp_sampler_greedy_new()), 0);
    lp_sampler_accept(ch, 517);
    CHECK_RC(lp__cands_keep_orig(&c), 0);
    CHECK_RC(lp_sampler_apply(ch, &c), 0);
    CHECK(!c.row_fresh && c.selected_id == 990);
    /* the row as loaded came through the change */
    const float *bm, *orig = lp__cands_orig(&c, &bm);
    CHECK(orig != NULL && bm == NULL && orig[517] == 20.0f && c.row[517] < 1.0f);
    lp_sampler_destroy(&ch);
    lp_cands_free(&c);
}

static void test_greedy_and_chain(void)
{
    lp_cands_t c;
    lp_cands_init(&c);
    float l[5] = {0.5f, 3.0f, NAN, 3.0f, -INFINITY};
    /* greedy takes the first maximum; NaN never wins */
    lp_sampler_t *g = lp_sampler_greedy_new();
    CHECK_RC(lp_cands_set_row(&c, l, 5), 0);
    CHECK_RC(lp_sampler_apply(g, &c), 0);
    CHECK(c.selected_id == 1);
    /* every candidate excluded: a clear error, not a token */
    float dead[3] = {-INFINITY, NAN, -INFINITY};
    CHECK_RC(lp_cands_set_row(&c, dead, 3), 0);
    CHECK_RC(lp_sampler_apply(g, &c), LP_ERR(ENOENT));
    lp_sampler_destroy(&g);
    /* a chain is a sampler: clone keeps the penalty history */
    lp_sampler_t *ch = lp_sampler_chain_new();
    CHECK_RC(lp_sampler_chain_add(ch, lp_sampler_penalties_new(8, 1.0f, 100.0f, 0.0f)), 0);
    CHECK_RC(lp_sampler_chain_add(ch, lp_sampler_greedy_new()), 0);
    CHECK(lp_sampler_chain_n(ch) == 2);
    CHECK(!strcmp(lp_sampler_name(ch), "chain"));
    lp_sampler_accept(ch, 1);
    lp_sampler_t *cl = lp_sampler_clone(ch);
    CHECK(cl != NULL);
    float r[4] = {0, 2, 1, 0};
    CHECK_RC(lp_cands_set_row(&c, r, 4), 0);
    CHECK_RC(lp_sampler_apply(cl, &c), 0);
    CHECK(c.selected_id == 2); /* token 1 penalised by 100 */
    lp_sampler_reset(cl);
    CHECK_RC(lp_cands_set_row(&c, r, 4), 0);
    CHECK_RC(lp_sampler_apply(cl, &c), 0);
    CHECK(c.selected_id == 1); /* history forgotten */
    lp_sampler_destroy(&cl);
    lp_sampler_destroy(&ch);
    lp_cands_free(&c);
}

static void test_mirostat_and_dynatemp(void)
{
    /* mirostat v1 on Zipf p ~ 1/i^2 (1, 1/4, 1/9, 1/16 over 205/144): the
     * estimate s_hat is exactly 2 (b_i = 2 t_i), eps = 1; tau 1.5 gives
     * mu 3 and k = (2^3 / (1 - 4^-1))^(1/2) = sqrt(10.67) = 3.27 -> 3: the
     * list left holds 1, 1/4, 1/9 over 49/36 = 36/49, 9/49, 4/49. */
    float z4[4] = {0.0f, logf(0.25f), logf(1 / 9.0f), logf(1 / 16.0f)};
    double got[4];
    const double m1[4] = {36 / 49.0, 9 / 49.0, 4 / 49.0, 0};
    for (int d = 0; d < 2; d++) {
        lp_sampler_t *s = lp_sampler_mirostat_new(4, 1.5f, 0.0f, 100, &g_rng);
        CHECK_RC(run(&s, 1, z4, 4, d == 0, got), 0);
        expect("mirostat v1", d == 0, got, m1, 4);
    }
    /* mirostat v2, tau 1 (mu 2): keep surprise -log2 p <= 2, p >= 1/4, of
     * (.1 .2 .3 .4): 3/7, 4/7 */
    float l[4];
    base4(l);
    const double m2[4] = {0, 0, 3 / 7.0, 4 / 7.0};
    for (int d = 0; d < 2; d++) {
        lp_sampler_t *s = lp_sampler_mirostat_v2_new(1.0f, 0.0f, &g_rng);
        CHECK_RC(run(&s, 1, l, 4, d == 0, got), 0);
        expect("mirostat v2", d == 0, got, m2, 4);
    }
    /* mu adapts: eta 1, tau 1: after a draw of surprise S, mu = 2 - (S - 1).
     * With every token but one masked, S = 0 and mu becomes 3: p >= 1/8
     * keeps .2 .3 .4 of p4 at the next step (2/9 3/9 4/9). */
    {
        lp_sampler_t *s = lp_sampler_mirostat_v2_new(1.0f, 1.0f, &g_rng);
        float one[4] = {-INFINITY, -INFINITY, 0.0f, -INFINITY};
        lp_cands_t c;
        lp_cands_init(&c);
        CHECK_RC(lp_cands_set_row(&c, one, 4), 0);
        CHECK_RC(lp_sampler_apply(s, &c), 0);
        CHECK(c.selected_id == 2);
        lp_cands_free(&c);
        const double m3[4] = {0, 2 / 9.0, 3 / 9.0, 4 / 9.0};
        CHECK_RC(run(&s, 1, l, 4, true, got), 0);
        expect("mirostat v2 mu update", true, got, m3, 4);
    }
    /* dynamic temperature: temp 1, range 0.5, exponent 1 on (.1 .2 .3 .4):
     * H = 1.2798542, max entropy ln 4 = 1.3862944, normalised 0.9232213;
     * T = 0.5 + (1.5 - 0.5) * 0.9232213 = 1.4232213; p^(1/T) renormalised. */
    double T = 0.5 + 1.0 * (1.2798542 / log(4.0));
    double zz = 0, w[4];
    const double p4[4] = {0.1, 0.2, 0.3, 0.4};
    for (int i = 0; i < 4; i++) zz += pow(p4[i], 1 / T);
    for (int i = 0; i < 4; i++) w[i] = pow(p4[i], 1 / T) / zz;
    for (int d = 0; d < 2; d++) {
        lp_sampler_t *s = lp_sampler_temp_ext_new(1.0f, 0.5f, 1.0f);
        CHECK_RC(run(&s, 1, l, 4, d == 0, got), 0);
        expect("dynamic temperature", d == 0, got, w, 4);
    }
}

int main(void)
{
    lp_rng_seed(&g_rng, 1);
    test_basic4();
    test_top_n_sigma();
    test_penalties();
    test_dry();
    test_bias();
    test_long_rows();
    test_greedy_and_chain();
    test_block_bounds();
    test_mirostat_and_dynatemp();
    return CHECK_DONE();
}
