/* chat.h - chat templates (tokenizer-svc's apply-chat-template): the model's
 * Jinja template rendered by lib/jinja as transformers renders it, and the
 * twelve hand-written families of llama.cpp, kept as named fallbacks for
 * models without a template.  The vocabulary is lib/vocab/tokenizer.h. */
#ifndef LP_CHAT_H
#define LP_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "chat-format.h"
#include "chat-grammar.h"
#include "jinja.h"
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
/* The family a short name names, or LP_CHAT_UNKNOWN. */
enum lp_chat_template lp_chat_template_by_name(const char *name, size_t len);
/* Short name ("chatml", "llama2-sys", ...); "unknown" for LP_CHAT_UNKNOWN. */
const char *lp_chat_template_name(enum lp_chat_template t);
/* Format messages; add_assistant appends the assistant turn's opening.
 * *text is malloc'd, NUL-terminated; caller frees. */
int lp_chat_apply(enum lp_chat_template t, const lp_chat_msg_t *msgs, size_t n,
                  bool add_assistant, char **text, size_t *len);
/* ---- rendering requests -------------------------------------------------- */

/* A tokenizer-svc's templates: the default one (a --chat-template-file, else
 * the model's tokenizer.chat_template), parsed once, and the model's BOS and
 * EOS texts, which templates see as bos_token and eos_token. */
typedef struct lp_chat_renderer lp_chat_renderer_t;

/* tok is borrowed and must outlive the renderer; file may be NULL.  A
 * default template that does not parse is an error here, naming its line. */
int lp_chat_renderer_new(const lp_tokenizer_t *tok, const char *file, lp_chat_renderer_t **out);
void lp_chat_renderer_destroy(lp_chat_renderer_t **self_p);
/* Whether there is a default template. */
bool lp_chat_renderer_has_default(const lp_chat_renderer_t *cr);

/* Render a conversation.  chat_json (lib/chat-request.h's object) when not
 * NULL, else the typed msgs.  tmpl: NULL or "" for the default template, a
 * family name, or Jinja text.  *text is malloc'd; *has_bos says whether it
 * starts with the model's BOS text (tokenize it without adding another).
 * Errors start with "chat_template: " (the template's own, with its line;
 * a missing template; a bad conversation): LP_ERR(EINVAL), LP_ERR(ENOENT),
 * or LP_ERR(E2BIG) for a template that ran past its budget. */
/* What a rendering says about the output to come (lib/chat): the
 * template's tool-call format (LP_CHAT_FORMAT_NONE for a named family),
 * and, when the conversation's tool_choice forces a call ("required" or a
 * named function), the grammar that forces it. */
typedef struct lp_chat_render_out {
    lp_chat_format_t format;
    lp_chat_grammar_t *grammar; /* owned; NULL: decoding is not constrained */
} lp_chat_render_out_t;
void lp_chat_render_out_clear(lp_chat_render_out_t *o);

/* Tool-call arguments and reasoning go to the template as it takes them
 * (lib/chat/chat-args.h, probed once per template).  o may be NULL; else
 * it is filled (lp_chat_render_out_clear it after either result).  A
 * tool_choice the format cannot force is LP_ERR(EINVAL), "tool_choice: ...". */
int lp_chat_render(const lp_chat_renderer_t *cr, const char *tmpl, const char *chat_json, size_t chat_len,
                   const lp_chat_msg_t *msgs, size_t n, bool add_assistant, char **text, size_t *len,
                   bool *has_bos, lp_chat_render_out_t *o);

#endif
