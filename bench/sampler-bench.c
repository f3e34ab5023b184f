/* sampler-bench.c - time one row of 151936 logits through the sampler on
 * one thread: a typical chain (repetition penalty, top-k 40, top-p 0.95,
 * temperature 0.8), top-p 0.95 alone on a flat distribution, and, for
 * scale, a full sort of the row.  Prints the median per row. */
#include "sampler.h"
#include "seq-json.h"

#include "error.h"
#include "rng.h"
#include "sysinfo.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_VOCAB 151936

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cmp_f_desc(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* Normal(0, sd) logits from a fixed generator (Box-Muller). */
static void fill_normal(float *row, int n, double sd, uint64_t seed)
{
    lp_rng_t r;
    lp_rng_seed(&r, seed);
    for (int i = 0; i < n; i += 2) {
        double u1 = lp_rng_uniform(&r), u2 = lp_rng_uniform(&r);
        if (u1 < 1e-300) u1 = 1e-300;
        double m = sqrt(-2.0 * log(u1));
        row[i] = (float)(sd * m * cos(2 * M_PI * u2));
        if (i + 1 < n) row[i + 1] = (float)(sd * m * sin(2 * M_PI * u2));
    }
}

/* pick: time lp_sampler_seq_pick alone (what sampler-svc does before it
 * hands the token back), its logprobs taken after the clock stops. */
static double time_chain_mode(const char *label, const char *params, const float *row, int reps,
                              const int32_t *history, int n_history, bool pick)
{
    lp_sampler_store_t *st;
    lp_sampler_seq_t *seq;
    if (lp_sampler_store_new(NULL, &st) ||
        lp_sampler_seq_new(st, params, strlen(params), &seq)) {
        fprintf(stderr, "%s: %s\n", label, lp_error_msg());
        exit(1);
    }
    for (int i = 0; i < n_history; i++) lp_sampler_seq_accept(seq, history[i]);
    double *t = malloc((size_t)reps * sizeof(double));
    lp_sampler_result_t res;
    for (int i = 0; i < 5; i++) lp_sampler_seq_sample(seq, row, N_VOCAB, &res); /* warm */
    for (int i = 0; i < reps; i++) {
        double t0 = lp_now_ms();
        int rc = pick ? lp_sampler_seq_pick(seq, row, N_VOCAB, &res)
                      : lp_sampler_seq_sample(seq, row, N_VOCAB, &res);
        t[i] = lp_now_ms() - t0;
        if (!rc && pick) rc = lp_sampler_seq_logprobs(seq, &res);
        if (rc) {
            fprintf(stderr, "%s: %s\n", label, lp_error_msg());
            exit(1);
        }
    }
    qsort(t, (size_t)reps, sizeof(double), cmp_d);
    double med = t[reps / 2];
    printf("%-58s median %.4f ms  (min %.4f, p90 %.4f)\n", label, med, t[0], t[reps * 9 / 10]);
    free(t);
    lp_sampler_seq_destroy(&seq);
    lp_sampler_store_destroy(&st);
    return med;
}

static double time_chain(const char *label, const char *params, const float *row, int reps,
                         const int32_t *history, int n_history)
{
    return time_chain_mode(label, params, row, reps, history, n_history, false);
}

int main(void)
{
    float *row = malloc(N_VOCAB * sizeof(float));
    float *flat = malloc(N_VOCAB * sizeof(float));
    fill_normal(row, N_VOCAB, 3.0, 1); /* a peaked row: logits with sd 3 */
    fill_normal(flat, N_VOCAB, 0.01, 2); /* a flat row: nearly equal logits */
    int32_t history[64];
    for (int i = 0; i < 64; i++) history[i] = (i * 2371) % N_VOCAB;

    printf("sampler benchmark: one row of %d logits, one thread\n", N_VOCAB);
    double typical = time_chain(
        "typical chain: penalties, top-k 40, top-p 0.95, temp 0.8",
        "{\"repeat_penalty\":1.1,\"repeat_last_n\":64,\"top_k\":40,\"top_p\":0.95,"
        "\"temperature\":0.8,\"samplers\":[\"penalties\",\"top_k\",\"top_p\",\"temperature\"],"
        "\"seed\":1}",
        row, 2000, history, 64);
    double top_p = time_chain("top-p 0.95 alone, flat row",
                              "{\"top_p\":0.95,\"samplers\":[\"top_p\"],\"seed\":1}", flat, 200,
                              NULL, 0);
    time_chain("llama.cpp default chain (penalties..temperature)", "{\"seed\":1}", row, 500,
               history, 64);
    time_chain("greedy (temperature 0)", "{\"temperature\":0,\"seed\":1}", row, 1000, NULL, 0);
    time_chain("greedy with logprobs (n_probs 1)", "{\"temperature\":0,\"n_probs\":1,\"seed\":1}",
               row, 1000, NULL, 0);
    time_chain_mode("greedy, until the token (sampler-svc: pick, then logprobs)",
                    "{\"temperature\":0,\"seed\":1}", row, 1000, NULL, 0, true);
    time_chain_mode("greedy with logprobs, until the token",
                    "{\"temperature\":0,\"n_probs\":1,\"seed\":1}", row, 1000, NULL, 0, true);
    time_chain_mode("llama.cpp default chain, until the token", "{\"seed\":1}", row, 500,
                    history, 64, true);
    time_chain("top-k 50000 alone", "{\"top_k\":50000,\"samplers\":[\"top_k\"],\"seed\":1}", row, 100,
               NULL, 0);
    time_chain("typical-p 0.9 alone", "{\"typical_p\":0.9,\"samplers\":[\"typ_p\"],\"seed\":1}", row,
               100, NULL, 0);
    time_chain("mirostat v2 (tau 5)", "{\"mirostat\":2,\"seed\":1}", row, 100, NULL, 0);
    time_chain("DRY (multiplier 0.8, 64 tokens of history) + default chain",
               "{\"dry_multiplier\":0.8,\"seed\":1}", row, 500, history, 64);

    /* the yardstick: a full sort of the row */
    float *copy = malloc(N_VOCAB * sizeof(float));
    double ts[5];
    for (int r = 0; r < 5; r++) {
        memcpy(copy, flat, N_VOCAB * sizeof(float));
        double t0 = lp_now_ms();
        qsort(copy, N_VOCAB, sizeof(float), cmp_f_desc);
        ts[r] = lp_now_ms() - t0;
    }
    qsort(ts, 5, sizeof(double), cmp_d);
    printf("%-58s median %.4f ms\n", "full sort of the row (qsort, for scale)", ts[2]);
    printf("targets: typical chain <= 0.2 ms: %s; top-p flat <= 2 ms: %s\n",
           typical <= 0.2 ? "met" : "MISSED", top_p <= 2.0 ? "met" : "MISSED");
    free(copy);
    free(row);
    free(flat);
    return 0;
}
