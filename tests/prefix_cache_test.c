/* prefix_cache_test.c - the prefix cache end to end, over the four real
 * services (issue #20).  Every request's tokens are checked against the
 * same request run alone on a second pipeline whose coordinator has the
 * cache off (--no-prefix-cache):
 *
 *   - a multi-turn chat, each turn the whole conversation so far plus new
 *     tokens, alternately greedy and seeded: the same tokens; the hit-rate
 *     counters move by exactly the full blocks the previous turns computed;
 *   - eight requests sharing a prefix, at once, both cold (the same blocks
 *     computed side by side) and warm (taken from the cache);
 *   - a third pipeline whose coordinator uses a KV pool far smaller than
 *     the work (--kv-blocks): requests are preempted and recomputed, and
 *     every one still gives its tokens, a greedy one from BOS the golden's;
 *   - chunked prefill beside decode: a long prompt that arrives while a
 *     request decodes fills in over several steps, and the running request
 *     gets a token at every one of them (no step is all prefill);
 *   - a model with sliding-window layers (Gemma): the same tests (a prefix
 *     is taken back only where the sliding layers' blocks of its last
 *     window are cached too), and on a pipeline with blocks of 4 positions
 *     a request read at a context of 8 windows holds the full-attention
 *     pool's blocks of all its positions but only a window's blocks of the
 *     sliding layers' pool (the coordinator's counters, live and peak),
 *     and gives the golden's tokens;
 *   - a model with recurrent layers (qwen35): the coordinator turns the
 *     cache off, and says so (GroupStats.prefix_cache_off "recurrent_state",
 *     "configured" on the --no-prefix-cache pipeline): nothing is looked
 *     up or reused, no block stays cached, and every test above still
 *     gives the cache-off run's tokens (pool pressure: preempted requests
 *     recompute their state from position 0).
 *
 * The engine must page its KV (Hello.kv_block > 0); with an engine that
 * does not, the test is skipped (exit 77).
 *
 * usage: prefix_cache_test MODEL GOLDEN (the golden's first case: its prompt,
 * BOS alone for stories260K-from-bos, and its continuation) */
#include "client.h"
#include "error.h"
#include "fileio.h"
#include "frame.h"
#include "hello.h"
#include "json.h"
#include "pipeline.h"
#include "tokenizer.h"

#include "check.h"
#include "sp-json.h"

#include <stdlib.h>
#include <string.h>
#include <zmq.h>

typedef struct pipe {
    bool loop_open;
    uv_loop_t loop;
    lp_pipeline_t *p;
    lp_client_t *c;
    void *zctx, *stats; /* a second client socket for StatsRequests */
    uint64_t next_id;   /* on that socket; 0 until its hello */
} pipe_t;

