/* coordinator - owns the generation requests: tokenize, schedule engine
 * steps, sample, stop, stream (docs/PROTOCOL.md). */
#include "coord.h"

#include "curve.h"
#include "error.h"
#include "log.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: coordinator --endpoint EP --tokenizer EP --engine EP --sampler EP\n"
               "                   [--no-shm] [--max-seqs N] [--max-batch-tokens N] [--max-requests N]\n"
               "                   [--max-queued-per-client N]\n"
               "                   [--tokenizer-server-key KEY] [--engine-server-key KEY]\n"
               "                   [--sampler-server-key KEY]\n" LP_CURVE_USAGE
               "--max-requests: queued and running requests in all (default 1024);\n"
               "--max-queued-per-client: requests one client may have waiting for a slot\n"
               "(default max-requests / 4); waiting requests are admitted round-robin across\n"
               "clients.\n");
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
        {"max-requests", required_argument, 0, 'r'},
        {"max-queued-per-client", required_argument, 0, 'Q'},
        {"tokenizer-server-key", required_argument, 0, 'T'},
        {"engine-server-key", required_argument, 0, 'G'},
        {"sampler-server-key", required_argument, 0, 'P'}, LP_CURVE_LONGOPTS, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    lp_coord_params_t p = {0};
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
        case 'T': p.tokenizer_key = optarg; break;
        case 'G': p.engine_key = optarg; break;
        case 'P': p.sampler_key = optarg; break;
        case 'S': if (int_arg("--max-seqs", optarg, &p.max_seqs)) return 2; break;
        case 'b': if (int_arg("--max-batch-tokens", optarg, &p.max_batch_tokens)) return 2; break;
        case 'r': if (int_arg("--max-requests", optarg, &p.max_requests)) return 2; break;
        case 'Q':
            if (int_arg("--max-queued-per-client", optarg, &p.max_queued_per_client)) return 2;
            break;
        case 'h': usage(stdout); return 0;
        default:
            if (lp_curve_opts_take(&sec, c, optarg)) break;
            usage(stderr);
            return 2;
        }
    }
    if (!endpoint || !p.tokenizer_endpoint || !p.engine_endpoint || !p.sampler_endpoint ||
        optind != argc) {
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
    return rc ? 1 : 0;
}
