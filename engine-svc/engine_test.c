/* engine_test.c - the batched step: several sequences in one step give the
 * logits each gives alone, a mixed prefill+decode batch, rewinding a
 * sequence, refusal of malformed batches, and the vocabulary facts of a
 * padded model.  Usage: engine_test MODELS_DIR */
#include "engine.h"
#include "error.h"
#include "../tests/check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float max_diff(const float *a, const float *b, int32_t n)
{
    float d = 0;
    for (int32_t i = 0; i < n; i++) d = fmaxf(d, fabsf(a[i] - b[i]));
    return d;
}

/* Logits after feeding `ids` to a fresh sequence in one prefill. */
static void solo(lp_engine_t *e, const int32_t *ids, int32_t n, float *row)
{
    lp_engine_seq_reset(e, 0);
    lp_batch_seq_t b = {0, 0, n, ids, 1, NULL, 0, NULL, 0};
    CHECK(lp_engine_step(e, &b, 1, &row) == 0, "solo step: %s", lp_error_msg());
}

static void test_batching(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/stories260K.gguf", dir);
    lp_model_t *m;
    lp_engine_t *e;
    if (lp_model_load(path, &m)) { CHECK(0, "%s", lp_error_msg()); return; }
    lp_engine_params_t p = {.n_ctx = 128, .max_seqs = 4, .max_batch_tokens = 64};
    if (lp_engine_new(m, &p, &e)) { CHECK(0, "%s", lp_error_msg()); return; }
    const int32_t nv = lp_model_hparams(m)->n_vocab;
    int32_t a[] = {1, 403, 407, 261, 378, 432, 383};
    int32_t b[] = {1, 500, 310, 289};
    float *ra = malloc(sizeof(float) * nv * 8), *rb = malloc(sizeof(float) * nv * 8);
    float *got = malloc(sizeof(float) * nv * 8);
    solo(e, a, 7, ra);            /* a alone, all 7 tokens */
    solo(e, b, 4, rb);            /* b alone */
    solo(e, a, 6, ra + nv);       /* a's first 6 tokens */

    /* a (prefill of 6, seq 1) and b (prefill of 4, seq 2) in one step */
    lp_engine_seq_reset(e, 1);
    lp_engine_seq_reset(e, 2);
    lp_batch_seq_t batch[2] = {{1, 0, 6, a, 1, NULL, 0, NULL, 0}, {2, 0, 4, b, 1, NULL, 0, NULL, 0}};
    float *rows[2] = {got, got + nv};
    CHECK(lp_engine_step(e, batch, 2, rows) == 0, "batched prefill: %s", lp_error_msg());
    CHECK(max_diff(got, ra + nv, nv) < 1e-4, "batched prefill of a differs from solo");
    CHECK(max_diff(got + nv, rb, nv) < 1e-4, "batched prefill of b differs from solo");

    /* mixed: a decodes its 7th token while a new sequence c prefills b */
    lp_engine_seq_reset(e, 3);
    lp_batch_seq_t mixed[2] = {{1, 6, 1, a + 6, 1, NULL, 0, NULL, 0}, {3, 0, 4, b, 1, NULL, 0, NULL, 0}};
    CHECK(lp_engine_step(e, mixed, 2, rows) == 0, "mixed step: %s", lp_error_msg());
    CHECK(max_diff(got, ra, nv) < 1e-4, "decode row of a in a mixed batch differs from solo");
    CHECK(max_diff(got + nv, rb, nv) < 1e-4, "prefill row of c in a mixed batch differs");
    CHECK(lp_engine_seq_len(e, 1) == 7 && lp_engine_seq_len(e, 3) == 4, "sequence lengths");

    /* rewind seq 1 to position 6 and replay token 7: same row again */
    lp_batch_seq_t rew = {1, 6, 1, a + 6, 1, NULL, 0, NULL, 0};
    float *r0 = got;
    CHECK(lp_engine_step(e, &rew, 1, &r0) == 0, "rewind: %s", lp_error_msg());
    CHECK(max_diff(got, ra, nv) < 1e-4, "rewound sequence differs");

    /* several logit rows of one entry, scattered row pointers */
    float *scattered[3] = {got + 2 * nv, got, got + 5 * nv};
    lp_engine_seq_reset(e, 0);
    lp_batch_seq_t all = {0, 0, 7, a, 3, NULL, 0, NULL, 0};
    CHECK(lp_engine_step(e, &all, 1, scattered) == 0, "multi-row: %s", lp_error_msg());
    CHECK(max_diff(got + 5 * nv, ra, nv) < 1e-4, "last of three rows differs from solo");
    CHECK(max_diff(got, ra + nv, nv) < 1e-4, "middle row differs from the 6-token solo");

    /* malformed batches are refused with a message, and change nothing */
    int32_t bad_tok[] = {nv};
    lp_batch_seq_t bad[] = {
        {9, 0, 1, a, 1, NULL, 0, NULL, 0},      /* seq id out of range */
        {0, 50, 1, a, 1, NULL, 0, NULL, 0},     /* position past the end */
        {0, 0, 1, bad_tok, 1, NULL, 0, NULL, 0},/* token outside the vocabulary */
        {0, 0, 2, a, 3, NULL, 0, NULL, 0},      /* more logits than tokens */
        {0, 0, 0, a, 0, NULL, 0, NULL, 0},      /* no tokens */
        {0, 0, 65, a, 1, NULL, 0, NULL, 0},     /* more than max_batch_tokens (and a is shorter) */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int32_t keep = lp_engine_seq_len(e, 0);
        int rc = lp_engine_step(e, &bad[i], 1, rows);
        CHECK(rc < 0, "malformed batch %zu accepted", i);
        CHECK(lp_engine_seq_len(e, 0) == keep, "malformed batch %zu changed the sequence", i);
    }
    lp_batch_seq_t dup[2] = {{1, 7, 1, a, 1, NULL, 0, NULL, 0}, {1, 7, 1, a, 1, NULL, 0, NULL, 0}};
    CHECK(lp_engine_step(e, dup, 2, rows) < 0, "duplicate sequence accepted");
    CHECK(strstr(lp_error_msg(), "twice") != NULL, "message names the duplicate: %s",
          lp_error_msg());
    lp_engine_params_t over = {.n_ctx = 8, .max_seqs = 1, .max_batch_tokens = 64};
    lp_engine_t *small;
    CHECK(lp_engine_new(m, &over, &small) == 0, "small engine");
    lp_batch_seq_t longb = {0, 0, 7, a, 1, NULL, 0, NULL, 0};
    CHECK(lp_engine_step(small, &longb, 1, rows) == 0, "7 tokens fit in 8");
    lp_batch_seq_t past = {0, 7, 2, a, 1, NULL, 0, NULL, 0};
    CHECK(lp_engine_step(small, &past, 1, rows) == LP_ERR(E2BIG), "context overflow refused");
    lp_engine_destroy(&small);
    free(ra); free(rb); free(got);
    lp_engine_destroy(&e);
    lp_model_destroy(&m);
}

static void test_vocab_facts(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/synth-qwen2-Q8_0.gguf", dir);
    lp_model_t *m;
    if (lp_model_load(path, &m)) { CHECK(0, "%s", lp_error_msg()); return; }
    const lp_hparams_t *hp = lp_model_hparams(m);
    const uint8_t *mask = lp_model_token_mask(m);
    CHECK(hp->n_vocab == 151936, "qwen2 logit row is %d", hp->n_vocab);
    /* The padded tail [PAD151665].. [PAD151935] is unused (token type 5). */
    CHECK(hp->n_tokens_real < hp->n_vocab, "n_tokens_real %d", hp->n_tokens_real);
    CHECK(mask[hp->n_vocab - 1] && !mask[0] && !mask[151643], "padding mask");
    CHECK(hp->rope_neox && hp->rope_base == 1e6f && hp->n_head_kv == 1, "qwen2 hparams");
    lp_model_destroy(&m);
}

int main(int argc, char **argv)
{
    if (argc != 2) { fprintf(stderr, "usage: engine_test MODELS_DIR\n"); return 2; }
    test_batching(argv[1]);
    test_vocab_facts(argv[1]);
    if (!lp_check_failures) printf("engine: all passed\n");
    return CHECK_DONE();
}
