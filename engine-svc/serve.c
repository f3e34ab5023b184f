/* serve.c - engine-svc: hello and the batched step (see serve.h).
 *
 * A step request is checked in full before the engine sees it: sequence ids
 * in range and unique, tokens inside the vocabulary, n_logits within the
 * chunk, the batch within max_batch_tokens, and each seq's KV addressing:
 * its block table (lp_engine_check_kv: indices inside the pool, long enough
 * for pos + tokens, no block twice) or, without one on a paged engine, its
 * seq_id's fallback table (only when the pool was sized to hold one per
 * seq_id, the default) with pos not past the cached length.  A bad seq
 * fails the whole step with an Error naming the field; the engine's state
 * is untouched, so the next step runs as if it had not come.  Logit rows go into ring slots (acquired before the
 * step, published after it) or into one buffer sent as a raw frame. */
#include "serve.h"

#include "error.h"
#include "hello.h"
#include "log.h"
#include "shm-ring.h"
#include "sysinfo.h"
#include "vocab-facts.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

struct lp_engine_svc {
    lp_engine_svc_params_t p;
    lp_model_t *model;
    lp_engine_t *engine;
    const lp_hparams_t *hp;
    int32_t max_seqs, max_batch_tokens, n_ctx;
    lp_shm_ring_t *ring; /* NULL with --no-shm */
    uint32_t n_tokens;
    uint64_t vocab_hash;
    char model_name[256];
    float *inline_rows;  /* inline reply buffer, grown on demand */
    size_t inline_cap;   /* floats */
    float **row_ptrs;
    Lmpipe__RowRef *refs;
    Lmpipe__RowRef **ref_ptrs;
    uint8_t *seen;       /* max_seqs flags: a seq_id once per step */
    int32_t *tokbuf;     /* max_batch_tokens: the tokens of chained seqs */
    float **run_ptrs;    /* max_batch_tokens: the rows of the seqs that run */
};

void lp_engine_svc_destroy(lp_engine_svc_t **self_p)
{
    if (!self_p || !*self_p) return;
    lp_engine_svc_t *s = *self_p;
    /* the engine first: it unregisters the ring it page-locked */
    lp_engine_destroy(&s->engine);
    lp_shm_ring_destroy(&s->ring);
    lp_model_destroy(&s->model);
    free(s->inline_rows);
    free(s->row_ptrs);
    free(s->refs);
    free(s->ref_ptrs);
    free(s->seen);
    free(s->tokbuf);
    free(s->run_ptrs);
    free(s);
    *self_p = NULL;
}

