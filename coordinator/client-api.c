/* client-api.c - the coordinator's client API: the hello, Generate (prompt
 * text or ids, llama.cpp /completion parameters) and Cancel. */
#include "coord-internal.h"

#include "error.h"
#include "hello.h"
#include "json.h"
#include "sysinfo.h"

#include <stdlib.h>
#include <string.h>

/* ---- the client API ------------------------------------------------------------------ */

int lp__coord_client_hello(void *ctx, const Lmpipe__Hello *peer, bool controller, Lmpipe__Hello *mine)
{
    lp_coord_t *c = ctx;
    if (c->failed) return lp_error_set(LP_ERR(EPROTO), "pipeline failed: %s", c->fail_msg);
    if (!c->ready) {
        const char *waiting = !c->b[B_TOK].hello ? "tokenizer-svc" : !c->b[B_ENG].hello ? "engine-svc"
                                                                                        : "sampler-svc";
        return lp_error_set(LP_ERR(EAGAIN), "pipeline not ready: waiting for %s", waiting);
    }
    const Lmpipe__Hello *e = c->b[B_ENG].hello->hello;
    mine->n_vocab = e->n_vocab;
    mine->n_tokens = e->n_tokens;
    mine->vocab_hash = e->vocab_hash;
    mine->model_name = e->model_name;
    mine->bos_id = c->bos_id;
    mine->eos_id = c->eos_id;
    mine->max_seqs = (uint32_t)c->max_seqs;
    mine->max_batch_tokens = (uint32_t)c->max_batch_tokens;
    mine->n_ctx = (uint32_t)c->n_ctx;
    mine->no_shm = !c->use_shm;
    return lp_hello_check_vocab(mine, peer);
}

/* Fill prompt, n_predict, stop and ignore_eos from params_json where the
 * request's own fields leave them unset (llama.cpp /completion bodies). */
static int parse_json_fields(req_t *r, const Lmpipe__GenerateRequest *g, char **prompt_text)
{
    *prompt_text = NULL;
    if (!g->params_json || !g->params_json[0]) return 0;
    lp_json_doc_t *doc;
    int rc = lp_json_parse(g->params_json, strlen(g->params_json), &doc);
    if (rc) {
        lp_error_prefix("params_json: ");
        return rc;
    }
    const lp_json_t *root = lp_json_root(doc), *v;
    if (root->type != LP_JSON_OBJECT) {
        lp_json_doc_destroy(&doc);
        return lp_error_set(LP_ERR(EINVAL), "params_json: not a JSON object");
    }
    if (g->n_predict == 0 && (v = lp_json_get(root, "n_predict"))) {
        int64_t x;
        if ((rc = lp_json_int(v, -1, 1 << 30, &x)) != 0) {
            lp_json_doc_destroy(&doc);
            return lp_error_set(LP_ERR(EINVAL), "n_predict: must be an integer >= -1");
        }
        r->n_predict = (int32_t)x;
    }
    if ((v = lp_json_get(root, "ignore_eos"))) {
        if (v->type != LP_JSON_BOOL) {
            lp_json_doc_destroy(&doc);
            return lp_error_set(LP_ERR(EINVAL), "ignore_eos: must be true or false");
        }
        r->ignore_eos = r->ignore_eos || v->u.b;
    }
    if (g->n_stop == 0 && (v = lp_json_get(root, "stop"))) {
        if (v->type != LP_JSON_ARRAY) {
            lp_json_doc_destroy(&doc);
            return lp_error_set(LP_ERR(EINVAL), "stop: must be an array of strings");
        }
        r->stops = calloc(v->n ? v->n : 1, sizeof(char *));
        r->stop_lens = calloc(v->n ? v->n : 1, sizeof(size_t));
        for (size_t i = 0; r->stops && r->stop_lens && i < v->n; i++) {
            const lp_json_t *s = &v->u.items[i];
            if (s->type != LP_JSON_STRING) {
                lp_json_doc_destroy(&doc);
                return lp_error_set(LP_ERR(EINVAL), "stop[%zu]: must be a string", i);
            }
            r->stops[i] = malloc(s->n ? s->n : 1);
            if (!r->stops[i]) break;
            memcpy(r->stops[i], s->u.str, s->n);
            r->stop_lens[i] = s->n;
            r->n_stops++;
        }
    }
    if (!g->prompt.len && !g->n_prompt_ids && (v = lp_json_get(root, "prompt"))) {
        if (v->type != LP_JSON_STRING) {
            lp_json_doc_destroy(&doc);
            return lp_error_set(LP_ERR(EINVAL), "prompt: only a string prompt is supported in "
                                "params_json (send token ids in prompt_ids)");
        }
        *prompt_text = strndup(v->u.str, v->n);
    }
    lp_json_doc_destroy(&doc);
    return 0;
}

