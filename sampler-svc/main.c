/* sampler-svc - serves the sampler: one session per generation request,
 * rows read in place from the engine's ring (docs/PROTOCOL.md). */
#include "serve.h"

#include "curve.h"
#include "error.h"
#include "log.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: sampler-svc --model M.gguf --endpoint EP [--default JSON] [--no-shm]\n"
               "                   [--plugin-dir DIR] [--state-file FILE] [--plugin-timeout-ms MS]\n" LP_CURVE_USAGE
               "--plugin-dir: the only folder SamplerControl \"load\" takes plugins from\n"
               "(without it every load is refused; docs/SAMPLER.md).\n"
               "--state-file: every strategy change is saved there and read back at start,\n"
               "so live swaps survive a restart (docs/SAMPLER.md).\n");
}

int main(int argc, char **argv)
{
    lp_log_init("sampler-svc");
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"endpoint", required_argument, 0, 'e'},
        {"default", required_argument, 0, 'd'}, {"no-shm", no_argument, 0, 'n'},
        {"plugin-dir", required_argument, 0, 'P'}, {"state-file", required_argument, 0, 'S'},
        {"plugin-timeout-ms", required_argument, 0, 'T'},
        LP_CURVE_LONGOPTS, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    lp_sampler_svc_params_t p = {.plugin_timeout_ms = 2000};
    const char *endpoint = NULL;
    lp_curve_opts_t sec = {0};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'm': p.model_path = optarg; break;
        case 'e': endpoint = optarg; break;
        case 'd': p.default_json = optarg; break;
        case 'n': p.no_shm = true; break;
        case 'P': p.plugin_dir = optarg; break;
        case 'S': p.state_file = optarg; break;
        case 'T': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || end == optarg || v < 0 || v > 3600000) {
                fprintf(stderr, "sampler-svc: --plugin-timeout-ms: '%s' is not in 0..3600000\n", optarg);
                return 2;
            }
            p.plugin_timeout_ms = (int)v;
            break;
        }
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
    lp_sampler_svc_t *svc;
    if (lp_sampler_svc_new(&p, &svc)) {
        fprintf(stderr, "sampler-svc: %s\n", lp_error_msg());
        return 1;
    }
    int rc = lp_service_run_secure(&lp_sampler_svc_ops, svc, endpoint, &sec);
    if (rc) fprintf(stderr, "sampler-svc: %s\n", lp_error_msg());
    lp_sampler_svc_destroy(&svc);
    return rc ? 1 : 0;
}
