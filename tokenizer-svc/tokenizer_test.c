/* tokenizer_test.c - round trips, the incremental decoder, hostile bytes,
 * special tokens, BOS/EOS and error reporting, on the shared vocabularies.
 * usage: tokenizer-test SHARED_DIR */
#include "tokenizer.h"
#include "chat.h"
#include "fileio.h"
#include "tok-internal.h"
#include "unicode.h"

#include "../tests/check.h"
#include "error.h"
#include "gguf-write.h"
#include "gguf.h"
#include "log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *shared;

static lp_tokenizer_t *open_tok(const char *rel)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", shared, rel);
    lp_tokenizer_t *t = NULL;
    CHECK_RC(lp_tokenizer_new(path, &t), 0);
    return t;
}

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint32_t rnd(void) { return (uint32_t)(lp_check_rand(&rng) >> 16); }

/* Decode ids one at a time and all at once; both must agree. */
static char *decode_both(const lp_tokenizer_t *t, const int32_t *ids, size_t n, bool special,
                         size_t *len, bool *agree)
{
    char *whole;
    size_t wl;
    CHECK_RC(lp_detokenize(t, ids, n, special, &whole, &wl), 0);
    lp_detok_t *d;
    CHECK_RC(lp_detok_new(t, special, &d), 0);
    char *inc = malloc(wl + 16);
    size_t il = 0;
    const char *p;
    size_t k;
    *agree = true;
    for (size_t i = 0; i < n; i++) {
        CHECK_RC(lp_detok_feed(d, ids[i], &p, &k), 0);
        /* never a broken sequence on the way */
        if (k && !lp_utf8_valid(p, k)) *agree = false;
        if (il + k > wl) *agree = false;
        else memcpy(inc + il, p, k);
        il += k;
    }
    CHECK_RC(lp_detok_flush(d, &p, &k), 0);
    if (il + k > wl) *agree = false;
    else memcpy(inc + il, p, k);
    il += k;
    if (il != wl || memcmp(inc, whole, wl)) *agree = false;
    free(inc);
    lp_detok_destroy(&d);
    *len = wl;
    return whole;
}

static void check_roundtrip(const lp_tokenizer_t *t, const char *text, size_t len, const char *what)
{
    int32_t *ids;
    size_t n;
    CHECK_RC(lp_tokenize_alloc(t, text, len, false, false, &ids, &n), 0);
    bool agree;
    size_t ol;
    char *out = decode_both(t, ids, n, false, &ol, &agree);
    if (!agree) fprintf(stderr, "%s: incremental and whole decoding differ\n", what);
    CHECK(agree);
    if (ol != len || memcmp(out, text, len)) {
        fprintf(stderr, "%s (%s): round trip differs (%zu -> %zu tokens -> %zu bytes)\n", what,
                lp_tokenizer_pre(t), len, n, ol);
        CHECK(!"round trip");
    }
    free(out);
    free(ids);
}

/* ---- naive references: rescan all adjacent pairs before every merge ---- */

typedef struct nsym {
    size_t start, n;
    uint32_t sid;
} nsym_t;

/* SPM as llama.cpp describes it: best score first, leftmost on ties. */
static void naive_spm(const lp_tokenizer_t *t, const char *text, size_t len, lp__ivec_t *out)
{
    nsym_t *s = malloc((len + 1) * sizeof(*s));
    size_t n = 0;
    for (size_t off = 0; off < len; n++) {
        size_t l = lp__utf8_len((uint8_t)text[off]);
        if (l > len - off) l = len - off;
        s[n] = (nsym_t){off, l, 0};
        off += l;
    }
    for (;;) {
        size_t best = SIZE_MAX;
        float best_score = 0;
        for (size_t i = 0; i + 1 < n; i++) {
            int64_t sid = lp__strtab_find(&t->strs, text + s[i].start, s[i].n + s[i + 1].n);
            if (sid < 0 || t->strs.tok[sid] < 0) continue;
            float sc = t->scores[t->strs.tok[sid]];
            if (best == SIZE_MAX || sc > best_score) best = i, best_score = sc;
        }
        if (best == SIZE_MAX) break;
        s[best].n += s[best + 1].n;
        memmove(s + best + 1, s + best + 2, (n - best - 2) * sizeof(*s));
        n--;
    }
    for (size_t i = 0; i < n; i++) {
        int64_t sid = lp__strtab_find(&t->strs, text + s[i].start, s[i].n);
        if (sid >= 0 && t->strs.tok[sid] >= 0) lp__ivec_push(out, t->strs.tok[sid]);
        else
            for (size_t j = 0; j < s[i].n; j++) lp__ivec_push(out, t->byte_tok[(uint8_t)text[s[i].start + j]]);
    }
    free(s);
}

