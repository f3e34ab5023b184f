/* grammar_test.c - the tool-call grammar's choices and refusals.  That the
 * grammars match what the templates write is tests/chat/tool-grammar-test.py. */
#include "chat-grammar.h"
#include "error.h"

#include "../../tests/check.h"

#include <stdlib.h>
#include <string.h>

static const char tools[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\","
    " \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"now\"}}]";

static int build(lp_chat_format_t f, const char *tools_json, const char *choice, bool parallel, lp_chat_grammar_t **g)
{
    lp_json_doc_t *td = NULL, *cd = NULL;
    if (tools_json) CHECK_RC(lp_json_parse(tools_json, strlen(tools_json), &td), 0);
    if (choice) CHECK_RC(lp_json_parse(choice, strlen(choice), &cd), 0);
    lp_chat_grammar_opts_t o = {.format = f, .tools = td ? lp_json_root(td) : NULL,
                                .tool_choice = cd ? lp_json_root(cd) : NULL, .parallel_tool_calls = parallel};
    int rc = lp_chat_grammar_build(&o, g);
    lp_json_doc_destroy(&td);
    lp_json_doc_destroy(&cd);
    return rc;
}

int main(void)
{
    lp_chat_grammar_t *g = NULL;
    /* nothing to force */
    CHECK_RC(build(LP_CHAT_FORMAT_HERMES, tools, "\"none\"", true, &g), 0);
    CHECK(!g);
    CHECK_RC(build(LP_CHAT_FORMAT_HERMES, NULL, "\"auto\"", true, &g), 0);
    CHECK(!g);
    CHECK_RC(build(LP_CHAT_FORMAT_NONE, tools, "\"auto\"", true, &g), 0);
    CHECK(!g);
    /* refusals, by name */
    CHECK_RC(build(LP_CHAT_FORMAT_HERMES, NULL, "\"required\"", true, &g), LP_ERR(EINVAL));
    CHECK(strstr(lp_error_msg(), "needs tools"), "%s", lp_error_msg());
    CHECK_RC(build(LP_CHAT_FORMAT_HERMES, tools, "{\"type\": \"function\", \"function\": {\"name\": \"nope\"}}", true, &g),
             LP_ERR(EINVAL));
    CHECK(strstr(lp_error_msg(), "\"nope\""), "%s", lp_error_msg());
    CHECK_RC(build(LP_CHAT_FORMAT_HERMES, tools, "\"sometimes\"", true, &g), LP_ERR(EINVAL));
    CHECK(strstr(lp_error_msg(), "sometimes"), "%s", lp_error_msg());
    CHECK_RC(build(LP_CHAT_FORMAT_HERMES, tools, "{\"type\": \"function\"}", true, &g), LP_ERR(EINVAL));
    CHECK_RC(build(LP_CHAT_FORMAT_HERMES, "[{\"type\": \"function\", \"function\": {\"name\": 3}}]", "\"required\"",
                   true, &g),
             LP_ERR(EINVAL));
    CHECK(strstr(lp_error_msg(), "tools[0].function.name"), "%s", lp_error_msg());
    CHECK_RC(build(LP_CHAT_FORMAT_HERMES, "[{\"function\": {\"name\": \"f\", \"parameters\": []}}]", "\"required\"",
                   true, &g),
             LP_ERR(EINVAL));
    CHECK(strstr(lp_error_msg(), "parameters"), "%s", lp_error_msg());
    CHECK_RC(build(LP_CHAT_FORMAT_NONE, tools, "\"required\"", true, &g), LP_ERR(ENOTSUP));
    CHECK_RC(build(LP_CHAT_FORMAT_GEMMA4, tools, "\"required\"", true, &g), LP_ERR(ENOTSUP));
    CHECK(!g);
    /* required: every function, the schemas as given, one call without parallel */
    CHECK_RC(build(LP_CHAT_FORMAT_MISTRAL, tools, "\"required\"", false, &g), 0);
    CHECK(g && !g->lazy && g->max_calls == 1 && g->n_fns == 2 && g->n_refs == 2);
    if (g) {
        CHECK(!strcmp(g->prefix, "[TOOL_CALLS][") && !strcmp(g->suffix, "]") && !strcmp(g->separator, ", "));
        CHECK(!strcmp(g->fns[0].begin, "{\"name\": \"get_weather\", \"arguments\": "), "%s", g->fns[0].begin);
        CHECK(!strcmp(g->fns[1].schema, "{\"type\":\"object\",\"properties\":{}}"), "%s", g->fns[1].schema);
        CHECK(!strcmp(g->refs[0].rule, "args-0") && strstr(g->refs[0].schema, "\"required\":[\"city\"]"));
        CHECK(!strstr(g->gbnf, ")*"), "one call: no repetition\n%s", g->gbnf);
    }
    lp_chat_grammar_destroy(&g);
    CHECK(!g);
    /* named: that function only; auto: lazy from the trigger */
    CHECK_RC(build(LP_CHAT_FORMAT_QWEN3_CODER, tools, "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}",
                   true, &g),
             0);
    CHECK(g && g->n_fns == 1 && g->n_refs == 1 && !strcmp(g->refs[0].rule, "args-0-1") &&
          !strcmp(g->refs[0].schema, "{\"type\":\"integer\"}"));
    if (g) CHECK(strstr(g->gbnf, "param-0-1?") && strstr(g->gbnf, "xml-text ::="), "%s", g->gbnf);
    lp_chat_grammar_destroy(&g);
    CHECK_RC(build(LP_CHAT_FORMAT_KIMI_K2, tools, NULL, true, &g), 0);
    CHECK(g && g->lazy && g->max_calls == 0 && !strcmp(g->trigger, "<|tool_calls_section_begin|>"));
    static const char lazy_root[] = "root ::= \"<|tool_calls_section_begin|>\" call";
    if (g) CHECK(!strncmp(g->gbnf, lazy_root, sizeof(lazy_root) - 1), "%s", g->gbnf);
    lp_chat_grammar_destroy(&g);
    /* every format with calls builds both ways, its grammar starting at root */
    for (int f = 0; f < LP_CHAT_FORMAT_COUNT; f++) {
        const lp_chat_format_info_t *fi = lp_chat_format_info((lp_chat_format_t)f);
        if (!fi->prefix || fi->args == LP_CHAT_ARGS_GEMMA) continue;
        for (int k = 0; k < 2; k++) {
            CHECK_RC(build((lp_chat_format_t)f, tools, k ? "\"auto\"" : "\"required\"", true, &g), 0);
            CHECK(g && !strncmp(g->gbnf, "root ::= ", 9), "%s", fi->name);
            lp_chat_grammar_destroy(&g);
        }
        /* a lazy grammar's trigger begins where its calls begin (Functionary's is
         * the prompt's ">>>"), and the parser knows it */
        if (f != LP_CHAT_FORMAT_FUNCTIONARY_V32) {
            char start[256];
            snprintf(start, sizeof(start), "%s%s", fi->prefix, fi->call_open);
            CHECK(fi->trigger && !strncmp(start, fi->trigger, strlen(fi->trigger)), "%s: trigger %s", fi->name,
                  fi->trigger);
        }
    }
    return CHECK_DONE();
}
