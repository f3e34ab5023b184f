/* kv_test.c - the paged KV cache (docs/ARCHITECTURE.md, "Paged KV"):
 *   - the same tokens give bit-identical logits contiguous and paged, at
 *     block sizes 1, 3, 16 and 32, with shuffled (non-monotonic) block
 *     tables, the seq_id fallback tables, chunked prefills and decode
 *     steps, on the blocked attention and on the exact path, for llama
 *     (stories260K) and qwen2 (GQA group 7) shapes;
 *   - prefix sharing: B's table reuses A's full blocks of a common prefix P
 *     and B prefills only from the block boundary; B's logits equal a fresh
 *     run of P+Y, with P ending inside a block and on a boundary, prompts
 *     ending inside a block, B's prefill in one step with A's decode, and A
 *     unharmed;
 *   - bad tables and pool settings are refused with a message naming the
 *     field or flag, and change nothing;
 *   - sliding-window layers (Gemma 3, window 10): their own pool, read
 *     through a second table whose entries before the window name no
 *     block; a run that gives those blocks back as it goes and takes new
 *     ones from a pool of 8, and the seq_id fallback ring, equal the
 *     contiguous layout bit for bit over 7 windows; refusals of that
 *     table.
 * Usage: kv_test MODELS_DIR */
#include "engine.h"
#include "error.h"
#include "../tests/check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_CTX = 96, MAX_SEQS = 3, N_TOK = 70 };

static uint64_t rng = 0x2545f4914f6cdd1dull;

static lp_model_t *load(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s.gguf", dir, name);
    lp_model_t *m = NULL;
    if (lp_model_load(path, &m)) CHECK(0, "%s", lp_error_msg());
    return m;
}

static lp_engine_t *engine(lp_model_t *m, int32_t kv_block, int64_t pool_tokens, bool exact)
{
    lp_engine_params_t p = {.n_ctx = N_CTX, .max_seqs = MAX_SEQS, .max_batch_tokens = 80,
                            .n_threads = 2, .exact = exact, .backend = "cpu",
                            .kv_block = kv_block, .kv_pool_tokens = pool_tokens};
    lp_engine_t *e = NULL;
    CHECK(lp_engine_new(m, &p, &e) == 0, "engine kv_block %d: %s", kv_block, lp_error_msg());
    return e;
}

/* A table of n distinct blocks out of `pool`, in shuffled order. */
static void shuffled_table(uint32_t *t, int32_t n, int32_t pool)
{
    uint32_t *all = malloc(sizeof(uint32_t) * (size_t)pool);
    for (int32_t i = 0; i < pool; i++) all[i] = (uint32_t)i;
    for (int32_t i = pool - 1; i > 0; i--) {
        int32_t j = (int32_t)(lp_check_rand(&rng) % (uint64_t)(i + 1));
        uint32_t x = all[i];
        all[i] = all[j];
        all[j] = x;
    }
    memcpy(t, all, sizeof(uint32_t) * (size_t)n);
    free(all);
}

/* Feed tokens to seq 0 (table t, or its fallback when t is NULL) as a
 * prefill of n_pre in chunks of `chunk`, then one token per step; row r of
 * `rows` gets the logits after token r (all n tokens). */
static int run_seq(lp_engine_t *e, const int32_t *tok, int32_t n, int32_t n_pre, int32_t chunk,
                   const uint32_t *t, int32_t n_t, float *rows, int32_t nv)
{
    lp_engine_seq_reset(e, 0);
    for (int32_t pos = 0; pos < n;) {
        int32_t k = pos < n_pre ? (n_pre - pos < chunk ? n_pre - pos : chunk) : 1;
        float *r[80];
        for (int32_t i = 0; i < k; i++) r[i] = rows + (size_t)(pos + i) * nv;
        lp_batch_seq_t b = {.seq_id = 0, .pos = pos, .n_tokens = k, .tokens = tok + pos,
                            .n_logits = k, .blocks = t, .n_blocks = t ? n_t : 0};
        if (lp_engine_step(e, &b, 1, r)) {
            CHECK(0, "step at %d: %s", pos, lp_error_msg());
            return -1;
        }
        pos += k;
    }
    return 0;
}

