/* chat-request.h - the conversation part of an OpenAI chat request
 * (messages, tools, tool_choice, parallel_tool_calls, chat_template_kwargs),
 * checked at the edge and written as the JSON object that tokenizer-svc
 * renders the chat template with (ChatTemplateRequest.chat_json):
 *
 *   {"messages": [...], "tools": [...], "tool_choice": ..., "parallel_tool_calls": bool,
 *    "chat_template_kwargs": {...}}
 *
 * Messages keep what the client sent (role, content, tool_calls with their
 * arguments, tool_call_id, name, reasoning_content), except that content
 * given as text parts becomes one string.  The other members appear only
 * when given; tool_choice only when it forces a call ("required" or a named
 * function, which must be one of the tools). */
#ifndef LP_CHAT_REQUEST_H
#define LP_CHAT_REQUEST_H

#include <stddef.h>

#include "json.h"

/* The request members this reads (the gateways keep them out of the
 * sampler's parameters); NULL-terminated. */
extern const char *const lp_chat_request_fields[];

/* Check root's chat members and write chat_json.  On success *out is
 * malloc'd (caller frees).  On a bad request returns LP_ERR(EINVAL) with a
 * message in why naming the field, and *param set to the request member at
 * fault ("messages", "tools", ...). */
int lp_chat_request_json(const lp_json_t *root, char **out, size_t *out_len, const char **param, char *why,
                         size_t cap);

#endif
