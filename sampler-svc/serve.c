/* serve.c - sampler-svc: sessions and sample batches (see serve.h).
 *
 * A SampleRequest's rows are each released as soon as they are read, also
 * when the item fails or only asks for the release (session 0), so the
 * engine's ring never fills up with rows nobody will read. */
#include "serve.h"

#include "sampling-wire.h"

#include "error.h"
#include "gguf.h"
#include "hello.h"
#include "plugin-watch.h"
#include "log.h"
#include "sampler.h"
#include "shm-ring.h"
#include "sysinfo.h"
#include "tokenizer.h"
#include "vocab-facts.h"
#include "vocab-text.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

struct lp_sampler_svc {
    lp_sampler_svc_params_t p;
    int32_t n_vocab;
    uint32_t n_tokens;
    uint64_t vocab_hash;
    lp_sampler_store_t *store;
    lp_tokenizer_t *tok;     /* the vocabulary as text: DRY's text sequence breakers */
    lp_sampler_registry_t *reg;
    lp_shm_ring_t *ring;     /* opened at hello when the coordinator names one */
    float *aligned;          /* an inline row copied to float alignment */
    struct detok {
        uint64_t session;
        lp_detok_t *d;
        int32_t *end_ids;  /* SamplerOpen.detok_end_ids */
        size_t n_end_ids;
        bool ended;        /* one of them came: no more text */
    } *detoks;             /* SamplerOpen.detok */
    size_t n_detoks, cap_detoks;
};

void lp_sampler_svc_destroy(lp_sampler_svc_t **self_p)
{
    if (!self_p || !*self_p) return;
    lp_sampler_svc_t *s = *self_p;
    lp_sampler_registry_destroy(&s->reg);
    lp_sampler_store_destroy(&s->store);
    lp_tokenizer_destroy(&s->tok);
    lp_shm_ring_destroy(&s->ring);
    for (size_t i = 0; i < s->n_detoks; i++) {
        lp_detok_destroy(&s->detoks[i].d);
        free(s->detoks[i].end_ids);
    }
    free(s->detoks);
    free(s->aligned);
    free(s);
    *self_p = NULL;
}

/* ---- plugins that crash or hang: the last strategy that did not ------------ */

/* The previous process died inside a plugin (plugin-watch.h): start on the
 * newest strategy without it, and say so. */
static int plugin_watch(lp_sampler_svc_t *s, const lp_sampler_svc_params_t *p)
{
    /* a file only where plugins can load and strategies are kept */
    char path[4096];
    bool keep = p->state_file && p->plugin_dir;
    if (keep) snprintf(path, sizeof(path), "%s.plugin-watch", p->state_file);
    lp_plugin_watch_report_t rep;
    int rc = lp_plugin_watch_start(keep ? path : NULL, p->plugin_timeout_ms, &rep);
    if (rc || !rep.died_in_plugin) return rc;
    uint64_t from, to;
    rc = lp_sampler_store_quarantine(s->store, rep.plugin, &from, &to);
    if (rc) return rc;
    if (from != to) lp_plugin_watch_count_fallback();
    LP_WARN("sampler-svc: the last run %s inside plugin %s (%s) on strategy version %" PRIu64 "; %s%" PRIu64
            " (plugin fallbacks: %u)", rep.hung ? "hung" : "died", rep.plugin, rep.what, from,
            from != to ? "serving now on the last strategy without it, as version " : "it is not in the strategy in force, version ",
            to, lp_plugin_watch_fallbacks());
    return 0;
}

