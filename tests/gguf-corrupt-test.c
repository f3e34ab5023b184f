/* gguf-corrupt-test.c - the GGUF reader on damaged copies of the real files
 * in ../shared: truncated at many offsets, single bits flipped (fixed seed),
 * and every count, length, type and dimension field inflated.  Each damaged
 * file must either fail with a message or, where the damage is harmless
 * (tensor data, padding, a flipped bit inside a value), parse; never crash.
 * Runs under ASan+UBSan in the sanitize suite.  Where a copy is cut, the
 * reader sees an exact-size heap buffer so that any over-read is caught.
 * usage: gguf-corrupt-test SHARED_DIR */
#include "error.h"
#include "gguf.h"
#include "gguf-test-util.h"

#include <time.h>

/* ---- an independent walk of a valid file: where each field is ---- */

enum field_kind { F_N_TENSORS, F_N_KV, F_KEY_LEN, F_VTYPE, F_ARR_TYPE, F_ARR_N, F_STR_LEN,
                  F_NAME_LEN, F_N_DIMS, F_DIM, F_TTYPE, F_TOFFSET, F_KIND_COUNT };
static const char *kind_name[F_KIND_COUNT] = {
    "n_tensors", "n_kv", "key length", "value type", "array type", "array count",
    "string length", "tensor name length", "n_dims", "dimension", "tensor type",
    "tensor offset"};

typedef struct field {
    size_t off;
    int width; /* 4 or 8 */
    enum field_kind kind;
} field_t;

typedef struct layout {
    field_t *f;
    size_t n, cap;
    size_t info_start; /* first tensor info */
    size_t header_end; /* end of the tensor infos */
    size_t need_end;   /* a cut before this must fail */
} layout_t;

static void add_field(layout_t *l, size_t off, int width, enum field_kind k)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 1024;
        l->f = realloc(l->f, l->cap * sizeof(*l->f));
        if (!l->f) exit(1);
    }
    l->f[l->n++] = (field_t){off, width, k};
}

