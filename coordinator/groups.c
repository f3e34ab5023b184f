/* groups.c - the engine groups: connecting, readiness, placement of a new
 * request on the group with the most free capacity, a group that drops out
 * and its retry with backoff, and each group's GroupStats. */
#include "coord-internal.h"

#include "error.h"
#include "log.h"
#include "sysinfo.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

int lp__group_connect(lp_coord_t *c, lp__group_t *g)
{
    lp__link_t *ls[2] = {&g->eng, &g->samp};
    for (int i = 0; i < 2; i++) {
        lp__link_close(ls[i]);
        if (ls[i]->hello) lmpipe__msg__free_unpacked(ls[i]->hello, NULL);
        ls[i]->hello = NULL;
    }
    int rc = lp__link_open(c, &g->eng);
    if (!rc) rc = lp__link_open(c, &g->samp);
    if (rc) return rc;
    g->state = G_CONNECTING;
    /* The sampler's hello follows the engine's reply (it names the ring). */
    lp__link_send_hello(c, &g->eng);
    return 0;
}

int lp__group_ready(lp_coord_t *c, lp__group_t *g)
{
    const Lmpipe__Hello *e = g->eng.hello->hello, *s = g->samp.hello->hello;
    if (!s->detok)
        return lp_error_set(LP_ERR(ENOTSUP), "group %s: sampler-svc gives no token text (its model "
                            "has no tokenizer)", g->name);
    if (c->ready && (int32_t)e->n_vocab != c->n_vocab)
        return lp_error_set(LP_ERR(EPROTO), "group %s: %u tokens in the vocabulary; the pipeline's "
                            "has %d", g->name, e->n_vocab, c->n_vocab);
    int32_t ems = e->max_seqs ? (int32_t)e->max_seqs : 16;
    int32_t ebt = e->max_batch_tokens ? (int32_t)e->max_batch_tokens : 512;
    lp__sched_group_free(&g->s);
    memset(&g->s, 0, sizeof(g->s));
    g->s.max_seqs = c->p.max_seqs > 0 && c->p.max_seqs < ems ? c->p.max_seqs : ems;
    g->s.max_batch_tokens = c->p.max_batch_tokens > 0 && c->p.max_batch_tokens < ebt
                                ? c->p.max_batch_tokens : ebt;
    g->s.n_ctx = e->n_ctx ? (int32_t)e->n_ctx : 4096;
    g->s.prefill_chunk = c->p.prefill_chunk > 0 ? c->p.prefill_chunk : LP_COORD_PREFILL_CHUNK;
    /* A paged engine leaves its blocks to the coordinator; one that does
     * not page keeps a stretch per slot and nothing here changes. */
    g->s.paged = e->kv_block > 0 && e->kv_blocks > 0;
    if (g->s.paged) {
        g->s.kv_block = (int32_t)e->kv_block;
        g->s.kv_blocks = c->p.kv_blocks > 0 && (uint32_t)c->p.kv_blocks < e->kv_blocks
                             ? c->p.kv_blocks : (int32_t)e->kv_blocks;
        /* a recurrent state lives per sequence, not per block: a request
         * that took a cached prefix would have no state for it */
        g->s.prefix_cache = !c->p.no_prefix_cache && !e->recurrent_layers;
        g->s.swa_window = (int32_t)e->kv_swa_window;
        g->s.kv_blocks_swa = (int32_t)e->kv_blocks_swa;
    }
    /* The ring only where engine and sampler share a host: a sampler
     * elsewhere gets the rows inline. */
    g->s.ring = !c->p.no_shm && e->shm_name && e->shm_name[0] && s->shm_ok &&
                !strcmp(e->host_id, s->host_id);
    g->ring = g->s.ring ? e->shm_name : NULL;
    g->s.ring_slots = e->shm_slots;
    /* Slot sequence numbers start at a random point (see shm-ring.h). */
    if (getrandom(&g->s.ring_seq, sizeof(g->s.ring_seq), 0) != (ssize_t)sizeof(g->s.ring_seq))
        g->s.ring_seq = lp_now_ns();
    g->s.ring_seq >>= 1;
    free(g->texts);
    g->n_texts = 0;
    g->n_queue_pending = 0;
    g->texts = calloc((size_t)g->s.max_seqs, sizeof(*g->texts));
    int rc = lp__sched_group_init(&g->s);
    if (!rc && !g->texts) rc = lp_error_set(LP_ERR(ENOMEM), "coordinator: out of memory");
    if (rc) return rc;
    g->state = G_READY;
    g->was_ready = true;
    lp__group_close_stale(c, g);
    g->eng.backoff_ms = LP__RETRY_MS;
    LP_INFO("coordinator: group %s ready (engine %s, sampler %s): %d seqs, logits %s", g->name,
            g->eng_ep, g->samp_ep, g->s.max_seqs, g->s.ring ? "in shared memory" : "inline");
    g->prefix_off = !g->s.paged ? "not_paged" : c->p.no_prefix_cache ? "configured"
                    : e->recurrent_layers ? "recurrent_state" : "";
    if (g->s.paged)
        LP_INFO("coordinator: group %s: KV pool of %d blocks of %d positions, prefix cache %s%s",
                g->name, g->s.kv_blocks, g->s.kv_block, g->s.prefix_cache ? "on" : "off",
                e->recurrent_layers && !c->p.no_prefix_cache
                    ? " (the model's recurrent layers keep a state per sequence, not per block)"
                    : "");
    if (g->s.swa)
        LP_INFO("coordinator: group %s: sliding-window layers (window %d): a pool of %d blocks, "
                "at most %d per request", g->name, g->s.swa_window, g->s.kv_blocks_swa,
                lp__sched_swa_per_seq(&g->s));
    return 0;
}

