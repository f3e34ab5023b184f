/* parse_test.c - the output parser on model outputs in each format.
 *
 * Each case is a model's output as its model card or its template shows it,
 * with the message it means.  Every case is also fed in two chunks split at
 * every byte, and one byte at a time: the deltas must add up to the same
 * message (ids, validity and all), each delta must be whole UTF-8, and a
 * call's first delta must come before its arguments.  Then the shared
 * templates' own renderings of the shared conversations' tool calls are
 * parsed back into those calls (usage: parse_test SHARED_DIR). */
#include "chat-args.h"
#include "chat-parse.h"
#include "error.h"
#include "fileio.h"
#include "jinja.h"

#include "../../tests/check.h"

#include <stdlib.h>
#include <string.h>

/* ---- a message, from the parser or rebuilt from deltas --------------------- */

typedef struct rcall {
    char id[64], name[128];
    lp_json_buf_t args;
} rcall_t;

typedef struct recon {
    lp_json_buf_t content, reasoning;
    rcall_t calls[8];
    size_t n_calls;
    int bad; /* deltas out of order or cut inside a character */
} recon_t;

static void recon_free(recon_t *r)
{
    free(r->content.p);
    free(r->reasoning.p);
    for (size_t i = 0; i < 8; i++) free(r->calls[i].args.p);
    memset(r, 0, sizeof(*r));
}

static bool whole_utf8(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s, *e = p + n;
    while (p < e) {
        size_t k = lp_utf8_seq_len(p, e);
        if (!k) return false;
        p += k;
    }
    return true;
}

static void take_deltas(lp_chat_parser_t *p, recon_t *r, bool utf8_input)
{
    for (size_t i = 0; i < lp_chat_parser_n_deltas(p); i++) {
        lp_chat_delta_t d;
        lp_chat_parser_delta(p, i, &d);
        if (utf8_input && !whole_utf8(d.text, d.len)) r->bad |= 1;
        if (!d.len && !d.id) r->bad |= 2;
        switch (d.kind) {
        case LP_CHAT_DELTA_CONTENT: lp_json_buf_put(&r->content, d.text, d.len); break;
        case LP_CHAT_DELTA_REASONING: lp_json_buf_put(&r->reasoning, d.text, d.len); break;
        case LP_CHAT_DELTA_TOOL_CALL:
            if (d.id) {
                if (d.index != r->n_calls || r->n_calls == 8) {
                    r->bad |= 4;
                    break;
                }
                snprintf(r->calls[d.index].id, 64, "%s", d.id);
                snprintf(r->calls[d.index].name, 128, "%s", d.name);
                r->n_calls++;
            } else if (d.index >= r->n_calls) {
                r->bad |= 8;
                break;
            }
            lp_json_buf_put(&r->calls[d.index].args, d.text, d.len);
            break;
        }
    }
}

/* the message and its deltas' sum agree */
static bool recon_matches(const recon_t *r, const lp_chat_msg_t *m)
{
    if (r->bad) return false;
    if (r->content.n != m->content_len || (m->content_len && memcmp(r->content.p, m->content, m->content_len)))
        return false;
    if (r->reasoning.n != m->reasoning_len ||
        (m->reasoning_len && memcmp(r->reasoning.p, m->reasoning, m->reasoning_len)))
        return false;
    if (r->n_calls != m->n_tool_calls) return false;
    for (size_t i = 0; i < r->n_calls; i++) {
        const lp_chat_tool_call_t *c = &m->tool_calls[i];
        if (strcmp(r->calls[i].id, c->id) || strcmp(r->calls[i].name, c->name)) return false;
        if (r->calls[i].args.n != c->arguments_len || memcmp(r->calls[i].args.p, c->arguments, c->arguments_len))
            return false;
    }
    return true;
}

/* ---- cases ------------------------------------------------------------------- */

typedef struct xcall {
    const char *name, *args;
} xcall_t;

typedef struct tcase {
    const char *what;
    lp_chat_format_t fmt;
    const char *output;
    const char *content, *reasoning;
    xcall_t calls[4];
    const char *prompt;             /* NULL: none */
    const char *tools;              /* JSON, or NULL */
    lp_chat_reasoning_format_t rf;  /* AUTO by default */
    int invalid;                    /* calls expected not valid: a bit per call */
    int incomplete;                 /* calls expected not complete */
} tcase_t;

static lp_chat_parser_t *new_parser(const tcase_t *tc, lp_json_doc_t *tools)
{
    lp_chat_parser_opts_t o = {.format = tc->fmt, .reasoning = tc->rf, .prompt = tc->prompt,
                               .prompt_len = tc->prompt ? strlen(tc->prompt) : 0,
                               .tools = tools ? lp_json_root(tools) : NULL, .id_seed = 42};
    lp_chat_parser_t *p = NULL;
    CHECK_RC(lp_chat_parser_new(&o, &p), 0);
    return p;
}

/* feed output in pieces cut at cuts[0..n) and check the deltas' sum against m */
static bool chunked_matches(const tcase_t *tc, lp_json_doc_t *tools, const size_t *cuts, size_t n,
                            const lp_chat_msg_t *want)
{
    lp_chat_parser_t *p = new_parser(tc, tools);
    if (!p) return false;
    recon_t r = {0};
    size_t len = strlen(tc->output), at = 0;
    bool utf8 = whole_utf8(tc->output, len);
    for (size_t i = 0; i <= n; i++) {
        size_t end = i < n ? cuts[i] : len;
        if (lp_chat_parser_feed(p, tc->output + at, end - at)) r.bad |= 16;
        take_deltas(p, &r, utf8);
        at = end;
    }
    if (lp_chat_parser_finish(p)) r.bad |= 16;
    take_deltas(p, &r, utf8);
    lp_chat_msg_t m;
    lp_chat_parser_msg(p, &m);
    bool ok = recon_matches(&r, &m) && recon_matches(&r, want);
    /* ids come from the same seed, so validity and completeness must agree too */
    for (size_t i = 0; ok && i < m.n_tool_calls; i++)
        ok = m.tool_calls[i].valid == want->tool_calls[i].valid && m.tool_calls[i].complete == want->tool_calls[i].complete;
    recon_free(&r);
    lp_chat_parser_destroy(&p);
    return ok;
}

