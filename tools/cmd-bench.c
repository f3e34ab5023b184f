/* cmd-bench.c - `lmpipe bench`: prefill and decode throughput of the engine,
 * measured like llama-bench's pp/tg tests: prefill of --prompt-tokens in
 * chunks of --batch tokens into an empty cache, then --gen-tokens single-
 * token decode steps from an empty cache, each after one warm-up run.
 * Prints one JSON object. */
#include "lmpipe.h"

#include "engine.h"
#include "error.h"
#include "sysinfo.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bench {
    lp_engine_t *eng;
    int32_t n_vocab, batch;
    int32_t *tokens;
    float *logits;
} bench_t;

static int run_prefill(bench_t *b, int32_t n, double *secs)
{
    lp_engine_seq_reset(b->eng, 0);
    double t0 = lp_now_s();
    for (int32_t pos = 0; pos < n; pos += b->batch) {
        int32_t k = n - pos < b->batch ? n - pos : b->batch;
        lp_batch_seq_t s = {0, pos, k, b->tokens + pos, pos + k == n};
        int rc = lp_engine_step(b->eng, &s, 1, &b->logits);
        if (rc) return rc;
    }
    *secs = lp_now_s() - t0;
    return 0;
}

static int run_decode(bench_t *b, int32_t n, double *secs)
{
    lp_engine_seq_reset(b->eng, 0);
    double t0 = lp_now_s();
    for (int32_t pos = 0; pos < n; pos++) {
        lp_batch_seq_t s = {0, pos, 1, b->tokens + pos, 1};
        int rc = lp_engine_step(b->eng, &s, 1, &b->logits);
        if (rc) return rc;
    }
    *secs = lp_now_s() - t0;
    return 0;
}

int lp_cmd_bench(int argc, char **argv)
{
    /* The pipeline's per-step overhead lives in cmd-bench-pipeline.c. */
    if (argc > 1 && !strcmp(argv[1], "--pipeline")) return lp_cmd_bench_pipeline(argc - 1, argv + 1);
    static const struct option opts[] = {
        {"model", required_argument, NULL, 'm'},
        {"prompt-tokens", required_argument, NULL, 'p'},
        {"gen-tokens", required_argument, NULL, 'g'},
        {"threads", required_argument, NULL, 't'},
        {"batch", required_argument, NULL, 'b'},
        {"backend", required_argument, NULL, 'B'},
        {"exact", no_argument, NULL, 'e'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *model_path = NULL, *backend = NULL;
    int pp = 512, tg = 128, threads = 0, batch = 512, exact = 0, c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model_path = optarg; break;
        case 'p': pp = atoi(optarg); break;
        case 'g': tg = atoi(optarg); break;
        case 't': threads = atoi(optarg); break;
        case 'b': batch = atoi(optarg); break;
        case 'B': backend = optarg; break;
        case 'e': exact = 1; break;
        case 'h':
            printf("usage: lmpipe bench --model M [--prompt-tokens 512] [--gen-tokens 128] "
                   "[--threads N] [--batch 512] [--backend cpu|cuda] [--exact]\n");
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

    lp_model_t *model = NULL;
    bench_t b = {0};
    int rc = lp_model_load(model_path, &model);
    int32_t n_ctx = (pp > tg ? pp : tg) + 1;
    if (!rc) {
        const lp_hparams_t *hp = lp_model_hparams(model);
        lp_engine_params_t ep = {.n_ctx = n_ctx, .max_seqs = 1, .max_batch_tokens = batch,
                                 .n_threads = threads, .exact = exact, .backend = backend};
        b.n_vocab = hp->n_vocab;
        b.batch = batch;
        rc = lp_engine_new(model, &ep, &b.eng);
    }
    if (!rc) {
        b.tokens = malloc(sizeof(int32_t) * (size_t)n_ctx);
        b.logits = malloc(sizeof(float) * (size_t)b.n_vocab);
        if (!b.tokens || !b.logits) rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
        unsigned s = 1234;
        for (int32_t i = 0; b.tokens && i < n_ctx; i++) {
            s = s * 1103515245u + 12345u;
            b.tokens[i] = (int32_t)((s >> 8) % (unsigned)lp_model_hparams(model)->n_tokens_real);
        }
    }
    double t_pp = 0, t_tg = 0, warm;
    if (!rc && pp) rc = run_prefill(&b, pp < b.batch ? pp : b.batch, &warm);
    if (!rc && pp) rc = run_prefill(&b, pp, &t_pp);
    if (!rc && tg) rc = run_decode(&b, tg < 16 ? tg : 16, &warm);
    if (!rc && tg) rc = run_decode(&b, tg, &t_tg);
    if (rc) {
        fprintf(stderr, "lmpipe bench: %s\n", lp_error_msg());
    } else {
        const lp_hparams_t *hp = lp_model_hparams(model);
        double kv_mb = 2.0 * hp->n_layer * n_ctx * hp->n_head_kv * hp->head_dim * 4 / 1048576.0;
        printf("{\"model\": \"%s\", \"backend\": \"%s\", \"mode\": \"in-process\", "
               "\"threads\": %d, \"prompt_tokens\": %d, \"gen_tokens\": %d, "
               "\"prefill_tok_s\": %.2f, \"decode_tok_s\": %.2f, \"rss_mb\": %.1f, "
               "\"peak_rss_mb\": %.1f, \"file_mb\": %.1f, \"kv_mb\": %.1f}\n",
               model_path, lp_engine_backend_name(b.eng), threads, pp, tg,
               pp ? pp / t_pp : 0.0, tg ? tg / t_tg : 0.0, lp_proc_status_kb("VmRSS") / 1024.0,
               lp_proc_status_kb("VmHWM") / 1024.0,
               lp_gguf_file_size(lp_model_gguf(model)) / 1048576.0, kv_mb);
    }
    free(b.tokens);
    free(b.logits);
    lp_engine_destroy(&b.eng);
    lp_model_destroy(&model);
    return rc ? 1 : 0;
}
