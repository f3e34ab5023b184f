/* request-schema.c - the request schema's table and its reader (see
 * request-schema.h). */
#include "request-schema.h"

#include "chat-request.h"
#include "error.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N INFINITY
#define EP(e) LP_RS_EP(LP_RS_##e)
#define GEN LP_RS_GEN
#define OAI LP_RS_OAI
#define BOTH (LP_RS_HTTP | LP_RS_NATS)
#define HTTP LP_RS_HTTP
#define NATS LP_RS_NATS
#define CONV (EP(CHAT) | EP(APPLY_TEMPLATE))

/* A row: name, type, endpoints, edges, use, id, OpenAI range, llama.cpp
 * range, default, doc, example. */
#define ROW(name, type, eps, edges, use, id, olo, ohi, llo, lhi, def, doc, ex)                                     \
    {name, NULL, LP_RS_T_##type, eps, edges, LP_RS_##use, LP_RS_ID_##id, {olo, llo}, {ohi, lhi}, def, doc, ex}
#define ALIAS(name, of, type, eps, edges, use, id, olo, ohi, llo, lhi, doc, ex)                                    \
    {name, of, LP_RS_T_##type, eps, edges, LP_RS_##use, LP_RS_ID_##id, {olo, llo}, {ohi, lhi}, NULL, doc, ex}
/* A sampling parameter, the same on every generation endpoint and edge. */
#define SAMP(name, type, olo, ohi, llo, lhi, def, doc, ex) \
    ROW(name, type, GEN, BOTH, SAMPLING, SAMPLING, olo, ohi, llo, lhi, def, doc, ex)
/* A field lmpipe does not implement: refused wherever it comes. */
#define REFUSE(name, eps, why, ex) ROW(name, ANY, eps, BOTH, REFUSED, NONE, -N, N, -N, N, NULL, why, ex)
/* Request metadata of OpenAI's that changes nothing here. */
#define NOEFF(name, type, doc, ex) ROW(name, type, OAI, BOTH, NO_EFFECT, METADATA, -N, N, -N, N, NULL, doc, ex)

#define SO "not supported: structured outputs (constrained decoding) are not implemented yet"
#define TOOLS "not supported: the deprecated function-calling API (give tools)"
#define REASON "not supported: reasoning output is not split from the answer yet"
#define I32 2147483647.0
#define U32 4294967295.0
#define HIST 8192.0

const lp_rs_field_t lp_rs_fields[] = {
    /* ---- generation: what and how much ---- */
    ROW("model", STRING, GEN, HTTP, EDGE, MODEL, -N, N, -N, N, "the served model",
        "When given, the served model's name (GET /v1/models); another name is 404 model_not_found", "\"MODEL\""),
    ROW("model", STRING, GEN, NATS, NO_EFFECT, MODEL, -N, N, -N, N, NULL,
        "Not checked: the stream's subject picks the pipeline", "\"any-model\""),
    ROW("prompt", PROMPT, EP(COMPLETIONS), HTTP, REQUEST, PROMPT, -N, N, -N, N, "(required)",
        "A string, a list of token ids, or a list of up to 64 of either (one set of n choices per prompt)",
        "\"Once upon a time\""),
    ROW("prompt", PROMPT, EP(COMPLETIONS), NATS, REQUEST, PROMPT, -N, N, -N, N, "(required)",
        "A string or a list of token ids", "\"Once upon a time\""),
    ROW("prompt", PROMPT, EP(COMPLETION), BOTH, REQUEST, PROMPT, -N, N, -N, N, "(required)",
        "A string, or a list of token ids taken as they are (no BOS is added to a list)", "\"Once upon a time\""),
    ROW("messages", MESSAGES, CONV, BOTH, REQUEST, MESSAGES, -N, N, -N, N, "(required)",
        "The conversation, up to 4096 messages: role, content (a string, null, or a list of {\"type\": \"text\", "
        "\"text\"} parts), tool_calls, tool_call_id, name, reasoning_content; another member is refused.  "
        "Rendered by the model's chat template (docs/TEMPLATES.md)",
        "[{\"role\":\"user\",\"content\":\"Hi\"}]"),
    ROW("tools", TOOLS, CONV, BOTH, REQUEST, CHAT, -N, N, -N, N, "none",
        "Tools the chat template shows the model ({\"type\": \"function\", \"function\": {name, description, "
        "parameters}}); tool calls are not parsed out of the output yet: they come back as content",
        "[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]"),
    ROW("tool_choice", TOOL_CHOICE, CONV, BOTH, REQUEST, CHAT, -N, N, -N, N, "\"auto\"",
        "\"auto\" or \"none\"; \"required\" and a named function are refused (not supported until tool calls are "
        "parsed)", "\"auto\""),
    ROW("parallel_tool_calls", BOOL, CONV, BOTH, NO_EFFECT, CHAT, -N, N, -N, N, NULL,
        "true or false; no effect until tool calls are parsed out of the output", "true"),
    ROW("chat_template_kwargs", OBJECT, CONV, BOTH, REQUEST, CHAT, -N, N, -N, N, "none",
        "Extra template variables by name (enable_thinking, ...); not messages, tools, add_generation_prompt, "
        "continue_final_message", "{\"enable_thinking\":false}"),
    ROW("max_tokens", INT, OAI, BOTH, REQUEST, MAX_TOKENS, 1, 1073741824, 1, 1073741824,
        "until the end of text or of the context", "Tokens to generate at most", "4"),
    ALIAS("max_completion_tokens", "max_tokens", INT, OAI, BOTH, REQUEST, MAX_TOKENS, 1, 1073741824, 1, 1073741824,
          "OpenAI's newer name for max_tokens", "4"),
    ROW("n_predict", INT, EP(COMPLETION), BOTH, REQUEST, N_PREDICT, -N, N, -1, 1073741824,
        "-1 (until the end of text or of the context)", "Tokens to generate at most; -1: no limit (0 is refused)",
        "4"),
    ROW("stop", STOP, OAI, BOTH, REQUEST, STOP, -N, N, -N, N, "none",
        "A string or a list of up to 16 non-empty strings; the text ends before the first one generated",
        "[\"\\n\\n\"]"),
    ROW("stop", STRINGS, EP(COMPLETION), BOTH, REQUEST, STOP, -N, N, -N, N, "none",
        "A list of up to 16 non-empty strings (llama.cpp's: not a lone string); the text ends before the first "
        "one generated", "[\"\\n\\n\"]"),
    ROW("ignore_eos", BOOL, GEN, BOTH, REQUEST, IGNORE_EOS, -N, N, -N, N, "false",
        "Go on past the end-of-text token (until the token limit or the context)", "false"),
    ROW("deadline_ms", INT, GEN, BOTH, REQUEST, DEADLINE_MS, 0, U32, 0, U32, "0 (none)",
        "Not finished this long after arrival: it ends with an error (HTTP 504 before the first token, an error "
        "event after)", "60000"),
    ROW("t_max_predict_ms", INT, GEN, BOTH, REQUEST, T_MAX_PREDICT_MS, 0, U32, 0, U32, "0 (none)",
        "llama.cpp's: once this long has passed since the first token and a newline has been generated, the "
        "generation ends with finish reason length", "60000"),
    ROW("cache_prompt", BOOL, GEN, BOTH, REQUEST, CACHE_PROMPT, -N, N, -N, N, "true",
        "true only: prefix reuse is always on (it never changes the output); false is refused", "true"),

    /* ---- generation: the answer's shape ---- */
    ROW("stream", BOOL, GEN, HTTP, EDGE, STREAM, -N, N, -N, N, "false",
        "Server-sent events, one per token", "false"),
    ROW("stream", BOOL, GEN, NATS, EDGE, STREAM, -N, N, -N, N, "true",
        "true only: events always stream over NATS", "true"),
    ROW("stream_options", OBJECT, OAI, HTTP, EDGE, STREAM_OPTIONS, -N, N, -N, N, "none",
        "{\"include_usage\": true}: a last chunk with usage before [DONE]", "{\"include_usage\":true}"),
    ROW("n", INT, OAI, HTTP, EDGE, N, 1, LP_RS_MAX_CHOICES, 1, LP_RS_MAX_CHOICES, "1",
        "Choices per prompt (with a seed, choice i uses seed + i); at most 128 in all", "2"),
    ROW("n", INT, OAI, NATS, EDGE, N, 1, 1, 1, 1, "1", "One choice per request over NATS", "1"),
    ROW("best_of", INT, EP(COMPLETIONS), HTTP, EDGE, BEST_OF, 1, LP_RS_MAX_CHOICES, 1, LP_RS_MAX_CHOICES, "n",
        "Only equal to n (no choice is dropped)", "1"),
    ROW("echo", BOOL, EP(COMPLETIONS), HTTP, EDGE, ECHO, -N, N, -N, N, "false",
        "The prompt's text before the completion (not with logprobs)", "false"),
    ROW("logprobs", INT, EP(COMPLETIONS), BOTH, EDGE, LOGPROBS, 0, 20, 0, 20, "none",
        "Log-probabilities of each token and of this many top alternatives", "2"),
    ROW("logprobs", BOOL, EP(CHAT), BOTH, EDGE, LOGPROBS, -N, N, -N, N, "false",
        "Log-probabilities of each token (top_logprobs for alternatives)", "true"),
    ROW("logprobs", LOGPROBS, EP(COMPLETION), NATS, EDGE, LOGPROBS, -N, N, 0, 20, "false",
        "Over NATS, OpenAI's name for n_probs: true (1), false, or a count", "true"),
    ROW("top_logprobs", INT, EP(CHAT), BOTH, EDGE, TOP_LOGPROBS, 0, 20, 0, 20, "0",
        "Top alternatives per token; needs logprobs: true", "2"),
    ROW("n_probs", INT, EP(COMPLETION), BOTH, EDGE, N_PROBS, -N, N, 0, LP_SAMPLER_MAX_N_PROBS, "0",
        "Top alternatives per token with their log-probabilities (completion_probabilities)", "2"),
    ROW("chat_template", STRING, EP(CHAT) | EP(APPLY_TEMPLATE), BOTH, REQUEST, CHAT_TEMPLATE, -N, N, -N, N,
        "the model's (or tokenizer.chat_template_file)",
        "Jinja text, or a family name (chatml, llama2, llama3, zephyr, phi3, mistral, ...) for a model without a "
        "template, instead of the model's; its error is a 400 naming chat_template", "\"chatml\""),

    /* ---- sampling (docs/SAMPLER.md) ---- */
    SAMP("temperature", NUMBER, 0, 2, -N, N, "the strategy's (0.8)",
         "Softmax temperature; 0 (llama.cpp: <= 0) is greedy", "0.7"),
    SAMP("top_k", INT, 0, I32, 0, I32, "the strategy's (40)", "Keep the k most likely tokens; 0: off", "40"),
    SAMP("top_p", NUMBER, 0, 1, 0, 1, "the strategy's (0.95)", "Nucleus sampling; 1: off", "0.9"),
    SAMP("min_p", NUMBER, 0, 1, 0, 1, "the strategy's (0.05)",
         "Drop tokens below min_p times the top probability; 0: off", "0.05"),
    SAMP("typical_p", NUMBER, 0, 1, 0, 1, "the strategy's (1)", "Locally typical sampling; 1: off", "0.95"),
    SAMP("top_n_sigma", NUMBER, -N, N, -N, N, "the strategy's (-1)",
         "Keep tokens within n standard deviations of the top logit; -1: off", "-1"),
    SAMP("repeat_penalty", NUMBER, 0, N, 0, N, "the strategy's (1)",
         "Divide the logits of recent tokens (> 0; 1: off)", "1.1"),
    ALIAS("repetition_penalty", "repeat_penalty", NUMBER, OAI, BOTH, SAMPLING, SAMPLING, 0, N, 0, N,
          "vLLM's name for repeat_penalty", "1.1"),
    SAMP("repeat_last_n", INT, -1, HIST, -1, HIST, "the strategy's (64)",
         "Recent tokens the penalties look at; -1: the whole history", "64"),
    SAMP("frequency_penalty", NUMBER, -2, 2, -1e6, 1e6, "the strategy's (0)",
         "Subtract this times a token's count in the history", "0.5"),
    SAMP("presence_penalty", NUMBER, -2, 2, -1e6, 1e6, "the strategy's (0)",
         "Subtract this from every token in the history", "0.5"),
    SAMP("dry_multiplier", NUMBER, 0, 1e6, 0, 1e6, "the strategy's (0: off)", "DRY repetition penalty's strength",
         "0.8"),
    SAMP("dry_base", NUMBER, 0, 1e6, 0, 1e6, "the strategy's (1.75)", "DRY's base", "1.75"),
    SAMP("dry_allowed_length", INT, 0, HIST, 0, HIST, "the strategy's (2)", "DRY: repeats this long go free", "2"),
    SAMP("dry_penalty_last_n", INT, -1, HIST, -1, HIST, "the strategy's (-1)",
         "DRY: tokens looked at; -1: the whole history", "-1"),
    SAMP("dry_sequence_breakers", BREAKERS, -N, N, -N, N, "the strategy's ([\"\\n\", \":\", \"\\\"\", \"*\"])",
         "Up to 16: strings (at most 40 bytes kept, cut at a character) or lists of up to 8 token ids",
         "[\"\\n\", \".\"]"),
    SAMP("xtc_probability", NUMBER, 0, 1, 0, 1, "the strategy's (0: off)", "XTC: chance of cutting the top tokens",
         "0.1"),
    SAMP("xtc_threshold", NUMBER, 0, 1, 0, 1, "the strategy's (0.1)", "XTC: probability above which tokens go",
         "0.1"),
    SAMP("min_keep", INT, 0, 100000, 0, 100000, "the strategy's (0)", "Tokens every truncation keeps at least",
         "1"),
    SAMP("mirostat", INT, 0, 2, 0, 2, "the strategy's (0: off)", "Mirostat 1 or 2 (replaces the chain's end)",
         "2"),
    SAMP("mirostat_tau", NUMBER, 0, 1e6, 0, 1e6, "the strategy's (5)", "Mirostat's target surprise", "5"),
    SAMP("mirostat_eta", NUMBER, 0, 1e6, 0, 1e6, "the strategy's (0.1)", "Mirostat's learning rate", "0.1"),
    SAMP("dynatemp_range", NUMBER, 0, 1e6, 0, 1e6, "the strategy's (0: off)",
         "Dynamic temperature: temperature +- this by entropy", "0.5"),
    SAMP("dynatemp_exponent", NUMBER, 0, 1e6, 0, 1e6, "the strategy's (1)", "Dynamic temperature's exponent",
         "1"),
    SAMP("samplers", SAMPLERS, -N, N, -N, N, "the strategy's (llama.cpp's order)",
         "The chain: names (penalties, dry, top_n_sigma, top_k, typ_p, top_p, min_p, xtc, temperature, "
         "plugin:NAME) or a string of letters (\"kpt\")",
         "[\"top_k\",\"top_p\",\"temperature\"]"),
    SAMP("logit_bias", LOGIT_BIAS, -100, 100, -N, N, "none",
         "{\"id\": bias} or [[id, bias], ...], up to 1024; false bans a token; ids past the vocabulary are "
         "refused", "{\"1\":-1}"),
    SAMP("seed", INT, 0, I32, -1, 9007199254740992.0, "the strategy's (-1: random)",
         "The draw's seed (llama.cpp: -1 random)", "42"),

    /* ---- /tokenize, /detokenize ---- */
    ROW("content", STRING, EP(TOKENIZE), HTTP, REQUEST, CONTENT, -N, N, -N, N, "(required)", "The text", "\"Hi\""),
    ROW("add_special", BOOL, EP(TOKENIZE), HTTP, REQUEST, ADD_SPECIAL, -N, N, -N, N, "false",
        "BOS (and EOS) where the model adds them", "true"),
    ROW("parse_special", BOOL, EP(TOKENIZE), HTTP, REQUEST, PARSE_SPECIAL, -N, N, -N, N, "true",
        "Special tokens' text (\"<s>\") becomes the token", "true"),
    ROW("with_pieces", BOOL, EP(TOKENIZE), HTTP, EDGE, WITH_PIECES, -N, N, -N, N, "false",
        "Each token as {id, piece}", "true"),
    ROW("tokens", IDS, EP(DETOKENIZE), HTTP, REQUEST, TOKENS, -N, N, -N, N, "(required)", "Token ids", "[1,2]"),

    /* ---- over NATS ---- */
    ROW("v", INT, GEN, NATS, EDGE, NATS_V, 1, 1, 1, 1, "1", "The schema version", "1"),
    ROW("id", STRING, GEN, NATS, EDGE, NATS_ID, -N, N, -N, N, "<stream>-<sequence>",
        "The request id in the events, without a Nats-Msg-Id header", "\"r1\""),
    ROW("reply_to", STRING, GEN, NATS, EDGE, NATS_REPLY_TO, -N, N, -N, N, "(the Lmpipe-Reply-To header)",
        "The events' subject, without a Lmpipe-Reply-To header", "\"lmpipe.evt.r1\""),

    /* ---- request metadata: checked, no effect ---- */
    NOEFF("user", STRING, "An end-user id (OpenAI's); not used", "\"user-1\""),
    NOEFF("store", BOOL, "OpenAI's stored completions; nothing is stored here", "false"),
    NOEFF("metadata", OBJECT, "Up to 16 string pairs for OpenAI's dashboards; not used", "{\"k\":\"v\"}"),
    NOEFF("safety_identifier", STRING, "OpenAI's end-user id; not used", "\"u1\""),
    NOEFF("prompt_cache_key", STRING, "OpenAI's cache routing hint; prefix reuse here needs none", "\"k\""),

    /* ---- refused: not implemented ---- */
    REFUSE("suffix", EP(COMPLETIONS), "not supported: insertion (fill in the middle)", "\"x\""),
    REFUSE("response_format", GEN, SO, "{\"type\":\"json_object\"}"),
    REFUSE("grammar", GEN, SO, "\"root ::= \\\"a\\\"\""),
    REFUSE("json_schema", GEN, SO, "{\"type\":\"object\"}"),
    REFUSE("structured_outputs", GEN, SO, "{\"choice\":[\"a\",\"b\"]}"),
    REFUSE("guided_json", GEN, SO, "{\"type\":\"object\"}"),
    REFUSE("guided_regex", GEN, SO, "\"[a-z]+\""),
    REFUSE("guided_choice", GEN, SO, "[\"a\",\"b\"]"),
    REFUSE("guided_grammar", GEN, SO, "\"root ::= \\\"a\\\"\""),
    REFUSE("guided_decoding_backend", GEN, SO, "\"xgrammar\""),
    REFUSE("guided_whitespace_pattern", GEN, SO, "\" \""),
    REFUSE("grammar_lazy", GEN, SO, "true"),
    REFUSE("grammar_triggers", GEN, SO, "[]"),
    REFUSE("preserved_tokens", GEN, SO, "[]"),
    REFUSE("tools", GEN & ~EP(CHAT), "not supported: tools are for chat (/v1/chat/completions)",
           "[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]"),
    REFUSE("tool_choice", GEN & ~EP(CHAT), "not supported: tools are for chat (/v1/chat/completions)", "\"auto\""),
    REFUSE("functions", GEN, TOOLS, "[{\"name\":\"f\"}]"),
    REFUSE("function_call", GEN, TOOLS, "\"auto\""),
    REFUSE("reasoning_effort", GEN, REASON, "\"low\""),
    REFUSE("reasoning", GEN, REASON, "{\"effort\":\"low\"}"),
    REFUSE("reasoning_format", GEN, REASON, "\"deepseek\""),
    REFUSE("include_reasoning", GEN, REASON, "true"),
    REFUSE("add_generation_prompt", GEN | EP(APPLY_TEMPLATE),
           "not supported: the assistant's turn is always opened (add_generation_prompt is true)", "false"),
    REFUSE("continue_final_message", GEN | EP(APPLY_TEMPLATE),
           "not supported: continuing the last message (prefilling the answer)", "true"),
    REFUSE("documents", GEN | EP(APPLY_TEMPLATE), "not supported: documents are not given to the template", "[]"),
    REFUSE("lora", GEN, "not supported: LoRA adapters", "[{\"id\":0,\"scale\":1}]"),
    REFUSE("id_slot", GEN, "not supported: requests are not pinned to slots", "0"),
    REFUSE("priority", GEN, "not supported: requests are scheduled fairly by client, not by priority", "1"),
    REFUSE("n_keep", GEN, "not supported: the context is never shifted", "-1"),
    REFUSE("n_discard", GEN, "not supported: the context is never shifted", "0"),
    REFUSE("n_indent", GEN, "not supported: no indentation limit", "2"),
    REFUSE("n_cmpl", GEN, "not supported: use n (OpenAI endpoints)", "2"),
    REFUSE("t_max_prompt_ms", GEN, "not supported: prompts are never cut short (see deadline_ms)", "1000"),
    REFUSE("timings_per_token", GEN, "not supported: timings come with the last chunk", "true"),
    REFUSE("post_sampling_probs", GEN, "not supported: probabilities are the model's, before sampling", "true"),
    REFUSE("return_tokens", GEN, "not supported: /completion always returns the tokens", "true"),
    REFUSE("return_progress", GEN, "not supported: no prompt progress events", "true"),
    REFUSE("response_fields", GEN, "not supported: the response has all its fields", "[\"content\"]"),
    REFUSE("image_data", GEN, "not supported: text models only", "[]"),
    REFUSE("multimodal_data", GEN, "not supported: text models only", "[]"),
    REFUSE("audio", GEN, "not supported: text models only", "{\"voice\":\"alloy\",\"format\":\"wav\"}"),
    REFUSE("modalities", GEN, "not supported: text only", "[\"text\",\"audio\"]"),
    REFUSE("prediction", GEN, "not supported: predicted outputs", "{\"type\":\"content\",\"content\":\"x\"}"),
    REFUSE("web_search_options", GEN, "not supported: no web search", "{}"),
    REFUSE("service_tier", GEN, "not supported: one service tier", "\"flex\""),
    REFUSE("verbosity", GEN, "not supported", "\"low\""),
    REFUSE("min_tokens", GEN, "not supported: no minimum length", "4"),
    REFUSE("stop_token_ids", GEN, "not supported: give stop strings", "[2]"),
    REFUSE("bad_words", GEN, "not supported: give logit_bias with false", "[\"x\"]"),
    REFUSE("allowed_token_ids", GEN, "not supported: give logit_bias", "[1]"),
    REFUSE("skip_special_tokens", GEN, "not supported: the text is the tokens' pieces", "false"),
    REFUSE("spaces_between_special_tokens", GEN, "not supported", "false"),
    REFUSE("include_stop_str_in_output", GEN, "not supported: the text ends before a stop string", "true"),
    REFUSE("truncate_prompt_tokens", GEN, "not supported: prompts are never truncated", "16"),
    REFUSE("prompt_logprobs", GEN, "not supported: the pipeline does not compute prompt logprobs", "1"),
    REFUSE("use_beam_search", GEN, "not supported: no beam search", "true"),
    REFUSE("length_penalty", GEN, "not supported: no beam search", "1"),
    REFUSE("return_tokens_as_token_ids", GEN, "not supported", "true"),
    REFUSE("cache_salt", GEN, "not supported", "\"s\""),
    REFUSE("kv_transfer_params", GEN, "not supported", "{}"),
    REFUSE("vllm_xargs", GEN, "not supported", "{}"),
    REFUSE("request_id", GEN, "not supported: the response's id is the server's", "\"r\""),
    REFUSE("logits_processors", GEN, "not supported: sampler plugins are loaded by the operator (docs/SAMPLER.md)",
           "[]"),
    REFUSE("penalize_nl", GEN, "not supported (llama.cpp removed it)", "true"),
    REFUSE("tfs_z", GEN, "not supported (llama.cpp removed tail-free sampling)", "1"),
    REFUSE("top_a", GEN, "not supported", "0.1"),
    REFUSE("slot_id", GEN, "not supported: requests are not pinned to slots", "0"),
    REFUSE("speculative.n_max", GEN, "not supported: no speculative decoding", "16"),
    REFUSE("speculative.n_min", GEN, "not supported: no speculative decoding", "0"),
    REFUSE("speculative.p_min", GEN, "not supported: no speculative decoding", "0.75"),
};
const size_t lp_rs_n_fields = sizeof(lp_rs_fields) / sizeof(lp_rs_fields[0]);

/* ---- names -------------------------------------------------------------------- */

const char *lp_rs_endpoint_name(enum lp_rs_endpoint ep)
{
    static const char *const names[LP_RS_N_ENDPOINTS] = {"/v1/completions", "/v1/chat/completions", "/completion",
                                                         "/tokenize", "/detokenize", "/apply-template"};
    return (unsigned)ep < LP_RS_N_ENDPOINTS ? names[ep] : "?";
}

const char *lp_rs_type_name(enum lp_rs_type t)
{
    static const char *const names[LP_RS_N_TYPES] = {
        "number", "integer", "boolean", "string", "string or list of strings", "prompt", "messages",
        "list of token ids", "object", "logit bias", "sampler chain", "sequence breakers", "any",
        "boolean or integer", "list of strings", "list of tools", "\"auto\" or \"none\""};
    return (unsigned)t < LP_RS_N_TYPES ? names[t] : "?";
}

const char *lp_rs_use_name(enum lp_rs_use u)
{
    static const char *const names[LP_RS_N_USES] = {"sampling", "request", "edge", "no effect", "refused"};
    return (unsigned)u < LP_RS_N_USES ? names[u] : "?";
}

enum lp_rs_dialect lp_rs_dialect_of(enum lp_rs_endpoint ep)
{
    return ep == LP_RS_COMPLETIONS || ep == LP_RS_CHAT ? LP_RS_OPENAI : LP_RS_LLAMA;
}

const lp_rs_field_t *lp_rs_find(const char *name, enum lp_rs_endpoint ep, unsigned edge)
{
    for (size_t i = 0; i < lp_rs_n_fields; i++) {
        const lp_rs_field_t *f = &lp_rs_fields[i];
        if ((f->endpoints & LP_RS_EP(ep)) && (f->edges & edge) && !strcmp(f->name, name)) return f;
    }
    return NULL;
}

/* ---- refusals ------------------------------------------------------------------ */

/* Every refusal: "FIELD: why", with the field in rq->param. */
static int refuse(lp_request_t *rq, const char *field, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(lp_request_t *rq, const char *field, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    snprintf(rq->param, sizeof(rq->param), "%s", field);
    return lp_error_set_kind(LP_ERR(EINVAL), LP_EK_INVALID_REQUEST, rq->param, "%.60s: %s", field, why);
}

/* The same with a message that names the place inside the field itself
 * ("messages[2].content: missing"). */
static int refuse_at(lp_request_t *rq, const char *field, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse_at(lp_request_t *rq, const char *field, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(rq->param, sizeof(rq->param), "%s", field);
    return lp_error_set_kind(LP_ERR(EINVAL), LP_EK_INVALID_REQUEST, rq->param, "%s", msg);
}

/* Levenshtein distance, capped: how close a misspelled name is. */
static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 40 || lb > 40) return 99;
    size_t row[41];
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* A field with no row here: known elsewhere, or unknown (with the closest
 * name this endpoint takes). */
static int unknown(lp_request_t *rq, const lp_json_t *v)
{
    const char *k = v->key;
    if (!k[0]) return refuse(rq, "\"\"", "a field with an empty name");
    char where[256] = "";
    size_t w = 0;
    for (size_t i = 0; i < lp_rs_n_fields && w < sizeof(where) - 80; i++) {
        const lp_rs_field_t *f = &lp_rs_fields[i];
        if (strcmp(f->name, k)) continue;
        for (int e = 0; e < LP_RS_N_ENDPOINTS; e++) {
            if (!(f->endpoints & LP_RS_EP(e))) continue;
            const char *name = lp_rs_endpoint_name((enum lp_rs_endpoint)e);
            if (strstr(where, name)) continue;
            w += (size_t)snprintf(where + w, sizeof(where) - w, "%s%s", w ? ", " : "", name);
        }
    }
    const char *edge = rq->edge == LP_RS_NATS ? " over NATS" : "";
    if (w) {
        const lp_rs_field_t *other = lp_rs_find(k, rq->ep, BOTH); /* another edge takes it */
        if (other)
            return refuse(rq, k, "not taken over %s (a%s field: %s)", rq->edge == LP_RS_NATS ? "NATS" : "HTTP",
                          rq->edge == LP_RS_NATS ? "n HTTP" : " NATS", other->doc);
        return refuse(rq, k, "not a field of %s%s (it is one of %s)", lp_rs_endpoint_name(rq->ep), edge, where);
    }
    const char *best = NULL;
    size_t best_d = 3;
    for (size_t i = 0; i < lp_rs_n_fields; i++) {
        const lp_rs_field_t *f = &lp_rs_fields[i];
        if (!(f->endpoints & LP_RS_EP(rq->ep)) || !(f->edges & rq->edge) || f->use == LP_RS_REFUSED) continue;
        size_t d = distance(k, f->name);
        if (d < best_d) {
            best_d = d;
            best = f->name;
        }
    }
    if (best) return refuse(rq, k, "unknown field (did you mean %s?)", best);
    return refuse(rq, k, "unknown field: %s takes the fields in docs/HTTP.md", lp_rs_endpoint_name(rq->ep));
}

/* ---- values ---------------------------------------------------------------------- */

static int range_text(char *buf, size_t cap, double lo, double hi)
{
    if (isinf(lo) && isinf(hi)) return snprintf(buf, cap, "any");
    char a[32], b[32];
    snprintf(a, sizeof(a), "%.17g", lo);
    snprintf(b, sizeof(b), "%.17g", hi);
    return snprintf(buf, cap, "[%s, %s]", isinf(lo) ? "-inf" : a, isinf(hi) ? "inf" : b);
}

static int want_number(lp_request_t *rq, const lp_rs_field_t *f, const lp_json_t *v, double *out)
{
    enum lp_rs_dialect d = lp_rs_dialect_of(rq->ep);
    if (v->type != LP_JSON_NUMBER) return refuse(rq, v->key, "must be a number, got %s", lp_json_type_name(v->type));
    if (v->u.num < f->lo[d] || v->u.num > f->hi[d]) {
        char r[80];
        range_text(r, sizeof(r), f->lo[d], f->hi[d]);
        return refuse(rq, v->key, "must be in %s%s, got %g", r, d == LP_RS_OPENAI ? " (OpenAI's range)" : "",
                      v->u.num);
    }
    *out = v->u.num;
    return 0;
}

static int want_int(lp_request_t *rq, const lp_rs_field_t *f, const lp_json_t *v, int64_t *out)
{
    enum lp_rs_dialect d = lp_rs_dialect_of(rq->ep);
    if (v->type != LP_JSON_NUMBER)
        return refuse(rq, v->key, "must be an integer, got %s", lp_json_type_name(v->type));
    if (v->u.num != floor(v->u.num)) return refuse(rq, v->key, "must be an integer, got %g", v->u.num);
    if (v->u.num < f->lo[d] || v->u.num > f->hi[d]) {
        char r[80];
        range_text(r, sizeof(r), f->lo[d], f->hi[d]);
        return refuse(rq, v->key, "must be an integer in %s, got %.17g", r, v->u.num);
    }
    *out = (int64_t)v->u.num;
    return 0;
}

static int want_bool(lp_request_t *rq, const lp_json_t *v, bool *out)
{
    if (v->type != LP_JSON_BOOL) return refuse(rq, v->key, "must be true or false, got %s", lp_json_type_name(v->type));
    *out = v->u.b;
    return 0;
}

static int want_string(lp_request_t *rq, const lp_json_t *v, const char **out)
{
    if (v->type != LP_JSON_STRING) return refuse(rq, v->key, "must be a string, got %s", lp_json_type_name(v->type));
    *out = v->u.str;
    return 0;
}

static int read_ids(lp_request_t *rq, const char *field, const lp_json_t *v, int32_t **ids, size_t *n)
{
    if (!(*ids = malloc((v->n ? v->n : 1) * sizeof(int32_t)))) return LP_ERR(ENOMEM);
    for (size_t k = 0; k < v->n; k++) {
        int64_t x;
        if (lp_json_int(&v->u.items[k], 0, INT32_MAX, &x))
            return refuse_at(rq, field, "%s[%zu]: not a token id", field, k);
        (*ids)[k] = (int32_t)x;
    }
    *n = v->n;
    return 0;
}

static int read_prompt(lp_request_t *rq, const lp_json_t *v)
{
    bool many_ok = rq->ep == LP_RS_COMPLETIONS && rq->edge == LP_RS_HTTP;
    size_t count = 1;
    bool many = false;
    if (v->type == LP_JSON_ARRAY && v->n > 0 &&
        (v->u.items[0].type == LP_JSON_STRING || v->u.items[0].type == LP_JSON_ARRAY)) {
        if (!many_ok) return refuse(rq, "prompt", "%s takes one prompt", lp_rs_endpoint_name(rq->ep));
        many = true;
        count = v->n;
    } else if (v->type != LP_JSON_STRING && v->type != LP_JSON_ARRAY)
        return refuse(rq, "prompt", "must be a string or a list, got %s", lp_json_type_name(v->type));
    if (count > LP_RS_MAX_PROMPTS) return refuse(rq, "prompt", "at most %d prompts, got %zu", LP_RS_MAX_PROMPTS, count);
    if (!(rq->prompts = calloc(count, sizeof(*rq->prompts)))) return LP_ERR(ENOMEM);
    rq->n_prompts = count;
    for (size_t i = 0; i < count; i++) {
        const lp_json_t *it = many ? &v->u.items[i] : v;
        lp_rs_prompt_t *p = &rq->prompts[i];
        if (it->type == LP_JSON_STRING) {
            p->text = it->u.str;
            p->len = it->n;
        } else if (it->type == LP_JSON_ARRAY) {
            if (it->n == 0) return refuse(rq, "prompt", "an empty token list");
            int rc = read_ids(rq, "prompt", it, &p->ids, &p->n_ids);
            if (rc) return rc;
        } else
            return refuse_at(rq, "prompt", "prompt[%zu]: must be a string or a list of token ids", i);
    }
    return 0;
}

static int read_stop(lp_request_t *rq, const lp_json_t *v)
{
    size_t n = v->type == LP_JSON_STRING ? 1 : v->type == LP_JSON_ARRAY ? v->n : 0;
    if (rq->ep == LP_RS_COMPLETION && v->type != LP_JSON_ARRAY)
        return refuse(rq, "stop", "must be a list of strings, got %s", lp_json_type_name(v->type));
    if (v->type != LP_JSON_STRING && v->type != LP_JSON_ARRAY)
        return refuse(rq, "stop", "must be a string or a list of strings, got %s", lp_json_type_name(v->type));
    if (n > LP_RS_MAX_STOPS) return refuse(rq, "stop", "at most %d stop strings, got %zu", LP_RS_MAX_STOPS, n);
    for (size_t i = 0; i < n; i++) {
        const lp_json_t *s = v->type == LP_JSON_STRING ? v : &v->u.items[i];
        if (s->type != LP_JSON_STRING) return refuse_at(rq, "stop", "stop[%zu]: must be a string", i);
        if (!s->n) return refuse_at(rq, "stop", "stop[%zu]: an empty stop string", i);
        rq->stops[i] = s->u.str;
        rq->stop_lens[i] = s->n;
    }
    rq->n_stops = n;
    return 0;
}

/* A sampling field through the sampler's own reader, after the dialect's
 * range (the sampler's ranges come after the whole body, validate). */
static int read_sampling(lp_request_t *rq, const lp_rs_field_t *f, const lp_json_t *v)
{
    const char *name = f->alias_of ? f->alias_of : f->name;
    enum lp_rs_dialect d = lp_rs_dialect_of(rq->ep);
    int rc;
    if (f->type == LP_RS_T_NUMBER) {
        double x;
        if ((rc = want_number(rq, f, v, &x))) return rc;
    } else if (f->type == LP_RS_T_INT) {
        int64_t x;
        if ((rc = want_int(rq, f, v, &x))) return rc;
    } else if (f->type == LP_RS_T_LOGIT_BIAS && d == LP_RS_OPENAI && v->type == LP_JSON_OBJECT) {
        for (size_t i = 0; i < v->n; i++) {
            const lp_json_t *b = &v->u.items[i];
            if (b->type == LP_JSON_NUMBER && (b->u.num < f->lo[d] || b->u.num > f->hi[d]))
                return refuse(rq, "logit_bias", "the bias of \"%.20s\" must be in [-100, 100] (OpenAI's range), got %g",
                              b->key, b->u.num);
        }
    }
    lp_json_t named = *v; /* the sampler's reader names the field as it reads it */
    named.key = name;
    rc = lp_sampler_params_read_field(name, &named, &rq->sp);
    if (rc < 0) {
        /* its message names the field by its llama.cpp name: say the client's */
        char msg[512];
        const char *m = lp_error_msg();
        size_t nl = strlen(name);
        snprintf(msg, sizeof(msg), "%s", !strncmp(m, name, nl) && m[nl] == ':' ? m + nl + 2 : m);
        return refuse(rq, f->name, "%s", msg);
    }
    return 0;
}

/* stream_options: {include_usage} */
static int read_stream_options(lp_request_t *rq, const lp_json_t *v)
{
    if (v->type != LP_JSON_OBJECT) return refuse(rq, "stream_options", "must be an object");
    for (size_t i = 0; i < v->n; i++) {
        const lp_json_t *o = &v->u.items[i];
        if (strcmp(o->key, "include_usage"))
            return refuse(rq, "stream_options", "stream_options.%.40s: not supported (only include_usage)", o->key);
        if (o->type == LP_JSON_NULL) continue;
        if (o->type != LP_JSON_BOOL) return refuse(rq, "stream_options", "stream_options.include_usage: must be true or false");
        rq->include_usage = o->u.b;
    }
    return 0;
}

static int read_metadata(lp_request_t *rq, const lp_rs_field_t *f, const lp_json_t *v)
{
    switch (f->type) {
    case LP_RS_T_STRING: {
        const char *s;
        return want_string(rq, v, &s);
    }
    case LP_RS_T_BOOL: {
        bool b = false;
        return want_bool(rq, v, &b);
    }
    case LP_RS_T_OBJECT:
        if (v->type != LP_JSON_OBJECT) return refuse(rq, v->key, "must be an object, got %s", lp_json_type_name(v->type));
        if (v->n > 16) return refuse(rq, v->key, "at most 16 keys, got %zu", v->n);
        for (size_t i = 0; i < v->n; i++)
            if (v->u.items[i].type != LP_JSON_STRING) return refuse(rq, v->key, "values must be strings");
        return 0;
    default: return 0;
    }
}

/* One member whose row is f. */
static int read_field(lp_request_t *rq, const lp_rs_field_t *f, const lp_json_t *v, bool *seen_logprobs,
                      int64_t *top_logprobs, int64_t *best_of)
{
    int64_t x;
    int rc;
    switch (f->id) {
    case LP_RS_ID_SAMPLING: return read_sampling(rq, f, v);
    case LP_RS_ID_MODEL: return want_string(rq, v, &rq->model);
    case LP_RS_ID_PROMPT: return read_prompt(rq, v);
    case LP_RS_ID_MESSAGES:
    case LP_RS_ID_CHAT: return 0; /* the conversation: read as one, below */
    case LP_RS_ID_MAX_TOKENS:
    case LP_RS_ID_N_PREDICT:
        if ((rc = want_int(rq, f, v, &x))) return rc;
        if (f->id == LP_RS_ID_N_PREDICT && x == 0)
            return refuse(rq, v->key, "must be -1 (no limit) or a positive integer, got 0");
        rq->n_predict = (int32_t)x;
        return 0;
    case LP_RS_ID_STOP: return read_stop(rq, v);
    case LP_RS_ID_STREAM:
        if ((rc = want_bool(rq, v, &rq->stream))) return rc;
        if (rq->edge == LP_RS_NATS && !rq->stream)
            return refuse(rq, "stream", "over NATS events always stream: only true is taken");
        return 0;
    case LP_RS_ID_STREAM_OPTIONS: return read_stream_options(rq, v);
    case LP_RS_ID_N:
        if ((rc = want_int(rq, f, v, &x))) {
            if (rq->edge == LP_RS_NATS) return refuse(rq, "n", "only 1 choice per request over NATS");
            return rc;
        }
        rq->n = (int)x;
        return 0;
    case LP_RS_ID_LOGPROBS:
        *seen_logprobs = true;
        if (f->type == LP_RS_T_INT) {
            if ((rc = want_int(rq, f, v, &x))) return rc;
            rq->n_probs = (int)x;
        } else if (f->type == LP_RS_T_BOOL) {
            bool b = false;
            if ((rc = want_bool(rq, v, &b))) return rc;
            rq->n_probs = b ? 0 : -1;
        } else { /* true, false or a count */
            if (v->type == LP_JSON_BOOL) rq->n_probs = v->u.b ? 1 : -1;
            else if (!lp_json_int(v, 0, 20, &x)) rq->n_probs = x > 0 ? (int)x : -1;
            else return refuse(rq, "logprobs", "must be true, false or an integer in [0, 20]");
        }
        return 0;
    case LP_RS_ID_TOP_LOGPROBS: return want_int(rq, f, v, top_logprobs);
    case LP_RS_ID_N_PROBS:
        if ((rc = want_int(rq, f, v, &x))) return rc;
        rq->n_probs = x > 0 ? (int)x : -1;
        return 0;
    case LP_RS_ID_ECHO: return want_bool(rq, v, &rq->echo);
    case LP_RS_ID_BEST_OF: return want_int(rq, f, v, best_of);
    case LP_RS_ID_CHAT_TEMPLATE: return want_string(rq, v, &rq->chat_template);
    case LP_RS_ID_IGNORE_EOS: return want_bool(rq, v, &rq->ignore_eos);
    case LP_RS_ID_DEADLINE_MS:
        if ((rc = want_int(rq, f, v, &x))) return rc;
        rq->deadline_ms = (uint32_t)x;
        return 0;
    case LP_RS_ID_T_MAX_PREDICT_MS:
        if ((rc = want_int(rq, f, v, &x))) return rc;
        rq->t_max_predict_ms = (uint32_t)x;
        return 0;
    case LP_RS_ID_CACHE_PROMPT: {
        bool b = false;
        if ((rc = want_bool(rq, v, &b))) return rc;
        if (!b) return refuse(rq, "cache_prompt", "false is not supported: prefix reuse is always on (it never "
                                                  "changes the output)");
        return 0;
    }
    case LP_RS_ID_METADATA: return read_metadata(rq, f, v);
    case LP_RS_ID_CONTENT:
        if ((rc = want_string(rq, v, &rq->content))) return rc;
        rq->content_len = v->n;
        return 0;
    case LP_RS_ID_ADD_SPECIAL: return want_bool(rq, v, &rq->add_special);
    case LP_RS_ID_PARSE_SPECIAL: return want_bool(rq, v, &rq->parse_special);
    case LP_RS_ID_WITH_PIECES: return want_bool(rq, v, &rq->with_pieces);
    case LP_RS_ID_TOKENS:
        if (v->type != LP_JSON_ARRAY) return refuse(rq, "tokens", "must be a list of token ids");
        if ((rc = read_ids(rq, "tokens", v, &rq->tokens, &rq->n_tokens))) return rc;
        return 0;
    case LP_RS_ID_NATS_V: return want_int(rq, f, v, &x) ? refuse(rq, "v", "unknown schema version (this bridge reads 1)") : 0;
    case LP_RS_ID_NATS_ID: return want_string(rq, v, &rq->nats_id);
    case LP_RS_ID_NATS_REPLY_TO: return want_string(rq, v, &rq->reply_to);
    case LP_RS_ID_NONE:
    default: return refuse(rq, v->key, "%s", f->doc);
    }
}

/* ---- the body -------------------------------------------------------------------- */

static const lp_rs_field_t *alias_target(const lp_rs_field_t *f, enum lp_rs_endpoint ep, unsigned edge)
{
    return f->alias_of ? lp_rs_find(f->alias_of, ep, edge) : f;
}

int lp_request_read(const lp_json_t *root, enum lp_rs_endpoint ep, unsigned edge, lp_request_t *rq)
{
    memset(rq, 0, sizeof(*rq));
    rq->ep = ep;
    rq->edge = edge;
    rq->n = 1;
    rq->n_probs = -1;
    rq->parse_special = true; /* llama-server's default */
    lp_sampler_params_default(&rq->sp);
    if (!root || root->type != LP_JSON_OBJECT)
        return refuse(rq, "body", "must be a JSON object, got %s", root ? lp_json_type_name(root->type) : "nothing");
    bool seen_logprobs = false;
    int64_t top_logprobs = -1, best_of = -1;
    /* the fields given so far, and the names they came by (aliases) */
    const char *given_as[64] = {0};
    const lp_rs_field_t *given_row[64] = {0};
    size_t n_given = 0;
    for (size_t i = 0; i < root->n; i++) {
        const lp_json_t *v = &root->u.items[i];
        const lp_rs_field_t *f = lp_rs_find(v->key, ep, edge);
        if (!f) return unknown(rq, v);
        if (f->use == LP_RS_REFUSED) {
            if (v->type == LP_JSON_NULL) continue; /* null: not given */
            return refuse(rq, f->name, "%s", f->doc);
        }
        if (v->type == LP_JSON_NULL) continue;
        /* one field, two names: only one of them */
        const lp_rs_field_t *t = alias_target(f, ep, edge);
        for (size_t k = 0; k < n_given; k++)
            if (given_row[k] == t)
                return refuse(rq, f->name, "give %s or %s, not both", given_as[k], f->name);
        if (n_given < 64) {
            given_row[n_given] = t;
            given_as[n_given++] = f->name;
        }
        int rc = read_field(rq, f, v, &seen_logprobs, &top_logprobs, &best_of);
        if (rc) return rc;
    }

    /* what each endpoint needs, and the fields that go together */
    /* The conversation (messages, tools, ...), checked and written once,
     * here at the edge: the coordinator passes it on and tokenizer-svc's
     * template renderer reads it. */
    const lp_json_t *msgs = lp_json_get(root, "messages");
    if ((ep == LP_RS_CHAT || ep == LP_RS_APPLY_TEMPLATE) && msgs && msgs->type != LP_JSON_NULL) {
        const char *param = NULL;
        char why[512];
        if (lp_chat_request_json(root, &rq->chat_json, &rq->chat_json_len, &param, why, sizeof(why))) {
            if (!param) return LP_ERR(ENOMEM);
            return refuse_at(rq, param, "%s", why);
        }
    }
    switch (edge & LP_RS_PARTIAL ? LP_RS_N_ENDPOINTS : ep) {
    case LP_RS_COMPLETIONS:
    case LP_RS_COMPLETION:
        if (!rq->n_prompts) return refuse(rq, "prompt", "missing");
        break;
    case LP_RS_CHAT:
    case LP_RS_APPLY_TEMPLATE:
        if (!rq->chat_json) return refuse(rq, "messages", "missing");
        break;
    case LP_RS_TOKENIZE:
        if (!rq->content) return refuse(rq, "content", "missing (the text to tokenize)");
        break;
    case LP_RS_DETOKENIZE:
        if (!rq->tokens) return refuse(rq, "tokens", "missing (the token ids)");
        break;
    default: break;
    }
    if (ep == LP_RS_CHAT) {
        if (top_logprobs >= 0 && rq->n_probs < 0) return refuse(rq, "top_logprobs", "needs logprobs: true");
        if (rq->n_probs >= 0 && top_logprobs > 0) rq->n_probs = (int)top_logprobs;
    }
    if (rq->echo && rq->n_probs >= 0)
        return refuse(rq, "echo", "echo with logprobs is not supported: the pipeline does not compute prompt logprobs");
    if (best_of >= 0 && best_of != rq->n) return refuse(rq, "best_of", "only best_of = n is supported");
    if (rq->n_prompts * (size_t)rq->n > LP_RS_MAX_CHOICES)
        return refuse(rq, "n", "%d choices for each of %zu prompts is more than %d in all", rq->n, rq->n_prompts,
                      LP_RS_MAX_CHOICES);
    (void)seen_logprobs;
    /* The sampler's ranges on what was given, laid over its defaults as the
     * sampler will lay them over its strategy. */
    if (rq->n_probs >= 0) {
        rq->sp.n_probs = rq->n_probs > 0 ? rq->n_probs : 1; /* the chosen token's logprob needs one */
        rq->sp.set |= 1ull << LP_SP_N_PROBS;
    }
    if (rq->sp.set) {
        lp_sampler_params_t check;
        lp_sampler_params_default(&check);
        lp_sampler_params_overlay(&check, &rq->sp);
        int rc = lp_sampler_params_validate(&check);
        if (rc) {
            snprintf(rq->param, sizeof(rq->param), "%s", lp_error_param());
            return rc;
        }
    }
    return 0;
}

void lp_request_clear(lp_request_t *rq)
{
    for (size_t i = 0; rq->prompts && i < rq->n_prompts; i++) free(rq->prompts[i].ids);
    free(rq->prompts);
    free(rq->chat_json);
    free(rq->tokens);
    rq->prompts = NULL;
    rq->chat_json = NULL;
    rq->tokens = NULL;
    rq->n_prompts = rq->chat_json_len = rq->n_tokens = 0;
}

enum lp_rs_endpoint lp_request_nats_endpoint(const lp_json_t *root)
{
    if (lp_json_get(root, "messages")) return LP_RS_CHAT;
    for (size_t i = 0; root && root->type == LP_JSON_OBJECT && i < root->n; i++) {
        const char *k = root->u.items[i].key;
        if (lp_rs_find(k, LP_RS_COMPLETIONS, BOTH) && !lp_rs_find(k, LP_RS_COMPLETION, BOTH))
            return LP_RS_COMPLETIONS;
    }
    return LP_RS_COMPLETION;
}

/* ---- the table, printed ------------------------------------------------------------ */

static void put_range(lp_json_buf_t *b, const lp_rs_field_t *f, int d)
{
    if (isinf(f->lo[d]) && isinf(f->hi[d])) {
        lp_json_buf_puts(b, "null");
        return;
    }
    lp_json_buf_puts(b, "[");
    if (isinf(f->lo[d])) lp_json_buf_puts(b, "null");
    else lp_json_buf_num(b, f->lo[d]);
    lp_json_buf_puts(b, ",");
    if (isinf(f->hi[d])) lp_json_buf_puts(b, "null");
    else lp_json_buf_num(b, f->hi[d]);
    lp_json_buf_puts(b, "]");
}

static void put_opt_str(lp_json_buf_t *b, const char *s)
{
    if (s) lp_json_buf_str(b, s, strlen(s));
    else lp_json_buf_puts(b, "null");
}

/* Ranges matter for numbers only. */
static bool numeric(const lp_rs_field_t *f) { return f->type == LP_RS_T_NUMBER || f->type == LP_RS_T_INT; }

void lp_rs_write_json(lp_json_buf_t *b)
{
    lp_json_buf_puts(b, "{\"endpoints\":[");
    for (int e = 0; e < LP_RS_N_ENDPOINTS; e++) {
        const char *n = lp_rs_endpoint_name((enum lp_rs_endpoint)e);
        if (e) lp_json_buf_puts(b, ",");
        lp_json_buf_printf(b, "{\"path\":\"%s\",\"dialect\":\"%s\"}", n,
                           lp_rs_dialect_of((enum lp_rs_endpoint)e) == LP_RS_OPENAI ? "openai" : "llama.cpp");
    }
    lp_json_buf_puts(b, "],\"fields\":[");
    for (size_t i = 0; i < lp_rs_n_fields; i++) {
        const lp_rs_field_t *f = &lp_rs_fields[i];
        if (i) lp_json_buf_puts(b, ",");
        lp_json_buf_puts(b, "{\"name\":");
        put_opt_str(b, f->name);
        lp_json_buf_puts(b, ",\"alias_of\":");
        put_opt_str(b, f->alias_of);
        lp_json_buf_puts(b, ",\"type\":");
        lp_json_buf_str(b, lp_rs_type_name(f->type), strlen(lp_rs_type_name(f->type)));
        lp_json_buf_printf(b, ",\"use\":\"%s\",\"endpoints\":[", lp_rs_use_name(f->use));
        int k = 0;
        for (int e = 0; e < LP_RS_N_ENDPOINTS; e++)
            if (f->endpoints & LP_RS_EP(e))
                lp_json_buf_printf(b, "%s\"%s\"", k++ ? "," : "", lp_rs_endpoint_name((enum lp_rs_endpoint)e));
        lp_json_buf_printf(b, "],\"edges\":[%s%s%s]", f->edges & LP_RS_HTTP ? "\"http\"" : "",
                           f->edges == BOTH ? "," : "", f->edges & LP_RS_NATS ? "\"nats\"" : "");
        lp_json_buf_puts(b, ",\"range\":{\"openai\":");
        if (numeric(f)) put_range(b, f, LP_RS_OPENAI);
        else lp_json_buf_puts(b, "null");
        lp_json_buf_puts(b, ",\"llama.cpp\":");
        if (numeric(f)) put_range(b, f, LP_RS_LLAMA);
        else lp_json_buf_puts(b, "null");
        lp_json_buf_puts(b, "},\"default\":");
        put_opt_str(b, f->def);
        lp_json_buf_puts(b, ",\"doc\":");
        put_opt_str(b, f->doc);
        lp_json_buf_puts(b, ",\"example\":");
        if (f->example) lp_json_buf_puts(b, f->example);
        else lp_json_buf_puts(b, "null");
        lp_json_buf_puts(b, "}");
    }
    lp_json_buf_puts(b, "]}\n");
}

static void md_range(lp_json_buf_t *b, const lp_rs_field_t *f, int d)
{
    char r[80];
    if (!numeric(f)) {
        lp_json_buf_puts(b, "");
        return;
    }
    char lo[32], hi[32];
    lp_json_buf_t t = {0};
    if (isinf(f->lo[d])) snprintf(lo, sizeof(lo), "-inf");
    else {
        lp_json_buf_num(&t, f->lo[d]);
        snprintf(lo, sizeof(lo), "%s", t.p ? t.p : "");
        lp_json_buf_free(&t);
    }
    if (isinf(f->hi[d])) snprintf(hi, sizeof(hi), "inf");
    else {
        lp_json_buf_num(&t, f->hi[d]);
        snprintf(hi, sizeof(hi), "%s", t.p ? t.p : "");
        lp_json_buf_free(&t);
    }
    if (isinf(f->lo[d]) && isinf(f->hi[d])) snprintf(r, sizeof(r), "any");
    else snprintf(r, sizeof(r), "[%s, %s]", lo, hi);
    lp_json_buf_puts(b, r);
}

/* A cell's text: '|' would end the cell. */
static void md_text(lp_json_buf_t *b, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '|') lp_json_buf_puts(b, "\\|");
        else lp_json_buf_put(b, s, 1);
    }
}

void lp_rs_write_markdown(lp_json_buf_t *b, unsigned edge)
{
    static const char *const short_ep[LP_RS_N_ENDPOINTS] = {"completions", "chat", "completion", "tokenize",
                                                            "detokenize", "apply-template"};
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 0)
            lp_json_buf_puts(b, "| field | endpoints | type | OpenAI range (/v1/*) | llama.cpp range | default | what |\n"
                                "|---|---|---|---|---|---|---|\n");
        else
            lp_json_buf_puts(b, "\nRefused with 400 naming the field:\n\n| field | endpoints | why |\n|---|---|---|\n");
        for (size_t i = 0; i < lp_rs_n_fields; i++) {
            const lp_rs_field_t *f = &lp_rs_fields[i];
            if (!(f->edges & edge) || (f->use == LP_RS_REFUSED) != (pass == 1)) continue;
            if (edge == LP_RS_NATS && !(f->endpoints & GEN)) continue;
            lp_json_buf_printf(b, "| `%s` | ", f->name);
            int k = 0;
            for (int e = 0; e < LP_RS_N_ENDPOINTS; e++)
                if (f->endpoints & LP_RS_EP(e) && !(edge == LP_RS_NATS && !(LP_RS_EP(e) & GEN)))
                    lp_json_buf_printf(b, "%s%s", k++ ? ", " : "", short_ep[e]);
            if (pass == 1) {
                lp_json_buf_puts(b, " | ");
                md_text(b, f->doc);
                lp_json_buf_puts(b, " |\n");
                continue;
            }
            lp_json_buf_printf(b, " | %s | ", lp_rs_type_name(f->type));
            if (f->endpoints & OAI) md_range(b, f, LP_RS_OPENAI);
            lp_json_buf_puts(b, " | ");
            if (f->endpoints & ~OAI) md_range(b, f, LP_RS_LLAMA);
            lp_json_buf_puts(b, " | ");
            md_text(b, f->def ? f->def : "");
            lp_json_buf_puts(b, " | ");
            if (f->alias_of) lp_json_buf_printf(b, "Another name for `%s`: ", f->alias_of);
            if (f->use == LP_RS_NO_EFFECT) lp_json_buf_puts(b, "(no effect) ");
            md_text(b, f->doc);
            lp_json_buf_puts(b, " |\n");
        }
    }
}
