/* client-api.c - the coordinator's client API: the hello, Generate (prompt
 * text, ids or chat messages; typed parameters), Cancel, and
 * the messages passed on to a service (proxy.c). */
#include "coord-internal.h"

#include "error.h"
#include "hello.h"
#include "sampling-params.h"
#include "sampling-wire.h"
#include "sysinfo.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* ---- the client API ------------------------------------------------------------------ */

int lp__coord_client_hello(void *ctx, const Lmpipe__Hello *peer, bool controller, Lmpipe__Hello *mine)
{
    lp_coord_t *c = ctx;
    if (c->failed) return lp_error_set(LP_ERR(EPROTO), "pipeline failed: %s", c->fail_msg);
    int drc = lp__drain_refuse(c);
    if (drc) return drc;
    /* Ready: a tokenizer and at least one group. */
    bool tok = false, eng = false;
    for (size_t i = 0; i < c->n_toks; i++) tok |= c->toks[i].hello != NULL;
    for (size_t i = 0; i < c->n_groups; i++) eng |= c->groups[i].eng.hello != NULL;
    const lp__group_t *g0 = lp__groups_first_ready(c);
    if (!c->ready || !tok || !g0) {
        const char *waiting = !tok ? "tokenizer-svc" : !eng ? "engine-svc" : "sampler-svc";
        return lp_error_set(LP_ERR(EAGAIN), "pipeline not ready: waiting for %s", waiting);
    }
    const Lmpipe__Hello *e = g0->eng.hello->hello;
    uint32_t max_seqs = 0; /* the ready groups' together */
    for (size_t i = 0; i < c->n_groups; i++)
        if (c->groups[i].state == G_READY) max_seqs += (uint32_t)c->groups[i].s.max_seqs;
    mine->n_vocab = e->n_vocab;
    mine->n_tokens = e->n_tokens;
    mine->vocab_hash = e->vocab_hash;
    mine->model_name = e->model_name;
    mine->bos_id = c->bos_id;
    mine->eos_id = c->eos_id;
    mine->max_seqs = max_seqs;
    mine->max_batch_tokens = (uint32_t)c->max_batch_tokens;
    mine->n_ctx = (uint32_t)c->n_ctx;
    mine->no_shm = !g0->s.ring;
    /* Paged KV as the first ready group has it (0: not paged). */
    mine->kv_block = g0->s.paged ? (uint32_t)g0->s.kv_block : 0;
    mine->kv_blocks = g0->s.paged ? (uint32_t)g0->s.kv_blocks : 0;
    mine->kv_swa_window = g0->s.swa ? (uint32_t)g0->s.swa_window : 0;
    mine->kv_blocks_swa = g0->s.swa ? (uint32_t)g0->s.kv_blocks_swa : 0;
    mine->recurrent_layers = e->recurrent_layers;
    return lp_hello_check_vocab(mine, peer);
}

/* The stop strings: the one place they are read. */
static int set_stops(lp__req_t *r, const Lmpipe__GenerateRequest *g)
{
    size_t n = g->n_stop;
    if (n == 0) return 0;
    r->stops = calloc(n, sizeof(char *));
    r->stop_lens = calloc(n, sizeof(size_t));
    if (!r->stops || !r->stop_lens) return LP_ERR(ENOMEM);
    for (size_t i = 0; i < n; i++) {
        size_t len = g->stop[i].len;
        if (!(r->stops[i] = malloc(len ? len : 1))) return LP_ERR(ENOMEM);
        if (len) memcpy(r->stops[i], g->stop[i].data, len);
        r->stop_lens[i] = len;
        r->n_stops++;
    }
    return 0;
}

/* The same bound as tokenizer-svc's, so that a conversation it would refuse
 * is refused here, before anything is queued. */
#define MAX_CHAT_MESSAGES 4096

/* A chat request: typed messages, or the conversation as chat_json (which
 * tokenizer-svc checks as it renders it). */
