/* store-state.c - the strategy store kept in a file, so that live swaps
 * survive a sampler restart: every change is written (temp file, fsync,
 * rename) before it is published, and the file is read back at start,
 * plugins reloaded from the plugin folder with the same checks.
 *
 *   {"lmpipe_sampler_state":1,"next_version":N,
 *    "current":{"version":V,"params":{...},"plugins":[{"name":..,"path":..,"config":..}]},
 *    "history":[ older strategies, oldest first, the same form ]} */
#include "store-impl.h"

#include "error.h"
#include "fileio.h"
#include "json.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STATE_FORMAT 1

/* ---- writing ----------------------------------------------------------------- */

/* Out of memory writes a NUL byte, which JSON text never holds: the save
 * sees it and fails. */
static void put_quoted(FILE *f, const char *s)
{
    size_t need = lp_json_quote(NULL, 0, s, strlen(s));
    char *q = malloc(need + 1);
    if (!q) {
        fputc('\0', f);
        return;
    }
    lp_json_quote(q, need + 1, s, strlen(s));
    fwrite(q, 1, need, f);
    free(q);
}

static void put_config(FILE *f, const lp__config_t *c)
{
    size_t need = lp_sampler_params_to_json(&c->params, NULL, 0);
    char *pj = malloc(need + 1);
    if (pj) lp_sampler_params_to_json(&c->params, pj, need + 1);
    fprintf(f, "{\"version\":%" PRIu64 ",\"params\":%s,\"plugins\":[", c->version, pj ? pj : "");
    if (!pj) fputc('\0', f);
    free(pj);
    for (int i = 0; i < c->n_plugins; i++) {
        fputs(i ? ",{\"name\":" : "{\"name\":", f);
        put_quoted(f, lp_plugin_desc(c->plugins[i].plugin)->name);
        fputs(",\"path\":", f);
        put_quoted(f, lp_plugin_path(c->plugins[i].plugin));
        fputs(",\"config\":", f);
        put_quoted(f, c->plugins[i].config);
        fputc('}', f);
    }
    fputs("]}", f);
}

int lp__store_state_save(const char *path, uint64_t next_version, const lp__config_t *cur,
                         lp__config_t *const *hist, int n_hist)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m) return lp_error_set(LP_ERR(ENOMEM), "state file %s: out of memory", path);
    fprintf(m, "{\"lmpipe_sampler_state\":%d,\"next_version\":%" PRIu64 ",\"current\":",
            STATE_FORMAT, next_version);
    put_config(m, cur);
    fputs(",\"history\":[", m);
    for (int i = 0; i < n_hist; i++) {
        if (i) fputc(',', m);
        put_config(m, hist[i]);
    }
    fputs("]}\n", m);
    bool bad = ferror(m) != 0;
    if (fclose(m) != 0 || bad || memchr(text, '\0', len)) {
        free(text);
        return lp_error_set(LP_ERR(ENOMEM), "state file %s: out of memory", path);
    }

    /* a crash at any point leaves the old file or the new one, whole */
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 32);
    if (!tmp) {
        free(text);
        return lp_error_set(LP_ERR(ENOMEM), "state file %s: out of memory", path);
    }
    snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    int rc = 0;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = lp_error_set(LP_ERR(errno), "state file %s: %s", tmp, strerror(errno));
    } else {
        size_t off = 0;
        while (!rc && off < len) {
            ssize_t k = write(fd, text + off, len - off);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) rc = lp_error_set(LP_ERR(errno ? errno : EIO), "state file %s: write: %s",
                                          tmp, strerror(errno ? errno : EIO));
            else off += (size_t)k;
        }
        if (!rc && fsync(fd) != 0)
            rc = lp_error_set(LP_ERR(errno), "state file %s: fsync: %s", tmp, strerror(errno));
        close(fd);
        if (!rc && rename(tmp, path) != 0)
            rc = lp_error_set(LP_ERR(errno), "state file %s: rename: %s", path, strerror(errno));
        if (rc) unlink(tmp);
    }
    if (!rc) {
        /* the rename itself must reach the disk */
        char *d = strdup(path);
        int dfd = d ? open(dirname(d), O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
        free(d);
    }
    free(tmp);
    free(text);
    return rc;
}

/* ---- reading ----------------------------------------------------------------- */

/* Plugins opened while a file is read: each path once, refusals reported
 * once. */
typedef struct opened {
    char *path;
    lp_plugin_t *plugin; /* one reference; NULL: refused */
} opened_t;

typedef struct loader {
    const char *file;
    const char *dir; /* the plugin folder; may be NULL */
    opened_t v[LP_STORE_MAX_PLUGINS * (LP_STORE_HISTORY + 1)];
    int n;
} loader_t;

