/* request-schema.h - lmpipe's request schema: one table with a row per
 * request field (name, type, range per API dialect, default, where it goes),
 * read by both edges (lmpipe-http and lmpipe-nats) and by `lmpipe
 * generate --params`.
 *
 * A field is either honored or refused with LP_ERR(EINVAL) naming it and
 * saying why: a field lmpipe does not implement ("not supported"), a field
 * of another endpoint or dialect, an unknown field (with the closest known
 * name), a value of the wrong type or out of its dialect's range.  The only
 * fields taken without effect are the ones OpenAI SDKs send as request
 * metadata (user, store, metadata, ...), listed as such in the table.  JSON
 * null is the same as leaving a field out.
 *
 * Dialects: OpenAI's ranges on the /v1 endpoints (temperature in [0, 2], penalties in
 * [-2, 2], ...), llama.cpp's on its native endpoints (/completion:
 * temperature any number, a negative one is greedy).  The table is printed
 * by `lmpipe schema` (--json, --markdown), from which docs/HTTP.md and
 * docs/NATS.md hold their field tables (checked by the schema-docs test). */
#ifndef LP_REQUEST_SCHEMA_H
#define LP_REQUEST_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "sampling-params.h"

/* Where a body comes in.  Over NATS the three generation shapes are told
 * apart by their fields (lp_request_nats_endpoint). */
enum lp_rs_endpoint {
    LP_RS_COMPLETIONS,    /* POST /v1/completions (OpenAI) */
    LP_RS_CHAT,           /* POST /v1/chat/completions (OpenAI) */
    LP_RS_COMPLETION,     /* POST /completion (llama.cpp) */
    LP_RS_TOKENIZE,       /* POST /tokenize (llama.cpp) */
    LP_RS_DETOKENIZE,     /* POST /detokenize (llama.cpp) */
    LP_RS_APPLY_TEMPLATE, /* POST /apply-template (llama.cpp) */
    LP_RS_N_ENDPOINTS
};

enum lp_rs_dialect { LP_RS_OPENAI, LP_RS_LLAMA, LP_RS_N_DIALECTS };

/* The edge a body arrives through; LP_RS_PARTIAL (with LP_RS_HTTP): a
 * body that adds to flags given otherwise (lmpipe generate --params), whose
 * required fields may be missing. */
enum lp_rs_edge { LP_RS_HTTP = 1, LP_RS_NATS = 2, LP_RS_PARTIAL = 4 };

/* Field types. */
enum lp_rs_type {
    LP_RS_T_NUMBER,     /* a number (read as a float) */
    LP_RS_T_INT,        /* an integer */
    LP_RS_T_BOOL,
    LP_RS_T_STRING,
    LP_RS_T_STOP,       /* a string or a list of up to 16 non-empty strings */
    LP_RS_T_PROMPT,     /* a string, a list of token ids, or (completions) a list of either */
    LP_RS_T_MESSAGES,   /* a non-empty list of messages (lib/chat-request.h) */
    LP_RS_T_IDS,        /* a list of token ids */
    LP_RS_T_OBJECT,     /* an object (its members are checked by the field) */
    LP_RS_T_LOGIT_BIAS, /* {"id": bias} or [[id, bias], ...] */
    LP_RS_T_SAMPLERS,   /* a list of sampler names or a string of letters */
    LP_RS_T_BREAKERS,   /* a list of strings or of token id lists */
    LP_RS_T_ANY,        /* any value (refused fields) */
    LP_RS_T_LOGPROBS,   /* true, false or a count (NATS, llama.cpp shape) */
    LP_RS_T_STRINGS,    /* a list of up to 16 non-empty strings */
    LP_RS_T_TOOLS,      /* a list of {"type": "function", "function": {name, description, parameters}} */
    LP_RS_T_TOOL_CHOICE, /* "auto" or "none" */
    LP_RS_N_TYPES
};

/* What becomes of a field. */
enum lp_rs_use {
    LP_RS_SAMPLING,  /* a sampling parameter: GenerateRequest.sampling */
    LP_RS_REQUEST,   /* another GenerateRequest (or tokenizer) field */
    LP_RS_EDGE,      /* read by the edge itself (stream, n, logprobs' shape, ...) */
    LP_RS_NO_EFFECT, /* request metadata OpenAI SDKs send: checked, then dropped */
    LP_RS_REFUSED,   /* not supported: always a 400 naming it */
    LP_RS_N_USES
};

/* The fields that the reader stores (lp_rs_field_t.id). */
enum lp_rs_id {
    LP_RS_ID_NONE, LP_RS_ID_SAMPLING, LP_RS_ID_MODEL, LP_RS_ID_PROMPT, LP_RS_ID_MESSAGES,
    LP_RS_ID_MAX_TOKENS, LP_RS_ID_N_PREDICT, LP_RS_ID_STOP, LP_RS_ID_STREAM, LP_RS_ID_STREAM_OPTIONS,
    LP_RS_ID_N, LP_RS_ID_SEED, LP_RS_ID_LOGPROBS, LP_RS_ID_TOP_LOGPROBS, LP_RS_ID_N_PROBS, LP_RS_ID_ECHO,
    LP_RS_ID_BEST_OF, LP_RS_ID_CHAT_TEMPLATE, LP_RS_ID_IGNORE_EOS, LP_RS_ID_DEADLINE_MS,
    LP_RS_ID_T_MAX_PREDICT_MS, LP_RS_ID_CACHE_PROMPT, LP_RS_ID_METADATA, LP_RS_ID_CONTENT,
    LP_RS_ID_ADD_SPECIAL, LP_RS_ID_PARSE_SPECIAL, LP_RS_ID_WITH_PIECES, LP_RS_ID_TOKENS,
    LP_RS_ID_NATS_V, LP_RS_ID_NATS_ID, LP_RS_ID_NATS_REPLY_TO,
    LP_RS_ID_CHAT, /* the rest of the conversation (tools, ...): checked and written with messages */
};