static void run_case(const tcase_t *tc)
{
    lp_json_doc_t *tools = NULL;
    if (tc->tools) CHECK_RC(lp_json_parse(tc->tools, strlen(tc->tools), &tools), 0);
    lp_chat_parser_t *p = new_parser(tc, tools);
    if (!p) return;
    size_t len = strlen(tc->output);
    CHECK_RC(lp_chat_parser_feed(p, tc->output, len), 0);
    recon_t r = {0};
    take_deltas(p, &r, whole_utf8(tc->output, len));
    CHECK_RC(lp_chat_parser_finish(p), 0);
    take_deltas(p, &r, whole_utf8(tc->output, len));
    lp_chat_msg_t m;
    lp_chat_parser_msg(p, &m);
    const char *wc = tc->content ? tc->content : "", *wr = tc->reasoning ? tc->reasoning : "";
    CHECK(m.content_len == strlen(wc) && !memcmp(m.content, wc, m.content_len), "%s: content %.*s, expected %s",
          tc->what, (int)m.content_len, m.content, wc);
    CHECK(m.reasoning_len == strlen(wr) && !memcmp(m.reasoning, wr, m.reasoning_len),
          "%s: reasoning %.*s, expected %s", tc->what, (int)m.reasoning_len, m.reasoning, wr);
    size_t nx = 0;
    while (nx < 4 && tc->calls[nx].name) nx++;
    CHECK(m.n_tool_calls == nx, "%s: %zu calls, expected %zu", tc->what, m.n_tool_calls, nx);
    for (size_t i = 0; i < nx && i < m.n_tool_calls; i++) {
        const lp_chat_tool_call_t *c = &m.tool_calls[i];
        CHECK(!strcmp(c->name, tc->calls[i].name), "%s: call %zu is %s, expected %s", tc->what, i, c->name,
              tc->calls[i].name);
        CHECK(c->arguments_len == strlen(tc->calls[i].args) && !memcmp(c->arguments, tc->calls[i].args, c->arguments_len),
              "%s: call %zu arguments %.*s, expected %s", tc->what, i, (int)c->arguments_len, c->arguments,
              tc->calls[i].args);
        CHECK(c->valid == !(tc->invalid >> i & 1), "%s: call %zu valid %d", tc->what, i, c->valid);
        CHECK(c->complete == !(tc->incomplete >> i & 1), "%s: call %zu complete %d", tc->what, i, c->complete);
        CHECK(strlen(c->id) == (tc->fmt == LP_CHAT_FORMAT_MISTRAL ? 9u : 29u), "%s: id %s", tc->what, c->id);
    }
    CHECK(recon_matches(&r, &m), "%s: the one-shot deltas do not add up to the message (%d)", tc->what, r.bad);
    recon_free(&r);
    /* every split in two, then a byte at a time */
    for (size_t k = 0; k <= len; k++) {
        if (!chunked_matches(tc, tools, &k, 1, &m)) {
            CHECK(0, "%s: cut at byte %zu gives another message", tc->what, k);
            break;
        }
    }
    size_t *cuts = malloc((len + 1) * sizeof(*cuts));
    for (size_t k = 0; k < len; k++) cuts[k] = k + 1;
    CHECK(chunked_matches(tc, tools, cuts, len ? len - 1 : 0, &m), "%s: byte by byte gives another message", tc->what);
    free(cuts);
    lp_chat_parser_destroy(&p);
    lp_json_doc_destroy(&tools);
}

#define WEATHER_TOOLS                                                                                        \
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", " \
    "\"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}, \"metric\": "       \
    "{\"type\": \"boolean\"}, \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}}}}}, "          \
    "{\"type\": \"function\", \"function\": {\"name\": \"square_the_number\", \"parameters\": {\"type\": "        \
    "\"object\", \"properties\": {\"input_num\": {\"type\": \"number\"}}}}}]"

#define F(x) LP_CHAT_FORMAT_##x