static void test_layouts(const char *dir, const char *name, bool exact)
{
    lp_model_t *m = load(dir, name);
    if (!m) return;
    const int32_t nv = lp_model_hparams(m)->n_vocab;
    int32_t tok[N_TOK];
    for (int i = 0; i < N_TOK; i++) tok[i] = 1 + (int32_t)(lp_check_rand(&rng) % 400);
    const size_t row_bytes = sizeof(float) * (size_t)nv;
    float *ref = malloc(row_bytes * N_TOK), *got = malloc(row_bytes * N_TOK);
    /* the contiguous layout: one prefill of 45 in chunks of 20, 25 decodes */
    lp_engine_t *c = engine(m, LP_ENGINE_KV_CONTIGUOUS, 0, exact);
    if (!c || run_seq(c, tok, N_TOK, 45, 20, NULL, 0, ref, nv)) goto out;
    CHECK(lp_engine_kv_block(c) == 0 && lp_engine_kv_blocks(c) == 0, "contiguous announces 0");
    lp_engine_destroy(&c);

    static const int32_t sizes[] = {1, 3, 16, 32};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const int32_t B = sizes[s], n_t = (N_TOK + B - 1) / B;
        /* a pool with spare blocks, so that shuffled tables leave gaps */
        const int32_t pool = 2 * ((N_CTX + B - 1) / B) * MAX_SEQS;
        lp_engine_t *e = engine(m, B, (int64_t)pool * B, exact);
        if (!e) continue;
        CHECK(lp_engine_kv_block(e) == B && lp_engine_kv_blocks(e) == pool, "pool %d x %d: %d x %d",
              pool, B, lp_engine_kv_blocks(e), lp_engine_kv_block(e));
        uint32_t *t = malloc(sizeof(uint32_t) * (size_t)n_t);
        shuffled_table(t, n_t, pool);
        if (run_seq(e, tok, N_TOK, 45, 20, t, n_t, got, nv) == 0)
            CHECK(memcmp(got, ref, row_bytes * N_TOK) == 0, "%s%s kv_block %d, shuffled table: "
                  "logits differ from the contiguous layout", name, exact ? " exact" : "", B);
        /* the seq_id fallback table */
        if (run_seq(e, tok, N_TOK, 45, 20, NULL, 0, got, nv) == 0)
            CHECK(memcmp(got, ref, row_bytes * N_TOK) == 0, "%s%s kv_block %d, fallback table: "
                  "logits differ from the contiguous layout", name, exact ? " exact" : "", B);
        free(t);
        lp_engine_destroy(&e);
    }
out:
    lp_engine_destroy(&c);
    free(ref);
    free(got);
    lp_model_destroy(&m);
}

/* One prefill step of seq_id `sid` with table t; the last row into row. */
static int prefill(lp_engine_t *e, int32_t sid, int32_t pos, const int32_t *tok, int32_t n,
                   const uint32_t *t, int32_t n_t, float *row)
{
    lp_batch_seq_t b = {.seq_id = sid, .pos = pos, .n_tokens = n, .tokens = tok + pos,
                        .n_logits = 1, .blocks = t, .n_blocks = n_t};
    int rc = lp_engine_step(e, &b, 1, &row);
    CHECK(rc == 0, "prefill of seq %d from %d: %s", sid, pos, lp_error_msg());
    return rc;
}

/* A prefills P+X; B = P+Y reuses A's full blocks of P.  n_p, n_x, n_y:
 * lengths of P, X and Y.  Bit for bit, B equals a run that computes the
 * same steps in blocks of its own (P+X, then Y's part from the boundary),
 * and A's next token equals A's alone.  Against one fresh prefill of P+Y
 * the steps differ in shape (rows per matmul and per attention tile), so
 * that comparison takes engine_test's tolerance for batched against solo
 * rows (1e-4). */
