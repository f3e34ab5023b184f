/* serve.c - tokenizer-svc: tokenize and detokenize (see serve.h). */
#include "serve.h"

#include "error.h"
#include "hello.h"
#include "chat.h"
#include "vocab-facts.h"

#include <stdlib.h>
#include <string.h>

#define MAX_TEXT (64u << 20)

struct lp_tokenizer_svc {
    lp_tokenizer_t *tok;
    lp_chat_renderer_t *chat;
    uint32_t n_tokens;
    uint64_t vocab_hash;
    char model_name[256];
    int32_t *eog;
    size_t n_eog;
};

void lp_tokenizer_svc_destroy(lp_tokenizer_svc_t **self_p)
{
    if (!self_p || !*self_p) return;
    lp_tokenizer_svc_t *s = *self_p;
    lp_chat_renderer_destroy(&s->chat);
    free(s->eog);
    lp_tokenizer_destroy(&s->tok);
    free(s);
    *self_p = NULL;
}

int lp_tokenizer_svc_new(const char *model_path, const char *chat_template_file, lp_tokenizer_svc_t **out)
{
    *out = NULL;
    lp_tokenizer_svc_t *s = calloc(1, sizeof(*s));
    if (!s) return LP_ERR(ENOMEM);
    lp_gguf_t *g = NULL;
    int rc = lp_gguf_open(model_path, &g);
    if (!rc) rc = lp_tokenizer_new_from_gguf(g, &s->tok);
    if (!rc) {
        lp_vocab_facts(g, &s->n_tokens, &s->vocab_hash);
        const char *base = strrchr(model_path, '/');
        snprintf(s->model_name, sizeof(s->model_name), "%s", base ? base + 1 : model_path);
        int32_t n = lp_tokenizer_n_tokens(s->tok);
        s->eog = calloc((size_t)n, sizeof(int32_t));
        if (!s->eog) rc = LP_ERR(ENOMEM);
        for (int32_t i = 0; !rc && i < n; i++)
            if (lp_tokenizer_is_eog(s->tok, i)) s->eog[s->n_eog++] = i;
    }
    if (!rc) rc = lp_chat_renderer_new(s->tok, chat_template_file, &s->chat);
    lp_gguf_destroy(&g);
    if (rc) {
        lp_tokenizer_svc_destroy(&s);
        return rc;
    }
    *out = s;
    return 0;
}

static int on_hello(void *ctx, const Lmpipe__Hello *peer, bool controller, Lmpipe__Hello *mine)
{
    lp_tokenizer_svc_t *s = ctx;
    (void)controller;
    mine->n_tokens = s->n_tokens;
    mine->vocab_hash = s->vocab_hash;
    mine->model_name = s->model_name;
    mine->bos_id = lp_tokenizer_adds_bos(s->tok) ? lp_tokenizer_bos(s->tok) : -1;
    mine->eos_id = lp_tokenizer_eos(s->tok);
    mine->n_eog_ids = s->n_eog;
    mine->eog_ids = s->eog;
    return lp_hello_check_vocab(mine, peer);
}

static int do_tokenize(lp_tokenizer_svc_t *s, lp_service_t *svc, const lp_frame_t *req)
{
    const Lmpipe__TokenizeRequest *t = req->msg->tokenize;
    if (t->text.len > MAX_TEXT)
        return lp_error_set(LP_ERR(E2BIG), "tokenize: %zu bytes of text (at most %u)", t->text.len,
                            MAX_TEXT);
    int32_t *ids;
    size_t n;
    int rc = lp_tokenize_alloc(s->tok, (const char *)t->text.data, t->text.len, t->add_special,
                               t->parse_special, &ids, &n);
    if (rc) return rc;
    Lmpipe__TokenizeReply rep = LMPIPE__TOKENIZE_REPLY__INIT;
    rep.n_ids = n;
    rep.ids = ids;
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.body_case = LMPIPE__MSG__BODY_TOKENIZE_REPLY;
    m.tokenize_reply = &rep;
    rc = lp_service_reply(svc, req, &m, NULL, 0);
    free(ids);
    return rc;
}