static bool is_chat(const Lmpipe__GenerateRequest *g)
{
    return g->n_messages || (g->chat_json && g->chat_json[0]);
}

static int check_messages(const Lmpipe__GenerateRequest *g)
{
    if (!is_chat(g)) {
        if (g->chat_template && g->chat_template[0])
            return lp_error_set_kind(LP_ERR(EINVAL), LP_EK_INVALID_REQUEST, "chat_template",
                                     "chat_template: only with messages");
        return 0;
    }
    if (g->prompt.len || g->n_prompt_ids)
        return lp_error_set_kind(LP_ERR(EINVAL), LP_EK_INVALID_REQUEST, "messages", "messages: not together with %s",
                                 g->prompt.len ? "prompt" : "prompt_ids");
    if (g->n_messages && g->chat_json && g->chat_json[0])
        return lp_error_set_kind(LP_ERR(EINVAL), LP_EK_INVALID_REQUEST, "messages",
                                 "messages: give them typed or in chat_json, not both");
    if (g->n_messages > MAX_CHAT_MESSAGES)
        return lp_error_set_kind(LP_ERR(EINVAL), LP_EK_INVALID_REQUEST, "messages",
                                 "messages: %zu messages (at most %d)", g->n_messages, MAX_CHAT_MESSAGES);
    for (size_t i = 0; i < g->n_messages; i++) {
        const Lmpipe__ChatMessage *m = g->messages[i];
        if (!m->role || !m->role[0])
            return lp_error_set_kind(LP_ERR(EINVAL), LP_EK_INVALID_REQUEST, "messages", "messages[%zu].role: empty", i);
        if (!m->content || !m->content[0])
            return lp_error_set_kind(LP_ERR(EINVAL), LP_EK_INVALID_REQUEST, "messages", "messages[%zu].content: empty",
                                     i);
    }
    return 0;
}

/* Check the whole request at the edge of the pipeline, before any work is
 * done for it.  Every field is typed: the sampling parameters are read with
 * the sampler's own reader (lib/sampling-wire.h), so that a bad value is
 * refused here, naming the field, and the sampler never sees one; the
 * coordinator parses no JSON. */
static int parse_request(lp__req_t *r, const Lmpipe__GenerateRequest *g, int32_t n_vocab)
{
    int rc = check_messages(g);
    if (rc) return rc;
    if (g->n_predict < -1)
        return lp_error_set_kind(LP_ERR(EINVAL), LP_EK_INVALID_REQUEST, "n_predict", "n_predict: must be >= -1, got %d",
                                 g->n_predict);
    if ((rc = set_stops(r, g)) != 0) return rc;
    r->t_max_predict_ms = g->t_max_predict_ms;
    if (!g->sampling) return 0;
    lp_sampler_params_t *sp = malloc(sizeof(*sp));
    if (!sp) return LP_ERR(ENOMEM);
    lp_sampler_params_default(sp);
    rc = lp_sampling_pb_read(g->sampling, sp);
    /* Only here is the vocabulary known: a bias on a token the model does
     * not have is refused rather than dropped. */
    for (int32_t i = 0; !rc && n_vocab > 0 && i < sp->n_bias; i++)
        if (sp->bias[i].id >= n_vocab)
            rc = lp_error_set_kind(LP_ERR(EINVAL), LP_EK_INVALID_REQUEST, "logit_bias",
                                   "logit_bias: token %d is not in the vocabulary (0..%d)", sp->bias[i].id,
                                   n_vocab - 1);
    free(sp);
    if (rc) return rc;
    /* kept (a copy) for every SamplerOpen of the request, reopens too */
    size_t len = lmpipe__sampling_params__get_packed_size(g->sampling);
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) return LP_ERR(ENOMEM);
    lmpipe__sampling_params__pack(g->sampling, buf);
    r->sampling = lmpipe__sampling_params__unpack(NULL, len, buf);
    free(buf);
    return r->sampling ? 0 : LP_ERR(ENOMEM);
}

