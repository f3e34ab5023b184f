/* coordinator - owns the generation requests: tokenize, schedule engine
 * steps, sample, stop, stream (docs/PROTOCOL.md). */
#include "coord.h"

#include "curve.h"
#include "error.h"
#include "log.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: coordinator --endpoint EP --tokenizer EP[,EP...] [--tokenizer-server-key KEY[,KEY...]]\n"
               "                   (--engine EP --sampler EP [--engine-server-key KEY] [--sampler-server-key KEY]\n"
               "                    | --group NAME,ENGINE_EP,SAMPLER_EP[,KEY[,SAMPLER_KEY]]...)\n"
               "                   [--no-shm] [--max-seqs N] [--max-batch-tokens N] [--max-requests N]\n"
               "                   [--max-queued-per-client N] [--no-prefix-cache] [--kv-blocks N]\n"
               "                   [--prefill-chunk N] [--drain-grace-ms N]\n" LP_CURVE_USAGE
               "--max-requests: queued and running requests in all (default 1024);\n"
               "--max-queued-per-client: requests one client may have waiting for a slot\n"
               "(default max-requests / 4); waiting requests are admitted round-robin across\n"
               "clients.\n"
               "--prefill-chunk: prompt tokens a step carries beside running requests' decode\n"
               "tokens (default %d; a step with none takes up to max-batch-tokens).\n"
               "--no-prefix-cache: with paged engines, no KV block is shared between requests\n"
               "(every prompt is prefilled whole); --kv-blocks: use at most N blocks of each\n"
               "paged engine's KV pool.\n"
               "--drain-grace-ms: after SIGTERM, new requests are refused (\"draining\") and\n"
               "running ones have this long to finish before they end with an error \"shutting\n"
               "down\" (default %d; 0: end them at once); a second signal stops at once.\n",
            LP_COORD_PREFILL_CHUNK, LP_COORD_DRAIN_GRACE_MS);
}

/* NAME,ENGINE_EP,SAMPLER_EP[,SERVER_KEY[,SAMPLER_KEY]], split in a copy
 * (argv stays as ps shows it; endpoints and Z85 keys hold no comma). */
static int group_arg(char *v, lp_coord_group_params_t *g)
{
    const char **dst[5] = {&g->name, &g->engine, &g->sampler, &g->server_key, &g->sampler_key};
    char whole[1024];
    snprintf(whole, sizeof(whole), "%s", v);
    char *rest = v, *tok;
    int n = 0;
    /* An empty key field is "no key": NAME,ENG,SAMP,,SAMPLER_KEY. */
    while ((tok = strsep(&rest, ",")) && n < 5) {
        *dst[n] = n >= 3 && !tok[0] ? NULL : tok;
        n++;
    }
    if (n < 3 || tok || !g->name[0] || !g->engine[0] || !g->sampler[0]) {
        fprintf(stderr, "coordinator: --group: '%s' is not NAME,ENGINE_EP,SAMPLER_EP[,SERVER_KEY"
                "[,SAMPLER_KEY]]\n", whole);
        return -1;
    }
    return 0;
}

static int int_arg(const char *flag, const char *v, int *out)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (!*v || *end || x < 1 || x > (1 << 24)) {
        fprintf(stderr, "coordinator: %s: '%s' is not a positive integer\n", flag, v);
        return -1;
    }
    *out = (int)x;
    return 0;
}

int main(int argc, char **argv)
{
    lp_log_init("coordinator");
    static const struct option opts[] = {
        {"endpoint", required_argument, 0, 'e'}, {"tokenizer", required_argument, 0, 't'},
        {"engine", required_argument, 0, 'g'},   {"sampler", required_argument, 0, 's'},
        {"no-shm", no_argument, 0, 'n'},         {"max-seqs", required_argument, 0, 'S'},
        {"max-batch-tokens", required_argument, 0, 'b'},
        {"prefill-chunk", required_argument, 0, 'c'},
        {"max-requests", required_argument, 0, 'r'},
        {"max-queued-per-client", required_argument, 0, 'Q'},
        {"tokenizer-server-key", required_argument, 0, 'T'},
        {"engine-server-key", required_argument, 0, 'E'},
        {"sampler-server-key", required_argument, 0, 'P'},
        {"no-prefix-cache", no_argument, 0, 'C'}, {"kv-blocks", required_argument, 0, 'K'},
        {"drain-grace-ms", required_argument, 0, 'D'},
        {"group", required_argument, 0, 'G'}, LP_CURVE_LONGOPTS, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    lp_coord_params_t p = {0};
    lp_coord_group_params_t groups[LP_COORD_MAX_GROUPS];
    char *group_args[LP_COORD_MAX_GROUPS];
    const char *endpoint = NULL;
    lp_curve_opts_t sec = {0};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'e': endpoint = optarg; break;
        case 't': p.tokenizer_endpoint = optarg; break;
        case 'g': p.engine_endpoint = optarg; break;
        case 's': p.sampler_endpoint = optarg; break;
        case 'n': p.no_shm = true; break;
        case 'C': p.no_prefix_cache = true; break;
        case 'K': if (int_arg("--kv-blocks", optarg, &p.kv_blocks)) return 2; break;
        case 'T': p.tokenizer_key = optarg; break;
        case 'E': p.engine_key = optarg; break;
        case 'P': p.sampler_key = optarg; break;
        case 'G':
            if (p.n_groups == LP_COORD_MAX_GROUPS) {
                fprintf(stderr, "coordinator: --group: at most %d groups\n", LP_COORD_MAX_GROUPS);
                return 2;
            }
            groups[p.n_groups] = (lp_coord_group_params_t){0};
            if (!(group_args[p.n_groups] = strdup(optarg))) return 1;
            if (group_arg(group_args[p.n_groups], &groups[p.n_groups])) return 2;
            p.n_groups++;
            break;
        case 'S': if (int_arg("--max-seqs", optarg, &p.max_seqs)) return 2; break;
        case 'b': if (int_arg("--max-batch-tokens", optarg, &p.max_batch_tokens)) return 2; break;
        case 'c': if (int_arg("--prefill-chunk", optarg, &p.prefill_chunk)) return 2; break;
        case 'r': if (int_arg("--max-requests", optarg, &p.max_requests)) return 2; break;
        case 'Q':
            if (int_arg("--max-queued-per-client", optarg, &p.max_queued_per_client)) return 2;
            break;
        case 'D': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (!*optarg || *end || v < 0 || v > 3600000) {
                fprintf(stderr, "coordinator: --drain-grace-ms: '%s' is not 0..3600000\n", optarg);
                return 2;
            }
            p.drain_grace_ms = v ? (int)v : -1;
            break;
        }
        case 'h': usage(stdout); return 0;
        default:
            if (lp_curve_opts_take(&sec, c, optarg)) break;
            usage(stderr);
            return 2;
        }
    }
    p.groups = groups;
    if (!endpoint || !p.tokenizer_endpoint ||
        (!p.n_groups && (!p.engine_endpoint || !p.sampler_endpoint)) || optind != argc) {
        usage(stderr);
        return 2;
    }
    lp_coord_t *coord;
    if (lp_coord_new(&p, &coord)) {
        fprintf(stderr, "coordinator: %s\n", lp_error_msg());
        return 1;
    }
    int rc = lp_service_run_secure(&lp_coord_ops, coord, endpoint, &sec);
    if (rc) fprintf(stderr, "coordinator: %s\n", lp_error_msg());
    lp_coord_destroy(&coord);
    for (size_t i = 0; i < p.n_groups; i++) free(group_args[i]);
    return rc ? 1 : 0;
}
