/* scheduler_kv_test.c - the scheduler with a paged group: block tables
 * that grow with prefill chunks and decode tokens, a cached prefix that is
 * not prefilled again (and is not charged to the batch budget), never the
 * block of the last prompt token; a pool too small for the running
 * requests: the youngest is preempted, then recomputed from its prompt and
 * sampled tokens without a new row; decode tokens in every step while a
 * long prompt fills in; placement toward the group holding the prefix;
 * sliding-window layers: a request decoding to 8 windows holds only a
 * window's blocks of their pool (the counters read at each step), tables
 * name no block before the window, and a cached prefix is taken only as
 * far as the twins of its last window are cached. */
#include "scheduler.h"

#include "../tests/check.h"
#include "error.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_REQS = 6, BLK = 4 };

static int32_t prompts[MAX_REQS][64];
static lp__sched_seq_t seqs[MAX_REQS];
static lp__sched_seq_t *list[MAX_REQS];
static int32_t next_token = 500; /* sampled tokens: 500, 501, ... */

static void group(lp__sched_group_t *g, int32_t budget, int32_t n_blocks, bool cache)
{
    memset(g, 0, sizeof(*g));
    g->max_seqs = 4;
    g->max_batch_tokens = budget;
    g->n_ctx = 4096;
    g->paged = true;
    g->prefix_cache = cache;
    g->kv_block = BLK;
    g->kv_blocks = n_blocks;
    CHECK_RC(lp__sched_group_init(g), 0);
}

