/* params.c - parameter tables read from the config file and the command
 * line (see params.h). */
#include "params.h"

#include "error.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

struct lp_params_ctx {
    lp_config_t *cfg;
    char *bufs[64]; /* lists split from config values */
    int n_bufs;
};

void lp_params_ctx_destroy(lp_params_ctx_t **self_p)
{
    if (!self_p || !*self_p) return;
    lp_params_ctx_t *c = *self_p;
    lp_config_destroy(&c->cfg);
    for (int i = 0; i < c->n_bufs; i++) free(c->bufs[i]);
    free(c);
    *self_p = NULL;
}

const lp_config_t *lp_params_ctx_config(const lp_params_ctx_t *ctx) { return ctx ? ctx->cfg : NULL; }

bool lp_param_key_match(const char *pattern, const char *key)
{
    for (;;) {
        size_t pl = strcspn(pattern, "."), kl = strcspn(key, ".");
        if (!(pl == 1 && pattern[0] == '*' && kl > 0) && (pl != kl || memcmp(pattern, key, pl))) return false;
        if (!pattern[pl] || !key[kl]) return !pattern[pl] && !key[kl];
        pattern += pl + 1;
        key += kl + 1;
    }
}

/* ---- one value ------------------------------------------------------------------ */

/* Where a value came from, for messages: "--kv-block" or "config key engine.kv_block". */
static void origin(const lp_param_t *r, bool from_flag, const char *key, char *out, size_t cap)
{
    if (from_flag) snprintf(out, cap, "--%s", r->flag);
    else snprintf(out, cap, "config key %s", key ? key : r->key);
}

static int set_int(const lp_param_t *r, const char *where, const char *s, void *opts)
{
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    /* the services' flag message and lmpipe up's key message, as before
     * the tables */
    if (!*s || *end || errno || (where[0] == '-' && (x < r->lo || x > r->hi)))
        return lp_error_set(LP_ERR(!*s || *end ? EINVAL : ERANGE), "%s: '%s' is not an integer in %lld..%lld", where,
                            s, (long long)r->lo, (long long)r->hi);
    if (x < r->lo || x > r->hi)
        return lp_error_set(LP_ERR(ERANGE), "%s: %lld is not in %lld..%lld", where, x, (long long)r->lo,
                            (long long)r->hi);
    *(int64_t *)((char *)opts + r->off) = x;
    return 0;
}

static int set_bool_text(const lp_param_t *r, const char *where, const char *s, void *opts)
{
    bool b;
    if (!strcmp(s, "true") || !strcmp(s, "1") || !strcmp(s, "yes")) b = true;
    else if (!strcmp(s, "false") || !strcmp(s, "0") || !strcmp(s, "no")) b = false;
    else return lp_error_set(LP_ERR(EINVAL), "%s: '%s' is not true or false", where, s);
    *(bool *)((char *)opts + r->off) = r->invert ? !b : b;
    return 0;
}

static int list_add(const lp_param_t *r, const char *where, const char *s, void *opts)
{
    lp_param_list_t *l = (lp_param_list_t *)((char *)opts + r->off);
    if (!s[0]) return lp_error_set(LP_ERR(EINVAL), "%s: an empty value", where);
    if (l->n >= LP_PARAM_LIST_MAX) return lp_error_set(LP_ERR(E2BIG), "%s: at most %d values", where, LP_PARAM_LIST_MAX);
    l->v[l->n++] = s;
    return 0;
}