static void share_case(lp_model_t *m, int32_t B, int32_t n_p, int32_t n_x, int32_t n_y)
{
    const int32_t nv = lp_model_hparams(m)->n_vocab, per = (N_CTX + B - 1) / B;
    const size_t row_bytes = sizeof(float) * (size_t)nv;
    int32_t a[N_CTX], b[N_CTX];
    for (int32_t i = 0; i < n_p; i++) a[i] = b[i] = 1 + (int32_t)(lp_check_rand(&rng) % 400);
    for (int32_t i = n_p; i < n_p + n_x + 1; i++) a[i] = 1 + (int32_t)(lp_check_rand(&rng) % 400);
    for (int32_t i = n_p; i < n_p + n_y; i++) b[i] = 1 + (int32_t)(lp_check_rand(&rng) % 400);
    b[n_p] = a[n_p] == 7 ? 8 : 7; /* Y and X differ from their first token */
    const int32_t la = n_p + n_x, lb = n_p + n_y;
    float *fresh = malloc(row_bytes), *same = malloc(row_bytes), *alone = malloc(row_bytes);
    float *rb = malloc(row_bytes), *ra = malloc(row_bytes);
    const int32_t pool = 4 * per;
    lp_engine_t *e = engine(m, B, (int64_t)pool * B, false);
    if (!e) goto out;
    uint32_t ta[N_CTX], tb[N_CTX], tf[N_CTX], ts[N_CTX], all[N_CTX * 4];
    shuffled_table(all, pool, pool);
    memcpy(ta, all, sizeof(uint32_t) * (size_t)per);            /* A's blocks */
    memcpy(tf, all + per, sizeof(uint32_t) * (size_t)per);      /* the fresh run's */
    memcpy(ts, all + 3 * per, sizeof(uint32_t) * (size_t)per);  /* the same-steps run's */
    const int32_t shared = n_p / B; /* full blocks of P only */
    memcpy(tb, ta, sizeof(uint32_t) * (size_t)shared);
    memcpy(tb + shared, all + 2 * per, sizeof(uint32_t) * (size_t)(per - shared));
    const int32_t nta = (la + 1 + B - 1) / B, ntb = (lb + B - 1) / B, pos_b = shared * B;

    /* references: P+Y in one prefill; P+X then Y's part in blocks of its own */
    if (prefill(e, 2, 0, b, lb, tf, ntb, fresh)) goto out;
    if (prefill(e, 2, 0, a, la, ts, nta, same)) goto out;
    if (prefill(e, 2, pos_b, b, lb - pos_b, ts, ntb, same)) goto out;

    /* A prefills P+X; B prefills from the block boundary through A's blocks */
    if (prefill(e, 0, 0, a, la, ta, nta, ra)) goto out;
    if (prefill(e, 1, pos_b, b, lb - pos_b, tb, ntb, rb)) goto out;
    CHECK(memcmp(rb, same, row_bytes) == 0, "kv_block %d, P %d, Y %d: B, reusing %d blocks of A, "
          "differs from the same steps in blocks of its own", B, n_p, n_y, shared);
    for (int32_t i = 0; i < nv; i++)
        if (fabsf(rb[i] - fresh[i]) > 1e-4f) {
            CHECK(0, "kv_block %d, P %d, Y %d: B differs from a fresh run of P+Y at %d: %g vs %g",
                  B, n_p, n_y, i, rb[i], fresh[i]);
            break;
        }

    /* A's next token, alone and then in one step with B's prefill again:
     * the shared blocks are read by both and written by neither */
    lp_batch_seq_t next = {.seq_id = 0, .pos = la, .n_tokens = 1, .tokens = a + la,
                           .n_logits = 1, .blocks = ta, .n_blocks = nta};
    float *row = alone;
    CHECK(lp_engine_step(e, &next, 1, &row) == 0, "A's decode: %s", lp_error_msg());
    lp_batch_seq_t both[2] = {
        next,
        {.seq_id = 1, .pos = pos_b, .n_tokens = lb - pos_b, .tokens = b + pos_b, .n_logits = 1,
         .blocks = tb, .n_blocks = ntb},
    };
    float *rows[2] = {ra, rb};
    CHECK(lp_engine_step(e, both, 2, rows) == 0, "A's decode with B's prefill: %s", lp_error_msg());
    for (int32_t i = 0; i < nv; i++)
        if (fabsf(ra[i] - alone[i]) > 1e-4f || fabsf(rb[i] - fresh[i]) > 1e-4f) {
            CHECK(0, "kv_block %d, P %d: in one step, A (%g vs %g alone) or B (%g vs %g fresh) "
                  "differs at %d", B, n_p, ra[i], alone[i], rb[i], fresh[i], i);
            break;
        }
out:
    lp_engine_destroy(&e);
    free(fresh); free(same); free(alone); free(ra); free(rb);
}