static lp_plugin_t *loader_open(loader_t *ld, const char *path, const char *name)
{
    for (int i = 0; i < ld->n; i++)
        if (!strcmp(ld->v[i].path, path)) return ld->v[i].plugin;
    if (ld->n == (int)(sizeof(ld->v) / sizeof(ld->v[0]))) return NULL;
    char *real = NULL;
    lp_plugin_t *pl = NULL;
    int rc = lp_plugin_resolve(ld->dir, path, &real);
    if (!rc) rc = lp_plugin_open(real, &pl);
    free(real);
    if (!rc && strcmp(lp_plugin_desc(pl)->name, name) != 0) {
        rc = lp_error_set(LP_ERR(EINVAL), "plugin %s is now named \"%s\"", path,
                          lp_plugin_desc(pl)->name);
        lp_plugin_unref(&pl);
    }
    if (rc)
        LP_WARN("sampler state %s: plugin \"%s\" (%s) is not reloaded, and the strategies "
                "that used it go on without it: %s", ld->file, name, path, lp_error_msg());
    ld->v[ld->n].path = strdup(path);
    ld->v[ld->n].plugin = pl;
    if (!ld->v[ld->n].path) lp_plugin_unref(&pl);
    else ld->n++;
    return pl;
}

static void loader_clear(loader_t *ld)
{
    for (int i = 0; i < ld->n; i++) {
        free(ld->v[i].path);
        lp_plugin_unref(&ld->v[i].plugin);
    }
    ld->n = 0;
}

static const char *str_of(const lp_json_t *o, const char *key)
{
    const lp_json_t *v = lp_json_get(o, key);
    return v && v->type == LP_JSON_STRING && strlen(v->u.str) == v->n ? v->u.str : NULL;
}

/* One strategy; *dropped tells whether a plugin of it was left out. */
static int read_config(loader_t *ld, const lp_json_t *o, const char *where, lp__config_t **out,
                       bool *dropped)
{
    *out = NULL;
    *dropped = false;
    int64_t version;
    const lp_json_t *params = lp_json_get(o, "params"), *plugins = lp_json_get(o, "plugins");
    if (!o || o->type != LP_JSON_OBJECT)
        return lp_error_set(LP_ERR(EINVAL), "%s: not an object", where);
    if (lp_json_int(lp_json_get(o, "version"), 1, INT64_MAX, &version))
        return lp_error_set(LP_ERR(EINVAL), "%s.version: missing or not a positive integer", where);
    if (!params || params->type != LP_JSON_OBJECT)
        return lp_error_set(LP_ERR(EINVAL), "%s.params: missing or not an object", where);
    if (!plugins || plugins->type != LP_JSON_ARRAY || plugins->n > LP_STORE_MAX_PLUGINS)
        return lp_error_set(LP_ERR(EINVAL), "%s.plugins: missing, not an array, or more than %d",
                            where, LP_STORE_MAX_PLUGINS);
    lp__config_t *c = calloc(1, sizeof(*c));
    if (!c) return lp_error_set(LP_ERR(ENOMEM), "sampler store: out of memory");
    atomic_init(&c->refs, 1);
    c->version = (uint64_t)version;
    lp_sampler_params_default(&c->params);
    int rc = lp_sampler_params_from_json(params, LP_SAMPLER_PARAMS_STRICT, &c->params);
    if (rc) lp_error_prefix("%s.params: ", where);
    c->params.set = 0;
    for (size_t i = 0; !rc && i < plugins->n; i++) {
        const lp_json_t *p = &plugins->u.items[i];
        const char *name = str_of(p, "name"), *path = str_of(p, "path"), *cfg = str_of(p, "config");
        if (!name || !path || !cfg) {
            rc = lp_error_set(LP_ERR(EINVAL), "%s.plugins[%zu]: needs the strings name, path "
                              "and config", where, i);
            break;
        }
        lp_plugin_t *pl = loader_open(ld, path, name);
        if (!pl) {
            /* its steps go, as an unload would take them */
            int32_t k = 0;
            for (int32_t s = 0; s < c->params.n_steps; s++) {
                const lp_sampler_step_t *st = &c->params.steps[s];
                if (st->kind == LP_SAMPLER_PLUGIN && !strcmp(st->plugin, name)) continue;
                c->params.steps[k++] = *st;
            }
            c->params.n_steps = k;
            *dropped = true;
            continue;
        }
        char *dup = strdup(cfg);
        if (!dup) {
            rc = lp_error_set(LP_ERR(ENOMEM), "sampler store: out of memory");
            break;
        }
        lp_plugin_ref(pl);
        c->plugins[c->n_plugins].plugin = pl;
        c->plugins[c->n_plugins].config = dup;
        c->n_plugins++;
    }
    if (!rc && (rc = lp__config_check(c)) != 0) lp_error_prefix("%s: ", where);
    if (rc) {
        lp__config_unref(&c);
        return rc;
    }
    *out = c;
    return 0;
}

