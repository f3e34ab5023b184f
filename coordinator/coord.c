/* coord.c - the coordinator (see coord.h).
 *
 * Life of a request:
 *   TOKENIZING  waiting for tokenizer-svc (skipped for prompt_ids)
 *   WAIT_SLOT   waiting for a free engine sequence slot (FIFO)
 *   OPENING     SamplerOpen sent; a bad parameter ends the request here
 *   RUNNING     in the steps: prefill chunks, then one decode token a step
 *   DONE        finished; freed once the end of its text is back (the
 *               sampler's or the tokenizer's final flush)
 *
 * Inline, one engine step is in flight at a time, then one sample batch;
 * the next step is built as soon as the samples are back.  With the ring,
 * two steps are in flight: the newer one is chained on the older one's rows
 * (the engine takes those tokens from the ring), so the engine never waits
 * for the coordinator.  Token text comes with the samples (or from
 * tokenizer-svc), and streaming overlaps the next step.  Replies from each
 * service come back in the order of the requests (one DEALER each), so
 * every service has a FIFO of pending operations. */
#include "coord-internal.h"

#include "error.h"
#include "hello.h"
#include "log.h"
#include "textstream.h"
#include "zloop.h"
#include "sysinfo.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <zmq.h>


/* ---- requests ------------------------------------------------------------ */

static req_t *req_find(lp_coord_t *c, uint64_t key)
{
    for (size_t i = 0; i < c->n_reqs; i++)
        if (c->reqs[i]->key == key) return c->reqs[i];
    return NULL;
}

req_t *lp__req_find_client(lp_coord_t *c, const uint8_t *peer, size_t len, uint64_t id)
{
    for (size_t i = 0; i < c->n_reqs; i++) {
        req_t *r = c->reqs[i];
        if (r->client_id == id && r->peer_len == len && !memcmp(r->peer, peer, len)) return r;
    }
    return NULL;
}

void lp__req_free(req_t *r)
{
    free(r->prompt);
    free(r->params_json);
    for (size_t i = 0; i < r->n_stops; i++) free(r->stops[i]);
    free(r->stops);
    free(r->stop_lens);
    lp_textstream_destroy(&r->ts);
    free(r->pend);
    free(r->tail);
    free(r);
}

static void req_remove(lp_coord_t *c, req_t *r)
{
    for (size_t i = 0; i < c->n_reqs; i++)
        if (c->reqs[i] == r) {
            memmove(&c->reqs[i], &c->reqs[i + 1], (c->n_reqs - i - 1) * sizeof(req_t *));
            c->n_reqs--;
            break;
        }
    lp__req_free(r);
}

/* ---- backends -------------------------------------------------------------- */

static int op_push(backend_t *b, op_t op)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        op_t *n = malloc(cap * sizeof(op_t));
        if (!n) return LP_ERR(ENOMEM);
        for (size_t i = 0; i < b->n; i++) n[i] = b->ops[(b->head + i) % b->cap];
        free(b->ops);
        b->ops = n;
        b->head = 0;
        b->cap = cap;
    }
    b->ops[(b->head + b->n++) % b->cap] = op;
    return 0;
}

/* Send `m` to a service and remember what its reply is for. */
int lp__coord_send(lp_coord_t *c, int which, enum opkind kind, uint64_t req, Lmpipe__Msg *m,
                 const void *raw, size_t raw_len)
{
    backend_t *b = &c->b[which];
    m->id = ++b->next_id;
    int rc = kind == OP_NONE ? 0 : op_push(b, (op_t){m->id, kind, req});
    if (rc) return rc;
    if (which == B_TOK && c->hold_tok && !raw_len) {
        if (c->n_held == c->cap_held) {
            size_t cap = c->cap_held ? 2 * c->cap_held : 32;
            struct held *n = realloc(c->held, cap * sizeof(*n));
            if (!n) {
                b->n--;
                return LP_ERR(ENOMEM);
            }
            c->held = n;
            c->cap_held = cap;
        }
        size_t len = lmpipe__msg__get_packed_size(m);
        uint8_t *buf = malloc(len ? len : 1);
        if (!buf) {
            if (kind != OP_NONE) b->n--;
            return LP_ERR(ENOMEM);
        }
        lmpipe__msg__pack(m, buf);
        c->held[c->n_held++] = (struct held){buf, len};
        return 0;
    }
    rc = lp_frame_send(b->sock, NULL, 0, m, raw, raw_len);
    lp_zsock_kick(b->zs);
    if (rc) {
        if (kind != OP_NONE) b->n--; /* never sent: forget it */
        LP_ERROR("coordinator: send to %s: %s", b->name, lp_error_msg());
    }
    return rc;
}

static void fail_pipeline(lp_coord_t *c, const char *msg)
{
    if (!c->failed) LP_ERROR("coordinator: %s", msg);
    c->failed = true;
    snprintf(c->fail_msg, sizeof(c->fail_msg), "%s", msg);
}

static void send_held(lp_coord_t *c)
{
    backend_t *b = &c->b[B_TOK];
    for (size_t i = 0; i < c->n_held; i++) {
        if (zmq_send(b->sock, c->held[i].buf, c->held[i].len, ZMQ_DONTWAIT) < 0)
            LP_ERROR("coordinator: send to %s: %s", b->name, zmq_strerror(zmq_errno()));
        free(c->held[i].buf);
    }
    if (c->n_held) lp_zsock_kick(b->zs);
    c->n_held = 0;
}

/* ---- client events --------------------------------------------------------- */

static void send_client(lp_coord_t *c, req_t *r, Lmpipe__Msg *m)
{
    if (r->client_gone) return;
    m->id = r->client_id;
    int rc = lp_service_send(c->svc, r->peer, r->peer_len, m, NULL, 0);
    if (rc == LP_ERR(EHOSTUNREACH)) {
        LP_INFO("coordinator: client of request %llu has gone; cancelling it",
                (unsigned long long)r->client_id);
        r->client_gone = true;
    }
}

static int pend_push(req_t *r, const tokinfo_t *ti);

