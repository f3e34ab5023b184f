/* cmd-bench.c - `lmpipe bench`: prefill and decode throughput of the engine,
 * measured like llama-bench's pp/tg tests: prefill of --prompt-tokens in
 * chunks of --batch tokens into an empty cache, then --gen-tokens single-
 * token decode steps from an empty cache, each after one warm-up run.
 * --pipeline measures the same through the four processes as well, in
 * --runs rounds that each follow the in-process figures of the same round
 * (medians reported), and the time each decode step adds
 * (cmd-bench-pipeline.c); since the pipeline samples every token, its
 * decode is also compared with an in-process decode that samples each row
 * greedily (decode_sampled_tok_s, pipeline_cost_pct.decode_vs_sampled).
 * Prints one JSON object. */
#include "bench.h"
#include "lmpipe.h"

#include "engine.h"
#include "error.h"
#include "sampler.h"
#include "seq-json.h"
#include "sysinfo.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bench {
    lp_engine_t *eng;
    int32_t n_vocab, batch;
    int32_t seqs;     /* sequences decoding side by side (--seqs) */
    int32_t *tokens;
    float *logits;    /* seqs rows */
} bench_t;

static int run_prefill(bench_t *b, int32_t n, double *secs)
{
    lp_engine_seq_reset(b->eng, 0);
    double t0 = lp_now_s();
    for (int32_t pos = 0; pos < n; pos += b->batch) {
        int32_t k = n - pos < b->batch ? n - pos : b->batch;
        lp_batch_seq_t s = {0, pos, k, b->tokens + pos, pos + k == n, NULL, 0, NULL, 0};
        int rc = lp_engine_step(b->eng, &s, 1, &b->logits);
        if (rc) return rc;
    }
    *secs = lp_now_s() - t0;
    return 0;
}

/* n steps of one token for each of b->seqs sequences, with logits for all. */
static int run_decode(bench_t *b, int32_t n, double *secs)
{
    lp_batch_seq_t s[LP_BENCH_MAX_SEQS];
    float *rows[LP_BENCH_MAX_SEQS];
    for (int32_t i = 0; i < b->seqs; i++) {
        lp_engine_seq_reset(b->eng, i);
        rows[i] = b->logits + (size_t)i * (size_t)b->n_vocab;
    }
    double t0 = lp_now_s();
    for (int32_t pos = 0; pos < n; pos++) {
        for (int32_t i = 0; i < b->seqs; i++) /* each sequence its own tokens */
            s[i] = (lp_batch_seq_t){i, pos, 1, b->tokens + (pos + 7 * i) % (n + 1), 1, NULL, 0,
                                    NULL, 0};
        int rc = lp_engine_step(b->eng, s, b->seqs, rows);
        if (rc) return rc;
    }
    *secs = lp_now_s() - t0;
    return 0;
}

/* run_decode with a greedy sample (and accept) of each step's row, as one
 * process running the engine and the sampler would decode: the pipeline's
 * decode samples every token too, so this is the figure to compare it with
 * (pipeline_cost_pct.decode_vs_sampled). */
static int run_decode_sampled(bench_t *b, const lp_model_t *model, int32_t n, double *secs)
{
    const lp_hparams_t *hp = lp_model_hparams(model);
    lp_sampler_store_t *st = NULL;
    lp_sampler_seq_t *seq = NULL;
    const char *params = "{\"temperature\": 0}";
    int rc = lp_sampler_store_new(NULL, &st);
    if (!rc) rc = lp_sampler_store_set_vocab(st, hp->n_tokens_real, lp_model_token_mask(model), hp->n_vocab);
    if (!rc) rc = lp_sampler_seq_new(st, params, strlen(params), &seq);
    lp_engine_seq_reset(b->eng, 0);
    double t0 = lp_now_s();
    for (int32_t pos = 0; !rc && pos < n; pos++) {
        lp_batch_seq_t s = {0, pos, 1, b->tokens + pos, 1, NULL, 0, NULL, 0};
        lp_sampler_result_t res;
        rc = lp_engine_step(b->eng, &s, 1, &b->logits);
        if (!rc) rc = lp_sampler_seq_sample(seq, b->logits, b->n_vocab, &res);
        if (!rc) rc = lp_sampler_seq_accept(seq, res.id);
    }
    *secs = lp_now_s() - t0;
    lp_sampler_seq_destroy(&seq);
    lp_sampler_store_destroy(&st);
    return rc;
}

