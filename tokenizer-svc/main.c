/* tokenizer-svc - serves the tokenizer: text to ids and ids to text
 * (docs/PROTOCOL.md). */
#include "serve.h"

#include "curve.h"
#include "error.h"
#include "log.h"

#include <getopt.h>
#include <stdio.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: tokenizer-svc --model M.gguf --endpoint EP [--chat-template-file F.jinja]\n"
               LP_CURVE_USAGE);
}

int main(int argc, char **argv)
{
    lp_log_init("tokenizer-svc");
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                         {"endpoint", required_argument, 0, 'e'},
                                         {"chat-template-file", required_argument, 0, 't'},
                                         LP_CURVE_LONGOPTS, {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *model = NULL, *endpoint = NULL, *chat_template = NULL;
    lp_curve_opts_t sec = {0};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'e': endpoint = optarg; break;
        case 't': chat_template = optarg; break;
        case 'h': usage(stdout); return 0;
        default:
            if (lp_curve_opts_take(&sec, c, optarg)) break;
            usage(stderr);
            return 2;
        }
    }
    if (!model || !endpoint || optind != argc) {
        usage(stderr);
        return 2;
    }
    lp_tokenizer_svc_t *svc;
    if (lp_tokenizer_svc_new(model, chat_template, &svc)) {
        fprintf(stderr, "tokenizer-svc: %s\n", lp_error_msg());
        return 1;
    }
    int rc = lp_service_run_secure(&lp_tokenizer_svc_ops, svc, endpoint, &sec);
    if (rc) fprintf(stderr, "tokenizer-svc: %s\n", lp_error_msg());
    lp_tokenizer_svc_destroy(&svc);
    return rc ? 1 : 0;
}
