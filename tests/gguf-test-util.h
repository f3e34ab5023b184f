/* gguf-test-util.h - small helpers shared by the GGUF tests: check.h's
 * CHECK, file loading, and locating a key's value in a serialized file so
 * a test can patch it. */
#ifndef LP_TESTS_GGUF_TEST_UTIL_H
#define LP_TESTS_GGUF_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* Read a whole file into a new heap buffer; exits the test on failure. */
static inline uint8_t *test_load(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* Offset of the first byte after the serialized key `key` (its u64 length
 * and its bytes), i.e. of its u32 value type; 0 when not found. */
static inline size_t test_find_key(const uint8_t *buf, size_t len, const char *key)
{
    size_t kl = strlen(key);
    for (size_t i = 0; i + 8 + kl <= len; i++) {
        uint64_t n;
        memcpy(&n, buf + i, 8);
        if (n == kl && !memcmp(buf + i + 8, key, kl)) return i + 8 + kl;
    }
    return 0;
}

static inline void test_put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static inline void test_put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static inline uint64_t test_get_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Touch everything a parsed file offers through the public getters, the
 * way a consumer would; returns a value that depends on all of it so that
 * nothing is optimized away.  Sanitizers watch for bad reads. */
#ifdef LP_GGUF_H
static inline uint64_t test_gguf_touch(const lp_gguf_t *g)
{
    uint64_t h = lp_gguf_version(g) + lp_gguf_alignment(g) + lp_gguf_file_size(g);
    for (int64_t i = 0; i < lp_gguf_n_kv(g); i++) {
        const lp_gguf_kv_t *kv = lp_gguf_kv_at(g, i);
        h = h * 31 + strlen(kv->key);
        if (lp_gguf_find(g, kv->key) != kv) h ^= 0xdead; /* keys are unique */
        uint32_t u32;
        int64_t i64;
        float f;
        bool b;
        lp_gguf_str_t s;
        const void *d;
        const lp_gguf_str_t *strs;
        uint64_t n;
        if (!lp_gguf_get_u32(g, kv->key, &u32)) h += u32;
        if (!lp_gguf_get_i64(g, kv->key, &i64)) h += (uint64_t)i64;
        if (!lp_gguf_get_f32(g, kv->key, &f)) h += f == f;
        if (!lp_gguf_get_bool(g, kv->key, &b)) h += b;
        if (!lp_gguf_get_str(g, kv->key, &s) && s.len) h += (uint8_t)s.ptr[s.len - 1];
        if (kv->type == LP_GGUF_ARRAY) {
            if (kv->arr_type == LP_GGUF_STRING) {
                if (!lp_gguf_get_str_arr(g, kv->key, &strs, &n) && n)
                    h += strs[n - 1].len + (strs[n - 1].len ? (uint8_t)strs[n - 1].ptr[0] : 0);
            } else if (!lp_gguf_get_arr(g, kv->key, kv->arr_type, &d, &n) && n) {
                double v = lp_gguf_num_at(kv->arr_type, d, n - 1);
                h += v == v;
            }
        } else if (kv->type != LP_GGUF_STRING) {
            double v = lp_gguf_num_at(kv->type, kv->data, 0);
            h += v == v;
        }
    }
    for (int64_t i = 0; i < lp_gguf_n_tensors(g); i++) {
        const lp_gguf_tensor_t *t = lp_gguf_tensor_at(g, i);
        if (lp_gguf_find_tensor(g, t->name) != t) h ^= 0xbeef;
        h = h * 31 + t->nbytes + t->offset + t->type + t->n_dims;
        if (t->nbytes) /* first and last byte of the data */
            h += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->nbytes - 1];
    }
    return h;
}
#endif

#endif
