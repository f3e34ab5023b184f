/* tokenizer-svc - serves the tokenizer: text to ids and ids to text
 * (docs/PROTOCOL.md).  Its parameters: tokenizer-params.c. */
#include "serve.h"
#include "tokenizer-params.h"

#include "error.h"
#include "log.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    lp_log_init("tokenizer-svc");
    lp_tokenizer_opts_t o = {0};
    lp_params_ctx_t *ctx;
    int prc = lp_params_parse(&lp_tokenizer_params, &o, argc, argv, &ctx);
    if (prc) return prc == 1 ? 0 : 2;
    char endpoint[1024]; /* the first of a list */
    snprintf(endpoint, sizeof(endpoint), "%.*s", (int)strcspn(o.endpoint, ","), o.endpoint);
    lp_tokenizer_svc_t *svc;
    if (lp_tokenizer_svc_new(o.model, o.chat_template_file, &svc)) {
        fprintf(stderr, "tokenizer-svc: %s\n", lp_error_msg());
        lp_params_ctx_destroy(&ctx);
        return 1;
    }
    int rc = lp_service_run_secure(&lp_tokenizer_svc_ops, svc, endpoint, &o.curve);
    if (rc) fprintf(stderr, "tokenizer-svc: %s\n", lp_error_msg());
    lp_tokenizer_svc_destroy(&svc);
    lp_params_ctx_destroy(&ctx);
    return rc ? 1 : 0;
}
