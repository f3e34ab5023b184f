/* tokenizer-params.c - tokenizer-svc's parameter table (see tokenizer-params.h). */
#include "tokenizer-params.h"

#include <stddef.h>

#define O(f) offsetof(lp_tokenizer_opts_t, f)
static const lp_param_t rows[] = {
    {"model", "model", LP_P_STR, 0, 0, NULL, O(model), "the GGUF model (its tokenizer)", true, false},
    {"tokenizer.endpoint", "endpoint", LP_P_STR, 0, 0, "ipc://RUN_DIR/tokenizer.sock", O(endpoint),
     "the endpoint it binds (of a list EP,EP, the first: the coordinator's tokenizers)", true, false},
    {"tokenizer.chat_template_file", "chat-template-file", LP_P_STR, 0, 0, "the model's tokenizer.chat_template",
     O(chat_template_file), "a Jinja chat template file used instead of the model's (docs/TEMPLATES.md)", false,
     false},
    LP_CURVE_PARAMS(lp_tokenizer_opts_t, curve),
};
#undef O

const lp_params_t lp_tokenizer_params = {"tokenizer", "tokenizer-svc",
                                         "serves the tokenizer: text to ids and ids to text (docs/PROTOCOL.md)", rows,
                                         sizeof(rows) / sizeof(rows[0]), sizeof(lp_tokenizer_opts_t)};