int lp_sampler_svc_new(const lp_sampler_svc_params_t *p, lp_sampler_svc_t **out)
{
    *out = NULL;
    lp_sampler_svc_t *s = calloc(1, sizeof(*s));
    if (!s) return LP_ERR(ENOMEM);
    s->p = *p;
    /* Only the metadata and the tensor table: the weights are the engine's,
     * and the tokenizer copies what it needs, so the file closes below. */
    lp_gguf_t *g = NULL;
    lp_vocab_facts_t vf = {0};
    int rc = lp_gguf_open(p->model_path, &g);
    if (!rc && (rc = lp_vocab_facts_load(g, &vf)) != 0) lp_error_prefix("%s: ", p->model_path);
    if (rc) goto fail;
    s->n_vocab = vf.n_vocab;
    s->n_tokens = vf.n_tokens;
    s->vocab_hash = vf.hash;
    if ((rc = lp_sampler_store_new(p->default_json, &s->store)) != 0) goto fail;
    if (p->plugin_dir && (rc = lp_sampler_store_set_plugin_dir(s->store, p->plugin_dir)) != 0) {
        lp_error_prefix("--plugin-dir: ");
        goto fail;
    }
    rc = lp_sampler_store_set_vocab(s->store, vf.n_tokens_real, vf.token_mask, vf.n_vocab);
    if (rc) goto fail;
    if ((rc = lp_tokenizer_new_from_gguf(g, &s->tok)) == 0) {
        lp_sampler_vocab_text_t vt = lp_sampler_vocab_text_of(s->tok);
        if ((rc = lp_sampler_store_set_vocab_text(s->store, &vt)) != 0) goto fail;
    } else {
        /* no tokenizer in the GGUF: only token-ID breakers act */
        LP_WARN("sampler-svc: %s; DRY text breakers are off", lp_error_msg());
    }
    /* after the plugin folder: the saved strategies' plugins load from it */
    if (p->state_file && (rc = lp_sampler_store_set_state_file(s->store, p->state_file)) != 0) {
        lp_error_prefix("--state-file: ");
        goto fail;
    }
    if ((rc = plugin_watch(s, p)) != 0) goto fail;
    if ((rc = lp_sampler_registry_new(&s->reg)) != 0) goto fail;
    if (!(s->aligned = malloc((size_t)s->n_vocab * sizeof(float)))) {
        rc = LP_ERR(ENOMEM);
        goto fail;
    }
    lp_vocab_facts_clear(&vf);
    lp_gguf_destroy(&g);
    *out = s;
    return 0;
fail:
    lp_vocab_facts_clear(&vf);
    lp_gguf_destroy(&g);
    lp_sampler_svc_destroy(&s);
    return rc;
}

/* ---- hello: the vocabulary, and the ring the coordinator names ----------- */

static int on_hello(void *ctx, const Lmpipe__Hello *peer, bool controller, Lmpipe__Hello *mine)
{
    lp_sampler_svc_t *s = ctx;
    mine->n_vocab = (uint32_t)s->n_vocab;
    mine->n_tokens = s->n_tokens;
    mine->vocab_hash = s->vocab_hash;
    mine->no_shm = s->p.no_shm;
    mine->detok = s->tok != NULL;
    /* The coordinator replays the live strategy to a sampler behind it. */
    mine->strategy_version = lp_sampler_store_version(s->store);
    mine->plugin_fallbacks = lp_plugin_watch_fallbacks();
    int rc = lp_hello_check_vocab(mine, peer);
    if (rc) return rc;
    /* Only the controller (the coordinator) names the ring. */
    if (controller && peer->shm_name && peer->shm_name[0] && !s->p.no_shm) {
        if (!s->ring || strcmp(lp_shm_ring_name(s->ring), peer->shm_name) != 0) {
            lp_shm_ring_destroy(&s->ring);
            if (lp_shm_ring_open(peer->shm_name, &s->ring) != 0) {
                LP_WARN("sampler-svc: %s; rows will come inline", lp_error_msg());
            } else if ((int32_t)lp_shm_ring_row_len(s->ring) != s->n_vocab) {
                LP_WARN("sampler-svc: ring %s has rows of %u, the model %d; rows will come inline",
                        peer->shm_name, lp_shm_ring_row_len(s->ring), s->n_vocab);
                lp_shm_ring_destroy(&s->ring);
            }
        }
        mine->shm_ok = s->ring != NULL;
        if (s->ring) mine->shm_name = (char *)lp_shm_ring_name(s->ring);
    }
    return 0;
}

/* ---- sessions ------------------------------------------------------------- */

