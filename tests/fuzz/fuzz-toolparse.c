/* fuzz-toolparse.c - arbitrary bytes as a model's output, through every
 * tool-call format's parser (lib/chat/chat-parse.h), and as a request's
 * tools through the grammar builder (chat-grammar.h).
 *
 * Input: byte 0 picks the format (low bits) and the mode (bit 7: grammar),
 * byte 1 the reasoning format, the prompt and the chunking seed; the rest
 * is the output (or the tools' JSON).  The output is parsed whole, then fed
 * in random chunks: the deltas must add up to the whole parse's message,
 * the message's JSON must read back, and a call marked valid must have
 * arguments that are one JSON object. */
#include "chat-format.h"
#include "chat-grammar.h"
#include "chat-parse.h"

#include "error.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char tools_json[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\","
    " \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}, \"metric\":"
    " {\"type\": \"boolean\"}, \"tags\": {\"type\": \"array\"}}}}}]";

static const char *const prompts[] = {
    NULL,
    "<|im_start|>assistant\n<think>\n",
    "<｜Assistant｜><think>\n",
    "<|start_header_id|>assistant<|end_header_id|>\n\n>>>",
};

typedef struct {
    lp_json_buf_t content, reasoning, args[64];
    char ids[64][40];
    size_t n;
} sum_t;

static void take(const lp_chat_parser_t *p, sum_t *s)
{
    for (size_t i = 0; i < lp_chat_parser_n_deltas(p); i++) {
        lp_chat_delta_t d;
        lp_chat_parser_delta(p, i, &d);
        if (d.kind == LP_CHAT_DELTA_CONTENT) lp_json_buf_put(&s->content, d.text, d.len);
        else if (d.kind == LP_CHAT_DELTA_REASONING) lp_json_buf_put(&s->reasoning, d.text, d.len);
        else {
            if (d.id) {
                if (d.index != s->n) abort(); /* calls open in order */
                if (s->n < 64) strcpy(s->ids[s->n], d.id);
                s->n++;
            } else if (d.index >= s->n)
                abort(); /* arguments before their call */
            if (d.index < 64) lp_json_buf_put(&s->args[d.index], d.text, d.len);
        }
    }
}

static bool same(const lp_json_buf_t *b, const char *s, size_t n)
{
    return b->n == n && (!n || !memcmp(b->p, s, n));
}

static void fuzz_grammar(const char *text, size_t n, uint8_t sel)
{
    lp_json_doc_t *doc = NULL;
    if (lp_json_parse(text, n, &doc)) return;
    static const char *const choices[] = {"\"required\"", "\"auto\"", "{\"type\": \"function\", \"function\": {\"name\": \"f\"}}"};
    lp_json_doc_t *cd = NULL;
    const char *c = choices[sel % 3];
    if (lp_json_parse(c, strlen(c), &cd)) abort();
    for (int f = 0; f < LP_CHAT_FORMAT_COUNT; f++) {
        lp_chat_grammar_opts_t o = {.format = (lp_chat_format_t)f, .tools = lp_json_root(doc),
                                    .tool_choice = lp_json_root(cd), .parallel_tool_calls = sel & 4,
                                    .starts_in_reasoning = sel & 8, .allow_reasoning = sel & 16};
        lp_chat_grammar_t *g = NULL;
        int rc = lp_chat_grammar_build(&o, &g);
        if (rc && !lp_error_msg()[0]) abort();
        if (!rc && g && (!g->gbnf || strncmp(g->gbnf, "root ::= ", 9))) abort();
        lp_chat_grammar_destroy(&g);
    }
    lp_json_doc_destroy(&cd);
    lp_json_doc_destroy(&doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    const char *text = (const char *)data + 2;
    size_t n = size - 2;
    if (data[0] & 0x80) {
        fuzz_grammar(text, n, data[1]);
        return 0;
    }
    lp_json_doc_t *tools = NULL;
    if (lp_json_parse(tools_json, strlen(tools_json), &tools)) abort();
    const char *prompt = prompts[(data[1] >> 2) & 3];
    lp_chat_parser_opts_t o = {.format = (lp_chat_format_t)((data[0] & 0x7f) % LP_CHAT_FORMAT_COUNT),
                               .reasoning = (lp_chat_reasoning_format_t)(data[1] % 3), .prompt = prompt,
                               .prompt_len = prompt ? strlen(prompt) : 0,
                               .tools = (data[1] & 16) ? lp_json_root(tools) : NULL, .id_seed = 99};
    /* whole */
    lp_chat_parser_t *p = NULL;
    if (lp_chat_parser_new(&o, &p)) abort();
    sum_t a = {0};
    if (lp_chat_parser_feed(p, text, n)) abort();
    take(p, &a);
    if (lp_chat_parser_finish(p)) abort();
    take(p, &a);
    lp_chat_msg_t m;
    lp_chat_parser_msg(p, &m);
    if (!same(&a.content, m.content, m.content_len) || !same(&a.reasoning, m.reasoning, m.reasoning_len) ||
        a.n != m.n_tool_calls)
        abort();
    /* in chunks */
    lp_chat_parser_t *q = NULL;
    if (lp_chat_parser_new(&o, &q)) abort();
    sum_t b = {0};
    uint64_t r = 0x9E3779B97F4A7C15ull ^ data[1] ^ ((uint64_t)size << 32);
    for (size_t at = 0; at < n;) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        size_t k = 1 + r % 7;
        if (k > n - at) k = n - at;
        if (lp_chat_parser_feed(q, text + at, k)) abort();
        take(q, &b);
        at += k;
    }
    if (lp_chat_parser_finish(q)) abort();
    take(q, &b);
    if (!same(&b.content, m.content, m.content_len) || !same(&b.reasoning, m.reasoning, m.reasoning_len) ||
        b.n != m.n_tool_calls)
        abort();
    for (size_t i = 0; i < m.n_tool_calls && i < 64; i++) {
        const lp_chat_tool_call_t *c = &m.tool_calls[i];
        if (strcmp(b.ids[i], c->id) || !same(&b.args[i], c->arguments, c->arguments_len) ||
            !same(&a.args[i], c->arguments, c->arguments_len))
            abort();
        if (c->valid) {
            lp_json_doc_t *d = NULL;
            if (lp_json_parse(c->arguments, c->arguments_len, &d) || lp_json_root(d)->type != LP_JSON_OBJECT) abort();
            lp_json_doc_destroy(&d);
        }
    }
    /* the message as JSON reads back (where the output was text) */
    lp_json_buf_t j = {0};
    lp_chat_msg_write_json(&m, &j);
    bool utf8 = true;
    for (const unsigned char *s = (const unsigned char *)text, *e = s + n; s < e && utf8;) {
        size_t k = lp_utf8_seq_len(s, e);
        utf8 = k > 0 && *s != 0;
        s += k ? k : 1;
    }
    lp_json_doc_t *d = NULL;
    if (utf8 && lp_json_parse(j.p, j.n, &d)) abort();
    lp_json_doc_destroy(&d);
    free(j.p);
    for (int k = 0; k < 64; k++) {
        free(a.args[k].p);
        free(b.args[k].p);
    }
    free(a.content.p);
    free(a.reasoning.p);
    free(b.content.p);
    free(b.reasoning.p);
    lp_chat_parser_destroy(&q);
    lp_chat_parser_destroy(&p);
    lp_json_doc_destroy(&tools);
    lp_error_clear();
    return 0;
}
