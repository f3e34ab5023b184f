/* sampler_swap_test.c - the sampler through the real pipeline (four
 * services over ipc://):
 *
 *   - the same seed gives the same tokens through the whole pipeline,
 *     another seed does not, and the pipeline gives exactly the tokens of
 *     the engine and sampler libraries run in-process with that seed;
 *   - live swap under load: while 8 requests stream, the default strategy
 *     is swapped 20 times with `lmpipe sampler`'s control message, the
 *     example plugin is loaded and unloaded, a bad swap and a bad plugin are
 *     refused, and the last swap is rolled back.  No request may fail or
 *     stall, every token event's strategy version must be one the swaps
 *     made, in order, and every token must be the one that version forces
 *     (each swap forces a token with a logit bias under greedy sampling).
 *
 *   sampler_swap_test MODEL MASK_TOKENS_SO BAD_ABI_SO */
#include "client.h"
#include "engine.h"
#include "error.h"
#include "sampler.h"
#include "seq-json.h"
#include "pipeline.h"
#include "sampler-ctl.h"

#include "check.h"
#include "sp-json.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define N_REQ 8
#define N_PREDICT 400 /* long enough to outlive the 20 swaps on a fast pipeline */
#define MAX_V 64

static void pause_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void gen_init(Lmpipe__GenerateRequest *g, const char *prompt, const char *params, int n)
{
    lmpipe__generate_request__init(g);
    g->prompt.data = (uint8_t *)prompt;
    g->prompt.len = strlen(prompt);
    g->sampling = sp_json(params);
    g->n_predict = n;
}

/* One control message; returns the new version, or 0 when refused. */
static uint64_t ctl(const char *ep, const char *json, bool want_ok)
{
    bool ok;
    uint64_t v;
    char *reply = NULL;
    int rc = lp_sampler_ctl(ep, json, 10000, &ok, &v, &reply);
    CHECK(rc == 0, "control %s: %s", json, lp_error_msg());
    if (rc) return 0;
    CHECK(ok == want_ok, "control %s: ok=%d, wanted %d: %s", json, ok, want_ok, reply);
    free(reply);
    return ok ? v : 0;
}

/* The same request in-process: the engine library and the sampler library
 * with the same seed must give exactly the pipeline's tokens. */
static int inprocess(const char *model_path, const int32_t *prompt, int n_prompt,
                     const char *params, int n_gen, int32_t *out)
{
    lp_model_t *m = NULL;
    lp_engine_t *e = NULL;
    lp_sampler_store_t *st = NULL;
    lp_sampler_seq_t *seq = NULL;
    float *row = NULL;
    int rc = lp_model_load(model_path, &m);
    lp_engine_params_t ep = {0};
    ep.n_threads = 1;
    ep.max_seqs = 1;
    if (!rc) rc = lp_engine_new(m, &ep, &e);
    const lp_hparams_t *hp = m ? lp_model_hparams(m) : NULL;
    if (!rc) rc = lp_sampler_store_new("{\"top_k\":7}", &st); /* as the pipeline's default */
    if (!rc) rc = lp_sampler_store_set_vocab(st, hp->n_tokens_real, lp_model_token_mask(m), hp->n_vocab);
    if (!rc) rc = lp_sampler_seq_new(st, params, strlen(params), &seq);
    if (!rc && !(row = malloc((size_t)hp->n_vocab * sizeof(float)))) rc = LP_ERR(ENOMEM);
    for (int i = 0; !rc && i < n_prompt; i++) rc = lp_sampler_seq_accept(seq, prompt[i]);
    lp_batch_seq_t b = {.seq_id = 0, .pos = 0, .n_tokens = n_prompt, .tokens = prompt, .n_logits = 1};
    for (int t = 0; !rc && t < n_gen; t++) {
        float *rows[1] = {row};
        rc = lp_engine_step(e, &b, 1, rows);
        lp_sampler_result_t r;
        if (!rc) rc = lp_sampler_seq_sample(seq, row, hp->n_vocab, &r);
        if (!rc) rc = lp_sampler_seq_accept(seq, r.id);
        if (rc) break;
        out[t] = r.id;
        b.pos += b.n_tokens;
        b.n_tokens = 1;
        b.tokens = &out[t];
    }
    if (rc) fprintf(stderr, "in-process generation: %s\n", lp_error_msg());
    free(row);
    lp_sampler_seq_destroy(&seq);
    lp_sampler_store_destroy(&st);
    lp_engine_destroy(&e);
    lp_model_destroy(&m);
    return rc;
}

