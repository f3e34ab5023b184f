/* scheduler_test.c - the scheduler's plans for hand-built states:
 * continuous batching, the max_batch_tokens budget with prefill chunks,
 * chaining on the ring, fairness between decoding requests, and a request
 * that ends while its chained step is in flight; the placement of a new
 * request on an engine group. */
#include "scheduler.h"

#include "../tests/check.h"
#include "error.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_REQS = 8 };

static int32_t prompts[MAX_REQS][64];
static lp__sched_seq_t seqs[MAX_REQS];
static lp__sched_seq_t *list[MAX_REQS];

static void group(lp__sched_group_t *g, int32_t max_seqs, int32_t budget, bool ring, size_t slots)
{
    memset(g, 0, sizeof(*g));
    g->max_seqs = max_seqs;
    g->max_batch_tokens = budget;
    g->n_ctx = 4096;
    g->ring = ring;
    g->ring_slots = slots;
    g->ring_seq = 1000;
    CHECK_RC(lp__sched_group_init(g), 0);
}

/* Request i with an n-token prompt (tokens 100*i + k), admitted and running. */
static lp__sched_seq_t *req(lp__sched_group_t *g, int i, int32_t n_prompt, int32_t n_predict)
{
    lp__sched_seq_t *s = &seqs[i];
    for (int32_t k = 0; k < n_prompt; k++) prompts[i][k] = 100 * i + k;
    *s = (lp__sched_seq_t){.key = (uint64_t)i + 1, .prompt = prompts[i], .n_prompt = n_prompt,
                           .n_predict = n_predict};
    s->slot = lp__sched_take_slot(g);
    s->running = true;
    list[i] = s;
    return s;
}

static const lp__sched_entry_t *entry_of(const lp__sched_step_t *st, const lp__sched_seq_t *s)
{
    for (size_t i = 0; st && i < st->n_entries; i++)
        if (st->entries[i].req == s->key) return &st->entries[i];
    return NULL;
}

/* The step's SampleReply: token 7 for every row of a running request. */
static void sampled(lp__sched_step_t *st, int n)
{
    for (size_t i = 0; i < st->n_entries; i++) {
        if (!st->entries[i].n_logits) continue;
        for (int k = 0; k < n; k++)
            if (list[k]->key == st->entries[i].req && list[k]->running) {
                lp__sched_token(list[k], 7);
                list[k]->n_gen++;
            }
    }
    st->step_wait = st->sample_wait = false;
    lp__sched_retire(st);
}

/* A planned step that goes out inline (a StepReply, then a SampleReply). */
static lp__sched_step_t *plan(lp__sched_group_t *g, int n)
{
    lp__sched_step_t *st = lp__sched_plan(g, list, (size_t)n);
    if (st) st->step_wait = !st->early, st->sample_wait = st->early;
    return st;
}

static void test_continuous_batching(void)
{
    lp__sched_group_t g;
    group(&g, 4, 64, false, 0);
    lp__sched_seq_t *a = req(&g, 0, 5, -1), *b = req(&g, 1, 3, -1);
    lp__sched_step_t *st = plan(&g, 2);
    CHECK(st && st->n_entries == 2 && st->n_rows == 2);
    CHECK(entry_of(st, a)->n_tokens == 5 && entry_of(st, a)->pos == 0 && entry_of(st, a)->n_logits == 1);
    CHECK(entry_of(st, b)->n_tokens == 3 && entry_of(st, b)->tokens[0] == 100);
    CHECK(a->n_past == 5 && b->n_past == 3 && a->row_pending && !a->row_chainable);
    /* Inline: nothing more until the samples are back. */
    CHECK(plan(&g, 2) == NULL);
    sampled(st, 2);
    CHECK(a->has_next && a->next_tok == 7 && !a->row_pending);
    /* A third request joins the running ones: their decode tokens and its
     * whole prompt share the next step, decodes first. */
    lp__sched_seq_t *c = req(&g, 2, 4, -1);
    st = plan(&g, 3);
    CHECK(st && st->n_entries == 3);
    CHECK(entry_of(st, a)->n_tokens == 1 && entry_of(st, a)->tokens[0] == 7 && entry_of(st, a)->pos == 5);
    CHECK(entry_of(st, b)->pos == 3 && entry_of(st, c)->n_tokens == 4 && entry_of(st, c)->pos == 0);
    CHECK(st->entries[2].req == c->key);
    CHECK(!a->has_next && a->n_past == 6);
    sampled(st, 3);
    /* b ends: it leaves the steps and its slot is the next one taken. */
    int32_t b_slot = b->slot;
    lp__sched_release(&g, b);
    st = plan(&g, 3);
    CHECK(st && st->n_entries == 2 && !entry_of(st, b));
    CHECK(lp__sched_take_slot(&g) == b_slot);
    sampled(st, 3);
    lp__sched_group_free(&g);
}

