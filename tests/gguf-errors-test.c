/* gguf-errors-test.c - hand-built broken GGUF files, one per error the
 * reader names: each must fail with a negative code and a message that names
 * the key or tensor at fault.  usage: gguf-errors-test TMPDIR */
#include "error.h"
#include "ggml-type.h"
#include "gguf-write.h"
#include "gguf.h"
#include "gguf-test-util.h"

#include <unistd.h>

static const char *tmp_dir;

/* What to break in the base file. */
typedef struct spec {
    uint32_t version;             /* 0: default */
    const char *name_val;         /* general.name value (NULL: "tiny") */
    size_t name_len;
    int dup_key, dup_tensor;
    int align_kind;               /* 0 none, 1 u32 value, 2 a string */
    uint32_t align_val;
    int64_t forge_idx;            /* -1: none */
    uint64_t forge_off;
    int extra;                    /* add a raw tensor "extra" of extra_type */
    uint32_t extra_type;
    int64_t extra_ne0;
    const char *extra_name;       /* name of that tensor (NULL: "extra") */
    size_t extra_name_len;
    uint32_t extra_dims;
    const char *bad_token;        /* replaces token 1 when set */
    size_t bad_token_len;
    int bad_bool;
} spec_t;

/* The base: four keys (architecture, name, a bool, a 3-token string array, a
 * u32 array) and three tensors: F32 4x3, Q8_0 32x2, F32 4. */