/* BPE for one word: lowest merge rank first, leftmost on ties. */
static void naive_bpe(const lp_tokenizer_t *t, const char *w, size_t len, lp__ivec_t *out)
{
    nsym_t *s = malloc((len + 1) * sizeof(*s));
    size_t n = len;
    for (size_t i = 0; i < len; i++) s[i] = (nsym_t){i, 1, t->byte_sid[(uint8_t)w[i]]};
    for (;;) {
        size_t best = SIZE_MAX;
        int32_t best_rank = 0;
        uint32_t best_sid = 0;
        for (size_t i = 0; i + 1 < n; i++) {
            int32_t rank;
            uint32_t sid;
            if (!lp__pairmap_get(&t->merges, (uint64_t)s[i].sid << 32 | s[i + 1].sid, &rank, &sid)) continue;
            if (best == SIZE_MAX || rank < best_rank) best = i, best_rank = rank, best_sid = sid;
        }
        if (best == SIZE_MAX) break;
        s[best].n += s[best + 1].n;
        s[best].sid = best_sid;
        memmove(s + best + 1, s + best + 2, (n - best - 2) * sizeof(*s));
        n--;
    }
    for (size_t i = 0; i < n; i++) {
        if (t->strs.tok[s[i].sid] >= 0) {
            lp__ivec_push(out, t->strs.tok[s[i].sid]);
            continue;
        }
        size_t k;
        const char *p = lp__strtab_str(&t->strs, s[i].sid, &k);
        for (size_t j = 0; j < k; j++) {
            int64_t b = lp__strtab_find(&t->strs, p + j, 1);
            if (b >= 0 && t->strs.tok[b] >= 0) lp__ivec_push(out, t->strs.tok[b]);
        }
    }
    free(s);
}

static size_t random_utf8(char *buf, size_t max);

/* The heap-based merges (and SPM's chunking) against the naive loops, on
 * random text and on long words without spaces. */
static void test_against_naive(const lp_tokenizer_t *t)
{
    char buf[4096];
    for (int i = 0; i < 60; i++) {
        size_t n;
        if (i % 3 == 0) {
            /* a long word of few letters: many equal-rank overlapping pairs */
            n = 500 + rnd() % 2500;
            for (size_t k = 0; k < n; k++) buf[k] = "aaabnst"[rnd() % (i % 2 ? 7 : 2)];
        } else {
            n = random_utf8(buf, 1 + rnd() % 300);
        }
        lp__ivec_t fast = {0}, slow = {0};
        if (lp_tokenizer_kind(t) == LP_VOCAB_SPM) {
            /* escape like tokenize.c: spaces to U+2581, with the prefix */
            char *esc = malloc(3 * n + 3);
            size_t e = 0;
            memcpy(esc, "\xe2\x96\x81", 3), e = 3;
            for (size_t k = 0; k < n; k++) {
                if (buf[k] == ' ') memcpy(esc + e, "\xe2\x96\x81", 3), e += 3;
                else esc[e++] = buf[k];
            }
            CHECK_RC(lp__spm_encode(t, esc, e, &fast, NULL), 0);
            naive_spm(t, esc, e, &slow);
            free(esc);
        } else {
            CHECK_RC(lp__bpe_word(t, buf, n, &fast), 0);
            naive_bpe(t, buf, n, &slow);
        }
        bool same = fast.n == slow.n && (!fast.n || !memcmp(fast.v, slow.v, fast.n * sizeof(int32_t)));
        if (!same) fprintf(stderr, "%s: merges differ from the naive loop (case %d, %zu bytes)\n",
                           lp_tokenizer_pre(t), i, n);
        CHECK(same);
        free(fast.v);
        free(slow.v);
    }
}

/* Random valid UTF-8: a mix of ASCII, whitespace, Latin, CJK, emoji. */
static size_t random_utf8(char *buf, size_t max)
{
    size_t n = 0;
    while (n + 4 < max) {
        uint32_t r = rnd() % 10, cp;
        if (r < 4) cp = 0x20 + rnd() % 95;
        else if (r < 5) cp = "\n\t \r\v"[rnd() % 5];
        else if (r < 6) cp = 0xA0 + rnd() % 0x500;
        else if (r < 7) cp = 0x3000 + rnd() % 0x6000;
        else if (r < 8) cp = 0x1F300 + rnd() % 0x300;
        else if (r < 9) cp = "0123456789'"[rnd() % 11];
        else cp = 0x80 + rnd() % 0x10F000;
        if ((cp >= 0xD800 && cp <= 0xDFFF) || cp == 0x2581) continue; /* SPM reads U+2581 as a space */
        char tmp[4];
        size_t k;
        if (cp < 0x80) tmp[0] = (char)cp, k = 1;
        else if (cp < 0x800) tmp[0] = (char)(0xC0 | cp >> 6), tmp[1] = (char)(0x80 | (cp & 63)), k = 2;
        else if (cp < 0x10000)
            tmp[0] = (char)(0xE0 | cp >> 12), tmp[1] = (char)(0x80 | ((cp >> 6) & 63)),
            tmp[2] = (char)(0x80 | (cp & 63)), k = 3;
        else
            tmp[0] = (char)(0xF0 | cp >> 18), tmp[1] = (char)(0x80 | ((cp >> 12) & 63)),
            tmp[2] = (char)(0x80 | ((cp >> 6) & 63)), tmp[3] = (char)(0x80 | (cp & 63)), k = 4;
        memcpy(buf + n, tmp, k);
        n += k;
    }
    return n;
}

