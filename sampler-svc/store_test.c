/* store_test.c - the versioned store: swaps, failed swaps that change
 * nothing, rollback, plugin loading (the example plugin, an ABI mismatch, a
 * missing symbol), control messages, the vocabulary guard, the registry, and
 * live swapping under load: 8 threads sample while the default strategy is
 * swapped 20 times and a plugin is loaded and unloaded; every token must be
 * the one its reported strategy version dictates.
 *
 * args: mask-tokens.so test-bad-abi.so test-no-symbol.so */
#include "sampler.h"
#include "seq-json.h"

#include "check.h"
#include "error.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *mask_so, *bad_abi_so, *no_symbol_so;
static char plugin_dir[4096]; /* the plugins' build folder, as the plugin folder */

static void sample_counts(lp_sampler_store_t *st, const char *params, const float *row, int n,
                          int draws, long *counts)
{
    lp_sampler_seq_t *seq;
    memset(counts, 0, sizeof(long) * (size_t)n);
    CHECK_RC(lp_sampler_seq_new(st, params, strlen(params), &seq), 0);
    if (!seq) return;
    for (int i = 0; i < draws; i++) {
        lp_sampler_result_t r;
        int rc = lp_sampler_seq_sample(seq, row, n, &r);
        CHECK(rc == 0, "sample: %s", lp_error_msg());
        if (rc) break;
        counts[r.id]++;
    }
    lp_sampler_seq_destroy(&seq);
}

static void test_versions(void)
{
    lp_sampler_store_t *st;
    CHECK_RC(lp_sampler_store_new("{\"top_k\":-3}", &st), LP_ERR(EINVAL));
    CHECK(strstr(lp_error_msg(), "top_k") != NULL);
    CHECK_RC(lp_sampler_store_new("{\"temperature\":0.7}", &st), 0);
    CHECK(lp_sampler_store_version(st) == 1);
    uint64_t v = 0;
    const char *s1 = "{\"top_k\":5}";
    CHECK_RC(lp_sampler_store_swap(st, s1, strlen(s1), &v), 0);
    CHECK(v == 2 && lp_sampler_store_version(st) == 2);
    char *before = lp_sampler_store_describe(st);
    /* failed swaps change nothing */
    const char *bad[] = {"{\"top_p\":1.5}", "{\"samplers\":[\"nope\"]}", "{\"top_k\":",
                         "{\"samplers\":[\"plugin:not-loaded\"]}", "{\"temprature\":1}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = 0;
        CHECK(lp_sampler_store_swap(st, bad[i], strlen(bad[i]), &v) < 0);
        CHECK(v == 0);
    }
    char *after = lp_sampler_store_describe(st);
    CHECK(before && after && !strcmp(before, after));
    CHECK(strstr(after, "\"version\":2") && strstr(after, "\"top_k\":5") &&
          strstr(after, "\"temperature\":0.7"));
    free(before);
    free(after);
    /* a sequence sees the default overlaid with its own fields */
    lp_sampler_seq_t *seq;
    const char *req = "{\"top_p\":0.5,\"prompt\":\"ignored\"}";
    CHECK_RC(lp_sampler_seq_new(st, req, strlen(req), &seq), 0);
    const lp_sampler_params_t *ep = lp_sampler_seq_params(seq);
    CHECK(ep->top_k == 5 && ep->top_p == 0.5f && ep->temperature == 0.7f);
    lp_sampler_seq_destroy(&seq);
    /* rollback: back to version 1's strategy under a new number */
    CHECK_RC(lp_sampler_store_rollback(st, &v), 0);
    CHECK(v == 3);
    CHECK_RC(lp_sampler_seq_new(st, NULL, 0, &seq), 0);
    CHECK(lp_sampler_seq_params(seq)->top_k == 40);
    lp_sampler_seq_destroy(&seq);
    CHECK_RC(lp_sampler_store_rollback(st, &v), LP_ERR(ENOENT));
    CHECK(strstr(lp_error_msg(), "no earlier strategy") != NULL);
    CHECK(lp_sampler_store_version(st) == 3);
    lp_sampler_store_destroy(&st);
    CHECK(st == NULL);
}