/* The session's text decoder (SamplerOpen.detok); NULL when it has none. */
static struct detok *detok_find(lp_sampler_svc_t *s, uint64_t session)
{
    for (size_t i = 0; i < s->n_detoks; i++)
        if (s->detoks[i].session == session) return &s->detoks[i];
    return NULL;
}

/* The session's decoder; `generated` (a reopened session's tokens so far,
 * whose text the client has) primes it without a word of output, so that
 * the next token's piece is the one the first decoder would have given
 * (bytes of a character it held back included). */
static int detok_add(lp_sampler_svc_t *s, uint64_t session, const int32_t *end_ids, size_t n_end,
                     const int32_t *prompt, size_t n_prompt, const int32_t *generated,
                     size_t n_generated)
{
    if (!s->tok)
        return lp_error_set(LP_ERR(ENOTSUP), "sampler_open: detok: the model has no tokenizer "
                            "(the hello says detok false)");
    if (s->n_detoks == s->cap_detoks) {
        size_t cap = s->cap_detoks ? 2 * s->cap_detoks : 16;
        struct detok *n = realloc(s->detoks, cap * sizeof(*n));
        if (!n) return LP_ERR(ENOMEM);
        s->detoks = n;
        s->cap_detoks = cap;
    }
    struct detok *d = &s->detoks[s->n_detoks];
    *d = (struct detok){.session = session, .n_end_ids = n_end};
    if (n_end > 4096)
        return lp_error_set(LP_ERR(EINVAL), "sampler_open: %zu detok_end_ids", n_end);
    if (n_end && !(d->end_ids = malloc(n_end * sizeof(int32_t)))) return LP_ERR(ENOMEM);
    if (n_end) memcpy(d->end_ids, end_ids, n_end * sizeof(int32_t));
    int rc = lp_detok_new(s->tok, false, &d->d);
    if (rc) {
        free(d->end_ids);
        return rc;
    }
    /* The generated text continues the prompt's: where the prompt showed
     * any text, its first token keeps its leading space (" went" after
     * "... Tim", as llama-server streams it); after BOS alone it is the
     * start of the text and loses it (as llama2.c and detokenize do). */
    for (size_t i = 0; i < n_prompt; i++) {
        const char *piece;
        size_t len;
        if (lp_token_piece(s->tok, prompt[i], false, &piece, &len) == 0 && len > 0) {
            lp_detok_continue(d->d);
            break;
        }
    }
    /* (as sample_one feeds them: nothing from an end token on) */
    for (size_t i = 0; i < n_generated && !d->ended; i++) {
        for (size_t k = 0; k < n_end && !d->ended; k++) d->ended = end_ids[k] == generated[i];
        const char *p;
        size_t n;
        if (!d->ended && (rc = lp_detok_feed(d->d, generated[i], &p, &n)) != 0) {
            lp_detok_destroy(&d->d);
            free(d->end_ids);
            lp_error_prefix("sampler_open: detok of generated_ids[%zu]: ", i);
            return rc;
        }
    }
    s->n_detoks++;
    return 0;
}

static void detok_remove(lp_sampler_svc_t *s, struct detok *d)
{
    lp_detok_destroy(&d->d);
    free(d->end_ids);
    *d = s->detoks[--s->n_detoks];
}