static void test_budget_chunks(void)
{
    lp__sched_group_t g;
    group(&g, 4, 8, false, 0);
    lp__sched_seq_t *a = req(&g, 0, 20, -1);
    int32_t want[3] = {8, 8, 4};
    for (int k = 0; k < 3; k++) {
        lp__sched_step_t *st = plan(&g, 1);
        CHECK(st && st->n_entries == 1);
        const lp__sched_entry_t *e = entry_of(st, a);
        CHECK(e->n_tokens == want[k] && e->pos == 8 * k && e->tokens[0] == 8 * k);
        CHECK(e->n_logits == (k == 2), "only the last chunk asks for a row");
        CHECK(st->n_rows == (size_t)(k == 2));
        sampled(st, 1);
    }
    CHECK(a->n_past == 20 && a->has_next);
    /* A decoding request and a long prompt: the decode token comes first and
     * the prompt's chunk gets what is left of the budget. */
    lp__sched_seq_t *b = req(&g, 1, 30, -1);
    lp__sched_step_t *st = plan(&g, 2);
    CHECK(st && st->n_entries == 2 && st->entries[0].req == a->key);
    CHECK(entry_of(st, b)->n_tokens == 7 && entry_of(st, b)->n_logits == 0);
    int32_t total = 0;
    for (size_t i = 0; i < st->n_entries; i++) total += st->entries[i].n_tokens;
    CHECK(total == 8);
    sampled(st, 2);
    /* With prefill_chunk, a step that decodes takes at most that many
     * prompt tokens; a step with nothing to decode still takes the whole
     * budget. */
    g.prefill_chunk = 3;
    st = plan(&g, 2);
    CHECK(st && st->n_entries == 2 && entry_of(st, a)->n_tokens == 1 && entry_of(st, b)->n_tokens == 3,
          "beside a decode token, a chunk of prefill_chunk tokens");
    sampled(st, 2);
    a->running = false;
    st = plan(&g, 2);
    CHECK(st && st->n_entries == 1 && entry_of(st, b)->n_tokens == 8, "nothing to decode: the whole budget");
    sampled(st, 2);
    a->running = true;
    g.prefill_chunk = 0;
    /* max_seqs bounds the entries, whatever the budget. */
    lp__sched_group_free(&g);
    group(&g, 2, 64, false, 0);
    req(&g, 0, 2, -1), req(&g, 1, 2, -1);
    seqs[2] = (lp__sched_seq_t){.key = 3, .prompt = prompts[2], .n_prompt = 2, .n_predict = -1,
                                .slot = 2, .running = true};
    list[2] = &seqs[2];
    st = plan(&g, 3);
    CHECK(st && st->n_entries == 2 && !entry_of(st, &seqs[2]));
    lp__sched_group_free(&g);
}

