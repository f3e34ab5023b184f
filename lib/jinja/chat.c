/* chat.c - transformers' apply_chat_template(tokenize=False) around the
 * interpreter: the variables it passes (messages, tools, documents,
 * add_generation_prompt and the rest), its checks, and its
 * continue_final_message rule (tag the last message, render, cut there),
 * as ../shared/tools/render_template.py does them. */
#include "jinja.h"

#include "error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONTINUE_TAG "CONTINUE_FINAL_MESSAGE_TAG "

int lp_jinja_parse_iso_time(const char *s, struct tm *out)
{
    memset(out, 0, sizeof(*out));
    int Y, M, D, h = 0, m = 0, sec = 0, k = 0;
    if (sscanf(s, "%4d-%2d-%2d%n", &Y, &M, &D, &k) != 3 || k != 10) goto bad;
    const char *p = s + 10;
    if (*p == 'T' || *p == ' ') {
        int k2 = 0;
        if (sscanf(p + 1, "%2d:%2d%n", &h, &m, &k2) != 2 || k2 != 5) goto bad;
        p += 6;
        if (*p == ':') {
            if (sscanf(p + 1, "%2d%n", &sec, &k2) != 1 || k2 != 2) goto bad;
            p += 3;
            if (*p == '.') {
                p++;
                while (*p >= '0' && *p <= '9') p++;
            }
        }
        /* an offset is parsed and dropped: strftime_now formats the wall time */
        if (*p == 'Z') p++;
        else if (*p == '+' || *p == '-') {
            p++;
            while ((*p >= '0' && *p <= '9') || *p == ':') p++;
        }
    }
    if (*p) goto bad;
    if (M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 59) goto bad;
    out->tm_year = Y - 1900;
    out->tm_mon = M - 1;
    out->tm_mday = D;
    out->tm_hour = h;
    out->tm_min = m;
    out->tm_sec = sec;
    /* day of week and of year, from the calendar date */
    struct tm t = *out;
    time_t tt = timegm(&t);
    struct tm g;
    gmtime_r(&tt, &g);
    if (g.tm_mday != D) goto bad;
    out->tm_wday = g.tm_wday;
    out->tm_yday = g.tm_yday;
    out->tm_isdst = 0;
    return 0;
bad:
    return lp_error_set(LP_ERR(EINVAL), "Invalid isoformat string: '%s'", s);
}

/* ---- building a context with one message's text changed ----------------- */


/* The text to continue (kept in *final_text) written with the tag after it. */
static int put_tagged(lp_json_buf_t *b, const lp_json_t *str, char **final_text, size_t *final_len)
{
    *final_text = strndup(str->u.str, str->n);
    *final_len = str->n;
    char *t = malloc(str->n + sizeof(CONTINUE_TAG));
    if (!t || !*final_text) {
        free(t);
        return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    }
    memcpy(t, str->u.str, str->n);
    memcpy(t + str->n, CONTINUE_TAG, sizeof(CONTINUE_TAG));
    lp_json_t tv = {.type = LP_JSON_STRING, .n = str->n + sizeof(CONTINUE_TAG) - 1, .u.str = t};
    lp_json_buf_value(b, &tv);
    free(t);
    return 0;
}

/* messages with the last one's `field` given the tag (a string, or the
 * last text part of a list), as JSON text */