static const tcase_t cases[] = {
    /* ---- Hermes 2 Pro / Qwen 2.5 / Qwen3 (Qwen's function-calling guide) */
    {"qwen2.5 parallel", F(HERMES),
     "<tool_call>\n{\"name\": \"get_current_temperature\", \"arguments\": {\"location\": \"San Francisco, CA, USA\"}}\n"
     "</tool_call>\n<tool_call>\n{\"name\": \"get_temperature_date\", \"arguments\": {\"location\": \"San Francisco, "
     "CA, USA\", \"date\": \"2024-10-01\"}}\n</tool_call>",
     NULL, NULL,
     {{"get_current_temperature", "{\"location\": \"San Francisco, CA, USA\"}"},
      {"get_temperature_date", "{\"location\": \"San Francisco, CA, USA\", \"date\": \"2024-10-01\"}"}}, .prompt = NULL},
    {"hermes content before", F(HERMES),
     "I'll look that up for you.\n\n<tool_call>\n{\"arguments\": {\"symbol\": \"TSLA\"}, \"name\": "
     "\"get_stock_fundamentals\"}\n</tool_call>",
     "I'll look that up for you.", NULL, {{"get_stock_fundamentals", "{\"symbol\": \"TSLA\"}"}}, .prompt = NULL},
    {"qwen3 reasoning and a call", F(HERMES),
     "<think>\nThe user wants the weather in Paris. I should call get_weather.\n</think>\n\n<tool_call>\n{\"name\": "
     "\"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
     NULL, "The user wants the weather in Paris. I should call get_weather.", {{"get_weather", "{\"city\": \"Paris\"}"}},
     .prompt = "<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n"},
    {"qwen3 thinking off", F(HERMES), "Paris is sunny today. 🌞", "Paris is sunny today. 🌞", NULL, {{0}},
     .prompt = "<|im_start|>assistant\n<think>\n\n</think>\n\n"},
    {"qwen3 reasoning kept in content (none)", F(HERMES), "<think>\nShort.\n</think>\n\nHello!",
     "<think>\nShort.\n</think>\n\nHello!", NULL, {{0}}, .rf = LP_CHAT_REASONING_NONE},
    {"hermes arguments as a string", F(HERMES),
     "<tool_call>\n{\"name\": \"add\", \"arguments\": \"{\\\"a\\\": 1, \\\"b\\\": 2}\"}\n</tool_call>", NULL, NULL,
     {{"add", "{\"a\": 1, \"b\": 2}"}}, .prompt = NULL},
    {"hermes malformed call is content", F(HERMES), "Result: <tool_call>\n{\"name\": get_weather}\n</tool_call>",
     "Result: <tool_call>\n{\"name\": get_weather}\n</tool_call>", NULL, {{0}}, .prompt = NULL},
    {"hermes non-call object is content", F(HERMES), "<tool_call>{\"city\": \"Paris\"}</tool_call> done",
     "<tool_call>{\"city\": \"Paris\"}</tool_call> done", NULL, {{0}}, .prompt = NULL},
    {"hermes markers in text", F(HERMES), "Use <tool_ and <tool_call and </tool_call> freely; x < y.",
     "Use <tool_ and <tool_call and </tool_call> freely; x < y.", NULL, {{0}}, .prompt = NULL},
    {"hermes cut off inside the arguments", F(HERMES),
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par", NULL, NULL,
     {{"get_weather", "{\"city\": \"Par"}}, .invalid = 1, .incomplete = 1},
    {"hermes arguments broken after the call began", F(HERMES),
     "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1</tool_call>\nok", "ok", NULL, {{"f", "{\"a\": 1"}},
     .invalid = 1},
    {"smollm3 think and call", F(HERMES),
     "<think>\nI need the weather in Copenhagen.\n</think>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
     "{\"city\": \"Copenhagen\"}}\n</tool_call>",
     NULL, "I need the weather in Copenhagen.", {{"get_weather", "{\"city\": \"Copenhagen\"}"}}, .prompt = NULL},
    {"unicode content and arguments", F(HERMES),
     "Ελληνικά και 日本語 👩‍👩‍👧\n<tool_call>\n{\"name\": \"translate\", \"arguments\": {\"text\": \"héllo 🇫🇷\"}}\n"
     "</tool_call>",
     "Ελληνικά και 日本語 👩‍👩‍👧", NULL, {{"translate", "{\"text\": \"héllo 🇫🇷\"}"}}, .prompt = NULL},
    /* ---- Qwen3-Coder / Qwen3.5: the XML-like body (Qwen3-Coder's model card) */
    {"qwen3-coder typed by the schema", F(QWEN3_CODER),
     "<tool_call>\n<function=square_the_number>\n<parameter=input_num>\n1024\n</parameter>\n</function>\n</tool_call>",
     NULL, NULL, {{"square_the_number", "{\"input_num\": 1024}"}}, .tools = WEATHER_TOOLS},
    {"qwen3-coder without tools: strings", F(QWEN3_CODER),
     "<tool_call>\n<function=square_the_number>\n<parameter=input_num>\n1024\n</parameter>\n</function>\n</tool_call>",
     NULL, NULL, {{"square_the_number", "{\"input_num\": \"1024\"}"}}, .prompt = NULL},
    {"qwen3-coder parallel, multi-line and typed", F(QWEN3_CODER),
     "Checking.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNew\nYork <b>\"NY\"</b>\n</parameter>\n"
     "<parameter=days>\n3\n</parameter>\n<parameter=metric>\nTrue\n</parameter>\n<parameter=tags>\n[\"a\", \"b\"]\n"
     "</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
     "<parameter=days>\nthree\n</parameter>\n</function>\n</tool_call>",
     "Checking.", NULL,
     {{"get_weather", "{\"city\": \"New\\nYork <b>\\\"NY\\\"</b>\", \"days\": 3, \"metric\": true, \"tags\": [\"a\", \"b\"]}"},
      {"get_weather", "{\"city\": \"Oslo\", \"days\": \"three\"}"}},
     .tools = WEATHER_TOOLS},
    {"qwen3.5 reasoning opened by the prompt", F(QWEN3_CODER),
     "The user asks for Tokyo.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nTokyo\n</parameter>\n"
     "</function>\n</tool_call>",
     NULL, "The user asks for Tokyo.", {{"get_weather", "{\"city\": \"Tokyo\"}"}},
     .prompt = "<|im_start|>user\nTokyo?<|im_end|>\n<|im_start|>assistant\n<think>\n"},
    {"qwen3.5 reasoning opened, never closed", F(QWEN3_CODER), "Still thinking about <tool_call> and more",
     NULL, "Still thinking about <tool_call> and more", {{0}}, .prompt = "<|im_start|>assistant\n<think>\n"},
    {"qwen3-coder cut inside a parameter", F(QWEN3_CODER),
     "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar", NULL, NULL, {{"get_weather", "{\"city\": \"Par\"}"}},
     .incomplete = 1},
    {"qwen3-coder JSON body", F(QWEN3_CODER), "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", NULL,
     NULL, {{"f", "{}"}}, .prompt = NULL},
    /* ---- GLM 4.5/4.6 (its template's format) */
    {"glm-4.6 think and calls", F(GLM45),
     "\n<think>I need the weather for two cities.</think>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n"
     "<arg_value>Beijing</arg_value>\n<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>\n"
     "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Shanghai</arg_value>\n</tool_call>",
     NULL, "I need the weather for two cities.",
     {{"get_weather", "{\"city\": \"Beijing\", \"days\": 2}"}, {"get_weather", "{\"city\": \"Shanghai\"}"}},
     .tools = WEATHER_TOOLS},
    {"glm-4.6 call without arguments", F(GLM45), "<tool_call>get_time</tool_call>", NULL, NULL, {{"get_time", "{}"}}, .prompt = NULL},
    {"glm-4.6 no thinking", F(GLM45), "\nIt is sunny in Beijing.", "It is sunny in Beijing.", NULL, {{0}},
     .prompt = "<|assistant|>\n<think></think>"},
    /* ---- Llama 3.1/3.2 (Meta's model cards) */
    {"llama 3.1 JSON call", F(LLAMA3),
     "{\"name\": \"get_current_conditions\", \"parameters\": {\"location\": \"San Francisco, CA\", \"unit\": "
     "\"Fahrenheit\"}}",
     NULL, NULL, {{"get_current_conditions", "{\"location\": \"San Francisco, CA\", \"unit\": \"Fahrenheit\"}"}}, .prompt = NULL},
    {"llama 3.2 typed call", F(LLAMA3),
     "{\"type\": \"function\", \"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", NULL, NULL,
     {{"get_weather", "{\"city\": \"Paris\"}"}}, .prompt = NULL},
    {"llama 3.1 built-in tool", F(LLAMA3),
     "<|python_tag|>brave_search.call(query=\"current weather in Menlo Park, California\")", NULL, NULL,
     {{"brave_search", "{\"query\": \"current weather in Menlo Park, California\"}"}}, .prompt = NULL},
    {"llama 3.1 code interpreter", F(LLAMA3), "<|python_tag|>import math\nprint(math.sqrt(2))\n", NULL, NULL,
     {{"python", "{\"code\": \"import math\\nprint(math.sqrt(2))\"}"}}, .prompt = NULL},
    {"llama 3 JSON answer is content", F(LLAMA3), "{\"answer\": 42, \"name\": \"x\"}",
     "{\"answer\": 42, \"name\": \"x\"}", NULL, {{0}}, .prompt = NULL},
    {"llama 3 plain answer", F(LLAMA3), "The capital of France is Paris.", "The capital of France is Paris.", NULL,
     {{0}}, .prompt = NULL},
    /* ---- Mistral (Nemo's model card; [ARGS] as later models write) */
    {"mistral nemo", F(MISTRAL),
     "[TOOL_CALLS][{\"name\": \"get_current_weather\", \"arguments\": {\"location\": \"Paris, France\", \"format\": "
     "\"celsius\"}, \"id\": \"aBcDeFgHi\"}, {\"name\": \"get_current_weather\", \"arguments\": {\"location\": "
     "\"Tokyo\", \"format\": \"celsius\"}, \"id\": \"jKlMnOpQr\"}]",
     NULL, NULL,
     {{"get_current_weather", "{\"location\": \"Paris, France\", \"format\": \"celsius\"}"},
      {"get_current_weather", "{\"location\": \"Tokyo\", \"format\": \"celsius\"}"}}, .prompt = NULL},
    {"mistral [ARGS]", F(MISTRAL), "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}", NULL, NULL,
     {{"get_weather", "{\"city\": \"Paris\"}"}}, .prompt = NULL},
    {"mistral plain", F(MISTRAL), "Bonjour ! [TOOL_CALLS is a token.", "Bonjour ! [TOOL_CALLS is a token.", NULL, {{0}}, .prompt = NULL},
    /* ---- gpt-oss harmony (OpenAI's harmony guide) */
    {"gpt-oss analysis and a call", F(GPT_OSS),
     "<|channel|>analysis<|message|>User asks: \"What is the weather in Tokyo?\" We need to use get_weather tool."
     "<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
     "{\"location\":\"Tokyo\"}<|call|>",
     NULL, "User asks: \"What is the weather in Tokyo?\" We need to use get_weather tool.",
     {{"get_weather", "{\"location\":\"Tokyo\"}"}}, .prompt = "<|start|>user<|message|>Weather?<|end|><|start|>assistant"},
    {"gpt-oss final answer", F(GPT_OSS),
     "<|channel|>analysis<|message|>Simple.<|end|><|start|>assistant<|channel|>final<|message|>It is 20 °C and "
     "sunny.<|return|>",
     "It is 20 °C and sunny.", "Simple.", {{0}}, .prompt = NULL},
    {"gpt-oss recipient in the header, preamble", F(GPT_OSS),
     "<|channel|>commentary<|message|>Checking the weather now.<|end|><|start|>assistant to=functions.get_weather"
     "<|channel|>commentary json<|message|>{\"location\": \"Oslo\"}<|call|>",
     "Checking the weather now.", NULL, {{"get_weather", "{\"location\": \"Oslo\"}"}}, .prompt = NULL},
    {"gpt-oss reasoning kept (none)", F(GPT_OSS),
     "<|channel|>analysis<|message|>Hmm.<|end|><|start|>assistant<|channel|>final<|message|>Hi.<|return|>",
     "<|channel|>analysis<|message|>Hmm.<|end|>Hi.", NULL, {{0}}, .rf = LP_CHAT_REASONING_NONE},
    {"gpt-oss without headers", F(GPT_OSS), "Just text.", "Just text.", NULL, {{0}}, .prompt = NULL},
    /* ---- DeepSeek R1 (its template's format; the prompt opens <think>) */
    {"deepseek r1 reasoning and calls", F(DEEPSEEK_R1),
     "Okay, the user wants the weather in Tokyo and Paris.\n</think>\n\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"
     "function<｜tool▁sep｜>get_weather\n```json\n{\"location\": \"Tokyo\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>"
     "function<｜tool▁sep｜>get_weather\n```json\n{\"location\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
     NULL, "Okay, the user wants the weather in Tokyo and Paris.",
     {{"get_weather", "{\"location\": \"Tokyo\"}"}, {"get_weather", "{\"location\": \"Paris\"}"}},
     .prompt = "<｜User｜>Weather?<｜Assistant｜><think>\n"},
    {"deepseek v3.1 call", F(DEEPSEEK_R1),
     "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"location\": \"Tokyo\"}<｜tool▁call▁end｜>"
     "<｜tool▁calls▁end｜>",
     NULL, NULL, {{"get_weather", "{\"location\": \"Tokyo\"}"}}, .prompt = NULL},
    {"deepseek r1 answer", F(DEEPSEEK_R1), "Let me think: 2+2.\n</think>\n\nThe answer is 4.", "The answer is 4.",
     "Let me think: 2+2.", {{0}}, .prompt = "<｜Assistant｜><think>\n"},
    {"deepseek r1 reasoning in content (none)", F(DEEPSEEK_R1), "Hmm.\n</think>\n\n4.", "Hmm.\n</think>\n\n4.", NULL,
     {{0}}, .prompt = "<｜Assistant｜><think>\n", .rf = LP_CHAT_REASONING_NONE},
    /* ---- Kimi K2 (its model card) */
    {"kimi k2 calls", F(KIMI_K2),
     "I'll check both.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
     "<|tool_call_argument_begin|>{\"city\": \"Beijing\"}<|tool_call_end|><|tool_call_begin|>functions.get_weather:1"
     "<|tool_call_argument_begin|>{\"city\": \"Shanghai\"}<|tool_call_end|><|tool_calls_section_end|>",
     "I'll check both.", NULL,
     {{"get_weather", "{\"city\": \"Beijing\"}"}, {"get_weather", "{\"city\": \"Shanghai\"}"}}, .prompt = NULL},
    /* ---- Functionary v3.2 (its README; the prompt ends with ">>>") */
    {"functionary calls", F(FUNCTIONARY_V32),
     "all\nLet me check the weather.>>>get_current_weather\n{\"location\": \"Istanbul\"}>>>get_current_weather\n"
     "{\"location\": \"Singapore\"}",
     "Let me check the weather.", NULL,
     {{"get_current_weather", "{\"location\": \"Istanbul\"}"}, {"get_current_weather", "{\"location\": \"Singapore\"}"}},
     .prompt = "<|start_header_id|>assistant<|end_header_id|>\n\n>>>"},
    {"functionary text", F(FUNCTIONARY_V32), "all\nHello! How can I help?", "Hello! How can I help?", NULL, {{0}},
     .prompt = "<|start_header_id|>assistant<|end_header_id|>\n\n>>>"},
    {"functionary python", F(FUNCTIONARY_V32), "python\nprint(2 ** 10)", NULL, NULL,
     {{"python", "{\"code\": \"print(2 ** 10)\"}"}}, .prompt = "<|start_header_id|>assistant<|end_header_id|>\n\n>>>"},
    /* ---- Command R7B (its model card) */
    {"command r7b think and act", F(COMMAND_R7B),
     "<|START_THINKING|>I will use the query_daily_sales_report tool to find the sales summary for 29th September "
     "2023.<|END_THINKING|><|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"query_daily_sales_report\","
     " \"parameters\": {\"day\": \"2023-09-29\"}}\n]<|END_ACTION|>",
     NULL, "I will use the query_daily_sales_report tool to find the sales summary for 29th September 2023.",
     {{"query_daily_sales_report", "{\"day\": \"2023-09-29\"}"}}, .prompt = NULL},
    {"command r7b response", F(COMMAND_R7B),
     "<|START_RESPONSE|>The total sales amount for 29th September 2023 was 10000 dollars.<|END_RESPONSE|>",
     "The total sales amount for 29th September 2023 was 10000 dollars.", NULL, {{0}}, .prompt = NULL},
    /* ---- FireFunction v2 (its model card) */
    {"firefunction v2 parallel", F(FIREFUNCTION_V2),
     " functools[{\"name\": \"get_stock_price\", \"arguments\": {\"symbol\": \"AAPL\"}}, {\"name\": \"get_stock_price\","
     " \"arguments\": {\"symbol\": \"GOOGL\"}}]",
     NULL, NULL, {{"get_stock_price", "{\"symbol\": \"AAPL\"}"}, {"get_stock_price", "{\"symbol\": \"GOOGL\"}"}}, .prompt = NULL},
    {"firefunction v2 word", F(FIREFUNCTION_V2), "Use functools.partial here.", "Use functools.partial here.", NULL,
     {{0}}, .prompt = NULL},
    /* ---- Granite 3.3 (its model card) */
    {"granite call", F(GRANITE),
     "<|tool_call|>[{\"name\": \"get_current_weather\", \"arguments\": {\"location\": \"Boston, MA\"}}]", NULL, NULL,
     {{"get_current_weather", "{\"location\": \"Boston, MA\"}"}}, .prompt = NULL},
    {"granite thinking", F(GRANITE),
     "<think>The user asks for 2+2. That is 4.</think><response>2 + 2 = 4.</response>", "2 + 2 = 4.",
     "The user asks for 2+2. That is 4.", {{0}}, .prompt = NULL},
    /* ---- Gemma 4 (its template's format) */
    {"gemma 4 calls", F(GEMMA4),
     "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:3,metric:true,tags:[<|\"|>a, b<|\"|>]}<tool_call|>"
     "<|tool_call>call:get_weather{city:<|\"|>Lyon<|\"|>}<tool_call|>",
     NULL, NULL,
     {{"get_weather", "{\"city\": \"Paris\", \"days\": 3, \"metric\": true, \"tags\": [\"a, b\"]}"},
      {"get_weather", "{\"city\": \"Lyon\"}"}}, .prompt = NULL},
    {"gemma 4 thought", F(GEMMA4), "<|channel>thought\nCompare the two.<channel|>They are equal.", "They are equal.",
     "Compare the two.", {{0}}, .prompt = NULL},
    /* ---- no tool format (Phi 3.5, Gemma 3) */
    {"none with reasoning", F(NONE), "<think>hmm</think>Answer.", "Answer.", "hmm", {{0}}, .prompt = NULL},
    {"none", F(NONE), "  Plain <tool_call> text.  ", "Plain <tool_call> text.", NULL, {{0}}, .prompt = NULL},
    {"empty", F(HERMES), "", NULL, NULL, {{0}}, .prompt = NULL},
};