static int do_open(lp_sampler_svc_t *s, lp_service_t *svc, const lp_frame_t *req)
{
    const Lmpipe__SamplerOpen *o = req->msg->sampler_open;
    if (o->session == 0) return lp_error_set(LP_ERR(EINVAL), "sampler_open: session 0 is reserved");
    if (lp_sampler_registry_get(s->reg, o->session))
        return lp_error_set(LP_ERR(EEXIST), "sampler_open: session %llu is open",
                            (unsigned long long)o->session);
    /* typed parameters (lib/sampling-wire.h): no JSON here */
    lp_sampler_params_t *req_params = malloc(sizeof(*req_params));
    if (!req_params) return lp_error_set(LP_ERR(ENOMEM), "sampler_open: out of memory");
    lp_sampler_params_default(req_params);
    lp_sampler_seq_t *seq = NULL;
    int rc = lp_sampling_pb_read(o->params, req_params);
    if (rc) lp_error_prefix("sampler_open: ");
    else rc = lp_sampler_seq_new_params(s->store, req_params, &seq);
    free(req_params);
    if (rc) return rc;
    if (o->has_random_seed) lp_sampler_seq_set_random_seed(seq, o->random_seed);
    for (size_t i = 0; i < o->n_prompt_ids; i++) {
        if (o->prompt_ids[i] < 0 || o->prompt_ids[i] >= s->n_vocab) {
            lp_sampler_seq_destroy(&seq);
            return lp_error_set(LP_ERR(EINVAL), "sampler_open: prompt_ids[%zu] = %d is not in "
                                "0..%d", i, o->prompt_ids[i], s->n_vocab - 1);
        }
        if ((rc = lp_sampler_seq_accept(seq, o->prompt_ids[i])) != 0) {
            lp_sampler_seq_destroy(&seq);
            return rc;
        }
    }
    /* a reopened session: the tokens generated so far, and mirostat's mu */
    for (size_t i = 0; i < o->n_generated_ids; i++) {
        if (o->generated_ids[i] < 0 || o->generated_ids[i] >= s->n_vocab) {
            lp_sampler_seq_destroy(&seq);
            return lp_error_set(LP_ERR(EINVAL), "sampler_open: generated_ids[%zu] = %d is not in "
                                "0..%d", i, o->generated_ids[i], s->n_vocab - 1);
        }
    }
    rc = lp_sampler_seq_resume(seq, o->generated_ids, o->n_generated_ids);
    if (!rc && o->has_mirostat_mu && (rc = lp_sampler_seq_set_mu(seq, o->mirostat_mu)) != 0)
        lp_error_prefix("sampler_open: ");
    if (!rc && o->detok)
        rc = detok_add(s, o->session, o->detok_end_ids, o->n_detok_end_ids, o->prompt_ids,
                       o->n_prompt_ids, o->generated_ids, o->n_generated_ids);
    if (rc) {
        lp_sampler_seq_destroy(&seq);
        return rc;
    }
    if ((rc = lp_sampler_registry_put(s->reg, o->session, seq)) != 0) {
        struct detok *d = o->detok ? detok_find(s, o->session) : NULL;
        if (d) detok_remove(s, d);
        return rc;
    }
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    Lmpipe__SamplerOpen ack = LMPIPE__SAMPLER_OPEN__INIT;
    ack.session = o->session;
    m.body_case = LMPIPE__MSG__BODY_SAMPLER_OPEN;
    m.sampler_open = &ack;
    return lp_service_reply(svc, req, &m, NULL, 0);
}

static int do_close(lp_sampler_svc_t *s, lp_service_t *svc, const lp_frame_t *req)
{
    uint64_t key = req->msg->sampler_close->session;
    int rc = lp_sampler_registry_remove(s->reg, key);
    if (rc) return lp_error_set(rc, "sampler_close: no session %llu", (unsigned long long)key);
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    Lmpipe__SamplerClose ack = LMPIPE__SAMPLER_CLOSE__INIT;
    ack.session = key;
    /* The decoder's held-back bytes (an unfinished UTF-8 character) end the
     * text; the buffer is the decoder's, valid until it is destroyed. */
    struct detok *d = detok_find(s, key);
    if (d && req->msg->sampler_close->flush) {
        const char *p;
        size_t n;
        if (lp_detok_flush(d->d, &p, &n) == 0) {
            ack.flushed.data = (uint8_t *)p;
            ack.flushed.len = n;
        }
    }
    m.body_case = LMPIPE__MSG__BODY_SAMPLER_CLOSE;
    m.sampler_close = &ack;
    rc = lp_service_reply(svc, req, &m, NULL, 0);
    if (d) detok_remove(s, d);
    return rc;
}

/* ---- sampling -------------------------------------------------------------- */

/* `t_ready` (the first item's only): when its row was there, and the
 * engine's compute time stamped in its slot: the step metrics (SampleReply
 * sample_ns, engine_ns). */
