/* gguf-test-util.h - small helpers shared by the GGUF tests: a CHECK macro
 * that counts failures, file loading, and locating a key's value in a
 * serialized file so a test can patch it. */
#ifndef LP_TESTS_GGUF_TEST_UTIL_H
#define LP_TESTS_GGUF_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_failures;

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__,  \
                    #cond);                                                   \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
            test_failures++;                                                  \
        }                                                                     \
    } while (0)

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

#endif