/* ---- the templates' own renderings, parsed back ---------------------------------- */

static bool json_equal(const lp_json_t *a, const lp_json_t *b)
{
    if (a->type != b->type) return false;
    switch (a->type) {
    case LP_JSON_NULL: return true;
    case LP_JSON_BOOL: return a->u.b == b->u.b;
    case LP_JSON_NUMBER: return a->u.num == b->u.num;
    case LP_JSON_STRING: return a->n == b->n && !memcmp(a->u.str, b->u.str, a->n);
    case LP_JSON_ARRAY:
        if (a->n != b->n) return false;
        for (size_t i = 0; i < a->n; i++)
            if (!json_equal(&a->u.items[i], &b->u.items[i])) return false;
        return true;
    case LP_JSON_OBJECT:
        if (a->n != b->n) return false;
        for (size_t i = 0; i < a->n; i++) {
            const lp_json_t *x = &a->u.items[i], *y = NULL;
            for (size_t k = 0; k < b->n; k++)
                if (b->u.items[k].key_len == x->key_len && !memcmp(b->u.items[k].key, x->key, x->key_len))
                    y = &b->u.items[k];
            if (!y || !json_equal(x, y)) return false;
        }
        return true;
    }
    return false;
}

/* render the context with messages[0..n) (and a generation prompt when gen) */
static char *render_upto(const lp_jinja_tmpl_t *t, const char *src, size_t src_len, const lp_json_t *ctx, size_t n,
                         bool gen)
{
    lp_json_buf_t b = {0};
    lp_json_buf_puts(&b, "{");
    bool first = true;
    for (size_t i = 0; i < ctx->n; i++) {
        const lp_json_t *it = &ctx->u.items[i];
        if (it->key_len == 21 && !memcmp(it->key, "add_generation_prompt", 21)) continue;
        if (!first) lp_json_buf_puts(&b, ",");
        first = false;
        lp_json_buf_str(&b, it->key, it->key_len);
        lp_json_buf_puts(&b, ":");
        if (it->key_len == 8 && !memcmp(it->key, "messages", 8)) {
            lp_json_buf_puts(&b, "[");
            for (size_t k = 0; k < n; k++) {
                if (k) lp_json_buf_puts(&b, ",");
                lp_json_buf_value(&b, &it->u.items[k]);
            }
            lp_json_buf_puts(&b, "]");
        } else
            lp_json_buf_value(&b, it);
    }
    lp_json_buf_puts(&b, gen ? ",\"add_generation_prompt\":true}" : ",\"add_generation_prompt\":false}");
    lp_json_doc_t *doc = NULL;
    char *out = NULL;
    size_t out_len = 0;
    if (!lp_json_parse(b.p, b.n, &doc)) lp_jinja_chat_render(t, src, src_len, lp_json_root(doc), NULL, &out, &out_len);
    lp_json_doc_destroy(&doc);
    free(b.p);
    return out;
}