static int start_kv(pipe_t *q, const char *model, bool cache, int kv_blocks, int max_batch,
                    int kv_block)
{
    memset(q, 0, sizeof(*q));
    uv_loop_init(&q->loop);
    q->loop_open = true;
    lp_pipeline_opts_t o = {0};
    lp_config_t *cfg = lp_config_new();
    lp_config_set(cfg, "model", model);
    lp_config_set(cfg, "threads", "1");
    lp_config_set(cfg, "coordinator.prefix_cache", cache ? "true" : "false");
    lp_config_setf(cfg, "coordinator.kv_blocks", "%d", kv_blocks);
    lp_config_setf(cfg, "max_batch_tokens", "%d", max_batch);
    o.cfg = cfg;
    if (kv_block > 0) lp_config_setf(cfg, "engine.kv_block", "%d", kv_block);
    int rc = lp_pipeline_start(&q->loop, &o, &q->p);
    lp_config_destroy(&cfg);
    if (!rc) rc = lp_pipeline_wait_ready(q->p, 60000);
    if (!rc) rc = lp_client_new(lp_pipeline_endpoint(q->p), &q->c);
    if (!rc) rc = lp_client_hello(q->c, 10000);
    CHECK(rc == 0, "pipeline start: %s", lp_error_msg());
    if (rc) return rc;
    q->zctx = zmq_ctx_new();
    q->stats = zmq_socket(q->zctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(q->stats, ZMQ_LINGER, &zero, sizeof(zero));
    return zmq_connect(q->stats, lp_pipeline_endpoint(q->p)) == 0 ? 0 : -1;
}

static int start(pipe_t *q, const char *model, bool cache, int kv_blocks, int max_batch)
{
    return start_kv(q, model, cache, kv_blocks, max_batch, 0);
}

static void stop(pipe_t *q)
{
    if (q->stats) zmq_close(q->stats);
    if (q->zctx) zmq_ctx_term(q->zctx);
    lp_client_destroy(&q->c);
    if (q->p) {
        CHECK_RC(lp_pipeline_stop(q->p), 0);
        lp_pipeline_destroy(&q->p);
    }
    if (q->loop_open) uv_loop_close(&q->loop);
    memset(q, 0, sizeof(*q));
}

static int ask(void *sock, Lmpipe__Msg *m, uint64_t id, lp_frame_t *f)
{
    m->id = id;
    memset(f, 0, sizeof(*f));
    if (lp_frame_send(sock, NULL, 0, m, NULL, 0)) return -1;
    zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
    while (zmq_poll(&it, 1, 10000) == 1) {
        if (lp_frame_recv(sock, false, f)) continue;
        if (f->msg->id == id) return 0;
        lp_frame_clear(f);
    }
    return -1;
}

typedef struct stats {
    uint64_t queries, hits, preemptions;
    uint32_t used, total, cached;
    uint32_t swa_used, swa_total, peak, swa_peak;
    char off[32]; /* the first group's prefix_cache_off */
} stats_t;

/* The model has recurrent layers: the coordinator keeps no prefix. */
static bool rec;

static stats_t stats(pipe_t *q)
{
    stats_t s = {0};
    lp_frame_t f;
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    Lmpipe__Hello h;
    if (!q->next_id) { /* the socket's hello, once */
        q->next_id = 1;
        lp_hello_init(&h, LMPIPE__ROLE__ROLE_CLIENT);
        m.body_case = LMPIPE__MSG__BODY_HELLO;
        m.hello = &h;
        CHECK(ask(q->stats, &m, q->next_id++, &f) == 0, "hello on the stats socket");
        lp_frame_clear(&f);
    }
    Lmpipe__StatsRequest sr = LMPIPE__STATS_REQUEST__INIT;
    m.body_case = LMPIPE__MSG__BODY_STATS;
    m.stats = &sr;
    if (ask(q->stats, &m, q->next_id++, &f) || f.msg->body_case != LMPIPE__MSG__BODY_STATS_REPLY) {
        CHECK(0, "no StatsReply from the coordinator");
        return s;
    }
    const Lmpipe__StatsReply *r = f.msg->stats_reply;
    s = (stats_t){r->prefix_cache_queries, r->prefix_cache_hits, r->kv_preemptions,
                  r->kv_blocks_used, r->kv_blocks_total, r->kv_blocks_cached,
                  r->kv_swa_blocks_used, r->kv_swa_blocks_total, r->kv_blocks_peak,
                  r->kv_swa_blocks_peak, {0}};
    if (r->n_groups && r->groups[0]->prefix_cache_off)
        snprintf(s.off, sizeof(s.off), "%s", r->groups[0]->prefix_cache_off);
    lp_frame_clear(&f);
    return s;
}

/* ---- requests ----------------------------------------------------------------- */

typedef struct req {
    int32_t *ids;
    size_t n;
    int n_predict;
    const char *params;
} req_t;

static Lmpipe__GenerateRequest gen_msg(const req_t *r)
{
    Lmpipe__GenerateRequest g = LMPIPE__GENERATE_REQUEST__INIT;
    g.n_prompt_ids = r->n;
    g.prompt_ids = r->ids;
    g.n_predict = r->n_predict;
    g.sampling = sp_json(r->params);
    g.ignore_eos = true;
    return g;
}

/* Run n requests at once; out[i] gets request i's result. */
static int run_many(lp_client_t *c, uint64_t first_id, const req_t *rs, size_t n, lp_generation_t *out)
{
    for (size_t i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof(out[i]));
        Lmpipe__GenerateRequest g = gen_msg(&rs[i]);
        if (lp_client_send_generate(c, first_id + i, &g)) return -1;
    }
    size_t done = 0;
    while (done < n) {
        lp_frame_t f;
        if (lp_client_recv(c, 120000, &f)) {
            fprintf(stderr, "run_many: %s\n", lp_error_msg());
            return -1;
        }
        uint64_t id = f.msg->id;
        if (id >= first_id && id < first_id + n) done += (size_t)lp_generation_add(&out[id - first_id], f.msg);
        lp_frame_clear(&f);
    }
    return 0;
}