static int do_detokenize(lp_tokenizer_svc_t *s, lp_service_t *svc, const lp_frame_t *req)
{
    const Lmpipe__DetokenizeRequest *d = req->msg->detokenize;
    int32_t n_tok = lp_tokenizer_n_tokens(s->tok);
    for (size_t i = 0; i < d->n_ids; i++)
        if (d->ids[i] < 0 || d->ids[i] >= n_tok)
            return lp_error_set(LP_ERR(EINVAL), "detokenize: ids[%zu] = %d is not in 0..%d", i,
                                d->ids[i], n_tok - 1);
    if (d->n_ids > (1u << 20)) return lp_error_set(LP_ERR(E2BIG), "detokenize: %zu ids", d->n_ids);
    /* The pieces go into one buffer, so that the reply owns them. */
    ProtobufCBinaryData *pieces = calloc(d->n_ids ? d->n_ids : 1, sizeof(*pieces));
    size_t *offs = calloc(d->n_ids + 1, sizeof(size_t));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = pieces && offs ? 0 : LP_ERR(ENOMEM);
    for (size_t i = 0; !rc && i < d->n_ids; i++) {
        const char *p;
        size_t n;
        rc = lp_token_piece(s->tok, d->ids[i], d->special, &p, &n);
        if (rc) break;
        if (len + n > cap) {
            size_t nc = cap ? 2 * cap : 256;
            while (nc < len + n) nc *= 2;
            char *b = realloc(buf, nc);
            if (!b) {
                rc = LP_ERR(ENOMEM);
                break;
            }
            buf = b;
            cap = nc;
        }
        if (n) memcpy(buf + len, p, n);
        offs[i] = len;
        len += n;
        offs[i + 1] = len;
    }
    Lmpipe__DetokenizeReply rep = LMPIPE__DETOKENIZE_REPLY__INIT;
    if (!rc) {
        for (size_t i = 0; i < d->n_ids; i++) {
            pieces[i].data = (uint8_t *)buf + offs[i];
            pieces[i].len = offs[i + 1] - offs[i];
        }
        rep.n_pieces = d->n_ids;
        rep.pieces = pieces;
    }
    if (!rc) {
        Lmpipe__Msg m = LMPIPE__MSG__INIT;
        m.body_case = LMPIPE__MSG__BODY_DETOKENIZE_REPLY;
        m.detokenize_reply = &rep;
        rc = lp_service_reply(svc, req, &m, NULL, 0);
    }
    free(pieces);
    free(offs);
    free(buf);
    return rc;
}

#define MAX_CHAT_MESSAGES 4096