typedef struct rt_case {
    const char *tmpl, *ctx;
    size_t n_calls; /* the template writes this many of the turn's calls */
} rt_case_t;

/* Render the conversation up to its first assistant turn with tool calls,
 * once with a generation prompt before that turn and once with the turn:
 * what the turn adds is what the model was trained to write for those calls.
 * Parsed with the detected format, it must give the turn's calls. */
static void round_trip(const char *shared, const rt_case_t *rc)
{
    char path[1024];
    char *src = NULL, *ctext = NULL;
    size_t src_len = 0, clen = 0;
    snprintf(path, sizeof(path), "%s/templates/%s.jinja", shared, rc->tmpl);
    CHECK_RC(lp_read_file(path, &src, &src_len), 0);
    snprintf(path, sizeof(path), "%s/templates/contexts/%s.json", shared, rc->ctx);
    CHECK_RC(lp_read_file(path, &ctext, &clen), 0);
    lp_jinja_tmpl_t *t = NULL;
    lp_json_doc_t *doc = NULL, *prep = NULL;
    if (!src || !ctext || lp_jinja_parse(src, src_len, &t) || lp_json_parse(ctext, clen, &doc)) {
        CHECK(0, "%s: cannot read the template or the context: %s", rc->tmpl, lp_error_msg());
        goto out;
    }
    /* arguments as the template expects them (chat-args.h) */
    lp_chat_template_caps_t caps;
    lp_chat_template_caps(t, src, src_len, &caps);
    lp_json_buf_t pb = {0};
    lp_chat_prepare_messages(lp_json_root(doc), &caps, &pb);
    CHECK_RC(lp_json_parse(pb.p, pb.n, &prep), 0);
    free(pb.p);
    if (!prep) goto out;
    const lp_json_t *ctx = lp_json_root(prep), *msgs = lp_json_get(ctx, "messages"), *turn = NULL;
    size_t at = 0;
    for (; at < msgs->n; at++)
        if (lp_json_get(&msgs->u.items[at], "tool_calls")) {
            turn = &msgs->u.items[at];
            break;
        }
    char *before = turn ? render_upto(t, src, src_len, ctx, at, true) : NULL;
    char *with = turn ? render_upto(t, src, src_len, ctx, at + 1, false) : NULL;
    CHECK(before && with, "%s x %s: the template does not render", rc->tmpl, rc->ctx);
    if (before && with) {
        size_t common = 0;
        while (before[common] && before[common] == with[common]) common++;
        /* not inside a marker both begin: "<｜Assistant｜><think>" and "<｜Assistant｜><｜tool▁calls▁begin｜>" */
        if (before[common])
            while (common && with[common - 1] != '>' && with[common - 1] != '\n' && with[common - 1] != ' ') common--;
        const char *out = with + common;
        size_t n = strlen(out);
        /* the turn's end-of-turn token is the server's stop, not output */
        static const char *const ends[] = {/* templates that open the next turn after an assistant's */
                                           "<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
                                           "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
                                           "<|im_end|>\n", "<|im_end|>", "<|eot_id|>", "</s>", "<｜end▁of▁sentence｜>",
                                           "<|END_OF_TURN_TOKEN|>", "<|tool_response>", "<turn|>\n"};
        for (size_t e = 0; e < sizeof(ends) / sizeof(ends[0]); e++) {
            size_t en = strlen(ends[e]);
            if (n >= en && !memcmp(out + n - en, ends[e], en)) n -= en;
        }
        lp_chat_format_t f = lp_chat_format_detect(src, src_len);
        lp_chat_parser_opts_t o = {.format = f, .prompt = with, .prompt_len = common,
                                   .tools = lp_json_get(ctx, "tools"), .id_seed = 7};
        lp_chat_parser_t *p = NULL;
        CHECK_RC(lp_chat_parser_new(&o, &p), 0);
        CHECK_RC(lp_chat_parser_feed(p, out, n), 0);
        CHECK_RC(lp_chat_parser_finish(p), 0);
        lp_chat_msg_t m;
        lp_chat_parser_msg(p, &m);
        const lp_json_t *calls = lp_json_get(turn, "tool_calls");
        CHECK(m.n_tool_calls == rc->n_calls && calls->n >= rc->n_calls, "%s x %s: %zu calls from %.*s", rc->tmpl,
              rc->ctx, m.n_tool_calls, (int)n, out);
        CHECK(m.content_len == 0, "%s x %s: content %.*s", rc->tmpl, rc->ctx, (int)m.content_len, m.content);
        for (size_t i = 0; i < m.n_tool_calls && i < calls->n; i++) {
            const lp_json_t *fn = lp_json_get(&calls->u.items[i], "function");
            const lp_json_t *name = lp_json_get(fn, "name"), *args = lp_json_get(fn, "arguments");
            lp_json_doc_t *want = NULL, *got = NULL;
            if (args->type == LP_JSON_STRING) lp_json_parse(args->u.str, args->n, &want);
            lp_json_parse(m.tool_calls[i].arguments, m.tool_calls[i].arguments_len, &got);
            CHECK(!strcmp(m.tool_calls[i].name, name->u.str), "%s: call %zu is %s", rc->tmpl, i, m.tool_calls[i].name);
            CHECK(got && json_equal(lp_json_root(got), want ? lp_json_root(want) : args),
                  "%s x %s: call %zu arguments %s", rc->tmpl, rc->ctx, i, m.tool_calls[i].arguments);
            CHECK(m.tool_calls[i].valid && m.tool_calls[i].complete, "%s: call %zu not valid and complete", rc->tmpl, i);
            lp_json_doc_destroy(&want);
            lp_json_doc_destroy(&got);
        }
        lp_chat_parser_destroy(&p);
    }
    free(before);
    free(with);
out:
    lp_json_doc_destroy(&prep);
    lp_json_doc_destroy(&doc);
    lp_jinja_tmpl_destroy(&t);
    free(src);
    free(ctext);
}

