/* gguf-write-test.c - the GGUF writer: exact bytes of a small file worked
 * out by hand from the format, a round trip of every value type through the
 * reader, alignment, row callbacks, and a copy of a real vocab's metadata.
 * usage: gguf-write-test SHARED_DIR TMPDIR */
#include "error.h"
#include "ggml-type.h"
#include "gguf-write.h"
#include "gguf.h"
#include "gguf-test-util.h"

#include <math.h>
#include <unistd.h>

static const char *shared_dir, *tmp_dir;

/* ---- exact bytes ---- */

static void test_exact_bytes(void)
{
    /* One u32 key "a" = 7 and one F32 tensor "t" of 2 elements {1, 2}. */
    static const uint8_t want[128] = {
        'G', 'G', 'U', 'F', 3, 0, 0, 0,   /* magic, version 3 */
        1, 0, 0, 0, 0, 0, 0, 0,           /* n_tensors */
        1, 0, 0, 0, 0, 0, 0, 0,           /* n_kv */
        1, 0, 0, 0, 0, 0, 0, 0, 'a',      /* key "a" */
        4, 0, 0, 0, 7, 0, 0, 0,           /* u32 7 */
        1, 0, 0, 0, 0, 0, 0, 0, 't',      /* tensor "t" (offset 41) */
        1, 0, 0, 0,                       /* n_dims */
        2, 0, 0, 0, 0, 0, 0, 0,           /* ne[0] */
        0, 0, 0, 0,                       /* F32 */
        0, 0, 0, 0, 0, 0, 0, 0,           /* offset 0; ends at 74 */
        [96] = 0x00, 0x00, 0x80, 0x3f,    /* data at 96 = pad(74, 32): 1.0f */
        0x00, 0x00, 0x00, 0x40,           /* 2.0f, then zeros up to 128 */
    };
    lp_gguf_writer_t *w;
    CHECK(lp_gguf_writer_new(&w) == 0, "new");
    float data[2] = {1, 2};
    int64_t ne[1] = {2};
    CHECK(lp_gguf_writer_add_u32(w, "a", 7) == 0, "add_u32");
    CHECK(lp_gguf_writer_add_tensor(w, "t", LP_TYPE_F32, 1, ne, data) == 0, "add_tensor");
    uint8_t *buf;
    size_t len;
    CHECK(lp_gguf_writer_write_mem(w, &buf, &len) == 0, "write_mem: %s", lp_error_msg());
    CHECK(len == sizeof(want), "length %zu, want %zu", len, sizeof(want));
    for (size_t i = 0; i < len && i < sizeof(want); i++)
        if (buf[i] != want[i]) {
            CHECK(buf[i] == want[i], "byte %zu is %02x, want %02x", i, buf[i], want[i]);
            break;
        }
    free(buf);

    /* Version 2 and no tensors: the metadata (41 bytes), padded to 32. */
    lp_gguf_writer_set_version(w, 2);
    lp_gguf_writer_destroy(&w);
    CHECK(w == NULL, "destroy clears the pointer");
    lp_gguf_writer_destroy(&w); /* safe on NULL */
    CHECK(lp_gguf_writer_new(&w) == 0, "new");
    lp_gguf_writer_set_version(w, 2);
    CHECK(lp_gguf_writer_add_u32(w, "a", 7) == 0, "add_u32");
    CHECK(lp_gguf_writer_write_mem(w, &buf, &len) == 0, "write_mem");
    CHECK(len == 64 && buf[4] == 2, "v2 header-only file: %zu bytes", len);
    free(buf);
    lp_gguf_writer_destroy(&w);
}

/* ---- every value type ---- */