static void test_sharing(const char *dir)
{
    lp_model_t *m = load(dir, "stories260K");
    if (!m) return;
    share_case(m, 16, 21, 10, 12); /* P ends inside block 1: reuse block 0, B from 16 */
    share_case(m, 16, 32, 5, 9);   /* P ends on a boundary: reuse 2 blocks, B from 32 */
    share_case(m, 16, 40, 3, 1);   /* Y of one token, B's prompt ends inside a block */
    share_case(m, 3, 20, 6, 7);    /* small blocks: 6 reused, B from 18 */
    share_case(m, 32, 70, 4, 5);   /* 2 blocks reused, B from 64 */
    share_case(m, 1, 13, 2, 2);
    lp_model_destroy(&m);
}

/* Each bad entry is refused with a message holding `want`, and leaves
 * seq 0's fallback length alone. */
static void refuse(lp_engine_t *e, lp_batch_seq_t *b, int32_t n, const char *want, float **rows)
{
    int32_t keep = lp_engine_seq_len(e, 0);
    CHECK(lp_engine_step(e, b, n, rows) < 0, "accepted (want '%s')", want);
    CHECK(strstr(lp_error_msg(), want) != NULL, "message '%s' lacks '%s'", lp_error_msg(), want);
    CHECK(lp_engine_seq_len(e, 0) == keep, "a refused step moved seq 0 (%s)", want);
}