static const rt_case_t rt_cases[] = {
    {"Hermes-3-Llama-3.1-8B-tool_use", "05-parallel-tool-calls", 2},
    {"Qwen2.5-7B-Instruct", "05-parallel-tool-calls", 2},
    {"Qwen3-0.6B", "05-parallel-tool-calls", 2},
    {"Qwen3-Coder", "05-parallel-tool-calls", 2},
    {"Qwen3.5-4B", "05-parallel-tool-calls", 2},
    {"Qwen3.5-4B", "04-tool-call-result", 1},
    {"GLM-4.6", "05-parallel-tool-calls", 2},
    {"Llama-3.1-8B-Instruct", "04-tool-call-result", 1},
    {"Llama-3.2-3B-Instruct", "04-tool-call-result", 1},
    {"Mistral-Nemo-Instruct-2407", "05-parallel-tool-calls", 2},
    {"gpt-oss-120b", "05-parallel-tool-calls", 1}, /* it writes a turn's first call */
    {"DeepSeek-R1-Distill-Qwen-32B", "04-tool-call-result", 1},
    {"Kimi-K2-Instruct", "05-parallel-tool-calls", 2},
    {"functionary-medium-v3.2", "05-parallel-tool-calls", 2},
    {"c4ai-command-r7b-12-2024-tool_use", "05-parallel-tool-calls", 2},
    {"llama-3-firefunction-v2", "05-parallel-tool-calls", 2},
    {"gemma-4-31B-it", "05-parallel-tool-calls", 2},
};

