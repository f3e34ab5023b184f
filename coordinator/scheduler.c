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
    if (!ok) return lp_error_set(LP_ERR(ENOMEM), "coordinator: out of memory");
    if (g->paged) {
        int rc = lp__kv_init(&g->kv, g->kv_block, g->kv_blocks);
        if (rc) return rc;
        g->swa = g->swa_window > 0 && g->kv_blocks_swa > 0;
        if (g->swa && (rc = lp__kv_init(&g->kv_swa, g->kv_block, g->kv_blocks_swa))) return rc;
        /* A request never needs more positions than the pool holds. */
        int64_t pool = (int64_t)g->kv_block * g->kv_blocks;
        if (pool < g->n_ctx) g->n_ctx = (int32_t)pool;
    }
    return 0;
}

void lp__sched_group_free(lp__sched_group_t *g)
{
    free(g->slot_used);
    free(g->tokbuf);
    for (int i = 0; i < LP__SCHED_MAX_STEPS; i++) {
        free(g->steps[i].entries);
        g->steps[i].entries = NULL;
    }
    g->slot_used = NULL;
    g->tokbuf = NULL;
    if (g->paged) lp__kv_free(&g->kv);
    if (g->swa) lp__kv_free(&g->kv_swa);
    g->swa = false;
}

int32_t lp__sched_swa_per_seq(const lp__sched_group_t *g)
{
    const int32_t B = g->kv_block;
    return (g->swa_window - 1 + g->max_batch_tokens + B - 1) / B + 1;
}

int lp__sched_place(const lp__sched_place_t *groups, size_t n)
{
    return lp__sched_place_prefix(groups, NULL, n);
}

int lp__sched_place_prefix(const lp__sched_place_t *groups, const int32_t *prefix, size_t n)
{
    int64_t max_free = INT64_MIN;
    for (size_t i = 0; i < n; i++)
        if (groups[i].ready) {
            int64_t f = (int64_t)groups[i].free_slots - (int64_t)groups[i].waiting;
            if (f > max_free) max_free = f;
        }
    int best = -1;
    int64_t best_free = 0;
    for (size_t i = 0; i < n; i++) {
        const lp__sched_place_t *g = &groups[i];
        if (!g->ready) continue;
        int64_t free_cap = (int64_t)g->free_slots - (int64_t)g->waiting;
        /* With room somewhere, a group near the least loaded one competes on
         * its prefix; without room anywhere, only the least loaded do.  A
         * cached prefix must not draw every request to one group. */
        bool eligible = max_free > 0 ? free_cap > 0 && free_cap >= max_free - LP__PLACE_SLACK
                                     : free_cap == max_free;
        if (!eligible) continue;
        bool better;
        if (best < 0) {
            better = true;
        } else {
            int32_t pg = prefix ? prefix[i] : 0, pb = prefix ? prefix[best] : 0;
            if (pg != pb) better = pg > pb;
            else if (free_cap != best_free) better = free_cap > best_free;
            else better = g->waiting < groups[best].waiting;
        }
        if (better) {
            best = (int)i;
            best_free = free_cap;
        }
    }
    return best;
}

/* ---- paged KV ---------------------------------------------------------------- */

#define SWA_NONE UINT32_MAX

/* The first block a query at position `pos` or later can see with the
 * sliding window. */
static int32_t swa_first(const lp__sched_group_t *g, int32_t pos)
{
    int32_t p = pos - g->swa_window + 1;
    return p > 0 ? p / g->kv.block : 0;
}

/* Give back the sliding-window blocks no query from position `pos` on can
 * see.  A step in flight may still read them: the engine runs steps in
 * order, so whatever a later step writes into them comes after.  With the
 * prefix cache, one whose tokens are known is first registered as the twin
 * of its full-attention block, even before the step that fills them is
 * confirmed: it can only be found through that block at this generation,
 * which the cache holds only once the step is confirmed (and a failed step
 * frees the block, whose next generation finds nothing). */
static void slide(lp__sched_group_t *g, lp__sched_seq_t *s, int32_t pos)
{
    if (!g->swa) return;
    int32_t lo = swa_first(g, pos);
    for (; s->swa_lo < lo && s->swa_lo < s->n_blocks; s->swa_lo++) {
        const int32_t i = s->swa_lo;
        if (g->prefix_cache && i >= s->n_hashed && (i + 1) * g->kv.block <= s->n_hist)
            s->swa[i] = lp__kv_commit_twin(&g->kv_swa, s->swa[i], (int32_t)s->blocks[i],
                                           g->kv.b[s->blocks[i]].gen);
        lp__kv_release(&g->kv_swa, s->swa[i]);
        s->swa[i] = SWA_NONE;
    }
}