static void maybe_final(lp_coord_t *c, req_t *r)
{
    if (r->state != R_DONE || r->pend_n > 0) return;
    Lmpipe__FinalEvent f = LMPIPE__FINAL_EVENT__INIT;
    f.reason = r->reason;
    if (r->reason == LMPIPE__FINISH_REASON__FINISH_STOP && r->stop_idx >= 0) {
        f.stop.data = (uint8_t *)r->stops[r->stop_idx];
        f.stop.len = r->stop_lens[r->stop_idx];
    }
    char *tail = NULL;
    if (r->ts && r->reason != LMPIPE__FINISH_REASON__FINISH_CANCELLED &&
        r->reason != LMPIPE__FINISH_REASON__FINISH_ERROR) {
        const char *rest;
        size_t n;
        lp_textstream_flush(r->ts, &rest, &n);
        tail = malloc(r->tail_len + n + 1);
        if (tail) {
            if (r->tail_len) memcpy(tail, r->tail, r->tail_len);
            if (n) memcpy(tail + r->tail_len, rest, n);
            f.tail.data = (uint8_t *)tail;
            f.tail.len = r->tail_len + n;
        }
    }
    f.n_prompt = (uint32_t)r->n_prompt;
    f.n_generated = (uint32_t)r->n_gen;
    uint64_t t_first = r->t_first ? r->t_first : lp_now_ns();
    f.prompt_ms = (double)(t_first - r->t_start) / 1e6;
    f.generate_ms = r->t_last > t_first ? (double)(r->t_last - t_first) / 1e6 : 0;
    if (r->error[0]) f.error = r->error;
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.body_case = LMPIPE__MSG__BODY_FINAL;
    m.final = &f;
    send_client(c, r, &m);
    free(tail);
    req_remove(c, r);
}

void lp__coord_finish(lp_coord_t *c, req_t *r, Lmpipe__FinishReason reason, const char *error)
{
    if (r->state == R_DONE) {
        /* A stop string found in text that arrives after a natural end wins. */
        if (reason == LMPIPE__FINISH_REASON__FINISH_STOP) r->reason = reason;
        return;
    }
    r->state = R_DONE;
    r->reason = reason;
    if (error) snprintf(r->error, sizeof(r->error), "%s", error);
    if (r->seq >= 0) {
        c->slot_used[r->seq] = 0;
        r->seq = -1;
    }
    bool natural = reason == LMPIPE__FINISH_REASON__FINISH_EOS ||
                   reason == LMPIPE__FINISH_REASON__FINISH_LENGTH ||
                   reason == LMPIPE__FINISH_REASON__FINISH_CONTEXT;
    if (r->session_open) {
        /* With the sampler's decoder, the close flushes it (the end of the
         * text); a marker in the piece FIFO waits for the answer. */
        Lmpipe__Msg m = LMPIPE__MSG__INIT;
        Lmpipe__SamplerClose sc = LMPIPE__SAMPLER_CLOSE__INIT;
        sc.session = r->key;
        sc.flush = c->samp_detok && natural;
        m.body_case = LMPIPE__MSG__BODY_SAMPLER_CLOSE;
        m.sampler_close = &sc;
        tokinfo_t marker = {.id = -1};
        bool mark = c->samp_detok && pend_push(r, &marker) == 0;
        if (lp__coord_send(c, B_SAMP, OP_SCLOSE, r->key, &m, NULL, 0) != 0 && mark) r->pend_n--;
        r->session_open = false;
    }
    if (r->detok_open) {
        /* Flush what the decoder holds back (the end of the text) and close
         * it; a marker in the piece FIFO waits for the reply. */
        Lmpipe__Msg m = LMPIPE__MSG__INIT;
        Lmpipe__DetokenizeRequest d = LMPIPE__DETOKENIZE_REQUEST__INIT;
        d.stream = r->key;
        d.flush = natural;
        d.close = true;
        m.body_case = LMPIPE__MSG__BODY_DETOKENIZE;
        m.detokenize = &d;
        tokinfo_t marker = {.id = -1};
        if (pend_push(r, &marker) == 0 && lp__coord_send(c, B_TOK, OP_DETOK, r->key, &m, NULL, 0) != 0)
            r->pend_n--;
        r->detok_open = false;
    }
    maybe_final(c, r);
}

/* ---- tokenizer replies ------------------------------------------------------- */

static void on_tokenized(lp_coord_t *c, req_t *r, const Lmpipe__Msg *m)
{
    if (r->state != R_TOKENIZING) return;
    if (m->body_case != LMPIPE__MSG__BODY_TOKENIZE_REPLY) {
        lp__coord_finish(c, r, LMPIPE__FINISH_REASON__FINISH_ERROR,
               m->body_case == LMPIPE__MSG__BODY_ERROR ? m->error->message : "tokenizer: bad reply");
        return;
    }
    const Lmpipe__TokenizeReply *t = m->tokenize_reply;
    if (t->n_ids == 0) {
        lp__coord_finish(c, r, LMPIPE__FINISH_REASON__FINISH_ERROR, "the prompt has no tokens (and the model adds no BOS)");
        return;
    }
    r->prompt = malloc(t->n_ids * sizeof(int32_t));
    if (!r->prompt) {
        lp__coord_finish(c, r, LMPIPE__FINISH_REASON__FINISH_ERROR, "out of memory");
        return;
    }
    memcpy(r->prompt, t->ids, t->n_ids * sizeof(int32_t));
    r->n_prompt = t->n_ids;
    if ((int64_t)r->n_prompt >= c->n_ctx) {
        char msg[160];
        snprintf(msg, sizeof(msg), "the prompt has %zu tokens; the context holds %d", r->n_prompt, c->n_ctx);
        lp__coord_finish(c, r, LMPIPE__FINISH_REASON__FINISH_ERROR, msg);
        return;
    }
    r->state = R_WAIT_SLOT;
}

/* The text held back at the end (the decoder's final flush): it goes into
 * the final event's tail. */