static void test_refusals(const char *dir)
{
    lp_model_t *m = load(dir, "stories260K");
    if (!m) return;
    const int32_t nv = lp_model_hparams(m)->n_vocab;
    float *buf = malloc(sizeof(float) * (size_t)nv * 2);
    float *rows[2] = {buf, buf + nv};
    int32_t tok[40];
    for (int i = 0; i < 40; i++) tok[i] = 1 + i;
    lp_engine_t *e = engine(m, 16, 0, false); /* 3 x 6 blocks, fallback tables */
    if (!e) goto out;
    CHECK(lp_engine_kv_blocks(e) == MAX_SEQS * 6, "default pool: %d blocks", lp_engine_kv_blocks(e));
    lp_batch_seq_t ok = {.seq_id = 0, .pos = 0, .n_tokens = 20, .tokens = tok, .n_logits = 1};
    CHECK(lp_engine_step(e, &ok, 1, rows) == 0, "fallback step: %s", lp_error_msg());
    uint32_t out_of_range[] = {3, 18}, short_t[] = {4}, dup[] = {5, 6, 5}, good[] = {7, 8};
    lp_batch_seq_t b = {.seq_id = 1, .pos = 0, .n_tokens = 20, .tokens = tok, .n_logits = 1,
                        .blocks = out_of_range, .n_blocks = 2};
    refuse(e, &b, 1, "blocks[1] = 18 is not in 0..17", rows);
    b.blocks = short_t, b.n_blocks = 1;
    refuse(e, &b, 1, "do not cover positions 0..19", rows);
    b.blocks = dup, b.n_blocks = 3;
    refuse(e, &b, 1, "blocks[2] = 5 repeats blocks[0]", rows);
    uint32_t too_long[7] = {9, 10, 11, 12, 13, 14, 15};
    b.blocks = too_long, b.n_blocks = 7;
    refuse(e, &b, 1, "more than a context", rows);
    /* a block written by one entry and named by another */
    lp_batch_seq_t pair[2] = {
        {.seq_id = 1, .pos = 0, .n_tokens = 20, .tokens = tok, .n_logits = 1, .blocks = good,
         .n_blocks = 2},
        {.seq_id = 2, .pos = 0, .n_tokens = 3, .tokens = tok, .n_logits = 1, .blocks = good + 1,
         .n_blocks = 1},
    };
    refuse(e, pair, 2, "written in this step by batch entry", rows);
    /* writing into seq 0's fallback blocks cuts its length to the block */
    uint32_t into0[] = {7, 1};
    lp_batch_seq_t cut = {.seq_id = 1, .pos = 0, .n_tokens = 20, .tokens = tok, .n_logits = 1,
                          .blocks = into0, .n_blocks = 2};
    CHECK(lp_engine_step(e, &cut, 1, rows) == 0, "table step: %s", lp_error_msg());
    CHECK(lp_engine_seq_len(e, 0) == 16, "seq 0's length after its block 1 was written: %d",
          lp_engine_seq_len(e, 0));
    /* the good table works after all the refusals */
    b.blocks = good, b.n_blocks = 2;
    CHECK(lp_engine_step(e, &b, 1, rows) == 0, "good table: %s", lp_error_msg());
    lp_engine_destroy(&e);

    /* a pool smaller than max_seqs contexts keeps no fallback tables */
    e = engine(m, 16, 40, false);
    if (e) {
        CHECK(lp_engine_kv_blocks(e) == 3, "40 tokens: %d blocks", lp_engine_kv_blocks(e));
        refuse(e, &ok, 1, "keeps no fallback table", rows);
        uint32_t t2[] = {2, 0};
        b.blocks = t2, b.n_blocks = 2;
        CHECK(lp_engine_step(e, &b, 1, rows) == 0, "table step in a small pool: %s", lp_error_msg());
        lp_engine_destroy(&e);
    }
    /* no tables on a contiguous engine */
    e = engine(m, LP_ENGINE_KV_CONTIGUOUS, 0, false);
    if (e) {
        b.blocks = good, b.n_blocks = 2;
        refuse(e, &b, 1, "does not page", rows);
        lp_engine_destroy(&e);
    }
    /* pool settings */
    lp_engine_params_t p = {.n_ctx = N_CTX, .max_seqs = MAX_SEQS, .backend = "cpu",
                            .kv_pool_tokens = 64, .kv_pool_mb = 1};
    CHECK(lp_engine_new(m, &p, &e) < 0 && strstr(lp_error_msg(), "--kv-pool-tokens 64 and "
          "--kv-pool-mb 1"), "both pool sizes: %s", lp_error_msg());
    p.kv_pool_tokens = 0;
    p.kv_block = LP_ENGINE_KV_CONTIGUOUS;
    CHECK(lp_engine_new(m, &p, &e) < 0 && strstr(lp_error_msg(), "not paged (--kv-block 0)"),
          "pool size without paging: %s", lp_error_msg());
    p.kv_block = -2;
    CHECK(lp_engine_new(m, &p, &e) < 0 && strstr(lp_error_msg(), "--kv-block -2"),
          "negative block: %s", lp_error_msg());
    p.kv_block = 16;
    p.kv_pool_mb = 1;
    CHECK(lp_engine_new(m, &p, &e) == 0 && lp_engine_kv_blocks(e) == (1 << 20) / (2 * 5 * 4 * 8 * 16 * 4),
          "1 MiB pool: %s", lp_error_msg());
    lp_engine_destroy(&e);
out:
    lp_engine_destroy(&e);
    free(buf);
    lp_model_destroy(&m);
}

/* ---- sliding-window layers -------------------------------------------- */

/* Feed tok to seq 0 as run_seq does (prefill of n_pre in chunks, then one
 * token a step), the global table t; the sliding layers' table is built as a
 * coordinator keeps it: a block out of every later window is given back
 * (UINT32_MAX in the table) and a new one taken from a small pool, last
 * freed first (pool == 0: the seq_id's fallback tables). */
