/* cmd-generate.c - `lmpipe generate`: a client of a running pipeline. */
#include "lmpipe.h"

#include "client.h"
#include "error.h"
#include "gen-args.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: lmpipe generate --endpoint EP --prompt TEXT [options]\n%s"
               "  --stream             print each piece as it comes\n"
               "  --curve-key F.key --server-key KEY   CURVE on a tcp:// endpoint (docs/SECURITY.md)\n%s", lp_gen_args_usage,
            lp_gen_args_exit_usage);
}

static void print_piece(void *arg, int32_t id, const uint8_t *piece, size_t len)
{
    (void)id;
    *(size_t *)arg += len;
    fwrite(piece, 1, len, stdout);
    fflush(stdout);
}

int lp_cmd_generate(int argc, char **argv)
{
    lp_gen_args_t ga;
    lp_gen_args_init(&ga);
    const char *endpoint = NULL, *key = NULL, *server_key = NULL;
    bool stream = false;
    for (int i = 1; i < argc; i++) {
        int t = lp_gen_args_take(&ga, "generate", argc, argv, &i);
        if (t < 0) return 2;
        if (t) continue;
        if (!strcmp(argv[i], "--endpoint") && i + 1 < argc) endpoint = argv[++i];
        else if (!strcmp(argv[i], "--stream")) stream = true;
        else if (!strcmp(argv[i], "--curve-key") && i + 1 < argc) key = argv[++i];
        else if (!strcmp(argv[i], "--server-key") && i + 1 < argc) server_key = argv[++i];
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return lp_cmd_usage_error("generate", "unknown or incomplete option '%s'", argv[i]);
        }
    }
    if (!endpoint) return lp_cmd_usage_error("generate", "--endpoint is required");
    Lmpipe__GenerateRequest g;
    if (lp_gen_args_request(&ga, "generate", &g)) return 2;
    lp_client_t *c = NULL;
    lp_generation_t gen = {0};
    int rc = lp_client_new_curve(endpoint, key, server_key, &c);
    if (!rc) rc = lp_client_hello(c, 10000);
    bool live = stream && !ga.ids;
    size_t streamed = 0;
    if (!rc) rc = lp_client_generate(c, (uint64_t)getpid(), &g, 120000, live ? print_piece : NULL,
                                     &streamed, &gen);
    int status = rc == LP_ERR(ECONNRESET) ? LP_GEN_EXIT_LOST : 1;
    if (rc) fprintf(stderr, "lmpipe generate: %s\n", lp_error_msg());
    else if (live) {
        /* The pieces are out; the final tail is what remains. */
        if (gen.reason == LMPIPE__FINISH_REASON__FINISH_ERROR) {
            status = lp_gen_args_print(&ga, "generate", &gen);
        } else {
            if (gen.text_len > streamed) fwrite(gen.text + streamed, 1, gen.text_len - streamed, stdout);
            putchar('\n');
            status = fflush(stdout) == 0 ? lp_gen_args_finish("generate", &gen) : 1;
        }
    } else status = lp_gen_args_print(&ga, "generate", &gen);
    lp_generation_clear(&gen);
    lp_gen_args_clear(&ga);
    lp_client_destroy(&c);
    return status;
}
