/* rec_test.c - the recurrent state of Gated DeltaNet layers (qwen35,
 * docs/ARCHITECTURE.md "Recurrent state"), on synth-qwen35-F32:
 *   - a sequence gives the same logits whatever its steps: one prefill,
 *     chunks of 1, 5 and 17 tokens, decode steps; in mixed batches (other
 *     sequences' prefills and decodes beside it, a sequence starting again
 *     at 0 in the same step); through shuffled block tables and the seq_id
 *     fallback tables; on the fast and the exact path, bit for bit (the
 *     recurrence runs token after token within an entry, and a token's
 *     rows do not depend on the batch);
 *   - a step at a position other than 0 or where the seq_id's state is is
 *     refused naming both, and changes nothing; a sequence that starts
 *     again at 0 forgets its state; lp_engine_seq_state_pos follows.
 * Usage: rec_test MODELS_DIR */
#include "engine.h"
#include "error.h"
#include "../tests/check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_CTX = 128, MAX_SEQS = 3, N_TOK = 80, N_PRE = 60 };

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static int32_t nv;

static lp_engine_t *engine(lp_model_t *m, int32_t kv_block, int64_t pool_tokens, bool exact)
{
    lp_engine_params_t p = {.n_ctx = N_CTX, .max_seqs = MAX_SEQS, .max_batch_tokens = 96,
                            .n_threads = 2, .exact = exact, .backend = "cpu",
                            .kv_block = kv_block, .kv_pool_tokens = pool_tokens};
    lp_engine_t *e = NULL;
    CHECK(lp_engine_new(m, &p, &e) == 0, "engine: %s", lp_error_msg());
    return e;
}

/* Seq `sid` from 0: the first n_pre tokens in chunks of `chunk`, then one
 * token per step; row r of rows gets the logits after token r. */
static int run_seq(lp_engine_t *e, int32_t sid, const int32_t *tok, int32_t chunk,
                   const uint32_t *t, int32_t n_t, float *rows)
{
    for (int32_t pos = 0; pos < N_TOK;) {
        int32_t k = pos < N_PRE ? (N_PRE - pos < chunk ? N_PRE - pos : chunk) : 1;
        float *r[96];
        for (int32_t i = 0; i < k; i++) r[i] = rows + (size_t)(pos + i) * nv;
        lp_batch_seq_t b = {.seq_id = sid, .pos = pos, .n_tokens = k, .tokens = tok + pos,
                            .n_logits = k, .blocks = t, .n_blocks = t ? n_t : 0};
        if (lp_engine_step(e, &b, 1, r)) {
            CHECK(0, "step at %d: %s", pos, lp_error_msg());
            return -1;
        }
        CHECK(lp_engine_seq_state_pos(e, sid) == pos + k, "state at %d after a step to %d",
              lp_engine_seq_state_pos(e, sid), pos + k);
        pos += k;
    }
    return 0;
}

static double max_diff(const float *a, const float *b, size_t n)
{
    double d = 0;
    for (size_t i = 0; i < n; i++) {
        double x = fabs((double)a[i] - b[i]);
        if (!(x <= d)) d = isnan(x) ? INFINITY : x;
    }
    return d;
}

/* Chunked prefill, decode, tables: the same rows as one prefill. */
static void test_steps(lp_model_t *m, const int32_t *tok, bool exact)
{
    const size_t n = (size_t)N_TOK * nv;
    float *ref = malloc(sizeof(float) * n), *got = malloc(sizeof(float) * n);
    lp_engine_t *e = engine(m, LP_ENGINE_KV_CONTIGUOUS, 0, exact);
    if (!e) goto out;
    lp_engine_seq_reset(e, 0);
    if (run_seq(e, 0, tok, N_PRE, NULL, 0, ref)) goto out;
    static const int32_t chunks[] = {1, 5, 17, N_PRE};
    for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
        if (run_seq(e, 0, tok, chunks[i], NULL, 0, got)) continue;
        double d = max_diff(ref, got, n);
        printf("%s chunks of %d: max |dlogit| %g\n", exact ? "exact" : "fast", chunks[i], d);
        CHECK(d == 0, "chunks of %d: logits differ by %g from one prefill%s", chunks[i], d,
              chunks[i] == N_PRE ? " (the same steps: the state was not reset at 0)" : "");
    }
    lp_engine_destroy(&e);
    /* paged: shuffled tables, and the fallback tables, the same steps */
    const int32_t B = 16, n_t = (N_TOK + B - 1) / B, pool = 2 * MAX_SEQS * ((N_CTX + B - 1) / B);
    e = engine(m, B, (int64_t)pool * B, exact);
    if (!e) goto out;
    uint32_t t[16];
    for (int32_t k = 0; k < n_t; k++) t[k] = (uint32_t)(pool - 1 - 3 * k);
    if (!run_seq(e, 1, tok, N_PRE, t, n_t, got))
        CHECK(memcmp(ref, got, sizeof(float) * n) == 0, "a shuffled table: other logits");
    if (!run_seq(e, 2, tok, N_PRE, NULL, 0, got))
        CHECK(memcmp(ref, got, sizeof(float) * n) == 0, "the fallback table: other logits");