static void text_tail(req_t *r, const uint8_t *data, size_t len)
{
    const char *out;
    size_t out_len;
    int stop = lp_textstream_push(r->ts, (const char *)data, len, &out, &out_len);
    if (out_len && (r->tail = malloc(out_len))) {
        memcpy(r->tail, out, out_len);
        r->tail_len = out_len;
    }
    if (stop >= 0) {
        r->stop_idx = stop;
        r->reason = LMPIPE__FINISH_REASON__FINISH_STOP;
    }
}

/* One token's text: through the stop strings, then to the client as a
 * token event.  May finish the request (a stop string, a client that has
 * gone); the request stays allocated while its final flush is pending. */
static void text_piece(lp_coord_t *c, req_t *r, const tokinfo_t *ti, const uint8_t *data, size_t len)
{
    const char *out;
    size_t out_len;
    int stop = lp_textstream_push(r->ts, (const char *)data, len, &out, &out_len);
    Lmpipe__TokenEvent ev = LMPIPE__TOKEN_EVENT__INIT;
    Lmpipe__TokenProb *tpp[32];
    ev.id = ti->id;
    ev.piece.data = (uint8_t *)out;
    ev.piece.len = out_len;
    ev.has_logprob = ti->has_logprob;
    ev.logprob = ti->logprob;
    ev.strategy_version = ti->strategy_version;
    ev.n_top = ti->n_top;
    for (size_t k = 0; k < ti->n_top; k++) tpp[k] = (Lmpipe__TokenProb *)&ti->top[k];
    ev.top = tpp;
    Lmpipe__Msg em = LMPIPE__MSG__INIT;
    em.body_case = LMPIPE__MSG__BODY_TOKEN;
    em.token = &ev;
    send_client(c, r, &em);
    if (r->client_gone) {
        lp__coord_finish(c, r, LMPIPE__FINISH_REASON__FINISH_CANCELLED, "the client has gone");
        return;
    }
    if (stop >= 0) {
        r->stop_idx = stop; /* later pieces are past the stop string: dropped */
        lp__coord_finish(c, r, LMPIPE__FINISH_REASON__FINISH_STOP, NULL);
    }
}

/* Take the oldest token waiting for its text (or the final-flush marker,
 * id -1); false when its text is no longer wanted (the request was
 * cancelled or failed). */
static bool pend_pop(req_t *r, tokinfo_t *ti)
{
    *ti = r->pend[r->pend_head];
    r->pend_head = (r->pend_head + 1) % r->pend_cap;
    r->pend_n--;
    return r->state != R_DONE || r->reason == LMPIPE__FINISH_REASON__FINISH_EOS ||
           r->reason == LMPIPE__FINISH_REASON__FINISH_LENGTH ||
           r->reason == LMPIPE__FINISH_REASON__FINISH_CONTEXT;
}

static void text_failed(lp_coord_t *c, req_t *r, const char *who, const char *err)
{
    if (r->state != R_DONE) {
        lp__coord_finish(c, r, LMPIPE__FINISH_REASON__FINISH_ERROR, err);
    } else {
        r->reason = LMPIPE__FINISH_REASON__FINISH_ERROR;
        snprintf(r->error, sizeof(r->error), "%s: %s", who, err);
    }
}

/* tokenizer-svc's answer for the oldest token waiting for its text. */
static void on_detok(lp_coord_t *c, req_t *r, const Lmpipe__Msg *m)
{
    if (r->pend_n == 0) return;
    tokinfo_t ti;
    if (!pend_pop(r, &ti)) {
        maybe_final(c, r);
        return;
    }
    if (m->body_case != LMPIPE__MSG__BODY_DETOKENIZE_REPLY ||
        m->detokenize_reply->n_pieces != (ti.id == -1 ? 0u : 1u)) {
        text_failed(c, r, "tokenizer", m->body_case == LMPIPE__MSG__BODY_ERROR ? m->error->message : "bad reply");
        maybe_final(c, r);
        return;
    }
    if (ti.id == -1) { /* the final flush */
        text_tail(r, m->detokenize_reply->flushed.data, m->detokenize_reply->flushed.len);
        maybe_final(c, r);
        return;
    }
    const ProtobufCBinaryData *piece = &m->detokenize_reply->pieces[0];
    text_piece(c, r, &ti, piece->data, piece->len);
    maybe_final(c, r);
}

/* sampler-svc's answer to SamplerClose: with SamplerOpen.detok it carries
 * the final flush, for which a marker waits in the request's FIFO. */
static void on_closed(lp_coord_t *c, req_t *r, const Lmpipe__Msg *m)
{
    if (m->body_case == LMPIPE__MSG__BODY_ERROR)
        LP_DEBUG("coordinator: sampler_close: %s", m->error->message);
    if (!r || !c->samp_detok || r->pend_n == 0) return;
    tokinfo_t ti;
    if (!pend_pop(r, &ti)) {
        maybe_final(c, r);
        return;
    }
    if (m->body_case != LMPIPE__MSG__BODY_SAMPLER_CLOSE)
        text_failed(c, r, "sampler", m->body_case == LMPIPE__MSG__BODY_ERROR ? m->error->message : "bad reply");
    else
        text_tail(r, m->sampler_close->flushed.data, m->sampler_close->flushed.len);
    maybe_final(c, r);
}

/* ---- sampler replies ---------------------------------------------------------- */

static void on_opened(lp_coord_t *c, req_t *r, const Lmpipe__Msg *m)
{
    if (r->state != R_OPENING) return;
    if (m->body_case != LMPIPE__MSG__BODY_SAMPLER_OPEN) {
        r->session_open = false;
        lp__coord_finish(c, r, LMPIPE__FINISH_REASON__FINISH_ERROR,
               m->body_case == LMPIPE__MSG__BODY_ERROR ? m->error->message : "sampler: bad reply");
        return;
    }
    r->state = R_RUNNING;
}