static int do_chat_template(lp_tokenizer_svc_t *s, lp_service_t *svc, const lp_frame_t *req)
{
    const Lmpipe__ChatTemplateRequest *c = req->msg->chat_template;
    bool json = c->chat_json && c->chat_json[0];
    lp_chat_msg_t *msgs = NULL;
    if (json) {
        if (strlen(c->chat_json) > MAX_TEXT)
            return lp_error_set_kind(LP_ERR(E2BIG), LP_EK_INVALID_REQUEST, "messages",
                                     "chat_template: %zu bytes of conversation (at most %u)",
                                strlen(c->chat_json), MAX_TEXT);
    } else {
        if (c->n_messages == 0 || c->n_messages > MAX_CHAT_MESSAGES)
            return lp_error_set_kind(LP_ERR(EINVAL), LP_EK_INVALID_REQUEST, "messages",
                                     "chat_template: %zu messages (1 to %d allowed)",
                                c->n_messages, MAX_CHAT_MESSAGES);
        size_t total = 0;
        for (size_t i = 0; i < c->n_messages; i++) {
            const Lmpipe__ChatMessage *m = c->messages[i];
            if (!m->role[0])
                return lp_error_set_kind(LP_ERR(EINVAL), LP_EK_INVALID_REQUEST, "messages",
                                         "chat_template: messages[%zu] has no role", i);
            total += strlen(m->content);
        }
        if (total > MAX_TEXT)
            return lp_error_set_kind(LP_ERR(E2BIG), LP_EK_INVALID_REQUEST, "messages",
                                     "chat_template: %zu bytes of content (at most %u)",
                                total, MAX_TEXT);
        msgs = calloc(c->n_messages, sizeof(*msgs));
        if (!msgs) return lp_error_set(LP_ERR(ENOMEM), "chat_template: out of memory");
        for (size_t i = 0; i < c->n_messages; i++) {
            msgs[i].role = c->messages[i]->role;
            msgs[i].content = c->messages[i]->content;
        }
    }
    char *text = NULL;
    size_t len = 0;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    bool has_bos = false;
    int rc = lp_chat_render(s->chat, c->template_, json ? c->chat_json : NULL, json ? strlen(c->chat_json) : 0,
                            msgs, c->n_messages, c->add_assistant, &text, &len, &has_bos);
    /* A template that writes bos_token itself, for a model whose tokenizer
     * adds BOS, loses it from the text: the tokenizer adds the one BOS (as
     * llama.cpp's common_chat_templates_apply does). */
    /* The template (the request's, or the model's when it gave none) could
     * not be applied: the request's fault, with the template's message. */
    if (rc && rc != LP_ERR(ENOMEM)) lp_error_mark(LP_EK_INVALID_REQUEST, "chat_template");
    size_t skip = 0;
    if (!rc && has_bos && lp_tokenizer_adds_bos(s->tok)) {
        const char *p;
        size_t n;
        if (!lp_token_piece(s->tok, lp_tokenizer_bos(s->tok), true, &p, &n) && n <= len) skip = n;
    }
    if (!rc && c->tokenize)
        rc = lp_tokenize_alloc(s->tok, text + skip, len - skip, true, true, &ids, &n_ids);
    if (!rc) {
        Lmpipe__ChatTemplateReply rep = LMPIPE__CHAT_TEMPLATE_REPLY__INIT;
        rep.text.data = (uint8_t *)text + skip;
        rep.text.len = len - skip;
        rep.ids = ids;
        rep.n_ids = n_ids;
        Lmpipe__Msg m = LMPIPE__MSG__INIT;
        m.body_case = LMPIPE__MSG__BODY_CHAT_TEMPLATE_REPLY;
        m.chat_template_reply = &rep;
        rc = lp_service_reply(svc, req, &m, NULL, 0);
    }
    free(ids);
    free(text);
    free(msgs);
    return rc;
}

static int on_request(void *ctx, lp_service_t *svc, const lp_frame_t *req)
{
    lp_tokenizer_svc_t *s = ctx;
    if (req->has_raw) return lp_error_set(LP_ERR(EPROTO), "%s: unexpected raw frame",
                                          lp_msg_body_name(req->msg->body_case));
    switch (req->msg->body_case) {
    case LMPIPE__MSG__BODY_TOKENIZE: return do_tokenize(s, svc, req);
    case LMPIPE__MSG__BODY_DETOKENIZE: return do_detokenize(s, svc, req);
    case LMPIPE__MSG__BODY_CHAT_TEMPLATE: return do_chat_template(s, svc, req);
    default:
        return lp_error_set(LP_ERR(EPROTO), "tokenizer-svc does not serve '%s' messages",
                            lp_msg_body_name(req->msg->body_case));
    }
}

const lp_service_ops_t lp_tokenizer_svc_ops = {
    .name = "tokenizer-svc",
    .role = LMPIPE__ROLE__ROLE_TOKENIZER,
    .hello = on_hello,
    .handle = on_request,
};
