/* chat.c - chat templates: requests rendered with the model's Jinja
 * template (lib/jinja), and the hand-written families of llama.cpp's
 * llm_chat_detect_template / llm_chat_apply_template, which a request
 * names when the model has no template of its own. */
#include "chat.h"
#include "chat-args.h"
#include "chat-format.h"
#include "chat-grammar.h"
#include "tok-internal.h"

#include "error.h"
#include "fileio.h"
#include "json.h"
#include "log.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    enum lp_chat_template t;
} names[] = {
    {"chatml", LP_CHAT_CHATML},
    {"llama2", LP_CHAT_LLAMA2},
    {"llama2-sys", LP_CHAT_LLAMA2_SYS},
    {"llama2-sys-bos", LP_CHAT_LLAMA2_SYS_BOS},
    {"llama2-sys-strip", LP_CHAT_LLAMA2_SYS_STRIP},
    {"llama3", LP_CHAT_LLAMA3},
    {"zephyr", LP_CHAT_ZEPHYR},
    {"phi3", LP_CHAT_PHI3},
    {"mistral-v1", LP_CHAT_MISTRAL_V1},
    {"mistral-v3", LP_CHAT_MISTRAL_V3},
    {"mistral-v3-tekken", LP_CHAT_MISTRAL_V3_TEKKEN},
    {"mistral-v7", LP_CHAT_MISTRAL_V7},
};

const char *lp_chat_template_name(enum lp_chat_template t)
{
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (names[i].t == t) return names[i].name;
    return "unknown";
}

static bool has(const char *s, size_t n, const char *needle)
{
    return memmem(s, n, needle, strlen(needle)) != NULL;
}

enum lp_chat_template lp_chat_template_by_name(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strlen(names[i].name) == len && !memcmp(names[i].name, name, len)) return names[i].t;
    return LP_CHAT_UNKNOWN;
}

int lp_chat_template_detect(const char *tmpl, size_t len, enum lp_chat_template *out)
{
    *out = LP_CHAT_UNKNOWN;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strlen(names[i].name) == len && !memcmp(names[i].name, tmpl, len)) {
            *out = names[i].t;
            return 0;
        }
    }
    if (has(tmpl, len, "<|im_start|>")) {
        *out = LP_CHAT_CHATML;
    } else if ((len >= 7 && !memcmp(tmpl, "mistral", 7)) || has(tmpl, len, "[INST]")) {
        if (has(tmpl, len, "[SYSTEM_PROMPT]")) {
            *out = LP_CHAT_MISTRAL_V7;
        } else if (has(tmpl, len, "' [INST] ' + system_message") || has(tmpl, len, "[AVAILABLE_TOOLS]")) {
            if (has(tmpl, len, " [INST]")) *out = LP_CHAT_MISTRAL_V1;
            else if (has(tmpl, len, "\"[INST]\"")) *out = LP_CHAT_MISTRAL_V3_TEKKEN;
            else *out = LP_CHAT_MISTRAL_V3;
        } else if (has(tmpl, len, "content.strip()")) {
            *out = LP_CHAT_LLAMA2_SYS_STRIP;
        } else if (has(tmpl, len, "bos_token + '[INST]")) {
            *out = LP_CHAT_LLAMA2_SYS_BOS;
        } else if (has(tmpl, len, "<<SYS>>")) {
            *out = LP_CHAT_LLAMA2_SYS;
        } else {
            *out = LP_CHAT_LLAMA2;
        }
    } else if (has(tmpl, len, "<|assistant|>") && has(tmpl, len, "<|end|>")) {
        *out = LP_CHAT_PHI3;
    } else if (has(tmpl, len, "<|user|>") && has(tmpl, len, "<|endoftext|>")) {
        *out = LP_CHAT_ZEPHYR;
    } else if (has(tmpl, len, "<|start_header_id|>") && has(tmpl, len, "<|end_header_id|>")) {
        *out = LP_CHAT_LLAMA3;
    }
    if (*out == LP_CHAT_UNKNOWN) {
        /* quote the start of the template, on one line */
        char q[81];
        size_t k = 0;
        for (size_t i = 0; i < len && k < 80; i++)
            q[k++] = (tmpl[i] == '\n' || tmpl[i] == '\r') ? ' ' : tmpl[i];
        q[k] = 0;
        return lp_error_set(LP_ERR(ENOTSUP),
                            "chat template not recognised (supported: chatml, llama2, llama3, zephyr, "
                            "phi3, mistral): \"%s%s\"",
                            q, len > 80 ? "..." : "");
    }
    return 0;
}

