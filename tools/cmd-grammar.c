/* cmd-grammar.c - `lmpipe grammar`: the grammar engine driven from files,
 * for checks and benchmarks.
 *
 *   lmpipe grammar check --vocab V.gguf (--schema S | --gbnf G | --regex R) [--text FILE]...
 *   lmpipe grammar maskbench --vocab V.gguf FILE.json...
 *
 * check compiles one grammar (S, G, R: a file, or the text itself when no
 * such file exists), tokenizes each text with V (no BOS, no special tokens)
 * and feeds its tokens one by one through the masks.  maskbench does the
 * same for MaskBench files (../shared/maskbench/README.md): each test's
 * data as compact JSON, then indented by 2.  Each prints one JSON line per
 * grammar (see docs/SAMPLER.md, "lmpipe grammar"). */
#include "lmpipe.h"

#include "error.h"
#include "fileio.h"
#include "grammar.h"
#include "json.h"
#include "tokenizer.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* Wall time by default; LMPIPE_GRAMMAR_CLOCK=cpu times the thread's CPU
 * instead (on a machine shared with other work, wall time counts their
 * turns on the core too). */
static double now_us(void)
{
    static int clk = -1;
    if (clk < 0) {
        const char *e = getenv("LMPIPE_GRAMMAR_CLOCK");
        clk = e && !strcmp(e, "cpu") ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
    }
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* ---- a growable text buffer -------------------------------------------------------- */

typedef struct {
    char *p;
    size_t n, cap;
    bool oom;
} buf_t;

static void bput(buf_t *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void bputs(buf_t *b, const char *s) { bput(b, s, strlen(s)); }

static void bprintf(buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bprintf(buf_t *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (k > 0) bput(b, tmp, (size_t)k < sizeof(tmp) ? (size_t)k : sizeof(tmp) - 1);
}

/* A JSON string with MaskBench's escaping: only what JSON requires, \u00xx
 * in lower case for the control characters without a short form. */
static void bstr(buf_t *b, const char *s, size_t n)
{
    bputs(b, "\"");
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[8];
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\b') esc = "\\b";
        else if (c == '\f') esc = "\\f";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c < 0x20) {
            snprintf(u, sizeof(u), "\\u%04x", c);
            esc = u;
        }
        if (!esc) continue;
        bput(b, s + run, i - run);
        bputs(b, esc);
        run = i + 1;
    }
    bput(b, s + run, n - run);
    bputs(b, "\"");
}

/* MaskBench's two serialisations: indent 0 is compact; 2 is json.dumps
 * with indent=2. */
static void ser(buf_t *b, const lp_json_t *v, int indent, int depth)
{
    switch (v->type) {
    case LP_JSON_NULL: bputs(b, "null"); return;
    case LP_JSON_BOOL: bputs(b, v->u.b ? "true" : "false"); return;
    case LP_JSON_NUMBER: bput(b, v->num_text, v->n); return;
    case LP_JSON_STRING: bstr(b, v->u.str, v->n); return;
    case LP_JSON_ARRAY:
    case LP_JSON_OBJECT: {
        bool obj = v->type == LP_JSON_OBJECT;
        bputs(b, obj ? "{" : "[");
        for (size_t i = 0; i < v->n; i++) {
            if (i) bputs(b, ",");
            if (indent) {
                bputs(b, "\n");
                for (int k = 0; k < (depth + 1) * indent; k++) bputs(b, " ");
            }
            const lp_json_t *x = &v->u.items[i];
            if (obj) {
                bstr(b, x->key, x->key_len);
                bputs(b, indent ? ": " : ":");
            }
            ser(b, x, indent, depth + 1);
        }
        if (indent && v->n) {
            bputs(b, "\n");
            for (int k = 0; k < depth * indent; k++) bputs(b, " ");
        }
        bputs(b, obj ? "}" : "]");
        return;
    }
    }
}

/* ---- feeding texts --------------------------------------------------------------------- */

typedef struct {
    double *v;
    size_t n, cap;
} times_t;

static int times_push(times_t *t, double x)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 1024;
        double *v = realloc(t->v, cap * sizeof(double));
        if (!v) return -1;
        t->v = v;
        t->cap = cap;
    }
    t->v[t->n++] = x;
    return 0;
}