static void sample_one(lp_sampler_svc_t *s, const Lmpipe__SampleItem *it, bool wait,
                       const void *raw, size_t n_raw_rows, Lmpipe__SampleResult *res, lp_sampler_result_t *r,
                       Lmpipe__TokenProb *tp, Lmpipe__TokenProb **tpp, char **piece, char *err,
                       size_t errcap, uint64_t *t_ready, uint64_t *engine_ns)
{
    res->token = -1;
    const float *row = NULL;
    bool from_ring = it->ref != NULL;
    if (from_ring) {
        if (!s->ring) {
            snprintf(err, errcap, "row by ring reference, but no ring is open");
            goto out;
        }
        /* The row may still be on its way (SampleRequest.wait): the engine
         * wakes this futex wait when it publishes or fails the slot.  A long
         * prefill of a big model on a CPU can take minutes: the limit is only
         * there for an engine that died (lmpipe up stops the rest then). */
        int wrc = wait ? lp_shm_ring_wait(s->ring, it->ref->slot, it->ref->seq, 300000) : 0;
        if (wrc == LP_ERR(ETIMEDOUT) || wrc == LP_ERR(ERANGE) || wrc == LP_ERR(EPIPE)) {
            snprintf(err, errcap, "%s", lp_error_msg());
            res->engine_lost = wrc == LP_ERR(EPIPE);
            from_ring = false; /* not ours to release */
            goto out;
        }
        if (wrc || lp_shm_ring_read(s->ring, it->ref->slot, it->ref->seq, &row) != 0) {
            snprintf(err, errcap, "%s", lp_error_msg());
            goto out;
        }
        if (t_ready) {
            *t_ready = lp_now_ns();
            lp_shm_ring_compute_ns(s->ring, it->ref->slot, it->ref->seq, engine_ns);
        }
    } else {
        if (!raw || it->row >= n_raw_rows) {
            snprintf(err, errcap, "inline row %u is not in the raw frame (%zu rows)", it->row, n_raw_rows);
            goto out;
        }
        /* ZeroMQ may hand a received frame at any byte offset inside its
         * receive buffer: copy a misaligned row. */
        const char *p = (const char *)raw + (size_t)it->row * (size_t)s->n_vocab * sizeof(float);
        if ((uintptr_t)p % sizeof(float)) {
            memcpy(s->aligned, p, (size_t)s->n_vocab * sizeof(float));
            row = s->aligned;
        } else {
            row = (const float *)p;
        }
    }
    if (it->session == 0) goto out; /* release only */
    lp_sampler_seq_t *seq = lp_sampler_registry_get(s->reg, it->session);
    if (!seq) {
        snprintf(err, errcap, "no session %llu", (unsigned long long)it->session);
        goto out;
    }
    if (lp_sampler_seq_pick(seq, row, s->n_vocab, r) != 0 || lp_sampler_seq_accept(seq, r->id) != 0) {
        snprintf(err, errcap, "%s", lp_error_msg());
        goto out;
    }
    /* The chosen token goes back with the slot at once: a chained step
     * waits for it there (StepSeq.chain).  Its logprobs (with n_probs, a
     * pass over the row as loaded, which the chain kept) and its text come
     * while the engine runs. */
    if (from_ring) {
        lp_shm_ring_release_token(s->ring, it->ref->slot, it->ref->seq, r->id);
        from_ring = false;
    }
    if (lp_sampler_seq_logprobs(seq, r) != 0) {
        snprintf(err, errcap, "%s", lp_error_msg());
        goto out;
    }
    /* The token's text, when the session streams it: copied, since the
     * decoder's buffer lasts only until its next token. */
    struct detok *d = detok_find(s, it->session);
    for (size_t k = 0; d && !d->ended && k < d->n_end_ids; k++) d->ended = d->end_ids[k] == r->id;
    if (d && !d->ended) {
        /* (after an end of generation the coordinator may still have a
         * row of the request sampled, chained before it knew: its token
         * must not change the text's end) */
        const char *p;
        size_t n;
        if (lp_detok_feed(d->d, r->id, &p, &n) != 0 || !(*piece = malloc(n ? n : 1))) {
            snprintf(err, errcap, "detokenize token %d: %s", r->id, lp_error_msg());
            goto out;
        }
        if (n) memcpy(*piece, p, n);
        res->piece.data = (uint8_t *)*piece;
        res->piece.len = n;
    }
    res->token = r->id;
    res->has_logprob = r->has_logprob;
    res->logprob = r->has_logprob ? r->logprob : 0.0f;
    res->strategy_version = r->version;
    res->has_mirostat_mu = r->has_mu;
    res->mirostat_mu = r->has_mu ? r->mu : 0.0f;
    res->n_top = (size_t)r->n_top;
    res->top = tpp;
    for (int32_t k = 0; k < r->n_top; k++) {
        lmpipe__token_prob__init(&tp[k]);
        tp[k].id = r->top[k].id;
        tp[k].logprob = r->top[k].logprob;
        tpp[k] = &tp[k];
    }
out:
    /* A row that gave no token is released without one: a chained step
     * waiting for it leaves the seq out. */
    if (from_ring && s->ring) lp_shm_ring_release(s->ring, it->ref->slot, it->ref->seq);
    if (err[0]) res->error = err;
}

