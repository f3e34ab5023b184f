/* bench.h - the measurements behind `lmpipe bench --pipeline`
 * (cmd-bench-pipeline.c); cmd-bench.c runs them and prints the report. */
#ifndef LP_TOOLS_BENCH_H
#define LP_TOOLS_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

/* Prefill tokens/s of `pp` prompt ids and decode tokens/s of `tg` greedy
 * tokens, through a pipeline started for the purpose. */
int lp_bench_pipeline_throughput(const char *model_path, int threads, bool no_shm, int batch,
                                 const int32_t *ids, int pp, int tg, double *prefill_tok_s,
                                 double *decode_tok_s);

typedef struct lp_step_latency {
    size_t steps;
    double in_p50, in_p99;     /* in-process engine step + sample, microseconds */
    double pipe_p50, pipe_p99; /* gap between token events through the pipeline */
} lp_step_latency_t;

/* `runs` greedy generations of `n_tok` steps each way. */
int lp_bench_step_latency(const char *model, int threads, bool no_shm, int n_tok, int runs,
                          lp_step_latency_t *out);

/* The memory-bandwidth ceiling of decode: a plain read, by `threads`
 * threads (0: one per CPU), of the weight bytes one decode step reads (all
 * but the token embeddings, unless they are the output layer too).  *bytes
 * is that size, *gb_s the rate of the read (bench-read.c). */
int lp_bench_decode_bytes(const lp_gguf_t *g, int threads, double *bytes, double *gb_s);

#endif
