/* chat-parse.h - a model's output split into content, reasoning and tool
 * calls, incrementally, as OpenAI's chat completions return them.
 *
 * Feed the output text as it is decoded, in chunks of any size (special
 * tokens written as their text, the end-of-generation token left out); after
 * each feed, read the deltas that became certain (content, reasoning, and
 * tool-call deltas with an index, id, name and arguments fragments); at the
 * end call finish and read the whole message.  Text that may still turn out
 * to be a marker (the start of "<tool_call>" at the end of a chunk) is held
 * back until it is decided, so the deltas of any chunking add up to the
 * message of one feed with the whole text (tested at every byte boundary).
 *
 * The rules, the same for every format:
 * - A call counts once its opening marker and its function's name are read
 *   and its arguments have begun; from then on it streams.  Before that, a
 *   malformed call (not JSON, no name) is content, marker and all.  A call
 *   that breaks afterwards keeps what it got and is marked: valid is false
 *   when its arguments are not one JSON object, complete is false when the
 *   output ended inside it.
 * - Arguments are a JSON object as text: the model's own JSON as written
 *   (JSON formats), or written by the parser ("key": value, ", " and ": "
 *   separators) for XML-like formats; there a parameter whose schema type
 *   is "string", or that the tools do not describe, is a JSON string of the
 *   raw text, any other is the value as JSON when it parses, else a string.
 *   A call written without arguments gets "{}".
 * - Reasoning opens only at the very start of the output (or in the prompt:
 *   a prompt that ends inside an open reasoning block, as Qwen3's and
 *   DeepSeek R1's generation prompts do, starts the output in reasoning) and
 *   runs to its closing marker or to the end.  Markers inside reasoning are
 *   text.
 * - Content is trimmed of white space at both ends and next to markup;
 *   reasoning is trimmed at both ends.
 * - Deltas end on UTF-8 character boundaries. */
#ifndef LP_CHAT_PARSE_H
#define LP_CHAT_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chat-format.h"
#include "json.h"

#define LP_CHAT_PARSE_MAX_OUTPUT (64u << 20) /* bytes of output; more is E2BIG */

typedef struct lp_chat_parser lp_chat_parser_t;

typedef struct lp_chat_parser_opts {
    lp_chat_format_t format;
    lp_chat_reasoning_format_t reasoning;
    /* The rendered prompt the output continues, or NULL: its end says
     * whether the output starts inside reasoning (a prompt ending in an open
     * "<think>") or after Functionary's ">>>".  Borrowed for the call. */
    const char *prompt;
    size_t prompt_len;
    /* The request's tools ([{type, function: {name, parameters}}]), or NULL:
     * the parameters' types decide how XML-like formats write values.
     * Borrowed for the call; what is needed is copied. */
    const lp_json_t *tools;
    /* Call ids are "call_" and 24 letters and digits (9 for Mistral, whose
     * template checks it) drawn from this seed; 0 draws the seed from the
     * system's random source. */
    uint64_t id_seed;
} lp_chat_parser_opts_t;

/* A new parser; *out is the caller's (lp_chat_parser_destroy). */
int lp_chat_parser_new(const lp_chat_parser_opts_t *opts, lp_chat_parser_t **out);
void lp_chat_parser_destroy(lp_chat_parser_t **self_p);

/* The next `len` bytes of output.  0, or LP_ERR(E2BIG) past
 * LP_CHAT_PARSE_MAX_OUTPUT, LP_ERR(ENOMEM), LP_ERR(EINVAL) after finish. */
int lp_chat_parser_feed(lp_chat_parser_t *p, const char *text, size_t len);
/* The output has ended: what was held back is decided. */
int lp_chat_parser_finish(lp_chat_parser_t *p);

/* ---- deltas: what the last feed or finish made certain ------------------ */

typedef enum lp_chat_delta_kind {
    LP_CHAT_DELTA_CONTENT,
    LP_CHAT_DELTA_REASONING,
    LP_CHAT_DELTA_TOOL_CALL,
} lp_chat_delta_kind_t;

typedef struct lp_chat_delta {
    lp_chat_delta_kind_t kind;
    const char *text;   /* content, reasoning, or an arguments fragment (may be empty) */
    size_t len;
    size_t index;       /* TOOL_CALL: the call's index in the message */
    const char *id;     /* TOOL_CALL: set on a call's first delta only, else NULL */
    const char *name;   /* TOOL_CALL: set on a call's first delta only, else NULL */
} lp_chat_delta_t;

/* The number of deltas since the previous feed or finish, in order
 * (consecutive pieces of the same kind are merged); lp_chat_parser_delta
 * gives the i-th.  Its pointers are borrowed, valid until the next feed,
 * finish or destroy. */
size_t lp_chat_parser_n_deltas(const lp_chat_parser_t *p);
void lp_chat_parser_delta(const lp_chat_parser_t *p, size_t i, lp_chat_delta_t *out);

/* One delta as the body of an OpenAI chunk's choices[].delta:
 * {"content": ...}, {"reasoning_content": ...} or {"tool_calls": [{"index",
 * "id", "type", "function": {"name", "arguments"}}]} (id, type and name on
 * a call's first delta). */
void lp_chat_delta_write_json(const lp_chat_delta_t *d, lp_json_buf_t *b);

/* ---- the message so far (all of it after finish) ------------------------ */

typedef struct lp_chat_tool_call {
    const char *id;
    const char *name;
    const char *arguments;   /* JSON text */
    size_t arguments_len;
    bool valid;              /* arguments are one JSON object */
    bool complete;           /* the call was closed before the output ended */
} lp_chat_tool_call_t;

typedef struct lp_chat_msg {
    const char *content;     /* never NULL; "" when none */
    size_t content_len;
    const char *reasoning;   /* never NULL; "" when none */
    size_t reasoning_len;
    const lp_chat_tool_call_t *tool_calls;
    size_t n_tool_calls;
} lp_chat_msg_t;

/* Borrowed, valid until the next feed, finish or destroy. */
void lp_chat_parser_msg(const lp_chat_parser_t *p, lp_chat_msg_t *out);

/* The message as an OpenAI assistant message: {"role": "assistant",
 * "content": ... or null, "reasoning_content" (when any), "tool_calls"
 * (when any)}. */
void lp_chat_msg_write_json(const lp_chat_msg_t *m, lp_json_buf_t *b);

#endif