/* A config value: a list is split on commas and blanks into a copy kept in ctx. */
static int set_from_config(const lp_param_t *r, const char *key, const char *s, void *opts, lp_params_ctx_t *ctx)
{
    char where[160];
    origin(r, false, key, where, sizeof(where));
    switch (r->type) {
    case LP_P_STR: *(const char **)((char *)opts + r->off) = s; return 0;
    case LP_P_INT: return set_int(r, where, s, opts);
    case LP_P_BOOL: return set_bool_text(r, where, s, opts);
    case LP_P_MULTI:
        return list_add(r, where, s, opts);
    case LP_P_LIST: {
        char *copy = strdup(s);
        if (!copy) return LP_ERR(ENOMEM);
        if (ctx && ctx->n_bufs < (int)(sizeof(ctx->bufs) / sizeof(ctx->bufs[0]))) ctx->bufs[ctx->n_bufs++] = copy;
        else if (ctx) {
            free(copy);
            return lp_error_set(LP_ERR(E2BIG), "%s: too many lists", where);
        }
        lp_param_list_t *l = (lp_param_list_t *)((char *)opts + r->off);
        l->n = 0; /* the config's list replaces the default */
        char *save = NULL;
        int rc = 0;
        for (char *t = strtok_r(copy, ", \t", &save); !rc && t; t = strtok_r(NULL, ", \t", &save))
            rc = list_add(r, where, t, opts);
        if (!ctx) free(copy);
        if (!ctx) l->n = 0; /* checked only: the strings are gone */
        return rc;
    }
    }
    return 0;
}

int lp_params_from_config(const lp_params_t *t, const lp_config_t *cfg, void *opts, lp_params_ctx_t *ctx)
{
    for (int i = 0; cfg && i < lp_config_n_keys(cfg); i++) {
        const char *k = lp_config_key_at(cfg, i);
        for (size_t j = 0; j < t->n_rows; j++) {
            const lp_param_t *r = &t->rows[j];
            if (!r->key || strchr(r->key, '*') || strcmp(r->key, k)) continue; /* patterns: the service reads them */
            int rc = set_from_config(r, k, lp_config_get(cfg, k, ""), opts, ctx);
            if (rc) return rc;
        }
    }
    return 0;
}

/* ---- the command line ---------------------------------------------------------------- */

void lp_params_usage(const lp_params_t *t, FILE *f)
{
    fprintf(f, "usage: %s [--config FILE --service %s] [options]\n%s\n", t->prog, t->service, t->summary);
    fprintf(f, "Options (each also a key of the config file; a flag wins over its key):\n");
    for (size_t j = 0; j < t->n_rows; j++) {
        const lp_param_t *r = &t->rows[j];
        if (!r->flag) continue;
        char arg[64] = "";
        if (r->type == LP_P_INT) snprintf(arg, sizeof(arg), " N");
        else if (r->type != LP_P_BOOL) snprintf(arg, sizeof(arg), " V");
        char flag[96];
        snprintf(flag, sizeof(flag), "--%s%s%s", r->flag, arg, r->type >= LP_P_LIST ? "..." : "");
        fprintf(f, "  %-30s %s", flag, r->help);
        if (r->type == LP_P_INT) fprintf(f, " (%lld..%lld)", (long long)r->lo, (long long)r->hi);
        if (r->def) fprintf(f, "; default %s", r->def);
        if (r->key) fprintf(f, "; config %s", r->key);
        if (r->required) fprintf(f, "; required");
        fputc('\n', f);
    }
    bool any = false;
    for (size_t j = 0; j < t->n_rows; j++) {
        const lp_param_t *r = &t->rows[j];
        if (r->flag || !r->key) continue;
        if (!any) fprintf(f, "Config keys without a flag:\n");
        any = true;
        fprintf(f, "  %-30s %s%s%s\n", r->key, r->help, r->def ? "; default " : "", r->def ? r->def : "");
    }
}

