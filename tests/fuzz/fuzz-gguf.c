/* fuzz-gguf.c - libFuzzer target for the GGUF reader (and writer).
 *
 * Parses the input with lp_gguf_open_mem() and, when it parses, reads back
 * everything through the public getters, then copies the file through the
 * writer and checks that the copy parses to the same keys, values, tensors
 * and data.  A failure without a message, a positive code or a copy that
 * differs aborts: the fuzzer reports it like a crash.  Built as a
 * libFuzzer binary with -Dfuzz=true (clang), and linked into
 * fuzz-gguf-replay, which CI runs over the seed corpus. */
#include "error.h"
#include "gguf-write.h"
#include "gguf.h"
#include "../gguf-test-util.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what)
{
    fprintf(stderr, "fuzz-gguf: %s (%s)\n", what, lp_error_msg());
    abort();
}

static size_t vsize(enum lp_gguf_vtype t)
{
    static const size_t sz[LP_GGUF_VTYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return sz[t];
}

static int same_kv(const lp_gguf_kv_t *a, const lp_gguf_kv_t *b)
{
    if (a->type != b->type) return 0;
    if (a->type != LP_GGUF_ARRAY) {
        if (a->type == LP_GGUF_STRING)
            return a->strs[0].len == b->strs[0].len &&
                   !memcmp(a->strs[0].ptr, b->strs[0].ptr, a->strs[0].len);
        return !memcmp(a->data, b->data, vsize(a->type));
    }
    if (a->arr_type != b->arr_type || a->arr_n != b->arr_n) return 0;
    if (a->arr_type != LP_GGUF_STRING)
        return !a->arr_n || !memcmp(a->data, b->data, vsize(a->arr_type) * a->arr_n);
    for (uint64_t i = 0; i < a->arr_n; i++)
        if (a->strs[i].len != b->strs[i].len ||
            memcmp(a->strs[i].ptr, b->strs[i].ptr, a->strs[i].len))
            return 0;
    return 1;
}

/* Write g again with the writer and compare what the reader makes of it. */
static void round_trip(const lp_gguf_t *g)
{
    lp_gguf_writer_t *w;
    if (lp_gguf_writer_new(&w)) fail("writer_new");
    lp_gguf_writer_set_version(w, lp_gguf_version(g));
    if (lp_gguf_find(g, "general.alignment") &&
        lp_gguf_writer_set_alignment(w, lp_gguf_alignment(g)))
        fail("set_alignment");
    for (int64_t i = 0; i < lp_gguf_n_kv(g); i++) {
        const lp_gguf_kv_t *kv = lp_gguf_kv_at(g, i);
        if (strcmp(kv->key, "general.alignment") && lp_gguf_writer_add_kv(w, kv)) fail("add_kv");
    }
    for (int64_t i = 0; i < lp_gguf_n_tensors(g); i++) {
        const lp_gguf_tensor_t *t = lp_gguf_tensor_at(g, i);
        if (lp_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data))
            fail("add_tensor");
    }
    uint8_t *buf;
    size_t len;
    if (lp_gguf_writer_write_mem(w, &buf, &len)) fail("write_mem");
    lp_gguf_writer_destroy(&w);
    lp_gguf_t *c;
    if (lp_gguf_open_mem(buf, len, &c)) fail("the writer's copy does not parse");
    if (lp_gguf_n_kv(c) != lp_gguf_n_kv(g) || lp_gguf_n_tensors(c) != lp_gguf_n_tensors(g) ||
        lp_gguf_alignment(c) != lp_gguf_alignment(g) || lp_gguf_version(c) != lp_gguf_version(g))
        fail("the copy's counts differ");
    for (int64_t i = 0; i < lp_gguf_n_kv(g); i++) {
        const lp_gguf_kv_t *kv = lp_gguf_kv_at(g, i);
        const lp_gguf_kv_t *ck = lp_gguf_find(c, kv->key);
        if (!ck) fail("a key is missing from the copy");
        if (strcmp(kv->key, "general.alignment") && !same_kv(kv, ck)) fail("a value differs");
    }
    for (int64_t i = 0; i < lp_gguf_n_tensors(g); i++) {
        const lp_gguf_tensor_t *t = lp_gguf_tensor_at(g, i), *u = lp_gguf_tensor_at(c, i);
        if (strcmp(t->name, u->name) || t->type != u->type || t->n_dims != u->n_dims ||
            memcmp(t->ne, u->ne, sizeof(t->ne)) || t->nbytes != u->nbytes ||
            memcmp(t->data, u->data, t->nbytes))
            fail("a tensor differs in the copy");
    }
    lp_gguf_destroy(&c);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lp_gguf_t *g = NULL;
    lp_error_clear();
    int rc = lp_gguf_open_mem(data, size, &g);
    if (rc) {
        const char *msg = lp_error_msg();
        if (rc > 0 || g != NULL || !msg || !*msg || !strcmp(msg, "no error message")) {
            fprintf(stderr, "fuzz-gguf: rc %d without a proper message\n", rc);
            abort();
        }
        return 0;
    }
    volatile uint64_t h = test_gguf_touch(g);
    (void)h;
    round_trip(g);
    lp_gguf_destroy(&g);
    return 0;
}