static void test_plugins(void)
{
    lp_sampler_store_t *st;
    CHECK_RC(lp_sampler_store_new("{\"temperature\":1,\"samplers\":[]}", &st), 0);
    CHECK_RC(lp_sampler_store_set_plugin_dir(st, plugin_dir), 0);
    uint64_t v = 0;
    /* refusals, each leaving version 1 in place */
    CHECK_RC(lp_sampler_store_load_plugin(st, bad_abi_so, NULL, &v), LP_ERR(EPROTO));
    CHECK(strstr(lp_error_msg(), "ABI version 999, this service needs 1") != NULL);
    CHECK_RC(lp_sampler_store_load_plugin(st, no_symbol_so, NULL, &v), LP_ERR(ENOENT));
    CHECK(strstr(lp_error_msg(), "missing symbol lp_sampler_plugin_get") != NULL);
    CHECK_RC(lp_sampler_store_load_plugin(st, "/nonexistent/x.so", NULL, &v), LP_ERR(ENOENT));
    CHECK(strstr(lp_error_msg(), "cannot load") != NULL);
    CHECK_RC(lp_sampler_store_load_plugin(st, mask_so, "3,x", &v), LP_ERR(EINVAL));
    CHECK(strstr(lp_error_msg(), "init refused") != NULL);
    CHECK(v == 0 && lp_sampler_store_version(st) == 1);

    /* the example plugin masks token 3: p (.1 .2 .3 .4) becomes 1/6 2/6 3/6 0 */
    CHECK_RC(lp_sampler_store_load_plugin(st, mask_so, "3", &v), 0);
    CHECK(v == 2);
    CHECK_RC(lp_sampler_store_load_plugin(st, mask_so, "1", &v), LP_ERR(EEXIST));
    float p4[4] = {logf(0.1f), logf(0.2f), logf(0.3f), logf(0.4f)};
    long counts[4];
    const int draws = 12000;
    sample_counts(st, "{\"seed\":3}", p4, 4, draws, counts);
    CHECK(counts[3] == 0);
    double x2 = 0;
    for (int i = 0; i < 3; i++) {
        double e = draws * (i + 1) / 6.0;
        x2 += (counts[i] - e) * (counts[i] - e) / e;
    }
    CHECK(x2 < 13.82); /* chi-square, 2 degrees of freedom, p = 0.001 */
    /* a request can place the plugin itself */
    sample_counts(st, "{\"seed\":4,\"samplers\":[\"plugin:mask-tokens\",\"top_k\"],\"top_k\":1}",
                  p4, 4, 100, counts);
    CHECK(counts[2] == 100); /* 3 masked, then the best of the rest */
    char *d = lp_sampler_store_describe(st);
    CHECK(d && strstr(d, "\"plugin:mask-tokens\"") && strstr(d, "\"name\":\"mask-tokens\""));
    free(d);
    /* unload: token 3 comes back */
    CHECK_RC(lp_sampler_store_unload_plugin(st, "nope", &v), LP_ERR(ENOENT));
    CHECK_RC(lp_sampler_store_unload_plugin(st, "mask-tokens", &v), 0);
    CHECK(v == 3);
    sample_counts(st, "{\"seed\":5}", p4, 4, 2000, counts);
    CHECK(counts[3] > 600);
    lp_sampler_store_destroy(&st);
}