int lp_engine_svc_new(const lp_engine_svc_params_t *p, lp_engine_svc_t **out)
{
    *out = NULL;
    lp_engine_svc_t *s = calloc(1, sizeof(*s));
    if (!s) return LP_ERR(ENOMEM);
    s->p = *p;
    int rc = lp_model_load(p->model_path, &s->model);
    if (rc) goto fail;
    rc = lp_engine_new(s->model, &p->engine, &s->engine);
    if (rc) goto fail;
    s->hp = lp_model_hparams(s->model);
    s->max_seqs = p->engine.max_seqs > 0 ? p->engine.max_seqs : 16;
    s->max_batch_tokens = p->engine.max_batch_tokens > 0 ? p->engine.max_batch_tokens : 512;
    /* engine.h: n_ctx 0 means min(n_ctx_train, 4096). */
    s->n_ctx = p->engine.n_ctx > 0 ? p->engine.n_ctx
             : s->hp->n_ctx_train > 0 && s->hp->n_ctx_train < 4096 ? s->hp->n_ctx_train : 4096;
    lp_vocab_facts(lp_model_gguf(s->model), &s->n_tokens, &s->vocab_hash);
    lp_gguf_str_t name;
    const char *base = strrchr(p->model_path, '/');
    if (lp_gguf_get_str(lp_model_gguf(s->model), "general.name", &name) == 0 && name.len < 200)
        snprintf(s->model_name, sizeof(s->model_name), "%.*s (%s)", (int)name.len, name.ptr,
                 base ? base + 1 : p->model_path);
    else snprintf(s->model_name, sizeof(s->model_name), "%s", base ? base + 1 : p->model_path);
    /* A step returns at most one row per sequence from the coordinator, but
     * a client of its own may ask for more: the limit is max_batch_tokens. */
    size_t max_rows = (size_t)s->max_batch_tokens;
    s->row_ptrs = calloc(max_rows, sizeof(float *));
    s->refs = calloc(max_rows, sizeof(Lmpipe__RowRef));
    s->ref_ptrs = calloc(max_rows, sizeof(Lmpipe__RowRef *));
    s->seen = calloc((size_t)s->max_seqs, 1);
    s->tokbuf = calloc(max_rows, sizeof(int32_t));
    s->run_ptrs = calloc(max_rows, sizeof(float *));
    if (!s->row_ptrs || !s->refs || !s->ref_ptrs || !s->seen || !s->tokbuf || !s->run_ptrs) {
        rc = LP_ERR(ENOMEM);
        goto fail;
    }
    if (!p->no_shm) {
        int slots = p->shm_slots > 0 ? p->shm_slots : 2 * s->max_seqs;
        rc = lp_shm_ring_create(p->shm_name, (uint32_t)slots, (uint32_t)s->hp->n_vocab, &s->ring);
        if (rc) goto fail;
        /* SIGTERM ends a wait for the ring: the loop then stops the service. */
        lp_shm_ring_set_stop(s->ring, lp_service_stop_requested);
        LP_INFO("engine-svc: logits ring %s, %d slots of %d floats", lp_shm_ring_name(s->ring),
                slots, s->hp->n_vocab);
        /* The CUDA backend copies logits into the ring by DMA once the
         * segment is page-locked; without that the copies still work. */
        void *base;
        size_t size;
        lp_shm_ring_region(s->ring, &base, &size);
        if (lp_engine_register_host(s->engine, base, size))
            LP_WARN("engine-svc: logits ring not page-locked: %s", lp_error_msg());
    }
    *out = s;
    return 0;
fail:
    lp_engine_svc_destroy(&s);
    return rc;
}

/* ---- hello --------------------------------------------------------------- */

static int on_hello(void *ctx, const Lmpipe__Hello *peer, bool controller, Lmpipe__Hello *mine)
{
    lp_engine_svc_t *s = ctx;
    (void)controller;
    mine->n_vocab = (uint32_t)s->hp->n_vocab;
    mine->n_tokens = s->n_tokens;
    mine->vocab_hash = s->vocab_hash;
    mine->model_name = s->model_name;
    mine->bos_id = s->hp->bos_id;
    mine->eos_id = s->hp->eos_id;
    mine->no_shm = s->ring == NULL;
    mine->max_seqs = (uint32_t)s->max_seqs;
    mine->max_batch_tokens = (uint32_t)s->max_batch_tokens;
    mine->n_ctx = (uint32_t)s->n_ctx;
    mine->kv_block = (uint32_t)lp_engine_kv_block(s->engine);
    mine->kv_blocks = (uint32_t)lp_engine_kv_blocks(s->engine);
    mine->kv_swa_window = (uint32_t)lp_engine_kv_swa_window(s->engine);
    mine->kv_blocks_swa = (uint32_t)lp_engine_kv_blocks_swa(s->engine);
    mine->recurrent_layers = (uint32_t)s->hp->n_layer_rec;
    if (s->ring) {
        mine->shm_name = (char *)lp_shm_ring_name(s->ring);
        mine->shm_slots = lp_shm_ring_n_slots(s->ring);
    }
    return lp_hello_check_vocab(mine, peer);
}

/* ---- step ---------------------------------------------------------------- */

