/* cmd-tokenize.c - `lmpipe tokenize` and `lmpipe detokenize`: text on stdin
 * to token IDs on one line, and IDs back to text. */
#include "lmpipe.h"

#include "error.h"
#include "fileio.h"
#include "tokenizer.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parse "--model M" and the flags named in `flags`; returns the model path. */
static const char *parse_args(const char *cmd, int argc, char **argv, const char *flag,
                              bool *flag_set, int *status)
{
    const char *model = NULL;
    *status = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc) {
            model = argv[++i];
        } else if (!strncmp(argv[i], "--model=", 8)) {
            model = argv[i] + 8;
        } else if (flag && !strcmp(argv[i], flag)) {
            *flag_set = true;
        } else {
            *status = lp_cmd_usage_error(cmd, "unknown argument '%s'\nusage: lmpipe %s --model M%s%s%s",
                                         argv[i], cmd, flag ? " [" : "", flag ? flag : "", flag ? "]" : "");
            return NULL;
        }
    }
    if (!model) {
        *status = lp_cmd_usage_error(cmd, "--model is required\nusage: lmpipe %s --model M%s%s%s", cmd,
                                     flag ? " [" : "", flag ? flag : "", flag ? "]" : "");
        return NULL;
    }
    return model;
}

/* IDs on one line, space-separated (printf per ID would cost more than the
 * tokenizing).  Digits are written two at a time, right to left. */
static void print_ids(const int32_t *ids, size_t n)
{
    static const char pairs[201] = "00010203040506070809101112131415161718192021222324"
                                   "25262728293031323334353637383940414243444546474849"
                                   "50515253545556575859606162636465666768697071727374"
                                   "75767778798081828384858687888990919293949596979899";
    char buf[65536];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k > sizeof(buf) - 16) {
            fwrite(buf, 1, k, stdout);
            k = 0;
        }
        if (i) buf[k++] = ' ';
        char tmp[12];
        char *e = tmp + sizeof(tmp), *p = e;
        uint32_t v = (uint32_t)ids[i]; /* ids are >= 0 */
        while (v >= 100) {
            p -= 2;
            memcpy(p, pairs + 2 * (v % 100), 2);
            v /= 100;
        }
        if (v >= 10) {
            p -= 2;
            memcpy(p, pairs + 2 * v, 2);
        } else {
            *--p = (char)('0' + v);
        }
        memcpy(buf + k, p, (size_t)(e - p));
        k += (size_t)(e - p);
    }
    buf[k++] = '\n';
    fwrite(buf, 1, k, stdout);
}

int lp_cmd_tokenize(int argc, char **argv)
{
    bool raw = false;
    int status;
    const char *model = parse_args("tokenize", argc, argv, "--raw", &raw, &status);
    if (!model) return status;
    lp_tokenizer_t *tok;
    if (lp_tokenizer_new(model, &tok)) {
        fprintf(stderr, "lmpipe tokenize: %s\n", lp_error_msg());
        return 1;
    }
    char *text;
    size_t len;
    if (lp_read_stream(stdin, "stdin", &text, &len)) {
        fprintf(stderr, "lmpipe tokenize: %s\n", lp_error_msg());
        lp_tokenizer_destroy(&tok);
        return 1;
    }
    int32_t *ids;
    size_t n;
    int rc = lp_tokenize_alloc(tok, text, len, !raw, !raw, &ids, &n);
    free(text);
    if (rc) {
        fprintf(stderr, "lmpipe tokenize: %s\n", lp_error_msg());
        lp_tokenizer_destroy(&tok);
        return 1;
    }
    print_ids(ids, n);
    free(ids);
    lp_tokenizer_destroy(&tok);
    return fflush(stdout) ? 1 : 0;
}

int lp_cmd_detokenize(int argc, char **argv)
{
    bool special = false;
    int status;
    const char *model = parse_args("detokenize", argc, argv, "--special", &special, &status);
    if (!model) return status;
    lp_tokenizer_t *tok;
    if (lp_tokenizer_new(model, &tok)) {
        fprintf(stderr, "lmpipe detokenize: %s\n", lp_error_msg());
        return 1;
    }
    char *in;
    size_t len;
    if (lp_read_stream(stdin, "stdin", &in, &len)) {
        fprintf(stderr, "lmpipe detokenize: %s\n", lp_error_msg());
        lp_tokenizer_destroy(&tok);
        return 1;
    }
    size_t cap = 1024, n = 0;
    int32_t *ids = malloc(cap * sizeof(*ids));
    int ret = 0;
    size_t i = 0;
    while (ids && i < len) {
        while (i < len && strchr(" \t\r\n,", in[i])) i++;
        if (i >= len) break;
        char *end;
        errno = 0;
        long v = strtol(in + i, &end, 10);
        if (end == in + i || errno || v < 0 || v >= lp_tokenizer_n_tokens(tok) ||
            (end < in + len && !strchr(" \t\r\n,", *end))) {
            int k = 0;
            while (i + k < len && k < 20 && !strchr(" \t\r\n,", in[i + k])) k++;
            fprintf(stderr, "lmpipe detokenize: bad token id '%.*s' (want 0..%d)\n", k, in + i,
                    lp_tokenizer_n_tokens(tok) - 1);
            ret = 1;
            break;
        }
        if (n == cap) {
            int32_t *p = realloc(ids, cap * 2 * sizeof(*ids));
            if (!p) break;
            ids = p;
            cap *= 2;
        }
        ids[n++] = (int32_t)v;
        i = (size_t)(end - in);
    }
    free(in);
    if (!ret) {
        char *text;
        size_t tl;
        if (!ids || lp_detokenize(tok, ids, n, special, &text, &tl)) {
            fprintf(stderr, "lmpipe detokenize: %s\n", ids ? lp_error_msg() : "out of memory");
            ret = 1;
        } else {
            fwrite(text, 1, tl, stdout);
            free(text);
            if (fflush(stdout)) ret = 1;
        }
    }
    free(ids);
    lp_tokenizer_destroy(&tok);
    return ret;
}