static const size_t fixed_size[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

/* Records every structural field, but only a sample of the string lengths
 * inside long string arrays (the first 16 and every 997th). */
static void walk(const uint8_t *b, layout_t *l)
{
    uint64_t nt = test_get_u64(b + 8), nkv = test_get_u64(b + 16);
    add_field(l, 8, 8, F_N_TENSORS);
    add_field(l, 16, 8, F_N_KV);
    size_t p = 24;
    for (uint64_t i = 0; i < nkv; i++) {
        add_field(l, p, 8, F_KEY_LEN);
        p += 8 + test_get_u64(b + p);
        uint32_t t;
        memcpy(&t, b + p, 4);
        add_field(l, p, 4, F_VTYPE);
        p += 4;
        uint64_t n = 1;
        if (t == 9) {
            add_field(l, p, 4, F_ARR_TYPE);
            memcpy(&t, b + p, 4);
            add_field(l, p + 4, 8, F_ARR_N);
            n = test_get_u64(b + p + 4);
            p += 12;
        }
        if (t == 8) {
            for (uint64_t k = 0; k < n; k++) {
                if (k < 16 || k % 997 == 0) add_field(l, p, 8, F_STR_LEN);
                p += 8 + test_get_u64(b + p);
            }
        } else {
            p += fixed_size[t] * n;
        }
    }
    l->info_start = p;
    for (uint64_t i = 0; i < nt; i++) {
        add_field(l, p, 8, F_NAME_LEN);
        p += 8 + test_get_u64(b + p);
        uint32_t nd;
        memcpy(&nd, b + p, 4);
        add_field(l, p, 4, F_N_DIMS);
        p += 4;
        for (uint32_t d = 0; d < nd; d++, p += 8) add_field(l, p, 8, F_DIM);
        add_field(l, p, 4, F_TTYPE);
        add_field(l, p + 4, 8, F_TOFFSET);
        p += 12;
    }
    l->header_end = p;
}

/* ---- parsing a damaged buffer ---- */

static long n_parsed, n_failed;

/* Parse buf[0, len); returns the reader's code.  A failure must come with a
 * message; a success is touched all over. */
static int parse(const uint8_t *buf, size_t len, const char *what, size_t where)
{
    lp_gguf_t *g = NULL;
    lp_error_clear();
    int rc = lp_gguf_open_mem(buf, len, &g);
    if (rc) {
        const char *msg = lp_error_msg();
        CHECK(rc < 0 && g == NULL, "%s at %zu: rc %d", what, where, rc);
        CHECK(msg && *msg && strcmp(msg, "no error message"), "%s at %zu: no message", what,
              where);
        n_failed++;
    } else {
        volatile uint64_t h = test_gguf_touch(g);
        (void)h;
        lp_gguf_destroy(&g);
    }
    n_parsed++;
    return rc;
}

/* A fixed seed, so failures reproduce. */
static uint64_t rng = 0x9e3779b97f4a7c15ull;

/* ---- one file ---- */

typedef struct plan {
    const char *path;   /* under SHARED_DIR */
    size_t cut_every;   /* cut at every byte of the first cut_every bytes */
    size_t info_stride; /* and every info_stride-th byte of the tensor infos */
    int cut_samples;    /* and this many random cuts through the rest */
    int header_flips;   /* random bit flips in the metadata and tensor infos */
    int data_flips;     /* random bit flips after the tensor infos */
    int field_stride;   /* inflate every field_stride-th field */
} plan_t;

static void cut_at(const uint8_t *b, size_t len, const layout_t *l, size_t at)
{
    uint8_t *copy = malloc(at ? at : 1);
    memcpy(copy, b, at);
    int rc = parse(copy, at, "cut", at);
    if (at < l->need_end)
        CHECK(rc < 0, "cut at %zu of %zu (needs %zu) parsed", at, len, l->need_end);
    free(copy);
}

static void run_plan(const char *shared, const plan_t *pl)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", shared, pl->path);
    size_t len;
    uint8_t *b = test_load(path, &len);
    long parsed0 = n_parsed, failed0 = n_failed;
    clock_t t0 = clock();

    /* The intact file parses; the walk agrees with the reader. */
    lp_gguf_t *g;
    if (lp_gguf_open_mem(b, len, &g)) {
        fprintf(stderr, "%s: %s\n", pl->path, lp_error_msg());
        exit(1);
    }
    layout_t l = {0};
    walk(b, &l);
    int64_t n_tensors = lp_gguf_n_tensors(g);
    size_t data_start = (l.header_end + lp_gguf_alignment(g) - 1) / lp_gguf_alignment(g) *
                        lp_gguf_alignment(g);
    l.need_end = n_tensors ? data_start : l.header_end;
    for (int64_t i = 0; i < n_tensors; i++) {
        const lp_gguf_tensor_t *t = lp_gguf_tensor_at(g, i);
        CHECK((const uint8_t *)t->data - b == (ptrdiff_t)(data_start + t->offset),
              "%s: walk and reader disagree on the data section", pl->path);
        if (data_start + t->offset + t->nbytes > l.need_end)
            l.need_end = data_start + t->offset + t->nbytes;
    }
    lp_gguf_destroy(&g);

    /* (a) truncation */
    size_t every = pl->cut_every < l.header_end ? pl->cut_every : l.header_end;
    for (size_t at = 0; at < every; at++) cut_at(b, len, &l, at);
    if (n_tensors && pl->info_stride)
        for (size_t at = l.info_start; at < l.header_end; at += pl->info_stride)
            cut_at(b, len, &l, at);
    for (int i = 0; i < pl->cut_samples; i++) {
        size_t at = (size_t)(lp_check_rand(&rng) % len);
        if (at < l.header_end) {
            cut_at(b, len, &l, at);
        } else { /* in the data: the header stays whole, so no copy is needed */
            int rc = parse(b, at, "cut", at);
            if (at < l.need_end) CHECK(rc < 0, "%s: cut at %zu in the data parsed", pl->path, at);
        }
    }
    cut_at(b, len, &l, len - 1);

    /* (b) bit flips: in the header either outcome is fair; after it (padding
     * and tensor data) the file must still parse. */
    for (int i = 0; i < pl->header_flips; i++) {
        size_t at = (size_t)(lp_check_rand(&rng) % l.header_end);
        uint8_t bit = (uint8_t)(1u << (lp_check_rand(&rng) % 8));
        b[at] ^= bit;
        parse(b, len, "flip", at);
        b[at] ^= bit;
    }
    for (int i = 0; i < pl->data_flips && len > l.header_end; i++) {
        size_t at = l.header_end + (size_t)(lp_check_rand(&rng) % (len - l.header_end));
        uint8_t bit = (uint8_t)(1u << (lp_check_rand(&rng) % 8));
        b[at] ^= bit;
        int rc = parse(b, len, "data flip", at);
        CHECK(rc == 0, "%s: a flip at %zu, after the header, broke the parse: %s", pl->path, at,
              lp_error_msg());
        b[at] ^= bit;
    }

    /* (c) inflated fields: absurd values must fail; a value one larger may
     * go either way. */
    static const uint64_t big64[] = {UINT64_MAX, 1ull << 63, 1ull << 40, 0};
    static const uint32_t big32[] = {UINT32_MAX, 1u << 31, 0xffff};
    for (size_t i = 0; i < l.n; i += (size_t)pl->field_stride) {
        const field_t *f = &l.f[i];
        uint8_t saved[8];
        memcpy(saved, b + f->off, (size_t)f->width);
        if (f->width == 8) {
            uint64_t v = test_get_u64(saved);
            for (size_t k = 0; k < sizeof(big64) / sizeof(big64[0]); k++) {
                uint64_t nv = big64[k] ? big64[k] : len; /* 0 stands for the file size */
                test_put_u64(b + f->off, nv);
                int rc = parse(b, len, kind_name[f->kind], f->off);
                CHECK(rc < 0, "%s: %s at %zu set to %llu parsed", pl->path, kind_name[f->kind],
                      f->off, (unsigned long long)nv);
            }
            test_put_u64(b + f->off, v + 1);
            parse(b, len, kind_name[f->kind], f->off);
        } else {
            uint32_t v;
            memcpy(&v, saved, 4);
            for (size_t k = 0; k < sizeof(big32) / sizeof(big32[0]); k++) {
                test_put_u32(b + f->off, big32[k]);
                int rc = parse(b, len, kind_name[f->kind], f->off);
                CHECK(rc < 0, "%s: %s at %zu set to %u parsed", pl->path, kind_name[f->kind],
                      f->off, big32[k]);
            }
            test_put_u32(b + f->off, v + 1);
            parse(b, len, kind_name[f->kind], f->off);
        }
        memcpy(b + f->off, saved, (size_t)f->width);
    }

    /* The buffer is restored: it parses as before. */
    CHECK(parse(b, len, "restored", 0) == 0, "%s: restored copy fails", pl->path);
    printf("%-40s %6ld damaged copies, %6ld rejected, %5.1f s\n", pl->path, n_parsed - parsed0,
           n_failed - failed0, (double)(clock() - t0) / CLOCKS_PER_SEC);
    free(l.f);
    free(b);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s SHARED_DIR\n", argv[0]);
        return 2;
    }
    /* Budgets follow each file's parse cost: stories260K's header is small
     * (every byte is cut and every field inflated); the vocab-heavy files
     * cost milliseconds per parse, so they get samples. */
    static const plan_t plans[] = {
        {"models/stories260K.gguf", SIZE_MAX, 1, 200, 20000, 300, 1},
        {"vocab/ggml-vocab-llama-spm.gguf", 4096, 0, 40, 300, 20, 7},
        {"vocab/ggml-vocab-gpt-2.gguf", 2048, 0, 20, 100, 10, 13},
        {"models/synth-llama-Q4_K_M.gguf", 2048, 5, 40, 300, 200, 5},
        {"vocab/ggml-vocab-qwen2.gguf", 512, 0, 6, 20, 4, 59},
        {"models/synth-qwen2-Q8_0.gguf", 512, 17, 6, 20, 30, 59},
    };
    for (size_t i = 0; i < sizeof(plans) / sizeof(plans[0]); i++) run_plan(argv[1], &plans[i]);
    return CHECK_DONE();
}