static void track_peaks(lp__sched_group_t *g)
{
    if (g->kv.n_used > g->peak_used) g->peak_used = g->kv.n_used;
    if (g->swa && g->kv_swa.n_used > g->peak_swa_used) g->peak_swa_used = g->kv_swa.n_used;
}

/* Register the request's full blocks whose KV is confirmed and whose
 * tokens are known.  A block computed twice moves to the cached copy. */
static void commit_blocks(lp__sched_group_t *g, lp__sched_seq_t *s)
{
    if (!g->prefix_cache) return;
    int32_t B = g->kv.block;
    int32_t known = s->n_done < s->n_hist ? s->n_done : s->n_hist;
    while (s->n_hashed < s->n_blocks && (s->n_hashed + 1) * B <= known) {
        int32_t i = s->n_hashed;
        int32_t parent = i ? (int32_t)s->blocks[i - 1] : LP__KV_NONE;
        s->blocks[i] = lp__kv_commit(&g->kv, s->blocks[i], parent, s->chain_hash,
                                     s->hist + (size_t)i * (size_t)B, &s->chain_hash);
        /* the sliding layers' block of the same positions, while held, as
         * its twin: a prefix that ends within a window of it needs it */
        if (g->swa && i >= s->swa_lo)
            s->swa[i] = lp__kv_commit_twin(&g->kv_swa, s->swa[i], (int32_t)s->blocks[i],
                                           g->kv.b[s->blocks[i]].gen);
        s->n_hashed++;
    }
}

/* Give back every block, the last first: a prefix's later blocks then
 * leave the cache before its earlier ones. */
static void drop_blocks(lp__sched_group_t *g, lp__sched_seq_t *s)
{
    if (g->swa)
        for (int32_t i = s->n_blocks; i-- > s->swa_lo;) lp__kv_release(&g->kv_swa, s->swa[i]);
    while (s->n_blocks > 0) lp__kv_release(&g->kv, s->blocks[--s->n_blocks]);
    s->n_hashed = 0;
    s->chain_hash = 0;
    s->swa_lo = 0;
}

/* Take the longest cached prefix of hist[0..n) within max_blocks. */
static void reuse_prefix(lp__sched_group_t *g, lp__sched_seq_t *s, int32_t n, int32_t max_blocks)
{
    int32_t got = 0;
    if (g->prefix_cache)
        got = lp__kv_acquire_prefix(&g->kv, s->hist, n, max_blocks, s->blocks, &s->chain_hash);
    s->swa_lo = 0;
    if (g->swa) {
        /* The sliding layers need the window before the first position to
         * compute: the longest reused prefix whose twins of those blocks
         * are all cached. */
        int32_t m = got, lo = 0;
        for (; m > 0; m--) {
            lo = swa_first(g, m * g->kv.block);
            int32_t i = lo;
            while (i < m && lp__kv_find_twin(&g->kv_swa, (int32_t)s->blocks[i],
                                             g->kv.b[s->blocks[i]].gen) != LP__KV_NONE)
                i++;
            if (i == m) break;
        }
        while (got > m) lp__kv_release(&g->kv, s->blocks[--got]);
        if (m == 0) lo = 0;
        for (int32_t i = 0; i < m; i++) {
            int32_t t = i < lo ? LP__KV_NONE
                               : lp__kv_find_twin(&g->kv_swa, (int32_t)s->blocks[i],
                                                  g->kv.b[s->blocks[i]].gen);
            if (t != LP__KV_NONE) lp__kv_acquire(&g->kv_swa, (uint32_t)t);
            s->swa[i] = t == LP__KV_NONE ? SWA_NONE : (uint32_t)t;
        }
        s->swa_lo = lo;
        s->chain_hash = got ? g->kv.b[s->blocks[got - 1]].hash : 0;
    }
    s->n_blocks = s->n_hashed = got;
    s->n_past = s->n_done = got * g->kv.block;
    track_peaks(g);
}

