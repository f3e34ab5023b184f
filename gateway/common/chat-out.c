/* chat-out.c - a chat choice's output through lib/chat's parser, or as it
 * comes (see chat-out.h). */
#include "chat-out.h"

#include "error.h"

#include <stdlib.h>
#include <string.h>

enum mode { M_NEW, M_PENDING, M_PARSE, M_PASS };

struct lp_chat_out {
    bool parse_tools;
    lp_chat_reasoning_format_t reasoning;
    lp_json_doc_t *tools;      /* a copy: the request's document is gone by the first event */
    enum mode mode;
    lp_chat_format_t format;
    const char *open;          /* M_PENDING: the reasoning opening the output may start with */
    char tail[64];
    size_t tail_len;
    lp_chat_parser_t *p;
    lp_json_buf_t hold;        /* M_PENDING: the output so far */
    lp_json_buf_t all;         /* M_PASS: the whole content */
    lp_json_buf_t d;           /* M_PASS: the last call's content delta */
    bool has_d;
};

int lp_chat_out_new(const lp_chat_out_opts_t *o, lp_chat_out_t **out)
{
    *out = NULL;
    lp_chat_out_t *c = calloc(1, sizeof(*c));
    if (!c) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    c->parse_tools = o->parse_tools && o->tools;
    c->reasoning = o->reasoning;
    if (c->parse_tools) {
        lp_json_buf_t b = {0};
        lp_json_buf_value(&b, o->tools);
        int rc = b.oom ? LP_ERR(ENOMEM) : lp_json_parse(b.p, b.n, &c->tools);
        free(b.p);
        if (rc) {
            free(c);
            return rc == LP_ERR(ENOMEM) ? lp_error_set(rc, "out of memory") : rc;
        }
    }
    *out = c;
    return 0;
}

void lp_chat_out_destroy(lp_chat_out_t **self_p)
{
    if (!self_p || !*self_p) return;
    lp_chat_out_t *c = *self_p;
    lp_chat_parser_destroy(&c->p);
    lp_json_doc_destroy(&c->tools);
    lp_json_buf_free(&c->hold);
    lp_json_buf_free(&c->all);
    lp_json_buf_free(&c->d);
    free(c);
    *self_p = NULL;
}

static int parse_mode(lp_chat_out_t *c)
{
    lp_chat_parser_opts_t po = {
        .format = c->format,
        .reasoning = c->reasoning,
        .prompt = c->tail,
        .prompt_len = c->tail_len,
        .tools = c->tools ? lp_json_root(c->tools) : NULL,
    };
    c->mode = M_PARSE;
    return lp_chat_parser_new(&po, &c->p);
}

int lp_chat_out_start(lp_chat_out_t *c, const Lmpipe__ChatOutput *co)
{
    if (c->mode != M_NEW) return 0;
    c->mode = M_PASS;
    lp_chat_format_t f = LP_CHAT_FORMAT_NONE;
    if (!co || !co->format || lp_chat_format_by_name(co->format, &f)) {
        lp_error_clear();
        return 0; /* nothing known about the output: content as it comes */
    }
    c->tail_len = co->prompt_tail.len < sizeof(c->tail) ? co->prompt_tail.len : sizeof(c->tail);
    if (c->tail_len) memcpy(c->tail, co->prompt_tail.data + co->prompt_tail.len - c->tail_len, c->tail_len);
    const lp_chat_format_info_t *fi = lp_chat_format_info(f);
    /* Without tools, only the reasoning of the format is read: a <think>
     * format reads as plain content-and-reasoning. */
    if (!c->parse_tools && f != LP_CHAT_FORMAT_GPT_OSS && fi->reasoning_open && !strcmp(fi->reasoning_open, "<think>"))
        f = LP_CHAT_FORMAT_NONE;
    c->format = f;
    fi = lp_chat_format_info(f);
    if (!c->parse_tools && c->reasoning == LP_CHAT_REASONING_NONE) return 0;
    if (c->parse_tools || f == LP_CHAT_FORMAT_GPT_OSS || lp_chat_prompt_opens_reasoning(f, c->tail, c->tail_len))
        return parse_mode(c);
    if (!fi->reasoning_open || !fi->reasoning_open[0]) return 0;
    c->open = fi->reasoning_open;
    c->mode = M_PENDING;
    return 0;
}