static void same_seed(lp_client_t *c, const char *model_path)
{
    const char *p1 = "{\"seed\":1234,\"temperature\":1.0,\"top_k\":0,\"top_p\":1,\"min_p\":0}";
    const char *p2 = "{\"seed\":1235,\"temperature\":1.0,\"top_k\":0,\"top_p\":1,\"min_p\":0}";
    lp_generation_t g[3];
    for (int i = 0; i < 3; i++) {
        Lmpipe__GenerateRequest r;
        gen_init(&r, "Once upon a time", i < 2 ? p1 : p2, 40);
        r.ignore_eos = true;
        CHECK_RC(lp_client_generate(c, 100 + (uint64_t)i, &r, 120000, NULL, NULL, &g[i]), 0);
        CHECK(g[i].n_ids == 40);
    }
    CHECK(g[0].n_ids == g[1].n_ids && !memcmp(g[0].ids, g[1].ids, g[0].n_ids * sizeof(int32_t)));
    CHECK(g[0].n_ids != g[2].n_ids || memcmp(g[0].ids, g[2].ids, g[0].n_ids * sizeof(int32_t)));
    for (int i = 0; i < 3; i++) {
        for (size_t k = 0; k < g[i].n_ids; k++) CHECK(g[i].versions[k] == 1);
        lp_generation_clear(&g[i]);
    }

    /* through the pipeline from token ids, and in-process: the same tokens */
    const int32_t prompt[6] = {1, 9038, 2501, 263, 931, 29892}; /* BOS "Once upon a time," */
    Lmpipe__GenerateRequest r;
    gen_init(&r, "", p1, 40);
    r.ignore_eos = true;
    r.prompt_ids = (int32_t *)prompt;
    r.n_prompt_ids = 6;
    lp_generation_t pg;
    CHECK_RC(lp_client_generate(c, 110, &r, 120000, NULL, NULL, &pg), 0);
    int32_t want[40];
    CHECK_RC(inprocess(model_path, prompt, 6, p1, 40, want), 0);
    CHECK(pg.n_ids == 40 && !memcmp(pg.ids, want, sizeof(want)));
    if (pg.n_ids == 40 && memcmp(pg.ids, want, sizeof(want))) {
        for (int t = 0; t < 40; t++)
            if (pg.ids[t] != want[t]) {
                fprintf(stderr, "pipeline and in-process differ at token %d: %d vs %d\n", t,
                        pg.ids[t], want[t]);
                break;
            }
    }
    lp_generation_clear(&pg);
}

/* Take the events that have come, without waiting. */
static void drain(lp_client_t *c, lp_generation_t *out, int *done)
{
    while (*done < N_REQ) {
        lp_frame_t f;
        int rc = lp_client_recv(c, 0, &f);
        if (rc == 0) {
            uint64_t id = f.msg->id;
            if (id >= 200 && id < 200 + N_REQ) *done += lp_generation_add(&out[id - 200], f.msg);
        }
        lp_frame_clear(&f);
        if (rc == LP_ERR(ETIMEDOUT)) break;
    }
}

