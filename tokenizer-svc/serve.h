/* serve.h - tokenizer-svc's request handling: tokenize, detokenize (each
 * id's piece, statelessly) and chat templates. */
#ifndef LP_TOKENIZER_SERVE_H
#define LP_TOKENIZER_SERVE_H

#include "service.h"

typedef struct lp_tokenizer_svc lp_tokenizer_svc_t;

/* `model_path`: a model or a vocab-only GGUF.  `chat_template_file` (may be
 * NULL): a Jinja chat template to use instead of the model's. */
int lp_tokenizer_svc_new(const char *model_path, const char *chat_template_file, lp_tokenizer_svc_t **out);
void lp_tokenizer_svc_destroy(lp_tokenizer_svc_t **self_p);
extern const lp_service_ops_t lp_tokenizer_svc_ops;

#endif