static int pend_push(req_t *r, const tokinfo_t *ti)
{
    if (r->pend_n == r->pend_cap) {
        size_t cap = r->pend_cap ? 2 * r->pend_cap : 8;
        tokinfo_t *n = malloc(cap * sizeof(tokinfo_t));
        if (!n) return LP_ERR(ENOMEM);
        for (size_t i = 0; i < r->pend_n; i++) n[i] = r->pend[(r->pend_head + i) % r->pend_cap];
        free(r->pend);
        r->pend = n;
        r->pend_head = 0;
        r->pend_cap = cap;
    }
    r->pend[(r->pend_head + r->pend_n++) % r->pend_cap] = *ti;
    return 0;
}

/* One sampled token of a running request.  `e` is its entry in the step
 * the row came from. */
static void on_token(lp_coord_t *c, req_t *r, const Lmpipe__SampleResult *res, const entry_t *e)
{
    /* Tokens come back in step order: the oldest one fed ahead by a chained
     * step is this one; otherwise this was the request's newest row, and
     * the token waits for the next step. */
    bool fed = r->fed_ahead > 0;
    if (fed) r->fed_ahead--;
    else r->row_pending = false;
    if (res->error && res->error[0]) {
        lp__coord_finish(c, r, LMPIPE__FINISH_REASON__FINISH_ERROR, res->error);
        return;
    }
    int32_t t = res->token;
    uint64_t now = lp_now_ns();
    if (!r->t_first) r->t_first = now;
    r->t_last = now;
    if (t >= 0 && t < c->n_vocab && c->eog[t] && !r->ignore_eos) {
        lp__coord_finish(c, r, LMPIPE__FINISH_REASON__FINISH_EOS, NULL);
        return;
    }
    r->n_gen++;
    tokinfo_t ti = {.id = t, .has_logprob = res->has_logprob, .logprob = res->logprob,
                    .strategy_version = res->strategy_version};
    for (size_t k = 0; k < res->n_top && k < 32; k++) {
        lmpipe__token_prob__init(&ti.top[k]);
        ti.top[k].id = res->top[k]->id;
        ti.top[k].logprob = res->top[k]->logprob;
        ti.n_top = k + 1;
    }
    if (c->samp_detok) {
        /* The sampler's decoder gave the text with the token: it goes to
         * the client once the next step is out (c->texts, send_texts). */
        if (c->n_texts < (size_t)c->max_seqs)
            c->texts[c->n_texts++] = (struct text){r->key, ti, res->piece.data, res->piece.len};
    } else {
        Lmpipe__Msg m = LMPIPE__MSG__INIT;
        Lmpipe__DetokenizeRequest d = LMPIPE__DETOKENIZE_REQUEST__INIT;
        d.n_ids = 1;
        d.ids = &t;
        d.stream = r->key;
        m.body_case = LMPIPE__MSG__BODY_DETOKENIZE;
        m.detokenize = &d;
        r->detok_open = true;
        if (pend_push(r, &ti) || lp__coord_send(c, B_TOK, OP_DETOK, r->key, &m, NULL, 0)) {
            lp__coord_finish(c, r, LMPIPE__FINISH_REASON__FINISH_ERROR, "out of memory");
            return;
        }
    }
    if (!fed) {
        r->next_tok = t;
        r->has_next = true;
    }
    if (r->n_predict >= 0 && r->n_gen >= r->n_predict)
        lp__coord_finish(c, r, LMPIPE__FINISH_REASON__FINISH_LENGTH, NULL);
    else if (e->n_past >= c->n_ctx)
        lp__coord_finish(c, r, LMPIPE__FINISH_REASON__FINISH_CONTEXT, NULL);
}

/* The token events of the sample reply just handled, after the next step
 * went out.  A stop string found here ends the request; a step already
 * holding its next token is then computed for nothing, as after an
 * end-of-generation token.  The texts point into the reply, which lives
 * until its handler returns. */
static void send_texts(lp_coord_t *c)
{
    for (size_t i = 0; i < c->n_texts; i++) {
        req_t *r = req_find(c, c->texts[i].req);
        bool live = r && (r->state != R_DONE || r->reason == LMPIPE__FINISH_REASON__FINISH_EOS ||
                          r->reason == LMPIPE__FINISH_REASON__FINISH_LENGTH ||
                          r->reason == LMPIPE__FINISH_REASON__FINISH_CONTEXT);
        if (live) text_piece(c, r, &c->texts[i].ti, c->texts[i].data, c->texts[i].len);
    }
    c->n_texts = 0;
}

/* ---- steps in flight ------------------------------------------------------------ */

static step_t *step_find(lp_coord_t *c, uint64_t no)
{
    for (int i = 0; i < MAX_STEPS; i++)
        if (no && c->steps[i].no == no) return &c->steps[i];
    return NULL;
}

/* Forget a step once neither its StepReply nor its SampleReply is due. */
static void step_retire(step_t *st)
{
    if (st->step_wait || st->sample_wait) return;
    st->no = 0;
    st->n_entries = 0;
    st->n_rows = 0;
}

static void fail_entries(lp_coord_t *c, step_t *st, const char *err)
{
    for (size_t i = 0; i < st->n_entries; i++) {
        req_t *r = req_find(c, st->entries[i].req);
        if (r) lp__coord_finish(c, r, LMPIPE__FINISH_REASON__FINISH_ERROR, err);
    }
}

static void on_sampled(lp_coord_t *c, step_t *st, const Lmpipe__Msg *m)
{
    st->sample_wait = false;
    size_t row = 0;
    bool ok = m->body_case == LMPIPE__MSG__BODY_SAMPLE_REPLY;
    const char *err = m->body_case == LMPIPE__MSG__BODY_ERROR ? m->error->message : "sampler: bad reply";
    for (size_t i = 0; i < st->n_entries; i++) {
        if (!st->entries[i].n_logits) continue;
        req_t *r = req_find(c, st->entries[i].req);
        size_t k = row++;
        if (!r || r->state != R_RUNNING) continue;
        if (!ok || k >= m->sample_reply->n_results) lp__coord_finish(c, r, LMPIPE__FINISH_REASON__FINISH_ERROR, err);
        else on_token(c, r, m->sample_reply->results[k], &st->entries[i]);
    }
    step_retire(st);
}

/* ---- engine replies ------------------------------------------------------------ */

