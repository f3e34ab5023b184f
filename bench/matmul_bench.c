/* matmul_bench.c - throughput of lp_matmul per weight type.
 *
 *   matmul_bench [-t threads] [-i isa] [-n n_in] [-o n_out] [-p n_tok]
 *
 * Decode (one token): GB/s of weight bytes streamed.  Prefill (n_tok
 * tokens, default 128): GMAC/s (multiply-adds per second) and tokens/s
 * for this one matrix.  The weights are random and larger than the caches
 * so decode measures memory streaming like a real model. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "error.h"
#include "matmul.h"
#include "quant.h"
#include "sysinfo.h"

static const uint32_t types[] = {
    LP_TYPE_F32, LP_TYPE_F16, LP_TYPE_BF16, LP_TYPE_Q8_0, LP_TYPE_Q4_0, LP_TYPE_Q4_1,
    LP_TYPE_Q5_0, LP_TYPE_Q5_1, LP_TYPE_Q4_K, LP_TYPE_Q5_K, LP_TYPE_Q6_K,
};

/* Seconds per call: the fastest of the calls made in about 0.2 s.  The
 * minimum rather than the mean, so that other work on a shared machine
 * does not show up as a slow kernel. */
static void call(lp_threadpool_t *pool, const lp_matmul_t *mm, bool exact)
{
    if (lp_matmul(pool, mm, exact)) {
        fprintf(stderr, "matmul_bench: %s\n", lp_error_msg());
        exit(1);
    }
}

static double time_call(lp_threadpool_t *pool, const lp_matmul_t *mm, bool exact)
{
    call(pool, mm, exact); /* warm up: scratch, page faults */
    double best = 1e30, t_end = lp_now_s() + 0.2;
    int iters = 0;
    do {
        double t0 = lp_now_s();
        call(pool, mm, exact);
        double t = lp_now_s() - t0;
        if (t < best) best = t;
        iters++;
    } while (lp_now_s() < t_end || iters < 3);
    return best;
}

int main(int argc, char **argv)
{
    int n_threads = 2, opt;
    int64_t n_in = 2048, n_out = 5632, n_tok = 128;
    const char *isa = NULL, *only = NULL;
    while ((opt = getopt(argc, argv, "t:i:n:o:p:T:")) != -1) {
        switch (opt) {
        case 't': n_threads = atoi(optarg); break;
        case 'i': isa = optarg; break;
        case 'n': n_in = atoll(optarg); break;
        case 'o': n_out = atoll(optarg); break;
        case 'p': n_tok = atoll(optarg); break;
        case 'T': only = optarg; break;
        default:
            fprintf(stderr, "usage: %s [-t threads] [-i isa] [-n n_in] [-o n_out] [-p n_tok] "
                    "[-T type]\n", argv[0]);
            return 2;
        }
    }
    if (isa && lp_matmul_set_isa(isa)) {
        fprintf(stderr, "matmul_bench: %s\n", lp_error_msg());
        return 1;
    }
    lp_threadpool_t *pool = lp_threadpool_new(n_threads);
    if (!pool) {
        fprintf(stderr, "matmul_bench: %s\n", lp_error_msg());
        return 1;
    }
    float *wf = malloc(sizeof(float) * (size_t)n_in);
    float *x = malloc(sizeof(float) * (size_t)(n_in * n_tok));
    float *y = malloc(sizeof(float) * (size_t)(n_out * n_tok));
    for (int64_t i = 0; i < n_in * n_tok; i++) x[i] = (float)((i * 7919) % 1000) / 500.0f - 1.0f;
    for (int64_t i = 0; i < n_in; i++) wf[i] = (float)((i * 104729) % 1000) / 500.0f - 1.0f;
    printf("isa %s, %d threads, %lld x %lld, prefill %lld tokens\n", lp_matmul_isa(), n_threads,
           (long long)n_out, (long long)n_in, (long long)n_tok);
    printf("%-5s %10s %12s %12s %12s\n", "type", "MB", "decode GB/s", "pp GMAC/s", "exact GB/s");
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        uint32_t type = types[k];
        if (only && strcmp(only, lp_type_name(type))) continue;
        if (n_in % lp_type_traits(type)->block_elems) continue;
        size_t rb = lp_type_row_bytes(type, n_in);
        /* 2 MiB-aligned and huge-page backed where the kernel allows it (as
         * a model's weights should be: see docs/KERNELS.md) */
        size_t wbytes = (rb * (size_t)n_out + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
        uint8_t *w = aligned_alloc(2u << 20, wbytes);
        if (getenv("BENCH_NO_HUGE") == NULL) madvise(w, wbytes, MADV_HUGEPAGE);
        for (int64_t o = 0; o < n_out; o++) {
            wf[o % n_in] = -wf[o % n_in]; /* rows differ a little */
            lp_quant_row(type, wf, w + (size_t)o * rb, n_in);
        }
        lp_matmul_t mm = {.type = type, .w = w, .n_in = n_in, .n_out = n_out, .x = x,
                          .x_stride = n_in, .n_tok = 1, .y = y, .y_stride = n_out};
        double bytes = (double)rb * (double)n_out;
        double td = time_call(pool, &mm, false);
        double te = time_call(pool, &mm, true);
        mm.n_tok = n_tok;
        double tp = time_call(pool, &mm, false);
        printf("%-5s %10.1f %12.2f %12.2f %12.2f\n", lp_type_name(type), bytes / 1e6,
               bytes / td / 1e9, (double)n_in * (double)n_out * (double)n_tok / tp / 1e9,
               bytes / te / 1e9);
        fflush(stdout);
        free(w);
    }
    free(wf);
    free(x);
    free(y);
    lp_threadpool_destroy(&pool);
    return 0;
}