static int run_swa(lp_engine_t *e, const int32_t *tok, int32_t n, int32_t n_pre, int32_t chunk,
                   int32_t B, int32_t W, const uint32_t *t, int32_t pool, float *rows, int32_t nv,
                   int32_t *peak)
{
    uint32_t swa[N_CTX], free_ids[64];
    int32_t n_free = 0, lo = 0, held = 0;
    for (int32_t i = pool; i-- > 0;) free_ids[n_free++] = (uint32_t)i;
    lp_engine_seq_reset(e, 0);
    *peak = 0;
    for (int32_t pos = 0, nb = 0; pos < n;) {
        int32_t k = pos < n_pre ? (n_pre - pos < chunk ? n_pre - pos : chunk) : 1;
        const int32_t first = pos - W + 1 > 0 ? (pos - W + 1) / B : 0;
        for (; pool && lo < first; lo++, held--) { /* out of every later window */
            free_ids[n_free++] = swa[lo];
            swa[lo] = UINT32_MAX;
        }
        const int32_t need = (pos + k + B - 1) / B;
        for (; pool && nb < need; nb++, held++) {
            if (!n_free) {
                CHECK(0, "sliding pool of %d blocks ran out at %d", pool, pos);
                return -1;
            }
            swa[nb] = free_ids[--n_free];
        }
        if (held > *peak) *peak = held;
        float *r[80];
        for (int32_t i = 0; i < k; i++) r[i] = rows + (size_t)(pos + i) * nv;
        lp_batch_seq_t b = {.seq_id = 0, .pos = pos, .n_tokens = k, .tokens = tok + pos,
                            .n_logits = k, .blocks = pool ? t : NULL, .n_blocks = pool ? need : 0,
                            .swa_blocks = pool ? swa : NULL, .n_swa_blocks = pool ? need : 0};
        if (lp_engine_step(e, &b, 1, r)) {
            CHECK(0, "step at %d: %s", pos, lp_error_msg());
            return -1;
        }
        pos += k;
    }
    return 0;
}

