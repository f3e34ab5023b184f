/* attn_test.c - the blocked attention (lp_attn_run) against the reference
 * lp_op_attn_head, on every kernel set the CPU runs, over random caches:
 * GQA groups of 1, 2, 7, 8 and 12, head_dim 5, 8, 24, 64 and 128, batches
 * whose token count is not a multiple of a tile, batches that start in mid
 * context, several sequences in one batch, decode steps, peaked softmaxes
 * (scores spread over +-60); one thread on every kernel set, two on the
 * best one (the split of tiles between threads).  Then the kernels alone
 * on rows that see no key (zeros, never NaN) or one key (v_0).
 *
 * Tolerance: 2e-5 absolute.  q and k are uniform in [-a, a], v in
 * [-1, 1], so every output lies in [-1, 1].  The two paths differ by the
 * rounding of float dot products (the tile kernel folds `scale` into q),
 * of a float rather than double softmax sum, and of a polynomial exp
 * (about 2^-23 relative): a few times 1e-6 at most.  A wrong mask, a
 * missed rescale or a lost key moves outputs by 1e-3 or more. */
#include "attn.h"
#include "error.h"
#include "matmul.h"
#include "ops.h"
#include "simd/attn-kern.h"
#include "../tests/check.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 2e-5

static uint64_t rng = 0x9e3779b97f4a7c15ull;

enum { N_CTX = 320, MAX_SEQS = 3 };

typedef struct shape {
    int32_t n_head, n_head_kv, head_dim;
} shape_t;

/* One batch entry: n tokens of sequence seq from position pos. */
typedef struct entry {
    int32_t seq, pos, n;
} entry_t;

/* Run the entries as one batch through lp_attn_run and compare each
 * (token, head) with lp_op_attn_head.  The caches are laid out
 * (n_head_kv, N_CTX, head_dim) when head_major (the CPU engine's), else
 * (N_CTX, n_head_kv, head_dim). */
static void check_batch(lp_threadpool_t *pool, const char *isa, shape_t sh, float amp,
                        const entry_t *e, int n_entries, int head_major, int sinks)
{
    const int32_t hd = sh.head_dim, kv_dim = sh.n_head_kv * hd, q_dim = sh.n_head * hd;
    const int32_t group = sh.n_head / sh.n_head_kv;
    const int64_t key_stride = head_major ? hd : kv_dim;
    const int64_t head_stride = head_major ? (int64_t)N_CTX * hd : hd;
    int32_t T = 0;
    for (int i = 0; i < n_entries; i++) T += e[i].n;
    float *kc[MAX_SEQS], *vc[MAX_SEQS];
    for (int s = 0; s < MAX_SEQS; s++) {
        kc[s] = malloc(sizeof(float) * N_CTX * (size_t)kv_dim);
        vc[s] = malloc(sizeof(float) * N_CTX * (size_t)kv_dim);
        for (int32_t i = 0; i < N_CTX * kv_dim; i++) {
            kc[s][i] = lp_check_frand(&rng) * amp;
            vc[s][i] = lp_check_frand(&rng);
        }
    }
    float *q = malloc(sizeof(float) * (size_t)T * (size_t)q_dim);
    float *out = malloc(sizeof(float) * (size_t)T * (size_t)q_dim);
    float *ref = malloc(sizeof(float) * (size_t)hd), *scores = malloc(sizeof(float) * N_CTX);
    int32_t *tok_seq = malloc(sizeof(int32_t) * (size_t)T), *tok_pos = malloc(sizeof(int32_t) * (size_t)T);
    for (int32_t i = 0; i < T * q_dim; i++) {
        q[i] = lp_check_frand(&rng) * amp;
        out[i] = NAN; /* every element must be written */
    }
    for (int i = 0, t = 0; i < n_entries; i++)
        for (int32_t k = 0; k < e[i].n; k++, t++) {
            tok_seq[t] = e[i].seq;
            tok_pos[t] = e[i].pos + k;
        }
    const float scale = 1.0f / sqrtf((float)hd);
    float sink[64]; /* attention sinks of the size of the scores, some far above */
    for (int32_t h = 0; h < sh.n_head && h < 64; h++)
        sink[h] = lp_check_frand(&rng) * 2.0f * amp + (h % 5 == 4 ? 30.0f : 0.0f);
    lp_attn_batch_t b = {
        .out = out, .q = q, .tok_seq = tok_seq, .tok_pos = tok_pos,
        .k = (const float *const *)kc, .v = (const float *const *)vc,
        .key_stride = key_stride, .head_stride = head_stride, .n_tok = T,
        .n_head = sh.n_head, .n_head_kv = sh.n_head_kv, .head_dim = hd, .scale = scale,
        .sinks = sinks ? sink : NULL,
    };
    CHECK(lp_attn_run(pool, &b) == 0, "lp_attn_run failed");
    double worst = 0;
    int bad = 0;
    for (int32_t t = 0; t < T; t++) {
        for (int32_t h = 0; h < sh.n_head; h++) {
            const int64_t kv_off = (h / group) * head_stride;
            lp_op_attn_head_sink(ref, q + (size_t)t * q_dim + (size_t)h * hd,
                                 kc[tok_seq[t]] + kv_off, vc[tok_seq[t]] + kv_off, key_stride,
                                 tok_pos[t] + 1, hd, scale, NULL, sinks ? &sink[h] : NULL, scores);
            const float *got = out + (size_t)t * q_dim + (size_t)h * hd;
            for (int32_t i = 0; i < hd; i++) {
                const double d = fabs((double)got[i] - ref[i]);
                if (!(d <= TOL) && bad++ < 5)
                    CHECK(0, "%s heads %d/%d hd %d amp %g %s%s: token %d (seq %d pos %d) head %d "
                          "dim %d: %.8g vs %.8g", isa, sh.n_head, sh.n_head_kv, hd, amp,
                          head_major ? "head-major" : "position-major", sinks ? " sinks" : "", t, tok_seq[t],
                          tok_pos[t], h, i, got[i], ref[i]);
                if (d > worst || d != d) worst = d;
            }
        }
    }
    if (getenv("ATTN_TEST_VERBOSE"))
        printf("%-6s heads %2d/%d hd %3d amp %4g T %3d: max |diff| %.3g\n", isa, sh.n_head,
               sh.n_head_kv, hd, amp, T, worst);
    for (int s = 0; s < MAX_SEQS; s++) {
        free(kc[s]);
        free(vc[s]);
    }
    free(q); free(out); free(ref); free(scores); free(tok_seq); free(tok_pos);
}