/* The prompt's ids: in range, and shorter than the context (refused at
 * once; a text prompt found too long after tokenization ends with a
 * FinalEvent instead, see lp__coord_on_tokenized). */
static int take_prompt_ids(lp_coord_t *c, lp__req_t *r, const Lmpipe__GenerateRequest *g)
{
    for (size_t i = 0; i < g->n_prompt_ids; i++)
        if (g->prompt_ids[i] < 0 || g->prompt_ids[i] >= c->n_vocab)
            return lp_error_set_kind(LP_ERR(EINVAL), LP_EK_INVALID_REQUEST, "prompt", "prompt_ids[%zu] = %d is not in 0..%d",
                                     i, g->prompt_ids[i], c->n_vocab - 1);
    if ((int64_t)g->n_prompt_ids >= c->n_ctx)
        return lp_error_set_kind(LP_ERR(EINVAL), LP_EK_CONTEXT_LENGTH, "prompt",
                                 "prompt_ids: %zu tokens; the context holds %d", g->n_prompt_ids, c->n_ctx);
    if (!(r->prompt = malloc(g->n_prompt_ids * sizeof(int32_t)))) return LP_ERR(ENOMEM);
    memcpy(r->prompt, g->prompt_ids, g->n_prompt_ids * sizeof(int32_t));
    r->s.prompt = r->prompt;
    r->s.n_prompt = r->n_prompt = (int32_t)g->n_prompt_ids;
    r->state = R_WAIT_SLOT;
    return 0;
}

void lp__coord_on_tokenized(lp_coord_t *c, lp__req_t *r, const Lmpipe__Msg *m)
{
    if (r->state != R_TOKENIZING) return;
    const int32_t *ids;
    size_t n_ids;
    if (m->body_case == LMPIPE__MSG__BODY_TOKENIZE_REPLY) {
        ids = m->tokenize_reply->ids;
        n_ids = m->tokenize_reply->n_ids;
    } else if (m->body_case == LMPIPE__MSG__BODY_CHAT_TEMPLATE_REPLY) {
        ids = m->chat_template_reply->ids;
        n_ids = m->chat_template_reply->n_ids;
    } else if (m->body_case == LMPIPE__MSG__BODY_ERROR && lp_frame_error_kind(m->error) == LP_EK_INVALID_REQUEST) {
        /* the request's fault (its template, its messages): the tokenizer's
         * word, with the field it names */
        lp__coord_fail_kind(c, r, E_BAD_REQUEST, LP_EK_INVALID_REQUEST, m->error->param, m->error->message);
        return;
    } else {
        lp__coord_fail(c, r, E_TOKENIZER,
                       m->body_case == LMPIPE__MSG__BODY_ERROR ? m->error->message : "tokenizer: bad reply");
        return;
    }
    if (n_ids == 0) {
        lp__coord_fail_kind(c, r, E_BAD_REQUEST, LP_EK_INVALID_REQUEST, "prompt",
                            "the prompt has no tokens (and the model adds no BOS)");
        return;
    }
    if ((int64_t)n_ids >= c->n_ctx) {
        char msg[160];
        snprintf(msg, sizeof(msg), "the prompt has %zu tokens; the context holds %d", n_ids, c->n_ctx);
        r->s.n_prompt = (int32_t)(n_ids < INT32_MAX ? n_ids : INT32_MAX);
        lp__coord_fail_kind(c, r, E_BAD_REQUEST, LP_EK_CONTEXT_LENGTH, r->chat ? "messages" : "prompt", msg);
        return;
    }
    if (!(r->prompt = malloc(n_ids * sizeof(int32_t)))) {
        lp__coord_fail(c, r, E_INTERNAL, "out of memory");
        return;
    }
    memcpy(r->prompt, ids, n_ids * sizeof(int32_t));
    r->s.prompt = r->prompt;
    r->s.n_prompt = r->n_prompt = (int32_t)n_ids;
    r->state = R_WAIT_SLOT;
    free(r->tok_msg);
    r->tok_msg = NULL;
    r->tok = NULL;
}

