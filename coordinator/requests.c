/* requests.c - the coordinator's request table, and a request's life:
 *
 *   TOKENIZING  waiting for tokenizer-svc (skipped for prompt_ids)
 *   WAIT_SLOT   waiting for a free engine sequence slot (FIFO)
 *   OPENING     SamplerOpen sent
 *   RUNNING     in the steps: prefill chunks, then one decode token a step
 *   DONE        finished; freed once the end of its text is back (the
 *               sampler's final flush) and the final event has gone out */
#include "coord-internal.h"

#include "error.h"
#include "log.h"
#include "sysinfo.h"

#include <stdlib.h>
#include <string.h>

lp__req_t *lp__req_find(lp_coord_t *c, uint64_t key)
{
    for (size_t i = 0; i < c->n_reqs; i++)
        if (c->reqs[i]->s.key == key) return c->reqs[i];
    return NULL;
}

lp__req_t *lp__req_find_client(lp_coord_t *c, const uint8_t *peer, size_t len, uint64_t id)
{
    for (size_t i = 0; i < c->n_reqs; i++) {
        lp__req_t *r = c->reqs[i];
        /* One whose final event is out is the client's no longer. */
        if (r->client_id == id && r->peer_len == len && !memcmp(r->peer, peer, len) && !r->final_sent) return r;
    }
    return NULL;
}

static int grow(void **arr, size_t *cap, size_t n)
{
    if (n < *cap) return 0;
    size_t nc = *cap ? 2 * *cap : 64;
    void *p = realloc(*arr, nc * sizeof(void *));
    if (!p) return LP_ERR(ENOMEM);
    *arr = p;
    *cap = nc;
    return 0;
}

int lp__req_add(lp_coord_t *c, lp__req_t *r)
{
    if (grow((void **)&c->reqs, &c->cap_reqs, c->n_reqs))
        return lp_error_set(LP_ERR(ENOMEM), "generate: out of memory");
    c->reqs[c->n_reqs++] = r;
    return 0;
}

int lp__req_place(lp__req_t *r, lp__group_t *g)
{
    if (grow((void **)&g->seqs, &g->cap_seqs, g->n_seqs))
        return lp_error_set(LP_ERR(ENOMEM), "generate: out of memory");
    g->seqs[g->n_seqs++] = &r->s;
    r->group = g;
    return 0;
}

void lp__req_free(lp__req_t *r)
{
    free(r->prompt);
    free(r->gen);
    free(r->replay);
    free(r->tok_msg);
    if (r->sampling) lmpipe__sampling_params__free_unpacked(r->sampling, NULL);
    for (size_t i = 0; i < r->n_stops; i++) free(r->stops[i]);
    free(r->stops);
    free(r->stop_lens);
    lp_textstream_destroy(&r->ts);
    free(r->tail);
    free(r->s.hist);
    free(r->s.blocks);
    free(r->s.swa);
    free(r);
}

int lp__req_push_token(lp__req_t *r, int32_t tok)
{
    if (r->s.n_gen >= r->cap_gen) {
        int32_t cap = r->cap_gen ? 2 * r->cap_gen : 64;
        int32_t *n = realloc(r->gen, (size_t)cap * sizeof(int32_t));
        if (!n) return LP_ERR(ENOMEM);
        r->gen = n;
        r->cap_gen = cap;
    }
    r->gen[r->s.n_gen] = tok;
    return 0;
}

void lp__req_tokenize(lp_coord_t *c, lp__req_t *r)
{
    lp__link_t *tl = lp__tok_pick(c);
    if (!tl) return; /* sent once a tokenizer is ready (lp__coord_pump) */
    Lmpipe__Msg *m = lmpipe__msg__unpack(NULL, r->tok_len, r->tok_msg);
    int rc = m ? lp__link_send(tl, OP_TOKENIZE, r->s.key, m, NULL, 0) : LP_ERR(ENOMEM);
    if (m) lmpipe__msg__free_unpacked(m, NULL);
    if (rc) {
        lp__coord_fail(c, r, E_TOKENIZER, "cannot reach tokenizer-svc");
        return;
    }
    r->tok = tl;
}