static uint64_t next_id = 1;

/* Each request alone on the reference pipeline, then all of them at once
 * on `q`: the same tokens. */
static void same_tokens(pipe_t *ref, pipe_t *q, const req_t *rs, size_t n, const char *what)
{
    lp_generation_t want[n], got[n];
    for (size_t i = 0; i < n; i++) CHECK(run_many(ref->c, next_id++, &rs[i], 1, &want[i]) == 0);
    CHECK(run_many(q->c, next_id, rs, n, got) == 0, "%s", what);
    next_id += n;
    for (size_t i = 0; i < n; i++) {
        CHECK(want[i].n_ids == (size_t)rs[i].n_predict, "%s: request %zu alone: %zu tokens (%s)", what, i,
              want[i].n_ids, want[i].error);
        CHECK(got[i].n_ids == want[i].n_ids && !memcmp(got[i].ids, want[i].ids, want[i].n_ids * sizeof(int32_t)),
              "%s: request %zu differs from the cache-off run (%zu vs %zu tokens; %s)", what, i,
              got[i].n_ids, want[i].n_ids, got[i].error);
        lp_generation_clear(&want[i]);
        lp_generation_clear(&got[i]);
    }
}

static const char *const params[2] = {"{\"temperature\": 0}", "{\"temperature\": 0.9, \"seed\": 11}"};

static int32_t *tokens(const lp_tokenizer_t *tok, const char *text, bool bos, size_t *n)
{
    int32_t *ids = NULL;
    CHECK_RC(lp_tokenize_alloc(tok, text, strlen(text), bos, false, &ids, n), 0);
    return ids;
}

static void append(int32_t **ids, size_t *n, const int32_t *more, size_t k)
{
    int32_t *p = realloc(*ids, (*n + k) * sizeof(int32_t));
    if (!p) return;
    memcpy(p + *n, more, k * sizeof(int32_t));
    *ids = p;
    *n += k;
}

/* ---- the tests ----------------------------------------------------------------- */

/* A chat: each turn is the conversation so far (prompt and answers) plus a
 * user line.  A turn's answer is the same with and without the cache, and
 * the cache gives back every full block of what the previous turn
 * computed: its prompt and all but its last token. */