int lp_params_parse(const lp_params_t *t, void *opts, int argc, char **argv, lp_params_ctx_t **ctx_out)
{
    *ctx_out = NULL;
    lp_params_ctx_t *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) {
        fprintf(stderr, "%s: out of memory\n", t->prog);
        return 2;
    }
    /* the options: every row with a flag, then --config, --service, --help */
    struct option *lo = calloc(t->n_rows + 4, sizeof(*lo));
    if (!lo) {
        free(ctx);
        fprintf(stderr, "%s: out of memory\n", t->prog);
        return 2;
    }
    size_t n = 0;
    for (size_t j = 0; j < t->n_rows; j++) {
        if (!t->rows[j].flag) continue;
        lo[n++] = (struct option){t->rows[j].flag, t->rows[j].type == LP_P_BOOL ? no_argument : required_argument,
                                  NULL, 1000 + (int)j};
    }
    lo[n++] = (struct option){"config", required_argument, NULL, 1 << 20};
    lo[n++] = (struct option){"service", required_argument, NULL, (1 << 20) + 1};
    lo[n++] = (struct option){"help", no_argument, NULL, 'h'};
    const char *config = NULL, *service = NULL;
    int rc = 0, c;
    /* the config first (the flags win over it), then the flags */
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        if (c == 1 << 20) config = optarg;
        else if (c == (1 << 20) + 1) service = optarg;
        else if (c == 'h') rc = 1;
    }
    if (rc == 1) {
        lp_params_usage(t, stdout);
        goto out;
    }
    if (service && strcmp(service, t->service)) {
        fprintf(stderr, "%s: --service %s: this is the %s service\n", t->prog, service, t->service);
        rc = 2;
        goto out;
    }
    if (config) {
        if (lp_config_load(config, &ctx->cfg) || lp_params_from_config(t, ctx->cfg, opts, ctx)) {
            fprintf(stderr, "%s: %s\n", t->prog, lp_error_msg());
            rc = 2;
            goto out;
        }
    }
    bool list_seen[256] = {false};
    opterr = 1;
    optind = 1;
    while (!rc && (c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        if (c == '?' || c == ':') {
            rc = 2;
            break;
        }
        if (c < 1000 || c >= 1000 + (int)t->n_rows) continue;
        const lp_param_t *r = &t->rows[c - 1000];
        char where[96];
        origin(r, true, NULL, where, sizeof(where));
        int e = 0;
        switch (r->type) {
        case LP_P_STR: *(const char **)((char *)opts + r->off) = optarg; break;
        case LP_P_INT: e = set_int(r, where, optarg, opts); break;
        case LP_P_BOOL: *(bool *)((char *)opts + r->off) = true; break; /* the flag's own sense */
        case LP_P_LIST:
        case LP_P_MULTI:
            /* the flags' values replace the config's; a value may be a list too */
            if (c - 1000 < 256 && !list_seen[c - 1000]) {
                ((lp_param_list_t *)((char *)opts + r->off))->n = 0;
                list_seen[c - 1000] = true;
            }
            if (r->type == LP_P_MULTI) e = list_add(r, where, optarg, opts);
            for (char *save = NULL, *tk = r->type == LP_P_LIST ? strtok_r(optarg, ",", &save) : NULL; !e && tk;
                 tk = strtok_r(NULL, ",", &save))
                e = list_add(r, where, tk, opts);
            break;
        }
        if (e) {
            fprintf(stderr, "%s: %s\n", t->prog, lp_error_msg());
            rc = 2;
        }
    }
    if (!rc && optind != argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", t->prog, argv[optind]);
        rc = 2;
    }
    for (size_t j = 0; !rc && j < t->n_rows; j++) {
        const lp_param_t *r = &t->rows[j];
        if (!r->required) continue;
        bool have = r->type == LP_P_STR ? *(const char **)((char *)opts + r->off) != NULL
                    : r->type == LP_P_LIST || r->type == LP_P_MULTI ? ((lp_param_list_t *)((char *)opts + r->off))->n > 0
                                                                    : true;
        if (!have) {
            fprintf(stderr, "%s: %s%s%s%s is required\n", t->prog, r->flag ? "--" : "", r->flag ? r->flag : "",
                    r->flag && r->key ? " (config " : r->key ? "config " : "", r->key ? r->key : "");
            if (r->flag && r->key) fputs(")\n", stderr);
            rc = 2;
        }
    }
    if (rc == 2) lp_params_usage(t, stderr);
out:
    free(lo);
    if (rc) {
        lp_params_ctx_destroy(&ctx);
        return rc;
    }
    *ctx_out = ctx;
    return 0;
}

/* ---- lmpipe up: the whole file -------------------------------------------------------- */