static void test_control(void)
{
    lp_sampler_store_t *st;
    CHECK_RC(lp_sampler_store_new(NULL, &st), 0);
    CHECK_RC(lp_sampler_store_set_plugin_dir(st, plugin_dir), 0);
    char *reply;
    const char *m1 = "{\"op\":\"set\",\"params\":{\"top_k\":5}}";
    CHECK_RC(lp_sampler_store_control(st, m1, strlen(m1), &reply), 0);
    CHECK(reply && strstr(reply, "\"ok\":true") && strstr(reply, "\"changed\":2") &&
          strstr(reply, "\"top_k\":5"));
    free(reply);
    const char *m2 = "{\"op\":\"set\",\"params\":{\"top_k\":-1}}";
    CHECK_RC(lp_sampler_store_control(st, m2, strlen(m2), &reply), LP_ERR(EINVAL));
    CHECK(reply && strstr(reply, "\"ok\":false") && strstr(reply, "top_k: must be >= 0"));
    free(reply);
    const char *bad[] = {"{\"op\":\"fly\"}", "{\"op\":", "[]", "{\"params\":{}}",
                         "{\"op\":\"load\"}", "{\"op\":\"unload\",\"name\":\"x\"}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK(lp_sampler_store_control(st, bad[i], strlen(bad[i]), &reply) < 0);
        CHECK(reply && strstr(reply, "\"ok\":false,\"error\":"));
        free(reply);
    }
    char m3[512];
    snprintf(m3, sizeof(m3), "{\"op\":\"load\",\"path\":\"%s\",\"config\":\"1 2\"}", mask_so);
    CHECK_RC(lp_sampler_store_control(st, m3, strlen(m3), &reply), 0);
    CHECK(reply && strstr(reply, "\"changed\":3") && strstr(reply, "\"config\":\"1 2\""));
    free(reply);
    const char *m4 = "{\"op\":\"rollback\"}";
    CHECK_RC(lp_sampler_store_control(st, m4, strlen(m4), &reply), 0);
    CHECK(reply && strstr(reply, "\"changed\":4") && strstr(reply, "\"plugins\":[]"));
    free(reply);
    const char *m5 = "{\"op\":\"get\"}";
    CHECK_RC(lp_sampler_store_control(st, m5, strlen(m5), &reply), 0);
    CHECK(reply && strstr(reply, "\"version\":4") && !strstr(reply, "changed"));
    free(reply);
    CHECK(lp_sampler_store_version(st) == 4);
    lp_sampler_store_destroy(&st);
}

static void test_guard_and_registry(void)
{
    lp_sampler_store_t *st;
    CHECK_RC(lp_sampler_store_new("{\"temperature\":1.5,\"top_k\":0,\"top_p\":1,\"min_p\":0}", &st),
             0);
    /* 6 logits; the real vocabulary is 4 and token 1 is masked; the
     * excluded ones have by far the largest logits */
    uint8_t mask[6] = {0, 1, 0, 0, 0, 0};
    CHECK_RC(lp_sampler_store_set_vocab(st, 4, mask, 6), 0);
    CHECK_RC(lp_sampler_store_set_vocab(st, 0, NULL, 0), LP_ERR(EINVAL));
    float row[6] = {0.0f, 50.0f, 0.5f, 1.0f, 60.0f, 70.0f};
    long counts[6];
    sample_counts(st, "{\"seed\":9}", row, 6, 3000, counts);
    CHECK(counts[1] == 0 && counts[4] == 0 && counts[5] == 0);
    CHECK(counts[0] > 0 && counts[2] > 0 && counts[3] > 0);
    sample_counts(st, "{\"seed\":9,\"temperature\":0}", row, 6, 10, counts);
    CHECK(counts[3] == 10);
    /* logprob is over the guarded row: token 3 of {0, 0.5, 1} */
    lp_sampler_seq_t *seq;
    const char *lp = "{\"temperature\":0,\"n_probs\":1}";
    CHECK_RC(lp_sampler_seq_new(st, lp, strlen(lp), &seq), 0);
    lp_sampler_result_t r;
    CHECK_RC(lp_sampler_seq_sample(seq, row, 6, &r), 0);
    double lse = log(exp(0.0) + exp(0.5) + exp(1.0));
    CHECK(r.id == 3 && r.has_logprob && fabs(r.logprob - (1.0 - lse)) < 1e-5);
    CHECK(r.n_top == 1 && r.top[0].id == 3);
    /* without n_probs the same token comes without them */
    lp_sampler_seq_t *plain;
    CHECK_RC(lp_sampler_seq_new(st, "{\"temperature\":0}", 17, &plain), 0);
    lp_sampler_result_t rp;
    CHECK_RC(lp_sampler_seq_sample(plain, row, 6, &rp), 0);
    CHECK(rp.id == 3 && !rp.has_logprob && isnan(rp.logprob) && rp.n_top == 0);
    lp_sampler_seq_destroy(&plain);
    /* a row where everything is excluded is an error, not a token */
    float dead[6] = {NAN, 1, NAN, NAN, 5, 5};
    CHECK_RC(lp_sampler_seq_sample(seq, dead, 6, &r), LP_ERR(ENOENT));
    CHECK(strstr(lp_error_msg(), "masked or NaN") != NULL);

    lp_sampler_registry_t *reg;
    CHECK_RC(lp_sampler_registry_new(&reg), 0);
    CHECK_RC(lp_sampler_registry_put(reg, 42, seq), 0);
    CHECK(lp_sampler_registry_get(reg, 42) == seq && lp_sampler_registry_get(reg, 7) == NULL);
    lp_sampler_seq_t *dup;
    CHECK_RC(lp_sampler_seq_new(st, NULL, 0, &dup), 0);
    CHECK_RC(lp_sampler_registry_put(reg, 42, dup), LP_ERR(EEXIST)); /* dup destroyed */
    CHECK(lp_sampler_registry_count(reg) == 1);
    CHECK_RC(lp_sampler_registry_remove(reg, 7), LP_ERR(ENOENT));
    CHECK_RC(lp_sampler_registry_remove(reg, 42), 0);
    CHECK(lp_sampler_registry_count(reg) == 0);
    CHECK_RC(lp_sampler_seq_new(st, NULL, 0, &dup), 0);
    CHECK_RC(lp_sampler_registry_put(reg, 1, dup), 0);
    lp_sampler_registry_destroy(&reg); /* frees the sequence still inside */
    lp_sampler_store_destroy(&st);
}