void lp__group_down(lp_coord_t *c, lp__group_t *g, const char *why)
{
    if (g->state == G_DOWN) return;
    bool was = g->state == G_READY;
    g->state = G_DOWN;
    g->eng.down = g->samp.down = true;
    char msg[700];
    snprintf(msg, sizeof(msg), "group %s: %s", g->name, why);
    LP_WARN("coordinator: %s", msg);
    if (was) g->n_dropped++;
    /* Requests in the steps go back to the queue under new keys, to be
     * prefilled again from prompt + tokens so far on this group once it is
     * back or on another one that is ready; those still waiting for a slot
     * are placed again; those that had ended get their final event without
     * the sampler's last flush (the rest of their text is in). */
    size_t n_moved = 0;
    for (size_t i = c->n_reqs; i-- > 0;) {
        lp__req_t *r = c->reqs[i];
        if (r->group != g) continue;
        r->session_open = false;
        if (r->state == R_WAIT_SLOT) lp__req_unplace(r);
        else if (r->state != R_DONE) {
            lp__req_requeue(c, r);
            n_moved++;
        } else {
            r->close_pending = false;
        }
    }
    /* Nothing will answer on the group's links now: every operation due
     * gets this Error, through the same paths as an Error from the service,
     * and finds no request left to fail. */
    lp__link_abort(c, &g->eng, msg);
    lp__link_abort(c, &g->samp, msg);
    for (size_t i = c->n_reqs; i-- > 0;) {
        if (i >= c->n_reqs) continue;
        if (c->reqs[i]->group == g && c->reqs[i]->state == R_DONE) lp__req_maybe_final(c, c->reqs[i]);
    }
    for (int k = 0; k < LP__SCHED_MAX_STEPS; k++) {
        g->s.steps[k].step_wait = g->s.steps[k].sample_wait = false;
        lp__sched_retire(&g->s.steps[k]);
    }
    g->n_texts = 0;
    g->n_queue_pending = 0;
    if (n_moved) LP_WARN("coordinator: group %s: %zu running request(s) re-driven from their prompt "
                         "and tokens so far", g->name, n_moved);
    for (lp__link_t *l = &g->eng; l; l = l == &g->eng ? &g->samp : NULL) {
        if (l->hello) lmpipe__msg__free_unpacked(l->hello, NULL);
        l->hello = NULL;
    }
    /* The retry timer is the engine link's; it reopens both. */
    lp__link_close(&g->samp);
    lp__link_retry_later(c, &g->eng);
}

void lp__group_close_stale(lp_coord_t *c, lp__group_t *g)
{
    for (size_t i = 0; i < g->n_stale; i++) {
        Lmpipe__Msg m = LMPIPE__MSG__INIT;
        Lmpipe__SamplerClose sc = LMPIPE__SAMPLER_CLOSE__INIT;
        sc.session = g->stale[i];
        m.body_case = LMPIPE__MSG__BODY_SAMPLER_CLOSE;
        m.sampler_close = &sc;
        /* OP_SCLOSE of no request: a restarted sampler's "no session" is
         * only logged at debug level. */
        lp__link_send(&g->samp, OP_SCLOSE, 0, &m, NULL, 0);
    }
    g->n_stale = 0;
    (void)c;
}