int lp_params_check_config(const lp_params_t *const *tables, size_t n, const lp_config_t *cfg,
                           const char *const *own_keys)
{
    for (int i = 0; i < lp_config_n_keys(cfg); i++) {
        const char *k = lp_config_key_at(cfg, i);
        bool known = false;
        for (size_t t = 0; !known && t < n; t++)
            for (size_t j = 0; !known && j < tables[t]->n_rows; j++)
                known = tables[t]->rows[j].key && lp_param_key_match(tables[t]->rows[j].key, k);
        for (size_t j = 0; !known && own_keys && own_keys[j]; j++) known = !strcmp(own_keys[j], k);
        if (!known) return lp_error_set(LP_ERR(EINVAL), "config: unknown key '%s' (lmpipe schema --config lists them)", k);
    }
    for (size_t t = 0; t < n; t++) {
        void *scratch = calloc(1, tables[t]->opts_size);
        if (!scratch) return LP_ERR(ENOMEM);
        int rc = lp_params_from_config(tables[t], cfg, scratch, NULL);
        free(scratch);
        if (rc) return rc;
    }
    return 0;
}

/* ---- printed ----------------------------------------------------------------------------- */

void lp_params_write_json(const lp_params_t *t, lp_json_buf_t *b)
{
    static const char *const types[] = {"string", "integer", "boolean", "list", "repeated"};
    lp_json_buf_printf(b, "{\"service\":\"%s\",\"prog\":\"%s\",\"params\":[", t->service, t->prog);
    for (size_t j = 0; j < t->n_rows; j++) {
        const lp_param_t *r = &t->rows[j];
        lp_json_buf_puts(b, j ? ",{\"key\":" : "{\"key\":");
        if (r->key) lp_json_buf_str(b, r->key, strlen(r->key));
        else lp_json_buf_puts(b, "null");
        lp_json_buf_puts(b, ",\"flag\":");
        if (r->flag) lp_json_buf_printf(b, "\"--%s\"", r->flag);
        else lp_json_buf_puts(b, "null");
        lp_json_buf_printf(b, ",\"type\":\"%s\"", types[r->type]);
        if (r->type == LP_P_INT) lp_json_buf_printf(b, ",\"range\":[%lld,%lld]", (long long)r->lo, (long long)r->hi);
        lp_json_buf_puts(b, ",\"default\":");
        if (r->def) lp_json_buf_str(b, r->def, strlen(r->def));
        else lp_json_buf_puts(b, "null");
        lp_json_buf_printf(b, ",\"required\":%s,\"help\":", r->required ? "true" : "false");
        lp_json_buf_str(b, r->help, strlen(r->help));
        lp_json_buf_puts(b, "}");
    }
    lp_json_buf_puts(b, "]}");
}

/* A Markdown cell's text: '|' would end the cell. */
static void md_cell(lp_json_buf_t *b, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '|') lp_json_buf_puts(b, "\\|");
        else lp_json_buf_put(b, s, 1);
    }
}

void lp_params_write_markdown(const lp_params_t *t, lp_json_buf_t *b)
{
    static const char *const types[] = {"string", "integer", "boolean", "list", "repeated"};
    lp_json_buf_printf(b, "\n#### %s (`%s`)\n\n| key | flag | type | range | default | what |\n|---|---|---|---|---|---|\n",
                       t->service, t->prog);
    for (size_t j = 0; j < t->n_rows; j++) {
        const lp_param_t *r = &t->rows[j];
        if (!r->key) continue; /* flags alone: the binary's --help */
        lp_json_buf_printf(b, "| `%s` | ", r->key);
        if (r->flag) lp_json_buf_printf(b, "`--%s`", r->flag);
        lp_json_buf_printf(b, " | %s | ", types[r->type]);
        if (r->type == LP_P_INT) lp_json_buf_printf(b, "%lld..%lld", (long long)r->lo, (long long)r->hi);
        lp_json_buf_puts(b, " | ");
        md_cell(b, r->def);
        lp_json_buf_puts(b, " | ");
        md_cell(b, r->help);
        lp_json_buf_puts(b, r->required ? " (required) |\n" : " |\n");
    }
}