static void test_roundtrips(const lp_tokenizer_t *t, const char *corpus, size_t clen)
{
    check_roundtrip(t, corpus, clen, "corpus");
    /* long enough for the word cache and for BPE's 64 KiB blocks */
    char *big = malloc(3 * clen);
    for (int i = 0; i < 3; i++) memcpy(big + i * clen, corpus, clen);
    check_roundtrip(t, big, 3 * clen, "corpus x3");
    free(big);
    check_roundtrip(t, "", 0, "empty");
    check_roundtrip(t, " ", 1, "space");
    check_roundtrip(t, "  leading spaces", 16, "leading spaces");
    char buf[2048];
    for (int i = 0; i < 200; i++) {
        size_t n = random_utf8(buf, 1 + rnd() % sizeof(buf));
        check_roundtrip(t, buf, n, "random utf-8");
    }
}

/* Arbitrary bytes: no crash, and the decoders emit valid UTF-8 and agree. */
static void test_hostile(const lp_tokenizer_t *t)
{
    uint8_t buf[1024];
    for (int i = 0; i < 300; i++) {
        size_t n = rnd() % sizeof(buf);
        for (size_t k = 0; k < n; k++) buf[k] = (uint8_t)rnd();
        int32_t *ids;
        size_t m;
        CHECK_RC(lp_tokenize_alloc(t, (char *)buf, n, i & 1, i & 2, &ids, &m), 0);
        bool agree;
        size_t ol;
        char *out = decode_both(t, ids, m, i & 4, &ol, &agree);
        CHECK(agree);
        CHECK(lp_utf8_valid(out, ol));
        free(out);
        free(ids);
    }
    /* random IDs, including split UTF-8 byte tokens */
    int32_t ids[64];
    for (int i = 0; i < 300; i++) {
        for (int k = 0; k < 64; k++) ids[k] = (int32_t)(rnd() % (uint32_t)lp_tokenizer_n_tokens(t));
        bool agree;
        size_t ol;
        char *out = decode_both(t, ids, 64, i & 1, &ol, &agree);
        CHECK(agree);
        CHECK(lp_utf8_valid(out, ol));
        free(out);
    }
    int32_t bad = lp_tokenizer_n_tokens(t);
    const char *p;
    size_t k;
    CHECK_RC(lp_token_piece(t, bad, false, &p, &k), LP_ERR(EINVAL));
    CHECK_RC(lp_token_piece(t, -1, false, &p, &k), LP_ERR(EINVAL));
    /* a too-small output array reports the needed size */
    int32_t small[2];
    size_t need;
    CHECK_RC(lp_tokenize(t, "hello world, hello again", 24, false, false, small, 2, &need),
             LP_ERR(ENOSPC));
    CHECK(need > 2);
}

static int32_t find_token(const lp_tokenizer_t *t, const char *text)
{
    for (int32_t id = 0; id < lp_tokenizer_n_tokens(t); id++) {
        size_t n;
        const char *s = lp_tokenizer_token_text(t, id, &n);
        if (n == strlen(text) && !memcmp(s, text, n)) return id;
    }
    return -1;
}

static bool contains(const int32_t *ids, size_t n, int32_t id)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id) return true;
    return false;
}

static void test_special(void)
{
    lp_tokenizer_t *q = open_tok("vocab/ggml-vocab-qwen2.gguf");
    lp_tokenizer_t *s = open_tok("vocab/ggml-vocab-llama-spm.gguf");
    if (!q || !s) return;
    const char *msg = "<|im_start|>user\nHi<|im_end|>";
    int32_t im_start = find_token(q, "<|im_start|>"), im_end = find_token(q, "<|im_end|>");
    CHECK(im_start >= 0 && im_end >= 0);
    CHECK(lp_tokenizer_token_type(q, im_start) == LP_TOKEN_CONTROL);
    CHECK(lp_tokenizer_is_eog(q, im_end));
    CHECK(lp_tokenizer_is_eog(q, lp_tokenizer_eos(q)));
    CHECK(!lp_tokenizer_is_eog(q, im_start));
    int32_t *ids;
    size_t n;
    CHECK_RC(lp_tokenize_alloc(q, msg, strlen(msg), true, true, &ids, &n), 0);
    CHECK(n > 2 && ids[0] == im_start && ids[n - 1] == im_end);
    /* qwen2 adds no BOS */
    CHECK(!lp_tokenizer_adds_bos(q));
    char *text;
    size_t tl;
    CHECK_RC(lp_detokenize(q, ids, n, true, &text, &tl), 0);
    CHECK(tl == strlen(msg) && !memcmp(text, msg, tl));
    free(text);
    CHECK_RC(lp_detokenize(q, ids, n, false, &text, &tl), 0);
    CHECK(tl == 7 && !memcmp(text, "user\nHi", 7));
    free(text);
    free(ids);
    CHECK_RC(lp_tokenize_alloc(q, msg, strlen(msg), true, false, &ids, &n), 0);
    CHECK(!contains(ids, n, im_start) && !contains(ids, n, im_end));
    free(ids);

    /* SPM: BOS added, "</s>" parsed only when asked */
    CHECK(lp_tokenizer_adds_bos(s) && lp_tokenizer_bos(s) == 1 && lp_tokenizer_eos(s) == 2);
    CHECK_RC(lp_tokenize_alloc(s, "Hello</s>", 9, true, true, &ids, &n), 0);
    CHECK(n >= 3 && ids[0] == 1 && ids[n - 1] == 2);
    free(ids);
    CHECK_RC(lp_tokenize_alloc(s, "Hello</s>", 9, true, false, &ids, &n), 0);
    CHECK(n >= 3 && ids[0] == 1 && !contains(ids + 1, n - 1, 2) && !contains(ids + 1, n - 1, 1));
    free(ids);
    CHECK_RC(lp_tokenize_alloc(s, "", 0, true, true, &ids, &n), 0);
    CHECK(n == 1 && ids[0] == 1);
    free(ids);
    /* BOS then text: the decoder still drops the SPM prefix space */
    CHECK_RC(lp_tokenize_alloc(s, "Hello world", 11, true, false, &ids, &n), 0);
    CHECK_RC(lp_detokenize(s, ids, n, false, &text, &tl), 0);
    CHECK(tl == 11 && !memcmp(text, "Hello world", 11));
    free(text);
    free(ids);
    lp_tokenizer_destroy(&q);
    lp_tokenizer_destroy(&s);
}