static int tagged_messages(const lp_json_t *msgs, const char *field, lp_json_buf_t *b, char **final_text, size_t *final_len)
{
    const lp_json_t *last = &msgs->u.items[msgs->n - 1];
    const lp_json_t *fv = lp_json_get(last, field);
    if (!fv || fv->type == LP_JSON_NULL)
        return lp_error_set(LP_ERR(EINVAL),
                            "continue_final_message is set but the final message has no \"%s\" to continue!", field);
    lp_json_buf_puts(b, "[");
    for (size_t i = 0; i < msgs->n; i++) {
        if (i) lp_json_buf_puts(b, ",");
        const lp_json_t *m = &msgs->u.items[i];
        if (i + 1 < msgs->n) {
            lp_json_buf_value(b, m);
            continue;
        }
        lp_json_buf_puts(b, "{");
        for (size_t k = 0; k < m->n; k++) {
            const lp_json_t *it = &m->u.items[k];
            if (k) lp_json_buf_puts(b, ",");
            lp_json_t key = {.type = LP_JSON_STRING, .n = it->key_len, .u.str = it->key};
            lp_json_buf_value(b, &key);
            lp_json_buf_puts(b, ":");
            if (it != fv) {
                lp_json_buf_value(b, it);
                continue;
            }
            if (it->type == LP_JSON_STRING) {
                if (put_tagged(b, it, final_text, final_len)) return LP_ERR(ENOMEM);
            } else if (it->type == LP_JSON_ARRAY) {
                /* the last part with "text" gets the tag */
                size_t at = SIZE_MAX;
                for (size_t q = it->n; q-- > 0;)
                    if (lp_json_get(&it->u.items[q], "text")) {
                        at = q;
                        break;
                    }
                if (at == SIZE_MAX)
                    return lp_error_set(LP_ERR(EINVAL), "continue_final_message is set but we could not find any "
                                                        "text to continue in the final message!");
                const lp_json_t *tx = lp_json_get(&it->u.items[at], "text");
                if (tx->type != LP_JSON_STRING)
                    return lp_error_set(LP_ERR(EINVAL), "continue_final_message: the text to continue is not a string");
                lp_json_buf_puts(b, "[");
                for (size_t q = 0; q < it->n; q++) {
                    if (q) lp_json_buf_puts(b, ",");
                    const lp_json_t *part = &it->u.items[q];
                    if (q != at) {
                        lp_json_buf_value(b, part);
                        continue;
                    }
                    lp_json_buf_puts(b, "{");
                    for (size_t z = 0; z < part->n; z++) {
                        const lp_json_t *pi = &part->u.items[z];
                        if (z) lp_json_buf_puts(b, ",");
                        lp_json_t pk = {.type = LP_JSON_STRING, .n = pi->key_len, .u.str = pi->key};
                        lp_json_buf_value(b, &pk);
                        lp_json_buf_puts(b, ":");
                        if (pi != tx) {
                            lp_json_buf_value(b, pi);
                            continue;
                        }
                        if (put_tagged(b, tx, final_text, final_len)) return LP_ERR(ENOMEM);
                    }
                    lp_json_buf_puts(b, "}");
                }
                lp_json_buf_puts(b, "]");
            } else
                return lp_error_set(LP_ERR(EINVAL), "continue_final_message: the final message's \"%s\" is not text",
                                    field);
        }
        lp_json_buf_puts(b, "}");
    }
    lp_json_buf_puts(b, "]");
    return b->oom ? lp_error_set(LP_ERR(ENOMEM), "out of memory") : 0;
}