static void test_chat(pipe_t *ref, pipe_t *q, const lp_tokenizer_t *tok, uint32_t block)
{
    static const char *const lines[4] = {
        "Once upon a time there was a little girl named Lily who liked to play in the park with her dog.",
        " One day the dog ran away and Lily was very sad.",
        " Her mom said they would look for the dog together after lunch.",
        " They found the dog under a big tree near the river.",
    };
    size_t n = 0, prev_computed = 0;
    int32_t *conv = NULL;
    for (int t = 0; t < 4; t++) {
        size_t k;
        int32_t *more = tokens(tok, lines[t], t == 0, &k);
        append(&conv, &n, more, k);
        free(more);
        req_t r = {conv, n, 24, params[t % 2]};
        stats_t before = stats(q);
        lp_generation_t want, got;
        CHECK(run_many(ref->c, next_id++, &r, 1, &want) == 0);
        CHECK(run_many(q->c, next_id++, &r, 1, &got) == 0);
        CHECK(want.n_ids == 24 && got.n_ids == want.n_ids &&
              !memcmp(got.ids, want.ids, want.n_ids * sizeof(int32_t)),
              "chat turn %d (%s): %zu tokens, the cache-off run's %zu", t, r.params, got.n_ids, want.n_ids);
        stats_t after = stats(q);
        size_t reusable = (n - 1) / block, cached = prev_computed / block;
        uint64_t want_hits = rec ? 0 : (uint64_t)(reusable < cached ? reusable : cached) * block;
        CHECK(after.queries - before.queries == (rec ? 0 : n), "turn %d: %llu prompt tokens "
              "looked up", t, (unsigned long long)(after.queries - before.queries));
        CHECK(after.hits - before.hits == want_hits, "turn %d: %llu tokens reused, want %llu", t,
              (unsigned long long)(after.hits - before.hits), (unsigned long long)want_hits);
        printf("chat turn %d: %zu prompt tokens, %llu reused\n", t, n,
               (unsigned long long)(after.hits - before.hits));
        prev_computed = n + got.n_ids - 1;
        append(&conv, &n, want.ids, want.n_ids);
        lp_generation_clear(&want);
        lp_generation_clear(&got);
    }
    /* The same prompt again: everything but the block of its last token. */
    stats_t before = stats(q);
    req_t r = {conv, n - 24, 8, params[0]};
    lp_generation_t g;
    CHECK(run_many(q->c, next_id++, &r, 1, &g) == 0 && g.n_ids == 8);
    lp_generation_clear(&g);
    stats_t after = stats(q);
    CHECK(after.hits - before.hits == (rec ? 0 : (uint64_t)((r.n - 1) / block) * block),
          "a repeated prompt of %zu: %llu reused", r.n, (unsigned long long)(after.hits - before.hits));
    CHECK(after.used == 0 && (rec ? after.cached == 0 : after.cached > 0) &&
          after.cached <= after.total, "idle: %u used, %u cached of %u", after.used, after.cached,
          after.total);
    free(conv);
}

/* Eight requests with a common prefix and their own endings, at once:
 * first with nothing cached, then again once the prefix is. */
static void test_shared(pipe_t *ref, pipe_t *q, const lp_tokenizer_t *tok)
{
    static const char *const ends[8] = {" Tom", " The cat", " One day,", " Mom said",
                                        " It was", " Sam saw a bird", " Then", " The sun"};
    size_t np;
    int32_t *prefix = tokens(tok, "In a small house near the woods there lived an old man who liked to sing "
                                  "songs every morning to the birds and the trees and the little fox.", true, &np);
    int32_t *ids[8];
    req_t rs[8];
    for (int i = 0; i < 8; i++) {
        size_t n = 0, k;
        ids[i] = NULL;
        append(&ids[i], &n, prefix, np);
        int32_t *e = tokens(tok, ends[i], false, &k);
        append(&ids[i], &n, e, k);
        free(e);
        rs[i] = (req_t){ids[i], n, 20 + 3 * i, params[i % 2]};
    }
    stats_t before = stats(q);
    same_tokens(ref, q, rs, 8, "shared prefix, cold");
    same_tokens(ref, q, rs, 8, "shared prefix, warm");
    stats_t after = stats(q);
    if (rec) CHECK(after.hits == before.hits && after.cached == 0, "recurrent: nothing reused");
    else CHECK(after.hits > before.hits, "the shared prefix was reused");
    for (int i = 0; i < 8; i++) free(ids[i]);
    free(prefix);
}

/* The golden's first case: its prompt (gp) and its greedy continuation
 * (gw) up to the first step whose margin is below tau. */
static int32_t gp[256], gw[256];
static size_t n_gp, n_gw;

