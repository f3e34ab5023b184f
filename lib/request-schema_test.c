/* request-schema_test.c - the request schema: every row's example is taken
 * where the row says and refused elsewhere; unknown, misspelled and
 * unimplemented fields are refused by name; the dialects' ranges; aliases;
 * null as absent; the /completion request fields (n_predict, ignore_eos,
 * stop, prompt) read and refused as the coordinator's own reader did; the
 * NATS shapes; and the table printed as JSON that reads back. */
#include "request-schema.h"

#include "check.h"
#include "error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static lp_request_t RQ;
static lp_json_doc_t *DOC;

/* Read `body` for ep over edge; 0 or the error code (RQ holds the result
 * until the next call). */
static int rd(const char *body, enum lp_rs_endpoint ep, unsigned edge)
{
    lp_request_clear(&RQ);
    lp_json_doc_destroy(&DOC);
    if (lp_json_parse(body, strlen(body), &DOC) != 0) {
        fprintf(stderr, "  not JSON: %s: %s\n", body, lp_error_msg());
        return -1000;
    }
    return lp_request_read(lp_json_root(DOC), ep, edge, &RQ);
}

/* Must be refused, the message starting with `msg` and param `param`. */
static void refused(const char *body, enum lp_rs_endpoint ep, unsigned edge, const char *param, const char *msg)
{
    int rc = rd(body, ep, edge);
    CHECK(rc == LP_ERR(EINVAL), "%s on %s: accepted (rc %d)", body, lp_rs_endpoint_name(ep), rc);
    if (rc != LP_ERR(EINVAL)) return;
    CHECK(!strcmp(RQ.param, param), "%s on %s: param '%s', want '%s'", body, lp_rs_endpoint_name(ep), RQ.param, param);
    CHECK(!strncmp(lp_error_msg(), msg, strlen(msg)), "%s on %s: '%s' does not start with '%s'", body,
          lp_rs_endpoint_name(ep), lp_error_msg(), msg);
    CHECK(!strcmp(lp_error_param(), param) && lp_error_kind(rc) == LP_EK_INVALID_REQUEST);
}

static void taken(const char *body, enum lp_rs_endpoint ep, unsigned edge)
{
    int rc = rd(body, ep, edge);
    CHECK(rc == 0, "%s on %s: refused: %s", body, lp_rs_endpoint_name(ep), lp_error_msg());
}

/* The fields an endpoint needs, to add one more to. */
static const char *base_of(enum lp_rs_endpoint ep)
{
    switch (ep) {
    case LP_RS_COMPLETIONS:
    case LP_RS_COMPLETION: return "\"prompt\":\"Hi\"";
    case LP_RS_CHAT:
    case LP_RS_APPLY_TEMPLATE: return "\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]";
    case LP_RS_TOKENIZE: return "\"content\":\"Hi\"";
    case LP_RS_DETOKENIZE: return "\"tokens\":[1]";
    default: return "";
    }
}

/* Every row's example, alone beside what its endpoint needs: taken where
 * the row says (refused rows: refused naming it), and refused naming it on
 * every endpoint and edge no row of that name takes. */
static void test_rows(void)
{
    size_t n_taken = 0, n_refused = 0;
    for (size_t i = 0; i < lp_rs_n_fields; i++) {
        const lp_rs_field_t *f = &lp_rs_fields[i];
        CHECK(f->name && f->doc && f->example, "row %zu is incomplete", i);
        if (!f->name || !f->example) continue;
        for (int e = 0; e < LP_RS_N_ENDPOINTS; e++)
            for (unsigned edge = LP_RS_HTTP; edge <= LP_RS_NATS; edge <<= 1) {
                const char *base = base_of((enum lp_rs_endpoint)e);
                char body[1024];
                bool same = !strcmp(f->name, "prompt") || !strcmp(f->name, "messages") ||
                            !strcmp(f->name, "content") || !strcmp(f->name, "tokens");
                /* top_logprobs needs logprobs */
                const char *with = !strcmp(f->name, "top_logprobs") ? "\"logprobs\":true," : "";
                snprintf(body, sizeof(body), "{%s%s%s\"%s\":%s}", same ? "" : base, same ? "" : ",", with, f->name,
                         f->example);
                const lp_rs_field_t *row = lp_rs_find(f->name, (enum lp_rs_endpoint)e, edge);
                if (row != f) continue; /* another row of the name speaks for this place */
                int rc = rd(body, (enum lp_rs_endpoint)e, edge);
                if (f->use == LP_RS_REFUSED) {
                    n_refused++;
                    CHECK(rc == LP_ERR(EINVAL) && !strcmp(RQ.param, f->name) && strstr(lp_error_msg(), "not supported"),
                          "%s on %s: %s", body, lp_rs_endpoint_name((enum lp_rs_endpoint)e),
                          rc ? lp_error_msg() : "taken");
                } else {
                    n_taken++;
                    CHECK(rc == 0, "%s on %s over %s: %s", body, lp_rs_endpoint_name((enum lp_rs_endpoint)e),
                          edge == LP_RS_NATS ? "NATS" : "HTTP", lp_error_msg());
                }
            }
        /* nowhere else: a generation field is refused on /tokenize */
        if (!lp_rs_find(f->name, LP_RS_TOKENIZE, LP_RS_HTTP) && strcmp(f->name, "content")) {
            char body[1024];
            snprintf(body, sizeof(body), "{\"content\":\"x\",\"%s\":%s}", f->name, f->example);
            int rc = rd(body, LP_RS_TOKENIZE, LP_RS_HTTP);
            CHECK(rc == LP_ERR(EINVAL) && !strcmp(RQ.param, f->name), "%s on /tokenize: %s", body,
                  rc ? lp_error_msg() : "taken");
        }
    }
    CHECK(n_taken > 100 && n_refused > 60, "%zu taken, %zu refused", n_taken, n_refused);
}