/* A step that was not quiet: positions were advanced when it was built;
 * here only a failure matters, and sending its rows to the sampler. */
static void on_stepped(lp_coord_t *c, step_t *st, const lp_frame_t *f)
{
    const Lmpipe__Msg *m = f->msg;
    st->step_wait = false;
    if (m->body_case != LMPIPE__MSG__BODY_STEP_REPLY) {
        fail_entries(c, st, m->body_case == LMPIPE__MSG__BODY_ERROR ? m->error->message : "engine: bad reply");
        step_retire(st);
        return;
    }
    const Lmpipe__StepReply *sr = m->step_reply;
    size_t n_rows = st->n_rows;
    size_t raw_len;
    const void *raw = lp_frame_raw(f, &raw_len);
    bool rows_ok = c->use_shm ? sr->n_rows == n_rows
                              : raw_len == n_rows * (size_t)c->n_vocab * sizeof(float);
    if (!rows_ok) {
        LP_ERROR("coordinator: engine returned the wrong rows (%zu refs, %zu raw bytes; %zu rows)",
                 sr->n_rows, raw_len, n_rows);
        fail_entries(c, st, "engine: wrong logit rows");
        step_retire(st);
        return;
    }
    if (n_rows == 0) {
        step_retire(st);
        return;
    }
    /* Every row goes to the sampler, also those of requests that ended while
     * the step ran (session 0: release only), so the ring never leaks. */
    Lmpipe__SampleItem items[n_rows], *ip[n_rows];
    size_t row = 0;
    for (size_t i = 0; i < st->n_entries; i++) {
        if (!st->entries[i].n_logits) continue;
        req_t *r = req_find(c, st->entries[i].req);
        lmpipe__sample_item__init(&items[row]);
        items[row].session = r && r->state == R_RUNNING ? r->key : 0;
        if (c->use_shm) items[row].ref = sr->rows[row];
        else items[row].row = (uint32_t)row;
        ip[row] = &items[row];
        row++;
    }
    Lmpipe__SampleRequest sq = LMPIPE__SAMPLE_REQUEST__INIT;
    sq.n_items = n_rows;
    sq.items = ip;
    Lmpipe__Msg out = LMPIPE__MSG__INIT;
    out.body_case = LMPIPE__MSG__BODY_SAMPLE;
    out.sample = &sq;
    if (lp__coord_send(c, B_SAMP, OP_SAMPLE, st->no, &out, c->use_shm ? NULL : raw,
                       c->use_shm ? 0 : raw_len) == 0)
        st->sample_wait = true;
    else
        fail_entries(c, st, "cannot reach sampler-svc");
    step_retire(st);
}

/* ---- scheduling ------------------------------------------------------------------ */

static void admit(lp_coord_t *c)
{
    for (size_t i = 0; i < c->n_reqs; i++) {
        req_t *r = c->reqs[i];
        if (r->state != R_WAIT_SLOT) continue;
        int32_t slot = -1;
        for (int32_t s = 0; s < c->max_seqs; s++)
            if (!c->slot_used[s]) {
                slot = s;
                break;
            }
        if (slot < 0) return;
        c->slot_used[slot] = 1;
        r->seq = slot;
        r->n_past = 0;
        Lmpipe__Msg m = LMPIPE__MSG__INIT;
        Lmpipe__SamplerOpen so = LMPIPE__SAMPLER_OPEN__INIT;
        so.session = r->key;
        so.params_json = r->params_json ? r->params_json : "";
        so.n_prompt_ids = r->n_prompt;
        so.prompt_ids = r->prompt;
        so.detok = c->samp_detok;
        if (c->samp_detok && !r->ignore_eos) { /* the text ends before an EOG token */
            so.n_detok_end_ids = c->n_eog_ids;
            so.detok_end_ids = c->eog_ids;
        }
        m.body_case = LMPIPE__MSG__BODY_SAMPLER_OPEN;
        m.sampler_open = &so;
        r->state = R_OPENING;
        r->session_open = true;
        if (lp__coord_send(c, B_SAMP, OP_SOPEN, r->key, &m, NULL, 0)) {
            r->session_open = false;
            lp__coord_finish(c, r, LMPIPE__FINISH_REASON__FINISH_ERROR, "cannot reach sampler-svc");
        }
    }
}

/* A chained step feeds the token of the request's pending row before it is
 * known: only when that token cannot be the last one the request gets
 * (length or context; an end-of-generation token still ends it, and the
 * chained row is then sampled and dropped). */
static bool will_continue(const lp_coord_t *c, const req_t *r)
{
    int32_t n_gen = r->n_gen + r->fed_ahead + 1;
    return (r->n_predict < 0 || n_gen < r->n_predict) && r->n_past < c->n_ctx;
}

/* Build and send one step: a decode token for every request that has one,
 * then prefill chunks in arrival order while the token budget lasts.  With
 * the ring, a second step goes out while the first one is in flight: its
 * decode tokens are the ones the sampler will pick from the first one's
 * rows (StepSeq.chain), so the engine goes on without waiting for the
 * coordinator.  Returns whether a step went out. */
