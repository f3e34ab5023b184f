/* chat-out.h - a chat choice's output as OpenAI's assistant message: the
 * text the coordinator streams, parsed by lib/chat (chat-parse.h) into
 * content, reasoning_content and tool_calls, for both edges.
 *
 * Parsing happens here, at the edge, because the edge writes the response:
 * the coordinator stays format-agnostic and passes on what tokenizer-svc
 * (which holds the template) says about the output, the ChatOutput of the
 * first token event and of the final event: the template's format and the
 * rendered prompt's end.
 *
 * When the request has tools (and tool_choice is not "none") every output
 * goes through the parser.  Without them only reasoning is split, and only
 * when there is some: the prompt opened it, or the output starts with the
 * format's opening marker (white space aside); any other output is content
 * byte for byte, as before (no trimming). */
#ifndef LP_CHAT_OUT_H
#define LP_CHAT_OUT_H

#include <stdbool.h>
#include <stddef.h>

#include "chat-parse.h"
#include "frame.h"
#include "json.h"

typedef struct lp_chat_out lp_chat_out_t;

typedef struct lp_chat_out_opts {
    const lp_json_t *tools;         /* the request's tools, or NULL (borrowed for lp_chat_out_new) */
    bool parse_tools;               /* tools given and tool_choice not "none" */
    lp_chat_reasoning_format_t reasoning;
} lp_chat_out_opts_t;

/* One per choice.  LP_ERR(ENOMEM). */
int lp_chat_out_new(const lp_chat_out_opts_t *o, lp_chat_out_t **out);
void lp_chat_out_destroy(lp_chat_out_t **self_p);

/* The ChatOutput has arrived (the first event that has one); co may be NULL
 * (a coordinator or template that says nothing: content as it comes).
 * Later calls do nothing. */
int lp_chat_out_start(lp_chat_out_t *c, const Lmpipe__ChatOutput *co);
bool lp_chat_out_started(const lp_chat_out_t *c);
/* Text of the output; then the deltas it made certain (lp_chat_out_n_deltas,
 * lp_chat_out_delta: chat-parse.h's, valid until the next call). */
int lp_chat_out_feed(lp_chat_out_t *c, const char *text, size_t len);
/* The output has ended. */
int lp_chat_out_finish(lp_chat_out_t *c);
size_t lp_chat_out_n_deltas(const lp_chat_out_t *c);
void lp_chat_out_delta(const lp_chat_out_t *c, size_t i, lp_chat_delta_t *d);
/* The deltas as JSON objects (lp_chat_delta_write_json), appended to b,
 * comma-separated (a comma first when b is not empty). */
void lp_chat_out_delta_append(const lp_chat_out_t *c, lp_json_buf_t *b);
/* The message after finish, and whether it has tool calls (finish_reason
 * "tool_calls"). */
void lp_chat_out_msg(const lp_chat_out_t *c, lp_chat_msg_t *m);
bool lp_chat_out_has_calls(const lp_chat_out_t *c);
/* The message as OpenAI's assistant message: chat-parse.h's
 * lp_chat_msg_write_json when parsed, else {"role", "content"} with the
 * text as it came. */
void lp_chat_out_write_msg(const lp_chat_out_t *c, lp_json_buf_t *b);

#endif