static uint8_t *build(const spec_t *s, size_t *len)
{
    lp_gguf_writer_t *w;
    if (lp_gguf_writer_new(&w)) exit(1);
    if (s->version) lp_gguf_writer_set_version(w, s->version);
    if (s->align_kind == 1 && lp_gguf_writer_set_alignment(w, s->align_val))
        lp_gguf_writer_add_u32(w, "general.alignment", s->align_val); /* not a power of 2 */
    if (s->align_kind == 2) lp_gguf_writer_add_cstr(w, "general.alignment", "32");
    lp_gguf_writer_add_cstr(w, "general.architecture", "llama");
    if (s->name_val) lp_gguf_writer_add_str(w, "general.name", s->name_val, s->name_len);
    else lp_gguf_writer_add_cstr(w, "general.name", "tiny");
    uint8_t b = s->bad_bool ? 2 : 1;
    lp_gguf_writer_add_scalar(w, "tokenizer.ggml.add_bos_token", LP_GGUF_BOOL, &b);
    lp_gguf_str_t toks[3] = {{"<s>", 3}, {"a", 1}, {"b", 1}};
    if (s->bad_token) toks[1] = (lp_gguf_str_t){s->bad_token, s->bad_token_len};
    lp_gguf_writer_add_str_arr(w, "tokenizer.ggml.tokens", toks, 3);
    uint32_t ids[4] = {1, 2, 3, 4};
    lp_gguf_writer_add_arr(w, "test.ids", LP_GGUF_UINT32, ids, 4);
    if (s->dup_key) lp_gguf_writer_add_cstr(w, "general.name", "again");

    static float f[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    int64_t ne_e[2] = {4, 3}, ne_q[2] = {32, 2}, ne_n[1] = {4};
    lp_gguf_writer_add_tensor(w, "token_embd.weight", LP_TYPE_F32, 2, ne_e, f);
    lp_gguf_writer_add_tensor(w, "blk.0.attn_q.weight", LP_TYPE_Q8_0, 2, ne_q, NULL);
    lp_gguf_writer_add_tensor(w, s->dup_tensor ? "token_embd.weight" : "output_norm.weight",
                              LP_TYPE_F32, 1, ne_n, f);
    if (s->extra) {
        int64_t ne[5] = {s->extra_ne0, 1, 1, 1, 1};
        const char *name = s->extra_name ? s->extra_name : "extra";
        size_t nl = s->extra_name ? s->extra_name_len : 5;
        char nbuf[64];
        memcpy(nbuf, name, nl);
        nbuf[nl] = '\0';
        /* Names with a NUL cannot pass through a C string: write a stand-in
         * of the same length and patch it below. */
        for (size_t i = 0; i < nl; i++)
            if (!nbuf[i]) nbuf[i] = '#';
        lp_gguf_writer_add_tensor_raw(w, nbuf, s->extra_type, s->extra_dims ? s->extra_dims : 1,
                                      ne, NULL, 64);
    }
    if (s->forge_idx >= 0) lp_gguf_writer_forge_offset(w, s->forge_idx, s->forge_off);
    uint8_t *buf;
    if (lp_gguf_writer_write_mem(w, &buf, len)) {
        fprintf(stderr, "write: %s\n", lp_error_msg());
        exit(1);
    }
    lp_gguf_writer_destroy(&w);
    if (s->extra_name)
        for (size_t i = 0; i + 8 + s->extra_name_len <= *len; i++) {
            uint64_t n;
            memcpy(&n, buf + i, 8);
            if (n != s->extra_name_len) continue;
            int match = 1;
            for (size_t k = 0; k < n && match; k++)
                match = buf[i + 8 + k] == (s->extra_name[k] ? (uint8_t)s->extra_name[k] : '#');
            if (match) {
                memcpy(buf + i + 8, s->extra_name, n);
                break;
            }
        }
    return buf;
}

static spec_t base(void)
{
    spec_t s;
    memset(&s, 0, sizeof(s));
    s.forge_idx = -1;
    return s;
}

/* Parse an exact-size copy of buf[0, len) and expect failure naming `a`
 * and `b` (either may be NULL). */
static void expect_err(const char *what, const uint8_t *buf, size_t len, const char *a,
                       const char *b)
{
    uint8_t *copy = malloc(len ? len : 1);
    memcpy(copy, buf, len);
    lp_gguf_t *g = (lp_gguf_t *)1;
    lp_error_clear();
    int rc = lp_gguf_open_mem(copy, len, &g);
    const char *msg = lp_error_msg();
    if (!msg) msg = "";
    CHECK(rc < 0, "%s: parsed (rc %d)", what, rc);
    CHECK(g == NULL, "%s: output not cleared", what);
    CHECK(*msg, "%s: no message", what);
    CHECK(!a || strstr(msg, a), "%s: message '%s' lacks '%s'", what, msg, a ? a : "");
    CHECK(!b || strstr(msg, b), "%s: message '%s' lacks '%s'", what, msg, b ? b : "");
    if (rc == 0) lp_gguf_destroy(&g);
    free(copy);
}

static void expect_spec_err(const char *what, const spec_t *s, const char *a, const char *b)
{
    size_t len;
    uint8_t *buf = build(s, &len);
    expect_err(what, buf, len, a, b);
    free(buf);
}

static void test_valid_base(void)
{
    spec_t s = base();
    size_t len;
    uint8_t *buf = build(&s, &len);
    lp_gguf_t *g;
    int rc = lp_gguf_open_mem(buf, len, &g);
    CHECK(rc == 0, "base file: %s", lp_error_msg());
    if (!rc) {
        CHECK(lp_gguf_n_tensors(g) == 3 && lp_gguf_n_kv(g) == 5, "base file contents");
        lp_gguf_destroy(&g);
    }
    /* The same with an explicit valid alignment and a version-2 header. */
    s.align_kind = 1;
    s.align_val = 64;
    s.version = 2;
    free(buf);
    buf = build(&s, &len);
    rc = lp_gguf_open_mem(buf, len, &g);
    CHECK(rc == 0, "v2, aligned to 64: %s", lp_error_msg());
    if (!rc) {
        CHECK(lp_gguf_alignment(g) == 64 && lp_gguf_version(g) == 2, "alignment 64, v2");
        lp_gguf_destroy(&g);
    }
    free(buf);
}

static void test_truncated(void)
{
    spec_t s = base();
    size_t len;
    uint8_t *buf = build(&s, &len);
    expect_err("3 bytes", buf, 3, "truncated", NULL);
    expect_err("empty", buf, 0, "truncated", NULL);
    expect_err("header cut", buf, 20, "truncated", "header");
    /* With the tensor count cut too, the header's plausibility check lets the
     * reader reach the cut key. */
    test_put_u64(buf + 8, 0);
    size_t at = test_find_key(buf, len, "general.name");
    /* key, type (4), string length (8), then "tiny": cut inside "tiny". */
    expect_err("value of general.name cut", buf, at + 4 + 8 + 2, "past the end", "general.name");
    expect_err("type of general.name cut", buf, at + 2, "truncated", "general.name");
    at = test_find_key(buf, len, "tokenizer.ggml.tokens");
    expect_err("string array cut", buf, at + 4 + 4 + 8 + 5, "tokenizer.ggml.tokens", NULL);
    test_put_u64(buf + 8, 3);
    at = test_find_key(buf, len, "blk.0.attn_q.weight");
    expect_err("tensor info cut", buf, at + 6, "truncated", "blk.0.attn_q.weight");
    /* Cut inside the last tensor's data: it runs past the end. */
    expect_err("data cut", buf, len - 40, "output_norm.weight", "past the end");

    /* Through lp_gguf_open: a 5-byte file, and a missing one. */
    char path[512];
    snprintf(path, sizeof(path), "%s/gguf-errors-test-%d.gguf", tmp_dir, (int)getpid());
    FILE *f = fopen(path, "wb");
    fwrite(buf, 1, 5, f);
    fclose(f);
    lp_gguf_t *g;
    int rc = lp_gguf_open(path, &g);
    CHECK(rc < 0 && strstr(lp_error_msg(), "truncated") && strstr(lp_error_msg(), path),
          "5-byte file: %s", lp_error_msg());
    f = fopen(path, "wb");
    fwrite(buf, 1, len - 40, f);
    fclose(f);
    rc = lp_gguf_open(path, &g);
    CHECK(rc < 0 && strstr(lp_error_msg(), "output_norm.weight") && strstr(lp_error_msg(), path),
          "file cut in the data: %s", lp_error_msg());
    unlink(path);
    rc = lp_gguf_open(path, &g);
    CHECK(rc == LP_ERR(ENOENT) && strstr(lp_error_msg(), path), "missing file: %s",
          lp_error_msg());
    free(buf);
}

static void test_header(void)
{
    spec_t s = base();
    size_t len;
    uint8_t *buf = build(&s, &len);
    buf[0] = 'X';
    expect_err("bad magic", buf, len, "bad magic", NULL);
    buf[0] = 'G';
    uint64_t saved = test_get_u64(buf + 16);
    test_put_u64(buf + 16, 1ull << 40);
    expect_err("n_kv inflated", buf, len, "key/value pairs", NULL);
    test_put_u64(buf + 16, UINT64_MAX);
    expect_err("n_kv max", buf, len, "key/value pairs", NULL);
    test_put_u64(buf + 16, saved);
    test_put_u64(buf + 8, 1ull << 50);
    expect_err("n_tensors inflated", buf, len, "tensors", NULL);
    test_put_u64(buf + 8, 3);
    free(buf);

    uint32_t versions[] = {0, 1, 4, 0x03000000};
    for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
        s = base();
        s.version = versions[i];
        if (!s.version) { /* 0 means "default" in spec_t: patch it instead */
            buf = build(&s, &len);
            test_put_u32(buf + 4, 0);
            expect_err("version 0", buf, len, "version 0", "not supported");
            free(buf);
            continue;
        }
        char what[32], want[32];
        snprintf(what, sizeof(what), "version %u", versions[i]);
        snprintf(want, sizeof(want), "version %u", versions[i]);
        expect_spec_err(what, &s, want, "not supported");
    }
}