/* LMPIPE_GRAMMAR_TIMES=FILE: every mask time (us, one per line) is also
 * appended there, for figures over all masks of a run (bench/). */
static FILE *times_out(void)
{
    static FILE *f;
    static bool tried;
    if (!tried) {
        tried = true;
        const char *p = getenv("LMPIPE_GRAMMAR_TIMES");
        if (p && *p) f = fopen(p, "a");
    }
    return f;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    bool accepted;
    size_t tokens;
    long rejected_at; /* -1: null */
} result_t;

/* Feed text through the grammar's masks. */
static int feed(lp_grammar_t *g, const lp_tokenizer_t *tok, const lp_grammar_vocab_t *gv,
                const char *text, size_t len, uint64_t *mask, times_t *times, result_t *r)
{
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = lp_tokenize_alloc(tok, text, len, false, false, &ids, &n);
    if (rc) return rc;
    r->tokens = n;
    r->rejected_at = -1;
    r->accepted = false;
    lp_grammar_matcher_t *m;
    rc = lp_grammar_matcher_new(g, &m);
    if (rc) {
        free(ids);
        return rc;
    }
    (void)gv;
    size_t i;
    for (i = 0; i < n; i++) {
        double t0 = now_us();
        rc = lp_grammar_matcher_fill_mask(m, mask);
        bool ok = !rc && (mask[ids[i] >> 6] >> (ids[i] & 63) & 1);
        if (ok && lp_grammar_matcher_accept(m, ids[i])) {
            fprintf(stderr, "lmpipe grammar: token %d was in the mask but not accepted: %s\n", ids[i],
                    lp_error_msg());
            ok = false;
        }
        double t1 = now_us();
        if (times_push(times, t1 - t0)) {
            rc = LP_ERR(ENOMEM);
            break;
        }
        if (rc) {
            fprintf(stderr, "lmpipe grammar: mask failed: %s\n", lp_error_msg());
            rc = 0;
        }
        if (!ok) {
            r->rejected_at = (long)i;
            break;
        }
    }
    if (i == n) r->accepted = lp_grammar_matcher_end_allowed(m);
    lp_grammar_matcher_destroy(&m);
    free(ids);
    return rc;
}

static void print_line(buf_t *b, const char *file, bool compiled, const char *err, double compile_us,
                       const result_t *res, const int *valid, size_t nres, times_t *times)
{
    b->n = 0;
    bputs(b, "{");
    if (file) {
        bputs(b, "\"file\": ");
        bstr(b, file, strlen(file));
        bputs(b, ", ");
    }
    bprintf(b, "\"compiled\": %s, \"error\": ", compiled ? "true" : "false");
    if (err)
        bstr(b, err, strlen(err));
    else
        bputs(b, "null");
    bprintf(b, ", \"compile_us\": %.0f, \"texts\": [", compile_us);
    for (size_t i = 0; i < nres; i++) {
        bputs(b, i ? ", {" : "{");
        if (valid) bprintf(b, "\"valid\": %s, ", valid[i] ? "true" : "false");
        bprintf(b, "\"accepted\": %s, \"tokens\": %zu, \"rejected_at\": ", res[i].accepted ? "true" : "false",
                res[i].tokens);
        if (res[i].rejected_at >= 0)
            bprintf(b, "%ld}", res[i].rejected_at);
        else
            bputs(b, "null}");
    }
    double mean = 0, p50 = 0, p99 = 0, mx = 0;
    FILE *tf = times_out();
    if (tf) {
        for (size_t i = 0; i < times->n; i++) fprintf(tf, "%.3f\n", times->v[i]);
        fflush(tf);
    }
    if (times->n) {
        qsort(times->v, times->n, sizeof(double), cmp_d);
        for (size_t i = 0; i < times->n; i++) mean += times->v[i];
        mean /= (double)times->n;
        p50 = times->v[times->n * 50 / 100];
        p99 = times->v[times->n * 99 / 100];
        mx = times->v[times->n - 1];
    }
    bprintf(b, "], \"mask_us\": {\"n\": %zu, \"mean\": %.3f, \"p50\": %.3f, \"p99\": %.3f, \"max\": %.3f}}\n",
            times->n, mean, p50, p99, mx);
    fwrite(b->p, 1, b->n, stdout);
    fflush(stdout);
}