static int check_step(lp_engine_svc_t *s, const Lmpipe__StepRequest *req, size_t *n_rows)
{
    if (req->n_seqs == 0) return lp_error_set(LP_ERR(EINVAL), "step: no seqs");
    if (req->n_seqs > (size_t)s->max_seqs)
        return lp_error_set(LP_ERR(EINVAL), "step: %zu seqs, max_seqs is %d", req->n_seqs,
                            s->max_seqs);
    memset(s->seen, 0, (size_t)s->max_seqs);
    size_t total = 0, rows = 0;
    for (size_t i = 0; i < req->n_seqs; i++) {
        const Lmpipe__StepSeq *q = req->seqs[i];
        if (q->seq_id < 0 || q->seq_id >= s->max_seqs)
            return lp_error_set(LP_ERR(EINVAL), "step: seqs[%zu].seq_id %d is not in 0..%d", i,
                                q->seq_id, s->max_seqs - 1);
        if (s->seen[q->seq_id]++)
            return lp_error_set(LP_ERR(EINVAL), "step: seqs[%zu].seq_id %d appears twice", i,
                                q->seq_id);
        int32_t len = lp_engine_seq_len(s->engine, q->seq_id);
        if (!q->n_blocks && (q->pos < 0 || q->pos > len))
            return lp_error_set(LP_ERR(EINVAL), "step: seqs[%zu].pos %d is not in 0..%d (the "
                                "sequence's length)", i, q->pos, len);
        size_t n_tok = q->n_tokens + (q->chain ? 1 : 0);
        if (n_tok == 0)
            return lp_error_set(LP_ERR(EINVAL), "step: seqs[%zu] has no tokens", i);
        if (q->pos < 0 || n_tok > (size_t)s->n_ctx || q->pos > s->n_ctx - (int32_t)n_tok)
            return lp_error_set(q->pos < 0 ? LP_ERR(EINVAL) : LP_ERR(E2BIG), "step: seqs[%zu]: "
                                "%zu tokens at pos %d pass the context of %d", i, n_tok, q->pos,
                                s->n_ctx);
        if (q->n_blocks > (size_t)INT32_MAX || q->n_swa_blocks > (size_t)INT32_MAX)
            return lp_error_set(LP_ERR(EINVAL), "step: seqs[%zu].blocks: %zu entries", i,
                                q->n_blocks > q->n_swa_blocks ? q->n_blocks : q->n_swa_blocks);
        lp_batch_seq_t b = {.seq_id = q->seq_id, .pos = q->pos, .n_tokens = (int32_t)n_tok,
                            .blocks = q->n_blocks ? q->blocks : NULL,
                            .n_blocks = (int32_t)q->n_blocks,
                            .swa_blocks = q->n_swa_blocks ? q->swa_blocks : NULL,
                            .n_swa_blocks = (int32_t)q->n_swa_blocks};
        int krc = lp_engine_check_kv(s->engine, &b);
        if (krc) {
            lp_error_prefix("step: seqs[%zu]: ", i);
            return krc;
        }
        if (q->chain && (!s->ring || !req->n_rows))
            return lp_error_set(LP_ERR(EINVAL), "step: seqs[%zu].chain needs the ring and the rows "
                                "chosen by the sender (StepRequest.rows)", i);
        if (q->chain && q->chain->slot >= lp_shm_ring_n_slots(s->ring))
            return lp_error_set(LP_ERR(EINVAL), "step: seqs[%zu].chain.slot %u is not in 0..%u", i,
                                q->chain->slot, lp_shm_ring_n_slots(s->ring) - 1);
        if (q->n_logits < 0 || (size_t)q->n_logits > n_tok)
            return lp_error_set(LP_ERR(EINVAL), "step: seqs[%zu].n_logits %d is not in 0..%zu", i,
                                q->n_logits, n_tok);
        for (size_t k = 0; k < q->n_tokens; k++)
            if (q->tokens[k] < 0 || q->tokens[k] >= s->hp->n_vocab)
                return lp_error_set(LP_ERR(EINVAL), "step: seqs[%zu].tokens[%zu] = %d is not in "
                                    "0..%d", i, k, q->tokens[k], s->hp->n_vocab - 1);
        total += n_tok;
        rows += (size_t)q->n_logits;
    }
    if (total > (size_t)s->max_batch_tokens)
        return lp_error_set(LP_ERR(EINVAL), "step: %zu tokens, max_batch_tokens is %d", total,
                            s->max_batch_tokens);
    *n_rows = rows;
    return 0;
}

/* Take n ring slots, waiting (never overwriting) while the sampler has not
 * released enough of them. */