/* Request i, admitted and running, with the prompt p[0..n). */
static lp__sched_seq_t *req(lp__sched_group_t *g, int i, const int32_t *p, int32_t n)
{
    lp__sched_seq_t *s = &seqs[i];
    /* A request left over from a group the test has freed: only its memory. */
    free(s->hist);
    free(s->blocks);
    free(s->swa);
    memcpy(prompts[i], p, (size_t)n * sizeof(int32_t));
    *s = (lp__sched_seq_t){.key = (uint64_t)i + 1, .prompt = prompts[i], .n_prompt = n, .n_predict = -1};
    s->slot = lp__sched_take_slot(g);
    CHECK_RC(lp__sched_seq_start(g, s), 0);
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

/* The step ran (its KV is confirmed) and each row got a new token. */
static void ran(lp__sched_group_t *g, lp__sched_step_t *st, int n)
{
    for (size_t i = 0; i < st->n_entries; i++) {
        const lp__sched_entry_t *e = &st->entries[i];
        for (int k = 0; k < n; k++) {
            lp__sched_seq_t *s = list[k];
            if (!s || s->key != e->req || !s->running) continue;
            lp__sched_done(g, s, e->n_past, e->epoch);
            if (e->n_logits) {
                lp__sched_token(s, next_token++);
                s->n_gen++;
            }
        }
    }
    st->step_wait = st->sample_wait = false;
    lp__sched_retire(st);
}

static lp__sched_step_t *plan(lp__sched_group_t *g, int n)
{
    lp__sched_step_t *st = lp__sched_plan(g, list, (size_t)n);
    if (st) st->step_wait = true;
    return st;
}

static void seq_n(int32_t *p, int32_t n, int32_t first)
{
    for (int32_t k = 0; k < n; k++) p[k] = first + k;
}

static void test_reuse(void)
{
    lp__sched_group_t g;
    group(&g, 64, 16, true);
    int32_t p[20];
    seq_n(p, 10, 100);
    lp__sched_seq_t *a = req(&g, 0, p, 10);
    CHECK(a->n_reused == 0 && a->n_past == 0);
    lp__sched_step_t *st = plan(&g, 1);
    const lp__sched_entry_t *e = entry_of(st, a);
    CHECK(e && e->pos == 0 && e->n_tokens == 10 && e->n_blocks == 3 && e->n_logits == 1);
    CHECK(e && e->blocks[0] == 0 && e->blocks[1] == 1 && e->blocks[2] == 2);
    ran(&g, st, 1);
    CHECK(a->n_hashed == 2, "the two full blocks are registered once the step ran");
    /* A decodes to position 12: its third block fills, a fourth comes. */
    for (int k = 0; k < 3; k++) ran(&g, plan(&g, 1), 1);
    CHECK(a->n_past == 13 && a->n_blocks == 4 && a->n_done == 13);
    CHECK(a->n_hashed == 3, "a block of prompt and generated tokens is registered");
    lp__sched_release(&g, a);
    CHECK(g.kv.n_cached == 3 && g.kv.n_used == 0);

    /* B shares A's first nine tokens: two blocks (8 tokens) come from the
     * cache; only the rest is prefilled and charged to the budget. */
    lp__sched_group_free(&g);
    group(&g, 6, 16, true);
    a = req(&g, 0, p, 10);
    st = plan(&g, 1);
    CHECK(entry_of(st, a)->n_tokens == 6);
    ran(&g, st, 1);
    st = plan(&g, 1);
    CHECK(entry_of(st, a)->n_tokens == 4 && entry_of(st, a)->n_logits == 1);
    ran(&g, st, 1);
    int32_t q[12];
    memcpy(q, p, 9 * sizeof(int32_t));
    q[9] = 77;
    lp__sched_seq_t *b = req(&g, 1, q, 10);
    CHECK(b->n_reused == 8 && b->n_past == 8 && b->n_blocks == 2);
    CHECK(b->blocks[0] == a->blocks[0] && b->blocks[1] == a->blocks[1] && g.kv.b[a->blocks[0]].ref == 2);
    seq_n(p + 10, 4, 300);
    lp__sched_seq_t *c = req(&g, 2, p + 4, 9); /* nothing cached for it */
    CHECK(c->n_reused == 0);
    st = plan(&g, 3);
    CHECK(st && entry_of(st, a)->n_tokens == 1, "decode first");
    e = entry_of(st, b);
    CHECK(e && e->pos == 8 && e->n_tokens == 2 && e->tokens[0] == 108 && e->tokens[1] == 77);
    CHECK(e && e->n_blocks == 3 && e->blocks[0] == a->blocks[0] && e->n_logits == 1);
    CHECK(entry_of(st, c) && entry_of(st, c)->n_tokens == 3, "the budget of 6 counts B's 2 tokens only");
    ran(&g, st, 3);
    /* The last prompt token's block is never taken: a prompt equal to a
     * cached 8-token prefix reuses one block and prefills the other. */
    lp__sched_seq_t *d = req(&g, 3, p, 8);
    CHECK(d->n_reused == 4 && d->n_past == 4);
    lp__sched_group_free(&g);
    /* With the cache off nothing is shared. */
    group(&g, 64, 16, false);
    a = req(&g, 0, p, 10);
    ran(&g, plan(&g, 1), 1);
    lp__sched_release(&g, a);
    CHECK(g.kv.n_cached == 0 && g.kv.n_free == 16);
    b = req(&g, 1, p, 10);
    CHECK(b->n_reused == 0 && b->n_past == 0);
    lp__sched_group_free(&g);
}

static void test_preempt(void)
{
    lp__sched_group_t g;
    /* 4 blocks of 4: two requests of 6 tokens fill them at position 8. */
    group(&g, 64, 4, true);
    CHECK(g.n_ctx == 16, "a request never needs more than the pool");
    int32_t p[6], q[6];
    seq_n(p, 6, 100);
    seq_n(q, 6, 200);
    lp__sched_seq_t *a = req(&g, 0, p, 6), *b = req(&g, 1, q, 6);
    ran(&g, plan(&g, 2), 2);
    ran(&g, plan(&g, 2), 2);
    ran(&g, plan(&g, 2), 2); /* both at n_past 8: the pool is full */
    CHECK(a->n_past == 8 && b->n_past == 8 && g.kv.n_used == 4 && lp__kv_available(&g.kv) == 0);
    /* Position 8 needs a block each: A, the older, takes B's. */
    lp__sched_step_t *st = NULL;
    for (int k = 0; k < 2 && !(st && entry_of(st, a)); k++) {
        if (st) ran(&g, st, 2);
        st = plan(&g, 2);
    }
    CHECK(st && entry_of(st, a) && entry_of(st, a)->pos == 8 && entry_of(st, a)->n_blocks == 3);
    CHECK(b->parked && b->n_blocks == 0 && b->n_past == 0 && g.n_preempted == 1);
    CHECK(!entry_of(st, b));
    int32_t b_hist[16], n_b = b->n_hist;
    memcpy(b_hist, b->hist, (size_t)n_b * sizeof(int32_t));
    CHECK(n_b == 9 && b->has_next && b->next_tok == b_hist[8]);
    ran(&g, st, 2);
    /* A runs on; B waits for blocks. */
    for (int k = 0; k < 3; k++) {
        st = plan(&g, 2);
        CHECK(st && !entry_of(st, b));
        ran(&g, st, 2);
    }
    /* A ends: B recomputes its 8 known positions without a row (its own
     * registered blocks may come back from the cache), then feeds its
     * pending token at position 8: the same tokens at the same positions. */
    lp__sched_release(&g, a);
    st = plan(&g, 2);
    const lp__sched_entry_t *e = entry_of(st, b);
    CHECK(e && e->n_logits == 0 && e->pos + e->n_tokens == 8 && b->n_refill == 8);
    for (int32_t k = 0; e && k < e->n_tokens; k++) CHECK(e->tokens[k] == b_hist[e->pos + k]);
    ran(&g, st, 2);
    st = plan(&g, 2);
    e = entry_of(st, b);
    CHECK(e && e->pos == 8 && e->n_tokens == 1 && e->tokens[0] == b_hist[8] && e->n_logits == 1);
    CHECK(b->n_gen == 3, "no token was sampled twice");
    ran(&g, st, 2);
    CHECK(b->n_hist == 10 && b->n_gen == 4);
    lp__sched_release(&g, b);
    CHECK(g.kv.n_used == 0);
    lp__sched_group_free(&g);
}

/* A request preempted with its row in flight waits for the row, then
 * recomputes everything it fed. */
static void test_preempt_in_flight(void)
{
    lp__sched_group_t g;
    group(&g, 64, 8, true);
    int32_t p[7];
    seq_n(p, 7, 100);
    lp__sched_seq_t *a = req(&g, 0, p, 7);
    lp__sched_step_t *st = plan(&g, 1);
    lp__sched_preempt(&g, a);
    CHECK(a->parked && a->row_pending && g.kv.n_used == 0);
    CHECK(plan(&g, 1) == NULL || !entry_of(g.steps[1].no ? &g.steps[1] : &g.steps[0], a));
    ran(&g, st, 1); /* the row comes back: a token; the KV of that step is not trusted */
    CHECK(a->n_done == 0 && a->n_hashed == 0);
    st = plan(&g, 1);
    const lp__sched_entry_t *e = entry_of(st, a);
    CHECK(e && e->pos == 0 && e->n_tokens == 7 && e->n_logits == 0 && !a->parked);
    ran(&g, st, 1);
    st = plan(&g, 1);
    e = entry_of(st, a);
    CHECK(e && e->pos == 7 && e->n_tokens == 1 && e->n_logits == 1 && e->tokens[0] == a->hist[7]);
    ran(&g, st, 1);
    lp__sched_release(&g, a);
    lp__sched_group_free(&g);
}

/* A long prompt fills in over several steps: every step still carries a
 * decode token of each running request, the prompt's chunk the rest. */
static void test_decode_not_starved(void)
{
    lp__sched_group_t g;
    group(&g, 16, 64, true);
    int32_t p[64];
    seq_n(p, 64, 1000);
    for (int i = 0; i < 3; i++) req(&g, i, p + i, 5);
    ran(&g, plan(&g, 3), 3);
    lp__sched_seq_t *l = req(&g, 3, p, 60);
    CHECK(l->n_reused == 4, "the first request's first block");
    for (int k = 0; k < 4; k++) {
        lp__sched_step_t *st = plan(&g, 4);
        CHECK(st && st->n_entries == 4);
        for (int i = 0; st && i < 3; i++) CHECK(entry_of(st, &seqs[i]) && entry_of(st, &seqs[i])->n_tokens == 1);
        CHECK(entry_of(st, l) && entry_of(st, l)->n_tokens == 13 && entry_of(st, l)->pos == 4 + 13 * k);
        ran(&g, st, 4);
    }
    lp__sched_group_free(&g);
}

static void test_place_prefix(void)
{
    lp__sched_place_t g[3] = {{true, 4, 0}, {true, 2, 0}, {false, 16, 0}};
    int32_t pre[3] = {0, 32, 64};
    CHECK(lp__sched_place_prefix(g, pre, 3) == 1, "room and the longest prefix of the ready ones");
    CHECK(lp__sched_place_prefix(g, NULL, 3) == 0);
    g[1].waiting = 2; /* no room left there: load first */
    CHECK(lp__sched_place_prefix(g, pre, 3) == 0);
    g[0].waiting = 4; /* no room anywhere, equal free capacity: the prefix */
    g[1].free_slots = 4, g[1].waiting = 4;
    CHECK(lp__sched_place_prefix(g, pre, 3) == 1);
    g[1].waiting = 5;
    CHECK(lp__sched_place_prefix(g, pre, 3) == 0);
    /* a cached prefix draws requests only while its group is within the
     * slack of the least loaded one */
    lp__sched_place_t h[2] = {{true, 16, 0}, {true, 16, 0}};
    int32_t hp[2] = {64, 0};
    CHECK(lp__sched_place_prefix(h, hp, 2) == 0);
    h[0].free_slots = 16 - LP__PLACE_SLACK;
    CHECK(lp__sched_place_prefix(h, hp, 2) == 0, "within the slack: the prefix");
    h[0].free_slots = 15 - LP__PLACE_SLACK;
    CHECK(lp__sched_place_prefix(h, hp, 2) == 1, "beyond the slack: load");
}

/* ---- sliding-window layers ------------------------------------------- */

enum { SWA_W = 6 };

/* An entry's sliding table: nothing named before the window of its first
 * position, distinct blocks of the pool from there on. */
static void check_swa_table(const lp__sched_group_t *g, const lp__sched_entry_t *e)
{
    int32_t lo = e->pos - SWA_W + 1 > 0 ? (e->pos - SWA_W + 1) / BLK : 0;
    CHECK(e->swa != NULL);
    for (int32_t k = 0; e->swa && k < e->n_blocks; k++) {
        if (k < lo) {
            CHECK(e->swa[k] == UINT32_MAX, "entry %d before the window names block %u", k, e->swa[k]);
            continue;
        }
        CHECK(e->swa[k] < (uint32_t)g->kv_blocks_swa && g->kv_swa.b[e->swa[k]].ref > 0);
        for (int32_t j = lo; j < k; j++) CHECK(e->swa[j] != e->swa[k]);
    }
}

static void swa_group(lp__sched_group_t *g, int32_t n_swa_blocks)
{
    memset(g, 0, sizeof(*g));
    g->max_seqs = 4;
    g->max_batch_tokens = 8;
    g->n_ctx = 4096;
    g->paged = true;
    g->prefix_cache = true;
    g->kv_block = BLK;
    g->kv_blocks = 64;
    g->swa_window = SWA_W;
    g->kv_blocks_swa = n_swa_blocks;
    CHECK_RC(lp__sched_group_init(g), 0);
    CHECK(g->swa && lp__sched_swa_per_seq(g) == 5, "(6 - 1 + 8) / 4 rounded up, + 1");
}

static void test_swa(void)
{
    lp__sched_group_t g;
    swa_group(&g, 16);
    int32_t p[64];
    seq_n(p, 5, 300);
    lp__sched_seq_t *a = req(&g, 0, p, 5);
    /* to 8 windows: 48 positions, 12 blocks of the full-attention pool, and
     * of the sliding one never more than a window and a step needs */
    while (a->n_past < 8 * SWA_W) {
        lp__sched_step_t *st = plan(&g, 1);
        const lp__sched_entry_t *e = entry_of(st, a);
        CHECK(e != NULL);
        if (!e) break;
        check_swa_table(&g, e);
        const int32_t lo = e->pos - SWA_W + 1 > 0 ? (e->pos - SWA_W + 1) / BLK : 0;
        CHECK(g.kv.n_used == (e->pos + e->n_tokens + BLK - 1) / BLK);
        CHECK(g.kv_swa.n_used == e->n_blocks - lo, "sliding blocks held %d at %d, table from %d",
              g.kv_swa.n_used, e->pos, lo);
        CHECK(g.kv_swa.n_used <= (SWA_W - 1 + e->n_tokens + BLK - 1) / BLK + 1);
        ran(&g, st, 1);
    }
    CHECK(a->n_past == 8 * SWA_W && g.kv.n_used == 12, "48 positions: %d blocks", g.kv.n_used);
    CHECK(g.kv_swa.n_used <= 3 && g.peak_swa_used <= 4 && g.peak_used == 12,
          "at 8 windows: %d sliding blocks held (peak %d), %d full-attention (peak %d)",
          g.kv_swa.n_used, g.peak_swa_used, g.kv.n_used, g.peak_used);
    int32_t a_hist[64];
    memcpy(a_hist, a->hist, (size_t)a->n_hist * sizeof(int32_t));
    lp__sched_release(&g, a);
    CHECK(g.kv_swa.n_used == 0 && g.kv.n_used == 0);

    /* B repeats A's first 45 tokens: 11 full blocks could come back, and
     * they do where the twins of the window before them are cached */
    memcpy(p, a_hist, 45 * sizeof(int32_t));
    seq_n(p + 45, 3, 900);
    lp__sched_seq_t *b = req(&g, 1, p, 48);
    CHECK(b->n_reused == 44, "B reused %d positions", b->n_reused);
    const int32_t lo = (b->n_reused - SWA_W + 1) / BLK;
    for (int32_t i = 0; i < b->n_blocks; i++) {
        if (i < lo) {
            CHECK(b->swa[i] == UINT32_MAX);
            continue;
        }
        const lp__kv_block_t *t = &g.kv_swa.b[b->swa[i]];
        CHECK(b->swa[i] != UINT32_MAX && t->is_twin && t->twin == (int32_t)b->blocks[i] &&
              t->twin_gen == g.kv.b[b->blocks[i]].gen, "block %d's sliding twin", i);
    }
    lp__sched_step_t *st = plan(&g, 2);
    const lp__sched_entry_t *e = entry_of(st, b);
    CHECK(e && e->pos == 44 && e->n_tokens == 4);
    if (e) check_swa_table(&g, e);
    ran(&g, st, 2);
    lp__sched_release(&g, b);
    lp__sched_group_free(&g);

    /* A sliding pool of 5 blocks: the twins of A's early blocks are
     * evicted as it runs, and a prompt that ends there is computed again
     * (only blocks whose window's twins are cached come back). */
    swa_group(&g, 5);
    seq_n(p, 5, 300);
    a = req(&g, 0, p, 5);
    while (a->n_past < 8 * SWA_W) ran(&g, plan(&g, 1), 1);
    memcpy(a_hist, a->hist, (size_t)a->n_hist * sizeof(int32_t));
    lp__sched_release(&g, a);
    memcpy(p, a_hist, 21 * sizeof(int32_t));
    b = req(&g, 1, p, 21);
    CHECK(b->n_reused == 0, "the twins of blocks 3 and 4 are gone: %d reused", b->n_reused);
    lp__sched_release(&g, b);
    memcpy(p, a_hist, 48 * sizeof(int32_t));
    b = req(&g, 1, p, 48);
    CHECK(b->n_reused == 44, "the last window's twins are cached: %d reused", b->n_reused);
    lp__sched_release(&g, b);
    lp__sched_group_free(&g);
}

int main(void)
{
    test_reuse();
    test_preempt();
    test_preempt_in_flight();
    test_decode_not_starved();
    test_place_prefix();
    test_swa();
    for (int i = 0; i < MAX_REQS; i++) {
        free(seqs[i].hist);
        free(seqs[i].blocks);
        free(seqs[i].swa);
    }
    return CHECK_DONE();
}
