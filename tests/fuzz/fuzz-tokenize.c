/* fuzz-tokenize.c - libFuzzer target for the tokenizer: arbitrary bytes
 * through lp_tokenize on an SPM and two BPE vocabularies (llama-spm, gpt-2,
 * qwen2), then back through lp_detokenize and the incremental decoder.
 * Aborts when the two decoders disagree, when either emits invalid UTF-8, or
 * when valid UTF-8 does not survive the round trip (except "▁" in SPM text,
 * which SentencePiece itself cannot tell from a space).  The first input byte
 * picks add_special / parse_special.  Vocabularies come from
 * $LMPIPE_SHARED/vocab (default: the shared_dir the build was set up with). */
#include "error.h"
#include "gguf.h"
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifndef LP_SHARED_DIR
#define LP_SHARED_DIR "../shared"
#endif

static lp_tokenizer_t *toks[3];

static void load(void)
{
    static const char *const names[3] = {"llama-spm", "gpt-2", "qwen2"};
    const char *shared = getenv("LMPIPE_SHARED");
    if (!shared) shared = LP_SHARED_DIR;
    for (int i = 0; i < 3; i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/vocab/ggml-vocab-%s.gguf", shared, names[i]);
        if (lp_tokenizer_new(path, &toks[i])) {
            fprintf(stderr, "fuzz-tokenize: %s\n", lp_error_msg());
            abort();
        }
    }
}

static void check(const lp_tokenizer_t *t, const uint8_t *text, size_t len, bool add_special,
                  bool parse_special)
{
    int32_t *ids;
    size_t n;
    if (lp_tokenize_alloc(t, (const char *)text, len, add_special, parse_special, &ids, &n)) {
        fprintf(stderr, "fuzz-tokenize: tokenize failed: %s\n", lp_error_msg());
        abort();
    }
    for (int special = 0; special < 2; special++) {
        char *whole;
        size_t wl;
        if (lp_detokenize(t, ids, n, special, &whole, &wl)) abort();
        if (!lp_utf8_valid(whole, wl)) abort();
        lp_detok_t *d;
        if (lp_detok_new(t, special, &d)) abort();
        size_t at = 0;
        const char *p;
        size_t k;
        for (size_t i = 0; i <= n; i++) {
            int rc = i < n ? lp_detok_feed(d, ids[i], &p, &k) : lp_detok_flush(d, &p, &k);
            if (rc || at + k > wl || memcmp(whole + at, p, k)) {
                fprintf(stderr, "fuzz-tokenize: incremental decoding differs at token %zu\n", i);
                abort();
            }
            at += k;
        }
        if (at != wl) abort();
        lp_detok_destroy(&d);
        /* SPM cannot tell a typed "▁" (U+2581) from an escaped space */
        bool spm_ambiguous = lp_tokenizer_kind(t) == LP_VOCAB_SPM &&
                             memmem(text, len, "\xe2\x96\x81", 3) != NULL;
        if (!special && !add_special && !parse_special && !spm_ambiguous &&
            lp_utf8_valid((const char *)text, len) &&
            (wl != len || memcmp(whole, text, len))) {
            fprintf(stderr, "fuzz-tokenize: round trip differs (%s)\n", lp_tokenizer_pre(t));
            abort();
        }
        free(whole);
    }
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!toks[0]) load();
    if (size == 0) return 0;
    bool add_special = data[0] & 1, parse_special = data[0] & 2;
    for (int i = 0; i < 3; i++) check(toks[i], data + 1, size - 1, add_special, parse_special);
    return 0;
}