/* Who a request counts against in the waiting queue: the one place that
 * says it.  Over CURVE the peer's public key, so that one key gets one
 * share however many connections it opens; on ipc:// and plain TCP the
 * connection's routing id (a client that reconnects is another client).
 * A request's tenant (a gateway's API key, the bridge's request subject)
 * divides that further: each tenant of a client is a client of its own. */
static void client_key(const lp_frame_t *f, const ProtobufCBinaryData *tenant, uint8_t *key, size_t *len)
{
    size_t uid = strlen(f->user_id);
    const uint8_t *src = uid ? (const uint8_t *)f->user_id : f->peer;
    size_t n = uid ? uid : f->peer_len;
    *len = n < LP__FAIR_KEY_MAX ? n : LP__FAIR_KEY_MAX;
    memcpy(key, src, *len);
    if (tenant->len && *len + 1 < LP__FAIR_KEY_MAX) {
        size_t room = LP__FAIR_KEY_MAX - *len - 1, t = tenant->len < room ? tenant->len : room;
        key[(*len)++] = '/';
        memcpy(key + *len, tenant->data, t);
        *len += t;
    }
}

/* Requests of this client not yet given a slot (tokenizing or queued). */
static size_t client_waiting(const lp_coord_t *c, const uint8_t *key, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n_reqs; i++) {
        const lp__req_t *r = c->reqs[i];
        n += (r->state == R_TOKENIZING || r->state == R_WAIT_SLOT) &&
             !lp__fair_cmp(r->client, r->client_len, key, len);
    }
    return n;
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
    /* One client alone cannot fill the queue: the others keep their share. */
    uint8_t key[LP__FAIR_KEY_MAX];
    size_t key_len;
    client_key(f, &g->tenant, key, &key_len);
    size_t max_client = c->p.max_queued_per_client > 0 ? (size_t)c->p.max_queued_per_client
                                                       : max_req / 4 > 0 ? max_req / 4 : 1;
    size_t waiting = client_waiting(c, key, key_len);
    if (waiting >= max_client)
        return lp_error_set_kind(LP_ERR(EBUSY), LP_EK_RATE_LIMITED, NULL,
                            "generate: this client%s has %zu requests waiting for a slot "
                            "(max_queued_per_client = %zu); send more as they finish",
                            g->tenant.len ? " (its API key, address or subject)" : "",
                            waiting, max_client);
    lp__req_t *r = calloc(1, sizeof(*r));
    if (!r) return LP_ERR(ENOMEM);
    /* An unseeded request's seed, fixed here so that a reopened session
     * draws what the first one would have. */
    if (getrandom(&r->random_seed, sizeof(r->random_seed), 0) != (ssize_t)sizeof(r->random_seed))
        r->random_seed = lp_now_ns();
    memcpy(r->client, key, key_len);
    r->client_len = key_len;
    r->s.key = ++c->next_key;
    r->s.slot = -1;
    r->s.n_predict = g->n_predict != 0 ? g->n_predict : -1;
    memcpy(r->peer, f->peer, f->peer_len);
    r->peer_len = f->peer_len;
    r->client_id = f->msg->id;
    r->stop_idx = -1;
    r->ignore_eos = g->ignore_eos;
    r->t_start = lp_now_ns();
    r->chat = is_chat(g);
    int rc = parse_request(r, g, c->n_vocab);
    if (!rc && !(r->ts = lp_textstream_new((const char *const *)r->stops, r->stop_lens, r->n_stops)))
        rc = LP_ERR(ENOMEM);
    if (!rc && g->n_prompt_ids) rc = take_prompt_ids(c, r, g);
    if (!rc) rc = lp__req_add(c, r);
    if (rc) {
        lp__req_free(r);
        return rc;
    }
    lp__deadline_set(c, r, g->deadline_ms);
    if (is_chat(g) || !g->n_prompt_ids) {
        Lmpipe__Msg m = LMPIPE__MSG__INIT;
        Lmpipe__ChatTemplateRequest ct = LMPIPE__CHAT_TEMPLATE_REQUEST__INIT;
        Lmpipe__TokenizeRequest t = LMPIPE__TOKENIZE_REQUEST__INIT;
        if (is_chat(g)) {
            /* The chat template's text, tokenized with special-token parsing
             * (and BOS where the model adds it), is the prompt. */
            ct.n_messages = g->n_messages;
            ct.messages = g->messages;
            ct.chat_json = g->chat_json ? g->chat_json : "";
            ct.template_ = g->chat_template ? g->chat_template : "";
            ct.add_assistant = true;
            ct.tokenize = true;
            m.body_case = LMPIPE__MSG__BODY_CHAT_TEMPLATE;
            m.chat_template = &ct;
        } else {
            t.text = g->prompt;
            t.add_special = !g->no_bos;
            t.parse_special = false;
            m.body_case = LMPIPE__MSG__BODY_TOKENIZE;
            m.tokenize = &t;
        }
        r->state = R_TOKENIZING;
        /* Kept packed until the prompt is tokenized: a tokenizer that dies
         * meanwhile is sent it again (lp__req_tokenize). */
        r->tok_len = lmpipe__msg__get_packed_size(&m);
        if (!(r->tok_msg = malloc(r->tok_len ? r->tok_len : 1))) {
            lp__coord_fail(c, r, E_INTERNAL, "out of memory");
        } else {
            lmpipe__msg__pack(&m, r->tok_msg);
            lp__req_tokenize(c, r);
        }
    }
    (void)svc;
    lp__coord_pump(c);
    return 0;
}