static void test_chaining(void)
{
    lp__sched_group_t g;
    group(&g, 4, 64, true, 4);
    lp__sched_seq_t *a = req(&g, 0, 3, -1), *b = req(&g, 1, 3, 2);
    lp__sched_step_t *s1 = plan(&g, 2);
    CHECK(s1 && s1->early && s1->ring_base == 0 && s1->n_rows == 2);
    CHECK(entry_of(s1, a)->row_slot == 0 && entry_of(s1, b)->row_slot == 1);
    CHECK(entry_of(s1, a)->row_seq == 1001 && entry_of(s1, b)->row_seq == 1002);
    CHECK(a->row_pending && a->row_chainable && a->row_slot == 0 && a->row_seq == 1001);
    /* The next step goes out at once, chained on the first one's rows; b's
     * pending token may be its last (n_predict 2 counts it and the next):
     * it is chained, and a third token would not be. */
    lp__sched_step_t *s2 = plan(&g, 2);
    CHECK(s2 && s2 != s1 && s2->no == s1->no + 1);
    const lp__sched_entry_t *ea = entry_of(s2, a), *eb = entry_of(s2, b);
    CHECK(ea && !ea->tokens && ea->chain_slot == 0 && ea->chain_seq == 1001 && ea->pos == 3);
    CHECK(eb && !eb->tokens && eb->chain_slot == 1 && eb->chain_seq == 1002);
    CHECK(a->fed_ahead == 1 && b->fed_ahead == 1 && a->n_past == 4);
    /* Its rows lie clear of the step in flight, in the ring (the decode
     * pass starts one request further: b's row first). */
    CHECK(s2->ring_base == 2 && eb->row_slot == 2 && ea->row_slot == 3);
    CHECK(ea->row_seq == 1004 && a->row_slot == 3 && a->row_seq == 1004);
    CHECK(!lp__sched_will_continue(&g, b));
    /* Two steps in flight: no third. */
    CHECK(plan(&g, 2) == NULL);
    /* The first step's samples: already fed by the chained step. */
    CHECK(lp__sched_token(a, 7) == true && a->fed_ahead == 0 && !a->has_next && a->row_pending);
    a->n_gen++;
    CHECK(lp__sched_token(b, 7) == true);
    b->n_gen++;
    s1->sample_wait = false;
    lp__sched_retire(s1);
    CHECK(s1->no == 0);
    /* A third step chains a on the second step's row; b, at its limit,
     * waits.  Its row goes to the lowest slots clear of the second step's. */
    lp__sched_step_t *s3 = plan(&g, 2);
    CHECK(s3 && s3->n_entries == 1 && entry_of(s3, a) && !entry_of(s3, b));
    CHECK(entry_of(s3, a)->chain_slot == 3 && entry_of(s3, a)->chain_seq == 1004);
    CHECK(s3->ring_base == 0 && entry_of(s3, a)->row_slot == 0);
    lp__sched_group_free(&g);

    /* Too few ring slots for both steps' rows: the rows that do not fit wait. */
    group(&g, 4, 64, true, 3);
    a = req(&g, 0, 2, -1), b = req(&g, 1, 2, -1);
    s1 = plan(&g, 2);
    CHECK(s1 && s1->n_rows == 2);
    s2 = plan(&g, 2);
    CHECK(s2 && s2->n_rows == 1 && s2->n_entries == 1);
    lp__sched_group_free(&g);

    /* Inline rows never chain. */
    group(&g, 4, 64, false, 0);
    a = req(&g, 0, 2, -1);
    s1 = plan(&g, 1);
    CHECK(s1 && !s1->early && !a->row_chainable);
    CHECK(plan(&g, 1) == NULL);
    lp__sched_group_free(&g);
}

static void test_fairness(void)
{
    /* Five decoding requests, a budget of two tokens: each step starts one
     * request further, so over five steps each gets exactly two. */
    lp__sched_group_t g;
    group(&g, 8, 2, false, 0);
    for (int i = 0; i < 5; i++) {
        lp__sched_seq_t *s = req(&g, i, 1, -1);
        s->n_past = 1;
        s->has_next = true;
        s->next_tok = 9;
    }
    int got[5] = {0};
    for (int step = 0; step < 5; step++) {
        lp__sched_step_t *st = plan(&g, 5);
        CHECK(st && st->n_entries == 2);
        for (size_t i = 0; st && i < st->n_entries; i++) got[st->entries[i].req - 1]++;
        if (st) sampled(st, 5);
    }
    for (int i = 0; i < 5; i++) CHECK(got[i] == 2, "request %d got %d tokens", i, got[i]);
    lp__sched_group_free(&g);
}