static int put(lp__buf_t *b, const char *s)
{
    return lp__buf_put(b, s, strlen(s));
}

static int put_trim(lp__buf_t *b, const char *s)
{
    size_t n = strlen(s), a = 0;
    while (a < n && isspace((unsigned char)s[a])) a++;
    while (n > a && isspace((unsigned char)s[n - 1])) n--;
    return lp__buf_put(b, s + a, n - a);
}

int lp_chat_apply(enum lp_chat_template t, const lp_chat_msg_t *msgs, size_t n,
                  bool add_assistant, char **text, size_t *len)
{
    *text = NULL;
    *len = 0;
    lp__buf_t b = {0};
    int rc = 0;
    for (size_t i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content)
            return lp_error_set(LP_ERR(EINVAL), "chat message %zu: missing role or content", i);

    switch (t) {
    case LP_CHAT_CHATML:
        for (size_t i = 0; i < n && !rc; i++) {
            rc = put(&b, "<|im_start|>");
            if (!rc) rc = put(&b, msgs[i].role);
            if (!rc) rc = put(&b, "\n");
            if (!rc) rc = put(&b, msgs[i].content);
            if (!rc) rc = put(&b, "<|im_end|>\n");
        }
        if (!rc && add_assistant) rc = put(&b, "<|im_start|>assistant\n");
        break;
    case LP_CHAT_LLAMA2: case LP_CHAT_LLAMA2_SYS: case LP_CHAT_LLAMA2_SYS_BOS:
    case LP_CHAT_LLAMA2_SYS_STRIP: {
        bool sys = t != LP_CHAT_LLAMA2;
        bool bos_inside = t == LP_CHAT_LLAMA2_SYS_BOS;
        bool strip = t == LP_CHAT_LLAMA2_SYS_STRIP;
        bool inside = true;
        rc = put(&b, "[INST] ");
        for (size_t i = 0; i < n && !rc; i++) {
            const char *role = msgs[i].role;
            if (!inside) {
                inside = true;
                rc = put(&b, bos_inside ? "<s>[INST] " : "[INST] ");
            }
            if (!strcmp(role, "system")) {
                if (!rc && sys) rc = put(&b, "<<SYS>>\n");
                if (!rc) rc = strip ? put_trim(&b, msgs[i].content) : put(&b, msgs[i].content);
                if (!rc) rc = put(&b, sys ? "\n<</SYS>>\n\n" : "\n");
            } else if (!strcmp(role, "user")) {
                if (!rc) rc = strip ? put_trim(&b, msgs[i].content) : put(&b, msgs[i].content);
                if (!rc) rc = put(&b, " [/INST]");
            } else {
                if (!rc) rc = strip ? put_trim(&b, msgs[i].content) : put(&b, msgs[i].content);
                if (!rc) rc = put(&b, "</s>");
                inside = false;
            }
        }
        break;
    }
    case LP_CHAT_LLAMA3:
        for (size_t i = 0; i < n && !rc; i++) {
            rc = put(&b, "<|start_header_id|>");
            if (!rc) rc = put(&b, msgs[i].role);
            if (!rc) rc = put(&b, "<|end_header_id|>\n\n");
            if (!rc) rc = put_trim(&b, msgs[i].content);
            if (!rc) rc = put(&b, "<|eot_id|>");
        }
        if (!rc && add_assistant) rc = put(&b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    case LP_CHAT_ZEPHYR: case LP_CHAT_PHI3:
        for (size_t i = 0; i < n && !rc; i++) {
            rc = put(&b, "<|");
            if (!rc) rc = put(&b, msgs[i].role);
            if (!rc) rc = put(&b, "|>\n");
            if (!rc) rc = put(&b, msgs[i].content);
            if (!rc) rc = put(&b, t == LP_CHAT_ZEPHYR ? "<|endoftext|>\n" : "<|end|>\n");
        }
        if (!rc && add_assistant) rc = put(&b, "<|assistant|>\n");
        break;
    case LP_CHAT_MISTRAL_V1: case LP_CHAT_MISTRAL_V3: case LP_CHAT_MISTRAL_V3_TEKKEN: {
        const char *lead = t == LP_CHAT_MISTRAL_V1 ? " " : "";
        const char *trail = t == LP_CHAT_MISTRAL_V3_TEKKEN ? "" : " ";
        bool trim_asst = t == LP_CHAT_MISTRAL_V3;
        bool inside = false;
        for (size_t i = 0; i < n && !rc; i++) {
            if (!inside) {
                rc = put(&b, lead);
                if (!rc) rc = put(&b, "[INST]");
                if (!rc) rc = put(&b, trail);
                inside = true;
            }
            if (rc) break;
            if (!strcmp(msgs[i].role, "system")) {
                rc = put(&b, msgs[i].content);
                if (!rc) rc = put(&b, "\n\n");
            } else if (!strcmp(msgs[i].role, "user")) {
                rc = put(&b, msgs[i].content);
                if (!rc) rc = put(&b, lead);
                if (!rc) rc = put(&b, "[/INST]");
            } else {
                rc = put(&b, trail);
                if (!rc) rc = trim_asst ? put_trim(&b, msgs[i].content) : put(&b, msgs[i].content);
                if (!rc) rc = put(&b, "</s>");
                inside = false;
            }
        }
        break;
    }
    case LP_CHAT_MISTRAL_V7:
        for (size_t i = 0; i < n && !rc; i++) {
            if (!strcmp(msgs[i].role, "system")) {
                rc = put(&b, "[SYSTEM_PROMPT] ");
                if (!rc) rc = put(&b, msgs[i].content);
                if (!rc) rc = put(&b, "[/SYSTEM_PROMPT]");
            } else if (!strcmp(msgs[i].role, "user")) {
                rc = put(&b, "[INST] ");
                if (!rc) rc = put(&b, msgs[i].content);
                if (!rc) rc = put(&b, "[/INST]");
            } else {
                rc = put(&b, " ");
                if (!rc) rc = put(&b, msgs[i].content);
                if (!rc) rc = put(&b, "</s>");
            }
        }
        break;
    case LP_CHAT_UNKNOWN:
    default:
        return lp_error_set(LP_ERR(EINVAL), "chat template: none recognised");
    }
    if (!rc && !b.v) rc = lp__buf_put(&b, "", 0);
    if (rc) {
        free(b.v);
        return rc;
    }
    *text = b.v;
    *len = b.n;
    return 0;
}

/* ---- rendering requests ----------------------------------------------------- */

struct lp_chat_renderer {
    const lp_tokenizer_t *tok;
    lp_jinja_tmpl_t *dflt; /* NULL when there is no default template */
    char *dflt_src;
    size_t dflt_len;
    char *bos, *eos;       /* the special tokens' texts, or NULL */
    char *dflt_err;        /* why the model's template did not parse, or NULL */
    lp_chat_template_caps_t dflt_caps; /* how the default template takes tool calls */
};

void lp_chat_renderer_destroy(lp_chat_renderer_t **self_p)
{
    if (!self_p || !*self_p) return;
    lp_chat_renderer_t *cr = *self_p;
    lp_jinja_tmpl_destroy(&cr->dflt);
    free(cr->dflt_src);
    free(cr->bos);
    free(cr->eos);
    free(cr->dflt_err);
    free(cr);
    *self_p = NULL;
}

static char *token_text(const lp_tokenizer_t *tok, int32_t id)
{
    const char *p;
    size_t n;
    if (id < 0 || lp_token_piece(tok, id, true, &p, &n)) return NULL;
    return strndup(p, n);
}

int lp_chat_renderer_new(const lp_tokenizer_t *tok, const char *file, lp_chat_renderer_t **out)
{
    *out = NULL;
    lp_chat_renderer_t *cr = calloc(1, sizeof(*cr));
    if (!cr) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    cr->tok = tok;
    cr->bos = token_text(tok, lp_tokenizer_bos(tok));
    cr->eos = token_text(tok, lp_tokenizer_eos(tok));
    int rc = 0;
    if (file) {
        rc = lp_read_file(file, &cr->dflt_src, &cr->dflt_len);
    } else {
        const char *t;
        size_t tl;
        if (!lp_tokenizer_chat_template(tok, &t, &tl) && !(cr->dflt_src = strndup(t, tl)))
            rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
        cr->dflt_len = tl;
        lp_error_clear();
    }
    if (!rc && cr->dflt_src) {
        rc = lp_jinja_parse(cr->dflt_src, cr->dflt_len, &cr->dflt);
        if (rc) lp_error_prefix("%s: ", file ? file : "tokenizer.chat_template");
        else lp_chat_template_caps(cr->dflt, cr->dflt_src, cr->dflt_len, &cr->dflt_caps);
        /* A template given on the command line must parse; the model's is
         * only needed by chat requests, which then get its error. */
        if (rc && !file && rc != LP_ERR(ENOMEM)) {
            LP_WARN("%s", lp_error_msg());
            cr->dflt_err = strdup(lp_error_msg());
            rc = cr->dflt_err ? 0 : LP_ERR(ENOMEM);
        }
    }
    if (rc) {
        lp_chat_renderer_destroy(&cr);
        return rc;
    }
    *out = cr;
    return 0;
}

bool lp_chat_renderer_has_default(const lp_chat_renderer_t *cr) { return cr->dflt != NULL; }

/* messages from the typed wire form, as chat_json */
static int typed_json(const lp_chat_msg_t *msgs, size_t n, lp_json_buf_t *b)
{
    lp_json_buf_puts(b, "{\"messages\":[");
    for (size_t i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].role[0])
            return lp_error_set(LP_ERR(EINVAL), "chat_template: messages[%zu] has no role", i);
        lp_json_buf_puts(b, i ? ",{\"role\":" : "{\"role\":");
        lp_json_buf_str(b, msgs[i].role, strlen(msgs[i].role));
        lp_json_buf_puts(b, ",\"content\":");
        const char *c = msgs[i].content ? msgs[i].content : "";
        lp_json_buf_str(b, c, strlen(c));
        lp_json_buf_puts(b, "}");
    }
    lp_json_buf_puts(b, "]}");
    return b->oom ? lp_error_set(LP_ERR(ENOMEM), "out of memory") : 0;
}

