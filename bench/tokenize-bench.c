/* tokenize-bench.c - tokenizer speed: encode throughput on the shared corpus
 * repeated to 1 MiB (llama-spm, gpt-2, qwen2), the same with ten times the
 * text (linearity), one 1 MiB word without spaces, load time, and the
 * pre-tokenizer alone against PCRE2-JIT running llama.cpp's regexes (when
 * built with libpcre2-8).  Times are CPU seconds, best of REPEATS; "whole
 * run" is load + encode of 1 MiB, as one `llama-tokenize` run is timed.
 * usage: tokenize-bench SHARED_DIR [REPEATS] */
#include "tok-internal.h"
#include "tokenizer.h"

#include "error.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef LP_HAVE_PCRE2
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#endif

/* CPU time of this (single-threaded) process: the shared build machine is
 * often busy, and CPU time does not count the time other processes hold the
 * core. */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static char *repeat_to(const char *src, size_t n, size_t want)
{
    char *b = malloc(want);
    for (size_t i = 0; i < want; i += n) memcpy(b + i, src, want - i < n ? want - i : n);
    return b;
}

static int repeats = 5;

/* best of `repeats` encodes; returns seconds, sets *n_tokens */
static double time_encode(const lp_tokenizer_t *t, const char *text, size_t len, size_t *n_tokens)
{
    double best = 1e30;
    for (int r = 0; r < repeats; r++) {
        int32_t *ids;
        double t0 = now();
        if (lp_tokenize_alloc(t, text, len, false, false, &ids, n_tokens)) {
            fprintf(stderr, "tokenize: %s\n", lp_error_msg());
            exit(1);
        }
        double dt = now() - t0;
        free(ids);
        if (dt < best) best = dt;
    }
    return best;
}

#ifdef LP_HAVE_PCRE2
/* Split with PCRE2-JIT; returns the piece count, or -1. */
static long pcre2_split(pcre2_code *re, pcre2_match_data *md, const char *s, size_t n)
{
    size_t off = 0;
    long pieces = 0;
    while (off < n) {
        int rc = pcre2_jit_match(re, (PCRE2_SPTR)s, n, off, PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc < 0) break;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        if (ov[0] > off) pieces++; /* the gap before the match */
        pieces++;
        off = ov[1] > ov[0] ? ov[1] : ov[1] + 1;
    }
    return pieces;
}

static void compare_pcre2(const char *name, enum lp__pre pre, const char *pattern, const char *text,
                          size_t len)
{
    int err;
    PCRE2_SIZE erroff;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                                   &err, &erroff, NULL);
    if (!re || pcre2_jit_compile(re, PCRE2_JIT_COMPLETE)) {
        printf("  %-8s pcre2 compile failed\n", name);
        return;
    }
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    double best_p = 1e30, best_h = 1e30;
    long np = 0;
    size_t nh = 0;
    for (int r = 0; r < repeats; r++) {
        double t0 = now();
        np = pcre2_split(re, md, text, len);
        double t1 = now();
        const char *clean;
        char *owned;
        size_t *starts;
        lp__pretok_split(pre, text, len, &clean, &owned, &starts, &nh);
        double t2 = now();
        free(owned);
        free(starts);
        if (t1 - t0 < best_p) best_p = t1 - t0;
        if (t2 - t1 < best_h) best_h = t2 - t1;
    }
    printf("  %-8s pcre2-jit %7.1f MB/s (%ld pieces)   hand-written %7.1f MB/s (%zu pieces)\n", name,
           len / best_p / 1e6, np, len / best_h / 1e6, nh);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
}
#endif

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: tokenize-bench SHARED_DIR [REPEATS]\n");
        return 2;
    }
    if (argc > 2) repeats = atoi(argv[2]);
    char path[4096];
    snprintf(path, sizeof(path), "%s/corpus/licenses.txt", argv[1]);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return 1;
    }
    static char src[1 << 20];
    size_t n_src = fread(src, 1, sizeof(src), f);
    fclose(f);
    const size_t MB = 1 << 20;
    char *text = repeat_to(src, n_src, MB);
    char *text10 = repeat_to(src, n_src, 10 * MB);
    /* one word: the corpus' letters only, 1 MiB and 2 MiB */
    char letters[1 << 16];
    size_t nl = 0;
    for (size_t i = 0; i < n_src && nl < sizeof(letters); i++)
        if (isalpha((unsigned char)src[i])) letters[nl++] = src[i];
    char *word = repeat_to(letters, nl, 2 * MB);

    static const char *const vocabs[] = {"llama-spm", "gpt-2", "qwen2"};
    /* MB/s of one whole llama-tokenize run, fixed reference figures for a
     * quick ratio; bench/vs-llama-tokenize.sh measures the peer in the same
     * run */
    static const double llama_cpp[] = {1.5, 3.2, 2.4};
    printf("tokenizer benchmark: corpus %zu bytes repeated to 1 MiB, best of %d\n", n_src, repeats);
    printf("%-10s %8s %10s %10s %12s %9s %11s %11s\n", "vocab", "load ms", "encode", "whole run",
           "vs llama.cpp", "10x time", "1MiB word", "2MiB word");
    for (int v = 0; v < 3; v++) {
        snprintf(path, sizeof(path), "%s/vocab/ggml-vocab-%s.gguf", argv[1], vocabs[v]);
        double t0 = now();
        lp_tokenizer_t *t;
        if (lp_tokenizer_new(path, &t)) {
            fprintf(stderr, "%s\n", lp_error_msg());
            return 1;
        }
        double load = now() - t0;
        size_t nt;
        double e1 = time_encode(t, text, MB, &nt);
        double e10 = time_encode(t, text10, 10 * MB, &nt);
        double w1 = time_encode(t, word, MB, &nt);
        double w2 = time_encode(t, word, 2 * MB, &nt);
        double mbs = MB / 1e6 / e1, whole = MB / 1e6 / (e1 + load);
        printf("%-10s %8.1f %7.1f MB/s %5.1f MB/s %10.1fx %8.1fx %9.1f ms %9.1f ms\n", vocabs[v],
               load * 1e3, mbs, whole, whole / llama_cpp[v], e10 / e1, w1 * 1e3, w2 * 1e3);
        lp_tokenizer_destroy(&t);
    }
#ifdef LP_HAVE_PCRE2
    printf("pre-tokenizer alone on the 1 MiB text:\n");
    compare_pcre2("gpt-2", LP__PRE_GPT2,
                  "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", text, MB);
    compare_pcre2("llama3", LP__PRE_LLAMA3,
                  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
                  text, MB);
    compare_pcre2("qwen2", LP__PRE_QWEN2,
                  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
                  text, MB);
#endif
    free(text);
    free(text10);
    free(word);
    return 0;
}