static void test_round_trip(void)
{
    lp_gguf_writer_t *w;
    CHECK(lp_gguf_writer_new(&w) == 0, "new");
    CHECK(lp_gguf_writer_set_alignment(w, 64) == 0, "alignment");
    uint8_t u8 = 200;
    int8_t i8 = -100;
    uint16_t u16 = 60000;
    int16_t i16 = -30000;
    int32_t i32 = -2000000000;
    uint64_t u64 = 18000000000000000000ull;
    int64_t i64 = -9000000000000000000ll;
    double f64 = 2.718281828459045;
    CHECK(!lp_gguf_writer_add_scalar(w, "u8", LP_GGUF_UINT8, &u8), "u8");
    CHECK(!lp_gguf_writer_add_scalar(w, "i8", LP_GGUF_INT8, &i8), "i8");
    CHECK(!lp_gguf_writer_add_scalar(w, "u16", LP_GGUF_UINT16, &u16), "u16");
    CHECK(!lp_gguf_writer_add_scalar(w, "i16", LP_GGUF_INT16, &i16), "i16");
    CHECK(!lp_gguf_writer_add_u32(w, "u32", 4000000000u), "u32");
    CHECK(!lp_gguf_writer_add_i32(w, "i32", i32), "i32");
    CHECK(!lp_gguf_writer_add_f32(w, "f32", 0.125f), "f32");
    CHECK(!lp_gguf_writer_add_bool(w, "bool", true), "bool");
    CHECK(!lp_gguf_writer_add_cstr(w, "str", "h\xc3\xa9llo"), "str");
    CHECK(!lp_gguf_writer_add_scalar(w, "u64", LP_GGUF_UINT64, &u64), "u64");
    CHECK(!lp_gguf_writer_add_scalar(w, "i64", LP_GGUF_INT64, &i64), "i64");
    CHECK(!lp_gguf_writer_add_scalar(w, "f64", LP_GGUF_FLOAT64, &f64), "f64");
    CHECK(lp_gguf_writer_add_scalar(w, "bad", LP_GGUF_STRING, "x") == LP_ERR(EINVAL),
          "a string is not a scalar");
    CHECK(lp_gguf_writer_add_arr(w, "bad", LP_GGUF_ARRAY, NULL, 0) == LP_ERR(EINVAL),
          "no nested arrays");
    int16_t ai16[3] = {-1, 0, 1};
    float af32[4] = {0.5f, -1.5f, 3.0f, 1e-6f};
    uint8_t abool[2] = {1, 0};
    double af64[2] = {1e300, -2.5};
    lp_gguf_str_t astr[3] = {{"one", 3}, {"", 0}, {"thr\xe2\x82\xac", 6}};
    CHECK(!lp_gguf_writer_add_arr(w, "arr.i16", LP_GGUF_INT16, ai16, 3), "arr i16");
    CHECK(!lp_gguf_writer_add_arr(w, "arr.f32", LP_GGUF_FLOAT32, af32, 4), "arr f32");
    CHECK(!lp_gguf_writer_add_arr(w, "arr.bool", LP_GGUF_BOOL, abool, 2), "arr bool");
    CHECK(!lp_gguf_writer_add_arr(w, "arr.f64", LP_GGUF_FLOAT64, af64, 2), "arr f64");
    CHECK(!lp_gguf_writer_add_arr(w, "arr.empty", LP_GGUF_UINT32, NULL, 0), "arr empty");
    CHECK(!lp_gguf_writer_add_str_arr(w, "arr.str", astr, 3), "arr str");
    CHECK(lp_gguf_writer_n_kv(w) == 19, "n_kv %lld", (long long)lp_gguf_writer_n_kv(w));

    /* Tensors: one per family, so offsets must round up to 64 each time. */
    float f[64];
    for (int i = 0; i < 64; i++) f[i] = (float)i;
    uint8_t q8[2 * 34];
    for (size_t i = 0; i < sizeof(q8); i++) q8[i] = (uint8_t)(i * 7);
    int64_t ne_a[2] = {3, 5}, ne_b[2] = {64, 1}, ne_c[3] = {256, 1, 2}, ne_d[1] = {8};
    CHECK(!lp_gguf_writer_add_tensor(w, "a", LP_TYPE_F32, 2, ne_a, f), "tensor a");
    CHECK(!lp_gguf_writer_add_tensor(w, "b", LP_TYPE_Q8_0, 2, ne_b, q8), "tensor b");
    CHECK(!lp_gguf_writer_add_tensor(w, "c", LP_TYPE_Q4_K, 3, ne_c, NULL), "tensor c");
    CHECK(!lp_gguf_writer_add_tensor(w, "d", LP_TYPE_F16, 1, ne_d, f), "tensor d");
    CHECK(lp_gguf_writer_add_tensor(w, "e", LP_TYPE_Q4_0, 1, ne_a, f) == LP_ERR(EINVAL),
          "3 elements are not a Q4_0 row");
    CHECK(lp_gguf_writer_add_tensor(w, "e", 99, 1, ne_d, f) == LP_ERR(EINVAL), "type 99");
    CHECK(lp_gguf_writer_set_alignment(w, 128) == LP_ERR(EINVAL), "alignment after tensors");
    CHECK(lp_gguf_writer_n_tensors(w) == 4, "n_tensors");

    uint8_t *buf;
    size_t len;
    CHECK(lp_gguf_writer_write_mem(w, &buf, &len) == 0, "write: %s", lp_error_msg());
    lp_gguf_writer_destroy(&w);
    lp_gguf_t *g;
    int rc = lp_gguf_open_mem(buf, len, &g);
    CHECK(rc == 0, "read back: %s", lp_error_msg());
    if (rc) {
        free(buf);
        return;
    }
    CHECK(lp_gguf_version(g) == 3 && lp_gguf_alignment(g) == 64, "version/alignment");
    CHECK(lp_gguf_n_kv(g) == 19, "n_kv");
    CHECK(lp_gguf_map_huge(g) == 0, "a caller's buffer is not remapped");
    const lp_gguf_kv_t *kv;
    kv = lp_gguf_find(g, "u8");
    CHECK(kv && kv->type == LP_GGUF_UINT8 && lp_gguf_num_at(kv->type, kv->data, 0) == 200, "u8");
    kv = lp_gguf_find(g, "i8");
    CHECK(kv && kv->type == LP_GGUF_INT8 && lp_gguf_num_at(kv->type, kv->data, 0) == -100, "i8");
    kv = lp_gguf_find(g, "u16");
    CHECK(kv && kv->type == LP_GGUF_UINT16 && lp_gguf_num_at(kv->type, kv->data, 0) == 60000,
          "u16");
    kv = lp_gguf_find(g, "i16");
    CHECK(kv && kv->type == LP_GGUF_INT16 && lp_gguf_num_at(kv->type, kv->data, 0) == -30000,
          "i16");
    uint32_t v32;
    CHECK(lp_gguf_get_u32(g, "u32", &v32) == 0 && v32 == 4000000000u, "u32");
    int64_t v64;
    CHECK(lp_gguf_get_i64(g, "i32", &v64) == 0 && v64 == -2000000000, "i32");
    CHECK(lp_gguf_get_i64(g, "i64", &v64) == 0 && v64 == i64, "i64");
    kv = lp_gguf_find(g, "u64");
    uint64_t got64 = 0;
    if (kv) memcpy(&got64, kv->data, 8);
    CHECK(kv && kv->type == LP_GGUF_UINT64 && got64 == u64, "u64");
    float vf;
    CHECK(lp_gguf_get_f32(g, "f32", &vf) == 0 && vf == 0.125f, "f32");
    kv = lp_gguf_find(g, "f64");
    CHECK(kv && kv->type == LP_GGUF_FLOAT64 && lp_gguf_num_at(kv->type, kv->data, 0) == f64,
          "f64");
    bool vb;
    CHECK(lp_gguf_get_bool(g, "bool", &vb) == 0 && vb, "bool");
    lp_gguf_str_t s;
    CHECK(lp_gguf_get_str(g, "str", &s) == 0 && s.len == 6 && !memcmp(s.ptr, "h\xc3\xa9llo", 6),
          "str");
    const void *d;
    uint64_t n;
    CHECK(lp_gguf_get_arr(g, "arr.i16", LP_GGUF_INT16, &d, &n) == 0 && n == 3 &&
              lp_gguf_num_at(LP_GGUF_INT16, d, 0) == -1 &&
              lp_gguf_num_at(LP_GGUF_INT16, d, 2) == 1, "arr.i16");
    CHECK(lp_gguf_get_arr(g, "arr.f32", LP_GGUF_FLOAT32, &d, &n) == 0 && n == 4 &&
              !memcmp(d, af32, sizeof(af32)), "arr.f32");
    CHECK(lp_gguf_get_arr(g, "arr.bool", LP_GGUF_BOOL, &d, &n) == 0 && n == 2 &&
              !memcmp(d, abool, 2), "arr.bool");
    CHECK(lp_gguf_get_arr(g, "arr.f64", LP_GGUF_FLOAT64, &d, &n) == 0 && n == 2 &&
              !memcmp(d, af64, sizeof(af64)), "arr.f64");
    CHECK(lp_gguf_get_arr(g, "arr.empty", LP_GGUF_UINT32, &d, &n) == 0 && n == 0, "arr.empty");
    const lp_gguf_str_t *strs;
    CHECK(lp_gguf_get_str_arr(g, "arr.str", &strs, &n) == 0 && n == 3, "arr.str");
    if (n == 3)
        for (int i = 0; i < 3; i++)
            CHECK(strs[i].len == astr[i].len && !memcmp(strs[i].ptr, astr[i].ptr, astr[i].len),
                  "arr.str[%d]", i);

    CHECK(lp_gguf_n_tensors(g) == 4, "n_tensors");
    const lp_gguf_tensor_t *t;
    t = lp_gguf_find_tensor(g, "a");
    CHECK(t && t->type == LP_TYPE_F32 && t->n_dims == 2 && t->ne[0] == 3 && t->ne[1] == 5 &&
              t->offset == 0 && t->nbytes == 60 && !memcmp(t->data, f, 60), "tensor a");
    t = lp_gguf_find_tensor(g, "b");
    CHECK(t && t->type == LP_TYPE_Q8_0 && t->offset == 64 && t->nbytes == 68 &&
              !memcmp(t->data, q8, 68), "tensor b");
    t = lp_gguf_find_tensor(g, "c");
    CHECK(t && t->type == LP_TYPE_Q4_K && t->n_dims == 3 && t->ne[2] == 2 && t->offset == 192 &&
              t->nbytes == 288, "tensor c");
    if (t) {
        int zero = 1;
        for (size_t i = 0; i < t->nbytes; i++) zero &= ((const uint8_t *)t->data)[i] == 0;
        CHECK(zero, "NULL data writes zeros");
    }
    t = lp_gguf_find_tensor(g, "d");
    CHECK(t && t->type == LP_TYPE_F16 && t->offset == 512 && t->nbytes == 16, "tensor d");
    /* The data section starts aligned and the file ends on a padded tensor. */
    CHECK(t && ((const uint8_t *)t->data - buf) % 64 == 0, "data section aligned");
    CHECK(len % 64 == 0 && t && (const uint8_t *)t->data - buf + 64 == (ptrdiff_t)len,
          "last tensor padded to the alignment");
    lp_gguf_destroy(&g);
    free(buf);
}

