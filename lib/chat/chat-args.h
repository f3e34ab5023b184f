/* chat-args.h - an OpenAI conversation made ready for a chat template.
 *
 * OpenAI sends a tool call's arguments as a JSON string; templates written
 * for transformers mostly expect an object (Qwen3-Coder and Qwen3.5 iterate
 * it with |items, GLM 4.6 refuses a string, Hermes, Qwen 2.5, Llama 3.1,
 * Mistral, Kimi and Gemma 4 write a string twice encoded), while others
 * concatenate it as a string (DeepSeek R1, Functionary, FireFunction) and
 * fail on an object.  So the template is asked, once: a probe conversation
 * with an object argument is rendered, and where that works and the value
 * shows, arguments are given as objects (as llama.cpp's template
 * capabilities decide; vLLM always converts).  Likewise gpt-oss reads a
 * turn's reasoning from "thinking" rather than "reasoning_content". */
#ifndef LP_CHAT_ARGS_H
#define LP_CHAT_ARGS_H

#include <stdbool.h>
#include <stddef.h>

#include "jinja.h"
#include "json.h"

typedef struct lp_chat_template_caps {
    bool object_args;    /* tool-call arguments go in as objects */
    bool thinking_field; /* an assistant turn's reasoning goes in as "thinking" */
} lp_chat_template_caps_t;

/* Probe a parsed template (src: its text): 0 and *out.  Renders small
 * conversations under a small budget; a template that fails them gets
 * {false, false}. */
int lp_chat_template_caps(const lp_jinja_tmpl_t *t, const char *src, size_t src_len, lp_chat_template_caps_t *out);

/* `root` (an object with "messages", as a render context or chat_json)
 * written to *b with, under caps: each tool call's arguments that are a
 * string holding one JSON object replaced by that object (other strings
 * stay as sent), and reasoning_content copied to "thinking" where a turn has
 * none.  Everything else is written as it is. */
void lp_chat_prepare_messages(const lp_json_t *root, const lp_chat_template_caps_t *caps, lp_json_buf_t *b);

#endif
