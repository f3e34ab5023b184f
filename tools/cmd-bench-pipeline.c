/* cmd-bench-pipeline.c - `lmpipe bench --pipeline`: the time each decode
 * step adds when it goes through the four services, compared with calling
 * the engine and the sampler in-process.
 *
 * In-process: after BOS, --tokens greedy decode steps, each one
 * lp_engine_step() of one token plus one lp_sampler_seq_sample(); the time
 * of every step is kept.  Pipeline: the same generation through `lmpipe
 * run`'s pipeline; a step's time is the gap between two token events at the
 * client (the coordinator overlaps detokenizing with the next step, so in
 * the steady state the gap is one step: engine, sampler and four messages).
 * Both run --runs times; the report gives p50 and p99 of each and their
 * difference, as one JSON object. */
#include "lmpipe.h"

#include "client.h"
#include "engine.h"
#include "error.h"
#include "pipeline.h"
#include "sampler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, size_t n, double p)
{
    qsort(v, n, sizeof(double), cmp_double);
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return n ? v[i] : 0;
}

static int in_process(const char *model_path, int threads, int n_tok, int runs, double *steps)
{
    lp_model_t *m = NULL;
    lp_engine_t *e = NULL;
    lp_sampler_store_t *st = NULL;
    float *row = NULL;
    int rc = lp_model_load(model_path, &m);
    lp_engine_params_t ep = {.n_threads = threads, .max_seqs = 1};
    if (!rc) rc = lp_engine_new(m, &ep, &e);
    if (!rc) rc = lp_sampler_store_new(NULL, &st);
    const lp_hparams_t *hp = m ? lp_model_hparams(m) : NULL;
    if (!rc) rc = lp_sampler_store_set_vocab(st, hp->n_tokens_real, lp_model_token_mask(m), hp->n_vocab);
    if (!rc && !(row = malloc((size_t)hp->n_vocab * sizeof(float)))) rc = LP_ERR(ENOMEM);
    for (int r = 0; !rc && r < runs; r++) {
        lp_sampler_seq_t *seq = NULL;
        const char *params = "{\"temperature\": 0}";
        rc = lp_sampler_seq_new(st, params, strlen(params), &seq);
        int32_t tok = hp->bos_id >= 0 ? hp->bos_id : 0;
        for (int i = 0; !rc && i <= n_tok; i++) {
            double t0 = now_us();
            lp_batch_seq_t b = {0, i, 1, &tok, 1};
            rc = lp_engine_step(e, &b, 1, &row);
            lp_sampler_result_t res;
            if (!rc) rc = lp_sampler_seq_sample(seq, row, hp->n_vocab, &res);
            if (!rc) rc = lp_sampler_seq_accept(seq, res.id);
            tok = res.id;
            if (i > 0) steps[(size_t)r * (size_t)n_tok + (size_t)i - 1] = now_us() - t0;
        }
        lp_sampler_seq_destroy(&seq);
    }
    free(row);
    lp_sampler_store_destroy(&st);
    lp_engine_destroy(&e);
    lp_model_destroy(&m);
    return rc;
}

typedef struct arrivals {
    double *t;
    size_t n, cap;
} arrivals_t;

static void on_token(void *arg, int32_t id, const uint8_t *piece, size_t len)
{
    arrivals_t *a = arg;
    if (a->n < a->cap) a->t[a->n++] = now_us();
    (void)id;
    (void)piece;
    (void)len;
}

static int through_pipeline(const char *model_path, int threads, bool no_shm, int n_tok, int runs,
                            double *steps)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    lp_pipeline_opts_t o = {.model = model_path, .threads = threads, .no_shm = no_shm, .max_seqs = 1};
    lp_pipeline_t *p = NULL;
    lp_client_t *c = NULL;
    int rc = lp_pipeline_start(&loop, &o, &p);
    if (!rc) rc = lp_pipeline_wait_ready(p, 60000);
    if (!rc) rc = lp_client_new(lp_pipeline_endpoint(p), &c);
    if (!rc) rc = lp_client_hello(c, 10000);
    arrivals_t a = {malloc(((size_t)n_tok + 1) * sizeof(double)), 0, (size_t)n_tok + 1};
    for (int r = 0; !rc && r < runs; r++) {
        Lmpipe__GenerateRequest g = LMPIPE__GENERATE_REQUEST__INIT;
        g.n_predict = n_tok + 1;
        g.ignore_eos = true;
        g.params_json = "{\"temperature\": 0}";
        g.prompt.data = (uint8_t *)"Once";
        g.prompt.len = 4;
        lp_generation_t gen;
        a.n = 0;
        rc = lp_client_generate(c, (uint64_t)r + 1, &g, 60000, on_token, &a, &gen);
        if (!rc && (gen.reason == LMPIPE__FINISH_REASON__FINISH_ERROR || a.n != (size_t)n_tok + 1))
            rc = lp_error_set(LP_ERR(EPROTO), "pipeline generation failed: %s", gen.error);
        for (size_t i = 1; !rc && i < a.n; i++)
            steps[(size_t)r * (size_t)n_tok + i - 1] = a.t[i] - a.t[i - 1];
        lp_generation_clear(&gen);
    }
    free(a.t);
    lp_client_destroy(&c);
    lp_pipeline_destroy(&p);
    uv_loop_close(&loop);
    return rc;
}

int lp_cmd_bench_pipeline(int argc, char **argv)
{
    const char *model = NULL;
    int threads = 1, n_tok = 128, runs = 3;
    bool no_shm = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) n_tok = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-shm")) no_shm = true;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: lmpipe bench --pipeline --model M [--tokens 128] [--runs 3] [--threads 1] [--no-shm]\n");
            return 0;
        } else {
            return lp_cmd_usage_error("bench", "unknown or incomplete option '%s'", argv[i]);
        }
    }
    if (!model) return lp_cmd_usage_error("bench", "--model is required");
    if (n_tok < 2 || n_tok > 100000 || runs < 1 || runs > 1000 || threads < 0)
        return lp_cmd_usage_error("bench", "--tokens must be 2..100000, --runs 1..1000, --threads >= 0");
    size_t n = (size_t)n_tok * (size_t)runs;
    double *a = calloc(n, sizeof(double)), *b = calloc(n, sizeof(double));
    if (!a || !b) return 1;
    int rc = in_process(model, threads, n_tok, runs, a);
    if (!rc) rc = through_pipeline(model, threads, no_shm, n_tok, runs, b);
    if (rc) {
        fprintf(stderr, "lmpipe bench: %s\n", lp_error_msg());
        free(a);
        free(b);
        return 1;
    }
    double a50 = pct(a, n, 0.5), a99 = pct(a, n, 0.99), b50 = pct(b, n, 0.5), b99 = pct(b, n, 0.99);
    const char *base = strrchr(model, '/');
    printf("{\"model\": \"%s\", \"logits\": \"%s\", \"threads\": %d, \"steps\": %zu,\n"
           " \"in_process_us\": {\"p50\": %.1f, \"p99\": %.1f},\n"
           " \"pipeline_us\": {\"p50\": %.1f, \"p99\": %.1f},\n"
           " \"added_us\": {\"p50\": %.1f, \"p99\": %.1f}}\n",
           base ? base + 1 : model, no_shm ? "inline" : "shm", threads, n, a50, a99, b50, b99,
           b50 - a50, b99 - a99);
    free(a);
    free(b);
    return 0;
}
