/* cmd-sample.c - `lmpipe sample`: run the sampler chain in-process on one
 * row of float32 logits N times and print how often each token was drawn. */
#include "lmpipe.h"

#include "engine.h"
#include "error.h"
#include "fileio.h"
#include "sampler.h"
#include "tokenizer.h"
#include "vocab-text.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USAGE                                                                             \
    "usage: lmpipe sample --logits FILE --params JSON --draws N [--seed S]\n"             \
    "                     [--history 0,1,2] [--n-real N] [--mask-file FILE]\n"           \
    "                     [--plugin PATH[=CONFIG]] [--model M.gguf]\n"                   \
    "  FILE holds one row of little-endian float32 logits; JSON uses llama.cpp\n"        \
    "  /completion names (or @FILE to read it); --mask-file holds one byte per token\n"  \
    "  (non-zero: never sample).  --model takes the real token count, the mask\n"      \
    "  and the vocabulary (for DRY's text sequence breakers) from a GGUF.  --plugin\n"   \
    "  passes sampler-svc's ownership and mode checks, its folder as the plugin folder."

static int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int lp_cmd_sample(int argc, char **argv)
{
    const char *logits_path = NULL, *params = NULL, *history = NULL, *mask_path = NULL;
    const char *plugin = NULL, *model_path = NULL;
    int64_t draws = -1, seed = -2, n_real = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            puts(USAGE);
            return 0;
        }
        if (i + 1 >= argc) return lp_cmd_usage_error("sample", "%s needs a value\n%s", a, USAGE);
        const char *v = argv[++i];
        if (!strcmp(a, "--logits")) logits_path = v;
        else if (!strcmp(a, "--params")) params = v;
        else if (!strcmp(a, "--history")) history = v;
        else if (!strcmp(a, "--mask-file")) mask_path = v;
        else if (!strcmp(a, "--plugin")) plugin = v;
        else if (!strcmp(a, "--model")) model_path = v;
        else if (!strcmp(a, "--draws")) {
            if (parse_i64(v, 1, 100000000, &draws))
                return lp_cmd_usage_error("sample", "--draws: need 1 to 100000000, got '%s'", v);
        } else if (!strcmp(a, "--seed")) {
            if (parse_i64(v, 0, INT64_MAX, &seed))
                return lp_cmd_usage_error("sample", "--seed: need an integer >= 0, got '%s'", v);
        } else if (!strcmp(a, "--n-real")) {
            if (parse_i64(v, 1, INT32_MAX, &n_real))
                return lp_cmd_usage_error("sample", "--n-real: need an integer >= 1, got '%s'", v);
        } else
            return lp_cmd_usage_error("sample", "unknown option '%s'\n%s", a, USAGE);
    }
    if (!logits_path || !params || draws < 0)
        return lp_cmd_usage_error("sample", "--logits, --params and --draws are required\n%s",
                                  USAGE);

    int status = 1;
    char *row_buf = NULL, *params_buf = NULL, *mask_buf = NULL;
    size_t row_len = 0, params_len = 0, mask_len = 0;
    lp_sampler_store_t *st = NULL;
    lp_sampler_seq_t *seq = NULL;
    lp_sampler_params_t *req = NULL;
    uint64_t *counts = NULL;
    lp_model_t *model = NULL;
    lp_tokenizer_t *tok = NULL;

    if (lp_read_file(logits_path, &row_buf, &row_len)) goto fail;
    if (row_len == 0 || row_len % 4 || row_len / 4 > INT32_MAX) {
        lp_error_set(LP_ERR(EINVAL), "%s: %zu bytes is not a row of float32 logits",
                     logits_path, row_len);
        goto fail;
    }
    int32_t n_vocab = (int32_t)(row_len / 4);
    float *row = malloc(row_len);
    if (!row) {
        lp_error_set(LP_ERR(ENOMEM), "out of memory");
        goto fail;
    }
    memcpy(row, row_buf, row_len); /* aligned copy */
    free(row_buf);
    row_buf = (char *)row;

    if (params[0] == '@') {
        if (lp_read_file(params + 1, &params_buf, &params_len)) goto fail;
    } else {
        params_len = strlen(params);
    }
    if (!(req = malloc(sizeof(*req)))) {
        lp_error_set(LP_ERR(ENOMEM), "out of memory");
        goto fail;
    }
    lp_sampler_params_default(req);
    if (lp_sampler_params_parse(params_buf ? params_buf : params, params_len,
                                LP_SAMPLER_PARAMS_STRICT, req)) {
        lp_error_prefix("--params: ");
        goto fail;
    }
    if (seed >= 0) {
        req->seed = seed;
        req->set |= 1ull << LP_SP_SEED;
    }
    if (lp_sampler_store_new(NULL, &st)) goto fail;
    if (mask_path) {
        if (lp_read_file(mask_path, &mask_buf, &mask_len)) goto fail;
        if (mask_len != (size_t)n_vocab) {
            lp_error_set(LP_ERR(EINVAL), "%s: %zu bytes, expected one per token (%d)", mask_path,
                         mask_len, n_vocab);
            goto fail;
        }
    }
    if (model_path) {
        if (lp_model_load(model_path, &model)) goto fail;
        const lp_hparams_t *hp = lp_model_hparams(model);
        if (hp->n_vocab != n_vocab) {
            lp_error_set(LP_ERR(EINVAL), "%s: rows of %d logits, the row has %d", model_path,
                         hp->n_vocab, n_vocab);
            goto fail;
        }
        if (!n_real && !mask_path &&
            lp_sampler_store_set_vocab(st, hp->n_tokens_real, lp_model_token_mask(model), n_vocab))
            goto fail;
        if (lp_tokenizer_new_from_gguf(lp_model_gguf(model), &tok)) goto fail;
        lp_sampler_vocab_text_t vt = lp_sampler_vocab_text_of(tok);
        if (lp_sampler_store_set_vocab_text(st, &vt)) goto fail;
    }
    if (n_real || mask_path) {
        if (lp_sampler_store_set_vocab(st, n_real ? (int32_t)n_real : n_vocab,
                                       (const uint8_t *)mask_buf, (int32_t)mask_len))
            goto fail;
    }
    if (plugin) {
        char *path = strdup(plugin);
        if (!path) goto fail;
        char *eq = strchr(path, '=');
        if (eq) *eq = '\0';
        /* The user named this file on their own command line: its folder is
         * the plugin folder, and the same ownership and mode checks apply. */
        const char *slash = strrchr(path, '/');
        char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
        int rc = dir ? lp_sampler_store_set_plugin_dir(st, dir) : LP_ERR(ENOMEM);
        /* a relative path is relative to that folder: the name alone */
        const char *rel = path[0] == '/' || !slash ? path : slash + 1;
        if (!rc) rc = lp_sampler_store_load_plugin(st, rel, eq ? eq + 1 : "", NULL);
        free(dir);
        free(path);
        if (rc) goto fail;
    }
    if (lp_sampler_seq_new_params(st, req, &seq)) goto fail;
    if (history) {
        const char *p = history;
        while (*p) {
            char *end;
            errno = 0;
            long v = strtol(p, &end, 10);
            if (end == p || errno || v < 0 || v > INT32_MAX || (*end && *end != ',')) {
                lp_error_set(LP_ERR(EINVAL), "--history: '%s' is not a list of token IDs", history);
                goto fail;
            }
            lp_sampler_seq_accept(seq, (int32_t)v);
            p = *end ? end + 1 : end;
        }
    }
    counts = calloc((size_t)n_vocab, sizeof(*counts));
    if (!counts) {
        lp_error_set(LP_ERR(ENOMEM), "out of memory");
        goto fail;
    }
    for (int64_t d = 0; d < draws; d++) {
        lp_sampler_result_t r;
        if (lp_sampler_seq_sample(seq, row, n_vocab, &r)) goto fail;
        counts[r.id]++;
    }
    putchar('{');
    bool first = true;
    for (int32_t i = 0; i < n_vocab; i++) {
        if (!counts[i]) continue;
        printf("%s\"%d\":%" PRIu64, first ? "" : ",", i, counts[i]);
        first = false;
    }
    puts("}");
    status = 0;
fail:
    if (status) fprintf(stderr, "lmpipe sample: %s\n", lp_error_msg());
    free(counts);
    lp_sampler_seq_destroy(&seq);
    lp_sampler_store_destroy(&st);
    lp_tokenizer_destroy(&tok);
    lp_model_destroy(&model);
    free(req);
    free(row_buf);
    free(params_buf);
    free(mask_buf);
    return status;
}
