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
 * Both run --runs times, taking turns, and the first 32 steps of each run
 * are a warm-up; the report gives p50 and p99 of each and their
 * difference, as one JSON object. */
#include "bench.h"
#include "lmpipe.h"

#include "client.h"
#include "engine.h"
#include "error.h"
#include "pipeline.h"
#include "sampler.h"
#include "seq-json.h"
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

/* The in-process side: an engine and a sampler store of its own. */
typedef struct in_proc {
    lp_model_t *m;
    lp_engine_t *e;
    lp_sampler_store_t *st;
    float *row;
} in_proc_t;

static void in_proc_close(in_proc_t *ip)
{
    free(ip->row);
    lp_sampler_store_destroy(&ip->st);
    lp_engine_destroy(&ip->e);
    lp_model_destroy(&ip->m);
}

static int in_proc_open(in_proc_t *ip, const char *model_path, int threads)
{
    int rc = lp_model_load(model_path, &ip->m);
    lp_engine_params_t ep = {.n_threads = threads, .max_seqs = 1};
    if (!rc) rc = lp_engine_new(ip->m, &ep, &ip->e);
    if (!rc) rc = lp_sampler_store_new(NULL, &ip->st);
    const lp_hparams_t *hp = ip->m ? lp_model_hparams(ip->m) : NULL;
    if (!rc) rc = lp_sampler_store_set_vocab(ip->st, hp->n_tokens_real, lp_model_token_mask(ip->m), hp->n_vocab);
    if (!rc && !(ip->row = malloc((size_t)hp->n_vocab * sizeof(float))))
        rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
    return rc;
}

