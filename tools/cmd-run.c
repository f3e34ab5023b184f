/* cmd-run.c - `lmpipe run`: start a pipeline, generate once, stop it. */
#include "lmpipe.h"

#include "client.h"
#include "error.h"
#include "gen-args.h"
#include "pipeline.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: lmpipe run --model M.gguf --prompt TEXT [options]\n%s"
               "  --no-shm             logit rows inline instead of in shared memory\n"
               "  --threads N          engine threads\n"
               "  --n-ctx N            context positions per sequence (default: the engine's)\n%s",
            lp_gen_args_usage, lp_gen_args_exit_usage);
}

int lp_cmd_run(int argc, char **argv)
{
    lp_gen_args_t ga;
    lp_gen_args_init(&ga);
    lp_pipeline_opts_t o = {0};
    lp_config_t *cfg = lp_config_new(); /* the services' keys */
    if (!cfg) return 1;
    o.cfg = cfg;
    bool have_model = false;
    int bad = 0;
    for (int i = 1; i < argc && !bad; i++) {
        int t = lp_gen_args_take(&ga, "run", argc, argv, &i);
        if (t < 0) bad = 2;
        if (t) continue;
        if (!strcmp(argv[i], "--model") && i + 1 < argc) {
            lp_config_set(cfg, "model", argv[++i]);
            have_model = true;
        } else if (!strcmp(argv[i], "--no-shm")) lp_config_set(cfg, "no_shm", "true");
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            long long n;
            if (lp_gen_args_int("run", "--threads", argv[++i], 0, 1024, &n)) bad = 2;
            else lp_config_setf(cfg, "threads", "%lld", n);
        } else if (!strcmp(argv[i], "--n-ctx") && i + 1 < argc) {
            long long n;
            if (lp_gen_args_int("run", "--n-ctx", argv[++i], 1, 1 << 24, &n)) bad = 2;
            else lp_config_setf(cfg, "n_ctx", "%lld", n);
        }
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            lp_config_destroy(&cfg);
            return 0;
        } else {
            usage(stderr);
            lp_config_destroy(&cfg);
            return lp_cmd_usage_error("run", "unknown or incomplete option '%s'", argv[i]);
        }
    }
    if (bad || !have_model) {
        lp_config_destroy(&cfg);
        return bad ? bad : lp_cmd_usage_error("run", "--model is required");
    }
    Lmpipe__GenerateRequest g;
    if (lp_gen_args_request(&ga, "run", &g)) {
        lp_config_destroy(&cfg);
        return 2;
    }

    signal(SIGPIPE, SIG_IGN);
    uv_loop_t loop;
    uv_loop_init(&loop);
    lp_pipeline_t *p = NULL;
    lp_client_t *c = NULL;
    lp_generation_t gen = {0};
    int status = 1;
    int rc = lp_pipeline_start(&loop, &o, &p);
    if (!rc) rc = lp_pipeline_wait_ready(p, 60000);
    if (!rc) rc = lp_client_new(lp_pipeline_endpoint(p), &c);
    if (!rc) rc = lp_client_hello(c, 10000);
    if (!rc) rc = lp_client_generate(c, 1, &g, 120000, NULL, NULL, &gen);
    if (rc) fprintf(stderr, "lmpipe run: %s\n", lp_error_msg());
    else status = lp_gen_args_print(&ga, "run", &gen);
    lp_generation_clear(&gen);
    lp_gen_args_clear(&ga);
    lp_client_destroy(&c);
    if (p && lp_pipeline_stop(p) != 0 && status == 0) {
        fprintf(stderr, "lmpipe run: %s\n", lp_error_msg());
        status = 1;
    }
    lp_pipeline_destroy(&p);
    uv_loop_close(&loop);
    lp_config_destroy(&cfg);
    return status;
}