static int acquire_rows(lp_engine_svc_t *s, size_t n)
{
    if (n > lp_shm_ring_n_slots(s->ring))
        return lp_error_set(LP_ERR(EINVAL), "step: %zu logit rows, the ring has %u slots", n,
                            lp_shm_ring_n_slots(s->ring));
    uint64_t deadline = lp_now_ns() + (uint64_t)(s->p.ring_wait_ms > 0 ? s->p.ring_wait_ms : 10000) * 1000000ull;
    for (size_t i = 0; i < n; i++) {
        lmpipe__row_ref__init(&s->refs[i]);
        s->ref_ptrs[i] = &s->refs[i];
        for (;;) {
            int rc = lp_shm_ring_acquire(s->ring, &s->refs[i].slot, &s->refs[i].seq, &s->row_ptrs[i]);
            if (rc == 0) break;
            if (lp_shm_ring_stopping(s->ring)) {
                for (size_t k = 0; k < i; k++) lp_shm_ring_abandon(s->ring, s->refs[k].slot, s->refs[k].seq);
                return lp_error_set(LP_ERR(ECANCELED), "step: engine-svc is stopping (the logits ring "
                                    "was full)");
            }
            if (lp_now_ns() > deadline) {
                for (size_t k = 0; k < i; k++) lp_shm_ring_abandon(s->ring, s->refs[k].slot, s->refs[k].seq);
                return lp_error_set(LP_ERR(ETIMEDOUT), "step: the logits ring stayed full: the "
                                    "sampler has not released its rows");
            }
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
    return 0;
}

/* The sender chose the slots (StepRequest.rows) and a sampler may already
 * wait on them: when the step cannot run, mark each one failed so that the
 * waiter wakes at once.  Only when the step names this engine's ring: the
 * rows of a step for another ring are not ours to touch. */
static void fail_refs(lp_engine_svc_t *s, const Lmpipe__StepRequest *sr)
{
    if (!s->ring || !sr->ring || strcmp(sr->ring, lp_shm_ring_name(s->ring)) != 0) return;
    for (size_t i = 0; i < sr->n_rows; i++) {
        float *row;
        if (lp_shm_ring_acquire_at(s->ring, sr->rows[i]->slot, sr->rows[i]->seq, 0, &row) == 0)
            lp_shm_ring_fail(s->ring, sr->rows[i]->slot, sr->rows[i]->seq);
    }
}

/* The ring's waits in slices: a sampler killed while it held a slot (or
 * owed a token) never answers, so between slices the engine looks whether
 * it is still there, and gives up at once when it is not. */
#define RING_SLICE_MS 50

static int reader_gone_error(lp_engine_svc_t *s)
{
    return lp_error_set(LP_ERR(EPIPE), "shm %s: the sampler that reads the ring has exited",
                        lp_shm_ring_name(s->ring));
}

static int ring_acquire_at(lp_engine_svc_t *s, uint32_t slot, uint64_t seq, int wait_ms, float **row)
{
    for (int waited = 0;; waited += RING_SLICE_MS) {
        int left = wait_ms - waited;
        int rc = lp_shm_ring_acquire_at(s->ring, slot, seq, left < RING_SLICE_MS ? left : RING_SLICE_MS, row);
        if (rc != LP_ERR(ETIMEDOUT) || left <= RING_SLICE_MS) return rc;
        if (lp_shm_ring_reader_gone(s->ring)) return reader_gone_error(s);
    }
}

static int ring_wait_token(lp_engine_svc_t *s, uint32_t slot, uint64_t seq, int wait_ms, int32_t *t)
{
    for (int waited = 0;; waited += RING_SLICE_MS) {
        int left = wait_ms - waited;
        int rc = lp_shm_ring_wait_token(s->ring, slot, seq, left < RING_SLICE_MS ? left : RING_SLICE_MS, t);
        if (rc != LP_ERR(ETIMEDOUT) || left <= RING_SLICE_MS) return rc;
        if (lp_shm_ring_reader_gone(s->ring)) return reader_gone_error(s);
    }
}

/* Take the slots the sender chose, waiting (never overwriting) while the
 * sampler still holds one. */
static int acquire_given(lp_engine_svc_t *s, const Lmpipe__StepRequest *sr, size_t n)
{
    if (sr->n_rows != n)
        return lp_error_set(LP_ERR(EINVAL), "step: %zu rows given for %zu logit rows", sr->n_rows, n);
    int wait = s->p.ring_wait_ms > 0 ? s->p.ring_wait_ms : 10000;
    for (size_t i = 0; i < n; i++) {
        s->refs[i] = *sr->rows[i];
        s->ref_ptrs[i] = &s->refs[i];
        for (size_t k = 0; k < i; k++)
            if (s->refs[k].slot == s->refs[i].slot)
                return lp_error_set(LP_ERR(EINVAL), "step: rows[%zu] and rows[%zu] name slot %u", k,
                                    i, s->refs[i].slot);
    }
    for (size_t i = 0; i < n; i++) {
        int rc = ring_acquire_at(s, s->refs[i].slot, s->refs[i].seq, wait, &s->row_ptrs[i]);
        if (rc) {
            for (size_t k = 0; k < i; k++) lp_shm_ring_fail(s->ring, s->refs[k].slot, s->refs[k].seq);
            return rc;
        }
    }
    return 0;
}

static int do_step(lp_engine_svc_t *s, lp_service_t *svc, const lp_frame_t *req)
{
    const Lmpipe__StepRequest *sr = req->msg->step;
    size_t n_rows = 0;
    /* Steps queued behind a stop signal are refused, not computed: the
     * loop sees the signal once this handler returns. */
    if (lp_service_stop_requested()) {
        fail_refs(s, sr);
        return lp_error_set(LP_ERR(ECANCELED), "step: engine-svc is stopping");
    }
    bool use_ring = s->ring && !sr->inline_rows;
    if (!sr->inline_rows && !s->ring)
        return lp_error_set(LP_ERR(EINVAL), "step: rows in the ring asked for, but this engine has "
                            "none (--no-shm): set inline_rows");
    if (use_ring && (!sr->ring || strcmp(sr->ring, lp_shm_ring_name(s->ring)) != 0))
        return lp_error_set(LP_ERR(EINVAL), "step: ring '%s' is not this engine's ring (its hello "
                            "names it): set ring, or inline_rows", sr->ring ? sr->ring : "");
    if (!use_ring && sr->n_rows) {
        fail_refs(s, sr); /* (when they name this ring) */
        return lp_error_set(LP_ERR(EINVAL), "step: rows given, but the rows go inline");
    }
    int rc = check_step(s, sr, &n_rows);
    if (rc) {
        fail_refs(s, sr);
        return rc;
    }
    /* Chained seqs first: their first token is the one the sampler leaves
     * in an earlier row's slot (before this step's rows are taken, which may
     * reuse that slot).  A seq whose token does not come (its sampling
     * failed) is left out of the step, and its rows fail. */
    size_t nv = (size_t)s->hp->n_vocab;
    lp_batch_seq_t seqs[sr->n_seqs];
    bool dropped[sr->n_seqs];
    size_t n_tok = 0, n_dropped = 0;
    for (size_t i = 0; i < sr->n_seqs; i++) {
        const Lmpipe__StepSeq *q = sr->seqs[i];
        const int32_t *toks = q->tokens;
        size_t n = q->n_tokens;
        dropped[i] = false;
        if (q->chain) {
            int32_t t = -1;
            int wrc = ring_wait_token(s, q->chain->slot, q->chain->seq,
                                      s->p.ring_wait_ms > 0 ? s->p.ring_wait_ms : 10000, &t);
            if (wrc == 0 && (t < 0 || t >= s->hp->n_vocab))
                wrc = lp_error_set(LP_ERR(ERANGE), "token %d from the sampler is not in 0..%d", t,
                                   s->hp->n_vocab - 1);
            if (wrc) {
                /* A dead sampler fails every chained seq: said once a step. */
                if (wrc == LP_ERR(ENODATA) || (wrc == LP_ERR(EPIPE) && n_dropped))
                    LP_DEBUG("engine-svc: step: seqs[%zu]: %s", i, lp_error_msg());
                else LP_WARN("engine-svc: step: seqs[%zu].chain: %s; the seq is left out", i, lp_error_msg());
                dropped[i] = true;
                n_dropped++;
                continue;
            }
            int32_t *buf = s->tokbuf + n_tok;
            buf[0] = t;
            if (n) memcpy(buf + 1, q->tokens, n * sizeof(int32_t));
            toks = buf;
            n++;
            n_tok += n;
        }
        seqs[i] = (lp_batch_seq_t){q->seq_id, q->pos, (int32_t)n, toks, q->n_logits,
                                   q->n_blocks ? q->blocks : NULL, (int32_t)q->n_blocks,
                                   q->n_swa_blocks ? q->swa_blocks : NULL,
                                   (int32_t)q->n_swa_blocks};
    }
    if (use_ring && sr->n_rows) {
        if ((rc = acquire_given(s, sr, n_rows)) != 0) {
            fail_refs(s, sr);
            return rc;
        }
    } else if (use_ring) {
        if ((rc = acquire_rows(s, n_rows)) != 0) return rc;
    } else {
        if (n_rows * nv > s->inline_cap) {
            float *b = realloc(s->inline_rows, n_rows * nv * sizeof(float));
            if (!b) return LP_ERR(ENOMEM);
            s->inline_rows = b;
            s->inline_cap = n_rows * nv;
        }
        for (size_t i = 0; i < n_rows; i++) s->row_ptrs[i] = s->inline_rows + i * nv;
    }
    /* The seqs that run, with their rows (a dropped seq's rows stay out). */
    float **rows = s->row_ptrs;
    size_t n_run = sr->n_seqs;
    if (n_dropped) {
        rows = s->run_ptrs;
        n_run = 0;
        for (size_t i = 0, row = 0, k = 0; i < sr->n_seqs; i++) {
            size_t nl = (size_t)sr->seqs[i]->n_logits;
            if (!dropped[i]) {
                seqs[n_run++] = seqs[i];
                for (size_t j = 0; j < nl; j++) rows[k++] = s->row_ptrs[row + j];
            }
            row += nl;
        }
    }
    uint64_t t0 = lp_now_ns();
    rc = n_run ? lp_engine_step(s->engine, seqs, (int32_t)n_run, rows) : 0;
    uint64_t t1 = lp_now_ns();
    if (use_ring) {
        for (size_t i = 0, row = 0; i < sr->n_seqs; i++) {
            for (int32_t j = 0; j < sr->seqs[i]->n_logits; j++, row++) {
                uint32_t slot = s->refs[row].slot;
                uint64_t seq = s->refs[row].seq;
                if ((rc || dropped[i]) && sr->n_rows) lp_shm_ring_fail(s->ring, slot, seq);
                else if (rc) lp_shm_ring_abandon(s->ring, slot, seq);
                else lp_shm_ring_publish_timed(s->ring, slot, seq, t1 - t0);
            }
        }
    }
    if (rc) return rc;
    if (sr->quiet && sr->n_rows) return 0; /* the published slots say it all */
    Lmpipe__StepReply rep = LMPIPE__STEP_REPLY__INIT;
    rep.row_count = (uint32_t)n_rows;
    rep.n_vocab = (uint32_t)nv;
    rep.compute_ns = t1 - t0;
    if (use_ring) {
        rep.n_rows = n_rows;
        rep.rows = s->ref_ptrs;
    }
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.body_case = LMPIPE__MSG__BODY_STEP_REPLY;
    m.step_reply = &rep;
    return lp_service_reply(svc, req, &m, use_ring ? NULL : s->inline_rows,
                            use_ring ? 0 : n_rows * nv * sizeof(float));
}

static int on_request(void *ctx, lp_service_t *svc, const lp_frame_t *req)
{
    lp_engine_svc_t *s = ctx;
    if (req->has_raw) {
        /* a coordinator's step refused: a sampler may wait on its rows */
        if (req->msg->body_case == LMPIPE__MSG__BODY_STEP && lp_service_from_controller(svc, req))
            fail_refs(s, req->msg->step);
        return lp_error_set(LP_ERR(EPROTO), "%s: unexpected raw frame",
                            lp_msg_body_name(req->msg->body_case));
    }
    switch (req->msg->body_case) {
    case LMPIPE__MSG__BODY_STEP:
        if (!lp_service_from_controller(svc, req))
            return lp_error_set(LP_ERR(EPERM), "engine-svc takes steps from its coordinator only "
                                "(the first peer that said hello as ROLE_COORDINATOR)");
        return do_step(s, svc, req);
    default:
        return lp_error_set(LP_ERR(EPROTO), "engine-svc does not serve '%s' messages",
                            lp_msg_body_name(req->msg->body_case));
    }
}

const lp_service_ops_t lp_engine_svc_ops = {
    .name = "engine-svc",
    .role = LMPIPE__ROLE__ROLE_ENGINE,
    .hello = on_hello,
    .handle = on_request,
};