/* ---- row callbacks, files ---- */

typedef struct rows_ctx {
    int64_t ne0;
    int calls;
    int64_t next_row;
} rows_ctx_t;

static int fill_rows(void *ctx, int64_t row0, int64_t n_rows, void *dst)
{
    rows_ctx_t *c = ctx;
    c->calls++;
    if (row0 != c->next_row) return lp_error_set(LP_ERR(EINVAL), "rows out of order");
    c->next_row = row0 + n_rows;
    float *out = dst;
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t i = 0; i < c->ne0; i++) out[r * c->ne0 + i] = (float)((row0 + r) * 3 + i);
    return 0;
}

static int fail_rows(void *ctx, int64_t row0, int64_t n_rows, void *dst)
{
    (void)ctx, (void)row0, (void)n_rows, (void)dst;
    return lp_error_set(LP_ERR(ECANCELED), "stop here");
}

static void test_callback_and_file(void)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/gguf-write-test-%d.gguf", tmp_dir, (int)getpid());
    lp_gguf_writer_t *w;
    CHECK(lp_gguf_writer_new(&w) == 0, "new");
    /* 1000 x 3000 F32 = 12 MB: several callback chunks. */
    rows_ctx_t ctx = {1000, 0, 0};
    int64_t ne[2] = {1000, 3000};
    CHECK(!lp_gguf_writer_add_tensor_cb(w, "big", LP_TYPE_F32, 2, ne, fill_rows, &ctx), "cb");
    CHECK(lp_gguf_writer_write_file(w, path) == 0, "write_file: %s", lp_error_msg());
    CHECK(ctx.calls > 1 && ctx.next_row == 3000, "%d calls, up to row %lld", ctx.calls,
          (long long)ctx.next_row);
    lp_gguf_t *g;
    int rc = lp_gguf_open(path, &g);
    CHECK(rc == 0, "open: %s", lp_error_msg());
    if (!rc) {
        const lp_gguf_tensor_t *t = lp_gguf_find_tensor(g, "big");
        int ok = t && t->nbytes == 12000000;
        for (int64_t r = 0; ok && r < 3000; r += 7)
            for (int64_t i = 0; i < 1000; i += 13)
                ok &= ((const float *)t->data)[r * 1000 + i] == (float)(r * 3 + i);
        CHECK(ok, "callback rows read back");
        /* Huge pages (when the kernel gives them, after dropping the cached
         * small pages) must leave every byte as it was. */
        int huge = lp_gguf_map_huge(g);
        CHECK(huge == 0 || huge == 1, "map_huge returned %d", huge);
        for (int64_t r = 0; ok && r < 3000; r += 7)
            for (int64_t i = 0; i < 1000; i += 13)
                ok &= ((const float *)t->data)[r * 1000 + i] == (float)(r * 3 + i);
        CHECK(ok, "rows read back after map_huge (%d)", huge);
        lp_gguf_destroy(&g);
    }
    lp_gguf_writer_destroy(&w);

    /* A failing callback fails the write and leaves no file behind. */
    CHECK(lp_gguf_writer_new(&w) == 0, "new");
    CHECK(!lp_gguf_writer_add_tensor_cb(w, "x", LP_TYPE_F32, 2, ne, fail_rows, NULL), "cb");
    rc = lp_gguf_writer_write_file(w, path);
    CHECK(rc == LP_ERR(ECANCELED) && strstr(lp_error_msg(), "stop here"), "rc %d: %s", rc,
          lp_error_msg());
    CHECK(access(path, F_OK) != 0, "failed write removed %s", path);
    lp_gguf_writer_destroy(&w);

    /* An unwritable path names the path. */
    CHECK(lp_gguf_writer_new(&w) == 0, "new");
    rc = lp_gguf_writer_write_file(w, "/nonexistent-dir/x.gguf");
    CHECK(rc < 0 && strstr(lp_error_msg(), "/nonexistent-dir/x.gguf"), "%s", lp_error_msg());
    lp_gguf_writer_destroy(&w);
}