/* tokenize.c cuts long BPE text after a "\n" with visible ASCII on both
 * sides; that must split the tokens exactly there, for every pre-tokenizer. */
static void check_block_cut(const lp_tokenizer_t *t)
{
    static const char vis[] = "aZ9.,'!-_(#";
    char a[600], b[600], ab[1200];
    for (int i = 0; i < 200; i++) {
        size_t na = random_utf8(a, 1 + rnd() % 500), nb = random_utf8(b, 1 + rnd() % 500);
        a[na++] = vis[rnd() % 11];
        a[na++] = '\n';
        memmove(b + 1, b, nb++);
        b[0] = vis[rnd() % 11];
        memcpy(ab, a, na);
        memcpy(ab + na, b, nb);
        int32_t *ia, *ib, *iab;
        size_t ka, kb, kab;
        CHECK_RC(lp_tokenize_alloc(t, a, na, false, false, &ia, &ka), 0);
        CHECK_RC(lp_tokenize_alloc(t, b, nb, false, false, &ib, &kb), 0);
        CHECK_RC(lp_tokenize_alloc(t, ab, na + nb, false, false, &iab, &kab), 0);
        bool same = kab == ka + kb && !memcmp(iab, ia, ka * 4) && !memcmp(iab + ka, ib, kb * 4);
        if (!same) fprintf(stderr, "block cut (%s) changes the tokens\n", lp_tokenizer_pre(t));
        CHECK(same);
        free(ia);
        free(ib);
        free(iab);
    }
}

/* A copy of a vocab file with one string key replaced (or added). */
/* The piece table is built by the first lp_token_piece: threads that all
 * start on a fresh tokenizer at once must see the same, complete pieces.
 * Each thread hashes every piece; the sums must equal one thread's. */
typedef struct piece_job {
    const lp_tokenizer_t *t;
    uint64_t sum;
    int failures;
} piece_job_t;

static void *piece_worker(void *arg)
{
    piece_job_t *j = arg;
    uint64_t h = 1469598103934665603ull;
    for (int32_t id = 0; id < lp_tokenizer_n_tokens(j->t); id++) {
        const char *p;
        size_t n;
        if (lp_token_piece(j->t, id, true, &p, &n)) {
            j->failures++;
            continue;
        }
        for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
        h = (h ^ n) * 1099511628211ull;
    }
    j->sum = h;
    return NULL;
}

static void test_pieces_threads(const char *rel)
{
    lp_tokenizer_t *t = open_tok(rel);
    if (!t) return;
    enum { N = 4 };
    piece_job_t jobs[N] = {{0}};
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        jobs[i].t = t;
        CHECK(pthread_create(&th[i], NULL, piece_worker, &jobs[i]) == 0);
    }
    for (int i = 0; i < N; i++) pthread_join(th[i], NULL);
    piece_job_t again = {t, 0, 0};
    piece_worker(&again);
    for (int i = 0; i < N; i++) {
        CHECK(jobs[i].failures == 0);
        CHECK(jobs[i].sum == again.sum);
    }
    /* a BPE piece is the token's text byte-decoded: "\xc4\xa0the" -> " the" */
    int32_t id = -1;
    for (int32_t k = 0; k < lp_tokenizer_n_tokens(t) && id < 0; k++) {
        size_t n;
        const char *s = lp_tokenizer_token_text(t, k, &n);
        if (n == 5 && !memcmp(s, "\xc4\xa0the", 5)) id = k;
    }
    if (lp_tokenizer_kind(t) == LP_VOCAB_BPE) {
        const char *p;
        size_t n;
        CHECK(id >= 0);
        if (id >= 0) CHECK(lp_token_piece(t, id, false, &p, &n) == 0 && n == 4 && !memcmp(p, " the", 4));
    }
    lp_tokenizer_destroy(&t);
}

/* A value to put in a copy of a GGUF: a string, or an integer of the
 * GGUF type 'u' (u32) or 'i' (i32). */
typedef struct kv_value {
    char type; /* 's', 'u', 'i' */
    const char *str;
    int64_t num;
} kv_value_t;

static int add_value(lp_gguf_writer_t *w, const char *key, kv_value_t v)
{
    if (v.type == 'u') return lp_gguf_writer_add_u32(w, key, (uint32_t)v.num);
    if (v.type == 'i') return lp_gguf_writer_add_i32(w, key, (int32_t)v.num);
    return lp_gguf_writer_add_cstr(w, key, v.str);
}

