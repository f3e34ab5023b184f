/* proxy.c - llama.cpp's /tokenize, /detokenize and /apply-template, and
 * GET/POST /sampler: one message to the coordinator, which forwards it to
 * tokenizer-svc or the sampler, and one reply. */
#include "gw.h"

#include "error.h"
#include "gguf.h"
#include "request-schema.h"

#include <stdlib.h>
#include <string.h>

typedef struct proxy_call {
    lp_gw_call_t base;
    lp_link_op_t op;
    lp_gw_conn_t *conn;
    lp_gw_t *gw;
    int kind;
    bool with_pieces;
} proxy_call_t;

enum { P_TOKENIZE, P_DETOKENIZE, P_TEMPLATE, P_SAMPLER };

static void proxy_abort(lp_gw_call_t *base)
{
    proxy_call_t *p = (proxy_call_t *)base;
    lp_link_forget(&p->gw->link, &p->op);
    free(p);
}

static void proxy_reply(lp_link_op_t *op, const Lmpipe__Msg *m)
{
    proxy_call_t *p = op->arg;
    lp_gw_conn_t *conn = p->conn;
    lp_link_forget(&p->gw->link, &p->op);
    int kind = p->kind;
    bool with_pieces = p->with_pieces;
    lp_gw_conn_set_call(conn, NULL);
    free(p);
    if (m->body_case == LMPIPE__MSG__BODY_ERROR) {
        lp_gw_error_msg(conn, m->error);
        return;
    }
    lp_json_buf_t b = {0};
    int status = 200;
    if (kind == P_TOKENIZE && m->body_case == LMPIPE__MSG__BODY_TOKENIZE_REPLY) {
        const Lmpipe__TokenizeReply *t = m->tokenize_reply;
        lp_json_buf_puts(&b, "{\"tokens\":[");
        for (size_t i = 0; i < t->n_ids; i++) {
            if (i) lp_json_buf_puts(&b, ",");
            if (!with_pieces) {
                lp_json_buf_printf(&b, "%d", t->ids[i]);
                continue;
            }
            lp_gw_t *gw = lp_gw_conn_gw(conn);
            int32_t id = t->ids[i];
            lp_json_buf_printf(&b, "{\"id\":%d,\"piece\":", id);
            if (gw->link.vocab && id >= 0 && (uint32_t)id < gw->link.vocab_n) {
                const char *s = gw->link.vocab[id];
                size_t n = gw->link.vocab_len[id];
                if (lp_utf8_valid(s, n)) {
                    lp_json_buf_str(&b, s, n);
                } else { /* a byte token: its bytes, as llama-server */
                    lp_json_buf_puts(&b, "[");
                    for (size_t k = 0; k < n; k++) lp_json_buf_printf(&b, "%s%u", k ? "," : "", (unsigned char)s[k]);
                    lp_json_buf_puts(&b, "]");
                }
            } else
                lp_json_buf_puts(&b, "\"\"");
            lp_json_buf_puts(&b, "}");
        }
        lp_json_buf_puts(&b, "]}\n");
    } else if (kind == P_DETOKENIZE && m->body_case == LMPIPE__MSG__BODY_DETOKENIZE_REPLY) {
        const Lmpipe__DetokenizeReply *d = m->detokenize_reply;
        lp_json_buf_t text = {0};
        lp_json_buf_put(&text, "", 0);
        for (size_t i = 0; i < d->n_pieces; i++) lp_json_buf_put(&text, (const char *)d->pieces[i].data, d->pieces[i].len);
        lp_json_buf_puts(&b, "{\"content\":");
        lp_json_buf_str(&b, text.p, text.n);
        lp_json_buf_puts(&b, "}\n");
        lp_json_buf_free(&text);
    } else if (kind == P_TEMPLATE && m->body_case == LMPIPE__MSG__BODY_CHAT_TEMPLATE_REPLY) {
        const Lmpipe__ChatTemplateReply *t = m->chat_template_reply;
        lp_json_buf_puts(&b, "{\"prompt\":");
        lp_json_buf_str(&b, (const char *)t->text.data, t->text.len);
        lp_json_buf_puts(&b, "}\n");
    } else if (kind == P_SAMPLER && m->body_case == LMPIPE__MSG__BODY_SAMPLER_CONTROL_REPLY) {
        const Lmpipe__SamplerControlReply *s = m->sampler_control_reply;
        /* The store's own reply, as `lmpipe sampler` prints it. */
        lp_json_buf_puts(&b, s->json && s->json[0] ? s->json : (s->ok ? "{\"ok\":true}" : "{\"ok\":false}"));
        lp_json_buf_puts(&b, "\n");
        if (!s->ok) status = 400;
    } else {
        lp_gw_error(conn, 500, "server_error", NULL, NULL, "the coordinator answered with '%s'",
                    lp_msg_body_name(m->body_case));
        lp_json_buf_free(&b);
        return;
    }
    if (b.oom) lp_gw_error(conn, 500, "server_error", NULL, NULL, "out of memory");
    else lp_gw_respond(conn, status, "application/json", b.p, b.n, NULL);
    lp_json_buf_free(&b);
}