/* Compile spec; on failure *err gets the message (caller frees). */
static lp_grammar_t *compile(lp_grammar_vocab_t *gv, const lp_grammar_spec_t *spec, double *us, char **err)
{
    lp_grammar_t *g = NULL;
    double t0 = now_us();
    int rc = lp_grammar_compile(gv, spec, &g);
    lp_grammar_matcher_t *m = NULL;
    if (!rc) rc = lp_grammar_matcher_new(g, &m); /* ready for its first mask */
    *us = now_us() - t0;
    lp_grammar_matcher_destroy(&m);
    if (rc) {
        *err = strdup(lp_error_msg());
        lp_grammar_unref(&g);
        return NULL;
    }
    *err = NULL;
    return g;
}

/* A file's content, or the argument itself when no such file exists. */
static int file_or_text(const char *arg, char **out, size_t *len)
{
    struct stat st;
    if (!stat(arg, &st)) return lp_read_file(arg, out, len);
    *len = strlen(arg);
    *out = strdup(arg);
    return *out ? 0 : LP_ERR(ENOMEM);
}

#define USAGE_CHECK                                                                              \
    "usage: lmpipe grammar check --vocab V.gguf (--schema S | --gbnf G [--rule NAME=SCHEMA]... | --regex R)\n" \
    "                            [--text FILE]..."
#define USAGE_MB "usage: lmpipe grammar maskbench --vocab V.gguf FILE.json..."

static int load_vocab(const char *path, lp_tokenizer_t **tok, lp_grammar_vocab_t **gv)
{
    if (lp_tokenizer_new(path, tok)) {
        fprintf(stderr, "lmpipe grammar: %s: %s\n", path, lp_error_msg());
        return 1;
    }
    if (lp_grammar_vocab_new(*tok, gv)) {
        fprintf(stderr, "lmpipe grammar: %s: %s\n", path, lp_error_msg());
        lp_tokenizer_destroy(tok);
        return 1;
    }
    return 0;
}

