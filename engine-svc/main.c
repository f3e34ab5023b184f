/* engine-svc - serves the compute engine: batched forward steps whose logit
 * rows go into the shared-memory ring (docs/PROTOCOL.md). */
#include "serve.h"

#include "curve.h"
#include "error.h"
#include "log.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: engine-svc --model M.gguf --endpoint EP [--max-seqs N] [--max-batch-tokens N]\n"
               "                  [--n-ctx N] [--threads N] [--backend cpu|cuda] [--exact]\n"
               "                  [--kv-block N] [--kv-pool-tokens N | --kv-pool-mb N]\n"
               "                  [--kv-pool-swa-tokens N]\n"
               "                  [--no-shm] [--shm-name /NAME] [--shm-slots N]\n" LP_CURVE_USAGE);
}

static int int64_arg(const char *flag, const char *v, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "engine-svc: %s: '%s' is not an integer in %lld..%lld\n", flag, v, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

static int int_arg(const char *flag, const char *v, int lo, int hi, int *out)
{
    long long x;
    if (int64_arg(flag, v, lo, hi, &x)) return -1;
    *out = (int)x;
    return 0;
}

int main(int argc, char **argv)
{
    lp_log_init("engine-svc");
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},     {"endpoint", required_argument, 0, 'e'},
        {"max-seqs", required_argument, 0, 's'},  {"max-batch-tokens", required_argument, 0, 'b'},
        {"n-ctx", required_argument, 0, 'c'},     {"threads", required_argument, 0, 't'},
        {"backend", required_argument, 0, 'B'},   {"exact", no_argument, 0, 'x'},
        {"no-shm", no_argument, 0, 'n'},          {"shm-name", required_argument, 0, 'N'},
        {"shm-slots", required_argument, 0, 'S'}, {"kv-block", required_argument, 0, 'K'},
        {"kv-pool-tokens", required_argument, 0, 'P'}, {"kv-pool-mb", required_argument, 0, 'M'},
        {"kv-pool-swa-tokens", required_argument, 0, 'W'},
        LP_CURVE_LONGOPTS, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    lp_engine_svc_params_t p = {0};
    const char *endpoint = NULL;
    lp_curve_opts_t sec = {0};
    int c, v;
    long long w;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'm': p.model_path = optarg; break;
        case 'e': endpoint = optarg; break;
        case 's': if (int_arg("--max-seqs", optarg, 1, 4096, &v)) return 2; p.engine.max_seqs = v; break;
        case 'b': if (int_arg("--max-batch-tokens", optarg, 1, 1 << 20, &v)) return 2; p.engine.max_batch_tokens = v; break;
        case 'c': if (int_arg("--n-ctx", optarg, 1, 1 << 24, &v)) return 2; p.engine.n_ctx = v; break;
        case 't': if (int_arg("--threads", optarg, 0, 1024, &v)) return 2; p.engine.n_threads = v; break;
        case 'B': p.engine.backend = optarg; break;
        case 'x': p.engine.exact = true; break;
        case 'n': p.no_shm = true; break;
        case 'N': p.shm_name = optarg; break;
        case 'S': if (int_arg("--shm-slots", optarg, 1, 4096, &v)) return 2; p.shm_slots = v; break;
        /* --kv-block 0 is the contiguous layout; the engine's 0 means its default */
        case 'K': if (int_arg("--kv-block", optarg, 0, 1 << 16, &v)) return 2;
                  p.engine.kv_block = v ? v : LP_ENGINE_KV_CONTIGUOUS; break;
        case 'P': if (int64_arg("--kv-pool-tokens", optarg, 1, 1LL << 40, &w)) return 2; p.engine.kv_pool_tokens = w; break;
        case 'M': if (int64_arg("--kv-pool-mb", optarg, 1, 1LL << 30, &w)) return 2; p.engine.kv_pool_mb = w; break;
        case 'W': if (int64_arg("--kv-pool-swa-tokens", optarg, 1, 1LL << 40, &w)) return 2; p.engine.kv_pool_swa_tokens = w; break;
        case 'h': usage(stdout); return 0;
        default:
            if (lp_curve_opts_take(&sec, c, optarg)) break;
            usage(stderr);
            return 2;
        }
    }
    if (!p.model_path || !endpoint || optind != argc) {
        usage(stderr);
        return 2;
    }
    lp_engine_svc_t *svc;
    if (lp_engine_svc_new(&p, &svc)) {
        fprintf(stderr, "engine-svc: %s\n", lp_error_msg());
        return 1;
    }
    int rc = lp_service_run_secure(&lp_engine_svc_ops, svc, endpoint, &sec);
    if (rc) fprintf(stderr, "engine-svc: %s\n", lp_error_msg());
    lp_engine_svc_destroy(&svc);
    return rc ? 1 : 0;
}
