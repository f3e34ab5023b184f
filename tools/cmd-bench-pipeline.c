/* cmd-bench-pipeline.c - the pipeline half of `lmpipe bench --pipeline`:
 * throughput through the four services, and the time each decode step adds
 * when it goes through them, compared with calling the engine and the
 * sampler in-process.
 *
 * In-process: after BOS, --tokens greedy decode steps, each one
 * lp_engine_step() of one token plus one lp_sampler_seq_sample(); the time
 * of every step is kept.  Pipeline: the same generation through `lmpipe
 * run`'s pipeline; a step's time is the gap between two token events at the
 * client (the coordinator overlaps detokenizing with the next step, so in
 * the steady state the gap is one step: engine, sampler and four messages).
 * Both run --runs times; the report gives p50 and p99 of each and their
 * difference, as one JSON object. */
#include "bench.h"
#include "lmpipe.h"

#include "client.h"
#include "engine.h"
#include "error.h"
#include "pipeline.h"
#include "sampler.h"
#include "sysinfo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
            double t0 = lp_now_us();
            lp_batch_seq_t b = {0, i, 1, &tok, 1};
            rc = lp_engine_step(e, &b, 1, &row);
            lp_sampler_result_t res;
            if (!rc) rc = lp_sampler_seq_sample(seq, row, hp->n_vocab, &res);
            if (!rc) rc = lp_sampler_seq_accept(seq, res.id);
            tok = res.id;
            if (i > 0) steps[(size_t)r * (size_t)n_tok + (size_t)i - 1] = lp_now_us() - t0;
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
    if (a->n < a->cap) a->t[a->n++] = lp_now_us();
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

/* Prefill and decode throughput through the pipeline, after a short
 * warm-up request: a request of `pp` prompt ids (no BOS added) and one
 * token, then one of a single prompt id and `tg` greedy tokens with EOS
 * ignored (decode over a short context, as the in-process figure).  The
 * coordinator's final event gives the time from the request to the first
 * token (prefill plus one sample) and from the first token to the last. */
int lp_bench_pipeline_throughput(const char *model_path, int threads, bool no_shm, int batch,
                                 const int32_t *ids, int pp, int tg, double *prefill_tok_s,
                                 double *decode_tok_s)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    lp_pipeline_opts_t o = {.model = model_path, .threads = threads, .no_shm = no_shm,
                            .max_seqs = 1, .max_batch_tokens = batch,
                            .n_ctx = pp + tg + 16};
    lp_pipeline_t *p = NULL;
    lp_client_t *c = NULL;
    int rc = lp_pipeline_start(&loop, &o, &p);
    if (!rc) rc = lp_pipeline_wait_ready(p, 60000);
    if (!rc) rc = lp_client_new(lp_pipeline_endpoint(p), &c);
    if (!rc) rc = lp_client_hello(c, 10000);
    /* 0: warm-up; 1: prefill of pp ids and one token; 2: tg tokens from a
     * one-token prompt, so decode runs over a short context as in-process */
    for (int r = 0; !rc && r < 3; r++) {
        static const int32_t n_prompt_warm = 16, n_gen_warm = 8;
        Lmpipe__GenerateRequest g = LMPIPE__GENERATE_REQUEST__INIT;
        g.prompt_ids = (int32_t *)ids;
        g.n_prompt_ids = (size_t)(r == 0 ? (pp < n_prompt_warm ? pp : n_prompt_warm)
                                         : r == 1 ? pp : 1);
        g.n_predict = r == 0 ? (tg < n_gen_warm ? tg : n_gen_warm) : r == 1 ? 1 : tg;
        g.ignore_eos = true;
        g.params_json = "{\"temperature\": 0}";
        lp_generation_t gen;
        rc = lp_client_generate(c, (uint64_t)r + 1, &g, 600000, NULL, NULL, &gen);
        if (!rc && gen.reason != LMPIPE__FINISH_REASON__FINISH_LENGTH)
            rc = lp_error_set(LP_ERR(EPROTO), "pipeline generation ended early: %s", gen.error);
        if (!rc && r == 1) *prefill_tok_s = gen.prompt_ms > 0 ? pp / (gen.prompt_ms / 1000.0) : 0;
        if (!rc && r == 2)
            *decode_tok_s = gen.generate_ms > 0 ? (double)(gen.n_ids - 1) / (gen.generate_ms / 1000.0)
                                                : 0;
        lp_generation_clear(&gen);
    }
    lp_client_destroy(&c);
    lp_pipeline_destroy(&p);
    uv_loop_close(&loop);
    return rc;
}

int lp_bench_step_latency(const char *model, int threads, bool no_shm, int n_tok, int runs,
                          lp_step_latency_t *out)
{
    size_t n = (size_t)n_tok * (size_t)runs;
    double *a = calloc(n, sizeof(double)), *b = calloc(n, sizeof(double));
    int rc = (!a || !b) ? lp_error_set(LP_ERR(ENOMEM), "out of memory") : 0;
    if (!rc) rc = in_process(model, threads, n_tok, runs, a);
    if (!rc) rc = through_pipeline(model, threads, no_shm, n_tok, runs, b);
    if (!rc) {
        out->steps = n;
        out->in_p50 = pct(a, n, 0.5);
        out->in_p99 = pct(a, n, 0.99);
        out->pipe_p50 = pct(b, n, 0.5);
        out->pipe_p99 = pct(b, n, 0.99);
    }
    free(a);
    free(b);
    return rc;
}