static int cmd_check(int argc, char **argv)
{
    const char *vocab = NULL, *src = NULL;
    enum lp_grammar_kind kind = 0;
    const char **texts = calloc((size_t)argc, sizeof(char *));
    const char **rules = calloc((size_t)argc, sizeof(char *));
    lp_grammar_schema_rule_t *sr = calloc((size_t)argc, sizeof(*sr));
    size_t nt = 0, nr = 0;
    if (!texts || !rules || !sr) {
        free(texts);
        free(rules);
        free(sr);
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if (!strcmp(a, "--vocab") && has) vocab = argv[++i];
        else if (!strcmp(a, "--schema") && has && !src) kind = LP_GRAMMAR_JSON_SCHEMA, src = argv[++i];
        else if (!strcmp(a, "--gbnf") && has && !src) kind = LP_GRAMMAR_GBNF, src = argv[++i];
        else if (!strcmp(a, "--regex") && has && !src) kind = LP_GRAMMAR_REGEX, src = argv[++i];
        else if (!strcmp(a, "--text") && has) texts[nt++] = argv[++i];
        else if (!strcmp(a, "--rule") && has && strchr(argv[i + 1], '=')) rules[nr++] = argv[++i];
        else {
            free(texts);
            free(rules);
            free(sr);
            return lp_cmd_usage_error("grammar check", "unexpected argument '%s'\n" USAGE_CHECK, a);
        }
    }
    if (!vocab || !src || (nr && kind != LP_GRAMMAR_GBNF)) {
        free(texts);
        free(rules);
        free(sr);
        if (nr && src) return lp_cmd_usage_error("grammar check", "--rule goes with --gbnf\n" USAGE_CHECK);
        return lp_cmd_usage_error("grammar check", "--vocab and one grammar are required\n" USAGE_CHECK);
    }
    lp_tokenizer_t *tok;
    lp_grammar_vocab_t *gv;
    if (load_vocab(vocab, &tok, &gv)) {
        free(texts);
        free(rules);
        free(sr);
        return 1;
    }
    int status = 0;
    char *text = NULL;
    size_t len = 0;
    buf_t out = {0};
    times_t times = {0};
    result_t *res = calloc(nt ? nt : 1, sizeof(result_t));
    uint64_t *mask = malloc(lp_grammar_mask_words(gv) * sizeof(uint64_t));
    if (!res || !mask) {
        status = 1;
        goto done;
    }
    if (file_or_text(src, &text, &len)) {
        fprintf(stderr, "lmpipe grammar: %s: %s\n", src, lp_error_msg());
        status = 1;
        goto done;
    }
    for (size_t i = 0; i < nr; i++) {
        char *eq = strchr(rules[i], '='), *st;
        *eq = '\0'; /* argv is ours */
        sr[i].name = rules[i];
        if (file_or_text(eq + 1, &st, &sr[i].schema_len)) {
            fprintf(stderr, "lmpipe grammar: %s: %s\n", eq + 1, lp_error_msg());
            status = 1;
            goto done;
        }
        sr[i].schema = st;
    }
    lp_grammar_spec_t spec = {.kind = kind, .text = text, .len = len, .schema_rules = sr, .n_schema_rules = nr};
    double cus;
    char *err;
    lp_grammar_t *g = compile(gv, &spec, &cus, &err);
    for (size_t i = 0; i < nt; i++) {
        char *t;
        size_t tl;
        if (lp_read_file(texts[i], &t, &tl)) {
            fprintf(stderr, "lmpipe grammar: %s: %s\n", texts[i], lp_error_msg());
            status = 1;
            break;
        }
        if (g) {
            if (feed(g, tok, gv, t, tl, mask, &times, &res[i])) {
                fprintf(stderr, "lmpipe grammar: %s: %s\n", texts[i], lp_error_msg());
                status = 1;
            }
        } else {
            int32_t *ids = NULL;
            size_t n = 0;
            if (!lp_tokenize_alloc(tok, t, tl, false, false, &ids, &n)) res[i].tokens = n;
            free(ids);
            res[i].rejected_at = -1;
        }
        free(t);
    }
    if (!status) print_line(&out, NULL, g != NULL, err, cus, res, NULL, nt, &times);
    free(err);
    lp_grammar_unref(&g);
done:
    free(text);
    free(out.p);
    free(times.v);
    free(res);
    free(mask);
    free(texts);
    for (size_t i = 0; i < nr; i++) free((char *)sr[i].schema);
    free(sr);
    free(rules);
    lp_grammar_vocab_destroy(&gv);
    lp_tokenizer_destroy(&tok);
    return status;
}