static void test_swa(const char *dir)
{
    lp_model_t *m = load(dir, "synth-gemma3-F32");
    if (!m) return;
    const int32_t nv = lp_model_hparams(m)->n_vocab, W = lp_model_hparams(m)->n_swa, B = 4;
    CHECK(W == 10, "gemma3 fixture window %d", W);
    int32_t tok[N_TOK];
    for (int i = 0; i < N_TOK; i++) tok[i] = 1 + (int32_t)(lp_check_rand(&rng) % 400);
    const size_t row_bytes = sizeof(float) * (size_t)nv;
    float *ref = malloc(row_bytes * N_TOK), *got = malloc(row_bytes * N_TOK);
    int32_t peak;
    lp_engine_t *c = engine(m, LP_ENGINE_KV_CONTIGUOUS, 0, false);
    CHECK(lp_engine_kv_blocks_swa(c) == 0 && lp_engine_kv_swa_window(c) == 0,
          "contiguous: no sliding pool announced");
    if (!c || run_seq(c, tok, N_TOK, 15, 6, NULL, 0, ref, nv)) goto out;
    lp_engine_destroy(&c);

    /* max_batch_tokens 8: a step reads at most ceil((9 + 8) / 4) + 1 = 6
     * sliding blocks, the fallback ring of each seq_id */
    lp_engine_params_t p = {.n_ctx = N_CTX, .max_seqs = MAX_SEQS, .max_batch_tokens = 8,
                            .n_threads = 2, .backend = "cpu", .kv_block = B};
    lp_engine_t *e = NULL;
    if (lp_engine_new(m, &p, &e)) {
        CHECK(0, "%s", lp_error_msg());
        goto out;
    }
    CHECK(lp_engine_kv_swa_window(e) == W && lp_engine_kv_blocks_swa(e) == MAX_SEQS * 6 &&
          lp_engine_kv_blocks(e) == MAX_SEQS * N_CTX / B, "pools: %d global, %d sliding (window %d)",
          lp_engine_kv_blocks(e), lp_engine_kv_blocks_swa(e), lp_engine_kv_swa_window(e));
    if (run_swa(e, tok, N_TOK, 15, 6, B, W, NULL, 0, got, nv, &peak) == 0)
        CHECK(memcmp(got, ref, row_bytes * N_TOK) == 0, "fallback ring: logits differ from the "
              "contiguous layout");
    uint32_t t[N_CTX];
    shuffled_table(t, N_CTX / B, MAX_SEQS * N_CTX / B);
    if (run_swa(e, tok, N_TOK, 15, 6, B, W, t, 8, got, nv, &peak) == 0) {
        CHECK(memcmp(got, ref, row_bytes * N_TOK) == 0, "windowed tables: logits differ from the "
              "contiguous layout");
        /* 70 positions, 7 windows: 18 global blocks, at most 5 sliding ones */
        CHECK(peak <= 5, "sliding blocks held at once: %d", peak);
    }

    /* refusals: at position 20 a query sees 11..20, from block 2 on */
    float *rows[1] = {got};
    uint32_t g6[6] = {0, 1, 2, 3, 4, 5}, swa[6] = {UINT32_MAX, UINT32_MAX, 2, 3, 4, 5};
    lp_batch_seq_t b = {.seq_id = 1, .pos = 20, .n_tokens = 1, .tokens = tok, .n_logits = 1,
                        .blocks = g6, .n_blocks = 6};
    lp_engine_seq_reset(e, 0);
    refuse(e, &b, 1, "swa_blocks: missing", rows);
    b.swa_blocks = swa, b.n_swa_blocks = 5;
    refuse(e, &b, 1, "swa_blocks: 5 entries for 6", rows);
    b.n_swa_blocks = 6;
    swa[2] = UINT32_MAX;
    refuse(e, &b, 1, "swa_blocks[2] = 4294967295 is not in 0..17", rows);
    swa[2] = 5;
    refuse(e, &b, 1, "swa_blocks[5] = 5 repeats swa_blocks[2]", rows);
    /* positions 0..19 in blocks 6..10 of the sliding pool, then position 20
     * with the two blocks before its window named by no block */
    uint32_t fill[6] = {6, 7, 8, 9, 10, 11};
    for (int32_t pos = 0; pos < 20; pos += 5) {
        lp_batch_seq_t f = b;
        f.pos = pos, f.n_tokens = 5, f.tokens = tok + pos, f.swa_blocks = fill;
        f.n_blocks = f.n_swa_blocks = (pos + 5 + B - 1) / B;
        CHECK(lp_engine_step(e, &f, 1, rows) == 0, "prefill at %d: %s", pos, lp_error_msg());
    }
    fill[0] = fill[1] = UINT32_MAX;
    b.swa_blocks = fill;
    b.tokens = tok + 20;
    CHECK(lp_engine_step(e, &b, 1, rows) == 0, "entries before the window name no block: %s",
          lp_error_msg());
    lp_engine_destroy(&e);
    lp_model_t *plain = load(dir, "stories260K");
    if (plain && lp_engine_new(plain, &p, &e) == 0) {
        CHECK(lp_engine_kv_blocks_swa(e) == 0, "no sliding pool for llama");
        b.swa_blocks = fill;
        refuse(e, &b, 1, "swa_blocks: given, but the model has no sliding-window layers", rows);
        lp_engine_destroy(&e);
    }
    lp_model_destroy(&plain);
out:
    lp_engine_destroy(&c);
    free(ref);
    free(got);
    lp_model_destroy(&m);
}

int main(int argc, char **argv)
{
    if (argc != 2) { fprintf(stderr, "usage: kv_test MODELS_DIR\n"); return 2; }
    test_layouts(argv[1], "stories260K", false);
    test_layouts(argv[1], "stories260K", true);
    test_layouts(argv[1], "synth-qwen2-Q8_0", false);
    test_sharing(argv[1]);
    test_refusals(argv[1]);
    test_swa(argv[1]);
    if (!lp_check_failures) printf("kv: all passed\n");
    return CHECK_DONE();
}