static void test_keys(void)
{
    spec_t s = base();
    s.dup_key = 1;
    expect_spec_err("duplicate key", &s, "duplicate key", "general.name");

    s = base();
    s.name_val = "ab\xc3\x28";
    s.name_len = 4;
    expect_spec_err("invalid UTF-8 value", &s, "general.name", "UTF-8");
    s.name_val = "\xc0\xaf"; /* overlong '/' */
    s.name_len = 2;
    expect_spec_err("overlong UTF-8", &s, "general.name", "UTF-8");
    s.name_val = "\xed\xa0\x80"; /* a surrogate */
    s.name_len = 3;
    expect_spec_err("surrogate", &s, "general.name", "UTF-8");
    s.name_val = "\xf4\x90\x80\x80"; /* past U+10FFFF */
    s.name_len = 4;
    expect_spec_err("beyond U+10FFFF", &s, "general.name", "UTF-8");
    s.name_val = "\xe2\x82"; /* cut sequence */
    s.name_len = 2;
    expect_spec_err("cut sequence", &s, "general.name", "UTF-8");

    s = base();
    s.bad_token = "\xff";
    s.bad_token_len = 1;
    expect_spec_err("invalid UTF-8 in a string array", &s, "tokenizer.ggml.tokens", "UTF-8");

    s = base();
    s.bad_bool = 1;
    expect_spec_err("bool 2", &s, "tokenizer.ggml.add_bos_token", "bool");

    size_t len;
    s = base();
    uint8_t *buf = build(&s, &len);
    size_t at = test_find_key(buf, len, "tokenizer.ggml.tokens");
    uint64_t saved = test_get_u64(buf + at + 8);
    test_put_u64(buf + at + 8, 1ull << 40);
    expect_err("string array count", buf, len, "tokenizer.ggml.tokens", "array count");
    test_put_u64(buf + at + 8, UINT64_MAX);
    expect_err("string array count max", buf, len, "tokenizer.ggml.tokens", "array count");
    test_put_u64(buf + at + 8, saved);
    test_put_u32(buf + at + 4, LP_GGUF_ARRAY);
    expect_err("nested array", buf, len, "tokenizer.ggml.tokens", "element type");
    test_put_u32(buf + at + 4, 13);
    expect_err("unknown element type", buf, len, "tokenizer.ggml.tokens", "element type");
    test_put_u32(buf + at + 4, LP_GGUF_STRING);
    test_put_u32(buf + at, 77);
    expect_err("unknown value type", buf, len, "tokenizer.ggml.tokens", "value type 77");
    test_put_u32(buf + at, LP_GGUF_ARRAY);

    at = test_find_key(buf, len, "test.ids");
    test_put_u64(buf + at + 8, 1ull << 61);
    expect_err("u32 array count", buf, len, "test.ids", "array count");
    test_put_u64(buf + at + 8, 4);

    at = test_find_key(buf, len, "general.name");
    test_put_u64(buf + at + 4, len);
    expect_err("string length past the end", buf, len, "general.name", "string length");
    test_put_u64(buf + at + 4, UINT64_MAX);
    expect_err("string length max", buf, len, "general.name", "string length");
    test_put_u64(buf + at + 4, 4);

    /* A key whose own bytes are broken is named by its index. */
    at = test_find_key(buf, len, "general.architecture");
    buf[at - 3] = 0xff;
    expect_err("key not UTF-8", buf, len, "key #0", "UTF-8");
    buf[at - 3] = '\0';
    expect_err("key holds NUL", buf, len, "key #0", "NUL");
    free(buf);
}