/* One generation of n_tok greedy steps after BOS; steps[i] is step i's time. */
static int in_proc_run(in_proc_t *ip, int n_tok, double *steps)
{
    const lp_hparams_t *hp = lp_model_hparams(ip->m);
    lp_sampler_seq_t *seq = NULL;
    const char *params = "{\"temperature\": 0}";
    int rc = lp_sampler_seq_new(ip->st, params, strlen(params), &seq);
    int32_t tok = hp->bos_id >= 0 ? hp->bos_id : 0;
    for (int i = 0; !rc && i <= n_tok; i++) {
        double t0 = lp_now_us();
        lp_batch_seq_t b = {0, i, 1, &tok, 1, NULL, 0, NULL, 0};
        rc = lp_engine_step(ip->e, &b, 1, &ip->row);
        lp_sampler_result_t res;
        if (!rc) rc = lp_sampler_seq_sample(seq, ip->row, hp->n_vocab, &res);
        if (!rc) rc = lp_sampler_seq_accept(seq, res.id);
        tok = res.id;
        if (i > 0) steps[i - 1] = lp_now_us() - t0;
    }
    lp_sampler_seq_destroy(&seq);
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

/* `lmpipe run`'s four services, started for a measurement, and a client. */
typedef struct piped {
    lp_config_t *cfg; /* the services' keys */
    uv_loop_t loop;
    lp_pipeline_t *p;
    lp_client_t *c;
} piped_t;

/* The services with these keys: model, threads, no_shm, max_seqs 1, and
 * max_batch_tokens and n_ctx when > 0. */
static int piped_start(piped_t *pd, const char *model, int threads, bool no_shm, int batch, int n_ctx)
{
    uv_loop_init(&pd->loop);
    lp_pipeline_opts_t o = {0};
    if (!(pd->cfg = lp_config_new())) return LP_ERR(ENOMEM);
    int rc = lp_config_set(pd->cfg, "model", model);
    if (!rc) rc = lp_config_setf(pd->cfg, "threads", "%d", threads);
    if (!rc) rc = lp_config_set(pd->cfg, "no_shm", no_shm ? "true" : "false");
    if (!rc) rc = lp_config_set(pd->cfg, "max_seqs", "1");
    if (!rc && batch > 0) rc = lp_config_setf(pd->cfg, "max_batch_tokens", "%d", batch);
    if (!rc && n_ctx > 0) rc = lp_config_setf(pd->cfg, "n_ctx", "%d", n_ctx);
    o.cfg = pd->cfg;
    if (!rc) rc = lp_pipeline_start(&pd->loop, &o, &pd->p);
    if (!rc) rc = lp_pipeline_wait_ready(pd->p, 60000);
    if (!rc) rc = lp_client_new(lp_pipeline_endpoint(pd->p), &pd->c);
    if (!rc) rc = lp_client_hello(pd->c, 10000);
    return rc;
}

static void piped_stop(piped_t *pd)
{
    lp_client_destroy(&pd->c);
    lp_pipeline_destroy(&pd->p);
    uv_loop_close(&pd->loop);
    lp_config_destroy(&pd->cfg);
}

/* The pipeline side of the step times. */
typedef struct through {
    piped_t pd;
    arrivals_t a;
} through_t;

static void through_close(through_t *tp)
{
    free(tp->a.t);
    piped_stop(&tp->pd);
}

static int through_open(through_t *tp, const char *model_path, int threads, bool no_shm, int n_tok)
{
    int rc = piped_start(&tp->pd, model_path, threads, no_shm, 0, 0);
    tp->a = (arrivals_t){malloc(((size_t)n_tok + 1) * sizeof(double)), 0, (size_t)n_tok + 1};
    if (!rc && !tp->a.t) rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
    return rc;
}

/* Greedy: temperature 0, given (SamplingParams field 2). */
static Lmpipe__SamplingParams *greedy(void)
{
    static Lmpipe__SamplingParams sp = LMPIPE__SAMPLING_PARAMS__INIT;
    sp.given = 1ull << 2;
    sp.temperature = 0;
    return &sp;
}

/* One generation of n_tok + 1 tokens; steps[i] is the gap before token i + 1. */
static int through_run(through_t *tp, uint64_t id, int n_tok, double *steps)
{
    Lmpipe__GenerateRequest g = LMPIPE__GENERATE_REQUEST__INIT;
    g.n_predict = n_tok + 1;
    g.ignore_eos = true;
    g.sampling = greedy();
    g.prompt.data = (uint8_t *)"Once";
    g.prompt.len = 4;
    lp_generation_t gen;
    tp->a.n = 0;
    int rc = lp_client_generate(tp->pd.c, id, &g, 60000, on_token, &tp->a, &gen);
    if (!rc && (gen.reason == LMPIPE__FINISH_REASON__FINISH_ERROR || tp->a.n != (size_t)n_tok + 1))
        rc = lp_error_set(LP_ERR(EPROTO), "pipeline generation failed: %s", gen.error);
    for (size_t i = 1; !rc && i < tp->a.n; i++) steps[i - 1] = tp->a.t[i] - tp->a.t[i - 1];
    lp_generation_clear(&gen);
    return rc;
}

struct lp_bench_pipe {
    piped_t pd;
    uint64_t next_id;
};

void lp_bench_pipe_close(lp_bench_pipe_t **self_p)
{
    lp_bench_pipe_t *bp = *self_p;
    if (!bp) return;
    piped_stop(&bp->pd);
    free(bp);
    *self_p = NULL;
}

/* A greedy request for n_predict tokens after the n_prompt ids, EOS ignored. */
static int pipe_generate(lp_bench_pipe_t *bp, const int32_t *ids, int n_prompt, int n_predict,
                         lp_generation_t *gen)
{
    Lmpipe__GenerateRequest g = LMPIPE__GENERATE_REQUEST__INIT;
    g.prompt_ids = (int32_t *)ids;
    g.n_prompt_ids = (size_t)n_prompt;
    g.n_predict = n_predict;
    g.ignore_eos = true;
    g.sampling = greedy();
    int rc = lp_client_generate(bp->pd.c, ++bp->next_id, &g, 600000, NULL, NULL, gen);
    if (!rc && gen->reason != LMPIPE__FINISH_REASON__FINISH_LENGTH) {
        rc = lp_error_set(LP_ERR(EPROTO), "pipeline generation ended early: %s", gen->error);
        lp_generation_clear(gen);
    }
    return rc;
}

int lp_bench_pipe_open(const char *model_path, int threads, bool no_shm, int batch, int pp,
                       int tg, const int32_t *ids, lp_bench_pipe_t **out)
{
    *out = NULL;
    lp_bench_pipe_t *bp = calloc(1, sizeof(*bp));
    if (!bp) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    int rc = piped_start(&bp->pd, model_path, threads, no_shm, batch, pp + tg + 16);
    lp_generation_t gen; /* a warm-up */
    if (!rc && !(rc = pipe_generate(bp, ids, pp < 16 ? pp : 16, tg < 8 ? tg : 8, &gen)))
        lp_generation_clear(&gen);
    if (rc) {
        lp_bench_pipe_close(&bp);
        return rc;
    }
    *out = bp;
    return 0;
}

int lp_bench_pipe_prefill(lp_bench_pipe_t *bp, const int32_t *ids, int pp, double *tok_s)
{
    lp_generation_t gen;
    int rc = pipe_generate(bp, ids, pp, 1, &gen);
    if (rc) return rc;
    *tok_s = gen.prompt_ms > 0 ? pp / (gen.prompt_ms / 1000.0) : 0;
    lp_generation_clear(&gen);
    return 0;
}

int lp_bench_pipe_decode(lp_bench_pipe_t *bp, const int32_t *ids, int tg, double *tok_s)
{
    lp_generation_t gen;
    int rc = pipe_generate(bp, ids, 1, tg, &gen);
    if (rc) return rc;
    *tok_s = gen.generate_ms > 0 ? (double)(gen.n_ids - 1) / (gen.generate_ms / 1000.0) : 0;
    lp_generation_clear(&gen);
    return 0;
}

int lp_bench_step_latency(const char *model, int threads, bool no_shm, int n_tok, int runs,
                          lp_step_latency_t *out)
{
    /* Each generation's first WARM steps are not counted: with the turns,
     * each way starts after the other has run for a while, and the first
     * pipeline steps after that pause are slow (the services' vCPUs were
     * idle, their caches cold), which the steady state the figure is about
     * never sees. */
    enum { WARM = 32 };
    size_t n = (size_t)n_tok * (size_t)runs;
    double *a = calloc(n, sizeof(double)), *b = calloc(n, sizeof(double));
    double *tmp = calloc((size_t)n_tok + WARM, sizeof(double));
    in_proc_t ip = {0};
    through_t tp = {0};
    int rc = (!a || !b || !tmp) ? lp_error_set(LP_ERR(ENOMEM), "out of memory") : 0;
    bool tp_open = false;
    if (!rc) rc = in_proc_open(&ip, model, threads);
    if (!rc) {
        tp_open = true;
        rc = through_open(&tp, model, threads, no_shm, n_tok + WARM);
    }
    /* The two ways take turns, a generation each, so that both see the
     * same minutes of the machine (its memory bandwidth drifts). */
    for (int r = 0; !rc && r < runs; r++) {
        rc = in_proc_run(&ip, n_tok + WARM, tmp);
        if (!rc) memcpy(a + (size_t)r * (size_t)n_tok, tmp + WARM, sizeof(double) * (size_t)n_tok);
        if (!rc) rc = through_run(&tp, (uint64_t)r + 1, n_tok + WARM, tmp);
        if (!rc) memcpy(b + (size_t)r * (size_t)n_tok, tmp + WARM, sizeof(double) * (size_t)n_tok);
    }
    if (tp_open) through_close(&tp);
    in_proc_close(&ip);
    if (!rc) {
        out->steps = n;
        out->in_p50 = pct(a, n, 0.5);
        out->in_p99 = pct(a, n, 0.99);
        out->pipe_p50 = pct(b, n, 0.5);
        out->pipe_p99 = pct(b, n, 0.99);
    }
    free(a);
    free(b);
    free(tmp);
    return rc;
}