static int on_generate(lp_coord_t *c, lp_service_t *svc, const lp_frame_t *f)
{
    const Lmpipe__GenerateRequest *g = f->msg->generate;
    if (lp__req_find_client(c, f->peer, f->peer_len, f->msg->id))
        return lp_error_set(LP_ERR(EEXIST), "generate: request id %llu is already running",
                            (unsigned long long)f->msg->id);
    size_t max_req = c->p.max_requests > 0 ? (size_t)c->p.max_requests : 1024;
    if (c->n_reqs >= max_req)
        return lp_error_set(LP_ERR(EBUSY), "generate: %zu requests are queued or running", c->n_reqs);
    req_t *r = calloc(1, sizeof(*r));
    if (!r) return LP_ERR(ENOMEM);
    r->key = ++c->next_key;
    memcpy(r->peer, f->peer, f->peer_len);
    r->peer_len = f->peer_len;
    r->client_id = f->msg->id;
    r->seq = -1;
    r->stop_idx = -1;
    r->n_predict = g->n_predict != 0 ? g->n_predict : -1;
    r->ignore_eos = g->ignore_eos;
    r->t_start = lp_now_ns();
    char *prompt_text = NULL;
    int rc = parse_json_fields(r, g, &prompt_text);
    if (!rc && g->n_stop) {
        r->stops = calloc(g->n_stop, sizeof(char *));
        r->stop_lens = calloc(g->n_stop, sizeof(size_t));
        if (!r->stops || !r->stop_lens) rc = LP_ERR(ENOMEM);
        for (size_t i = 0; !rc && i < g->n_stop; i++) {
            r->stops[i] = malloc(g->stop[i].len ? g->stop[i].len : 1);
            if (!r->stops[i]) {
                rc = LP_ERR(ENOMEM);
                break;
            }
            if (g->stop[i].len) memcpy(r->stops[i], g->stop[i].data, g->stop[i].len);
            r->stop_lens[i] = g->stop[i].len;
            r->n_stops++;
        }
    }
    if (!rc && g->n_predict < -1) rc = lp_error_set(LP_ERR(EINVAL), "n_predict: must be >= -1, got %d", g->n_predict);
    if (!rc && g->params_json && g->params_json[0]) r->params_json = strdup(g->params_json);
    if (!rc) {
        r->ts = lp_textstream_new((const char *const *)r->stops, r->stop_lens, r->n_stops);
        if (!r->ts) rc = LP_ERR(ENOMEM);
    }
    if (!rc && g->n_prompt_ids) {
        for (size_t i = 0; i < g->n_prompt_ids && !rc; i++)
            if (g->prompt_ids[i] < 0 || g->prompt_ids[i] >= c->n_vocab)
                rc = lp_error_set(LP_ERR(EINVAL), "prompt_ids[%zu] = %d is not in 0..%d", i,
                                  g->prompt_ids[i], c->n_vocab - 1);
        if (!rc && (int64_t)g->n_prompt_ids >= c->n_ctx)
            rc = lp_error_set(LP_ERR(EINVAL), "prompt_ids: %zu tokens; the context holds %d",
                              g->n_prompt_ids, c->n_ctx);
        if (!rc && !(r->prompt = malloc(g->n_prompt_ids * sizeof(int32_t)))) rc = LP_ERR(ENOMEM);
        if (!rc) {
            memcpy(r->prompt, g->prompt_ids, g->n_prompt_ids * sizeof(int32_t));
            r->n_prompt = g->n_prompt_ids;
            r->state = R_WAIT_SLOT;
        }
    }
    if (rc) {
        free(prompt_text);
        lp__req_free(r);
        return rc;
    }
    if (c->n_reqs == c->cap_reqs) {
        size_t cap = c->cap_reqs ? 2 * c->cap_reqs : 64;
        req_t **n = realloc(c->reqs, cap * sizeof(req_t *));
        if (!n) {
            free(prompt_text);
            lp__req_free(r);
            return LP_ERR(ENOMEM);
        }
        c->reqs = n;
        c->cap_reqs = cap;
    }
    c->reqs[c->n_reqs++] = r;
    if (!g->n_prompt_ids) {
        Lmpipe__Msg m = LMPIPE__MSG__INIT;
        Lmpipe__TokenizeRequest t = LMPIPE__TOKENIZE_REQUEST__INIT;
        if (prompt_text) {
            t.text.data = (uint8_t *)prompt_text;
            t.text.len = strlen(prompt_text);
        } else {
            t.text = g->prompt;
        }
        t.add_special = !g->no_bos;
        t.parse_special = false;
        m.body_case = LMPIPE__MSG__BODY_TOKENIZE;
        m.tokenize = &t;
        r->state = R_TOKENIZING;
        if (lp__coord_send(c, B_TOK, OP_TOKENIZE, r->key, &m, NULL, 0))
            lp__coord_finish(c, r, LMPIPE__FINISH_REASON__FINISH_ERROR, "cannot reach tokenizer-svc");
    }
    free(prompt_text);
    (void)svc;
    lp__coord_pump(c);
    return 0;
}

static int on_cancel(lp_coord_t *c, const lp_frame_t *f)
{
    req_t *r = lp__req_find_client(c, f->peer, f->peer_len, f->msg->id);
    if (!r) return lp_error_set(LP_ERR(ENOENT), "cancel: no running request %llu",
                                (unsigned long long)f->msg->id);
    lp__coord_finish(c, r, LMPIPE__FINISH_REASON__FINISH_CANCELLED, NULL);
    lp__coord_pump(c);
    return 0;
}

int lp__coord_client(void *ctx, lp_service_t *svc, const lp_frame_t *f)
{
    lp_coord_t *c = ctx;
    if (f->has_raw) return lp_error_set(LP_ERR(EPROTO), "%s: unexpected raw frame",
                                        lp_msg_body_name(f->msg->body_case));
    if (!c->ready) return lp_error_set(LP_ERR(EAGAIN), "pipeline not ready");
    switch (f->msg->body_case) {
    case LMPIPE__MSG__BODY_GENERATE: return on_generate(c, svc, f);
    case LMPIPE__MSG__BODY_CANCEL: return on_cancel(c, f);
    default:
        return lp_error_set(LP_ERR(EPROTO), "the coordinator does not serve '%s' messages",
                            lp_msg_body_name(f->msg->body_case));
    }
}