static void test_unknown(void)
{
    refused("{\"prompt\":\"x\",\"temperture\":0.5}", LP_RS_COMPLETIONS, LP_RS_HTTP, "temperture",
            "temperture: unknown field (did you mean temperature?)");
    refused("{\"prompt\":\"x\",\"top-k\":5}", LP_RS_COMPLETION, LP_RS_HTTP, "top-k", "top-k: unknown field (did you mean top_k?)");
    refused("{\"prompt\":\"x\",\"zzzzzzzzzz\":1}", LP_RS_COMPLETION, LP_RS_HTTP, "zzzzzzzzzz", "zzzzzzzzzz: unknown field");
    /* a field of another endpoint names where it belongs */
    refused("{\"prompt\":\"x\",\"n_probs\":2}", LP_RS_COMPLETIONS, LP_RS_HTTP, "n_probs",
            "n_probs: not a field of /v1/completions (it is one of /completion)");
    refused("{\"prompt\":\"x\",\"max_tokens\":2}", LP_RS_COMPLETION, LP_RS_HTTP, "max_tokens",
            "max_tokens: not a field of /completion");
    refused("{\"prompt\":\"x\"}", LP_RS_CHAT, LP_RS_HTTP, "prompt", "prompt: not a field of /v1/chat/completions");
    /* unimplemented: "not supported", also inside messages */
    refused("{\"prompt\":\"x\",\"response_format\":{\"type\":\"json_schema\"}}", LP_RS_COMPLETIONS, LP_RS_HTTP,
            "response_format", "response_format: not supported");
    refused("{\"prompt\":\"x\",\"response_format\":{\"type\":\"nonsense\"}}", LP_RS_COMPLETIONS, LP_RS_HTTP,
            "response_format", "response_format: not supported");
    refused("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"required\"}", LP_RS_CHAT,
            LP_RS_HTTP, "tool_choice", "tool_choice: not supported");
    refused("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":{\"type\":\"function\","
            "\"function\":{\"name\":\"f\"}}}", LP_RS_CHAT, LP_RS_HTTP, "tool_choice", "tool_choice: not supported");
    refused("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"functions\":[{\"name\":\"f\"}]}", LP_RS_CHAT,
            LP_RS_HTTP, "functions", "functions: not supported");
    refused("{\"prompt\":\"x\",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}",
            LP_RS_COMPLETIONS, LP_RS_HTTP, "tools", "tools: not supported: tools are for chat");
    refused("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"chat_template_kwargs\":"
            "{\"add_generation_prompt\":false}}", LP_RS_CHAT, LP_RS_HTTP, "chat_template_kwargs",
            "chat_template_kwargs.add_generation_prompt: set by the request itself");
    /* the conversation (tool calls, their results, kwargs) is taken as
     * template input: chat_json, written once at the edge */
    taken("{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c\",\"type\":"
          "\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},{\"role\":\"tool\",\"tool_call_id\":"
          "\"c\",\"content\":\"1\"}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
          "\"tool_choice\":\"none\",\"parallel_tool_calls\":false,\"chat_template_kwargs\":{\"x\":1.0}}",
          LP_RS_CHAT, LP_RS_HTTP);
    CHECK(RQ.chat_json && strstr(RQ.chat_json, "\"tool_calls\":[") && strstr(RQ.chat_json, "\"tools\":[") &&
              strstr(RQ.chat_json, "\"chat_template_kwargs\":{\"x\":1.0}") && !strstr(RQ.chat_json, "tool_choice"),
          "%s", RQ.chat_json);
    refused("{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"colour\":1}]}", LP_RS_CHAT, LP_RS_HTTP, "messages",
            "messages[0].colour: unknown field");
    refused("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{}}]}]}", LP_RS_CHAT,
            LP_RS_HTTP, "messages", "messages[0].content[0]: only");
    refused("{\"prompt\":\"x\",\"cache_prompt\":false}", LP_RS_COMPLETION, LP_RS_HTTP, "cache_prompt",
            "cache_prompt: false is not supported");
    refused("{\"prompt\":\"x\",\"stream_options\":{\"include_usage\":true,\"continuous_usage_stats\":true}}",
            LP_RS_COMPLETIONS, LP_RS_HTTP, "stream_options", "stream_options: stream_options.continuous_usage_stats");
    /* null is leaving the field out, refused ones too */
    taken("{\"prompt\":\"x\",\"tools\":null,\"response_format\":null,\"temperature\":null,\"user\":null}",
          LP_RS_COMPLETIONS, LP_RS_HTTP);
    CHECK(RQ.sp.set == 0);
}

static void test_dialects(void)
{
    /* OpenAI's ranges on /v1, llama.cpp's on /completion */
    refused("{\"prompt\":\"x\",\"temperature\":-3}", LP_RS_COMPLETIONS, LP_RS_HTTP, "temperature",
            "temperature: must be in [0, 2] (OpenAI's range), got -3");
    refused("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":2.5}", LP_RS_CHAT, LP_RS_HTTP,
            "temperature", "temperature: must be in [0, 2]");
    taken("{\"prompt\":\"x\",\"temperature\":-3}", LP_RS_COMPLETION, LP_RS_HTTP);
    CHECK(RQ.sp.temperature == -3.0f && (RQ.sp.set & (1ull << LP_SP_TEMPERATURE)));
    refused("{\"prompt\":\"x\",\"frequency_penalty\":5}", LP_RS_COMPLETIONS, LP_RS_HTTP, "frequency_penalty",
            "frequency_penalty: must be in [-2, 2]");
    taken("{\"prompt\":\"x\",\"frequency_penalty\":5,\"presence_penalty\":-5}", LP_RS_COMPLETION, LP_RS_HTTP);
    CHECK(RQ.sp.frequency_penalty == 5.0f && RQ.sp.presence_penalty == -5.0f);
    refused("{\"prompt\":\"x\",\"logit_bias\":{\"5\":150}}", LP_RS_COMPLETIONS, LP_RS_HTTP, "logit_bias",
            "logit_bias: the bias of \"5\" must be in [-100, 100]");
    taken("{\"prompt\":\"x\",\"logit_bias\":{\"5\":150}}", LP_RS_COMPLETION, LP_RS_HTTP);
    refused("{\"prompt\":\"x\",\"seed\":-1}", LP_RS_COMPLETIONS, LP_RS_HTTP, "seed", "seed: must be an integer in [0, ");
    taken("{\"prompt\":\"x\",\"seed\":-1}", LP_RS_COMPLETION, LP_RS_HTTP);
    /* the sampler's own ranges apply on every endpoint */
    refused("{\"prompt\":\"x\",\"top_p\":1.5}", LP_RS_COMPLETION, LP_RS_HTTP, "top_p", "top_p: must be in [0, 1]");
    refused("{\"prompt\":\"x\",\"top_k\":-1}", LP_RS_COMPLETION, LP_RS_HTTP, "top_k", "top_k: must be an integer in [0,");
    refused("{\"prompt\":\"x\",\"repeat_penalty\":0}", LP_RS_COMPLETION, LP_RS_HTTP, "repeat_penalty",
            "repeat_penalty: must be > 0");
    refused("{\"prompt\":\"x\",\"samplers\":[\"bogus\"]}", LP_RS_COMPLETION, LP_RS_HTTP, "samplers",
            "samplers: unknown sampler \"bogus\"");
    refused("{\"prompt\":\"x\",\"temperature\":\"hot\"}", LP_RS_COMPLETION, LP_RS_HTTP, "temperature",
            "temperature: must be a number, got string");
    /* aliases: read as the field, not both */
    taken("{\"prompt\":\"x\",\"repetition_penalty\":1.2}", LP_RS_COMPLETIONS, LP_RS_HTTP);
    CHECK(RQ.sp.repeat_penalty == 1.2f && (RQ.sp.set & (1ull << LP_SP_REPEAT_PENALTY)));
    refused("{\"prompt\":\"x\",\"repeat_penalty\":1.1,\"repetition_penalty\":1.2}", LP_RS_COMPLETIONS, LP_RS_HTTP,
            "repetition_penalty", "repetition_penalty: give repeat_penalty or repetition_penalty, not both");
    taken("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_completion_tokens\":7}", LP_RS_CHAT, LP_RS_HTTP);
    CHECK(RQ.n_predict == 7);
    refused("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":7,\"max_completion_tokens\":7}",
            LP_RS_CHAT, LP_RS_HTTP, "max_completion_tokens", "max_completion_tokens: give max_tokens or");
}