static void load_golden(const char *path, double tau)
{
    char *text = NULL;
    size_t len;
    lp_json_doc_t *doc = NULL;
    CHECK_RC(lp_read_file(path, &text, &len), 0);
    if (text && lp_json_parse(text, len, &doc) == 0) {
        const lp_json_t *cs = &lp_json_get(lp_json_root(doc), "cases")->u.items[0];
        const lp_json_t *arr = lp_json_get(cs, "continuation_ids");
        const lp_json_t *pr = lp_json_get(cs, "prompt_ids"), *st = lp_json_get(cs, "steps");
        for (size_t i = 0; arr && i < arr->n && i < 256; i++) {
            int64_t v;
            if (st && i < st->n && st->u.items[i].u.items[0].u.items[1].u.num -
                                           st->u.items[i].u.items[1].u.items[1].u.num < tau)
                break;
            if (!lp_json_int(&arr->u.items[i], 0, 1 << 30, &v)) gw[n_gw++] = (int32_t)v;
        }
        for (size_t i = 0; pr && i < pr->n && i < 256; i++) {
            int64_t v;
            if (!lp_json_int(&pr->u.items[i], 0, 1 << 30, &v)) gp[n_gp++] = (int32_t)v;
        }
    }
    if (!n_gp) gp[n_gp++] = 1; /* from BOS */
    CHECK(n_gw > 0, "golden %s", path);
    lp_json_doc_destroy(&doc);
    free(text);
}

/* A pool far smaller than the work: every request still correct. */
static void test_pressure(pipe_t *ref, const char *model, const lp_tokenizer_t *tok, uint32_t block)
{
    const int32_t *want = gw;
    size_t n_want = n_gw;
    static const char *const texts[7] = {
        "Once upon a time", "Lily and Tom went to the park", "One day, a little boy named Tim",
        "The cat sat on the mat and looked at the big red ball. It was", "Sam was sad because",
        "Mom said", "Once upon a time there was a child who",
    };
    int32_t *ids[7];
    req_t rs[8];
    size_t most = n_want + 1;
    for (int i = 0; i < 7; i++) {
        size_t n;
        ids[i] = tokens(tok, texts[i], true, &n);
        rs[i] = (req_t){ids[i], n, 48, params[i % 2]};
        if (n + 48 > most) most = n + 48;
    }
    rs[7] = (req_t){gp, n_gp, (int)n_want, params[0]};
    /* Room for about two of the longest requests: eight at once must
     * preempt. */
    int kv_blocks = (int)((2 * most + block - 1) / block) + 1;
    pipe_t q = {0};
    if (start(&q, model, true, kv_blocks, 0) == 0) {
        stats_t s0 = stats(&q);
        CHECK(s0.total == (uint32_t)kv_blocks, "the coordinator uses %d blocks: %u", kv_blocks, s0.total);
        same_tokens(ref, &q, rs, 8, "pool pressure");
        same_tokens(ref, &q, rs, 8, "pool pressure, again");
        lp_generation_t g;
        CHECK(run_many(q.c, next_id++, &rs[7], 1, &g) == 0);
        CHECK(g.n_ids == n_want && !memcmp(g.ids, want, n_want * sizeof(int32_t)), "the golden");
        lp_generation_clear(&g);
        stats_t s = stats(&q);
        printf("pool pressure: %d blocks of %u, %llu preemptions\n", kv_blocks, block,
               (unsigned long long)s.preemptions);
        CHECK(s.preemptions > 0, "eight requests in a pool for two preempt some");
        CHECK(s.used == 0, "every block back when idle: %u used", s.used);
    }
    stop(&q);
    for (int i = 0; i < 7; i++) free(ids[i]);
}

/* A request decodes; a prompt of about 300 tokens arrives.  With a batch
 * budget of 32 tokens a step, each step carries the running request's one
 * token and a 31-token chunk of the prompt, so the running request gets a
 * token at every step of the prefill.  Both give their solo tokens. */