static int do_sample(lp_sampler_svc_t *s, lp_service_t *svc, const lp_frame_t *req)
{
    const Lmpipe__SampleRequest *sr = req->msg->sample;
    size_t n = sr->n_items;
    if (n > 65536) return lp_error_set(LP_ERR(EINVAL), "sample: %zu items", n);
    size_t raw_len;
    const void *raw = lp_frame_raw(req, &raw_len);
    size_t row_bytes = (size_t)s->n_vocab * sizeof(float);
    if (raw && raw_len % row_bytes != 0)
        return lp_error_set(LP_ERR(EINVAL), "sample: raw frame of %zu bytes is not whole rows of %zu",
                            raw_len, row_bytes);
    size_t n_raw_rows = raw ? raw_len / row_bytes : 0;
    /* A request for another ring (its step went to an engine whose ring
     * this is not) is refused at once: a wait on our slots would last until
     * the limit, since no step fills them. */
    const char *open_ring = s->ring ? lp_shm_ring_name(s->ring) : "none open";
    if (sr->ring && sr->ring[0] && (!s->ring || strcmp(sr->ring, open_ring) != 0))
        return lp_error_set(LP_ERR(EINVAL), "sample: ring '%s' is not the ring this sampler has "
                            "open ('%s')", sr->ring, open_ring);
    if (sr->wait && (!sr->ring || !sr->ring[0]))
        return lp_error_set(LP_ERR(EINVAL), "sample: wait needs ring = the open ring's name ('%s')",
                            open_ring);
    Lmpipe__SampleResult *res = calloc(n ? n : 1, sizeof(*res));
    Lmpipe__SampleResult **resp = calloc(n ? n : 1, sizeof(*resp));
    lp_sampler_result_t *r = calloc(n ? n : 1, sizeof(*r));
    Lmpipe__TokenProb *tp = calloc((n ? n : 1) * LP_SAMPLER_MAX_N_PROBS, sizeof(*tp));
    Lmpipe__TokenProb **tpp = calloc((n ? n : 1) * LP_SAMPLER_MAX_N_PROBS, sizeof(*tpp));
    char (*errs)[256] = calloc(n ? n : 1, 256);
    char **pieces = calloc(n ? n : 1, sizeof(char *));
    int rc = 0;
    if (!res || !resp || !r || !tp || !tpp || !errs || !pieces) {
        rc = LP_ERR(ENOMEM);
        goto out;
    }
    /* The sampler's time starts once the first row is there (the rows of
     * one step are published together), so that the wait is not in it. */
    uint64_t t0 = lp_now_ns(), engine_ns = 0;
    for (size_t i = 0; i < n; i++) {
        lmpipe__sample_result__init(&res[i]);
        resp[i] = &res[i];
        sample_one(s, sr->items[i], sr->wait, raw, n_raw_rows, &res[i], &r[i], tp + i * LP_SAMPLER_MAX_N_PROBS,
                   tpp + i * LP_SAMPLER_MAX_N_PROBS, &pieces[i], errs[i], sizeof(errs[i]),
                   i == 0 && sr->wait ? &t0 : NULL, &engine_ns);
    }
    Lmpipe__SampleReply rep = LMPIPE__SAMPLE_REPLY__INIT;
    rep.n_results = n;
    rep.results = resp;
    rep.sample_ns = lp_now_ns() - t0;
    rep.engine_ns = engine_ns;
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.body_case = LMPIPE__MSG__BODY_SAMPLE_REPLY;
    m.sample_reply = &rep;
    rc = lp_service_reply(svc, req, &m, NULL, 0);
out:
    free(res);
    free(resp);
    free(r);
    free(tp);
    free(tpp);
    free(errs);
    for (size_t i = 0; pieces && i < n; i++) free(pieces[i]);
    free(pieces);
    return rc;
}

