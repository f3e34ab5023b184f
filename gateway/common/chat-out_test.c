/* chat-out_test.c - a chat choice's output as the edges read it
 * (chat-out.h): content byte for byte when there is nothing to split,
 * reasoning split where the prompt opened it or the output starts with it,
 * tool calls only with tools, the same message for any chunking. */
#include "chat-out.h"

#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *TOOLS =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\"}}}}}]";

/* a buffer's text, "" when nothing was written (caller frees) */
static char *text_of(lp_json_buf_t *b)
{
    char *s = strdup(b->p ? b->p : "");
    free(b->p);
    return s;
}

/* Feed `out` in chunks of `chunk` bytes (0: whole) to a chat-out made with
 * the given options and ChatOutput; the message as JSON, and the deltas'
 * content, reasoning and arguments put together. */
static char *run(const char *fmt, const char *tail, bool tools, lp_chat_reasoning_format_t rf, const char *out,
                 size_t chunk, char **content, char **reasoning, char **args)
{
    lp_json_doc_t *doc = NULL;
    if (tools) CHECK_RC(lp_json_parse(TOOLS, strlen(TOOLS), &doc), 0);
    lp_chat_out_opts_t o = {.tools = doc ? lp_json_root(doc) : NULL, .parse_tools = tools, .reasoning = rf};
    lp_chat_out_t *c = NULL;
    CHECK_RC(lp_chat_out_new(&o, &c), 0);
    lp_json_doc_destroy(&doc); /* chat-out keeps its own copy */
    Lmpipe__ChatOutput co = LMPIPE__CHAT_OUTPUT__INIT;
    co.format = (char *)fmt;
    co.prompt_tail.data = (uint8_t *)tail;
    co.prompt_tail.len = strlen(tail);
    CHECK_RC(lp_chat_out_start(c, &co), 0);
    lp_json_buf_t bc = {0}, br = {0}, ba = {0};
    size_t n = strlen(out), step = chunk ? chunk : (n ? n : 1);
    for (size_t i = 0; i <= n; i += step) {
        bool last = i + step > n;
        for (int pass = 0; pass < 2; pass++) {
            /* the feed's deltas, then (at the end) the finish's */
            if (pass == 0 && i < n) CHECK_RC(lp_chat_out_feed(c, out + i, (last ? n : i + step) - i), 0);
            else if (pass == 0) continue;
            if (pass == 1 && !last) break;
            if (pass == 1) CHECK_RC(lp_chat_out_finish(c), 0);
            for (size_t k = 0; k < lp_chat_out_n_deltas(c); k++) {
                lp_chat_delta_t d;
                lp_chat_out_delta(c, k, &d);
                lp_json_buf_put(d.kind == LP_CHAT_DELTA_CONTENT ? &bc : d.kind == LP_CHAT_DELTA_REASONING ? &br : &ba,
                                d.text, d.len);
            }
        }
        if (last) break;
    }
    lp_json_buf_t m = {0};
    lp_chat_out_write_msg(c, &m);
    *content = text_of(&bc);
    *reasoning = text_of(&br);
    *args = text_of(&ba);
    lp_chat_out_destroy(&c);
    return text_of(&m);
}

static void expect(const char *what, const char *fmt, const char *tail, bool tools, lp_chat_reasoning_format_t rf,
                   const char *out, const char *want_msg, const char *want_content, const char *want_reasoning)
{
    static const size_t chunks[] = {0, 1, 2, 3, 7};
    for (size_t i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++) {
        char *c, *r, *a;
        char *m = run(fmt, tail, tools, rf, out, chunks[i], &c, &r, &a);
        CHECK(!strcmp(m, want_msg), "%s (chunk %zu): message %s, want %s", what, chunks[i], m, want_msg);
        CHECK(!strcmp(c, want_content), "%s (chunk %zu): content deltas '%s', want '%s'", what, chunks[i], c,
              want_content);
        CHECK(!strcmp(r, want_reasoning), "%s (chunk %zu): reasoning deltas '%s', want '%s'", what, chunks[i], r,
              want_reasoning);
        free(m);
        free(c);
        free(r);
        free(a);
    }
}

