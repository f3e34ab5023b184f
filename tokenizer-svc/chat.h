/* chat.h - chat templates: recognise tokenizer.chat_template and format
 * messages with it (tokenizer-svc's apply-chat-template).  The vocabulary
 * they read from is lib/vocab/tokenizer.h. */
#ifndef LP_CHAT_H
#define LP_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "tokenizer.h"

/* ---- chat templates ------------------------------------------------------ */

enum lp_chat_template {
    LP_CHAT_UNKNOWN = 0,
    LP_CHAT_CHATML,           /* Qwen, <|im_start|> */
    LP_CHAT_LLAMA2,           /* [INST] without system support */
    LP_CHAT_LLAMA2_SYS,       /* [INST] <<SYS>> */
    LP_CHAT_LLAMA2_SYS_BOS,   /* ... with <s> inside the history */
    LP_CHAT_LLAMA2_SYS_STRIP, /* ... with content.strip() */
    LP_CHAT_LLAMA3,           /* <|start_header_id|> */
    LP_CHAT_ZEPHYR,           /* <|user|> ... <|endoftext|> */
    LP_CHAT_PHI3,             /* <|user|> ... <|end|> */
    LP_CHAT_MISTRAL_V1,
    LP_CHAT_MISTRAL_V3,
    LP_CHAT_MISTRAL_V3_TEKKEN,
    LP_CHAT_MISTRAL_V7,
};

typedef struct lp_chat_msg {
    const char *role;    /* "system", "user", "assistant"; borrowed */
    const char *content; /* borrowed, NUL-terminated */
} lp_chat_msg_t;

/* Recognise a template: either a short name ("chatml", "llama3", ...) or the
 * Jinja text of tokenizer.chat_template, by the markers llama.cpp uses.  An
 * unknown template is LP_ERR(ENOTSUP) with a message quoting it. */
int lp_chat_template_detect(const char *tmpl, size_t len, enum lp_chat_template *out);
/* Short name ("chatml", "llama2-sys", ...); "unknown" for LP_CHAT_UNKNOWN. */
const char *lp_chat_template_name(enum lp_chat_template t);
/* Format messages; add_assistant appends the assistant turn's opening.
 * *text is malloc'd, NUL-terminated; caller frees. */
int lp_chat_apply(enum lp_chat_template t, const lp_chat_msg_t *msgs, size_t n,
                  bool add_assistant, char **text, size_t *len);
/* Detect and apply in one call: tmpl (a name or Jinja text; NULL = the
 * model's tokenizer.chat_template).  LP_ERR(ENOENT) when tmpl is NULL and the
 * model has no template; LP_ERR(ENOTSUP) naming an unknown template.  The
 * result is text: tokenize it with parse_special on. */
int lp_tokenizer_chat_apply(const lp_tokenizer_t *tok, const char *tmpl, const lp_chat_msg_t *msgs,
                            size_t n, bool add_assistant, char **text, size_t *len);

#endif