/* What the coordinator's /completion reader took and refused (it was
 * lp_completion_fields_from_json; the same cases). */
static void test_completion_fields(void)
{
    taken("{\"n_predict\": 7, \"ignore_eos\": true, \"stop\": [\"a\", \"bc\"], \"prompt\": \"hi\", \"top_k\": 3}",
          LP_RS_COMPLETION, LP_RS_HTTP);
    CHECK(RQ.n_predict == 7 && RQ.ignore_eos && RQ.n_stops == 2 && RQ.stop_lens[1] == 2 && !memcmp(RQ.stops[1], "bc", 2));
    CHECK(RQ.n_prompts == 1 && RQ.prompts[0].len == 2 && !memcmp(RQ.prompts[0].text, "hi", 2) && RQ.sp.top_k == 3);
    taken("{\"prompt\": [1, 2]}", LP_RS_COMPLETION, LP_RS_HTTP);
    CHECK(RQ.prompts[0].n_ids == 2 && RQ.prompts[0].ids[1] == 2 && !RQ.prompts[0].text);
    taken("{\"prompt\": \"x\", \"n_predict\": -1}", LP_RS_COMPLETION, LP_RS_HTTP);
    CHECK(RQ.n_predict == -1);
    static const struct { const char *json, *param, *msg; } bad[] = {
        {"{\"prompt\":\"x\",\"n_predict\": -2}", "n_predict", "n_predict: "},
        {"{\"prompt\":\"x\",\"n_predict\": 1.5}", "n_predict", "n_predict: "},
        {"{\"prompt\":\"x\",\"n_predict\": 0}", "n_predict", "n_predict: must be -1"},
        {"{\"prompt\":\"x\",\"ignore_eos\": 1}", "ignore_eos", "ignore_eos: "},
        {"{\"prompt\":\"x\",\"stop\": \"a\"}", "stop", "stop: "},
        {"{\"prompt\":\"x\",\"stop\": [\"a\", 2]}", "stop", "stop[1]: "},
        {"{\"prompt\": 12}", "prompt", "prompt: "},
        {"{\"prompt\": []}", "prompt", "prompt: an empty token list"},
        {"{\"prompt\": [1, -3]}", "prompt", "prompt[1]: not a token id"},
        {"{\"prompt\": [\"a\", \"b\"]}", "prompt", "prompt: /completion takes one prompt"},
        {"{}", "prompt", "prompt: missing"},
        {"[1]", "body", "body: must be a JSON object"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        refused(bad[i].json, LP_RS_COMPLETION, LP_RS_HTTP, bad[i].param, bad[i].msg);
    /* completions: many prompts, n, and their limits */
    taken("{\"prompt\":[\"a\",[1,2]],\"n\":3,\"seed\":5}", LP_RS_COMPLETIONS, LP_RS_HTTP);
    CHECK(RQ.n_prompts == 2 && RQ.n == 3 && RQ.prompts[1].n_ids == 2 && RQ.sp.seed == 5);
    refused("{\"prompt\":\"x\",\"n\":129}", LP_RS_COMPLETIONS, LP_RS_HTTP, "n", "n: must be an integer in [1, 128]");
    refused("{\"prompt\":[\"a\",\"b\"],\"n\":65}", LP_RS_COMPLETIONS, LP_RS_HTTP, "n", "n: 65 choices for each of 2");
    refused("{\"prompt\":\"x\",\"best_of\":3,\"n\":2}", LP_RS_COMPLETIONS, LP_RS_HTTP, "best_of", "best_of: only best_of = n");
    refused("{\"prompt\":\"x\",\"echo\":true,\"logprobs\":1}", LP_RS_COMPLETIONS, LP_RS_HTTP, "echo", "echo: echo with");
    refused("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":2}", LP_RS_CHAT, LP_RS_HTTP,
            "top_logprobs", "top_logprobs: needs logprobs: true");
    taken("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true,\"top_logprobs\":3}", LP_RS_CHAT,
          LP_RS_HTTP);
    CHECK(RQ.n_probs == 3 && RQ.sp.n_probs == 3);
    taken("{\"prompt\":\"x\",\"logprobs\":0}", LP_RS_COMPLETIONS, LP_RS_HTTP);
    CHECK(RQ.n_probs == 0 && RQ.sp.n_probs == 1, "logprobs 0: the chosen token's, which needs one from the sampler");
    taken("{\"prompt\":\"x\",\"deadline_ms\":250,\"t_max_predict_ms\":100}", LP_RS_COMPLETION, LP_RS_HTTP);
    CHECK(RQ.deadline_ms == 250 && RQ.t_max_predict_ms == 100);
}

static void test_nats(void)
{
    lp_json_doc_t *doc;
    static const struct { const char *body; enum lp_rs_endpoint ep; } shapes[] = {
        {"{\"messages\":[]}", LP_RS_CHAT},
        {"{\"prompt\":\"x\",\"max_tokens\":2}", LP_RS_COMPLETIONS},
        {"{\"prompt\":\"x\",\"echo\":true}", LP_RS_COMPLETIONS},
        {"{\"prompt\":\"x\",\"n_predict\":2,\"logprobs\":true}", LP_RS_COMPLETION},
        {"{\"prompt\":\"x\",\"temperature\":0}", LP_RS_COMPLETION},
    };
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        CHECK_RC(lp_json_parse(shapes[i].body, strlen(shapes[i].body), &doc), 0);
        CHECK(lp_request_nats_endpoint(lp_json_root(doc)) == shapes[i].ep, "%s", shapes[i].body);
        lp_json_doc_destroy(&doc);
    }
    refused("{\"prompt\":\"x\",\"n\":2,\"max_tokens\":2}", LP_RS_COMPLETIONS, LP_RS_NATS, "n", "n: only 1 choice");
    refused("{\"prompt\":\"x\",\"stream\":false}", LP_RS_COMPLETION, LP_RS_NATS, "stream", "stream: over NATS");
    refused("{\"prompt\":\"x\",\"echo\":true}", LP_RS_COMPLETIONS, LP_RS_NATS, "echo", "echo: not taken over NATS (an HTTP field");
    refused("{\"prompt\":\"x\",\"v\":2}", LP_RS_COMPLETION, LP_RS_NATS, "v", "v: unknown schema version");
    refused("{\"prompt\":\"x\",\"v\":1}", LP_RS_COMPLETION, LP_RS_HTTP, "v", "v: not taken over HTTP (a NATS field");
    taken("{\"prompt\":\"x\",\"model\":\"any\",\"id\":\"r\",\"reply_to\":\"a.b\",\"v\":1}", LP_RS_COMPLETION, LP_RS_NATS);
    CHECK(!strcmp(RQ.nats_id, "r") && !strcmp(RQ.reply_to, "a.b"));
}