#define BAD(param, ...)                                                                \
    do {                                                                               \
        lp_gw_error(conn, 400, "invalid_request_error", param, NULL, __VA_ARGS__);     \
        goto out;                                                                      \
    } while (0)

void lp_gw_proxy(lp_gw_conn_t *conn, const lp_gw_req_t *r, const lp_json_t *root, const char *what)
{
    lp_gw_t *gw = lp_gw_conn_gw(conn);
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    Lmpipe__TokenizeRequest tq = LMPIPE__TOKENIZE_REQUEST__INIT;
    Lmpipe__DetokenizeRequest dq = LMPIPE__DETOKENIZE_REQUEST__INIT;
    Lmpipe__ChatTemplateRequest cq = LMPIPE__CHAT_TEMPLATE_REQUEST__INIT;
    Lmpipe__SamplerControl sc = LMPIPE__SAMPLER_CONTROL__INIT;
    lp_request_t rq;
    bool read = false;
    char *ctl = NULL;
    const lp_json_t *v;
    proxy_call_t *p = calloc(1, sizeof(*p));
    if (!p) BAD(NULL, "out of memory");
    p->base.abort = proxy_abort;
    p->conn = conn;
    p->gw = gw;
    p->op.arg = p;
    p->op.on_msg = proxy_reply;
    enum lp_rs_endpoint ep = !strcmp(what, "tokenize") ? LP_RS_TOKENIZE
                             : !strcmp(what, "detokenize") ? LP_RS_DETOKENIZE
                             : !strcmp(what, "apply-template") ? LP_RS_APPLY_TEMPLATE
                                                               : LP_RS_N_ENDPOINTS;
    if (ep != LP_RS_N_ENDPOINTS) { /* llama.cpp's endpoints: the request schema's */
        read = true;
        if (lp_request_read(root, ep, LP_RS_HTTP, &rq) != 0) {
            gw->n_bad_requests++;
            BAD(rq.param[0] ? rq.param : NULL, "%s", lp_error_msg());
        }
    }
    if (ep == LP_RS_TOKENIZE) {
        p->kind = P_TOKENIZE;
        tq.text.data = (uint8_t *)rq.content;
        tq.text.len = rq.content_len;
        tq.add_special = rq.add_special;
        tq.parse_special = rq.parse_special;
        p->with_pieces = rq.with_pieces;
        m.body_case = LMPIPE__MSG__BODY_TOKENIZE;
        m.tokenize = &tq;
    } else if (ep == LP_RS_DETOKENIZE) {
        p->kind = P_DETOKENIZE;
        dq.ids = rq.tokens;
        dq.n_ids = rq.n_tokens;
        dq.special = true; /* llama-server renders <s>, </s>, <unk> too */
        m.body_case = LMPIPE__MSG__BODY_DETOKENIZE;
        m.detokenize = &dq;
    } else if (ep == LP_RS_APPLY_TEMPLATE) {
        p->kind = P_TEMPLATE;
        cq.chat_json = rq.chat_json;
        if (rq.chat_template) cq.template_ = (char *)rq.chat_template;
        cq.add_assistant = true;
        m.body_case = LMPIPE__MSG__BODY_CHAT_TEMPLATE;
        m.chat_template = &cq;
    } else {
        p->kind = P_SAMPLER;
        if (root) {
            v = lp_json_get(root, "op");
            if (!v || v->type != LP_JSON_STRING)
                BAD("op", "op: must be one of \"set\", \"load\", \"unload\", \"rollback\", \"get\"");
            ctl = strndup(r->body, r->body_len);
        } else
            ctl = strdup("{\"op\":\"get\"}");
        if (!ctl) BAD(NULL, "out of memory");
        sc.json = ctl;
        m.body_case = LMPIPE__MSG__BODY_SAMPLER_CONTROL;
        m.sampler_control = &sc;
    }
    if (lp_link_send(&gw->link, &m, &p->op) != 0) {
        lp_gw_error(conn, 503, "server_error", NULL, NULL, "cannot send to the coordinator: %s", lp_error_msg());
        goto out;
    }
    lp_gw_conn_set_call(conn, &p->base);
    p = NULL;
out:
    free(p);
    if (read) lp_request_clear(&rq);
    free(ctl);
}
