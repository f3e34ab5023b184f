/* text.c - token text to the client: each token's piece (from the
 * sampler's decoder) through the request's stop strings, as a token event;
 * the decoder's final flush into the final event's tail. */
#include "coord-internal.h"

#include "log.h"
#include "sysinfo.h"

#include <stdlib.h>
#include <string.h>

/* One token's text: through the stop strings, then to the client as a
 * token event.  May finish the request (a stop string, a client that has
 * gone); the request stays allocated while its final flush is pending. */
static void text_piece(lp_coord_t *c, lp__req_t *r, const lp__tokinfo_t *ti, const uint8_t *data,
                       size_t len)
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
    lp__req_send_client(c, r, &em);
    if (r->client_gone) {
        lp__coord_finish(c, r, LMPIPE__FINISH_REASON__FINISH_CANCELLED, "the client has gone");
        return;
    }
    if (stop >= 0) {
        r->stop_idx = stop; /* later pieces are past the stop string: dropped */
        lp__coord_finish(c, r, LMPIPE__FINISH_REASON__FINISH_STOP, NULL);
        return;
    }
    /* llama.cpp's t_max_predict_ms: past the time since the first token,
     * once a newline has been generated, the text ends as at a length
     * limit (for code completion: a whole line or more). */
    if (r->t_max_predict_ms) {
        r->has_newline = r->has_newline || memchr(data, '\n', len) != NULL;
        if (r->has_newline && r->t_first &&
            lp_now_ns() - r->t_first > (uint64_t)r->t_max_predict_ms * 1000000)
            lp__coord_finish(c, r, LMPIPE__FINISH_REASON__FINISH_LENGTH, NULL);
    }
}

/* A stop string found here ends the request; a step already holding its
 * next token is then computed for nothing, as after an end-of-generation
 * token.  The texts point into the sample reply, which lives until its
 * handler returns. */
void lp__text_send(lp_coord_t *c, lp__group_t *g)
{
    for (size_t i = 0; i < g->n_texts; i++) {
        lp__req_t *r = lp__req_find(c, g->texts[i].req);
        if (r && lp__req_text_wanted(r)) text_piece(c, r, &g->texts[i].ti, g->texts[i].data, g->texts[i].len);
    }
    g->n_texts = 0;
}

/* The text held back at the end (the decoder's final flush): it goes into
 * the final event's tail. */
static void text_tail(lp__req_t *r, const uint8_t *data, size_t len)
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

void lp__text_on_closed(lp_coord_t *c, lp__req_t *r, const Lmpipe__Msg *m)
{
    if (m->body_case == LMPIPE__MSG__BODY_ERROR)
        LP_DEBUG("coordinator: sampler_close: %s", m->error->message);
    if (!r || !r->close_pending) return;
    r->close_pending = false;
    if (lp__req_text_wanted(r)) {
        if (m->body_case == LMPIPE__MSG__BODY_SAMPLER_CLOSE) {
            text_tail(r, m->sampler_close->flushed.data, m->sampler_close->flushed.len);
        } else {
            r->reason = LMPIPE__FINISH_REASON__FINISH_ERROR;
            c->m.errors[E_SAMPLER]++;
            snprintf(r->error, sizeof(r->error), "sampler: %s",
                     m->body_case == LMPIPE__MSG__BODY_ERROR ? m->error->message : "bad reply");
        }
    }
    lp__req_maybe_final(c, r);
}