static void test_chunked(pipe_t *ref, const char *model, const lp_tokenizer_t *tok)
{
    enum { BUDGET = 32 };
    static const char *const sentence = " The little dog ran to the park and played with a red ball all day.";
    char text[4096] = "Once upon a time,";
    size_t na, nb = 0;
    int32_t *a = tokens(tok, "Once upon a time", true, &na), *b = NULL;
    while (nb < 300 && strlen(text) + strlen(sentence) < sizeof(text)) {
        strcat(text, sentence);
        free(b);
        b = tokens(tok, text, true, &nb);
    }
    req_t rs[2] = {{a, na, 160, params[0]}, {b, nb, 8, params[1]}};
    lp_generation_t want[2], got[2] = {{0}};
    for (int i = 0; i < 2; i++) CHECK(run_many(ref->c, next_id++, &rs[i], 1, &want[i]) == 0);
    pipe_t q = {0};
    if (start(&q, model, true, 0, BUDGET) == 0) {
        uint64_t ida = next_id++, idb = next_id++;
        Lmpipe__GenerateRequest ga = gen_msg(&rs[0]), gb = gen_msg(&rs[1]);
        CHECK_RC(lp_client_send_generate(q.c, ida, &ga), 0);
        size_t a_at_b = 0, a_before_first_b = 0;
        bool b_sent = false, b_first = false;
        int done = 0;
        while (done < 2) {
            lp_frame_t f;
            if (lp_client_recv(q.c, 120000, &f)) {
                CHECK(0, "chunked: %s", lp_error_msg());
                break;
            }
            uint64_t id = f.msg->id;
            if (id == ida) done += lp_generation_add(&got[0], f.msg);
            if (id == idb) {
                if (!b_first && f.msg->body_case == LMPIPE__MSG__BODY_TOKEN) {
                    b_first = true;
                    a_before_first_b = got[0].n_ids - a_at_b;
                }
                done += lp_generation_add(&got[1], f.msg);
            }
            lp_frame_clear(&f);
            if (!b_sent && got[0].n_ids == 4) {
                CHECK_RC(lp_client_send_generate(q.c, idb, &gb), 0);
                b_sent = true;
                a_at_b = got[0].n_ids;
            }
        }
        size_t steps = (nb + BUDGET - 2) / (BUDGET - 1);
        printf("chunked prefill: a %zu-token prompt in about %zu steps; the running request got %zu tokens "
               "meanwhile\n", nb, steps, a_before_first_b);
        CHECK(b_first && a_before_first_b + 1 >= steps,
              "the running request decodes through the long prompt's prefill: %zu tokens in %zu steps",
              a_before_first_b, steps);
        for (int i = 0; i < 2; i++)
            CHECK(got[i].n_ids == want[i].n_ids && want[i].n_ids == (size_t)rs[i].n_predict &&
                      !memcmp(got[i].ids, want[i].ids, want[i].n_ids * sizeof(int32_t)),
                  "chunked: request %d gives its solo tokens (%zu vs %zu; %s)", i, got[i].n_ids, want[i].n_ids,
                  got[i].error);
    }
    stop(&q);
    for (int i = 0; i < 2; i++) {
        lp_generation_clear(&want[i]);
        lp_generation_clear(&got[i]);
    }
    free(a);
    free(b);
}

/* Sliding-window layers on blocks of 4 positions: read at a context of 8
 * windows, a request holds the full-attention blocks of every position and
 * only a window's of the sliding layers' pool. */