int lp__sched_seq_start(lp__sched_group_t *g, lp__sched_seq_t *s)
{
    s->n_past = 0;
    if (!g->paged) return 0;
    free(s->hist);
    free(s->blocks);
    /* Positions stop at n_ctx; chained steps may sample a few past it. */
    s->cap_hist = (s->n_prompt > g->n_ctx ? s->n_prompt : g->n_ctx) + LP__SCHED_MAX_STEPS + 2;
    s->cap_blocks = lp__kv_blocks_for(&g->kv, s->cap_hist);
    free(s->swa);
    s->hist = malloc((size_t)s->cap_hist * sizeof(int32_t));
    s->blocks = malloc((size_t)s->cap_blocks * sizeof(uint32_t));
    s->swa = g->swa ? malloc((size_t)s->cap_blocks * sizeof(uint32_t)) : NULL;
    if (!s->hist || !s->blocks || (g->swa && !s->swa)) {
        free(s->hist);
        free(s->blocks);
        free(s->swa);
        s->hist = NULL;
        s->blocks = NULL;
        s->swa = NULL;
        return lp_error_set(LP_ERR(ENOMEM), "coordinator: out of memory");
    }
    memcpy(s->hist, s->prompt, (size_t)s->n_prompt * sizeof(int32_t));
    s->n_hist = s->n_prompt;
    s->n_blocks = s->n_hashed = s->n_done = s->n_refill = 0;
    s->parked = false;
    /* At least the last prompt token is computed: its row is the first
     * token's logits. */
    reuse_prefix(g, s, s->n_prompt, s->n_prompt > 0 ? (s->n_prompt - 1) / g->kv.block : 0);
    s->n_reused = s->n_past;
    return 0;
}

void lp__sched_done(lp__sched_group_t *g, lp__sched_seq_t *s, int32_t n_past, uint32_t epoch)
{
    if (!g->paged || !s->blocks || s->parked || epoch != s->epoch) return;
    if (n_past > s->n_done) s->n_done = n_past;
    commit_blocks(g, s);
}

void lp__sched_preempt(lp__sched_group_t *g, lp__sched_seq_t *s)
{
    commit_blocks(g, s);
    drop_blocks(g, s);
    s->n_past = s->n_done = s->n_refill = 0;
    s->parked = true;
    s->epoch++;
    g->n_preempted++;
}

/* A parked request whose rows in flight are all back starts over: its
 * known tokens less the pending one are prefilled again (from the longest
 * cached prefix), then the pending one is fed as usual.  One preempted
 * before its first row simply prefills its prompt again. */
static void resume(lp__sched_group_t *g, lp__sched_seq_t *s)
{
    s->parked = false;
    s->n_refill = s->has_next ? s->n_hist - 1 : 0;
    if (s->n_refill > 0) reuse_prefix(g, s, s->n_refill, s->n_refill / g->kv.block);
    else reuse_prefix(g, s, s->n_prompt, s->n_prompt > 0 ? (s->n_prompt - 1) / g->kv.block : 0);
}

/* Blocks so that the request covers n_pos positions; false when the pool
 * has too few (those taken are kept). */
static bool grow(lp__sched_group_t *g, lp__sched_seq_t *s, int32_t n_pos)
{
    int32_t want = lp__kv_blocks_for(&g->kv, n_pos);
    if (want > s->cap_blocks) return false;
    while (s->n_blocks < want) {
        uint32_t id, sid = SWA_NONE;
        if (lp__kv_alloc(&g->kv, &id)) return false;
        if (g->swa && lp__kv_alloc(&g->kv_swa, &sid)) {
            lp__kv_release(&g->kv, id);
            return false;
        }
        if (g->swa) s->swa[s->n_blocks] = sid;
        s->blocks[s->n_blocks++] = id;
    }
    track_peaks(g);
    return true;
}

/* Positions the request may cover with its blocks and the pools'. */
static int32_t room(const lp__sched_group_t *g, const lp__sched_seq_t *s)
{
    int64_t avail = lp__kv_available(&g->kv);
    if (g->swa && lp__kv_available(&g->kv_swa) < avail) avail = lp__kv_available(&g->kv_swa);
    int64_t blocks = (int64_t)s->n_blocks + avail;
    if (blocks > s->cap_blocks) blocks = s->cap_blocks;
    return (int32_t)(blocks * g->kv.block);
}

/* The youngest running request younger than seqs[idx] that holds blocks
 * and is not in the step being planned; NULL when none. */
