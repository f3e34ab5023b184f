/* steps.c - a group's steps on the wire: the scheduler's plan becomes a
 * StepRequest (and, with the ring, the SampleRequest that goes with it);
 * the engine's and the sampler's replies become tokens.
 *
 * Inline, one engine step is in flight at a time, then one sample batch;
 * the next step is planned as soon as the samples are back.  With the ring,
 * two steps are in flight: the newer one is chained on the older one's rows
 * (the engine takes those tokens from the ring), so the engine never waits
 * for the coordinator.  Token text comes with the samples, and streaming it
 * overlaps the next step. */
#include "coord-internal.h"

#include "error.h"
#include "log.h"
#include "sysinfo.h"

#include <stdlib.h>
#include <string.h>

/* The waiting request of group g to admit next: round-robin across
 * clients (fairq.h), oldest first within a client. */
static lp__req_t *next_waiting(lp_coord_t *c, lp__group_t *g)
{
    lp__fair_pick_t pick;
    lp__fair_pick_begin(&pick, &c->fair);
    bool hold_suspects = lp__poison_suspect_running(c);
    for (size_t i = 0; i < c->n_reqs; i++) {
        const lp__req_t *r = c->reqs[i];
        if (r->state == R_WAIT_SLOT && r->group == g && !(r->suspect && hold_suspects))
            lp__fair_offer(&pick, i, r->client, r->client_len);
    }
    size_t at = lp__fair_pick_end(&pick);
    return at == SIZE_MAX ? NULL : c->reqs[at];
}

void lp__steps_admit(lp_coord_t *c, lp__group_t *g)
{
    if (g->state != G_READY) return;
    /* A full pool, or a preempted request still waiting for its blocks:
     * admission waits, so that newcomers cannot keep taking them. */
    if (g->s.paged) {
        if (lp__kv_available(&g->s.kv) == 0) return;
        for (size_t i = 0; i < g->n_seqs; i++)
            if (g->seqs[i]->parked) return;
    }
    lp__req_t *r;
    while ((r = next_waiting(c, g)) != NULL) {
        if (g->s.paged && lp__kv_available(&g->s.kv) == 0) return;
        int32_t slot = lp__sched_take_slot(&g->s);
        if (slot < 0) return;
        lp__fair_served(&c->fair, r->client, r->client_len);
        r->s.slot = slot;
        if (g->s.paged && r->s.n_prompt >= g->s.n_ctx) {
            char msg[160];
            snprintf(msg, sizeof(msg), "the prompt has %d tokens; group %s's KV pool holds %d",
                     r->s.n_prompt, g->name, g->s.n_ctx);
            lp__coord_fail_kind(c, r, E_BAD_REQUEST, LP_EK_CONTEXT_LENGTH, "prompt", msg);
            continue;
        }
        if (lp__sched_seq_start(&g->s, &r->s)) {
            lp__coord_fail(c, r, E_INTERNAL, "out of memory");
            continue;
        }
        /* A re-driven request (prompt + tokens so far, after a stage died)
         * counts in neither the prompt tokens nor the cache's queries again. */
        if (!r->admitted) {
            c->m.prompt_tokens += (uint64_t)r->n_prompt;
            if (g->s.paged && g->s.prefix_cache) {
                c->m.prefix_queries += (uint64_t)r->s.n_prompt;
                c->m.prefix_hits += (uint64_t)r->s.n_reused;
                g->prefix_hits += (uint64_t)r->s.n_reused;
                r->n_cached = r->s.n_reused;
            }
        }
        r->admitted = true;
        Lmpipe__Msg m = LMPIPE__MSG__INIT;
        Lmpipe__SamplerOpen so = LMPIPE__SAMPLER_OPEN__INIT;
        so.session = r->s.key;
        so.params = r->sampling;
        so.n_prompt_ids = (size_t)r->n_prompt;
        so.prompt_ids = r->prompt;
        /* Reopened after a stage died: the draws go on from here. */
        so.n_generated_ids = (size_t)r->s.n_gen;
        so.generated_ids = r->gen;
        so.has_mirostat_mu = r->s.n_gen > 0 && r->has_mu;
        so.mirostat_mu = r->mirostat_mu;
        so.has_random_seed = true;
        so.random_seed = r->random_seed;
        so.detok = true;
        if (!r->ignore_eos) { /* the text ends before an EOG token */
            so.n_detok_end_ids = c->n_eog_ids;
            so.detok_end_ids = c->eog_ids;
        }
        m.body_case = LMPIPE__MSG__BODY_SAMPLER_OPEN;
        m.sampler_open = &so;
        r->state = R_OPENING;
        r->session_open = true;
        if (lp__link_send(&g->samp, OP_SOPEN, r->s.key, &m, NULL, 0)) {
            r->session_open = false;
            lp__coord_fail(c, r, E_SAMPLER, "cannot reach sampler-svc");
        }
    }
}