/* ---- the format table and detection ------------------------------------------------- */

static void test_formats(const char *shared)
{
    for (int f = 0; f < LP_CHAT_FORMAT_COUNT; f++) {
        const lp_chat_format_info_t *fi = lp_chat_format_info((lp_chat_format_t)f);
        lp_chat_format_t g;
        CHECK(fi && fi->format == (lp_chat_format_t)f, "row %d", f);
        CHECK_RC(lp_chat_format_by_name(fi->name, &g), 0);
        CHECK(g == (lp_chat_format_t)f, "%s", fi->name);
    }
    lp_chat_format_t g;
    CHECK_RC(lp_chat_format_by_name("QWEN3.5", &g), 0);
    CHECK(g == F(QWEN3_CODER));
    CHECK_RC(lp_chat_format_by_name("hermes3", &g), LP_ERR(EINVAL));
    CHECK(strstr(lp_error_msg(), "hermes3") && strstr(lp_error_msg(), "gpt-oss"), "%s", lp_error_msg());
    lp_chat_reasoning_format_t rf;
    CHECK_RC(lp_chat_reasoning_format_by_name("deepseek", &rf), 0);
    CHECK_RC(lp_chat_reasoning_format_by_name("deepseek-legacy", &rf), LP_ERR(EINVAL));
    CHECK(!lp_chat_format_info(LP_CHAT_FORMAT_COUNT));
    /* each shared template, by the markers it writes */
    static const struct {
        const char *tmpl;
        lp_chat_format_t f;
    } want[] = {
        {"DeepSeek-R1-Distill-Qwen-32B", F(DEEPSEEK_R1)}, {"GLM-4.6", F(GLM45)},
        {"Hermes-3-Llama-3.1-8B-tool_use", F(HERMES)}, {"Kimi-K2-Instruct", F(KIMI_K2)},
        {"Llama-3.1-8B-Instruct", F(LLAMA3)}, {"Llama-3.2-3B-Instruct", F(LLAMA3)},
        {"Mistral-Nemo-Instruct-2407", F(MISTRAL)}, {"Phi-3.5-mini-instruct", F(NONE)},
        {"Qwen2.5-7B-Instruct", F(HERMES)}, {"Qwen3-0.6B", F(HERMES)}, {"Qwen3-Coder", F(QWEN3_CODER)},
        {"Qwen3.5-4B", F(QWEN3_CODER)}, {"SmolLM3-3B", F(HERMES)},
        {"c4ai-command-r7b-12-2024-tool_use", F(COMMAND_R7B)}, {"functionary-medium-v3.2", F(FUNCTIONARY_V32)},
        {"gemma-3-it", F(NONE)}, {"gemma-4-31B-it", F(GEMMA4)}, {"gpt-oss-120b", F(GPT_OSS)},
        {"granite-3.3-2b-instruct", F(GRANITE)}, {"llama-3-firefunction-v2", F(FIREFUNCTION_V2)},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        char path[1024], *src = NULL;
        size_t n = 0;
        snprintf(path, sizeof(path), "%s/templates/%s.jinja", shared, want[i].tmpl);
        CHECK_RC(lp_read_file(path, &src, &n), 0);
        if (!src) continue;
        lp_chat_format_t got = lp_chat_format_detect(src, n);
        CHECK(got == want[i].f, "%s detected as %s", want[i].tmpl, lp_chat_format_info(got)->name);
        free(src);
    }
}