out:
    lp_engine_destroy(&e);
    free(ref);
    free(got);
}

/* Mixed batches: seq 0 prefills in chunks of 9 while seq 1, started 30
 * tokens earlier, decodes, and seq 2 starts again at 0 every 4 steps;
 * each sequence's rows equal its run alone. */
static void test_mixed(lp_model_t *m, const int32_t *tok0, const int32_t *tok1)
{
    const size_t n = (size_t)N_TOK * nv;
    float *ref0 = malloc(sizeof(float) * n), *ref1 = malloc(sizeof(float) * n);
    float *got0 = malloc(sizeof(float) * n), *got1 = malloc(sizeof(float) * n);
    float *scratch = malloc(sizeof(float) * (size_t)nv * 96);
    lp_engine_t *e = engine(m, 16, 0, false);
    if (!e) goto out;
    if (run_seq(e, 0, tok0, 9, NULL, 0, ref0) || run_seq(e, 1, tok1, N_PRE, NULL, 0, ref1))
        goto out;
    int32_t p0 = 0, p1 = 0, p2 = 0, step = 0;
    /* seq 1: its prefill alone first */
    float *r1[96];
    for (int32_t i = 0; i < 30; i++) r1[i] = got1 + (size_t)i * nv;
    lp_batch_seq_t b1 = {.seq_id = 1, .pos = 0, .n_tokens = 30, .tokens = tok1, .n_logits = 30};
    CHECK_RC(lp_engine_step(e, &b1, 1, r1), 0);
    p1 = 30;
    while (p0 < N_TOK || p1 < N_TOK) {
        lp_batch_seq_t b[3];
        float *rows[96];
        int32_t nb = 0, nr = 0;
        if (p0 < N_TOK) {
            int32_t k = p0 < N_PRE ? (N_PRE - p0 < 9 ? N_PRE - p0 : 9) : 1;
            b[nb++] = (lp_batch_seq_t){.seq_id = 0, .pos = p0, .n_tokens = k, .tokens = tok0 + p0,
                                       .n_logits = k};
            for (int32_t i = 0; i < k; i++) rows[nr++] = got0 + (size_t)(p0 + i) * nv;
            p0 += k;
        }
        if (p1 < N_TOK) {
            int32_t k = p1 < N_PRE ? N_PRE - p1 : 1;
            b[nb++] = (lp_batch_seq_t){.seq_id = 1, .pos = p1, .n_tokens = k, .tokens = tok1 + p1,
                                       .n_logits = k};
            for (int32_t i = 0; i < k; i++) rows[nr++] = got1 + (size_t)(p1 + i) * nv;
            p1 += k;
        }
        /* seq 2 runs a few tokens of tok1 and starts again */
        if (step++ % 4 == 0) p2 = 0;
        b[nb++] = (lp_batch_seq_t){.seq_id = 2, .pos = p2, .n_tokens = 2, .tokens = tok1 + p2,
                                   .n_logits = 2};
        rows[nr++] = scratch;
        rows[nr++] = scratch + nv;
        p2 += 2;
        if (lp_engine_step(e, b, nb, rows)) {
            CHECK(0, "mixed step %d: %s", step, lp_error_msg());
            break;
        }
        /* seq 2's rows equal seq 1's alone at the same positions */
        CHECK(max_diff(scratch + nv, ref1 + (size_t)(p2 - 1) * nv, (size_t)nv) == 0,
              "seq 2 at %d, restarted in a batch, differs from a run alone", p2 - 1);
    }
    double d0 = max_diff(ref0, got0, n), d1 = max_diff(ref1, got1, n);
    printf("mixed batches: max |dlogit| %g and %g\n", d0, d1);
    CHECK(d0 == 0 && d1 == 0, "mixed batches change a sequence's logits (%g, %g)", d0, d1);
out:
    lp_engine_destroy(&e);
    free(ref0); free(ref1); free(got0); free(got1); free(scratch);
}

