/* cmd-score.c - `lmpipe score`: run the engine in-process over a token list
 * and print, for each position i, the top log-probabilities of the logits
 * after consuming ids[0..i]:
 *     {"pos": i, "top": [[id, logprob], ...]}
 * logprob is the log-softmax over the whole row. */
#include "lmpipe.h"

#include "engine.h"
#include "error.h"
#include "sysinfo.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parse "1,403,407" into a new array; returns the count or -1. */
static int32_t parse_ids(const char *s, int32_t **out)
{
    int32_t n = 0, cap = 64;
    int32_t *ids = malloc(sizeof(*ids) * (size_t)cap);
    if (!ids) return -1;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > INT32_MAX || (*end && *end != ',')) {
            free(ids);
            return -1;
        }
        if (n == cap) {
            cap *= 2;
            int32_t *p = realloc(ids, sizeof(*ids) * (size_t)cap);
            if (!p) { free(ids); return -1; }
            ids = p;
        }
        ids[n++] = (int32_t)v;
        s = *end ? end + 1 : end;
    }
    *out = ids;
    return n;
}

static void print_top(int32_t pos, const float *row, int32_t n_vocab, int top)
{
    float max = -INFINITY;
    for (int32_t i = 0; i < n_vocab; i++) if (row[i] > max) max = row[i];
    double sum = 0;
    for (int32_t i = 0; i < n_vocab; i++) sum += exp((double)row[i] - max);
    const double lse = max + log(sum);
    int32_t best[64];
    int n = 0;
    for (int32_t i = 0; i < n_vocab; i++) { /* insertion into a short sorted list */
        if (n == top && row[i] <= row[best[n - 1]]) continue;
        int k = n < top ? n++ : n - 1;
        while (k > 0 && row[best[k - 1]] < row[i]) { best[k] = best[k - 1]; k--; }
        best[k] = i;
    }
    printf("{\"pos\": %d, \"top\": [", pos);
    for (int k = 0; k < n; k++)
        printf("%s[%d, %.6f]", k ? ", " : "", best[k], (double)row[best[k]] - lse);
    printf("]}\n");
}

int lp_cmd_score(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, NULL, 'm'}, {"ids", required_argument, NULL, 'i'},
        {"top", required_argument, NULL, 't'},   {"stats", no_argument, NULL, 's'},
        {"exact", no_argument, NULL, 'e'},       {"threads", required_argument, NULL, 'j'},
        {"backend", required_argument, NULL, 'b'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *model_path = NULL, *ids_arg = NULL, *backend = NULL;
    int top = 5, stats = 0, exact = 0, threads = 0, c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model_path = optarg; break;
        case 'i': ids_arg = optarg; break;
        case 't': top = atoi(optarg); break;
        case 's': stats = 1; break;
        case 'e': exact = 1; break;
        case 'j': threads = atoi(optarg); break;
        case 'b': backend = optarg; break;
        case 'h':
            printf("usage: lmpipe score --model M --ids 1,403,407 [--top 5] [--stats] [--exact]"
                   " [--threads N] [--backend cpu|cuda]\n");
            return 0;
        default:
            return lp_cmd_usage_error("score", "unknown or incomplete option '%s'",
                                      argv[optind - 1]);
        }
    }
    if (optind < argc) return lp_cmd_usage_error("score", "unexpected argument '%s'", argv[optind]);
    if (!model_path || !ids_arg)
        return lp_cmd_usage_error("score", "--model and --ids are required");
    if (top < 1 || top > 64) return lp_cmd_usage_error("score", "--top must be 1..64");
    if (threads < 0) return lp_cmd_usage_error("score", "--threads must not be negative");
    int32_t *ids = NULL;
    int32_t n = parse_ids(ids_arg, &ids);
    if (n <= 0)
        return lp_cmd_usage_error("score", "--ids must be a comma-separated list of token ids");

    double t0 = lp_now_s();
    lp_model_t *model = NULL;
    lp_engine_t *eng = NULL;
    float *logits = NULL;
    float **rows = NULL;
    int rc = lp_model_load(model_path, &model);
    const lp_hparams_t *hp = rc ? NULL : lp_model_hparams(model);
    const int32_t chunk = n < 256 ? n : 256;
    lp_engine_params_t ep = {.n_ctx = n, .max_seqs = 1, .max_batch_tokens = chunk,
                             .n_threads = threads, .exact = exact, .backend = backend};
    if (!rc) rc = lp_engine_new(model, &ep, &eng);
    double t_load = lp_now_s() - t0, t_eval = 0;
    if (!rc) {
        logits = malloc(sizeof(float) * (size_t)chunk * (size_t)hp->n_vocab);
        rows = malloc(sizeof(float *) * (size_t)chunk);
        if (!logits || !rows) rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
    }
    for (int32_t pos = 0; !rc && pos < n; pos += chunk) {
        int32_t k = n - pos < chunk ? n - pos : chunk;
        for (int32_t r = 0; r < k; r++) rows[r] = logits + (size_t)r * hp->n_vocab;
        lp_batch_seq_t b = {.seq_id = 0, .pos = pos, .n_tokens = k, .tokens = ids + pos,
                            .n_logits = k};
        double t1 = lp_now_s();
        rc = lp_engine_step(eng, &b, 1, rows);
        t_eval += lp_now_s() - t1;
        for (int32_t r = 0; !rc && r < k; r++) print_top(pos + r, rows[r], hp->n_vocab, top);
    }
    if (rc) fprintf(stderr, "lmpipe score: %s\n", lp_error_msg());
    else if (stats)
        fprintf(stderr, "{\"stats\": {\"backend\": \"%s\", \"tokens\": %d, \"load_s\": %.4f, "
                "\"eval_s\": %.4f, \"tok_s\": %.2f, \"rss_mb\": %.1f, \"file_mb\": %.1f}}\n",
                lp_engine_backend_name(eng), n, t_load, t_eval, n / t_eval, lp_proc_status_kb("VmRSS") / 1024.0,
                lp_gguf_file_size(lp_model_gguf(model)) / 1048576.0);
    free(rows);
    free(logits);
    free(ids);
    lp_engine_destroy(&eng);
    lp_model_destroy(&model);
    return rc ? 1 : 0;
}