static bool schedule(lp_coord_t *c)
{
    if (!c->ready) return false;
    step_t *newest = NULL, *st = NULL;
    size_t n_active = 0;
    for (int i = 0; i < MAX_STEPS; i++) {
        if (!c->steps[i].no) st = &c->steps[i];
        else if (n_active++, !newest || c->steps[i].no > newest->no) newest = &c->steps[i];
    }
    if (!st) return false;
    if (newest && !(c->use_shm && newest->early)) return false;
    bool chain = newest != NULL;
    /* Rows of both steps in flight must fit in the ring at once. */
    size_t row_cap = !chain ? SIZE_MAX : c->ring_slots > newest->n_rows ? c->ring_slots - newest->n_rows : 0;
    size_t n_seqs = 0, n_tok = 0, n_rows = 0;
    int32_t budget = c->max_batch_tokens;
    Lmpipe__StepSeq seqs[c->max_seqs], *sp[c->max_seqs];
    Lmpipe__RowRef chains[c->max_seqs];
    /* Decode tokens first, starting one request further each step so that
     * a budget smaller than the running requests starves none of them. */
    size_t start = c->n_reqs ? c->rr++ % c->n_reqs : 0;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t j = 0; j < c->n_reqs && budget > 0 && n_seqs < (size_t)c->max_seqs; j++) {
            req_t *r = c->reqs[pass == 0 ? (start + j) % c->n_reqs : j];
            if (r->state != R_RUNNING) continue;
            bool decode = r->n_past >= (int32_t)r->n_prompt;
            if (decode != (pass == 0)) continue;
            bool chained = false;
            if (decode && !r->has_next) {
                if (!chain || !r->row_pending || !r->row_chainable || !will_continue(c, r)) continue;
                chained = true;
            }
            int32_t n;
            int32_t *toks = c->tokbuf + n_tok;
            if (decode) {
                n = 1;
                toks[0] = r->next_tok;
            } else {
                n = (int32_t)r->n_prompt - r->n_past;
                if (n > budget) n = budget;
                memcpy(toks, r->prompt + r->n_past, (size_t)n * sizeof(int32_t));
            }
            int32_t n_logits = decode || r->n_past + n == (int32_t)r->n_prompt ? 1 : 0;
            if (n_rows + (size_t)n_logits > row_cap) continue;
            lmpipe__step_seq__init(&seqs[n_seqs]);
            seqs[n_seqs].seq_id = r->seq;
            seqs[n_seqs].pos = r->n_past;
            seqs[n_seqs].n_tokens = chained ? 0 : (size_t)n;
            seqs[n_seqs].tokens = chained ? NULL : toks;
            seqs[n_seqs].n_logits = n_logits;
            if (chained) {
                lmpipe__row_ref__init(&chains[n_seqs]);
                chains[n_seqs].slot = r->row_slot;
                chains[n_seqs].seq = r->row_seq;
                seqs[n_seqs].chain = &chains[n_seqs];
                r->fed_ahead++;
            }
            sp[n_seqs] = &seqs[n_seqs];
            /* The cache will hold these tokens once the step has run (a
             * failed step ends the request), and the pending token is fed. */
            r->n_past += n;
            if (decode) r->has_next = false;
            st->entries[n_seqs] = (entry_t){r->key, n, n_logits, r->n_past};
            n_seqs++;
            n_tok += (size_t)n;
            n_rows += (size_t)n_logits;
            budget -= n;
        }
    }
    if (n_seqs == 0) return false;
    st->no = ++c->next_step_no;
    st->n_entries = n_seqs;
    st->n_rows = n_rows;
    Lmpipe__StepRequest sr = LMPIPE__STEP_REQUEST__INIT;
    sr.n_seqs = n_seqs;
    sr.seqs = sp;
    sr.inline_rows = !c->use_shm;
    /* With the ring, the coordinator picks the slots (clear of those of
     * the step in flight) and sends the SampleRequest along with
     * the step: the sampler waits on the slots, and the engine answers only
     * a failure. */
    size_t nr = n_rows ? n_rows : 1;
    Lmpipe__RowRef refs[nr], *rp[nr];
    Lmpipe__SampleItem items[nr], *ip[nr];
    bool early = c->use_shm && n_rows > 0 && n_rows <= c->ring_slots;
    st->early = early;
    /* The rows go to the lowest slots clear of the step in flight (row_cap
     * keeps them clear of it cyclically), so that steps alternate between
     * the same few slots: a ring walked round uses n_slots rows of cache
     * where one step at a time uses one. */
    st->ring_base = 0;
    if (chain && n_rows > newest->ring_base)
        st->ring_base = (uint32_t)((newest->ring_base + newest->n_rows) % c->ring_slots);
    if (c->use_shm) sr.ring = c->b[B_ENG].hello->hello->shm_name;
    for (size_t i = 0, row = 0; i < n_seqs; i++) {
        if (!st->entries[i].n_logits) continue;
        req_t *r = req_find(c, st->entries[i].req);
        r->row_pending = true;
        r->row_chainable = early;
        if (!early) continue;
        lmpipe__row_ref__init(&refs[row]);
        refs[row].slot = (uint32_t)((st->ring_base + row) % c->ring_slots);
        refs[row].seq = ++c->ring_seq;
        r->row_slot = refs[row].slot;
        r->row_seq = refs[row].seq;
        rp[row] = &refs[row];
        lmpipe__sample_item__init(&items[row]);
        items[row].session = r->key;
        items[row].ref = &refs[row];
        ip[row] = &items[row];
        row++;
    }
    if (early) {
        sr.n_rows = n_rows;
        sr.rows = rp;
        sr.quiet = true; /* success shows in the slots; a failure fails them */
    }
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.body_case = LMPIPE__MSG__BODY_STEP;
    m.step = &sr;
    if (lp__coord_send(c, B_ENG, early ? OP_NONE : OP_STEP, st->no, &m, NULL, 0) != 0) {
        fail_entries(c, st, "cannot reach engine-svc");
        st->no = 0;
        return false;
    }
    st->step_wait = !early;
    if (early) {
        Lmpipe__SampleRequest sq = LMPIPE__SAMPLE_REQUEST__INIT;
        sq.n_items = n_rows;
        sq.items = ip;
        sq.wait = true;
        sq.ring = sr.ring;
        Lmpipe__Msg sm = LMPIPE__MSG__INIT;
        sm.body_case = LMPIPE__MSG__BODY_SAMPLE;
        sm.sample = &sq;
        if (lp__coord_send(c, B_SAMP, OP_SAMPLE, st->no, &sm, NULL, 0) != 0) {
            /* The quiet step's rows will not be read: end the requests. */
            fail_entries(c, st, "cannot reach sampler-svc");
            st->no = 0;
            return false;
        }
        st->sample_wait = true;
    }
    return true;
}

void lp__coord_pump(lp_coord_t *c)
{
    if (!c->ready) return;
    admit(c);
    while (schedule(c)) {
    }
}

/* ---- hellos ---------------------------------------------------------------------- */