/* A family's formatter, with the messages of a conversation (content that
 * is not a string counts as empty). */
static int render_family(enum lp_chat_template fam, const lp_json_t *msgs, bool add_assistant, char **text,
                         size_t *len)
{
    lp_chat_msg_t *m = calloc(msgs->n ? msgs->n : 1, sizeof(*m));
    if (!m) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    for (size_t i = 0; i < msgs->n; i++) {
        const lp_json_t *role = lp_json_get(&msgs->u.items[i], "role");
        const lp_json_t *content = lp_json_get(&msgs->u.items[i], "content");
        m[i].role = role && role->type == LP_JSON_STRING ? role->u.str : "";
        m[i].content = content && content->type == LP_JSON_STRING ? content->u.str : "";
    }
    int rc = lp_chat_apply(fam, m, msgs->n, add_assistant, text, len);
    free(m);
    return rc;
}

static bool has_key(const lp_json_t *obj, const char *k) { return obj && lp_json_get(obj, k) != NULL; }

void lp_chat_render_out_clear(lp_chat_render_out_t *o)
{
    if (!o) return;
    lp_chat_grammar_destroy(&o->grammar);
    memset(o, 0, sizeof(*o));
}

/* tool_choice "required" or a named function: the call grammar of the
 * template's format (lib/chat/chat-grammar.h) */