int main(void)
{
    lp_chat_reasoning_format_t AUTO = LP_CHAT_REASONING_AUTO, NONE = LP_CHAT_REASONING_NONE;
    /* nothing to split: content as it came, white space and all */
    expect("plain", "hermes", "<|im_start|>assistant\n", false, AUTO, " Once upon a time. ",
           "{\"role\":\"assistant\",\"content\":\" Once upon a time. \"}", " Once upon a time. ", "");
    /* the output starts like <think> but is not */
    expect("a near miss", "hermes", "assistant\n", false, AUTO, "\n<thin k>x",
           "{\"role\":\"assistant\",\"content\":\"\\n<thin k>x\"}", "\n<thin k>x", "");
    /* the output opens reasoning */
    expect("<think> at the start", "hermes", "assistant\n", false, AUTO, "<think>hmm</think>\n\nHello",
           "{\"role\":\"assistant\",\"content\":\"Hello\",\"reasoning_content\":\"hmm\"}", "Hello", "hmm");
    /* the prompt opened it (DeepSeek R1's generation prompt) */
    expect("the prompt opens <think>", "deepseek-r1", "<｜Assistant｜><think>\n", false, AUTO, "a b c",
           "{\"role\":\"assistant\",\"content\":\"\",\"reasoning_content\":\"a b c\"}", "", "a b c");
    /* reasoning_format none: as it came */
    expect("reasoning_format none", "hermes", "assistant\n", false, NONE, "<think>hmm</think>Hello",
           "{\"role\":\"assistant\",\"content\":\"<think>hmm</think>Hello\"}", "<think>hmm</think>Hello", "");
    /* a Hermes call without tools in the request is content */
    expect("a call without tools", "hermes", "assistant\n", false, AUTO,
           "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lima\"}}\n</tool_call>",
           "{\"role\":\"assistant\",\"content\":\"<tool_call>\\n{\\\"name\\\": \\\"get_weather\\\", \\\"arguments\\\": "
           "{\\\"city\\\": \\\"Lima\\\"}}\\n</tool_call>\"}",
           "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lima\"}}\n</tool_call>", "");
    /* with tools: a call (its id is random: checked by shape below) */
    for (size_t chunk = 0; chunk < 5; chunk++) {
        char *c, *r, *a;
        char *m = run("hermes", "assistant\n", true, AUTO,
                      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lima\"}}\n</tool_call>", chunk,
                      &c, &r, &a);
        CHECK(strstr(m, "\"content\":null,\"tool_calls\":[{\"id\":\"call_") &&
                  strstr(m, "\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Lima\\\"}\"}"),
              "a Hermes call with tools (chunk %zu): %s", chunk, m);
        CHECK(!strcmp(a, "{\"city\": \"Lima\"}") && !c[0], "its argument deltas (chunk %zu): '%s', content '%s'", chunk,
              a, c);
        free(m);
        free(c);
        free(r);
        free(a);
    }
    /* no ChatOutput at all (an older coordinator): content as it came */
    {
        lp_chat_out_opts_t o = {0};
        lp_chat_out_t *c = NULL;
        CHECK_RC(lp_chat_out_new(&o, &c), 0);
        CHECK_RC(lp_chat_out_feed(c, " <think>x", 9), 0);
        CHECK_RC(lp_chat_out_finish(c), 0);
        lp_json_buf_t m = {0};
        lp_chat_out_write_msg(c, &m);
        lp_json_buf_puts(&m, "");
        CHECK(!strcmp(m.p, "{\"role\":\"assistant\",\"content\":\" <think>x\"}"), "no ChatOutput: %s", m.p);
        free(m.p);
        lp_chat_out_destroy(&c);
    }
    return CHECK_DONE();
}