static void send_hello(lp_coord_t *c, int which)
{
    Lmpipe__Hello h;
    lp_hello_init(&h, LMPIPE__ROLE__ROLE_COORDINATOR);
    h.no_shm = c->p.no_shm;
    if (which == B_SAMP && !c->p.no_shm) {
        const Lmpipe__Hello *e = c->b[B_ENG].hello->hello;
        if (e->shm_name && e->shm_name[0]) h.shm_name = e->shm_name;
    }
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.body_case = LMPIPE__MSG__BODY_HELLO;
    m.hello = &h;
    lp__coord_send(c, which, OP_HELLO, 0, &m, NULL, 0);
}

static void check_ready(lp_coord_t *c)
{
    for (int i = 0; i < B_COUNT; i++)
        if (!c->b[i].hello) return;
    const Lmpipe__Hello *t = c->b[B_TOK].hello->hello, *e = c->b[B_ENG].hello->hello,
                        *s = c->b[B_SAMP].hello->hello;
    if (lp_hello_check_vocab(t, e) || lp_hello_check_vocab(s, e) || lp_hello_check_vocab(t, s)) {
        fail_pipeline(c, lp_error_msg());
        return;
    }
    c->n_vocab = (int32_t)e->n_vocab;
    c->n_ctx = e->n_ctx ? (int32_t)e->n_ctx : 4096;
    c->bos_id = t->bos_id >= 0 ? t->bos_id : e->bos_id;
    c->eos_id = t->eos_id >= 0 ? t->eos_id : e->eos_id;
    int32_t ems = e->max_seqs ? (int32_t)e->max_seqs : 16;
    int32_t ebt = e->max_batch_tokens ? (int32_t)e->max_batch_tokens : 512;
    c->max_seqs = c->p.max_seqs > 0 && c->p.max_seqs < ems ? c->p.max_seqs : ems;
    c->max_batch_tokens = c->p.max_batch_tokens > 0 && c->p.max_batch_tokens < ebt ? c->p.max_batch_tokens : ebt;
    c->use_shm = !c->p.no_shm && e->shm_name && e->shm_name[0] && s->shm_ok &&
                 !strcmp(e->host_id, s->host_id);
    c->ring_slots = e->shm_slots;
    /* The sampler gives each token's text with the token (one message less
     * per token than asking tokenizer-svc), unless told otherwise. */
    c->samp_detok = s->detok && !c->p.detok_by_tokenizer;
    /* Slot sequence numbers start at a random point (see shm-ring.h). */
    if (getrandom(&c->ring_seq, sizeof(c->ring_seq), 0) != (ssize_t)sizeof(c->ring_seq))
        c->ring_seq = lp_now_ns();
    c->ring_seq >>= 1;
    c->eog = calloc((size_t)c->n_vocab, 1);
    if (c->eog && c->eos_id >= 0 && c->eos_id < c->n_vocab) c->eog[c->eos_id] = 1;
    for (size_t i = 0; c->eog && i < t->n_eog_ids; i++)
        if (t->eog_ids[i] >= 0 && t->eog_ids[i] < c->n_vocab) c->eog[t->eog_ids[i]] = 1;
    for (int32_t i = 0; c->eog && i < c->n_vocab; i++) c->n_eog_ids += c->eog[i];
    c->eog_ids = calloc(c->n_eog_ids ? c->n_eog_ids : 1, sizeof(int32_t));
    for (int32_t i = 0, k = 0; c->eog && c->eog_ids && i < c->n_vocab; i++)
        if (c->eog[i]) c->eog_ids[k++] = i;
    c->slot_used = calloc((size_t)c->max_seqs, 1);
    bool steps_ok = true;
    for (int i = 0; i < MAX_STEPS; i++)
        steps_ok &= (c->steps[i].entries = calloc((size_t)c->max_seqs, sizeof(entry_t))) != NULL;
    c->tokbuf = calloc((size_t)c->max_batch_tokens + (size_t)c->max_seqs, sizeof(int32_t));
    c->texts = calloc((size_t)c->max_seqs, sizeof(*c->texts));
    if (!c->eog || !c->eog_ids || !c->slot_used || !steps_ok || !c->tokbuf || !c->texts) {
        fail_pipeline(c, "out of memory");
        return;
    }
    c->ready = true;
    LP_INFO("coordinator: pipeline ready: %s, %d seqs, %d tokens a step, logits %s",
            e->model_name, c->max_seqs, c->max_batch_tokens, c->use_shm ? "in shared memory" : "inline");
}

static void on_hello_reply(lp_coord_t *c, int which, lp_frame_t *f)
{
    backend_t *b = &c->b[which];
    const Lmpipe__Msg *m = f->msg;
    char msg[700];
    if (m->body_case == LMPIPE__MSG__BODY_ERROR) {
        snprintf(msg, sizeof(msg), "%s refused the hello: %s", b->name, m->error->message);
        fail_pipeline(c, msg);
        return;
    }
    if (m->body_case != LMPIPE__MSG__BODY_HELLO || lp_hello_check(m->hello, b->role)) {
        snprintf(msg, sizeof(msg), "%s: bad hello reply: %s", b->name,
                 m->body_case == LMPIPE__MSG__BODY_HELLO ? lp_error_msg() : lp_msg_body_name(m->body_case));
        fail_pipeline(c, msg);
        return;
    }
    b->hello = f->msg; /* keep it */
    f->msg = NULL;
    if (which == B_ENG) send_hello(c, B_SAMP);
    check_ready(c);
}

/* ---- replies from the services ------------------------------------------------------ */