/* ---- live swap: one control message against the strategy store ------------ */

static int do_control(lp_sampler_svc_t *s, lp_service_t *svc, const lp_frame_t *req)
{
    const char *json = req->msg->sampler_control->json ? req->msg->sampler_control->json : "";
    char *reply = NULL;
    int rc = lp_sampler_store_control(s->store, json, strlen(json), &reply);
    if (!reply) return rc ? rc : LP_ERR(ENOMEM);
    if (rc) LP_INFO("sampler-svc: control refused: %s", lp_error_msg());
    else LP_INFO("sampler-svc: control: %.200s", reply);
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    Lmpipe__SamplerControlReply rep = LMPIPE__SAMPLER_CONTROL_REPLY__INIT;
    rep.ok = rc == 0;
    rep.version = lp_sampler_store_version(s->store);
    rep.json = reply;
    m.body_case = LMPIPE__MSG__BODY_SAMPLER_CONTROL_REPLY;
    m.sampler_control_reply = &rep;
    rc = lp_service_reply(svc, req, &m, NULL, 0);
    free(reply);
    return rc;
}

static int on_request(void *ctx, lp_service_t *svc, const lp_frame_t *req)
{
    lp_sampler_svc_t *s = ctx;
    Lmpipe__Msg__BodyCase bc = req->msg->body_case;
    if (req->has_raw && bc != LMPIPE__MSG__BODY_SAMPLE)
        return lp_error_set(LP_ERR(EPROTO), "%s: unexpected raw frame", lp_msg_body_name(bc));
    switch (bc) {
    case LMPIPE__MSG__BODY_SAMPLER_OPEN:
    case LMPIPE__MSG__BODY_SAMPLER_CLOSE:
    case LMPIPE__MSG__BODY_SAMPLE:
        if (!lp_service_from_controller(svc, req))
            return lp_error_set(LP_ERR(EPERM), "sampler-svc: sessions and sampling are its "
                                "coordinator's only (the first peer that said hello as "
                                "ROLE_COORDINATOR)");
        if (bc == LMPIPE__MSG__BODY_SAMPLER_OPEN) return do_open(s, svc, req);
        if (bc == LMPIPE__MSG__BODY_SAMPLER_CLOSE) return do_close(s, svc, req);
        return do_sample(s, svc, req);
    case LMPIPE__MSG__BODY_SAMPLER_CONTROL:
        /* `set` rewrites every tenant's sampling and `load` opens a library:
         * the coordinator (which checks its own clients), an admin key, or a
         * local peer on ipc:// only. */
        if (!lp_service_from_controller(svc, req) && !lp_service_from_admin(svc, req))
            return lp_error_set(LP_ERR(EPERM), "sampler-svc: control refused: only its "
                                "coordinator, an admin key (curve.admin) or a local peer on "
                                "ipc:// may control the sampler");
        return do_control(s, svc, req);
    default:
        return lp_error_set(LP_ERR(EPROTO), "sampler-svc does not serve '%s' messages",
                            lp_msg_body_name(bc));
    }
}

static void on_stats(void *ctx, Lmpipe__StatsReply *out)
{
    out->n_active = lp_sampler_registry_count(((lp_sampler_svc_t *)ctx)->reg);
}

const lp_service_ops_t lp_sampler_svc_ops = {
    .name = "sampler-svc",
    .role = LMPIPE__ROLE__ROLE_SAMPLER,
    .stats = on_stats,
    .hello = on_hello,
    .handle = on_request,
};