/* `for x in v: if not isinstance(x, dict): raise ...` (None passes) */
static int list_of_dicts(const lp_json_t *v, const char *msg)
{
    if (!v || v->type == LP_JSON_NULL) return 0;
    switch (v->type) {
    case LP_JSON_BOOL: return lp_error_set(LP_ERR(EINVAL), "'bool' object is not iterable");
    case LP_JSON_NUMBER:
        return lp_error_set(LP_ERR(EINVAL), "'%s' object is not iterable", v->is_intlike ? "int" : "float");
    case LP_JSON_STRING: case LP_JSON_OBJECT: return v->n ? lp_error_set(LP_ERR(EINVAL), "%s", msg) : 0;
    case LP_JSON_ARRAY:
        for (size_t i = 0; i < v->n; i++)
            if (v->u.items[i].type != LP_JSON_OBJECT) return lp_error_set(LP_ERR(EINVAL), "%s", msg);
        return 0;
    default: return 0;
    }
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* Python's str.strip() for the check that the final text is in the output;
 * ASCII white space is what matters here. */
static void strip_span(const char *s, size_t n, size_t *a, size_t *b)
{
    *a = 0;
    *b = n;
    while (*a < *b && is_space(s[*a])) (*a)++;
    while (*b > *a && is_space(s[*b - 1])) (*b)--;
}

int lp_jinja_chat_render(const lp_jinja_tmpl_t *t, const char *src, size_t src_len, const lp_json_t *ctx,
                         const lp_jinja_opts_t *opts, char **out, size_t *out_len)
{
    *out = NULL;
    if (out_len) *out_len = 0;
    if (!ctx || ctx->type != LP_JSON_OBJECT) return lp_error_set(LP_ERR(EINVAL), "the context must be a JSON object");
    const lp_json_t *messages = lp_json_get(ctx, "messages");
    if (!messages) return lp_error_set(LP_ERR(EINVAL), "the context has no messages");
    const lp_json_t *tools = lp_json_get(ctx, "tools"), *documents = lp_json_get(ctx, "documents");
    const lp_json_t *agp = lp_json_get(ctx, "add_generation_prompt");
    const lp_json_t *cont = lp_json_get(ctx, "continue_final_message");
    const lp_json_t *now = lp_json_get(ctx, "__now__");
    int rc;
    bool cont_on = cont && !(cont->type == LP_JSON_NULL || (cont->type == LP_JSON_BOOL && !cont->u.b) ||
                             (cont->type == LP_JSON_NUMBER && cont->u.num == 0) ||
                             (cont->type == LP_JSON_STRING && cont->n == 0) ||
                             ((cont->type == LP_JSON_ARRAY || cont->type == LP_JSON_OBJECT) && cont->n == 0));
    bool agp_on = agp && !(agp->type == LP_JSON_NULL || (agp->type == LP_JSON_BOOL && !agp->u.b) ||
                           (agp->type == LP_JSON_NUMBER && agp->u.num == 0) ||
                           (agp->type == LP_JSON_STRING && agp->n == 0) ||
                           ((agp->type == LP_JSON_ARRAY || agp->type == LP_JSON_OBJECT) && agp->n == 0));
    if (cont_on && agp_on)
        return lp_error_set(LP_ERR(EINVAL),
                            "continue_final_message and add_generation_prompt are not compatible. Use "
                            "continue_final_message when you want the model to continue the final message, and "
                            "add_generation_prompt when you want to add a header that will prompt it to start a new "
                            "assistant message instead.");
    if ((rc = list_of_dicts(tools, "Tools should either be a JSON schema, or a callable function with type "
                                   "hints and a docstring suitable for auto-conversion to a schema.")))
        return rc;
    if ((rc = list_of_dicts(documents, "Documents should be a list of dicts with 'title' and 'text' keys!")))
        return rc;
    lp_jinja_opts_t o = opts ? *opts : (lp_jinja_opts_t){0};
    if (now && now->type != LP_JSON_NULL && !(now->type == LP_JSON_STRING && now->n == 0)) {
        if (now->type != LP_JSON_STRING) return lp_error_set(LP_ERR(EINVAL), "fromisoformat: argument must be str");
        int rc = lp_jinja_parse_iso_time(now->u.str, &o.now);
        if (rc) return rc;
        o.has_now = true;
    }

    /* continue_final_message: re-build the messages with the tag */
    char *final_text = NULL;
    size_t final_len = 0;
    lp_json_buf_t tagged = {0};
    lp_json_doc_t *tdoc = NULL;
    const lp_json_t *msgs_v = messages;
    if (cont_on) {
        char field[128] = "content";
        if (cont->type == LP_JSON_STRING) snprintf(field, sizeof(field), "%s", cont->u.str);
        if (messages->type != LP_JSON_ARRAY || !messages->n) {
            rc = lp_error_set(LP_ERR(EINVAL), "continue_final_message: no final message");
            goto out;
        }
        if (messages->u.items[messages->n - 1].type != LP_JSON_OBJECT) {
            rc = lp_error_set(LP_ERR(EINVAL), "'%s' object has no attribute 'get'", "str");
            goto out;
        }
        if ((rc = tagged_messages(messages, field, &tagged, &final_text, &final_len))) goto out;
        if (!memmem(src, src_len, field, strlen(field))) {
            rc = lp_error_set(LP_ERR(EINVAL), "continue_final_message is set to \"%s\" but this is not an accepted "
                                              "field in the chat_template", field);
            goto out;
        }
        if ((rc = lp_json_parse(tagged.p, tagged.n, &tdoc))) goto out;
        msgs_v = lp_json_root(tdoc);
    }

    /* the variables: messages, tools, documents, add_generation_prompt,
     * then every other member */
    lp_jinja_var_t *vars = calloc(ctx->n + 4, sizeof(*vars));
    if (!vars) {
        rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
        goto out;
    }
    lp_json_t f = {.type = LP_JSON_BOOL, .u.b = false};
    size_t nv = 0;
    vars[nv++] = (lp_jinja_var_t){"messages", msgs_v};
    vars[nv++] = (lp_jinja_var_t){"tools", tools};
    vars[nv++] = (lp_jinja_var_t){"documents", documents};
    vars[nv++] = (lp_jinja_var_t){"add_generation_prompt", agp ? agp : &f};
    for (size_t i = 0; i < ctx->n; i++) {
        const char *k = ctx->u.items[i].key;
        if (!strcmp(k, "messages") || !strcmp(k, "tools") || !strcmp(k, "documents") ||
            !strcmp(k, "add_generation_prompt") || !strcmp(k, "continue_final_message") || !strcmp(k, "__now__"))
            continue;
        vars[nv++] = (lp_jinja_var_t){k, &ctx->u.items[i]};
    }
    char *text = NULL;
    size_t len = 0;
    rc = lp_jinja_render(t, vars, nv, &o, &text, &len);
    free(vars);
    if (rc) goto out;
    if (cont_on) {
        const char *tag = "CONTINUE_FINAL_MESSAGE_TAG";
        size_t tl = strlen(tag);
        size_t a, b;
        strip_span(final_text, final_len, &a, &b);
        bool has_final = b == a || memmem(text, len, final_text + a, b - a);
        const char *at = NULL;
        for (const char *p = text; (p = memmem(p, len - (size_t)(p - text), tag, tl)); p++) at = p;
        if (!has_final || !at) {
            free(text);
            rc = lp_error_set(LP_ERR(EINVAL), "continue_final_message is set but the final message does not appear in "
                                              "the chat after applying the chat template! This can happen if the chat "
                                              "template deletes portions of the final message.");
            goto out;
        }
        size_t cut = (size_t)(at - text);
        if (!(len - cut >= sizeof(CONTINUE_TAG) - 1 && !memcmp(at, CONTINUE_TAG, sizeof(CONTINUE_TAG) - 1))) {
            /* the template trimmed the tag's space: trim what precedes too (Python's rstrip) */
            while (cut > 0 && is_space(text[cut - 1])) cut--;
        }
        len = cut;
        text[len] = 0;
    }
    *out = text;
    if (out_len) *out_len = len;
out:
    free(final_text);
    free(tagged.p);
    lp_json_doc_destroy(&tdoc);
    return rc;
}
