/* fuzz-template.c - arbitrary bytes as a chat template (and, after a NUL
 * byte, as the JSON context): parsing and rendering must end in text or a
 * clean error, within small budgets, and render the same twice. */
#include "jinja.h"

#include "error.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char default_ctx[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": \"Hi \\u00e9 <b>\"},"
    " {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"call_1\", \"type\": \"function\","
    "  \"function\": {\"name\": \"add\", \"arguments\": \"{\\\"a\\\": 1}\"}}]},"
    " {\"role\": \"tool\", \"tool_call_id\": \"call_1\", \"content\": \"3\"},"
    " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"more\"}]}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"add\", \"description\": \"Add.\","
    "  \"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}, \"required\": [\"a\"]}}}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"n\": 3, \"f\": 2.5,"
    " \"enable_thinking\": false, \"__now__\": \"2026-01-15T10:00:00\"}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *src = (const char *)data;
    const uint8_t *nul = memchr(data, 0, size);
    size_t src_len = nul ? (size_t)(nul - data) : size;
    const char *ctx = nul ? (const char *)nul + 1 : default_ctx;
    size_t ctx_len = nul ? size - src_len - 1 : strlen(default_ctx);
    lp_json_doc_t *doc = NULL;
    if (lp_json_parse(ctx, ctx_len, &doc)) return 0;
    lp_jinja_tmpl_t *t = NULL;
    if (lp_jinja_parse(src, src_len, &t) == 0) {
        lp_jinja_opts_t o = {0};
        o.max_steps = 200000;
        o.max_bytes = 16u << 20;
        o.max_output = 1u << 20;
        char *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        int ra = lp_jinja_chat_render(t, src, src_len, lp_json_root(doc), &o, &a, &na);
        if (!nul) {
            /* the same input renders the same (the clock is pinned by __now__) */
            int rb = lp_jinja_chat_render(t, src, src_len, lp_json_root(doc), &o, &b, &nb);
            if (ra != rb || (!ra && (na != nb || memcmp(a, b, na)))) abort();
        }
        if (!ra && (!a || a[na] != 0)) abort();
        if (ra && !lp_error_msg()[0]) abort();
        free(a);
        free(b);
        lp_jinja_tmpl_destroy(&t);
    } else if (!lp_error_msg()[0])
        abort();
    lp_json_doc_destroy(&doc);
    return 0;
}