/* A copy of shared/rel, in memory, with key set to v (added when absent). */
static int open_modified_kv(const char *rel, const char *key, kv_value_t v, uint8_t **mem,
                            lp_gguf_t **out)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", shared, rel);
    lp_gguf_t *g;
    int rc = lp_gguf_open(path, &g);
    if (rc) return rc;
    lp_gguf_writer_t *w;
    rc = lp_gguf_writer_new(&w);
    bool replaced = false;
    for (int64_t i = 0; !rc && i < lp_gguf_n_kv(g); i++) {
        const lp_gguf_kv_t *kv = lp_gguf_kv_at(g, i);
        if (!strcmp(kv->key, key)) rc = add_value(w, key, v), replaced = true;
        else if (strcmp(kv->key, "general.alignment")) rc = lp_gguf_writer_add_kv(w, kv);
    }
    if (!rc && !replaced) rc = add_value(w, key, v);
    size_t len;
    if (!rc) rc = lp_gguf_writer_write_mem(w, mem, &len);
    if (!rc) rc = lp_gguf_open_mem(*mem, len, out);
    lp_gguf_writer_destroy(&w);
    lp_gguf_destroy(&g);
    return rc;
}

static int open_modified(const char *rel, const char *key, const char *value, uint8_t **mem,
                         lp_gguf_t **out)
{
    return open_modified_kv(rel, key, (kv_value_t){'s', value, 0}, mem, out);
}

/* Load the tokenizer of g with stderr going to a scratch file; returns what
 * was logged (malloc'd, NUL-terminated), or NULL when the load failed. */
static char *load_logged(const lp_gguf_t *g, lp_tokenizer_t **t)
{
    fflush(stderr);
    FILE *tmp = tmpfile();
    int saved = dup(2);
    if (!tmp || saved < 0) return NULL;
    dup2(fileno(tmp), 2);
    int rc = lp_tokenizer_new_from_gguf(g, t);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    off_t n = lseek(fileno(tmp), 0, SEEK_END); /* written through fd 2, not the FILE */
    char *log = rc ? NULL : calloc(1, (size_t)(n > 0 ? n : 0) + 1);
    if (log && n > 0 && pread(fileno(tmp), log, (size_t)n, 0) != n) log[0] = 0;
    fclose(tmp);
    if (rc) fprintf(stderr, "tokenizer load: %s\n", lp_error_msg());
    return log;
}

/* Special ids: -1 and 0xFFFFFFFF mean "none" and load silently (the
 * default id stays, as llama.cpp keeps it); other out-of-range ids also keep
 * the default but are reported, naming the key. */
static void test_special_ids(void)
{
    setenv("LMPIPE_LOG", "warn", 1);
    lp_log_init(NULL);
    static const struct {
        const char *key;
        kv_value_t v;
        bool warns;
    } cases[] = {
        {"tokenizer.ggml.padding_token_id", {'u', NULL, 0xFFFFFFFF}, false},
        {"tokenizer.ggml.padding_token_id", {'i', NULL, -1}, false},
        {"tokenizer.ggml.bos_token_id", {'i', NULL, -1}, false},
        {"tokenizer.ggml.bos_token_id", {'u', NULL, 0xFFFFFFFF}, false},
        {"tokenizer.ggml.eos_token_id", {'u', NULL, 512}, true},
        {"tokenizer.ggml.eos_token_id", {'i', NULL, -7}, true},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint8_t *mem = NULL;
        lp_gguf_t *g = NULL;
        lp_tokenizer_t *t = NULL;
        CHECK_RC(open_modified_kv("models/stories260K.gguf", cases[i].key, cases[i].v, &mem, &g), 0);
        char *log = g ? load_logged(g, &t) : NULL;
        CHECK(log != NULL && t != NULL);
        if (log && t) {
            if (cases[i].warns) CHECK(strstr(log, cases[i].key) != NULL);
            else CHECK(log[0] == 0);
            if (log[0] && !cases[i].warns) fprintf(stderr, "unexpected log: %s", log);
            /* stories260K's own ids: BOS 1, EOS 2 */
            CHECK(lp_tokenizer_bos(t) == 1);
            CHECK(lp_tokenizer_eos(t) == 2);
        }
        free(log);
        lp_tokenizer_destroy(&t);
        lp_gguf_destroy(&g);
        free(mem);
    }
    /* the shared files themselves load without a word */
    static const char *const files[] = {
        "models/stories260K.gguf", "models/synth-qwen2-Q8_0.gguf", "models/synth-llama-Q8_0.gguf",
        "vocab/ggml-vocab-gpt-2.gguf", "vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-qwen2.gguf"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", shared, files[i]);
        lp_gguf_t *g = NULL;
        lp_tokenizer_t *t = NULL;
        CHECK_RC(lp_gguf_open(path, &g), 0);
        char *log = g ? load_logged(g, &t) : NULL;
        CHECK(log != NULL && log[0] == 0);
        if (log && log[0]) fprintf(stderr, "%s: unexpected log: %s", files[i], log);
        free(log);
        lp_tokenizer_destroy(&t);
        lp_gguf_destroy(&g);
    }
}