static void test_end_while_chained(void)
{
    lp__sched_group_t g;
    group(&g, 4, 64, true, 8);
    lp__sched_seq_t *a = req(&g, 0, 2, -1), *b = req(&g, 1, 2, -1);
    lp__sched_step_t *s1 = plan(&g, 2), *s2 = plan(&g, 2);
    CHECK(s1 && s2 && entry_of(s2, a) && entry_of(s2, b));
    uint64_t s2_no = s2->no;
    /* a's token from the first step ends it (an end-of-generation token):
     * the chained step has fed a token for nothing; a leaves the steps. */
    lp__sched_token(a, 2);
    int32_t a_slot = a->slot;
    lp__sched_release(&g, a);
    lp__sched_token(b, 7);
    b->n_gen++;
    s1->sample_wait = false;
    lp__sched_retire(s1);
    /* The next step holds b only, chained on the second step's row, and its
     * row stays clear of the second step's two (a's row is still read). */
    lp__sched_step_t *s3 = plan(&g, 2);
    CHECK(s3 && s3->n_entries == 1 && entry_of(s3, b) && !entry_of(s3, a));
    CHECK(entry_of(s3, b)->chain_seq == entry_of(s2, b)->row_seq);
    CHECK(entry_of(s3, b)->row_slot != entry_of(s2, a)->row_slot &&
          entry_of(s3, b)->row_slot != entry_of(s2, b)->row_slot);
    /* a's slot is free for a new request while its last row is in flight. */
    CHECK(lp__sched_take_slot(&g) == a_slot);
    /* The second step's sample reply: a's row is dropped (not running), b's
     * token was fed ahead. */
    CHECK(lp__sched_step_find(&g, s2_no) == s2);
    sampled(s2, 2);
    CHECK(!a->running && b->fed_ahead == 0 && b->row_pending);
    CHECK(lp__sched_step_find(&g, s2_no) == NULL);
    lp__sched_group_free(&g);
}

/* Placement: the ready group with the most free capacity (free slots less
 * those waiting), then the fewest waiting, then the first. */
static void test_placement(void)
{
    lp__sched_place_t g[3] = {{true, 4, 0}, {true, 4, 0}, {false, 16, 0}};
    CHECK(lp__sched_place(g, 3) == 0);      /* a tie: the first; never the one down */
    g[0].free_slots = 3;
    CHECK(lp__sched_place(g, 3) == 1);      /* more free slots */
    g[1].waiting = 2;                       /* 4 free, 2 already waiting: 2 left */
    CHECK(lp__sched_place(g, 3) == 0);
    g[0] = (lp__sched_place_t){true, 0, 1}; /* full, with one waiting: -1 */
    g[1] = (lp__sched_place_t){true, 0, 3}; /* full, three waiting: -3 */
    CHECK(lp__sched_place(g, 3) == 0);
    g[0] = (lp__sched_place_t){true, 2, 2}; /* both 0 left: the fewer waiting */
    g[1] = (lp__sched_place_t){true, 1, 1};
    CHECK(lp__sched_place(g, 3) == 1);
    /* Requests placed one after another alternate between equal groups. */
    lp__sched_place_t h[2] = {{true, 8, 0}, {true, 8, 0}};
    int n[2] = {0, 0};
    for (int i = 0; i < 16; i++) {
        int k = lp__sched_place(h, 2);
        CHECK(k == i % 2);
        n[k]++;
        h[k].waiting++;
    }
    CHECK(n[0] == 8 && n[1] == 8);
    h[0].ready = h[1].ready = false;
    CHECK(lp__sched_place(h, 2) == -1);     /* none ready */
    CHECK(lp__sched_place(h, 0) == -1);
}

int main(void)
{
    test_placement();
    test_continuous_batching();
    test_budget_chunks();
    test_chaining();
    test_fairness();
    test_end_while_chained();
    return CHECK_DONE();
}