/* A group's list holds the scheduler's part of each request, its first
 * member. */
static lp__req_t *req_of(lp__sched_seq_t *s) { return (lp__req_t *)s; }

lp__group_t *lp__groups_first_ready(lp_coord_t *c)
{
    for (size_t i = 0; i < c->n_groups; i++)
        if (c->groups[i].state == G_READY) return &c->groups[i];
    return NULL;
}

void lp__groups_place(lp_coord_t *c)
{
    if (!c->ready) return;
    size_t n = c->n_groups;
    lp__sched_place_t pl[n];
    int32_t prefix[n];
    for (size_t i = 0; i < n; i++) {
        lp__group_t *g = &c->groups[i];
        pl[i] = (lp__sched_place_t){.ready = g->state == G_READY};
        if (!pl[i].ready) continue;
        for (int32_t s = 0; s < g->s.max_seqs; s++) pl[i].free_slots += !g->s.slot_used[s];
        for (size_t k = 0; k < g->n_seqs; k++) pl[i].waiting += req_of(g->seqs[k])->state == R_WAIT_SLOT;
    }
    for (size_t i = 0; i < c->n_reqs; i++) {
        lp__req_t *r = c->reqs[i];
        if (r->group || r->state != R_WAIT_SLOT) continue;
        for (size_t j = 0; j < n; j++) {
            lp__sched_group_t *s = &c->groups[j].s;
            prefix[j] = pl[j].ready && s->paged && s->prefix_cache && r->s.n_prompt > 0
                               ? s->kv.block * lp__kv_match(&s->kv, r->s.prompt, r->s.n_prompt,
                                                            (r->s.n_prompt - 1) / s->kv.block)
                               : 0;
        }
        int k = lp__sched_place_prefix(pl, prefix, n);
        if (k < 0) return;
        if (lp__req_place(r, &c->groups[k]) != 0) {
            lp__coord_fail(c, r, E_INTERNAL, "out of memory");
            continue;
        }
        c->groups[k].n_placed++;
        pl[k].waiting++;
    }
}

void lp__groups_stats(lp_coord_t *c, Lmpipe__StatsReply *out, Lmpipe__GroupStats **gp)
{
    for (size_t i = 0; i < c->n_groups; i++) {
        lp__group_t *g = &c->groups[i];
        Lmpipe__GroupStats *s = &g->stats;
        lmpipe__group_stats__init(s);
        s->name = (char *)g->name;
        s->engine = (char *)g->eng_ep;
        s->sampler = (char *)g->samp_ep;
        s->ready = g->state == G_READY;
        if (g->state == G_READY)
            for (int32_t k = 0; k < g->s.max_seqs; k++) s->slots_used += g->s.slot_used[k];
        s->slots_total = g->was_ready ? (uint32_t)g->s.max_seqs : 0;
        for (size_t k = 0; k < g->n_seqs; k++) {
            enum lp__rstate st = req_of(g->seqs[k])->state;
            s->n_running += st == R_OPENING || st == R_RUNNING;
            s->n_waiting += st == R_WAIT_SLOT;
        }
        s->steps = g->n_steps;
        s->n_requests = g->n_placed;
        s->n_dropped = g->n_dropped;
        s->shm = g->state == G_READY && g->s.ring;
        if (g->state == G_READY && g->s.paged) {
            s->kv_blocks_used = (uint32_t)g->s.kv.n_used;
            s->kv_blocks_total = (uint32_t)g->s.kv.n_blocks;
            s->kv_blocks_cached = (uint32_t)g->s.kv.n_cached;
            s->kv_blocks_peak = (uint32_t)g->s.peak_used;
        }
        if (g->state == G_READY && g->s.swa) {
            s->kv_swa_window = (uint32_t)g->s.swa_window;
            s->kv_swa_blocks_used = (uint32_t)g->s.kv_swa.n_used;
            s->kv_swa_blocks_total = (uint32_t)g->s.kv_swa.n_blocks;
            s->kv_swa_blocks_cached = (uint32_t)g->s.kv_swa.n_cached;
            s->kv_swa_blocks_peak = (uint32_t)g->s.peak_swa_used;
        }
        s->prefix_cache_hits = g->prefix_hits;
        s->prefix_cache_off = (char *)(g->state == G_READY && g->prefix_off ? g->prefix_off : "");
        gp[i] = s;
    }
    out->n_groups = c->n_groups;
    out->groups = gp;
}
