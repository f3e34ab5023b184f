/* scheduler.c - the coordinator's scheduler (see scheduler.h). */
#include "scheduler.h"

#include "error.h"

#include <stdlib.h>
#include <string.h>

int lp__sched_group_init(lp__sched_group_t *g)
{
    g->slot_used = calloc((size_t)g->max_seqs, 1);
    g->tokbuf = calloc((size_t)g->max_batch_tokens + (size_t)g->max_seqs, sizeof(int32_t));
    bool ok = g->slot_used && g->tokbuf;
    for (int i = 0; i < LP__SCHED_MAX_STEPS; i++)
        ok &= (g->steps[i].entries = calloc((size_t)g->max_seqs, sizeof(lp__sched_entry_t))) != NULL;
    return ok ? 0 : lp_error_set(LP_ERR(ENOMEM), "coordinator: out of memory");
}

void lp__sched_group_free(lp__sched_group_t *g)
{
    free(g->slot_used);
    free(g->tokbuf);
    for (int i = 0; i < LP__SCHED_MAX_STEPS; i++) free(g->steps[i].entries);
    g->slot_used = NULL;
    g->tokbuf = NULL;
}

int lp__sched_place(const lp__sched_place_t *groups, size_t n)
{
    int best = -1;
    int64_t best_free = 0;
    for (size_t i = 0; i < n; i++) {
        const lp__sched_place_t *g = &groups[i];
        if (!g->ready) continue;
        int64_t free_cap = (int64_t)g->free_slots - (int64_t)g->waiting;
        if (best < 0 || free_cap > best_free ||
            (free_cap == best_free && g->waiting < groups[best].waiting)) {
            best = (int)i;
            best_free = free_cap;
        }
    }
    return best;
}

int32_t lp__sched_take_slot(lp__sched_group_t *g)
{
    for (int32_t s = 0; s < g->max_seqs; s++)
        if (!g->slot_used[s]) {
            g->slot_used[s] = 1;
            return s;
        }
    return -1;
}

void lp__sched_release(lp__sched_group_t *g, lp__sched_seq_t *s)
{
    s->running = false;
    if (s->slot >= 0) g->slot_used[s->slot] = 0;
    s->slot = -1;
}

void lp__sched_retire(lp__sched_step_t *st)
{
    if (st->step_wait || st->sample_wait) return;
    st->no = 0;
    st->n_entries = 0;
    st->n_rows = 0;
}

lp__sched_step_t *lp__sched_step_find(lp__sched_group_t *g, uint64_t no)
{
    for (int i = 0; i < LP__SCHED_MAX_STEPS; i++)
        if (no && g->steps[i].no == no) return &g->steps[i];
    return NULL;
}

bool lp__sched_token(lp__sched_seq_t *s, int32_t tok)
{
    /* Tokens come back in step order: the oldest one fed ahead by a chained
     * step is this one; otherwise this was the newest row, and the token
     * waits for the next step. */
    if (s->fed_ahead > 0) {
        s->fed_ahead--;
        return true;
    }
    s->row_pending = false;
    s->next_tok = tok;
    s->has_next = true;
    return false;
}

/* A chained step feeds the token of the pending row before it is known:
 * only when that token cannot be the last one the request gets (length or
 * context; an end-of-generation token still ends it, and the chained row is
 * then sampled and dropped). */
bool lp__sched_will_continue(const lp__sched_group_t *g, const lp__sched_seq_t *s)
{
    int32_t n_gen = s->n_gen + s->fed_ahead + 1;
    return (s->n_predict < 0 || n_gen < s->n_predict) && s->n_past < g->n_ctx;
}

