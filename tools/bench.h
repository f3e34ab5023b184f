/* bench.h - the measurements behind `lmpipe bench --pipeline`
 * (cmd-bench-pipeline.c); cmd-bench.c runs them and prints the report. */
#ifndef LP_TOOLS_BENCH_H
#define LP_TOOLS_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "gguf.h"

/* A pipeline started for throughput figures (cmd-bench-pipeline.c), one
 * sequence of pp + tg tokens, after a short warm-up request.  _prefill: a
 * request of `pp` prompt ids (no BOS added) and one token, prompt ids per
 * second; _decode: one prompt id and `tg` greedy tokens with EOS ignored
 * (a short context, as the in-process figure), tokens per second after the
 * first.  Both are the coordinator's own timings from its final event. */
typedef struct lp_bench_pipe lp_bench_pipe_t;
int lp_bench_pipe_open(const char *model_path, int threads, bool no_shm, int batch, int pp,
                       int tg, const int32_t *ids, lp_bench_pipe_t **out);
int lp_bench_pipe_prefill(lp_bench_pipe_t *bp, const int32_t *ids, int pp, double *tok_s);
int lp_bench_pipe_decode(lp_bench_pipe_t *bp, const int32_t *ids, int tg, double *tok_s);
void lp_bench_pipe_close(lp_bench_pipe_t **self_p);

typedef struct lp_step_latency {
    size_t steps;
    double in_p50, in_p99;     /* in-process engine step + sample, microseconds */
    double pipe_p50, pipe_p99; /* gap between token events through the pipeline */
} lp_step_latency_t;

/* `runs` greedy generations of `n_tok` steps each way. */
int lp_bench_step_latency(const char *model, int threads, bool no_shm, int n_tok, int runs,
                          lp_step_latency_t *out);

#define LP_BENCH_MAX_SEQS 256 /* lmpipe bench --seqs */

/* The memory-bandwidth ceiling of decode: a plain read, by `threads`
 * threads (0: one per CPU), of the weight bytes one decode step of `seqs`
 * sequences reads, where engine e (may be NULL) reads them: its packed
 * copies, the mapping otherwise.  That is every tensor but the token
 * embeddings, of which it reads `seqs` rows (all of them when they are the
 * output layer too), and of the 3-D expert tensors only the part
 * expert_frac (0..1) that the step's chosen experts are (the first
 * expert_frac of each tensor is read: the same bytes as any experts').
 * *bytes is that size, *gb_s the rate of the read (bench-read.c). */
int lp_bench_decode_bytes(const lp_gguf_t *g, const lp_engine_t *e, int threads,
                          double expert_frac, int seqs, double *bytes, double *gb_s);

#endif