/* ---- the API's edges ------------------------------------------------------------------ */

static void test_api(void)
{
    lp_chat_parser_opts_t o = {.format = F(HERMES), .id_seed = 1};
    lp_chat_parser_t *p = NULL;
    CHECK_RC(lp_chat_parser_new(&o, &p), 0);
    CHECK_RC(lp_chat_parser_feed(p, "hi", 2), 0);
    CHECK_RC(lp_chat_parser_finish(p), 0);
    CHECK_RC(lp_chat_parser_feed(p, "x", 1), LP_ERR(EINVAL));
    CHECK_RC(lp_chat_parser_finish(p), LP_ERR(EINVAL));
    lp_chat_parser_destroy(&p);
    CHECK(!p);
    lp_chat_parser_destroy(&p);
    o.format = LP_CHAT_FORMAT_COUNT;
    CHECK_RC(lp_chat_parser_new(&o, &p), LP_ERR(EINVAL));
    /* the JSON a gateway writes */
    o.format = F(HERMES);
    CHECK_RC(lp_chat_parser_new(&o, &p), 0);
    const char *out = "Sure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"q\": \"a\\\"b\"}}\n</tool_call>";
    CHECK_RC(lp_chat_parser_feed(p, out, strlen(out)), 0);
    CHECK(lp_chat_parser_n_deltas(p) == 2, "%zu deltas", lp_chat_parser_n_deltas(p));
    for (size_t i = 0; i < lp_chat_parser_n_deltas(p); i++) {
        lp_chat_delta_t d;
        lp_chat_parser_delta(p, i, &d);
        lp_json_buf_t b = {0};
        lp_chat_delta_write_json(&d, &b);
        lp_json_doc_t *doc = NULL;
        CHECK_RC(lp_json_parse(b.p, b.n, &doc), 0);
        const lp_json_t *r = doc ? lp_json_root(doc) : NULL;
        if (i == 0) {
            const lp_json_t *c = lp_json_get(r, "content");
            CHECK(r && r->n == 1 && c && !strcmp(c->u.str, "Sure."), "%s", b.p);
        } else {
            const lp_json_t *tc = lp_json_get(r, "tool_calls"), *c = tc && tc->n == 1 ? &tc->u.items[0] : NULL;
            const lp_json_t *fn = lp_json_get(c, "function"), *id = lp_json_get(c, "id");
            const lp_json_t *ix = lp_json_get(c, "index"), *ty = lp_json_get(c, "type");
            CHECK(ix && ix->inum == 0 && id && id->n == 29 && !strncmp(id->u.str, "call_", 5) && ty &&
                      !strcmp(ty->u.str, "function") && !strcmp(lp_json_get(fn, "name")->u.str, "f") &&
                      !strcmp(lp_json_get(fn, "arguments")->u.str, "{\"q\": \"a\\\"b\"}"),
                  "%s", b.p);
        }
        lp_json_doc_destroy(&doc);
        free(b.p);
    }
    CHECK_RC(lp_chat_parser_finish(p), 0);
    lp_chat_msg_t m;
    lp_chat_parser_msg(p, &m);
    lp_json_buf_t b = {0};
    lp_chat_msg_write_json(&m, &b);
    lp_json_doc_t *doc = NULL;
    CHECK_RC(lp_json_parse(b.p, b.n, &doc), 0);
    const lp_json_t *tc = lp_json_get(lp_json_root(doc), "tool_calls");
    CHECK(tc && tc->n == 1 && !strcmp(lp_json_get(lp_json_get(&tc->u.items[0], "function"), "arguments")->u.str,
                                      "{\"q\": \"a\\\"b\"}"),
          "%s", b.p);
    lp_json_doc_destroy(&doc);
    free(b.p);
    lp_chat_parser_destroy(&p);
    /* past the output limit */
    CHECK_RC(lp_chat_parser_new(&o, &p), 0);
    static char big[1 << 20];
    memset(big, 'x', sizeof(big));
    int rc = 0;
    for (int i = 0; i < 65 && !rc; i++) rc = lp_chat_parser_feed(p, big, sizeof(big));
    CHECK(rc == LP_ERR(E2BIG), "rc %d", rc);
    lp_chat_parser_destroy(&p);
}

int main(int argc, char **argv)
{
    const char *shared = argc > 1 ? argv[1] : "../shared";
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) run_case(&cases[i]);
    test_formats(shared);
    for (size_t i = 0; i < sizeof(rt_cases) / sizeof(rt_cases[0]); i++) round_trip(shared, &rt_cases[i]);
    test_api();
    return CHECK_DONE();
}
