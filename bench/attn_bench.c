/* attn_bench.c - one layer's attention: the blocked path (lp_attn_run)
 * against the per-(token, head) reference (lp_op_attn_head, one dot and one
 * axpy per cached position, as the CPU backend's `exact` path runs it).
 *
 *   attn_bench [-t threads] [-i isa]
 *
 * Shapes of TinyLlama-1.1B (32 heads, 4 KV heads, head_dim 64) and
 * Qwen2.5-0.5B (14 heads, 2 KV heads, head_dim 64): prefill of 512 tokens
 * from position 0 (pp512) and one decode token at position 0 and 511.
 * Fastest of the calls made in about 0.3 s; GFLOP/s counts 4 * head_dim
 * flops per (row, visible key), the QK and PV products. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "attn.h"
#include "error.h"
#include "matmul.h"
#include "ops.h"
#include "sysinfo.h"
#include "threadpool.h"

enum { N_CTX = 512 };

typedef struct ref_job {
    const lp_attn_batch_t *b;
    float *scores; /* (n_threads, N_CTX) */
} ref_job_t;

static void ref_worker(void *arg, int ith, int nth)
{
    const ref_job_t *j = arg;
    const lp_attn_batch_t *b = j->b;
    const int32_t hd = b->head_dim, group = b->n_head / b->n_head_kv;
    for (int64_t w = ith; w < (int64_t)b->n_tok * b->n_head; w += nth) {
        const int32_t t = (int32_t)(w / b->n_head), h = (int32_t)(w % b->n_head);
        const size_t off = ((size_t)t * b->n_head + h) * hd;
        const int64_t kv_off = (h / group) * b->head_stride;
        lp_op_attn_head(b->out + off, b->q + off, b->k[b->tok_seq[t]] + kv_off,
                        b->v[b->tok_seq[t]] + kv_off, b->key_stride, b->tok_pos[t] + 1, hd,
                        b->scale, NULL, j->scores + (size_t)ith * N_CTX);
    }
}

static double best_time(lp_threadpool_t *pool, const lp_attn_batch_t *b, int ref, float *scores)
{
    ref_job_t rj = {b, scores};
    double best = 1e30, t_end = lp_now_s() + 0.3;
    for (int iters = 0; iters < 4 || lp_now_s() < t_end; iters++) {
        double t0 = lp_now_s();
        if (ref) lp_threadpool_run(pool, ref_worker, &rj);
        else if (lp_attn_run(pool, b)) return -1;
        double t = lp_now_s() - t0;
        if (iters && t < best) best = t; /* the first call warms up */
    }
    return best;
}

int main(int argc, char **argv)
{
    int n_threads = 2, opt;
    const char *isa = NULL;
    while ((opt = getopt(argc, argv, "t:i:")) != -1) {
        switch (opt) {
        case 't': n_threads = atoi(optarg); break;
        case 'i': isa = optarg; break;
        default:
            fprintf(stderr, "usage: %s [-t threads] [-i isa]\n", argv[0]);
            return 2;
        }
    }
    if (isa && lp_matmul_set_isa(isa)) {
        fprintf(stderr, "attn_bench: %s\n", lp_error_msg());
        return 1;
    }
    lp_threadpool_t *pool = lp_threadpool_new(n_threads);
    if (!pool) return 1;
    static const struct {
        const char *name;
        int32_t n_head, n_head_kv, head_dim;
    } shapes[] = {{"tinyllama", 32, 4, 64}, {"qwen2.5-0.5b", 14, 2, 64}};
    static const struct {
        const char *name;
        int32_t pos, n_tok;
    } cases[] = {{"pp512", 0, 512}, {"tg@0", 0, 1}, {"tg@511", 511, 1}};
    printf("isa %s, %d threads\n", lp_matmul_isa(), n_threads);
    printf("%-13s %-7s %12s %12s %9s %9s %7s\n", "shape", "case", "tiled ms", "ref ms", "tiled GF", "ref GF",
           "speedup");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int32_t hd = shapes[s].head_dim, q_dim = shapes[s].n_head * hd;
        const int32_t kv_dim = shapes[s].n_head_kv * hd;
        float *k = malloc(sizeof(float) * N_CTX * (size_t)kv_dim);
        float *v = malloc(sizeof(float) * N_CTX * (size_t)kv_dim);
        float *q = malloc(sizeof(float) * N_CTX * (size_t)q_dim);
        float *out = malloc(sizeof(float) * N_CTX * (size_t)q_dim);
        float *scores = malloc(sizeof(float) * N_CTX * (size_t)n_threads);
        int32_t *tok_seq = calloc(N_CTX, sizeof(int32_t)), *tok_pos = malloc(sizeof(int32_t) * N_CTX);
        if (!k || !v || !q || !out || !scores || !tok_seq || !tok_pos) return 1;
        for (size_t i = 0; i < (size_t)N_CTX * kv_dim; i++) {
            k[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
            v[i] = (float)((i * 40503u) % 1000) / 500.0f - 1.0f;
        }
        for (size_t i = 0; i < (size_t)N_CTX * q_dim; i++) q[i] = (float)((i * 97u) % 1000) / 500.0f - 1.0f;
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            double flops = 0;
            for (int32_t t = 0; t < cases[c].n_tok; t++) {
                tok_pos[t] = cases[c].pos + t;
                flops += 4.0 * hd * shapes[s].n_head * (tok_pos[t] + 1);
            }
            const float *kp = k, *vp = v;
            lp_attn_batch_t b = {
                .out = out, .q = q, .tok_seq = tok_seq, .tok_pos = tok_pos, .k = &kp, .v = &vp,
                .key_stride = hd, .head_stride = (int64_t)N_CTX * hd, /* the engine's layout */
                .n_tok = cases[c].n_tok, .n_head = shapes[s].n_head,
                .n_head_kv = shapes[s].n_head_kv, .head_dim = hd, .scale = 1.0f / sqrtf((float)hd),
            };
            const double tt = best_time(pool, &b, 0, scores), tr = best_time(pool, &b, 1, scores);
            if (tt < 0) {
                fprintf(stderr, "attn_bench: %s\n", lp_error_msg());
                return 1;
            }
            printf("%-13s %-7s %12.4f %12.4f %9.1f %9.1f %6.2fx\n", shapes[s].name, cases[c].name,
                   tt * 1e3, tr * 1e3, flops / tt * 1e-9, flops / tr * 1e-9, tr / tt);
        }
        free(k); free(v); free(q); free(out); free(scores); free(tok_seq); free(tok_pos);
    }
    lp_threadpool_destroy(&pool);
    return 0;
}
