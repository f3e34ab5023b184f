/* config.c - `key = value` configuration files (see config.h). */
#include "config.h"

#include "error.h"

#include <ctype.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct kv {
    char *key, *value;
} kv_t;

struct lp_config {
    kv_t *kv;
    int n, cap;
};

lp_config_t *lp_config_new(void) { return calloc(1, sizeof(lp_config_t)); }

void lp_config_destroy(lp_config_t **self_p)
{
    if (!self_p || !*self_p) return;
    lp_config_t *c = *self_p;
    for (int i = 0; i < c->n; i++) {
        free(c->kv[i].key);
        free(c->kv[i].value);
    }
    free(c->kv);
    free(c);
    *self_p = NULL;
}

int lp_config_set(lp_config_t *c, const char *key, const char *value)
{
    char *v = strdup(value);
    if (!v) return LP_ERR(ENOMEM);
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->kv[i].key, key)) {
            free(c->kv[i].value);
            c->kv[i].value = v;
            return 0;
        }
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 16;
        kv_t *n = realloc(c->kv, (size_t)cap * sizeof(kv_t));
        if (!n) {
            free(v);
            return LP_ERR(ENOMEM);
        }
        c->kv = n;
        c->cap = cap;
    }
    char *k = strdup(key);
    if (!k) {
        free(v);
        return LP_ERR(ENOMEM);
    }
    c->kv[c->n++] = (kv_t){k, v};
    return 0;
}

int lp_config_setf(lp_config_t *c, const char *key, const char *fmt, ...)
{
    char v[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v, sizeof(v), fmt, ap);
    va_end(ap);
    return lp_config_set(c, key, v);
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
    return s;
}

int lp_config_load(const char *path, lp_config_t **out)
{
    *out = NULL;
    FILE *f = fopen(path, "r");
    if (!f) return lp_error_set(LP_ERR(errno), "config %s: %s", path, strerror(errno));
    lp_config_t *c = lp_config_new();
    if (!c) {
        fclose(f);
        return LP_ERR(ENOMEM);
    }
    char line[4096];
    int lineno = 0, rc = 0;
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            rc = lp_error_set(LP_ERR(EINVAL), "config %s:%d: line longer than %zu bytes", path,
                              lineno, sizeof(line) - 2);
            break;
        }
        /* A comment starts a line or follows a blank: Z85 keys hold '#'. */
        char *hash = line;
        while ((hash = strchr(hash, '#')) && hash != line && hash[-1] != ' ' && hash[-1] != '\t') hash++;
        if (hash) *hash = '\0';
        char *s = trim(line);
        if (!*s) continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            rc = lp_error_set(LP_ERR(EINVAL), "config %s:%d: expected 'key = value', got '%s'",
                              path, lineno, s);
            break;
        }
        *eq = '\0';
        char *key = trim(s), *value = trim(eq + 1);
        bool ok = *key != '\0';
        for (char *p = key; *p; p++)
            if (!isalnum((unsigned char)*p) && *p != '_' && *p != '.' && *p != '-') ok = false;
        if (!ok) {
            rc = lp_error_set(LP_ERR(EINVAL), "config %s:%d: bad key '%s'", path, lineno, key);
            break;
        }
        if ((rc = lp_config_set(c, key, value)) != 0) break;
    }
    fclose(f);
    if (rc) {
        lp_config_destroy(&c);
        return rc;
    }
    *out = c;
    return 0;
}

const char *lp_config_get(const lp_config_t *c, const char *key, const char *def)
{
    for (int i = 0; c && i < c->n; i++)
        if (!strcmp(c->kv[i].key, key)) return c->kv[i].value;
    return def;
}

int lp_config_get_int(const lp_config_t *c, const char *key, int64_t def, int64_t *out)
{
    const char *v = lp_config_get(c, key, NULL);
    if (!v) {
        *out = def;
        return 0;
    }
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end)
        return lp_error_set(LP_ERR(EINVAL), "config key %s: '%s' is not an integer", key, v);
    *out = x;
    return 0;
}

int lp_config_get_bool(const lp_config_t *c, const char *key, bool def, bool *out)
{
    const char *v = lp_config_get(c, key, NULL);
    if (!v) {
        *out = def;
        return 0;
    }
    if (!strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes")) *out = true;
    else if (!strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "no")) *out = false;
    else return lp_error_set(LP_ERR(EINVAL), "config key %s: '%s' is not true or false", key, v);
    return 0;
}

int lp_config_n_keys(const lp_config_t *c) { return c->n; }
const char *lp_config_key_at(const lp_config_t *c, int i) { return c->kv[i].key; }

int lp_config_save(const lp_config_t *c, const char *path)
{
    for (int i = 0; i < c->n; i++) {
        const char *v = c->kv[i].value;
        size_t n = strlen(v);
        bool bad = strchr(v, '\n') || strchr(v, '\r') || (n && (isspace((unsigned char)v[0]) ||
                                                               isspace((unsigned char)v[n - 1])));
        for (size_t k = 1; k < n && !bad; k++) bad = v[k] == '#' && (v[k - 1] == ' ' || v[k - 1] == '\t');
        if (bad || v[0] == '#')
            return lp_error_set(LP_ERR(EINVAL), "config key %s: its value would not read back the same", c->kv[i].key);
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return lp_error_set(LP_ERR(errno), "config %s: %s", path, strerror(errno));
    FILE *f = fdopen(fd, "w");
    if (!f) {
        int e = errno;
        close(fd);
        return lp_error_set(LP_ERR(e), "config %s: %s", path, strerror(e));
    }
    fprintf(f, "# written by lmpipe up for this run's services\n");
    for (int i = 0; i < c->n; i++) fprintf(f, "%s = %s\n", c->kv[i].key, c->kv[i].value);
    bool err = ferror(f) != 0;
    if (fclose(f) != 0 || err) return lp_error_set(LP_ERR(EIO), "config %s: write failed", path);
    return 0;
}