static void check_batches(lp_threadpool_t *pool, const char *isa)
{
    static const shape_t shapes[] = {
        {8, 4, 8},    /* stories260K */
        {32, 4, 64},  /* TinyLlama */
        {14, 2, 64},  /* Qwen2.5-0.5B: group of 7 */
        {3, 3, 5},    /* no GQA, odd head_dim */
        {12, 1, 24},  /* one KV head for all */
        {4, 2, 128},
    };
    static const entry_t prefill1[] = {{0, 0, 1}}, prefill5[] = {{0, 0, 5}},
                         prefill70[] = {{1, 0, 70}}, prefill160[] = {{2, 0, 160}},
                         mid[] = {{0, 37, 19}}, mid_late[] = {{1, 250, 33}},
                         mixed[] = {{2, 50, 3}, {0, 0, 9}, {1, 200, 1}, {0, 9, 4}},
                         decode[] = {{0, 17, 1}, {1, 0, 1}, {2, 319, 1}};
    static const struct {
        const entry_t *e;
        int n;
    } batches[] = {
        {prefill1, 1}, {prefill5, 1}, {prefill70, 1}, {prefill160, 1}, {mid, 1},
        {mid_late, 1}, {mixed, 4}, {decode, 3},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++)
            for (int head_major = 0; head_major < 2; head_major++)
                check_batch(pool, isa, shapes[s], 1.0f, batches[i].e, batches[i].n, head_major, 0);
    /* peaked: scores spread over tens, most probabilities underflow */
    check_batch(pool, isa, shapes[1], 3.0f, prefill160, 1, 1, 0);
    check_batch(pool, isa, shapes[0], 8.0f, mixed, 4, 0, 0);
    /* attention sinks (gpt-oss): one more logit per head, no value */
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        check_batch(pool, isa, shapes[s], 1.0f, mixed, 4, 1, 1);
        check_batch(pool, isa, shapes[s], 1.0f, decode, 3, 1, 1);
        check_batch(pool, isa, shapes[s], 3.0f, prefill70, 1, 1, 1);
    }
}

/* The kernels alone: rows that see no key, one key, and all keys, in one
 * tile of every size up to the kernel's rows. */