static void remove_ptr(void **arr, size_t *n, const void *p)
{
    for (size_t i = 0; i < *n; i++)
        if (arr[i] == p) {
            memmove(&arr[i], &arr[i + 1], (*n - i - 1) * sizeof(void *));
            (*n)--;
            return;
        }
}

void lp__req_unplace(lp__req_t *r)
{
    if (r->group) remove_ptr((void **)r->group->seqs, &r->group->n_seqs, &r->s);
    r->group = NULL;
}

void lp__req_requeue(lp_coord_t *c, lp__req_t *r)
{
    lp__group_t *g = r->group;
    /* The prefill replays what the request has so far: its next token is
     * the one the lost steps would have given. */
    int32_t n = r->n_prompt + r->s.n_gen;
    int32_t *buf = realloc(r->replay, (size_t)n * sizeof(int32_t));
    if (!buf) {
        lp__coord_fail(c, r, E_INTERNAL, "out of memory");
        return;
    }
    r->replay = buf;
    memcpy(buf, r->prompt, (size_t)r->n_prompt * sizeof(int32_t));
    if (r->s.n_gen) memcpy(buf + r->n_prompt, r->gen, (size_t)r->s.n_gen * sizeof(int32_t));
    if (g) {
        if (r->queue_pending && g->n_queue_pending) g->n_queue_pending--;
        lp__sched_release(&g->s, &r->s);
        /* Its session may outlive the group's drop (a sampler that stayed
         * up): it is closed when the group is back, and the request opens
         * a new one under a new key. */
        if (r->state == R_OPENING || r->state == R_RUNNING) {
            if (g->n_stale == g->cap_stale) {
                size_t cap = g->cap_stale ? 2 * g->cap_stale : 16;
                uint64_t *k = realloc(g->stale, cap * sizeof(uint64_t));
                if (k) {
                    g->stale = k;
                    g->cap_stale = cap;
                }
            }
            if (g->n_stale < g->cap_stale) g->stale[g->n_stale++] = r->s.key;
        }
    }
    lp__req_unplace(r);
    r->queue_pending = false;
    r->session_open = false;
    r->s.key = ++c->next_key;
    r->s.prompt = buf;
    r->s.n_prompt = n;
    r->s.running = false;
    r->s.slot = -1;
    r->s.n_past = 0;
    r->s.has_next = r->s.row_pending = r->s.row_chainable = false;
    r->s.fed_ahead = 0;
    r->state = R_WAIT_SLOT;
    c->n_redriven++;
}

static void req_remove(lp_coord_t *c, lp__req_t *r)
{
    remove_ptr((void **)c->reqs, &c->n_reqs, r);
    lp__req_unplace(r);
    lp__req_free(r);
    lp__drain_check(c);
}

bool lp__req_text_wanted(const lp__req_t *r)
{
    return r->state != R_DONE || r->reason == LMPIPE__FINISH_REASON__FINISH_EOS ||
           r->reason == LMPIPE__FINISH_REASON__FINISH_LENGTH ||
           r->reason == LMPIPE__FINISH_REASON__FINISH_CONTEXT;
}

void lp__req_send_client(lp_coord_t *c, lp__req_t *r, Lmpipe__Msg *m)
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

static void send_final(lp_coord_t *c, lp__req_t *r)
{
    r->final_sent = true;
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
    uint64_t now = lp_now_ns();
    static const enum lp__finkind fin[] = {
        [LMPIPE__FINISH_REASON__FINISH_EOS] = F_STOP,        [LMPIPE__FINISH_REASON__FINISH_STOP] = F_STOP,
        [LMPIPE__FINISH_REASON__FINISH_LENGTH] = F_LENGTH,   [LMPIPE__FINISH_REASON__FINISH_CONTEXT] = F_CONTEXT,
        [LMPIPE__FINISH_REASON__FINISH_CANCELLED] = F_CANCELLED, [LMPIPE__FINISH_REASON__FINISH_ERROR] = F_ERROR,
    };
    if (r->reason > 0 && (size_t)r->reason < sizeof(fin) / sizeof(fin[0])) c->m.finished[fin[r->reason]]++;
    lp__metrics_observe(&c->m.h[H_E2E], now - r->t_start);
    f.queue_ms = (double)((r->t_queue ? r->t_queue : now) - r->t_start) / 1e6;
    f.n_prompt = (uint32_t)(r->n_prompt ? r->n_prompt : r->s.n_prompt);
    f.n_generated = (uint32_t)r->s.n_gen;
    f.n_cached = (uint32_t)r->n_cached;
    uint64_t t_first = r->t_first ? r->t_first : now;
    f.prompt_ms = (double)(t_first - r->t_start) / 1e6;
    f.generate_ms = r->t_last > t_first ? (double)(r->t_last - t_first) / 1e6 : 0;
    if (r->error[0]) f.error = r->error;
    f.retryable = r->retryable && r->reason == LMPIPE__FINISH_REASON__FINISH_ERROR;
    if (r->reason == LMPIPE__FINISH_REASON__FINISH_ERROR) {
        f.error_kind = (Lmpipe__ErrorKind)(r->err_kind ? r->err_kind : LP_EK_INTERNAL);
        f.error_param = r->err_param;
    }
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.body_case = LMPIPE__MSG__BODY_FINAL;
    m.final = &f;
    lp__req_send_client(c, r, &m);
    free(tail);
}