static int on_cancel(lp_coord_t *c, const lp_frame_t *f)
{
    lp__req_t *r = lp__req_find_client(c, f->peer, f->peer_len, f->msg->id);
    if (!r) return lp_error_set(LP_ERR(ENOENT), "cancel: no running request %llu",
                                (unsigned long long)f->msg->id);
    lp__coord_finish(c, r, LMPIPE__FINISH_REASON__FINISH_CANCELLED, NULL);
    lp__coord_pump(c);
    return 0;
}

static int on_client(lp_coord_t *c, lp_service_t *svc, const lp_frame_t *f)
{
    if (f->has_raw) return lp_error_set(LP_ERR(EPROTO), "%s: unexpected raw frame",
                                        lp_msg_body_name(f->msg->body_case));
    if (!c->ready) return lp_error_set(LP_ERR(EAGAIN), "pipeline not ready");
    /* While it drains, only a Cancel of a running request is taken. */
    if (f->msg->body_case != LMPIPE__MSG__BODY_CANCEL) {
        int rc = lp__drain_refuse(c);
        if (rc) return rc;
    }
    switch (f->msg->body_case) {
    case LMPIPE__MSG__BODY_GENERATE: return on_generate(c, svc, f);
    case LMPIPE__MSG__BODY_CANCEL: return on_cancel(c, f);
    case LMPIPE__MSG__BODY_TOKENIZE:
    case LMPIPE__MSG__BODY_DETOKENIZE:
    case LMPIPE__MSG__BODY_CHAT_TEMPLATE:
    case LMPIPE__MSG__BODY_SAMPLER_CONTROL: return lp__proxy_send(c, f);
    default:
        return lp_error_set(LP_ERR(EPROTO), "the coordinator does not serve '%s' messages",
                            lp_msg_body_name(f->msg->body_case));
    }
}

int lp__coord_client(void *ctx, lp_service_t *svc, const lp_frame_t *f)
{
    lp_coord_t *c = ctx;
    int rc = on_client(c, svc, f);
    /* "Not ready yet" is no error of the client's: it retries; nor is the drain. */
    if (rc && rc != LP_ERR(EAGAIN) && rc != LP_ERR(ESHUTDOWN)) c->m.errors[rc == LP_ERR(ENOMEM) ? E_INTERNAL : E_BAD_REQUEST]++;
    return rc;
}