bool lp_chat_out_started(const lp_chat_out_t *c) { return c->mode != M_NEW; }

static void pass(lp_chat_out_t *c, const char *text, size_t len)
{
    lp_json_buf_put(&c->all, text, len);
    lp_json_buf_put(&c->d, text, len);
    c->has_d = true;
}

int lp_chat_out_feed(lp_chat_out_t *c, const char *text, size_t len)
{
    c->d.n = 0;
    c->has_d = false;
    if (c->mode == M_NEW) lp_chat_out_start(c, NULL);
    switch (c->mode) {
    case M_PARSE: return lp_chat_parser_feed(c->p, text, len);
    case M_PENDING: {
        lp_json_buf_put(&c->hold, text, len);
        if (c->hold.oom) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
        size_t ws = 0;
        while (ws < c->hold.n && strchr(" \t\r\n", c->hold.p[ws])) ws++;
        size_t rest = c->hold.n - ws, on = strlen(c->open), cmp = rest < on ? rest : on;
        if (memcmp(c->hold.p + ws, c->open, cmp)) {
            c->mode = M_PASS;
            pass(c, c->hold.p, c->hold.n);
        } else if (rest >= on) {
            int rc = parse_mode(c);
            if (!rc) rc = lp_chat_parser_feed(c->p, c->hold.p, c->hold.n);
            return rc;
        }
        break;
    }
    default: pass(c, text, len); break;
    }
    return c->all.oom || c->d.oom ? lp_error_set(LP_ERR(ENOMEM), "out of memory") : 0;
}

int lp_chat_out_finish(lp_chat_out_t *c)
{
    c->d.n = 0;
    c->has_d = false;
    if (c->mode == M_NEW) lp_chat_out_start(c, NULL);
    if (c->mode == M_PARSE) return lp_chat_parser_finish(c->p);
    if (c->mode == M_PENDING) {
        c->mode = M_PASS;
        if (c->hold.n) pass(c, c->hold.p, c->hold.n);
    }
    return c->all.oom || c->d.oom ? lp_error_set(LP_ERR(ENOMEM), "out of memory") : 0;
}

size_t lp_chat_out_n_deltas(const lp_chat_out_t *c)
{
    if (c->mode == M_PARSE) return lp_chat_parser_n_deltas(c->p);
    return c->has_d && c->d.n ? 1 : 0;
}

void lp_chat_out_delta(const lp_chat_out_t *c, size_t i, lp_chat_delta_t *d)
{
    if (c->mode == M_PARSE) {
        lp_chat_parser_delta(c->p, i, d);
        return;
    }
    memset(d, 0, sizeof(*d));
    d->kind = LP_CHAT_DELTA_CONTENT;
    d->text = c->d.p ? c->d.p : "";
    d->len = c->d.n;
}

void lp_chat_out_msg(const lp_chat_out_t *c, lp_chat_msg_t *m)
{
    if (c->mode == M_PARSE) {
        lp_chat_parser_msg(c->p, m);
        return;
    }
    memset(m, 0, sizeof(*m));
    m->content = c->all.p ? c->all.p : "";
    m->content_len = c->all.n;
    m->reasoning = "";
}

bool lp_chat_out_has_calls(const lp_chat_out_t *c)
{
    if (c->mode != M_PARSE) return false;
    lp_chat_msg_t m;
    lp_chat_parser_msg(c->p, &m);
    return m.n_tool_calls > 0;
}

void lp_chat_out_write_msg(const lp_chat_out_t *c, lp_json_buf_t *b)
{
    lp_chat_msg_t m;
    lp_chat_out_msg(c, &m);
    if (c->mode == M_PARSE) {
        lp_chat_msg_write_json(&m, b);
        return;
    }
    lp_json_buf_puts(b, "{\"role\":\"assistant\",\"content\":");
    lp_json_buf_str(b, m.content, m.content_len);
    lp_json_buf_puts(b, "}");
}

void lp_chat_out_delta_append(const lp_chat_out_t *c, lp_json_buf_t *b)
{
    size_t n = lp_chat_out_n_deltas(c);
    for (size_t i = 0; i < n; i++) {
        lp_chat_delta_t d;
        lp_chat_out_delta(c, i, &d);
        if (b->n) lp_json_buf_puts(b, ",");
        lp_chat_delta_write_json(&d, b);
    }
}