static void test_errors(void)
{
    uint8_t *mem = NULL;
    lp_gguf_t *g = NULL;
    lp_tokenizer_t *t = NULL;
    CHECK_RC(open_modified("vocab/ggml-vocab-gpt-2.gguf", "tokenizer.ggml.pre", "no-such-pre", &mem, &g), 0);
    if (g) {
        CHECK_RC(lp_tokenizer_new_from_gguf(g, &t), LP_ERR(ENOTSUP));
        CHECK(strstr(lp_error_msg(), "no-such-pre") != NULL);
        CHECK(t == NULL);
    }
    lp_gguf_destroy(&g);
    free(mem);
    mem = NULL;
    CHECK_RC(open_modified("vocab/ggml-vocab-gpt-2.gguf", "tokenizer.ggml.model", "wordpiece", &mem, &g), 0);
    if (g) {
        CHECK_RC(lp_tokenizer_new_from_gguf(g, &t), LP_ERR(ENOTSUP));
        CHECK(strstr(lp_error_msg(), "wordpiece") != NULL);
    }
    lp_gguf_destroy(&g);
    free(mem);
    /* every supported pre name loads (same gpt-2 vocabulary) */
    static const char *const pres[] = {"default", "llama-bpe", "qwen2", "deepseek-llm",
                                       "deepseek-coder", "falcon", "starcoder", "refact", "mpt",
                                       "dbrx", "stablelm2", "smollm", "phi-2", "gpt-2", "gpt-4o",
                                       "qwen35"};
    for (size_t i = 0; i < sizeof(pres) / sizeof(pres[0]); i++) {
        mem = NULL;
        CHECK_RC(open_modified("vocab/ggml-vocab-gpt-2.gguf", "tokenizer.ggml.pre", pres[i], &mem, &g), 0);
        if (g) {
            CHECK_RC(lp_tokenizer_new_from_gguf(g, &t), 0);
            if (t) {
                CHECK(!strcmp(lp_tokenizer_pre(t), pres[i]));
                /* byte-level BPE round-trips whatever the pre-tokenizer */
                const char *x = "Hello, y'all! 1314151 \u00e9t\u00e9  \n\n  \u6211\u60f3 \U0001F680 ok";
                check_roundtrip(t, x, strlen(x), pres[i]);
                check_block_cut(t);
            }
            lp_tokenizer_destroy(&t);
        }
        lp_gguf_destroy(&g);
        free(mem);
    }
    t = NULL;
    CHECK(lp_tokenizer_new("/nonexistent/x.gguf", &t) < 0 && t == NULL);
}

static void expect_chat(enum lp_chat_template tt, const char *want)
{
    lp_chat_msg_t msgs[] = {
        {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}};
    char *out;
    size_t len;
    CHECK_RC(lp_chat_apply(tt, msgs, 4, true, &out, &len), 0);
    if (strcmp(out, want)) {
        fprintf(stderr, "chat %s:\n got  [%s]\n want [%s]\n", lp_chat_template_name(tt), out, want);
        CHECK(!"chat format");
    }
    free(out);
}

/* Render with a renderer over tok: the conversation as chat_json, or the
 * typed messages when json is NULL. */
static int render(const lp_chat_renderer_t *cr, const char *tmpl, const char *json, bool gen, char **text,
                  bool *has_bos)
{
    lp_chat_msg_t msgs[] = {{"user", "Hi"}};
    size_t len;
    return lp_chat_render(cr, tmpl, json, json ? strlen(json) : 0, msgs, 1, gen, text, &len, has_bos, NULL);
}

/* The model's own template, rendered by lib/jinja: the expected texts are
 * what ../shared/tools/render_template.py prints for the same template and
 * conversation (with bos_token and eos_token the vocabulary's). */