/* Read the file into a new current strategy and history (newest last). */
static int state_load(lp_sampler_store_t *st, const char *path, const char *text, size_t len)
{
    lp_json_doc_t *doc;
    int rc = lp_json_parse(text, len, &doc);
    if (rc) {
        lp_error_prefix("state file %s: ", path);
        return rc;
    }
    const lp_json_t *root = lp_json_root(doc);
    const lp_json_t *hist = lp_json_get(root, "history");
    int64_t format, next;
    loader_t *ld = calloc(1, sizeof(*ld));
    lp__config_t *cur = NULL, *h[LP_STORE_HISTORY] = {0};
    int n_h = 0;
    bool dropped = false, d;
    if (!ld) {
        rc = lp_error_set(LP_ERR(ENOMEM), "sampler store: out of memory");
        goto out;
    }
    ld->file = path;
    ld->dir = st->plugin_dir;
    if (!root || root->type != LP_JSON_OBJECT ||
        lp_json_int(lp_json_get(root, "lmpipe_sampler_state"), STATE_FORMAT, STATE_FORMAT,
                    &format)) {
        rc = lp_error_set(LP_ERR(EINVAL), "state file %s: not a sampler state file of format %d "
                          "(\"lmpipe_sampler_state\": %d)", path, STATE_FORMAT, STATE_FORMAT);
        goto out;
    }
    if (lp_json_int(lp_json_get(root, "next_version"), 2, INT64_MAX, &next)) {
        rc = lp_error_set(LP_ERR(EINVAL), "state file %s: next_version: missing or below 2", path);
        goto out;
    }
    if (!hist || hist->type != LP_JSON_ARRAY || hist->n > LP_STORE_HISTORY) {
        rc = lp_error_set(LP_ERR(EINVAL), "state file %s: history: missing, not an array, or "
                          "longer than %d", path, LP_STORE_HISTORY);
        goto out;
    }
    char where[96];
    for (size_t i = 0; i < hist->n; i++) {
        snprintf(where, sizeof(where), "state file %s: history[%zu]", path, i);
        if ((rc = read_config(ld, &hist->u.items[i], where, &h[n_h], &d)) != 0) goto out;
        n_h++;
    }
    snprintf(where, sizeof(where), "state file %s: current", path);
    if ((rc = read_config(ld, lp_json_get(root, "current"), where, &cur, &dropped)) != 0) goto out;
    uint64_t top = cur->version;
    for (int i = 0; i < n_h; i++) top = h[i]->version > top ? h[i]->version : top;
    if ((uint64_t)next <= top) {
        rc = lp_error_set(LP_ERR(EINVAL), "state file %s: next_version %" PRId64 " is not above "
                          "version %" PRIu64 " in it", path, next, top);
        goto out;
    }
    pthread_mutex_lock(&st->lock);
    lp__config_unref(&st->cur);
    for (int i = 0; i < st->n_history; i++) lp__config_unref(&st->history[i]);
    st->cur = cur;
    memcpy(st->history, h, sizeof(h));
    st->n_history = n_h;
    st->next_version = (uint64_t)next;
    cur = NULL;
    n_h = 0;
    if (dropped) {
        /* the strategy in force is no longer the one its version named */
        lp__config_t *again = lp__config_copy(st->cur);
        rc = again ? lp__store_publish(st, again, LP__PUBLISH_REPLACE, NULL)
                   : lp_error_set(LP_ERR(ENOMEM), "sampler store: out of memory");
        LP_WARN("sampler state %s: version %" PRIu64 " came back without a plugin: it is "
                "version %" PRIu64 " now", path, top, st->cur->version);
    }
    pthread_mutex_unlock(&st->lock);
    if (!rc)
        LP_INFO("sampler state %s: strategy version %" PRIu64 " and %d earlier ones restored",
                path, lp_sampler_store_version(st), st->n_history);
out:
    lp__config_unref(&cur);
    for (int i = 0; i < n_h; i++) lp__config_unref(&h[i]);
    if (ld) loader_clear(ld);
    free(ld);
    lp_json_doc_destroy(&doc);
    return rc;
}

int lp_sampler_store_set_state_file(lp_sampler_store_t *st, const char *path)
{
    if (!path || !path[0]) return lp_error_set(LP_ERR(EINVAL), "state file: empty path");
    char *text = NULL;
    size_t len = 0;
    int rc = lp_read_file(path, &text, &len);
    if (rc == LP_ERR(ENOENT)) {
        rc = 0; /* a first start: the file comes with the first change */
    } else if (!rc) {
        rc = state_load(st, path, text, len);
    }
    free(text);
    if (rc) return rc;
    char *p = strdup(path);
    if (!p) return lp_error_set(LP_ERR(ENOMEM), "sampler store: out of memory");
    pthread_mutex_lock(&st->lock);
    free(st->state_file);
    st->state_file = p;
    pthread_mutex_unlock(&st->lock);
    return 0;
}
