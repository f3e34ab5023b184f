/* bench-read.c - the memory-bandwidth ceiling of decode, measured on the
 * weights themselves: a plain read of the bytes one decode step reads, by
 * as many threads as the engine has, in the same process and the same
 * minute as the decode it is compared with (a VM's bandwidth drifts from
 * one minute to the next, so a figure taken apart is no ceiling). */
#include "bench.h"

#include "error.h"
#include "sysinfo.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef uint64_t v8u64 __attribute__((vector_size(64), aligned(1)));

typedef struct span {
    const uint8_t *p;
    size_t n;
} span_t;

typedef struct reader {
    pthread_t th;
    const span_t *spans;
    size_t n_spans;
    size_t lo, hi; /* this thread's share of the spans' bytes, end to end */
    uint64_t sink;
} reader_t;

static uint64_t read_bytes(const uint8_t *p, size_t n)
{
    v8u64 acc = {0};
    size_t i = 0;
    for (; i + 256 <= n; i += 256) {
        v8u64 a, b, c, d;
        memcpy(&a, p + i, 64);
        memcpy(&b, p + i + 64, 64);
        memcpy(&c, p + i + 128, 64);
        memcpy(&d, p + i + 192, 64);
        acc ^= (a ^ b) ^ (c ^ d);
    }
    uint64_t s = 0;
    for (int k = 0; k < 8; k++) s ^= acc[k];
    for (; i < n; i++) s ^= p[i];
    return s;
}

static void *reader_main(void *arg)
{
    reader_t *r = arg;
    size_t at = 0; /* bytes of the spans before spans[k] */
    for (size_t k = 0; k < r->n_spans && at < r->hi; at += r->spans[k++].n) {
        size_t a = r->lo > at ? r->lo - at : 0;
        size_t b = r->hi - at < r->spans[k].n ? r->hi - at : r->spans[k].n;
        if (a < b) r->sink ^= read_bytes(r->spans[k].p + a, b - a);
    }
    return NULL;
}

/* What one decode step reads: every tensor but the token embeddings,
 * which it reads a row of per sequence, unless the output layer is tied to
 * them; of the expert tensors the part the chosen experts are; from the
 * engine's copy where it has one (packed matrices). */
static size_t decode_spans(const lp_gguf_t *g, const lp_engine_t *e, double expert_frac, int seqs,
                           span_t *spans)
{
    bool tied = !lp_gguf_find_tensor(g, "output.weight");
    size_t n = 0;
    for (int64_t i = 0; i < lp_gguf_n_tensors(g); i++) {
        const lp_gguf_tensor_t *t = lp_gguf_tensor_at(g, i);
        if (!tied && !strcmp(t->name, "token_embd.weight")) {
            size_t row = t->ne[1] > 0 ? t->nbytes / (size_t)t->ne[1] : 0;
            spans[n++] = (span_t){t->data, row * (size_t)seqs < t->nbytes ? row * (size_t)seqs
                                                                             : t->nbytes};
            continue;
        }
        if (t->n_dims == 3) { /* experts: never packed, read in place */
            spans[n++] = (span_t){t->data, (size_t)((double)t->nbytes * expert_frac)};
            continue;
        }
        size_t cb = 0;
        const void *copy = e ? lp_engine_weight_copy(e, t->data, &cb) : NULL;
        if (copy) spans[n++] = (span_t){copy, cb};
        if (cb < t->nbytes) spans[n++] = (span_t){(const uint8_t *)t->data + cb, t->nbytes - cb};
    }
    return n;
}

int lp_bench_decode_bytes(const lp_gguf_t *g, const lp_engine_t *e, int threads,
                          double expert_frac, int seqs, double *bytes, double *gb_s)
{
    if (threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (int)n : 1;
    }
    span_t *spans = malloc(sizeof(*spans) * (size_t)(2 * lp_gguf_n_tensors(g) + 1));
    reader_t *rd = calloc((size_t)threads, sizeof(*rd));
    if (!spans || !rd) {
        free(spans);
        free(rd);
        return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    }
    size_t n_spans = decode_spans(g, e, expert_frac < 0 ? 0 : expert_frac > 1 ? 1 : expert_frac,
                                  seqs < 1 ? 1 : seqs, spans),
           total = 0;
    for (size_t k = 0; k < n_spans; k++) total += spans[k].n;
    int rc = 0, started = 0;
    double t0 = lp_now_s();
    for (; started < threads; started++) {
        reader_t *r = &rd[started];
        *r = (reader_t){.spans = spans, .n_spans = n_spans,
                        .lo = total / (size_t)threads * (size_t)started,
                        .hi = started + 1 == threads ? total
                                                     : total / (size_t)threads * (size_t)(started + 1)};
        if (pthread_create(&r->th, NULL, reader_main, r)) {
            rc = lp_error_set(LP_ERR(EAGAIN), "bench: cannot start a reader thread");
            break;
        }
    }
    for (int i = 0; i < started; i++) pthread_join(rd[i].th, NULL);
    double secs = lp_now_s() - t0;
    *bytes = (double)total;
    *gb_s = secs > 0 ? total / secs / 1e9 : 0;
    free(spans);
    free(rd);
    return rc;
}