static void test_window(const char *model, uint32_t window)
{
    enum { BLOCK = 4 };
    pipe_t q = {0};
    if (start_kv(&q, model, true, 0, 0, BLOCK) == 0) {
        const Lmpipe__Hello *h = lp_client_server_hello(q.c);
        CHECK(h->kv_block == BLOCK, "kv_block %u", h->kv_block);
        const size_t at = 8 * window; /* the context at which the pools are read */
        req_t r = {gp, n_gp, (int)(at + 16 - n_gp), params[0]};
        Lmpipe__GenerateRequest g = gen_msg(&r);
        uint64_t id = next_id++;
        CHECK_RC(lp_client_send_generate(q.c, id, &g), 0);
        lp_generation_t got = {0};
        bool read = false, done = false;
        while (!done) {
            lp_frame_t f;
            if (lp_client_recv(q.c, 120000, &f)) {
                CHECK(0, "window: %s", lp_error_msg());
                break;
            }
            if (f.msg->id == id) done = lp_generation_add(&got, f.msg);
            lp_frame_clear(&f);
            if (!read && n_gp + got.n_ids >= at) {
                /* the coordinator may have planned a step or two beyond */
                stats_t s = stats(&q);
                read = true;
                printf("context %zu (8 windows of %u): %u full-attention blocks held, %u of the "
                       "sliding layers' pool (%u blocks)\n", n_gp + got.n_ids, window, s.used,
                       s.swa_used, s.swa_total);
                CHECK(s.used >= (uint32_t)(at / BLOCK), "full attention: %u blocks", s.used);
                CHECK(s.swa_used <= (window + BLOCK - 1) / BLOCK + 1,
                      "sliding layers: %u blocks held at 8 windows", s.swa_used);
            }
        }
        CHECK(read && got.n_ids == (size_t)r.n_predict, "%zu tokens (%s)", got.n_ids, got.error);
        CHECK(got.n_ids >= n_gw && !memcmp(got.ids, gw, n_gw * sizeof(int32_t)),
              "the golden's %zu tokens with the window's blocks given back", n_gw);
        stats_t s = stats(&q);
        const uint32_t peak = ((uint32_t)n_gp + BLOCK - 1) / BLOCK > (window + BLOCK - 1) / BLOCK + 1
                                  ? ((uint32_t)n_gp + BLOCK - 1) / BLOCK
                                  : (window + BLOCK - 1) / BLOCK + 1;
        CHECK(s.peak == (uint32_t)((n_gp + got.n_ids - 1 + BLOCK - 1) / BLOCK) && s.swa_peak <= peak,
              "peaks: %u full-attention blocks, %u sliding (at most %u)", s.peak, s.swa_peak, peak);
        CHECK(s.used == 0 && s.swa_used == 0, "idle: %u and %u blocks held", s.used, s.swa_used);
        lp_generation_clear(&got);
    }
    stop(&q);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: prefix_cache_test MODEL GOLDEN\n");
        return 2;
    }
    const char *model = argv[1];
    pipe_t on = {0}, off = {0};
    if (start(&on, model, true, 0, 0)) {
        stop(&on);
        return CHECK_DONE();
    }
    const Lmpipe__Hello *h = lp_client_server_hello(on.c);
    uint32_t block = h->kv_block;
    if (block == 0) {
        printf("SKIP: the engine announces kv_block 0 (no paged KV cache): the prefix cache "
               "needs a paging engine-svc (issue #20)\n");
        stop(&on);
        return 77;
    }
    printf("engine: KV blocks of %u positions, %u blocks; sliding window %u (%u blocks)\n", block,
           h->kv_blocks, h->kv_swa_window, h->kv_blocks_swa);
    const uint32_t window = h->kv_swa_window;
    rec = h->recurrent_layers > 0;
    if (rec) printf("engine: %u recurrent layers: the prefix cache is off\n", h->recurrent_layers);
    stats_t s_on = stats(&on);
    CHECK(!strcmp(s_on.off, rec ? "recurrent_state" : ""), "prefix_cache_off '%s'", s_on.off);
    load_golden(argv[2], strstr(argv[2], "gemma") ? 0.02 : 0.01);
    lp_tokenizer_t *tok = NULL;
    CHECK_RC(lp_tokenizer_new(model, &tok), 0);
    if (tok && start(&off, model, false, 0, 0) == 0) {
        stats_t s = stats(&off);
        CHECK(s.queries == 0 && s.total > 0, "the cache-off coordinator looks nothing up");
        CHECK(!strcmp(s.off, "configured"), "--no-prefix-cache: prefix_cache_off '%s'", s.off);
        test_chat(&off, &on, tok, block);
        test_shared(&off, &on, tok);
        test_pressure(&off, model, tok, block);
        test_chunked(&off, model, tok);
        s = stats(&off);
        CHECK(s.queries == 0 && s.hits == 0, "--no-prefix-cache: nothing looked up, nothing reused");
    }
    if (window) test_window(model, window);
    stop(&off);
    stop(&on);
    lp_tokenizer_destroy(&tok);
    sp_free_all();
    return CHECK_DONE();
}