void lp__steps_on_opened(lp_coord_t *c, lp__req_t *r, const Lmpipe__Msg *m)
{
    if (r->state != R_OPENING) return;
    if (m->body_case != LMPIPE__MSG__BODY_SAMPLER_OPEN) {
        r->session_open = false;
        /* The edge checked the parameters with the sampler's own reader: a
         * refusal here is the sampler's (a plugin it no longer has). */
        if (m->body_case == LMPIPE__MSG__BODY_ERROR && lp_frame_error_kind(m->error) == LP_EK_INVALID_REQUEST)
            lp__coord_fail_kind(c, r, E_BAD_REQUEST, LP_EK_INVALID_REQUEST, m->error->param, m->error->message);
        else
            lp__coord_fail(c, r, E_SAMPLER,
                           m->body_case == LMPIPE__MSG__BODY_ERROR ? m->error->message : "sampler: bad reply");
        return;
    }
    r->state = R_RUNNING;
    r->s.running = true;
    if (!r->t_queue) { /* queue time ends once, also for a re-driven request */
        r->queue_pending = true;
        r->group->n_queue_pending++;
    }
}

/* The step has run: its requests' KV is there (full blocks may be cached). */
static void confirm_entries(lp_coord_t *c, lp__group_t *g, const lp__sched_step_t *st)
{
    if (!g->s.paged) return;
    for (size_t i = 0; i < st->n_entries; i++) {
        lp__req_t *r = lp__req_find(c, st->entries[i].req);
        if (r && r->state == R_RUNNING)
            lp__sched_done(&g->s, &r->s, st->entries[i].n_past, st->entries[i].epoch);
    }
}

static void fail_entries(lp_coord_t *c, lp__sched_step_t *st, enum lp__errkind kind, const char *err)
{
    for (size_t i = 0; i < st->n_entries; i++) {
        lp__req_t *r = lp__req_find(c, st->entries[i].req);
        if (r) lp__coord_fail(c, r, kind, err);
    }
}