#define LP_RS_EP(e) (1u << (e))
#define LP_RS_GEN (LP_RS_EP(LP_RS_COMPLETIONS) | LP_RS_EP(LP_RS_CHAT) | LP_RS_EP(LP_RS_COMPLETION))
#define LP_RS_OAI (LP_RS_EP(LP_RS_COMPLETIONS) | LP_RS_EP(LP_RS_CHAT))

/* One row. */
typedef struct lp_rs_field {
    const char *name;
    const char *alias_of;     /* NULL, or the field it is another name for (read as that one) */
    enum lp_rs_type type;
    unsigned endpoints;       /* LP_RS_EP() bits: where it is taken (or, refused: where it is known) */
    unsigned edges;           /* LP_RS_HTTP | LP_RS_NATS */
    enum lp_rs_use use;
    enum lp_rs_id id;
    double lo[LP_RS_N_DIALECTS], hi[LP_RS_N_DIALECTS]; /* numbers: the range; +-INFINITY: none */
    const char *def;          /* the default, as the docs say it */
    const char *doc;          /* what it does; refused: why */
    const char *example;      /* a valid value as JSON (refused: one that a client would send) */
} lp_rs_field_t;

/* The table, and its length. */
extern const lp_rs_field_t lp_rs_fields[];
extern const size_t lp_rs_n_fields;

const char *lp_rs_endpoint_name(enum lp_rs_endpoint ep); /* "/v1/completions" */
const char *lp_rs_type_name(enum lp_rs_type t);          /* "number", "stop", ... */
const char *lp_rs_use_name(enum lp_rs_use u);            /* "sampling", "refused", ... */
enum lp_rs_dialect lp_rs_dialect_of(enum lp_rs_endpoint ep);

/* The row that reads `name` at ep over edge, or NULL. */
const lp_rs_field_t *lp_rs_find(const char *name, enum lp_rs_endpoint ep, unsigned edge);

#define LP_RS_MAX_PROMPTS 64
#define LP_RS_MAX_CHOICES 128
#define LP_RS_MAX_STOPS 16

typedef struct lp_rs_prompt {
    const char *text;     /* borrowed from the document; NULL: ids */
    size_t len;
    int32_t *ids;         /* owned */
    size_t n_ids;
} lp_rs_prompt_t;

/* A request as read.  Strings are borrowed from the JSON document (valid
 * until it is destroyed) unless marked owned; lp_request_clear frees. */
typedef struct lp_request {
    enum lp_rs_endpoint ep;
    unsigned edge;
    lp_sampler_params_t sp;   /* the sampling fields given: sp.set */
    const char *model;        /* NULL: not given */
    lp_rs_prompt_t *prompts;  /* owned */
    size_t n_prompts;
    /* chat and /apply-template: the conversation (messages, tools,
     * chat_template_kwargs) as the JSON that the tokenizer's template
     * renderer reads (lib/chat-request.h; owned).  Template input, not
     * request parameters: nothing after the edge parses it but the
     * tokenizer service. */
    char *chat_json;
    size_t chat_json_len;
    const char *chat_template;
    int32_t n_predict;        /* 0: not given; -1: until end of text */
    const char *stops[LP_RS_MAX_STOPS];
    size_t stop_lens[LP_RS_MAX_STOPS];
    size_t n_stops;
    bool ignore_eos;
    int n;                    /* choices per prompt */
    bool stream, include_usage, echo;
    int n_probs;              /* -1: no logprobs; else top alternatives per token */
    uint32_t deadline_ms, t_max_predict_ms;
    /* /tokenize */
    const char *content;
    size_t content_len;
    bool add_special, parse_special, with_pieces;
    /* /detokenize */
    int32_t *tokens;          /* owned */
    size_t n_tokens;
    /* NATS */
    const char *nats_id, *reply_to;
    /* after a refusal: the field at fault ("" for the body as a whole) */
    char param[64];
} lp_request_t;

/* Read root (a parsed body) for endpoint ep arriving over edge into *rq
 * (initialized here).  LP_ERR(EINVAL) with lp_error_msg() "FIELD: why" and
 * rq->param set on a refusal; LP_ERR(ENOMEM).  Call lp_request_clear after
 * either. */
int lp_request_read(const lp_json_t *root, enum lp_rs_endpoint ep, unsigned edge, lp_request_t *rq);
void lp_request_clear(lp_request_t *rq);

/* A NATS body's endpoint: chat with messages; OpenAI completions when it
 * has a field that /v1/completions takes and /completion does not
 * (max_tokens, logprobs, echo, ...); else llama.cpp's /completion. */
enum lp_rs_endpoint lp_request_nats_endpoint(const lp_json_t *root);

/* The table as JSON (lmpipe schema --json), and as the Markdown tables of
 * docs/HTTP.md (edge LP_RS_HTTP) and docs/NATS.md (LP_RS_NATS). */
void lp_rs_write_json(lp_json_buf_t *out);
void lp_rs_write_markdown(lp_json_buf_t *out, unsigned edge);

#endif