static void live_swap(lp_client_t *c, const char *sampler_ep, const char *mask_so,
                      const char *bad_abi_so)
{
    /* forced[v]: the token version v forces; -2: anything but masked[v] */
    int32_t forced[MAX_V], masked[MAX_V];
    for (int v = 0; v < MAX_V; v++) forced[v] = masked[v] = -1;
    uint64_t v1 = ctl(sampler_ep, "{\"op\":\"set\",\"params\":{\"temperature\":0,"
                                  "\"logit_bias\":[[1000,1000]]}}", true);
    if (v1 == 0 || v1 >= MAX_V) return;
    forced[v1] = 1000;

    Lmpipe__GenerateRequest g[N_REQ];
    const char *prompts[N_REQ] = {"Once upon a time", "The cat", "Hello", "A", "In the garden",
                                  "Tom and", "She said", "It was"};
    lp_generation_t out[N_REQ];
    for (int i = 0; i < N_REQ; i++) {
        gen_init(&g[i], prompts[i], NULL, N_PREDICT);
        g[i].ignore_eos = true;
        memset(&out[i], 0, sizeof(out[i]));
        CHECK_RC(lp_client_send_generate(c, 200 + (uint64_t)i, &g[i]), 0);
    }
    int done = 0;
    /* wait until every request is streaming */
    for (int t = 0; t < 600; t++) {
        drain(c, out, &done);
        int streaming = 0;
        for (int i = 0; i < N_REQ; i++) streaming += out[i].n_ids > 0;
        if (streaming == N_REQ) break;
        pause_ms(50);
    }
    int32_t cur = 1000;
    uint64_t last = v1;
    for (int k = 1; k <= 20; k++) {
        char js[128];
        cur = 1000 + 37 * k;
        snprintf(js, sizeof(js), "{\"op\":\"set\",\"params\":{\"logit_bias\":[[%d,1000]]}}", cur);
        uint64_t v = ctl(sampler_ep, js, true);
        CHECK(v == last + 1);
        if (v && v < MAX_V) forced[v] = cur;
        if (v) last = v;
        drain(c, out, &done);
        pause_ms(40);
        if (k == 10) {
            /* the example plugin masks the forced token: greedy takes another */
            snprintf(js, sizeof(js), "{\"op\":\"load\",\"path\":\"%s\",\"config\":\"%d\"}", mask_so,
                     cur);
            v = ctl(sampler_ep, js, true);
            CHECK(v == last + 1);
            if (v && v < MAX_V) {
                forced[v] = -2;
                masked[v] = cur;
                last = v;
            }
            /* a plugin for another ABI is refused and changes nothing */
            snprintf(js, sizeof(js), "{\"op\":\"load\",\"path\":\"%s\"}", bad_abi_so);
            CHECK(ctl(sampler_ep, js, false) == 0);
            drain(c, out, &done);
            pause_ms(40);
        }
        if (k == 13) {
            /* a bad swap is refused and changes nothing */
            CHECK(ctl(sampler_ep, "{\"op\":\"set\",\"params\":{\"top_k\":-1}}", false) == 0);
            CHECK(ctl(sampler_ep, "{\"op\":\"set\",\"params\":{\"samplers\":[\"nope\"]}}", false) == 0);
        }
        if (k == 15) {
            v = ctl(sampler_ep, "{\"op\":\"unload\",\"name\":\"mask-tokens\"}", true);
            CHECK(v == last + 1);
            if (v && v < MAX_V) {
                forced[v] = cur;
                last = v;
            }
            drain(c, out, &done);
            pause_ms(40);
        }
    }
    /* roll back the 20th swap: the 19th's token again */
    uint64_t v = ctl(sampler_ep, "{\"op\":\"rollback\"}", true);
    CHECK(v == last + 1);
    if (v && v < MAX_V) {
        forced[v] = 1000 + 37 * 19;
        last = v;
    }
    /* collect the rest; a stalled request fails here */
    while (done < N_REQ) {
        lp_frame_t f;
        int rc = lp_client_recv(c, 120000, &f);
        CHECK(rc == 0, "live swap: %s (%d of %d requests done)", lp_error_msg(), done, N_REQ);
        if (rc) {
            lp_frame_clear(&f);
            break;
        }
        uint64_t id = f.msg->id;
        if (id >= 200 && id < 200 + N_REQ) done += lp_generation_add(&out[id - 200], f.msg);
        lp_frame_clear(&f);
    }

    bool seen[MAX_V] = {0};
    int n_seen = 0;
    for (int i = 0; i < N_REQ; i++) {
        CHECK(out[i].reason == LMPIPE__FINISH_REASON__FINISH_LENGTH);
        if (out[i].error[0]) fprintf(stderr, "request %d: %s\n", i, out[i].error);
        CHECK(out[i].n_ids == N_PREDICT);
        uint64_t prev = 0;
        int wrong = 0, backwards = 0, versions = 0;
        for (size_t t = 0; t < out[i].n_ids; t++) {
            uint64_t ver = out[i].versions[t];
            int32_t id = out[i].ids[t];
            if (ver < prev) backwards++;
            if (ver != prev) versions++;
            prev = ver;
            bool ok = ver >= 1 && ver < MAX_V &&
                      (ver == 1 ? true /* before the first swap: the model's own choice */
                       : forced[ver] == -2 ? id != masked[ver] : id == forced[ver]);
            if (!ok) {
                if (!wrong)
                    fprintf(stderr, "request %d token %zu: version %llu gave %d (forced %d)\n", i,
                            t, (unsigned long long)ver, id, ver < MAX_V ? forced[ver] : -9);
                wrong++;
            } else if (!seen[ver]) {
                seen[ver] = true;
                n_seen++;
            }
        }
        CHECK(wrong == 0);
        CHECK(backwards == 0);
        CHECK(versions >= 3); /* each request lived through swaps */
        lp_generation_clear(&out[i]);
    }
    fprintf(stderr, "live swap: %d strategy versions seen in the token streams (last %llu)\n",
            n_seen, (unsigned long long)last);
    CHECK(n_seen >= 10);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: sampler_swap_test MODEL MASK_TOKENS_SO BAD_ABI_SO\n");
        return 2;
    }
    char run_dir[] = "/tmp/lmpipe-swap-XXXXXX";
    if (!mkdtemp(run_dir)) {
        perror("mkdtemp");
        return 1;
    }
    char sampler_ep[256];
    snprintf(sampler_ep, sizeof(sampler_ep), "ipc://%s/sampler.sock", run_dir);
    uv_loop_t loop;
    uv_loop_init(&loop);
    lp_pipeline_opts_t o = {0};
    lp_config_t *cfg = lp_config_new();
    lp_config_set(cfg, "model", argv[1]);
    lp_config_set(cfg, "run_dir", run_dir);
    lp_config_set(cfg, "threads", "1");
    lp_config_set(cfg, "sampler.default", "{\"top_k\":7}"); /* the service default */
    char plugin_dir[4096]; /* the plugins' build folder, as sampler.plugin_dir */
    snprintf(plugin_dir, sizeof(plugin_dir), "%s", argv[2]);
    char *slash = strrchr(plugin_dir, '/');
    if (slash) *slash = '\0';
    lp_config_set(cfg, "sampler.plugin_dir", slash ? plugin_dir : ".");
    o.cfg = cfg;
    lp_pipeline_t *p = NULL;
    lp_client_t *c = NULL;
    int rc = lp_pipeline_start(&loop, &o, &p);
    lp_config_destroy(&cfg);
    if (!rc) rc = lp_pipeline_wait_ready(p, 60000);
    if (!rc) rc = lp_client_new(lp_pipeline_endpoint(p), &c);
    if (!rc) rc = lp_client_hello(c, 10000);
    CHECK(rc == 0, "pipeline start: %s", lp_error_msg());
    if (!rc) {
        /* get: version 1 before any change */
        bool ok;
        uint64_t v;
        char *reply;
        CHECK_RC(lp_sampler_ctl(sampler_ep, "{\"op\":\"get\"}", 10000, &ok, &v, &reply), 0);
        CHECK(ok && v == 1);
        CHECK(reply && strstr(reply, "\"top_k\":7,") != NULL);
        free(reply);
        same_seed(c, argv[1]);
        live_swap(c, sampler_ep, argv[2], argv[3]);
    }
    lp_client_destroy(&c);
    lp_pipeline_destroy(&p);
    uv_loop_close(&loop);
    rmdir(run_dir);
    sp_free_all();
    return CHECK_DONE();
}