lp__sched_step_t *lp__sched_plan(lp__sched_group_t *g, lp__sched_seq_t *const *seqs, size_t n)
{
    lp__sched_step_t *newest = NULL, *st = NULL;
    for (int i = 0; i < LP__SCHED_MAX_STEPS; i++) {
        if (!g->steps[i].no) st = &g->steps[i];
        else if (!newest || g->steps[i].no > newest->no) newest = &g->steps[i];
    }
    if (!st) return NULL;
    if (newest && !(g->ring && newest->early)) return NULL;
    bool chain = newest != NULL;
    /* Rows of both steps in flight must fit in the ring at once. */
    size_t row_cap = !chain ? SIZE_MAX : g->ring_slots > newest->n_rows ? g->ring_slots - newest->n_rows : 0;
    size_t n_seqs = 0, n_tok = 0, n_rows = 0;
    int32_t budget = g->max_batch_tokens;
    /* Decode tokens first, starting one request further each step so that
     * a budget smaller than the running requests starves none of them. */
    size_t start = n ? g->rr++ % n : 0;
    lp__sched_seq_t *owner[g->max_seqs];
    for (int pass = 0; pass < 2; pass++) {
        for (size_t j = 0; j < n && budget > 0 && n_seqs < (size_t)g->max_seqs; j++) {
            lp__sched_seq_t *r = seqs[pass == 0 ? (start + j) % n : j];
            if (!r->running) continue;
            bool decode = r->n_past >= r->n_prompt;
            if (decode != (pass == 0)) continue;
            bool chained = false;
            if (decode && !r->has_next) {
                if (!chain || !r->row_pending || !r->row_chainable || !lp__sched_will_continue(g, r)) continue;
                chained = true;
            }
            int32_t k;
            int32_t *toks = g->tokbuf + n_tok;
            if (decode) {
                k = 1;
                toks[0] = r->next_tok;
            } else {
                k = r->n_prompt - r->n_past;
                if (k > budget) k = budget;
                memcpy(toks, r->prompt + r->n_past, (size_t)k * sizeof(int32_t));
            }
            int32_t n_logits = decode || r->n_past + k == r->n_prompt ? 1 : 0;
            if (n_rows + (size_t)n_logits > row_cap) continue;
            lp__sched_entry_t *e = &st->entries[n_seqs];
            *e = (lp__sched_entry_t){.req = r->key, .slot = r->slot, .pos = r->n_past,
                                     .n_tokens = k, .tokens = chained ? NULL : toks,
                                     .n_logits = n_logits};
            if (chained) {
                e->chain_slot = r->row_slot;
                e->chain_seq = r->row_seq;
                r->fed_ahead++;
            }
            /* The cache will hold these tokens once the step has run (a
             * failed step ends the request), and the pending token is fed. */
            r->n_past += k;
            if (decode) r->has_next = false;
            e->n_past = r->n_past;
            owner[n_seqs++] = r;
            n_tok += (size_t)k;
            n_rows += (size_t)n_logits;
            budget -= k;
        }
    }
    if (n_seqs == 0) return NULL;
    st->no = ++g->next_step_no;
    st->n_entries = n_seqs;
    st->n_rows = n_rows;
    st->step_wait = st->sample_wait = false;
    /* With the ring, the coordinator picks the slots and sends the
     * SampleRequest along with the step.  The rows go to the lowest slots
     * clear of the step in flight (row_cap keeps them clear of it
     * cyclically), so that steps alternate between the same few slots: a
     * ring walked round uses n_slots rows of cache where one step at a time
     * uses one. */
    st->early = g->ring && n_rows > 0 && n_rows <= g->ring_slots;
    st->ring_base = 0;
    if (chain && n_rows > newest->ring_base)
        st->ring_base = (uint32_t)((newest->ring_base + newest->n_rows) % g->ring_slots);
    for (size_t i = 0, row = 0; i < n_seqs; i++) {
        lp__sched_entry_t *e = &st->entries[i];
        if (!e->n_logits) continue;
        lp__sched_seq_t *r = owner[i];
        r->row_pending = true;
        r->row_chainable = st->early;
        if (!st->early) continue;
        e->row_slot = (uint32_t)((st->ring_base + row) % g->ring_slots);
        e->row_seq = ++g->ring_seq;
        r->row_slot = e->row_slot;
        r->row_seq = e->row_seq;
        row++;
    }
    return st;
}