static lp__sched_seq_t *victim(lp__sched_seq_t *const *seqs, size_t n, size_t idx,
                               lp__sched_seq_t *const *in_step, size_t n_in)
{
    for (size_t i = n; i-- > idx + 1;) {
        lp__sched_seq_t *v = seqs[i];
        if (!v->running || v->parked || v->n_blocks == 0) continue;
        bool busy = false;
        for (size_t k = 0; k < n_in && !busy; k++) busy = in_step[k] == v;
        if (!busy) return v;
    }
    return NULL;
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
    if (g->paged && s->blocks && g->kv.b) {
        commit_blocks(g, s);
        drop_blocks(g, s);
    }
    free(s->hist);
    free(s->blocks);
    free(s->swa);
    s->hist = NULL;
    s->blocks = NULL;
    s->swa = NULL;
    s->n_hist = s->cap_hist = s->n_blocks = s->cap_blocks = 0;
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
    if (s->hist && s->n_hist < s->cap_hist) s->hist[s->n_hist++] = tok;
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
        /* Beside decode tokens a step takes a short chunk of prompt, so that
         * a long prompt does not stretch the running requests' token gaps. */
        if (pass == 1 && n_seqs > 0 && g->prefill_chunk > 0 && budget > g->prefill_chunk)
            budget = g->prefill_chunk;
        for (size_t j = 0; j < n && budget > 0 && n_seqs < (size_t)g->max_seqs; j++) {
            size_t idx = pass == 0 ? (start + j) % n : j;
            lp__sched_seq_t *r = seqs[idx];
            if (!r->running) continue;
            if (r->parked) {
                /* Back once its rows are in and its recompute fits whole:
                 * a request that takes a few blocks only to be preempted
                 * again makes no progress. */
                int32_t need = lp__kv_blocks_for(&g->kv, (r->has_next ? r->n_hist : r->n_prompt) + 1);
                if (need > g->kv.n_blocks) need = g->kv.n_blocks;
                int32_t need_swa = need < lp__sched_swa_per_seq(g) ? need : lp__sched_swa_per_seq(g);
                if (g->swa && need_swa > g->kv_swa.n_blocks) need_swa = g->kv_swa.n_blocks;
                if (r->row_pending || r->fed_ahead > 0) continue;
                /* Like any request, it takes the blocks of younger ones. */
                lp__sched_seq_t *v;
#define SHORT() (lp__kv_available(&g->kv) < need || \
                 (g->swa && lp__kv_available(&g->kv_swa) < need_swa))
                while (SHORT() && (v = victim(seqs, n, idx, owner, n_seqs))) lp__sched_preempt(g, v);
                if (SHORT()) continue;
#undef SHORT
                resume(g, r);
            }
            int32_t fill = r->n_refill > 0 ? r->n_refill : r->n_prompt;
            bool decode = r->n_past >= fill;
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
                k = fill - r->n_past;
                if (k > budget) k = budget;
            }
            if (g->paged) {
                /* The window's blocks this entry no longer reads go back
                 * first; short of blocks, take those of younger requests,
                 * then a prefill chunk makes do with what there is. */
                slide(g, r, r->n_past);
                lp__sched_seq_t *v;
                while (room(g, r) < r->n_past + k && (v = victim(seqs, n, idx, owner, n_seqs)))
                    lp__sched_preempt(g, v);
                if (!decode && room(g, r) < r->n_past + k) k = room(g, r) - r->n_past;
                if (k <= 0 || !grow(g, r, r->n_past + k)) {
                    /* A decode token with no younger request to take from
                     * gives way: its own blocks go to the older ones. */
                    if (decode && !victim(seqs, n, idx, seqs, 0) && r->n_blocks > 0) lp__sched_preempt(g, r);
                    continue;
                }
            }
            if (!decode)
                memcpy(toks, (r->n_refill > 0 ? r->hist : r->prompt) + r->n_past, (size_t)k * sizeof(int32_t));
            int32_t n_logits = decode || (r->n_refill == 0 && r->n_past + k == r->n_prompt) ? 1 : 0;
            if (n_rows + (size_t)n_logits > row_cap) continue;
            lp__sched_entry_t *e = &st->entries[n_seqs];
            *e = (lp__sched_entry_t){.req = r->key, .slot = r->slot, .pos = r->n_past,
                                     .n_tokens = k, .tokens = chained ? NULL : toks,
                                     .n_logits = n_logits, .epoch = r->epoch};
            if (g->paged) {
                e->blocks = r->blocks;
                e->n_blocks = lp__kv_blocks_for(&g->kv, r->n_past + k);
                e->swa = g->swa ? r->swa : NULL;
            }
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