/* ---- copying a real file's metadata ---- */

static void test_copy_real(const char *name)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/vocab/%s", shared_dir, name);
    lp_gguf_t *src;
    int rc = lp_gguf_open(path, &src);
    CHECK(rc == 0, "open %s: %s", path, lp_error_msg());
    if (rc) return;
    lp_gguf_writer_t *w;
    CHECK(lp_gguf_writer_new(&w) == 0, "new");
    for (int64_t i = 0; i < lp_gguf_n_kv(src); i++)
        CHECK(lp_gguf_writer_add_kv(w, lp_gguf_kv_at(src, i)) == 0, "add_kv %lld", (long long)i);
    uint8_t *buf;
    size_t len;
    CHECK(lp_gguf_writer_write_mem(w, &buf, &len) == 0, "write");
    lp_gguf_writer_destroy(&w);
    /* A vocab-only file has no tensors, so the copy is byte for byte the same,
     * up to the padding to 32 that current ggml writes after the metadata
     * (older files, such as the llama-spm vocab, lack it). */
    size_t slen;
    uint8_t *sbuf = test_load(path, &slen);
    CHECK(len % 32 == 0 && len >= slen && len - slen < 32, "%s: copy is %zu bytes, source %zu",
          name, len, slen);
    CHECK(len >= slen && !memcmp(buf, sbuf, slen), "%s: copy differs from the source", name);
    int zero = 1;
    for (size_t i = slen; i < len; i++) zero &= buf[i] == 0;
    CHECK(zero, "%s: padding is not zeros", name);
    free(sbuf);
    free(buf);
    lp_gguf_destroy(&src);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s SHARED_DIR TMPDIR\n", argv[0]);
        return 2;
    }
    shared_dir = argv[1];
    tmp_dir = argv[2];
    test_exact_bytes();
    test_round_trip();
    test_callback_and_file();
    test_copy_real("ggml-vocab-llama-spm.gguf");
    test_copy_real("ggml-vocab-qwen2.gguf");
    return CHECK_DONE();
}