static void check_kernel(const lp__attn_kern_t *kern)
{
    enum { HD = 16, NK = 40 };
    float k[NK * HD], v[NK * HD], q[LP_ATTN_ROWS_MAX][HD], out[LP_ATTN_ROWS_MAX][HD];
    float *scratch = aligned_alloc(64, sizeof(float) * lp__attn_scratch_floats(kern->rows, HD));
    int64_t off[NK]; /* key j's row: j * HD */
    for (int j = 0; j < NK; j++) off[j] = (int64_t)j * HD;
    for (int i = 0; i < NK * HD; i++) {
        k[i] = lp_check_frand(&rng);
        v[i] = lp_check_frand(&rng);
    }
    for (int32_t nr = 1; nr <= kern->rows; nr++) {
        const float *qp[LP_ATTN_ROWS_MAX];
        float *op[LP_ATTN_ROWS_MAX];
        int32_t n_keys[LP_ATTN_ROWS_MAX];
        for (int32_t r = 0; r < nr; r++) {
            for (int i = 0; i < HD; i++) {
                q[r][i] = lp_check_frand(&rng);
                out[r][i] = NAN;
            }
            qp[r] = q[r];
            op[r] = out[r];
            n_keys[r] = r % 3 == 0 ? 0 : r % 3 == 1 ? 1 : NK;
        }
        kern->tile(nr, qp, op, NULL, n_keys, k, v, off, HD, 0.25f, NULL, scratch);
        for (int32_t r = 0; r < nr; r++) {
            for (int i = 0; i < HD; i++) {
                if (n_keys[r] == 0)
                    CHECK(out[r][i] == 0.0f, "%s nr %d: row %d sees no key: %g, not 0", kern->name,
                          nr, r, out[r][i]);
                else if (n_keys[r] == 1)
                    CHECK(fabsf(out[r][i] - v[i]) <= 1e-6f, "%s nr %d: row %d sees key 0 only: "
                          "%g, not v_0 = %g", kern->name, nr, r, out[r][i], v[i]);
                else
                    CHECK(isfinite(out[r][i]) && fabsf(out[r][i]) <= 1.0f, "%s nr %d: row %d: %g",
                          kern->name, nr, r, out[r][i]);
            }
        }
    }
    free(scratch);
}

int main(void)
{
    static const char *isas[] = {"scalar", "avx2", "avx512", "vnni"};
    lp_threadpool_t *pools[2] = {lp_threadpool_new(1), lp_threadpool_new(2)};
    CHECK(pools[0] && pools[1], "thread pools");
    if (!pools[0] || !pools[1]) return 1;
    int n_isa = 0;
    const char *best = "scalar";
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        if (!lp_matmul_isa_supported(isas[i])) continue;
        CHECK(lp_matmul_set_isa(isas[i]) == 0, "set %s", isas[i]);
        n_isa++;
        best = isas[i];
        check_batches(pools[0], isas[i]);
    }
    CHECK(lp_matmul_set_isa(best) == 0, "set %s", best);
    check_batches(pools[1], best);
    /* a batch without its strides is refused, not read out of place */
    float kv[64] = {0}, qo[2][64] = {{0}};
    const float *kvp = kv;
    int32_t seq0 = 0, pos0 = 0;
    lp_attn_batch_t no_strides = {.out = qo[1], .q = qo[0], .tok_seq = &seq0, .tok_pos = &pos0,
                                  .k = &kvp, .v = &kvp, .n_tok = 1, .n_head = 1, .n_head_kv = 1,
                                  .head_dim = 64, .scale = 1};
    CHECK(lp_attn_run(pools[1], &no_strides) == -EINVAL && strstr(lp_error_msg(), "stride"),
          "a batch with zero strides: %s", lp_error_msg());
    check_kernel(&lp__attn_scalar);
#if defined(LP_HAVE_X86_KERNELS)
    if (lp_matmul_isa_supported("avx2")) check_kernel(&lp__attn_avx2);
    if (lp_matmul_isa_supported("avx512")) check_kernel(&lp__attn_avx512);
#endif
    lp_threadpool_destroy(&pools[0]);
    lp_threadpool_destroy(&pools[1]);
    if (!lp_check_failures) printf("attn: %d kernel set(s) agree with lp_op_attn_head\n", n_isa);
    return CHECK_DONE();
}