static void on_backend(lp_zsock_t *zs, void *sock, void *arg)
{
    backend_t *b = arg;
    lp_coord_t *c = b->owner;
    int which = b->which;
    lp_frame_t f;
    int rc = lp_frame_recv(sock, false, &f);
    if (rc == LP_ERR(EAGAIN)) return;
    if (rc) {
        lp_service_count_malformed(c->svc);
        LP_WARN("coordinator: malformed reply from %s: %s", b->name, lp_error_msg());
        lp_frame_clear(&f);
        return;
    }
    /* Find the operation; replies come in order, so it is the head.  A reply
     * to no pending operation (an Error for a quiet step) leaves the FIFO. */
    op_t op = {0};
    bool found = false, pending = false;
    for (size_t i = 0; i < b->n && !pending; i++) pending = b->ops[(b->head + i) % b->cap].id == f.msg->id;
    if (!pending) {
        if (f.msg->body_case == LMPIPE__MSG__BODY_ERROR)
            LP_WARN("coordinator: %s: %s", b->name, f.msg->error->message);
        else
            LP_WARN("coordinator: %s: unexpected reply %llu", b->name, (unsigned long long)f.msg->id);
        lp_frame_clear(&f);
        return;
    }
    while (b->n > 0) {
        op = b->ops[b->head];
        b->head = (b->head + 1) % b->cap;
        b->n--;
        if (op.id == f.msg->id) {
            found = true;
            break;
        }
        LP_WARN("coordinator: %s: no reply to message %llu", b->name, (unsigned long long)op.id);
    }
    if (!found) {
        LP_WARN("coordinator: %s: unexpected reply %llu", b->name, (unsigned long long)f.msg->id);
        lp_frame_clear(&f);
        return;
    }
    req_t *r = op.req && op.kind != OP_STEP && op.kind != OP_SAMPLE ? req_find(c, op.req) : NULL;
    step_t *st;
    switch (op.kind) {
    case OP_NONE: break;
    case OP_HELLO: on_hello_reply(c, which, &f); break;
    case OP_TOKENIZE: if (r) on_tokenized(c, r, f.msg); break;
    case OP_DETOK: if (r) on_detok(c, r, f.msg); break;
    case OP_STEP:
        if ((st = step_find(c, op.req)) != NULL) on_stepped(c, st, &f);
        break;
    case OP_SOPEN: if (r) on_opened(c, r, f.msg); break;
    case OP_SCLOSE: on_closed(c, r, f.msg); break;
    case OP_SAMPLE:
        if ((st = step_find(c, op.req)) == NULL) break;
        c->hold_tok = true;
        on_sampled(c, st, f.msg);
        lp__coord_pump(c); /* the next step first ... */
        c->hold_tok = false;
        send_texts(c); /* ... then the token events ... */
        send_held(c); /* ... and the pieces to detokenize */
        break;
    }
    lp_frame_clear(&f);
    lp__coord_pump(c);
    (void)zs;
}

/* ---- start and stop ----------------------------------------------------------------- */

static int on_start(void *ctx, lp_service_t *svc)
{
    lp_coord_t *c = ctx;
    c->svc = svc;
    const char *eps[B_COUNT] = {c->p.tokenizer_endpoint, c->p.engine_endpoint, c->p.sampler_endpoint};
    static const char *names[B_COUNT] = {"tokenizer-svc", "engine-svc", "sampler-svc"};
    static const Lmpipe__Role roles[B_COUNT] = {LMPIPE__ROLE__ROLE_TOKENIZER, LMPIPE__ROLE__ROLE_ENGINE,
                                                LMPIPE__ROLE__ROLE_SAMPLER};
    for (int i = 0; i < B_COUNT; i++) {
        backend_t *b = &c->b[i];
        b->name = names[i];
        b->role = roles[i];
        b->owner = c;
        b->which = i;
        b->sock = zmq_socket(lp_service_zmq_ctx(svc), ZMQ_DEALER);
        lp_service_sockopts(b->sock);
        if (zmq_connect(b->sock, eps[i]) != 0)
            return lp_error_set(LP_ERR(zmq_errno()), "coordinator: connect %s %s: %s", names[i],
                                eps[i], zmq_strerror(zmq_errno()));
        int rc = lp_zsock_new(lp_service_loop(svc), b->sock, on_backend, b, &b->zs);
        if (rc) return rc;
    }
    send_hello(c, B_TOK);
    send_hello(c, B_ENG);
    return 0;
}

static void on_stop(void *ctx, lp_service_t *svc)
{
    lp_coord_t *c = ctx;
    for (int i = 0; i < B_COUNT; i++) {
        lp_zsock_destroy(&c->b[i].zs);
        if (c->b[i].sock) zmq_close(c->b[i].sock);
        c->b[i].sock = NULL;
    }
    (void)svc;
}

int lp_coord_new(const lp_coord_params_t *p, lp_coord_t **out)
{
    *out = NULL;
    if (!p->tokenizer_endpoint || !p->engine_endpoint || !p->sampler_endpoint)
        return lp_error_set(LP_ERR(EINVAL), "coordinator: the three service endpoints are required");
    lp_coord_t *c = calloc(1, sizeof(*c));
    if (!c) return LP_ERR(ENOMEM);
    c->p = *p;
    *out = c;
    return 0;
}

void lp_coord_destroy(lp_coord_t **self_p)
{
    if (!self_p || !*self_p) return;
    lp_coord_t *c = *self_p;
    for (size_t i = 0; i < c->n_reqs; i++) lp__req_free(c->reqs[i]);
    free(c->reqs);
    for (int i = 0; i < B_COUNT; i++) {
        if (c->b[i].hello) lmpipe__msg__free_unpacked(c->b[i].hello, NULL);
        free(c->b[i].ops);
        if (c->b[i].sock) zmq_close(c->b[i].sock);
    }
    free(c->slot_used);
    for (int i = 0; i < MAX_STEPS; i++) free(c->steps[i].entries);
    free(c->tokbuf);
    free(c->eog);
    free(c->eog_ids);
    free(c->texts);
    for (size_t i = 0; i < c->n_held; i++) free(c->held[i].buf);
    free(c->held);
    free(c);
    *self_p = NULL;
}

static void on_stats(void *ctx, Lmpipe__StatsReply *out)
{
    out->n_active = ((lp_coord_t *)ctx)->n_reqs;
}

const lp_service_ops_t lp_coord_ops = {
    .name = "coordinator",
    .role = LMPIPE__ROLE__ROLE_COORDINATOR,
    .hello = lp__coord_client_hello,
    .handle = lp__coord_client,
    .start = on_start,
    .stop = on_stop,
    .stats = on_stats,
};