static int cmd_maskbench(int argc, char **argv)
{
    const char *vocab = NULL;
    int first = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--vocab") && i + 1 < argc) {
            vocab = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1] == '-') {
            return lp_cmd_usage_error("grammar maskbench", "unexpected argument '%s'\n" USAGE_MB, argv[i]);
        } else if (!first) {
            first = i;
        }
    }
    if (!vocab || !first)
        return lp_cmd_usage_error("grammar maskbench", "--vocab and at least one file are required\n" USAGE_MB);
    lp_tokenizer_t *tok;
    lp_grammar_vocab_t *gv;
    if (load_vocab(vocab, &tok, &gv)) return 1;
    int status = 0;
    buf_t out = {0}, sb = {0}, tb = {0};
    uint64_t *mask = malloc(lp_grammar_mask_words(gv) * sizeof(uint64_t));
    if (!mask) status = 1;
    for (int i = first; i < argc && !status; i++) {
        if (!strcmp(argv[i], "--vocab")) {
            i++;
            continue;
        }
        const char *file = argv[i];
        char *content = NULL;
        size_t clen;
        lp_json_doc_t *doc = NULL;
        if (lp_read_file(file, &content, &clen) || lp_json_parse(content, clen, &doc)) {
            fprintf(stderr, "lmpipe grammar: %s: %s\n", file, lp_error_msg());
            free(content);
            status = 1;
            break;
        }
        const lp_json_t *root = lp_json_root(doc);
        const lp_json_t *schema = lp_json_get(root, "schema");
        const lp_json_t *tests = lp_json_get(root, "tests");
        if (!schema || (tests && tests->type != LP_JSON_ARRAY)) {
            fprintf(stderr, "lmpipe grammar: %s: not a MaskBench file (\"schema\", \"tests\")\n", file);
            status = 1;
        } else {
            size_t ntests = tests ? tests->n : 0;
            result_t *res = calloc(2 * ntests + 1, sizeof(result_t));
            int *valid = calloc(2 * ntests + 1, sizeof(int));
            times_t times = {0};
            sb.n = 0;
            ser(&sb, schema, 0, 0);
            lp_grammar_spec_t spec = {.kind = LP_GRAMMAR_JSON_SCHEMA, .text = sb.p, .len = sb.n, .compact = false};
            double cus;
            char *err;
            lp_grammar_t *g = compile(gv, &spec, &cus, &err);
            for (size_t t = 0; t < ntests && res; t++) {
                const lp_json_t *test = &tests->u.items[t];
                const lp_json_t *data = lp_json_get(test, "data");
                const lp_json_t *vf = lp_json_get(test, "valid");
                for (int k = 0; k < 2; k++) {
                    result_t *r = &res[2 * t + k];
                    valid[2 * t + k] = vf && vf->type == LP_JSON_BOOL && vf->u.b;
                    r->rejected_at = -1;
                    tb.n = 0;
                    if (data) ser(&tb, data, k ? 2 : 0, 0);
                    if (tb.oom) continue;
                    if (g) {
                        if (feed(g, tok, gv, tb.p ? tb.p : "", tb.n, mask, &times, r))
                            fprintf(stderr, "lmpipe grammar: %s: test %zu: %s\n", file, t, lp_error_msg());
                    } else {
                        int32_t *ids = NULL;
                        size_t n = 0;
                        if (!lp_tokenize_alloc(tok, tb.p ? tb.p : "", tb.n, false, false, &ids, &n))
                            r->tokens = n;
                        free(ids);
                    }
                }
            }
            if (res && valid) print_line(&out, file, g != NULL, err, cus, res, valid, 2 * ntests, &times);
            else status = 1;
            free(err);
            lp_grammar_unref(&g);
            free(res);
            free(valid);
            free(times.v);
        }
        lp_json_doc_destroy(&doc);
        free(content);
    }
    free(out.p);
    free(sb.p);
    free(tb.p);
    free(mask);
    lp_grammar_vocab_destroy(&gv);
    lp_tokenizer_destroy(&tok);
    return status;
}

int lp_cmd_grammar(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "check")) return cmd_check(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "maskbench")) return cmd_maskbench(argc - 1, argv + 1);
    return lp_cmd_usage_error("grammar", "expected check or maskbench\n" USAGE_CHECK "\n" USAGE_MB);
}