void lp__req_final_now(lp_coord_t *c, lp__req_t *r)
{
    if (r->state == R_DONE && !r->final_sent) send_final(c, r);
}

void lp__req_maybe_final(lp_coord_t *c, lp__req_t *r)
{
    if (r->state != R_DONE) return;
    if (r->close_pending) {
        /* An error has no text to flush: its client hears at once, though a
         * sampler busy in a wait answers the close late.  The request stays
         * until then, for the replies still due. */
        if (r->reason == LMPIPE__FINISH_REASON__FINISH_ERROR && !r->final_sent) send_final(c, r);
        return;
    }
    if (!r->final_sent) send_final(c, r);
    req_remove(c, r);
}

void lp__coord_fail_kind(lp_coord_t *c, lp__req_t *r, enum lp__errkind kind, enum lp_error_kind ek,
                         const char *param, const char *error)
{
    if (r->state != R_DONE) {
        c->m.errors[kind]++;
        r->err_kind = ek;
        snprintf(r->err_param, sizeof(r->err_param), "%s", param ? param : "");
    }
    lp__coord_finish(c, r, LMPIPE__FINISH_REASON__FINISH_ERROR, error);
}

void lp__coord_fail(lp_coord_t *c, lp__req_t *r, enum lp__errkind kind, const char *error)
{
    lp__coord_fail_kind(c, r, kind, kind == E_BAD_REQUEST ? LP_EK_INVALID_REQUEST : LP_EK_INTERNAL, NULL, error);
}

void lp__coord_fail_retryable(lp_coord_t *c, lp__req_t *r, enum lp__errkind kind, const char *error)
{
    if (r->state != R_DONE) r->retryable = true;
    lp__coord_fail_kind(c, r, kind, LP_EK_UNAVAILABLE, NULL, error);
}

void lp__coord_finish(lp_coord_t *c, lp__req_t *r, Lmpipe__FinishReason reason, const char *error)
{
    if (r->state == R_DONE) {
        /* A stop string found in text that arrives after a natural end wins. */
        if (reason == LMPIPE__FINISH_REASON__FINISH_STOP) r->reason = reason;
        return;
    }
    r->state = R_DONE;
    r->reason = reason;
    if (r->queue_pending) { /* ended before its first step went out */
        r->queue_pending = false;
        r->group->n_queue_pending--;
    }
    if (error) snprintf(r->error, sizeof(r->error), "%s", error);
    if (r->group) lp__sched_release(&r->group->s, &r->s);
    if (r->session_open) {
        /* The close flushes the sampler's decoder (the end of the text);
         * the final event waits for its answer. */
        Lmpipe__Msg m = LMPIPE__MSG__INIT;
        Lmpipe__SamplerClose sc = LMPIPE__SAMPLER_CLOSE__INIT;
        sc.session = r->s.key;
        sc.flush = lp__req_text_wanted(r);
        m.body_case = LMPIPE__MSG__BODY_SAMPLER_CLOSE;
        m.sampler_close = &sc;
        r->close_pending = lp__link_send(&r->group->samp, OP_SCLOSE, r->s.key, &m, NULL, 0) == 0;
        r->session_open = false;
    }
    lp__req_maybe_final(c, r);
}
