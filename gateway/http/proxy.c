/* proxy.c - llama.cpp's /tokenize, /detokenize and /apply-template, and
 * GET/POST /sampler: one message to the coordinator, which forwards it to
 * tokenizer-svc or the sampler, and one reply. */
#include "gw.h"

#include "chat-request.h"

#include "error.h"
#include "gguf.h"

#include <stdlib.h>
#include <string.h>

typedef struct proxy_call {
    lp_gw_call_t base;
    lp_gw_op_t op;
    lp_gw_conn_t *conn;
    lp_gw_t *gw;
    int kind;
    bool with_pieces;
} proxy_call_t;

enum { P_TOKENIZE, P_DETOKENIZE, P_TEMPLATE, P_SAMPLER };

static void proxy_abort(lp_gw_call_t *base)
{
    proxy_call_t *p = (proxy_call_t *)base;
    lp_gw_link_forget(p->gw, &p->op);
    free(p);
}

static void proxy_reply(lp_gw_op_t *op, const Lmpipe__Msg *m)
{
    proxy_call_t *p = op->arg;
    lp_gw_conn_t *conn = p->conn;
    lp_gw_link_forget(p->gw, &p->op);
    int kind = p->kind;
    bool with_pieces = p->with_pieces;
    lp_gw_conn_set_call(conn, NULL);
    free(p);
    if (m->body_case == LMPIPE__MSG__BODY_ERROR) {
        int status = lp_gw_status_of(m->error->code, m->error->message);
        lp_gw_error(conn, status, status == 400 ? "invalid_request_error" : "server_error", NULL, NULL, "%s",
                    m->error->message);
        return;
    }
    lp_sb_t b = {0};
    int status = 200;
    if (kind == P_TOKENIZE && m->body_case == LMPIPE__MSG__BODY_TOKENIZE_REPLY) {
        const Lmpipe__TokenizeReply *t = m->tokenize_reply;
        lp_sb_puts(&b, "{\"tokens\":[");
        for (size_t i = 0; i < t->n_ids; i++) {
            if (i) lp_sb_puts(&b, ",");
            if (!with_pieces) {
                lp_sb_printf(&b, "%d", t->ids[i]);
                continue;
            }
            lp_gw_t *gw = lp_gw_conn_gw(conn);
            int32_t id = t->ids[i];
            lp_sb_printf(&b, "{\"id\":%d,\"piece\":", id);
            if (gw->vocab && id >= 0 && (uint32_t)id < gw->vocab_n) {
                const char *s = gw->vocab[id];
                size_t n = gw->vocab_len[id];
                if (lp_utf8_valid(s, n)) {
                    lp_sb_json_str(&b, s, n);
                } else { /* a byte token: its bytes, as llama-server */
                    lp_sb_puts(&b, "[");
                    for (size_t k = 0; k < n; k++) lp_sb_printf(&b, "%s%u", k ? "," : "", (unsigned char)s[k]);
                    lp_sb_puts(&b, "]");
                }
            } else
                lp_sb_puts(&b, "\"\"");
            lp_sb_puts(&b, "}");
        }
        lp_sb_puts(&b, "]}\n");
    } else if (kind == P_DETOKENIZE && m->body_case == LMPIPE__MSG__BODY_DETOKENIZE_REPLY) {
        const Lmpipe__DetokenizeReply *d = m->detokenize_reply;
        lp_sb_t text = {0};
        lp_sb_putn(&text, "", 0);
        for (size_t i = 0; i < d->n_pieces; i++) lp_sb_putn(&text, d->pieces[i].data, d->pieces[i].len);
        lp_sb_puts(&b, "{\"content\":");
        lp_sb_json_str(&b, text.p, text.len);
        lp_sb_puts(&b, "}\n");
        lp_sb_free(&text);
    } else if (kind == P_TEMPLATE && m->body_case == LMPIPE__MSG__BODY_CHAT_TEMPLATE_REPLY) {
        const Lmpipe__ChatTemplateReply *t = m->chat_template_reply;
        lp_sb_puts(&b, "{\"prompt\":");
        lp_sb_json_str(&b, (const char *)t->text.data, t->text.len);
        lp_sb_puts(&b, "}\n");
    } else if (kind == P_SAMPLER && m->body_case == LMPIPE__MSG__BODY_SAMPLER_CONTROL_REPLY) {
        const Lmpipe__SamplerControlReply *s = m->sampler_control_reply;
        /* The store's own reply, as `lmpipe sampler` prints it. */
        lp_sb_puts(&b, s->json && s->json[0] ? s->json : (s->ok ? "{\"ok\":true}" : "{\"ok\":false}"));
        lp_sb_puts(&b, "\n");
        if (!s->ok) status = 400;
    } else {
        lp_gw_error(conn, 500, "server_error", NULL, NULL, "the coordinator answered with '%s'",
                    lp_msg_body_name(m->body_case));
        lp_sb_free(&b);
        return;
    }
    if (b.oom) lp_gw_error(conn, 500, "server_error", NULL, NULL, "out of memory");
    else lp_gw_respond(conn, status, "application/json", b.p, b.len, NULL);
    lp_sb_free(&b);
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
    char *chat_json = NULL;
    int32_t *ids = NULL;
    char *ctl = NULL;
    const lp_json_t *v;
    proxy_call_t *p = calloc(1, sizeof(*p));
    if (!p) BAD(NULL, "out of memory");
    p->base.abort = proxy_abort;
    p->conn = conn;
    p->gw = gw;
    p->op.arg = p;
    p->op.on_msg = proxy_reply;
    if (!strcmp(what, "tokenize")) {
        p->kind = P_TOKENIZE;
        v = lp_json_get(root, "content");
        if (!v || v->type != LP_JSON_STRING) BAD("content", "content: must be a string");
        tq.text.data = (uint8_t *)v->u.str;
        tq.text.len = v->n;
        bool b = false;
        const lp_json_t *f;
        if ((f = lp_json_get(root, "add_special"))) {
            if (f->type != LP_JSON_BOOL) BAD("add_special", "add_special: must be true or false");
            b = f->u.b;
        }
        tq.add_special = b;
        tq.parse_special = true; /* llama-server's default */
        if ((f = lp_json_get(root, "parse_special"))) {
            if (f->type != LP_JSON_BOOL) BAD("parse_special", "parse_special: must be true or false");
            tq.parse_special = f->u.b;
        }
        if ((f = lp_json_get(root, "with_pieces"))) {
            if (f->type != LP_JSON_BOOL) BAD("with_pieces", "with_pieces: must be true or false");
            p->with_pieces = f->u.b;
        }
        m.body_case = LMPIPE__MSG__BODY_TOKENIZE;
        m.tokenize = &tq;
    } else if (!strcmp(what, "detokenize")) {
        p->kind = P_DETOKENIZE;
        v = lp_json_get(root, "tokens");
        if (!v || v->type != LP_JSON_ARRAY) BAD("tokens", "tokens: must be a list of token ids");
        if (!(ids = malloc((v->n ? v->n : 1) * sizeof(int32_t)))) BAD(NULL, "out of memory");
        for (size_t i = 0; i < v->n; i++) {
            int64_t x;
            if (lp_json_int(&v->u.items[i], 0, INT32_MAX, &x)) BAD("tokens", "tokens[%zu]: not a token id", i);
            ids[i] = (int32_t)x;
        }
        dq.ids = ids;
        dq.n_ids = v->n;
        dq.special = true; /* llama-server renders <s>, </s>, <unk> too */
        m.body_case = LMPIPE__MSG__BODY_DETOKENIZE;
        m.detokenize = &dq;
    } else if (!strcmp(what, "apply-template")) {
        p->kind = P_TEMPLATE;
        char why[512];
        const char *param;
        if (lp_chat_request_json(root, &chat_json, NULL, &param, why, sizeof(why))) BAD(param, "%s", why);
        cq.chat_json = chat_json;
        if ((v = lp_json_get(root, "chat_template")) && v->type != LP_JSON_NULL) {
            if (v->type != LP_JSON_STRING) BAD("chat_template", "chat_template: must be a string");
            cq.template_ = (char *)v->u.str;
        }
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
    if (lp_gw_link_send(gw, &m, &p->op) != 0) {
        lp_gw_error(conn, 503, "server_error", NULL, NULL, "cannot send to the coordinator: %s", lp_error_msg());
        goto out;
    }
    lp_gw_conn_set_call(conn, &p->base);
    p = NULL;
out:
    free(p);
    free(ids);
    free(chat_json);
    free(ctl);
}