static int forced_calls(lp_chat_format_t format, const lp_json_t *conv, const char *prompt, size_t prompt_len,
                        lp_chat_render_out_t *o)
{
    const lp_json_t *tc = lp_json_get(conv, "tool_choice"), *tools = lp_json_get(conv, "tools");
    if (!tc || tc->type == LP_JSON_NULL || !tools || tools->type != LP_JSON_ARRAY || !tools->n) return 0;
    const lp_json_t *par = lp_json_get(conv, "parallel_tool_calls");
    const lp_json_t *kw = lp_json_get(conv, "chat_template_kwargs");
    const lp_json_t *think = kw ? lp_json_get(kw, "enable_thinking") : NULL;
    lp_chat_grammar_opts_t go = {
        .format = format,
        .tools = tools,
        .tool_choice = tc,
        .parallel_tool_calls = !par || par->type != LP_JSON_BOOL || par->u.b,
        .starts_in_reasoning = lp_chat_prompt_opens_reasoning(format, prompt, prompt_len),
    };
    /* reasoning before the calls only where the prompt opened it or the
     * request asked for thinking: a forced answer is the calls */
    go.allow_reasoning = go.starts_in_reasoning || (think && think->type == LP_JSON_BOOL && think->u.b);
    int rc = lp_chat_grammar_build(&go, &o->grammar);
    if (rc == LP_ERR(ENOTSUP))
        return lp_error_set(LP_ERR(EINVAL), "tool_choice: the template's tool-call format (%s) cannot be forced: %s",
                            lp_chat_format_info(format)->name, lp_error_msg());
    if (rc) lp_error_prefix("tool_choice: ");
    return rc;
}