static void test_chat_model(void)
{
    uint8_t *mem = NULL;
    lp_gguf_t *g = NULL;
    lp_tokenizer_t *t = NULL;
    lp_chat_renderer_t *cr = NULL;
    const char *tmpl = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
                       "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
                       "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
    CHECK_RC(open_modified("vocab/ggml-vocab-qwen2.gguf", "tokenizer.chat_template", tmpl, &mem, &g), 0);
    if (g) CHECK_RC(lp_tokenizer_new_from_gguf(g, &t), 0);
    if (t) CHECK_RC(lp_chat_renderer_new(t, NULL, &cr), 0);
    if (cr) {
        char *text = NULL;
        bool bos;
        CHECK_RC(render(cr, NULL, NULL, true, &text, &bos), 0);
        CHECK(text && !strcmp(text, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"), " %s", text);
        int32_t *ids;
        size_t n;
        CHECK_RC(lp_tokenize_alloc(t, text, strlen(text), !bos, true, &ids, &n), 0);
        int32_t im_start = find_token(t, "<|im_start|>");
        CHECK(n > 3 && ids[0] == im_start && ids[n - 3] == im_start);
        free(ids);
        free(text);
        CHECK_RC(render(cr, NULL, NULL, false, &text, &bos), 0);
        CHECK(text && !strcmp(text, "<|im_start|>user\nHi<|im_end|>\n"), " %s", text);
        free(text);
        /* tools, an assistant's tool call with content null, a tool's
         * result and template kwargs reach the template */
        const char *conv = "{\"messages\": [{\"role\": \"user\", \"content\": \"2+2?\"}, {\"role\": \"assistant\", "
                           "\"content\": null, \"tool_calls\": [{\"id\": \"c1\", \"type\": \"function\", \"function\": "
                           "{\"name\": \"add\", \"arguments\": \"{\\\"a\\\": 2}\"}}]}, {\"role\": \"tool\", "
                           "\"tool_call_id\": \"c1\", \"content\": \"4\"}], \"tools\": [{\"type\": \"function\", "
                           "\"function\": {\"name\": \"add\"}}], \"chat_template_kwargs\": {\"enable_thinking\": false, "
                           "\"greeting\": \"hey\"}}";
        CHECK_RC(render(cr, "{{ greeting }}|{{ tools | map(attribute='function.name') | join }}|{% for m in messages %}"
                            "{{ m.role }}:{{ m.content }}:{{ m.tool_calls[0].function.arguments if m.tool_calls }};"
                            "{% endfor %}{{ enable_thinking }}",
                        conv, false, &text, &bos), 0);
        /* the template shows an object's value (lib/chat/chat-args.h's
         * probe): OpenAI's JSON string goes in as that object, printed as
         * Python prints a dict */
        CHECK(text && !strcmp(text, "hey|add|user:2+2?:;assistant:None:{'a': 2};tool:4:;False"), " %s", text);
        free(text);
        /* one that concatenates the string (DeepSeek R1's way) fails on an
         * object: it gets the string as sent */
        CHECK_RC(render(cr, "{% for m in messages %}{% if m.tool_calls %}"
                            "{{ 'args=' + m.tool_calls[0].function.arguments }}{% endif %}{% endfor %}",
                        conv, false, &text, &bos), 0);
        CHECK(text && !strcmp(text, "args={\"a\": 2}"), " %s", text);
        free(text);
        /* a family by name; Jinja text; neither; a failing template */
        CHECK_RC(render(cr, "zephyr", NULL, false, &text, &bos), 0);
        CHECK(text && !strcmp(text, "<|user|>\nHi<|endoftext|>\n"), " %s", text);
        free(text);
        CHECK_RC(render(cr, "no such template {{ x }}", NULL, false, &text, &bos), 0);
        CHECK(text && !strcmp(text, "no such template "), " %s", text);
        free(text);
        CHECK_RC(render(cr, "no-such-family", NULL, false, &text, &bos), LP_ERR(EINVAL));
        CHECK(strstr(lp_error_msg(), "chat_template: 'no-such-family'"), " %s", lp_error_msg());
        CHECK_RC(render(cr, "a\n{{ raise_exception('roles must alternate') }}", NULL, false, &text, &bos),
                 LP_ERR(EINVAL));
        CHECK(!strcmp(lp_error_msg(), "chat_template: line 2: roles must alternate"), " %s", lp_error_msg());
        CHECK(text == NULL);
        CHECK_RC(render(cr, "{% for %}", NULL, false, &text, &bos), LP_ERR(EINVAL));
        CHECK(!strncmp(lp_error_msg(), "chat_template: line 1:", 22), " %s", lp_error_msg());
        CHECK_RC(render(cr, NULL, "{\"messages\": []}", false, &text, &bos), LP_ERR(EINVAL));
    }
    lp_chat_renderer_destroy(&cr);
    lp_tokenizer_destroy(&t);
    lp_gguf_destroy(&g);
    free(mem);
    /* a template that writes bos_token: the text has it, and says so */
    t = open_tok("vocab/ggml-vocab-llama-spm.gguf");
    if (t) CHECK_RC(lp_chat_renderer_new(t, NULL, &cr), 0);
    if (cr) {
        char *text = NULL;
        bool bos = false;
        CHECK_RC(render(cr, "{{ bos_token }}[INST] {{ messages[0].content }} [/INST]{{ eos_token }}", NULL, true, &text,
                        &bos), 0);
        CHECK(text && !strcmp(text, "<s>[INST] Hi [/INST]</s>") && bos, " %s", text);
        free(text);
        /* kwargs override the special tokens, as in transformers */
        CHECK_RC(render(cr, "{{ bos_token }}x", "{\"messages\": [{\"role\": \"user\", \"content\": \"\"}], "
                                                 "\"chat_template_kwargs\": {\"bos_token\": \"B\"}}", true, &text, &bos), 0);
        CHECK(text && !strcmp(text, "Bx") && !bos, " %s", text);
        free(text);
    }
    lp_chat_renderer_destroy(&cr);
    lp_tokenizer_destroy(&t);
    /* a model without a template: only named families, or a template given */
    t = open_tok("vocab/ggml-vocab-gpt-2.gguf");
    if (t) CHECK_RC(lp_chat_renderer_new(t, NULL, &cr), 0);
    if (cr) {
        char *text = NULL;
        bool bos;
        CHECK(!lp_chat_renderer_has_default(cr));
        CHECK_RC(render(cr, NULL, NULL, true, &text, &bos), LP_ERR(ENOENT));
        CHECK(strstr(lp_error_msg(), "chat_template"), " %s", lp_error_msg());
        CHECK_RC(render(cr, "zephyr", NULL, false, &text, &bos), 0);
        CHECK(text && !strcmp(text, "<|user|>\nHi<|endoftext|>\n"));
        free(text);
    }
    lp_chat_renderer_destroy(&cr);
    lp_tokenizer_destroy(&t);
    /* a model whose template does not parse still loads; chat names the error */
    CHECK_RC(open_modified("vocab/ggml-vocab-qwen2.gguf", "tokenizer.chat_template", "{% for x in %}", &mem, &g), 0);
    if (g) CHECK_RC(lp_tokenizer_new_from_gguf(g, &t), 0);
    if (t) CHECK_RC(lp_chat_renderer_new(t, NULL, &cr), 0);
    if (cr) {
        char *text = NULL;
        bool bos;
        CHECK_RC(render(cr, NULL, NULL, true, &text, &bos), LP_ERR(EINVAL));
        CHECK(strstr(lp_error_msg(), "tokenizer.chat_template: line 1"), " %s", lp_error_msg());
    }
    lp_chat_renderer_destroy(&cr);
    lp_tokenizer_destroy(&t);
    lp_gguf_destroy(&g);
    free(mem);
}

static void test_chat(void)
{
    struct {
        const char *tmpl;
        enum lp_chat_template want;
    } det[] = {
        {"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}", LP_CHAT_CHATML},
        {"{{ bos_token }}{% for message in messages %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% endfor %}", LP_CHAT_LLAMA2},
        {"{% if messages[0]['role'] == 'system' %}<<SYS>>\\n{% endif %}[INST]", LP_CHAT_LLAMA2_SYS},
        {"{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}", LP_CHAT_LLAMA3},
        {"{{ '<|user|>\\n' + message['content'] + eos_token }}<|endoftext|>", LP_CHAT_ZEPHYR},
        {"{{'<|user|>' + '\\n' + message['content'] + '<|end|>' + '\\n' + '<|assistant|>' + '\\n'}}", LP_CHAT_PHI3},
        {"{{ bos_token }}{% for m in messages %}{{ '[INST] ' + m['content'] + '[/INST]' }}[AVAILABLE_TOOLS]", LP_CHAT_MISTRAL_V3},
        {"chatml", LP_CHAT_CHATML},
        {"llama3", LP_CHAT_LLAMA3},
    };
    for (size_t i = 0; i < sizeof(det) / sizeof(det[0]); i++) {
        enum lp_chat_template got;
        CHECK_RC(lp_chat_template_detect(det[i].tmpl, strlen(det[i].tmpl), &got), 0);
        if (got != det[i].want) fprintf(stderr, "detect %zu: got %s\n", i, lp_chat_template_name(got));
        CHECK(got == det[i].want);
    }
    enum lp_chat_template got;
    const char *unk = "{% for m in messages %}<<weird>>{{ m.content }}{% endfor %}";
    CHECK_RC(lp_chat_template_detect(unk, strlen(unk), &got), LP_ERR(ENOTSUP));
    CHECK(strstr(lp_error_msg(), "<<weird>>") != NULL);

    /* expected strings written out by hand from the model cards' formats */
    expect_chat(LP_CHAT_CHATML,
                "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
                "<|im_start|>assistant\n");
    expect_chat(LP_CHAT_LLAMA2_SYS,
                "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST]Hello.</s>[INST] Bye [/INST]");
    expect_chat(LP_CHAT_LLAMA3,
                "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
                "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\n");
    expect_chat(LP_CHAT_ZEPHYR,
                "<|system|>\nBe brief.<|endoftext|>\n<|user|>\nHi<|endoftext|>\n"
                "<|assistant|>\nHello.<|endoftext|>\n<|user|>\nBye<|endoftext|>\n<|assistant|>\n");
    expect_chat(LP_CHAT_PHI3,
                "<|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nHello.<|end|>\n"
                "<|user|>\nBye<|end|>\n<|assistant|>\n");
    expect_chat(LP_CHAT_MISTRAL_V7,
                "[SYSTEM_PROMPT] Be brief.[/SYSTEM_PROMPT][INST] Hi[/INST] Hello.</s>[INST] Bye[/INST]");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: tokenizer-test SHARED_DIR\n");
        return 2;
    }
    shared = argv[1];
    char path[4096];
    snprintf(path, sizeof(path), "%s/corpus/licenses.txt", shared);
    size_t clen;
    char *corpus = NULL;
    lp_read_file(path, &corpus, &clen);
    CHECK(corpus != NULL);
    static const char *const vocabs[] = {"vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-gpt-2.gguf",
                                         "vocab/ggml-vocab-qwen2.gguf", "models/stories260K.gguf"};
    for (size_t i = 0; i < 4 && corpus; i++) {
        lp_tokenizer_t *t = open_tok(vocabs[i]);
        if (!t) continue;
        test_roundtrips(t, corpus, clen);
        test_hostile(t);
        test_against_naive(t);
        lp_tokenizer_destroy(&t);
    }
    free(corpus);
    test_special();
    test_errors();
    test_special_ids();
    test_pieces_threads("vocab/ggml-vocab-qwen2.gguf");
    test_pieces_threads("vocab/ggml-vocab-llama-spm.gguf");
    test_chat();
    test_chat_model();
    return CHECK_DONE();
}