/* ---- live swapping under load ------------------------------------------------- */

#define N_WORKERS 8
#define N_TOK 64
#define MAX_VERSIONS 64

static lp_sampler_store_t *g_st;
static float g_row[N_TOK];
static atomic_int g_done;
/* expected token per version, published before the version can be seen */
static _Atomic int32_t g_expect[MAX_VERSIONS];

typedef struct worker {
    int idx;
    int n;
    uint64_t version[20000];
    int32_t token[20000];
    int failures;
} worker_t;

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    lp_sampler_seq_t *seq;
    char req[64];
    snprintf(req, sizeof(req), "{\"seed\":%d}", 100 + w->idx);
    if (lp_sampler_seq_new(g_st, req, strlen(req), &seq)) {
        w->failures++;
        return NULL;
    }
    int after_done = 0;
    while (w->n < 20000 && after_done < 50) {
        lp_sampler_result_t r;
        if (lp_sampler_seq_sample(seq, g_row, N_TOK, &r) || lp_sampler_seq_accept(seq, r.id)) {
            fprintf(stderr, "worker %d step %d: %s\n", w->idx, w->n, lp_error_msg());
            w->failures++;
            break;
        }
        w->version[w->n] = r.version;
        w->token[w->n] = r.id;
        w->n++;
        if (atomic_load(&g_done)) after_done++;
        struct timespec ts = {0, 100000}; /* a decode step's worth of pacing */
        nanosleep(&ts, NULL);
    }
    lp_sampler_seq_destroy(&seq);
    return NULL;
}