int lp_chat_render(const lp_chat_renderer_t *cr, const char *tmpl, const char *chat_json, size_t chat_len,
                   const lp_chat_msg_t *msgs, size_t n, bool add_assistant, char **text, size_t *len,
                   bool *has_bos, lp_chat_render_out_t *o)
{
    *text = NULL;
    *len = 0;
    *has_bos = false;
    if (o) memset(o, 0, sizeof(*o));
    lp_json_buf_t typed = {0}, ctx = {0}, prep = {0};
    lp_json_doc_t *conv_doc = NULL, *ctx_doc = NULL;
    lp_jinja_tmpl_t *own = NULL;
    int rc = 0;
    if (!chat_json) {
        if ((rc = typed_json(msgs, n, &typed))) goto out;
        chat_json = typed.p;
        chat_len = typed.n;
    }
    if ((rc = lp_json_parse(chat_json, chat_len, &conv_doc))) {
        lp_error_prefix("chat_template: the conversation: ");
        goto out;
    }
    const lp_json_t *conv = lp_json_root(conv_doc);
    const lp_json_t *messages = lp_json_get(conv, "messages");
    const lp_json_t *tools = lp_json_get(conv, "tools");
    const lp_json_t *kwargs = lp_json_get(conv, "chat_template_kwargs");
    if (conv->type != LP_JSON_OBJECT || !messages || messages->type != LP_JSON_ARRAY || !messages->n) {
        rc = lp_error_set(LP_ERR(EINVAL), "chat_template: the conversation has no messages");
        goto out;
    }
    if (kwargs && kwargs->type != LP_JSON_OBJECT) kwargs = NULL;

    /* which template */
    const lp_jinja_tmpl_t *t = cr->dflt;
    const char *src = cr->dflt_src;
    size_t src_len = cr->dflt_len;
    lp_chat_template_caps_t caps = cr->dflt_caps;
    if (tmpl && tmpl[0]) {
        size_t tl = strlen(tmpl);
        enum lp_chat_template fam = lp_chat_template_by_name(tmpl, tl);
        if (fam != LP_CHAT_UNKNOWN) {
            rc = render_family(fam, messages, add_assistant, text, len);
            if (rc) lp_error_prefix("chat_template: ");
            goto out;
        }
        if (!strstr(tmpl, "{{") && !strstr(tmpl, "{%")) {
            rc = lp_error_set(LP_ERR(EINVAL), "chat_template: '%.80s' is neither a template family (chatml, "
                                              "llama2, llama3, zephyr, phi3, mistral-v1, mistral-v3, mistral-v7, "
                                              "...) nor Jinja text", tmpl);
            goto out;
        }
        if ((rc = lp_jinja_parse(tmpl, tl, &own))) {
            lp_error_prefix("chat_template: ");
            goto out;
        }
        t = own;
        src = tmpl;
        src_len = tl;
        lp_chat_template_caps(own, src, src_len, &caps);
    }
    if (!t && cr->dflt_err) {
        rc = lp_error_set(LP_ERR(EINVAL), "chat_template: %s", cr->dflt_err);
        goto out;
    }
    if (!t) {
        rc = lp_error_set(LP_ERR(ENOENT), "chat_template: the model has no tokenizer.chat_template; give one "
                                          "(chat_template in the request, or tokenizer-svc --chat-template-file) "
                                          "or name a family: chatml, llama2, llama3, zephyr, phi3, mistral-v7, ...");
        goto out;
    }

    /* the context, as apply_chat_template builds it: the special tokens,
     * the template kwargs (which may override them), the conversation */
    lp_json_buf_puts(&ctx, "{");
    bool first = true;
    if (cr->bos && !has_key(kwargs, "bos_token")) {
        lp_json_buf_puts(&ctx, "\"bos_token\":");
        lp_json_buf_str(&ctx, cr->bos, strlen(cr->bos));
        first = false;
    }
    if (cr->eos && !has_key(kwargs, "eos_token")) {
        lp_json_buf_puts(&ctx, first ? "\"eos_token\":" : ",\"eos_token\":");
        lp_json_buf_str(&ctx, cr->eos, strlen(cr->eos));
        first = false;
    }
    for (size_t i = 0; kwargs && i < kwargs->n; i++) {
        const lp_json_t *k = &kwargs->u.items[i];
        if (!strcmp(k->key, "messages") || !strcmp(k->key, "tools") || !strcmp(k->key, "add_generation_prompt") ||
            !strcmp(k->key, "continue_final_message") || !strcmp(k->key, "__now__"))
            continue;
        if (!first) lp_json_buf_puts(&ctx, ",");
        lp_json_buf_str(&ctx, k->key, k->key_len);
        lp_json_buf_puts(&ctx, ":");
        lp_json_buf_value(&ctx, k);
        first = false;
    }
    lp_json_buf_puts(&ctx, first ? "\"messages\":" : ",\"messages\":");
    lp_json_buf_value(&ctx, messages);
    if (tools && tools->type != LP_JSON_NULL) {
        lp_json_buf_puts(&ctx, ",\"tools\":");
        lp_json_buf_value(&ctx, tools);
    }
    lp_json_buf_puts(&ctx, add_assistant ? ",\"add_generation_prompt\":true}" : ",\"add_generation_prompt\":false}");
    if (ctx.oom) {
        rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
        goto out;
    }
    if ((rc = lp_json_parse(ctx.p, ctx.n, &ctx_doc))) {
        lp_error_prefix("chat_template: the context: ");
        goto out;
    }
    /* tool-call arguments (and gpt-oss's "thinking") as the template takes them */
    if (caps.object_args || caps.thinking_field) {
        lp_chat_prepare_messages(lp_json_root(ctx_doc), &caps, &prep);
        lp_json_doc_destroy(&ctx_doc);
        if (prep.oom) {
            rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
            goto out;
        }
        if ((rc = lp_json_parse(prep.p, prep.n, &ctx_doc))) {
            lp_error_prefix("chat_template: the context: ");
            goto out;
        }
    }
    rc = lp_jinja_chat_render(t, src, src_len, lp_json_root(ctx_doc), NULL, text, len);
    if (rc) {
        lp_error_prefix("chat_template: ");
        goto out;
    }
    *has_bos = cr->bos && cr->bos[0] && !strncmp(*text, cr->bos, strlen(cr->bos));
    if (o) {
        o->format = lp_chat_format_detect(src, src_len);
        if ((rc = forced_calls(o->format, conv, *text, *len, o))) {
            free(*text);
            *text = NULL;
            *len = 0;
        }
    }
out:
    if (rc && o) lp_chat_render_out_clear(o);
    free(prep.p);
    lp_jinja_tmpl_destroy(&own);
    lp_json_doc_destroy(&conv_doc);
    lp_json_doc_destroy(&ctx_doc);
    free(typed.p);
    free(ctx.p);
    return rc;
}