/* The median of n values (reordered); 0 for none. */
static double median(double *v, int n)
{
    for (int i = 1; i < n; i++) /* insertion sort: a handful of rounds */
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n <= 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void print_json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') putchar('\\');
        if ((unsigned char)*s >= 0x20) putchar(*s);
    }
    putchar('"');
}

int lp_cmd_bench(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, NULL, 'm'},
        {"prompt-tokens", required_argument, NULL, 'p'},
        {"gen-tokens", required_argument, NULL, 'g'},
        {"threads", required_argument, NULL, 't'},
        {"batch", required_argument, NULL, 'b'},
        {"backend", required_argument, NULL, 'B'},
        {"exact", no_argument, NULL, 'e'},
        {"pipeline", no_argument, NULL, 'P'},
        {"no-shm", no_argument, NULL, 'N'},
        {"tokens", required_argument, NULL, 'k'},
        {"runs", required_argument, NULL, 'r'},
        {"kv-block", required_argument, NULL, 'K'},
        {"no-pack-weights", no_argument, NULL, 'W'},
        {"seqs", required_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *model_path = NULL, *backend = NULL;
    int pp = 512, tg = 128, threads = 0, batch = 512, exact = 0, pipeline = 0, no_shm = 0;
    int step_tokens = 128, runs = 3, kv_block = -1, no_pack = 0, seqs = 1, c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model_path = optarg; break;
        case 'p': pp = atoi(optarg); break;
        case 'g': tg = atoi(optarg); break;
        case 't': threads = atoi(optarg); break;
        case 'b': batch = atoi(optarg); break;
        case 'B': backend = optarg; break;
        case 'e': exact = 1; break;
        case 'W': no_pack = 1; break;
        case 'S': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (!*optarg || *end || v < 1 || v > LP_BENCH_MAX_SEQS)
                return lp_cmd_usage_error("bench", "--seqs: '%s' is not an integer in 1..%d", optarg,
                                          LP_BENCH_MAX_SEQS);
            seqs = (int)v;
            break;
        }
        case 'P': pipeline = 1; break;
        case 'N': no_shm = 1; break;
        case 'k': step_tokens = atoi(optarg); break;
        case 'r': runs = atoi(optarg); break;
        case 'K': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (!*optarg || *end || v < 0 || v > (1 << 16))
                return lp_cmd_usage_error("bench", "--kv-block: '%s' is not an integer in 0..%d",
                                          optarg, 1 << 16);
            kv_block = (int)v;
            break;
        }
        case 'h':
            printf("usage: lmpipe bench --model M [--prompt-tokens 512] [--gen-tokens 128] "
                   "[--threads N] [--batch 512] [--backend cpu|cuda] [--exact]\n"
                   "                    [--kv-block N] [--no-pack-weights] [--seqs N] [--pipeline [--no-shm] [--tokens 128] [--runs 3]]\n"
                   "In-process by default; --pipeline measures the same through the four\n"
                   "processes in --runs rounds (medians), and the time each decode step\n"
                   "adds (p50/p99 over --runs generations of --tokens steps).\n"
                   "--kv-block: positions per KV block of the in-process engine (default 16;\n"
                   "0: the contiguous layout).\n"
                   "--no-pack-weights: the in-process engine reads its matrices in the\n"
                   "file's layout instead of packing them at load.\n"
                   "--seqs N: decode N sequences side by side, one token each a step, all\n"
                   "with logits, as a serving engine does (decode_tok_s counts them all).\n");
            return 0;
        default:
            return lp_cmd_usage_error("bench", "unknown or incomplete option '%s'",
                                      argv[optind - 1]);
        }
    }
    if (optind < argc) return lp_cmd_usage_error("bench", "unexpected argument '%s'", argv[optind]);
    if (!model_path) return lp_cmd_usage_error("bench", "--model is required");
    if (pp < 0 || tg < 0 || pp + tg == 0 || threads < 0 || batch < 1)
        return lp_cmd_usage_error("bench", "token counts, --threads and --batch must be "
                                  "positive");
    if (pipeline && seqs > 1)
        return lp_cmd_usage_error("bench", "--seqs is for the in-process engine, not --pipeline");
    if (pipeline && (pp < 1 || tg < 2 || step_tokens < 2 || step_tokens > 100000 || runs < 1 ||
                     runs > 1000 || exact || backend))
        return lp_cmd_usage_error("bench", "--pipeline needs --prompt-tokens >= 1, "
                                  "--gen-tokens >= 2, --tokens 2..100000, --runs 1..1000, "
                                  "and takes neither --exact nor --backend");

    lp_model_t *model = NULL;
    bench_t b = {0};
    int rc = lp_model_load(model_path, &model);
    int32_t n_ctx = (pp > tg ? pp : tg) + 1;
    if (!rc) {
        const lp_hparams_t *hp = lp_model_hparams(model);
        lp_engine_params_t ep = {.n_ctx = n_ctx, .max_seqs = seqs,
                                 .max_batch_tokens = batch > seqs ? batch : seqs,
                                 .n_threads = threads, .exact = exact, .backend = backend,
                                 .no_pack = no_pack,
                                 .kv_block = kv_block < 0 ? 0 : kv_block ? kv_block
                                                                       : LP_ENGINE_KV_CONTIGUOUS};
        b.n_vocab = hp->n_vocab;
        b.batch = batch;
        b.seqs = seqs;
        rc = lp_engine_new(model, &ep, &b.eng);
    }
    if (!rc) {
        b.tokens = malloc(sizeof(int32_t) * (size_t)n_ctx);
        b.logits = malloc(sizeof(float) * (size_t)b.n_vocab * (size_t)seqs);
        if (!b.tokens || !b.logits) rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
        unsigned s = 1234;
        for (int32_t i = 0; b.tokens && i < n_ctx; i++) {
            s = s * 1103515245u + 12345u;
            b.tokens[i] = (int32_t)((s >> 8) % (unsigned)lp_model_hparams(model)->n_tokens_real);
        }
    }
    double t_pp = 0, t_tg = 0, warm;
    lp_moe_counts_t mc[4] = {{0}};
    if (!rc && pp) rc = run_prefill(&b, pp < b.batch ? pp : b.batch, &warm);
    if (!rc && pp) rc = run_prefill(&b, pp, &t_pp);
    if (!rc) lp_engine_moe_counts(b.eng, &mc[0]);
    if (!rc && tg) rc = run_decode(&b, tg < 16 ? tg : 16, &warm);
    if (!rc) lp_engine_moe_counts(b.eng, &mc[1]);
    /* The ceiling is read just before and just after the decode it bounds,
     * and only where the weights are in host memory; a mixture of experts
     * reads the bytes of its chosen experts (those of the warm-up decode
     * for the first read, of the decode itself for the second). */
    double step_bytes = 0, read_gbs[2] = {0, 0};
    bool on_cpu = !rc && !strcmp(lp_engine_backend_name(b.eng), "cpu");
    double exp_total = 0;
    for (int64_t i = 0; model && i < lp_gguf_n_tensors(lp_model_gguf(model)); i++)
        if (lp_gguf_tensor_at(lp_model_gguf(model), i)->n_dims == 3)
            exp_total += (double)lp_gguf_tensor_at(lp_model_gguf(model), i)->nbytes;
    const int warm_steps = tg < 16 ? tg : 16;
    double frac_warm = exp_total > 0 && warm_steps
                           ? (double)(mc[1].expert_bytes - mc[0].expert_bytes) / warm_steps / exp_total
                           : 0;
    if (!rc && tg && on_cpu)
        rc = lp_bench_decode_bytes(lp_model_gguf(model), b.eng, threads, frac_warm, seqs,
                                   &step_bytes, &read_gbs[0]);
    if (!rc && tg) rc = run_decode(&b, tg, &t_tg);
    if (!rc) lp_engine_moe_counts(b.eng, &mc[2]);
    double frac = exp_total > 0 && tg ? (double)(mc[2].expert_bytes - mc[1].expert_bytes) / tg / exp_total
                                      : 0;
    if (!rc && tg && on_cpu)
        rc = lp_bench_decode_bytes(lp_model_gguf(model), b.eng, threads, frac, seqs, &step_bytes,
                                   &read_gbs[1]);
    double in_pp = pp && t_pp > 0 ? pp / t_pp : 0, in_tg = tg && t_tg > 0 ? tg * seqs / t_tg : 0;
    const char *backend_name = rc ? "" : lp_engine_backend_name(b.eng);
    const int32_t kv_blk = rc ? 0 : lp_engine_kv_block(b.eng);
    long rss = lp_proc_status_kb("VmRSS"), hwm = lp_proc_status_kb("VmHWM");

    /* Through the pipeline: rounds of the pipeline's prefill and decode,
     * each right after the same in-process, so that each pair sees the same
     * minute of the machine; the costs are medians of the rounds' ratios. */
    int rounds = pipeline ? runs : 0;
    double *fig = calloc((size_t)(5 * (rounds ? rounds : 1)), sizeof(double));
    double *r_in_pp = fig, *r_in_tg = fig + rounds, *r_in_tgs = fig + 2 * rounds,
           *r_pipe_pp = fig + 3 * rounds, *r_pipe_tg = fig + 4 * rounds;
    if (!rc && !fig) rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
    lp_bench_pipe_t *bp = NULL;
    if (!rc && pipeline) rc = lp_bench_pipe_open(model_path, threads, no_shm, batch, pp, tg, b.tokens, &bp);
    for (int r = 0; !rc && r < rounds; r++) {
        double t;
        r_in_pp[r] = in_pp;
        r_in_tg[r] = in_tg;
        if (r > 0 && !(rc = run_prefill(&b, pp, &t))) r_in_pp[r] = pp / t;
        if (!rc) rc = lp_bench_pipe_prefill(bp, b.tokens, pp, &r_pipe_pp[r]);
        if (!rc && r > 0 && !(rc = run_decode(&b, tg, &t))) r_in_tg[r] = tg / t;
        if (!rc && !(rc = run_decode_sampled(&b, model, tg, &t))) r_in_tgs[r] = tg / t;
        if (!rc) rc = lp_bench_pipe_decode(bp, b.tokens, tg, &r_pipe_tg[r]);
    }
    lp_bench_pipe_close(&bp);
    /* The engine's memory goes before the step measurement starts its own. */
    lp_engine_destroy(&b.eng);
    double cost_pp[rounds ? rounds : 1], cost_tg[rounds ? rounds : 1], cost_tgs[rounds ? rounds : 1];
    for (int r = 0; r < rounds; r++) {
        cost_pp[r] = 100.0 * (1 - r_pipe_pp[r] / r_in_pp[r]);
        cost_tg[r] = 100.0 * (1 - r_pipe_tg[r] / r_in_tg[r]);
        cost_tgs[r] = 100.0 * (1 - r_pipe_tg[r] / r_in_tgs[r]);
    }

    lp_step_latency_t lat = {0};
    if (!rc && pipeline)
        rc = lp_bench_step_latency(model_path, threads, no_shm, step_tokens, runs, &lat);
    if (rc) {
        fprintf(stderr, "lmpipe bench: %s\n", lp_error_msg());
    } else {
        const lp_hparams_t *hp = lp_model_hparams(model);
        /* K and V of every position, the sliding layers' of their window only */
        const int64_t swa_pos = hp->n_swa && hp->n_swa < n_ctx ? hp->n_swa : n_ctx;
        double kv_mb = 2.0 * 4 * ((double)(hp->kv_floats - hp->kv_floats_swa) * n_ctx +
                                  (double)hp->kv_floats_swa * swa_pos) / 1048576.0;
        printf("{\"model\": ");
        print_json_str(model_path);
        printf(", \"backend\": \"%s\", \"mode\": \"%s\", \"threads\": %d, "
               "\"prompt_tokens\": %d, \"gen_tokens\": %d, \"seqs\": %d, \"prefill_tok_s\": %.2f, "
               "\"decode_tok_s\": %.2f", backend_name, pipeline ? "pipeline" : "in-process",
               threads, pp, tg, seqs, pipeline ? median(r_pipe_pp, rounds) : in_pp,
               pipeline ? median(r_pipe_tg, rounds) : in_tg);
        if (pipeline) {
            printf(", \"logits\": \"%s\", \"rounds\": %d, \"in_process\": {\"prefill_tok_s\": %.2f, "
                   "\"decode_tok_s\": %.2f, \"decode_sampled_tok_s\": %.2f}, "
                   "\"pipeline_cost_pct\": {\"prefill\": %.1f, \"decode\": %.1f, "
                   "\"decode_vs_sampled\": %.1f}",
                   no_shm ? "inline" : "shm", rounds, median(r_in_pp, rounds),
                   median(r_in_tg, rounds), median(r_in_tgs, rounds), median(cost_pp, rounds),
                   median(cost_tg, rounds), median(cost_tgs, rounds));
            printf(", \"step_us\": {\"steps\": %zu, \"in_process_p50\": %.1f, "
                   "\"in_process_p99\": %.1f, \"pipeline_p50\": %.1f, \"pipeline_p99\": %.1f, "
                   "\"added_p50\": %.1f, \"added_p99\": %.1f}",
                   lat.steps, lat.in_p50, lat.in_p99, lat.pipe_p50, lat.pipe_p99,
                   lat.pipe_p50 - lat.in_p50, lat.pipe_p99 - lat.in_p99);
        }
        if (step_bytes > 0) {
            /* Two ceilings: the bytes a step reads over the read rate, and
             * the file's size over it (the basis on which llama.cpp's
             * decode is usually set against the bandwidth) */
            double read = (read_gbs[0] + read_gbs[1]) / 2, decode = in_tg / seqs * step_bytes / 1e9;
            double file_gb = lp_gguf_file_size(lp_model_gguf(model)) / 1e9;
            printf(", \"decode_read\": {\"gb_per_token\": %.3f, \"decode_gb_s\": %.1f, "
                   "\"read_gb_s\": %.1f, \"read_gb_s_before\": %.1f, \"read_gb_s_after\": %.1f, "
                   "\"ceiling_tok_s\": %.1f, \"decode_of_ceiling_pct\": %.1f, "
                   "\"file_ceiling_tok_s\": %.1f, \"decode_of_file_ceiling_pct\": %.1f}",
                   step_bytes / 1e9, decode, read, read_gbs[0], read_gbs[1],
                   read * 1e9 / step_bytes * seqs, read > 0 ? 100.0 * decode / read : 0,
                   read / file_gb * seqs, read > 0 ? 100.0 * in_tg / seqs * file_gb / read : 0);
        }
        if (hp->n_expert > 0 && tg && mc[2].calls > mc[1].calls) {
            /* per MoE layer and decode step: each chosen expert read once,
             * however many of the step's tokens chose it */
            const double calls = (double)(mc[2].calls - mc[1].calls);
            printf(", \"moe\": {\"experts\": %d, \"used_per_token\": %d, \"tokens_per_layer_step\": %.2f, "
                   "\"choices_per_layer_step\": %.2f, \"expert_reads_per_layer_step\": %.2f, "
                   "\"expert_mb_per_step\": %.2f, \"expert_fraction_read\": %.4f}",
                   hp->n_expert, hp->n_expert_used, (mc[2].tokens - mc[1].tokens) / calls,
                   (mc[2].pairs - mc[1].pairs) / calls, (mc[2].expert_reads - mc[1].expert_reads) / calls,
                   (double)(mc[2].expert_bytes - mc[1].expert_bytes) / tg / 1048576.0, frac);
        }
        printf(", \"rss_mb\": %.1f, \"peak_rss_mb\": %.1f, \"file_mb\": %.1f, \"kv_mb\": %.1f, \"kv_block\": %d}\n",
               rss / 1024.0, hwm / 1024.0, lp_gguf_file_size(lp_model_gguf(model)) / 1048576.0,
               kv_mb, kv_blk);
    }
    free(fig);
    free(b.tokens);
    free(b.logits);
    lp_model_destroy(&model);
    return rc ? 1 : 0;
}