static void pause_ms(int ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_live_swap(void)
{
    /* greedy over logits 0.00, 0.01, ... 0.63: token 63 unless a bias moves it */
    for (int i = 0; i < N_TOK; i++) g_row[i] = i * 0.01f;
    CHECK_RC(lp_sampler_store_new("{\"temperature\":0}", &g_st), 0);
    CHECK_RC(lp_sampler_store_set_plugin_dir(g_st, plugin_dir), 0);
    for (int v = 0; v < MAX_VERSIONS; v++) atomic_init(&g_expect[v], -1);
    atomic_store(&g_expect[1], 63);
    atomic_init(&g_done, 0);
    static worker_t w[N_WORKERS];
    pthread_t th[N_WORKERS];
    for (int i = 0; i < N_WORKERS; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].idx = i;
        pthread_create(&th[i], NULL, worker_main, &w[i]);
    }
    int32_t forced = 63; /* token the current strategy forces */
    bool masked10 = false;
    uint64_t v;
    int n_changes = 0;
    for (int k = 1; k <= 20; k++) {
        pause_ms(3);
        /* swap k forces token k via a bias of +100 */
        char js[64];
        snprintf(js, sizeof(js), "{\"logit_bias\":[[%d,100]]}", k);
        forced = k;
        /* publish the expectation for the version this swap will create */
        uint64_t next = lp_sampler_store_version(g_st) + 1;
        atomic_store(&g_expect[next], masked10 && forced == 10 ? 63 : forced);
        CHECK_RC(lp_sampler_store_swap(g_st, js, strlen(js), &v), 0);
        CHECK(v == next);
        n_changes++;
        if (k == 10) {
            /* load the plugin masking token 10, the one forced right now */
            pause_ms(3);
            next = lp_sampler_store_version(g_st) + 1;
            atomic_store(&g_expect[next], 63);
            CHECK_RC(lp_sampler_store_load_plugin(g_st, mask_so, "10", &v), 0);
            CHECK(v == next);
            masked10 = true;
            n_changes++;
        }
        if (k == 15) {
            pause_ms(3);
            next = lp_sampler_store_version(g_st) + 1;
            atomic_store(&g_expect[next], forced);
            CHECK_RC(lp_sampler_store_unload_plugin(g_st, "mask-tokens", &v), 0);
            CHECK(v == next);
            masked10 = false;
            n_changes++;
        }
    }
    pause_ms(3);
    /* a failed swap in the middle of it all changes nothing */
    CHECK(lp_sampler_store_swap(g_st, "{\"top_k\":-1}", 12, &v) < 0);
    /* roll back the last swap: token 19 is forced again */
    uint64_t next = lp_sampler_store_version(g_st) + 1;
    atomic_store(&g_expect[next], 19);
    CHECK_RC(lp_sampler_store_rollback(g_st, &v), 0);
    CHECK(v == next);
    n_changes++;
    pause_ms(5);
    atomic_store(&g_done, 1);
    for (int i = 0; i < N_WORKERS; i++) pthread_join(th[i], NULL);

    uint64_t last = lp_sampler_store_version(g_st);
    CHECK(last == (uint64_t)(1 + n_changes));
    int seen_versions = 0;
    bool seen[MAX_VERSIONS] = {0};
    for (int i = 0; i < N_WORKERS; i++) {
        CHECK(w[i].failures == 0);
        CHECK(w[i].n > 50);
        uint64_t prev = 0;
        int wrong = 0, backwards = 0;
        for (int t = 0; t < w[i].n; t++) {
            uint64_t ver = w[i].version[t];
            if (ver < prev) backwards++;
            prev = ver;
            if (ver >= MAX_VERSIONS || w[i].token[t] != atomic_load(&g_expect[ver])) {
                if (!wrong)
                    fprintf(stderr, "worker %d step %d: version %llu gave token %d, expected %d\n",
                            i, t, (unsigned long long)ver, w[i].token[t],
                            ver < MAX_VERSIONS ? atomic_load(&g_expect[ver]) : -1);
                wrong++;
            } else if (!seen[ver]) {
                seen[ver] = true;
                seen_versions++;
            }
        }
        CHECK(wrong == 0);
        CHECK(backwards == 0);
        CHECK(w[i].version[w[i].n - 1] == last); /* everyone ends on the last strategy */
    }
    CHECK(seen_versions >= 10); /* the swaps were seen while requests ran */
    lp_sampler_store_destroy(&g_st);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: store_test mask-tokens.so test-bad-abi.so test-no-symbol.so\n");
        return 2;
    }
    mask_so = argv[1];
    bad_abi_so = argv[2];
    no_symbol_so = argv[3];
    snprintf(plugin_dir, sizeof(plugin_dir), "%s", mask_so);
    char *slash = strrchr(plugin_dir, '/');
    if (slash) *slash = '\0';
    else snprintf(plugin_dir, sizeof(plugin_dir), ".");
    test_versions();
    test_plugins();
    test_control();
    test_guard_and_registry();
    test_live_swap();
    return CHECK_DONE();
}
