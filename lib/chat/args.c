/* args.c - tool-call arguments and reasoning as a template expects them
 * (chat-args.h): the probe, and the rewrite of a conversation. */
#include "chat-args.h"

#include "error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the probe ---------------------------------------------------------------- */

#define PROBE_VALUE "lp_probe_value_7f3a"
#define PROBE_THOUGHT "lp_probe_thought_7f3a"

/* a user turn, an assistant turn with one call (content null or ""), its
 * result, another user turn; the call's arguments an object */
static const char probe_fmt[] =
    "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"},"
    " {\"role\": \"assistant\", \"content\": %s, %s\"tool_calls\": [{\"id\": \"call00001\", \"type\": \"function\","
    "  \"function\": {\"name\": \"lp_probe_fn\", \"arguments\": {\"lp_probe_key\": \"" PROBE_VALUE "\"}}}]},"
    " {\"role\": \"tool\", \"tool_call_id\": \"call00001\", \"name\": \"lp_probe_fn\", \"content\": \"ok\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"lp_probe_fn\", \"description\": \"A probe.\","
    "  \"parameters\": {\"type\": \"object\", \"properties\": {\"lp_probe_key\": {\"type\": \"string\"}},"
    "  \"required\": [\"lp_probe_key\"]}}}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"\", \"eos_token\": \"\","
    " \"__now__\": \"2026-01-15T10:00:00\"}";

/* does the probe render, and does its text hold `needle`? */
static bool probe(const lp_jinja_tmpl_t *t, const char *src, size_t src_len, const char *content, const char *extra,
                  const char *needle)
{
    char ctx[2048];
    snprintf(ctx, sizeof(ctx), probe_fmt, content, extra);
    lp_json_doc_t *doc = NULL;
    if (lp_json_parse(ctx, strlen(ctx), &doc)) return false;
    lp_jinja_opts_t o = {.max_steps = 2000000, .max_bytes = 16u << 20, .max_output = 1u << 20};
    char *out = NULL;
    size_t n = 0;
    bool ok = !lp_jinja_chat_render(t, src, src_len, lp_json_root(doc), &o, &out, &n) && strstr(out, needle);
    free(out);
    lp_json_doc_destroy(&doc);
    lp_error_clear();
    return ok;
}

int lp_chat_template_caps(const lp_jinja_tmpl_t *t, const char *src, size_t src_len, lp_chat_template_caps_t *out)
{
    memset(out, 0, sizeof(*out));
    /* some templates write calls only when content is null, others fail on a null content */
    out->object_args = probe(t, src, src_len, "null", "", PROBE_VALUE) || probe(t, src, src_len, "\"\"", "", PROBE_VALUE);
    const char *rc = "\"reasoning_content\": \"" PROBE_THOUGHT "\", ";
    const char *th = "\"thinking\": \"" PROBE_THOUGHT "\", ";
    out->thinking_field = !probe(t, src, src_len, "null", rc, PROBE_THOUGHT) && !probe(t, src, src_len, "\"\"", rc, PROBE_THOUGHT) &&
                          (probe(t, src, src_len, "null", th, PROBE_THOUGHT) || probe(t, src, src_len, "\"\"", th, PROBE_THOUGHT));
    return 0;
}

/* ---- the rewrite ----------------------------------------------------------------- */

static void put_key(lp_json_buf_t *b, const lp_json_t *it)
{
    lp_json_buf_str(b, it->key, it->key_len);
    lp_json_buf_puts(b, ":");
}

static bool key_is(const lp_json_t *it, const char *k) { return it->key_len == strlen(k) && !memcmp(it->key, k, it->key_len); }

static void put_arguments(lp_json_buf_t *b, const lp_json_t *v, bool objects)
{
    lp_json_doc_t *doc = NULL;
    if (objects && v->type == LP_JSON_STRING && !lp_json_parse(v->u.str, v->n, &doc) &&
        lp_json_root(doc)->type == LP_JSON_OBJECT)
        lp_json_buf_value(b, lp_json_root(doc));
    else
        lp_json_buf_value(b, v);
    lp_json_doc_destroy(&doc);
    lp_error_clear();
}

static void put_call(lp_json_buf_t *b, const lp_json_t *call, bool objects)
{
    if (call->type != LP_JSON_OBJECT) {
        lp_json_buf_value(b, call);
        return;
    }
    lp_json_buf_puts(b, "{");
    for (size_t i = 0; i < call->n; i++) {
        const lp_json_t *it = &call->u.items[i];
        if (i) lp_json_buf_puts(b, ",");
        put_key(b, it);
        if (!key_is(it, "function") || it->type != LP_JSON_OBJECT) {
            lp_json_buf_value(b, it);
            continue;
        }
        lp_json_buf_puts(b, "{");
        for (size_t k = 0; k < it->n; k++) {
            const lp_json_t *f = &it->u.items[k];
            if (k) lp_json_buf_puts(b, ",");
            put_key(b, f);
            if (key_is(f, "arguments")) put_arguments(b, f, objects);
            else lp_json_buf_value(b, f);
        }
        lp_json_buf_puts(b, "}");
    }
    lp_json_buf_puts(b, "}");
}

static void put_message(lp_json_buf_t *b, const lp_json_t *m, const lp_chat_template_caps_t *caps)
{
    if (m->type != LP_JSON_OBJECT) {
        lp_json_buf_value(b, m);
        return;
    }
    const lp_json_t *rc = lp_json_get(m, "reasoning_content");
    bool add_thinking = caps->thinking_field && rc && rc->type == LP_JSON_STRING && !lp_json_get(m, "thinking");
    lp_json_buf_puts(b, "{");
    for (size_t i = 0; i < m->n; i++) {
        const lp_json_t *it = &m->u.items[i];
        if (i) lp_json_buf_puts(b, ",");
        put_key(b, it);
        if (key_is(it, "tool_calls") && it->type == LP_JSON_ARRAY) {
            lp_json_buf_puts(b, "[");
            for (size_t k = 0; k < it->n; k++) {
                if (k) lp_json_buf_puts(b, ",");
                put_call(b, &it->u.items[k], caps->object_args);
            }
            lp_json_buf_puts(b, "]");
        } else
            lp_json_buf_value(b, it);
    }
    if (add_thinking) {
        lp_json_buf_puts(b, m->n ? ",\"thinking\":" : "\"thinking\":");
        lp_json_buf_value(b, rc);
    }
    lp_json_buf_puts(b, "}");
}

void lp_chat_prepare_messages(const lp_json_t *root, const lp_chat_template_caps_t *caps, lp_json_buf_t *b)
{
    if (root->type != LP_JSON_OBJECT) {
        lp_json_buf_value(b, root);
        return;
    }
    lp_json_buf_puts(b, "{");
    for (size_t i = 0; i < root->n; i++) {
        const lp_json_t *it = &root->u.items[i];
        if (i) lp_json_buf_puts(b, ",");
        put_key(b, it);
        if (key_is(it, "messages") && it->type == LP_JSON_ARRAY) {
            lp_json_buf_puts(b, "[");
            for (size_t k = 0; k < it->n; k++) {
                if (k) lp_json_buf_puts(b, ",");
                put_message(b, &it->u.items[k], caps);
            }
            lp_json_buf_puts(b, "]");
        } else
            lp_json_buf_value(b, it);
    }
    lp_json_buf_puts(b, "}");
}
