/* chat-request.c - the conversation of a chat request, checked and written
 * for tokenizer-svc (see chat-request.h). */
#include "chat-request.h"

#include "error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const lp_chat_request_fields[] = {"messages", "tools", "tool_choice", "parallel_tool_calls",
                                              "chat_template_kwargs", NULL};

#define MAX_MESSAGES 4096

/* the message fields a template may read; anything else is refused */
static const char *const message_fields[] = {"role", "content", "name", "tool_calls", "tool_call_id",
                                             "reasoning_content", "refusal", NULL};

/* template variables the request itself sets */
static const char *const reserved_kwargs[] = {"messages", "tools", "add_generation_prompt",
                                              "continue_final_message", "__now__", NULL};

static bool in_list(const char *const *list, const char *k)
{
    for (int i = 0; list[i]; i++)
        if (!strcmp(list[i], k)) return true;
    return false;
}

#define BAD(p, ...)                           \
    do {                                      \
        *param = (p);                         \
        snprintf(why, cap, __VA_ARGS__);      \
        return -1;                            \
    } while (0)

static int check_tool_calls(const lp_json_t *tc, size_t i, const char **param, char *why, size_t cap)
{
    if (tc->type == LP_JSON_NULL) return 0;
    if (tc->type != LP_JSON_ARRAY) BAD("messages", "messages[%zu].tool_calls: must be a list", i);
    for (size_t k = 0; k < tc->n; k++) {
        const lp_json_t *c = &tc->u.items[k], *v;
        if (c->type != LP_JSON_OBJECT) BAD("messages", "messages[%zu].tool_calls[%zu]: must be an object", i, k);
        if ((v = lp_json_get(c, "type")) && !(v->type == LP_JSON_STRING && !strcmp(v->u.str, "function")))
            BAD("messages", "messages[%zu].tool_calls[%zu].type: must be \"function\"", i, k);
        if ((v = lp_json_get(c, "id")) && v->type != LP_JSON_STRING)
            BAD("messages", "messages[%zu].tool_calls[%zu].id: must be a string", i, k);
        const lp_json_t *f = lp_json_get(c, "function");
        if (!f || f->type != LP_JSON_OBJECT)
            BAD("messages", "messages[%zu].tool_calls[%zu].function: must be an object", i, k);
        if (!(v = lp_json_get(f, "name")) || v->type != LP_JSON_STRING)
            BAD("messages", "messages[%zu].tool_calls[%zu].function.name: must be a string", i, k);
        /* arguments: OpenAI sends a JSON string; an object is taken too */
        if ((v = lp_json_get(f, "arguments")) && v->type != LP_JSON_STRING && v->type != LP_JSON_OBJECT)
            BAD("messages", "messages[%zu].tool_calls[%zu].function.arguments: must be a string", i, k);
    }
    return 0;
}

/* content: a string, null, or text parts (joined into one string) */
static int write_content(lp_json_buf_t *b, const lp_json_t *c, size_t i, const char **param, char *why, size_t cap)
{
    if (c->type == LP_JSON_NULL || c->type == LP_JSON_STRING) {
        lp_json_buf_value(b, c);
        return 0;
    }
    if (c->type != LP_JSON_ARRAY)
        BAD("messages", "messages[%zu].content: must be a string, null or a list of text parts", i);
    lp_json_buf_t t = {0};
    lp_json_buf_put(&t, "", 0);
    for (size_t k = 0; k < c->n; k++) {
        const lp_json_t *part = &c->u.items[k], *type = lp_json_get(part, "type"), *text = lp_json_get(part, "text");
        if (part->type != LP_JSON_OBJECT || !type || type->type != LP_JSON_STRING || strcmp(type->u.str, "text") ||
            !text || text->type != LP_JSON_STRING) {
            free(t.p);
            BAD("messages", "messages[%zu].content[%zu]: only {\"type\":\"text\",\"text\":...} parts are supported",
                i, k);
        }
        lp_json_buf_put(&t, text->u.str, text->n);
    }
    lp_json_buf_str(b, t.p ? t.p : "", t.n);
    free(t.p);
    return 0;
}

static int write_messages(lp_json_buf_t *b, const lp_json_t *v, const char **param, char *why, size_t cap)
{
    if (!v || v->type != LP_JSON_ARRAY || v->n == 0)
        BAD("messages", "messages: must be a non-empty list of messages");
    if (v->n > MAX_MESSAGES) BAD("messages", "messages: %zu messages (at most %d)", v->n, MAX_MESSAGES);
    lp_json_buf_puts(b, "[");
    for (size_t i = 0; i < v->n; i++) {
        const lp_json_t *m = &v->u.items[i], *role;
        if (m->type != LP_JSON_OBJECT) BAD("messages", "messages[%zu]: must be an object", i);
        role = lp_json_get(m, "role");
        if (!role || role->type != LP_JSON_STRING || !role->n)
            BAD("messages", "messages[%zu].role: must be a non-empty string", i);
        for (size_t k = 0; k < m->n; k++) {
            const lp_json_t *f = &m->u.items[k];
            if (!in_list(message_fields, f->key))
                BAD("messages", "messages[%zu].%.40s: unknown field (known: role, content, name, tool_calls, "
                                "tool_call_id, reasoning_content)", i, f->key);
            if ((!strcmp(f->key, "name") || !strcmp(f->key, "tool_call_id") || !strcmp(f->key, "reasoning_content")) &&
                f->type != LP_JSON_STRING && f->type != LP_JSON_NULL)
                BAD("messages", "messages[%zu].%s: must be a string", i, f->key);
            if (!strcmp(f->key, "tool_calls") && check_tool_calls(f, i, param, why, cap)) return -1;
        }
        const lp_json_t *tc = lp_json_get(m, "tool_calls");
        if (!lp_json_get(m, "content") && !(tc && tc->type == LP_JSON_ARRAY && tc->n))
            BAD("messages", "messages[%zu].content: missing (only an assistant message with tool_calls may "
                            "leave it out)", i);
        if (i) lp_json_buf_puts(b, ",");
        lp_json_buf_puts(b, "{");
        for (size_t k = 0; k < m->n; k++) {
            const lp_json_t *f = &m->u.items[k];
            if (k) lp_json_buf_puts(b, ",");
            lp_json_buf_str(b, f->key, f->key_len);
            lp_json_buf_puts(b, ":");
            if (!strcmp(f->key, "content")) {
                if (write_content(b, f, i, param, why, cap)) return -1;
            } else
                lp_json_buf_value(b, f);
        }
        lp_json_buf_puts(b, "}");
    }
    lp_json_buf_puts(b, "]");
    return 0;
}