static void test_alignment(void)
{
    uint32_t bad[] = {3, 0, 48, 1u << 21};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        spec_t s = base();
        s.align_kind = 1;
        s.align_val = bad[i];
        char what[48];
        snprintf(what, sizeof(what), "alignment %u", bad[i]);
        expect_spec_err(what, &s, "general.alignment", "power of two");
    }
    spec_t s = base();
    s.align_kind = 2;
    expect_spec_err("alignment is a string", &s, "general.alignment", "integer");
}

static void test_tensors(void)
{
    spec_t s = base();
    s.dup_tensor = 1;
    expect_spec_err("duplicate tensor", &s, "duplicate tensor", "token_embd.weight");

    s = base();
    s.extra = 1;
    s.extra_type = 99;
    s.extra_ne0 = 16;
    expect_spec_err("unknown tensor type", &s, "extra", "unknown type 99");
    s.extra_type = 4; /* Q4_2: removed from ggml long ago */
    expect_spec_err("removed tensor type", &s, "extra", "unknown type 4");
    s.extra_type = LP_TYPE_Q8_0;
    s.extra_ne0 = 33;
    expect_spec_err("row not a whole block", &s, "extra", "block size");
    s.extra_type = LP_TYPE_F32;
    s.extra_ne0 = 0;
    expect_spec_err("zero dimension", &s, "extra", "dimension 0");
    s.extra_ne0 = 4;
    s.extra_name = "bad\xff";
    s.extra_name_len = 4;
    expect_spec_err("tensor name not UTF-8", &s, "tensor #3", "UTF-8");
    s.extra_name = "a\0b";
    s.extra_name_len = 3;
    expect_spec_err("tensor name holds NUL", &s, "tensor #3", "NUL");

    /* Offsets: the second tensor moved onto the first (aligned, overlapping)
     * and off the alignment; the last one past the end of the file. */
    s = base();
    s.forge_idx = 1;
    s.forge_off = 32;
    expect_spec_err("overlapping tensors", &s, "token_embd.weight", "overlaps");
    {
        size_t len;
        uint8_t *buf = build(&s, &len);
        expect_err("overlap names both", buf, len, "blk.0.attn_q.weight", NULL);
        free(buf);
    }
    s.forge_off = 68;
    expect_spec_err("misaligned offset", &s, "blk.0.attn_q.weight", "not aligned");
    s.forge_idx = 2;
    s.forge_off = 1ull << 40;
    expect_spec_err("offset past the end", &s, "output_norm.weight", "past the end");
    s.forge_off = UINT64_MAX - 31;
    expect_spec_err("offset near 2^64", &s, "output_norm.weight", NULL);

    /* Inflated dimensions of a real tensor. */
    size_t len;
    s = base();
    uint8_t *buf = build(&s, &len);
    size_t at = test_find_key(buf, len, "token_embd.weight"); /* at n_dims */
    test_put_u64(buf + at + 4 + 8, 1ull << 40);
    expect_err("dimension inflated", buf, len, "token_embd.weight", "past the end");
    test_put_u64(buf + at + 4 + 8, UINT64_MAX);
    expect_err("dimension max", buf, len, "token_embd.weight", "dimension 1");
    test_put_u64(buf + at + 4 + 8, 3);
    test_put_u32(buf + at, 5);
    expect_err("five dimensions", buf, len, "token_embd.weight", "5 dimensions");
    test_put_u32(buf + at, 0);
    expect_err("no dimensions", buf, len, "token_embd.weight", "0 dimensions");
    test_put_u32(buf + at, 9);
    expect_err("n_dims inflated", buf, len, "token_embd.weight", "9 dimensions");
    free(buf);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s TMPDIR\n", argv[0]);
        return 2;
    }
    tmp_dir = argv[1];
    test_valid_base();
    test_truncated();
    test_header();
    test_keys();
    test_alignment();
    test_tensors();
    return CHECK_DONE();
}