bool lp__steps_send(lp_coord_t *c, lp__group_t *g)
{
    if (g->state != G_READY) return false;
    uint64_t preempted = g->s.n_preempted;
    lp__sched_step_t *st = lp__sched_plan(&g->s, g->seqs, g->n_seqs);
    if (g->s.n_preempted != preempted) {
        c->m.preemptions += g->s.n_preempted - preempted;
        LP_DEBUG("coordinator: group %s: %llu requests preempted for KV blocks", g->name,
                 (unsigned long long)(g->s.n_preempted - preempted));
    }
    if (!st) return false;
    g->n_steps++;
    size_t n_seqs = st->n_entries, n_rows = st->n_rows;
    Lmpipe__StepSeq seqs[n_seqs], *sp[n_seqs];
    Lmpipe__RowRef chains[n_seqs];
    size_t nr = n_rows ? n_rows : 1;
    Lmpipe__RowRef refs[nr], *rp[nr];
    Lmpipe__SampleItem items[nr], *ip[nr];
    for (size_t i = 0, row = 0; i < n_seqs; i++) {
        const lp__sched_entry_t *e = &st->entries[i];
        lmpipe__step_seq__init(&seqs[i]);
        seqs[i].seq_id = e->slot;
        seqs[i].pos = e->pos;
        seqs[i].n_logits = e->n_logits;
        seqs[i].n_blocks = (size_t)e->n_blocks;
        seqs[i].blocks = (uint32_t *)e->blocks;
        seqs[i].n_swa_blocks = e->swa ? (size_t)e->n_blocks : 0;
        seqs[i].swa_blocks = (uint32_t *)e->swa;
        if (e->tokens) {
            seqs[i].n_tokens = (size_t)e->n_tokens;
            seqs[i].tokens = (int32_t *)e->tokens;
        } else {
            lmpipe__row_ref__init(&chains[i]);
            chains[i].slot = e->chain_slot;
            chains[i].seq = e->chain_seq;
            seqs[i].chain = &chains[i];
        }
        sp[i] = &seqs[i];
        if (!st->early || !e->n_logits) continue;
        lmpipe__row_ref__init(&refs[row]);
        refs[row].slot = e->row_slot;
        refs[row].seq = e->row_seq;
        rp[row] = &refs[row];
        lmpipe__sample_item__init(&items[row]);
        items[row].session = e->req;
        items[row].ref = &refs[row];
        ip[row] = &items[row];
        row++;
    }
    Lmpipe__StepRequest sr = LMPIPE__STEP_REQUEST__INIT;
    sr.n_seqs = n_seqs;
    sr.seqs = sp;
    sr.inline_rows = !g->s.ring;
    if (g->s.ring) sr.ring = (char *)g->ring;
    /* With the ring, the SampleRequest goes along with the step: the sampler
     * waits on the slots, and the engine answers only a failure. */
    if (st->early) {
        sr.n_rows = n_rows;
        sr.rows = rp;
        sr.quiet = true;
    }
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.body_case = LMPIPE__MSG__BODY_STEP;
    m.step = &sr;
    if (lp__link_send(&g->eng, st->early ? OP_NONE : OP_STEP, st->no, &m, NULL, 0) != 0) {
        fail_entries(c, st, E_ENGINE, "cannot reach engine-svc");
        st->no = 0;
        return false;
    }
    st->step_wait = !st->early;
    st->t_sent = lp_now_ns();
    st->engine_ns = 0;
    /* Queue time ends with a request's first step out. */
    for (size_t i = 0; g->n_queue_pending && i < n_seqs; i++) {
        lp__req_t *r = lp__req_find(c, st->entries[i].req);
        if (r && r->queue_pending) lp__metrics_queued(c, r, st->t_sent);
    }
    if (st->early) {
        Lmpipe__SampleRequest sq = LMPIPE__SAMPLE_REQUEST__INIT;
        sq.n_items = n_rows;
        sq.items = ip;
        sq.wait = true;
        sq.ring = sr.ring;
        Lmpipe__Msg sm = LMPIPE__MSG__INIT;
        sm.body_case = LMPIPE__MSG__BODY_SAMPLE;
        sm.sample = &sq;
        if (lp__link_send(&g->samp, OP_SAMPLE, st->no, &sm, NULL, 0) != 0) {
            /* The quiet step's rows will not be read: end the requests. */
            fail_entries(c, st, E_SAMPLER, "cannot reach sampler-svc");
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
    /* Tokenizations whose tokenizer dropped out, once one is back. */
    for (size_t i = c->n_reqs; i-- > 0;) {
        if (i >= c->n_reqs) continue;
        lp__req_t *r = c->reqs[i];
        if (r->state == R_TOKENIZING && !r->tok && r->tok_msg) lp__req_tokenize(c, r);
    }
    lp__groups_place(c);
    for (size_t i = 0; i < c->n_groups; i++) {
        lp__steps_admit(c, &c->groups[i]);
        while (lp__steps_send(c, &c->groups[i])) {
        }
    }
}

/* A step that was not quiet: positions were advanced when it was planned;
 * here only a failure matters, and sending its rows to the sampler. */
void lp__steps_on_stepped(lp_coord_t *c, lp__group_t *g, uint64_t no, const lp_frame_t *f)
{
    lp__sched_step_t *st = lp__sched_step_find(&g->s, no);
    if (!st) return;
    const Lmpipe__Msg *m = f->msg;
    st->step_wait = false;
    if (m->body_case != LMPIPE__MSG__BODY_STEP_REPLY) {
        fail_entries(c, st, E_ENGINE,
                     m->body_case == LMPIPE__MSG__BODY_ERROR ? m->error->message : "engine: bad reply");
        lp__sched_retire(st);
        return;
    }
    const Lmpipe__StepReply *sr = m->step_reply;
    st->engine_ns = sr->compute_ns;
    confirm_entries(c, g, st);
    size_t n_rows = st->n_rows;
    size_t raw_len;
    const void *raw = lp_frame_raw(f, &raw_len);
    bool rows_ok = g->s.ring ? sr->n_rows == n_rows
                             : raw_len == n_rows * (size_t)c->n_vocab * sizeof(float);
    if (!rows_ok) {
        LP_ERROR("coordinator: engine returned the wrong rows (%zu refs, %zu raw bytes; %zu rows)",
                 sr->n_rows, raw_len, n_rows);
        fail_entries(c, st, E_ENGINE, "engine: wrong logit rows");
        lp__sched_retire(st);
        return;
    }
    if (n_rows == 0) {
        lp__sched_retire(st);
        return;
    }
    /* Every row goes to the sampler, also those of requests that ended while
     * the step ran (session 0: release only), so the ring never leaks. */
    Lmpipe__SampleItem items[n_rows], *ip[n_rows];
    size_t row = 0;
    for (size_t i = 0; i < st->n_entries; i++) {
        if (!st->entries[i].n_logits) continue;
        lp__req_t *r = lp__req_find(c, st->entries[i].req);
        lmpipe__sample_item__init(&items[row]);
        items[row].session = r && r->state == R_RUNNING ? r->s.key : 0;
        if (g->s.ring) items[row].ref = sr->rows[row];
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
    if (lp__link_send(&g->samp, OP_SAMPLE, st->no, &out, g->s.ring ? NULL : raw,
                      g->s.ring ? 0 : raw_len) == 0)
        st->sample_wait = true;
    else
        fail_entries(c, st, E_SAMPLER, "cannot reach sampler-svc");
    lp__sched_retire(st);
}

/* One sampled token of a running request.  `e` is its entry in the step
 * the row came from. */
static void on_token(lp_coord_t *c, lp__req_t *r, const Lmpipe__SampleResult *res,
                     const lp__sched_entry_t *e)
{
    lp__sched_token(&r->s, res->token);
    if (res->error && res->error[0]) {
        lp__coord_fail(c, r, E_SAMPLER, res->error);
        return;
    }
    int32_t t = res->token;
    uint64_t now = lp_now_ns();
    if (!r->t_first) {
        r->t_first = now;
        lp__metrics_observe(&c->m.h[H_TTFT], now - r->t_start);
    } else {
        lp__metrics_observe(&c->m.h[H_ITL], now - r->t_last);
    }
    r->t_last = now;
    if (res->strategy_version > c->m.strategy_version) c->m.strategy_version = res->strategy_version;
    if (t >= 0 && t < c->n_vocab && c->eog[t] && !r->ignore_eos) {
        lp__coord_finish(c, r, LMPIPE__FINISH_REASON__FINISH_EOS, NULL);
        return;
    }
    if (lp__req_push_token(r, t) != 0) {
        lp__coord_fail(c, r, E_INTERNAL, "out of memory");
        return;
    }
    r->s.n_gen++;
    r->has_mu = res->has_mirostat_mu;
    r->mirostat_mu = res->mirostat_mu;
    c->m.generation_tokens++;
    lp__group_t *g = r->group;
    /* The sampler's decoder gave the text with the token: it goes to the
     * client once the next step is out (lp__text_send). */
    if (g->n_texts < (size_t)g->s.max_seqs) {
        struct lp__text *x = &g->texts[g->n_texts++];
        x->req = r->s.key;
        x->ti.id = t;
        x->ti.has_logprob = res->has_logprob;
        x->ti.logprob = res->logprob;
        x->ti.strategy_version = res->strategy_version;
        x->ti.n_top = 0;
        for (size_t k = 0; k < res->n_top && k < 32; k++) {
            lmpipe__token_prob__init(&x->ti.top[k]);
            x->ti.top[k].id = res->top[k]->id;
            x->ti.top[k].logprob = res->top[k]->logprob;
            x->ti.n_top = k + 1;
        }
        x->data = res->piece.data;
        x->len = res->piece.len;
    }
    if (r->s.n_predict >= 0 && r->s.n_gen >= r->s.n_predict)
        lp__coord_finish(c, r, LMPIPE__FINISH_REASON__FINISH_LENGTH, NULL);
    else if (e->n_past >= c->n_ctx || e->n_past >= r->group->s.n_ctx) /* the group's own may be smaller */
        lp__coord_finish(c, r, LMPIPE__FINISH_REASON__FINISH_CONTEXT, NULL);
}

void lp__steps_on_sampled(lp_coord_t *c, lp__group_t *g, uint64_t no, const Lmpipe__Msg *m)
{
    lp__sched_step_t *st = lp__sched_step_find(&g->s, no);
    if (!st) return;
    st->sample_wait = false;
    size_t row = 0;
    bool ok = m->body_case == LMPIPE__MSG__BODY_SAMPLE_REPLY;
    if (ok && st->n_rows) lp__metrics_step(c, g, st, m->sample_reply);
    /* A quiet step's rows are in the ring once the sampler has read them. */
    if (ok && st->early) confirm_entries(c, g, st);
    const char *err = m->body_case == LMPIPE__MSG__BODY_ERROR ? m->error->message : "sampler: bad reply";
    /* The sampler can see the engine gone (its ring's writer) before this
     * link does: the group is down, and its requests are re-driven rather
     * than failed. */
    for (size_t k = 0; ok && k < m->sample_reply->n_results; k++)
        if (m->sample_reply->results[k]->engine_lost) {
            lp__group_down(c, g, m->sample_reply->results[k]->error);
            return;
        }
    for (size_t i = 0; i < st->n_entries; i++) {
        if (!st->entries[i].n_logits) continue;
        lp__req_t *r = lp__req_find(c, st->entries[i].req);
        size_t k = row++;
        if (!r || r->state != R_RUNNING) continue;
        if (!ok || k >= m->sample_reply->n_results)
            lp__coord_fail(c, r, E_SAMPLER, err);
        else
            on_token(c, r, m->sample_reply->results[k], &st->entries[i]);
    }
    lp__sched_retire(st);
}