static int check_tools(const lp_json_t *v, const char **param, char *why, size_t cap)
{
    if (v->type != LP_JSON_ARRAY) BAD("tools", "tools: must be a list of tools");
    for (size_t i = 0; i < v->n; i++) {
        const lp_json_t *t = &v->u.items[i], *x;
        if (t->type != LP_JSON_OBJECT) BAD("tools", "tools[%zu]: must be an object", i);
        if (!(x = lp_json_get(t, "type")) || x->type != LP_JSON_STRING || strcmp(x->u.str, "function"))
            BAD("tools", "tools[%zu].type: must be \"function\"", i);
        const lp_json_t *f = lp_json_get(t, "function");
        if (!f || f->type != LP_JSON_OBJECT) BAD("tools", "tools[%zu].function: must be an object", i);
        if (!(x = lp_json_get(f, "name")) || x->type != LP_JSON_STRING || !x->n)
            BAD("tools", "tools[%zu].function.name: must be a non-empty string", i);
        if ((x = lp_json_get(f, "description")) && x->type != LP_JSON_STRING && x->type != LP_JSON_NULL)
            BAD("tools", "tools[%zu].function.description: must be a string", i);
        if ((x = lp_json_get(f, "parameters")) && x->type != LP_JSON_OBJECT && x->type != LP_JSON_NULL)
            BAD("tools", "tools[%zu].function.parameters: must be a JSON Schema object", i);
    }
    return 0;
}

int lp_chat_request_json(const lp_json_t *root, char **out, size_t *out_len, const char **param, char *why,
                         size_t cap)
{
    *out = NULL;
    if (out_len) *out_len = 0;
    *param = NULL;
    const lp_json_t *v;
    lp_json_buf_t b = {0};
    int rc = 0;
#define FAIL_IF(cond)      \
    do {                   \
        if (cond) {        \
            rc = -1;       \
            goto out;      \
        }                  \
    } while (0)
    lp_json_buf_puts(&b, "{\"messages\":");
    FAIL_IF(write_messages(&b, lp_json_get(root, "messages"), param, why, cap));
    if ((v = lp_json_get(root, "tools")) && v->type != LP_JSON_NULL) {
        FAIL_IF(check_tools(v, param, why, cap));
        if (v->n) {
            lp_json_buf_puts(&b, ",\"tools\":");
            lp_json_buf_value(&b, v);
        }
    }
    /* Tool calls are not parsed out of the output yet: only the choices
     * that ask for nothing more than the template's rendering are taken. */
    if ((v = lp_json_get(root, "tool_choice")) && v->type != LP_JSON_NULL &&
        !(v->type == LP_JSON_STRING && (!strcmp(v->u.str, "auto") || !strcmp(v->u.str, "none")))) {
        *param = "tool_choice";
        snprintf(why, cap, "tool_choice: not supported: only \"auto\" and \"none\" (\"required\" and named "
                           "functions need tool-call parsing, not there yet)");
        rc = -1;
        goto out;
    }
    if ((v = lp_json_get(root, "parallel_tool_calls")) && v->type != LP_JSON_NULL && v->type != LP_JSON_BOOL) {
        *param = "parallel_tool_calls";
        snprintf(why, cap, "parallel_tool_calls: must be true or false");
        rc = -1;
        goto out;
    }
    if ((v = lp_json_get(root, "chat_template_kwargs")) && v->type != LP_JSON_NULL) {
        if (v->type != LP_JSON_OBJECT) {
            *param = "chat_template_kwargs";
            snprintf(why, cap, "chat_template_kwargs: must be an object (template variables by name)");
            rc = -1;
            goto out;
        }
        for (size_t i = 0; i < v->n; i++)
            if (in_list(reserved_kwargs, v->u.items[i].key)) {
                *param = "chat_template_kwargs";
                snprintf(why, cap, "chat_template_kwargs.%.40s: set by the request itself, not a template variable "
                                   "a client gives", v->u.items[i].key);
                rc = -1;
                goto out;
            }
        lp_json_buf_puts(&b, ",\"chat_template_kwargs\":");
        lp_json_buf_value(&b, v);
    }
    lp_json_buf_puts(&b, "}");
    if (b.oom) {
        *param = NULL;
        snprintf(why, cap, "out of memory");
        rc = -1;
    }
out:
#undef FAIL_IF
    if (rc) {
        free(b.p);
        return lp_error_set(LP_ERR(EINVAL), "%s", why);
    }
    *out = b.p;
    if (out_len) *out_len = b.n;
    return 0;
}