/* A step that would skip or rewind the state is refused and changes
 * nothing. */
static void test_refusals(lp_model_t *m, const int32_t *tok)
{
    lp_engine_t *e = engine(m, 16, 0, false);
    if (!e) return;
    float *a = malloc(sizeof(float) * (size_t)nv), *b = malloc(sizeof(float) * (size_t)nv);
    lp_batch_seq_t s = {.seq_id = 0, .pos = 0, .n_tokens = 20, .tokens = tok, .n_logits = 1};
    CHECK_RC(lp_engine_step(e, &s, 1, &a), 0);
    CHECK(lp_engine_seq_state_pos(e, 0) == 20, "state at %d", lp_engine_seq_state_pos(e, 0));
    /* a rewind (the KV would allow it), a skip, and a paged skip */
    static const int32_t bad[] = {10, 16};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lp_batch_seq_t r = {.seq_id = 0, .pos = bad[i], .n_tokens = 1, .tokens = tok + bad[i],
                            .n_logits = 1};
        CHECK(lp_engine_step(e, &r, 1, &b) == LP_ERR(EINVAL), "pos %d accepted", bad[i]);
        CHECK(strstr(lp_error_msg(), "recurrent state is at position 20"), "%s", lp_error_msg());
        CHECK(lp_engine_check_kv(e, &r) == LP_ERR(EINVAL), "check_kv accepts pos %d", bad[i]);
    }
    lp_batch_seq_t r = {.seq_id = 1, .pos = 5, .n_tokens = 1, .tokens = tok, .n_logits = 1};
    CHECK(lp_engine_step(e, &r, 1, &b) == LP_ERR(EINVAL), "seq 1 at 5 accepted");
    /* nothing changed: going on from 20 equals one prefill of 21 */
    lp_batch_seq_t go = {.seq_id = 0, .pos = 20, .n_tokens = 1, .tokens = tok + 20, .n_logits = 1};
    CHECK_RC(lp_engine_step(e, &go, 1, &a), 0);
    lp_batch_seq_t whole = {.seq_id = 1, .pos = 0, .n_tokens = 21, .tokens = tok, .n_logits = 1};
    CHECK_RC(lp_engine_step(e, &whole, 1, &b), 0);
    CHECK(max_diff(a, b, (size_t)nv) == 0, "after refused steps: %g", max_diff(a, b, (size_t)nv));
    lp_engine_seq_reset(e, 0);
    CHECK(lp_engine_seq_state_pos(e, 0) == 0, "reset: state at %d", lp_engine_seq_state_pos(e, 0));
    free(a);
    free(b);
    lp_engine_destroy(&e);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: rec_test MODELS_DIR\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/synth-qwen35-F32.gguf", argv[1]);
    lp_model_t *m = NULL;
    if (lp_model_load(path, &m)) {
        fprintf(stderr, "%s\n", lp_error_msg());
        return 1;
    }
    const lp_hparams_t *hp = lp_model_hparams(m);
    nv = hp->n_vocab;
    CHECK(hp->n_layer_rec == 3 && hp->rec_floats > 0, "%d recurrent layers, %lld floats",
          hp->n_layer_rec, (long long)hp->rec_floats);
    int32_t tok0[N_TOK], tok1[N_TOK];
    for (int i = 0; i < N_TOK; i++) {
        tok0[i] = 3 + (int32_t)(lp_check_rand(&rng) % 500);
        tok1[i] = 3 + (int32_t)(lp_check_rand(&rng) % 500);
    }
    test_steps(m, tok0, false);
    test_steps(m, tok0, true);
    test_mixed(m, tok0, tok1);
    test_refusals(m, tok0);
    lp_model_destroy(&m);
    if (!lp_check_failures) printf("rec: all passed\n");
    return CHECK_DONE();
}