static void test_printed(void)
{
    lp_json_buf_t b = {0};
    lp_rs_write_json(&b);
    lp_json_doc_t *doc = NULL;
    CHECK(!b.oom);
    CHECK_RC(lp_json_parse(b.p, b.n, &doc), 0);
    const lp_json_t *fields = lp_json_get(lp_json_root(doc), "fields");
    CHECK(fields && fields->type == LP_JSON_ARRAY && fields->n == lp_rs_n_fields);
    lp_json_doc_destroy(&doc);
    lp_json_buf_free(&b);
    for (unsigned edge = LP_RS_HTTP; edge <= LP_RS_NATS; edge <<= 1) {
        lp_rs_write_markdown(&b, edge);
        CHECK(!b.oom && strstr(b.p, "| `temperature` |") && strstr(b.p, "| `grammar` |"));
        CHECK((edge == LP_RS_NATS) == (strstr(b.p, "| `reply_to` |") != NULL));
        CHECK((edge == LP_RS_HTTP) == (strstr(b.p, "| `with_pieces` |") != NULL));
        lp_json_buf_free(&b);
    }
}

int main(void)
{
    test_rows();
    test_unknown();
    test_dialects();
    test_completion_fields();
    test_nats();
    test_printed();
    lp_request_clear(&RQ);
    lp_json_doc_destroy(&DOC);
    return CHECK_DONE();
}
