/* store.c - the versioned default strategy: swap, plugin load and unload,
 * rollback, description, and the control messages that drive them. */
#include "store-impl.h"

#include "chain.h"
#include "error.h"
#include "json.h"
#include "log.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- strategies -------------------------------------------------------------- */

lp__config_t *lp__config_copy(const lp__config_t *src)
{
    lp__config_t *c = malloc(sizeof(*c));
    if (!c) return NULL;
    memcpy(c, src, sizeof(*c));
    atomic_init(&c->refs, 1);
    for (int i = 0; i < c->n_plugins; i++) {
        lp_plugin_ref(c->plugins[i].plugin);
        c->plugins[i].config = strdup(src->plugins[i].config);
        if (!c->plugins[i].config) {
            for (int k = 0; k <= i; k++) {
                lp_plugin_unref(&c->plugins[k].plugin);
                free(c->plugins[k].config);
            }
            free(c);
            return NULL;
        }
    }
    return c;
}

void lp__config_unref(lp__config_t **c_p)
{
    if (!c_p || !*c_p) return;
    lp__config_t *c = *c_p;
    *c_p = NULL;
    if (atomic_fetch_sub(&c->refs, 1) != 1) return;
    for (int i = 0; i < c->n_plugins; i++) {
        lp_plugin_unref(&c->plugins[i].plugin);
        free(c->plugins[i].config);
    }
    free(c);
}

int lp__config_lookup(void *user, const char *name, const lp_sampler_plugin_t **desc,
                      const char **config)
{
    const lp__config_t *c = user;
    for (int i = 0; i < c->n_plugins; i++) {
        const lp_sampler_plugin_t *d = lp_plugin_desc(c->plugins[i].plugin);
        if (!strcmp(d->name, name)) {
            *desc = d;
            *config = c->plugins[i].config;
            return 0;
        }
    }
    return LP_ERR(ENOENT);
}

/* A strategy is usable when its chain builds (plugins' init accept their
 * configuration, every named plugin is loaded). */
int lp__config_check(lp__config_t *c)
{
    lp_rng_t rng;
    lp_rng_seed(&rng, 0);
    lp_sampler_t *chain;
    int rc = lp_sampler_chain_build(&c->params, 0, &rng, lp__config_lookup, c, NULL, &chain);
    lp_sampler_destroy(&chain);
    return rc;
}

/* ---- store ----------------------------------------------------------------------- */

int lp_sampler_store_new(const char *default_json, lp_sampler_store_t **out)
{
    *out = NULL;
    lp_sampler_store_t *st = calloc(1, sizeof(*st));
    lp__config_t *c = calloc(1, sizeof(*c));
    if (!st || !c) {
        free(st);
        free(c);
        return lp_error_set(LP_ERR(ENOMEM), "sampler store: out of memory");
    }
    atomic_init(&c->refs, 1);
    c->version = 1;
    lp_sampler_params_default(&c->params);
    if (default_json) {
        int rc = lp_sampler_params_parse(default_json, strlen(default_json),
                                         LP_SAMPLER_PARAMS_STRICT, &c->params);
        if (!rc) rc = lp__config_check(c);
        if (rc) {
            free(c);
            free(st);
            return rc;
        }
    }
    c->params.set = 0; /* the default is the base: nothing in it is an override */
    pthread_mutex_init(&st->lock, NULL);
    pthread_mutex_init(&st->breakers_lock, NULL);
    st->cur = c;
    st->next_version = 2;
    *out = st;
    return 0;
}

void lp_sampler_store_destroy(lp_sampler_store_t **self_p)
{
    if (!self_p || !*self_p) return;
    lp_sampler_store_t *st = *self_p;
    lp__config_unref(&st->cur);
    for (int i = 0; i < st->n_history; i++) lp__config_unref(&st->history[i]);
    pthread_mutex_destroy(&st->lock);
    for (int i = 0; i < st->n_breakers_cache; i++) {
        free(st->breakers_cache[i].key);
        lp_dry_breakers_destroy(&st->breakers_cache[i].table);
    }
    pthread_mutex_destroy(&st->breakers_lock);
    free(st->plugin_dir);
    free(st->state_file);
    free(st->masked);
    free(st->mask);
    free(st);
    *self_p = NULL;
}

int lp_sampler_store_set_vocab(lp_sampler_store_t *st, int32_t n_real, const uint8_t *mask,
                               int32_t n_mask)
{
    if (n_real <= 0)
        return lp_error_set(LP_ERR(EINVAL), "sampler vocab: n_real must be > 0, got %d", n_real);
    if (n_mask < 0 || (n_mask > 0 && !mask))
        return lp_error_set(LP_ERR(EINVAL), "sampler vocab: bad mask");
    int32_t lim = n_mask < n_real ? n_mask : n_real, cnt = 0;
    for (int32_t i = 0; i < lim; i++) cnt += mask[i] != 0;
    int32_t *masked = malloc(((size_t)cnt + 1) * sizeof(int32_t));
    uint8_t *m = calloc((size_t)n_real, 1);
    if (!masked || !m) {
        free(masked);
        free(m);
        return lp_error_set(LP_ERR(ENOMEM), "sampler vocab: out of memory");
    }
    cnt = 0;
    for (int32_t i = 0; i < lim; i++)
        if (mask[i]) {
            masked[cnt++] = i;
            m[i] = 1;
        }
    pthread_mutex_lock(&st->lock);
    free(st->masked);
    free(st->mask);
    st->masked = masked;
    st->n_masked = cnt;
    st->mask = m;
    st->n_real = n_real;
    pthread_mutex_unlock(&st->lock);
    return 0;
}

int lp_sampler_store_set_vocab_text(lp_sampler_store_t *st, const lp_sampler_vocab_text_t *vt)
{
    if (!vt || vt->n_tokens <= 0 || !vt->piece || !vt->tokenize)
        return lp_error_set(LP_ERR(EINVAL), "sampler vocab text: incomplete callbacks");
    pthread_mutex_lock(&st->breakers_lock);
    st->vocab_text = *vt;
    st->has_vocab_text = true;
    for (int i = 0; i < st->n_breakers_cache; i++) {
        free(st->breakers_cache[i].key);
        lp_dry_breakers_destroy(&st->breakers_cache[i].table);
    }
    st->n_breakers_cache = 0;
    pthread_mutex_unlock(&st->breakers_lock);
    return 0;
}

static bool same_text_breakers(const lp_sampler_params_t *a, const lp_sampler_params_t *b)
{
    if (a->n_text_breakers != b->n_text_breakers) return false;
    for (int32_t i = 0; i < a->n_text_breakers; i++)
        if (a->text_breaker_len[i] != b->text_breaker_len[i] ||
            memcmp(a->text_breakers[i], b->text_breakers[i], (size_t)a->text_breaker_len[i]))
            return false;
    return true;
}

int lp__store_dry_breakers(lp_sampler_store_t *st, const lp_sampler_params_t *p,
                           lp_dry_breakers_t **out)
{
    *out = NULL;
    /* only the text breakers are resolved and cached; ID breakers join after */
    lp_sampler_params_t *key = malloc(sizeof(*key));
    if (!key) return lp_error_set(LP_ERR(ENOMEM), "sampler: out of memory");
    memcpy(key, p, sizeof(*key));
    key->n_breakers = 0;
    pthread_mutex_lock(&st->breakers_lock);
    lp_dry_breakers_t *text = NULL;
    int rc = 0;
    for (int i = 0; i < st->n_breakers_cache && !text; i++)
        if (same_text_breakers(st->breakers_cache[i].key, key)) text = st->breakers_cache[i].table;
    if (!text) {
        rc = lp_dry_breakers_build(st->has_vocab_text ? &st->vocab_text : NULL, key, &text);
        if (!rc) {
            if (st->n_breakers_cache == 8) { /* forget the oldest */
                free(st->breakers_cache[0].key);
                lp_dry_breakers_destroy(&st->breakers_cache[0].table);
                memmove(&st->breakers_cache[0], &st->breakers_cache[1], 7 * sizeof(st->breakers_cache[0]));
                st->n_breakers_cache--;
            }
            st->breakers_cache[st->n_breakers_cache].key = key;
            st->breakers_cache[st->n_breakers_cache].table = text;
            st->n_breakers_cache++;
            key = NULL;
        }
    }
    /* the caller's copy: the text table plus p's ID breakers */
    lp_dry_breakers_t *all = NULL;
    if (!rc) rc = lp_dry_breakers_with_ids(text, p, &all);
    pthread_mutex_unlock(&st->breakers_lock);
    free(key);
    *out = all;
    return rc;
}

uint64_t lp_sampler_store_version(lp_sampler_store_t *st)
{
    pthread_mutex_lock(&st->lock);
    uint64_t v = st->cur->version;
    pthread_mutex_unlock(&st->lock);
    return v;
}

lp__config_t *lp__store_current(lp_sampler_store_t *st)
{
    pthread_mutex_lock(&st->lock);
    lp__config_t *c = st->cur;
    atomic_fetch_add(&c->refs, 1);
    pthread_mutex_unlock(&st->lock);
    return c;
}

int lp__store_publish(lp_sampler_store_t *st, lp__config_t *next, enum lp__publish how,
                      uint64_t *version_out)
{
    next->version = st->next_version;
    if (st->state_file) {
        /* the state as it will be, saved before anything changes */
        lp__config_t *h[LP_STORE_HISTORY + 1];
        int n = st->n_history;
        memcpy(h, st->history, (size_t)n * sizeof(h[0]));
        if (how == LP__PUBLISH_PUSH) h[n++] = st->cur;
        if (how == LP__PUBLISH_POP) n--;
        int from = n > LP_STORE_HISTORY ? n - LP_STORE_HISTORY : 0;
        int rc = lp__store_state_save(st->state_file, st->next_version + 1, next, h + from,
                                      n - from);
        if (rc) {
            lp__config_unref(&next);
            return rc;
        }
    }
    st->next_version++;
    if (how == LP__PUBLISH_PUSH) {
        if (st->n_history == LP_STORE_HISTORY) {
            lp__config_unref(&st->history[0]);
            memmove(st->history, st->history + 1, (LP_STORE_HISTORY - 1) * sizeof(st->history[0]));
            st->n_history--;
        }
        st->history[st->n_history++] = st->cur;
    } else {
        if (how == LP__PUBLISH_POP) lp__config_unref(&st->history[--st->n_history]);
        lp__config_unref(&st->cur);
    }
    st->cur = next;
    LP_INFO("sampler strategy version %" PRIu64, next->version);
    if (version_out) *version_out = next->version;
    return 0;
}

/* Lay a parsed JSON object over the current default (strict). */
static int swap_tree(lp_sampler_store_t *st, const lp_json_t *obj, uint64_t *version_out)
{
    pthread_mutex_lock(&st->lock);
    lp__config_t *next = lp__config_copy(st->cur);
    int rc = next ? 0 : lp_error_set(LP_ERR(ENOMEM), "sampler store: out of memory");
    if (!rc) rc = lp_sampler_params_from_json(obj, LP_SAMPLER_PARAMS_STRICT, &next->params);
    if (!rc) rc = lp__config_check(next);
    if (rc) {
        lp__config_unref(&next);
        pthread_mutex_unlock(&st->lock);
        return rc;
    }
    next->params.set = 0;
    rc = lp__store_publish(st, next, LP__PUBLISH_PUSH, version_out);
    pthread_mutex_unlock(&st->lock);
    return rc;
}

int lp_sampler_store_swap(lp_sampler_store_t *st, const char *json, size_t len,
                          uint64_t *version_out)
{
    lp_json_doc_t *doc;
    int rc = lp_json_parse(json, len, &doc);
    if (rc) return rc;
    rc = swap_tree(st, lp_json_root(doc), version_out);
    lp_json_doc_destroy(&doc);
    return rc;
}

int lp_sampler_store_set_plugin_dir(lp_sampler_store_t *st, const char *dir)
{
    int rc = lp_plugin_check_dir(dir);
    if (rc) return rc;
    char *d = strdup(dir);
    if (!d) return lp_error_set(LP_ERR(ENOMEM), "sampler store: out of memory");
    pthread_mutex_lock(&st->lock);
    free(st->plugin_dir);
    st->plugin_dir = d;
    pthread_mutex_unlock(&st->lock);
    return 0;
}

int lp_sampler_store_load_plugin(lp_sampler_store_t *st, const char *path, const char *config,
                                 uint64_t *version_out)
{
    /* The folder and mode checks come before dlopen: a library's
     * constructor runs as soon as it is opened. */
    pthread_mutex_lock(&st->lock);
    char *dir = st->plugin_dir ? strdup(st->plugin_dir) : NULL;
    bool oom = st->plugin_dir && !dir;
    pthread_mutex_unlock(&st->lock);
    if (oom) return lp_error_set(LP_ERR(ENOMEM), "sampler store: out of memory");
    char *real = NULL;
    int rc = lp_plugin_resolve(dir, path, &real);
    free(dir);
    if (rc) return rc;
    lp_plugin_t *pl;
    rc = lp_plugin_open(real, &pl);
    free(real);
    if (rc) return rc;
    const lp_sampler_plugin_t *d = lp_plugin_desc(pl);
    pthread_mutex_lock(&st->lock);
    lp__config_t *next = NULL;
    const char *dummy_cfg;
    const lp_sampler_plugin_t *dummy;
    if (!lp__config_lookup(st->cur, d->name, &dummy, &dummy_cfg)) {
        rc = lp_error_set(LP_ERR(EEXIST), "plugin %s: a plugin named \"%s\" is already loaded",
                          path, d->name);
        goto fail;
    }
    if (st->cur->n_plugins >= LP_STORE_MAX_PLUGINS) {
        rc = lp_error_set(LP_ERR(E2BIG), "plugin %s: %d plugins are loaded already (the limit)",
                          path, LP_STORE_MAX_PLUGINS);
        goto fail;
    }
    if (st->cur->params.n_steps >= LP_SAMPLER_MAX_CHAIN) {
        rc = lp_error_set(LP_ERR(E2BIG), "plugin %s: the default chain is full (%d steps)", path,
                          LP_SAMPLER_MAX_CHAIN);
        goto fail;
    }
    if (!(next = lp__config_copy(st->cur))) {
        rc = lp_error_set(LP_ERR(ENOMEM), "sampler store: out of memory");
        goto fail;
    }
    char *cfg = strdup(config ? config : "");
    if (!cfg) {
        rc = lp_error_set(LP_ERR(ENOMEM), "sampler store: out of memory");
        goto fail;
    }
    next->plugins[next->n_plugins].plugin = pl;
    next->plugins[next->n_plugins].config = cfg;
    next->n_plugins++;
    pl = NULL; /* next owns it now */
    /* first in the chain, like logit bias: a step that removes tokens must
     * act before truncation and temperature 0 narrow the list */
    memmove(&next->params.steps[1], &next->params.steps[0],
            (size_t)next->params.n_steps * sizeof(next->params.steps[0]));
    next->params.n_steps++;
    lp_sampler_step_t *step = &next->params.steps[0];
    memset(step, 0, sizeof(*step));
    step->kind = LP_SAMPLER_PLUGIN;
    snprintf(step->plugin, sizeof(step->plugin), "%s", d->name);
    if ((rc = lp__config_check(next))) goto fail;
    rc = lp__store_publish(st, next, LP__PUBLISH_PUSH, version_out);
    pthread_mutex_unlock(&st->lock);
    return rc;
fail:
    lp__config_unref(&next);
    pthread_mutex_unlock(&st->lock);
    lp_plugin_unref(&pl);
    return rc;
}

int lp_sampler_store_unload_plugin(lp_sampler_store_t *st, const char *name,
                                   uint64_t *version_out)
{
    pthread_mutex_lock(&st->lock);
    int at = -1;
    for (int i = 0; i < st->cur->n_plugins; i++)
        if (!strcmp(lp_plugin_desc(st->cur->plugins[i].plugin)->name, name)) at = i;
    if (at < 0) {
        pthread_mutex_unlock(&st->lock);
        return lp_error_set(LP_ERR(ENOENT), "unload: no plugin named \"%.40s\" is loaded", name);
    }
    lp__config_t *next = lp__config_copy(st->cur);
    if (!next) {
        pthread_mutex_unlock(&st->lock);
        return lp_error_set(LP_ERR(ENOMEM), "sampler store: out of memory");
    }
    lp_plugin_unref(&next->plugins[at].plugin);
    free(next->plugins[at].config);
    memmove(&next->plugins[at], &next->plugins[at + 1],
            (size_t)(next->n_plugins - at - 1) * sizeof(next->plugins[0]));
    next->n_plugins--;
    int32_t k = 0;
    for (int32_t i = 0; i < next->params.n_steps; i++) {
        const lp_sampler_step_t *s = &next->params.steps[i];
        if (s->kind == LP_SAMPLER_PLUGIN && !strcmp(s->plugin, name)) continue;
        next->params.steps[k++] = *s;
    }
    next->params.n_steps = k;
    int rc = lp__store_publish(st, next, LP__PUBLISH_PUSH, version_out);
    pthread_mutex_unlock(&st->lock);
    return rc;
}

int lp_sampler_store_rollback(lp_sampler_store_t *st, uint64_t *version_out)
{
    pthread_mutex_lock(&st->lock);
    if (st->n_history == 0) {
        pthread_mutex_unlock(&st->lock);
        return lp_error_set(LP_ERR(ENOENT), "rollback: no earlier strategy to go back to");
    }
    lp__config_t *next = lp__config_copy(st->history[st->n_history - 1]);
    if (!next) {
        pthread_mutex_unlock(&st->lock);
        return lp_error_set(LP_ERR(ENOMEM), "sampler store: out of memory");
    }
    int rc = lp__store_publish(st, next, LP__PUBLISH_POP, version_out);
    pthread_mutex_unlock(&st->lock);
    return rc;
}

static bool uses(const lp__config_t *c, const char *name)
{
    for (int i = 0; i < c->n_plugins; i++)
        if (!strcmp(lp_plugin_desc(c->plugins[i].plugin)->name, name)) return true;
    return false;
}

int lp_sampler_store_quarantine(lp_sampler_store_t *st, const char *name, uint64_t *from, uint64_t *to)
{
    pthread_mutex_lock(&st->lock);
    *from = *to = st->cur->version;
    if (!uses(st->cur, name)) {
        pthread_mutex_unlock(&st->lock);
        return 0;
    }
    const lp__config_t *good = NULL;
    for (int i = st->n_history; i-- > 0 && !good;)
        if (!uses(st->history[i], name)) good = st->history[i];
    pthread_mutex_unlock(&st->lock);
    if (!good) return lp_sampler_store_unload_plugin(st, name, to);
    pthread_mutex_lock(&st->lock);
    lp__config_t *next = lp__config_copy(good);
    int rc = next ? lp__store_publish(st, next, LP__PUBLISH_PUSH, to)
                  : lp_error_set(LP_ERR(ENOMEM), "sampler store: out of memory");
    pthread_mutex_unlock(&st->lock);
    return rc;
}

/* ---- description and control --------------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf_t;

static void sb_add(sbuf_t *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_printf(sbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf_t *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (k > 0) sb_add(b, tmp, (size_t)k < sizeof(tmp) ? (size_t)k : sizeof(tmp) - 1);
}

static void sb_quote(sbuf_t *b, const char *s)
{
    size_t need = lp_json_quote(NULL, 0, s, strlen(s));
    char *q = malloc(need + 1);
    if (!q) {
        b->oom = true;
        return;
    }
    lp_json_quote(q, need + 1, s, strlen(s));
    sb_add(b, q, need);
    free(q);
}

static void describe_config(sbuf_t *b, const lp__config_t *c)
{
    size_t need = lp_sampler_params_to_json(&c->params, NULL, 0);
    char *pj = malloc(need + 1);
    if (!pj) {
        b->oom = true;
        return;
    }
    lp_sampler_params_to_json(&c->params, pj, need + 1);
    sb_printf(b, "\"version\":%" PRIu64 ",\"params\":", c->version);
    sb_add(b, pj, need);
    free(pj);
    sb_add(b, ",\"plugins\":[", 12);
    for (int i = 0; i < c->n_plugins; i++) {
        if (i) sb_add(b, ",", 1);
        sb_add(b, "{\"name\":", 8);
        sb_quote(b, lp_plugin_desc(c->plugins[i].plugin)->name);
        sb_add(b, ",\"path\":", 8);
        sb_quote(b, lp_plugin_path(c->plugins[i].plugin));
        sb_add(b, ",\"config\":", 10);
        sb_quote(b, c->plugins[i].config);
        sb_add(b, "}", 1);
    }
    sb_add(b, "]", 1);
}

char *lp_sampler_store_describe(lp_sampler_store_t *st)
{
    lp__config_t *c = lp__store_current(st);
    sbuf_t b = {0};
    sb_add(&b, "{", 1);
    describe_config(&b, c);
    sb_add(&b, "}", 1);
    lp__config_unref(&c);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

static const char *str_field(const lp_json_t *msg, const char *key)
{
    const lp_json_t *v = lp_json_get(msg, key);
    return v && v->type == LP_JSON_STRING ? v->u.str : NULL;
}

int lp_sampler_store_control(lp_sampler_store_t *st, const char *msg, size_t len, char **reply)
{
    *reply = NULL;
    lp_json_doc_t *doc = NULL;
    uint64_t v = 0;
    int rc = lp_json_parse(msg, len, &doc);
    const lp_json_t *root = doc ? lp_json_root(doc) : NULL;
    const char *op = NULL;
    if (!rc && (!root || root->type != LP_JSON_OBJECT))
        rc = lp_error_set(LP_ERR(EINVAL), "control: the message must be a JSON object");
    if (!rc && !(op = str_field(root, "op")))
        rc = lp_error_set(LP_ERR(EINVAL), "control: \"op\" (a string) is missing");
    if (!rc) {
        if (!strcmp(op, "set")) {
            const lp_json_t *p = lp_json_get(root, "params");
            if (!p || p->type != LP_JSON_OBJECT) {
                rc = lp_error_set(LP_ERR(EINVAL), "control set: \"params\" (an object) is missing");
            } else {
                rc = swap_tree(st, p, &v);
            }
        } else if (!strcmp(op, "load")) {
            const char *path = str_field(root, "path");
            if (!path) rc = lp_error_set(LP_ERR(EINVAL), "control load: \"path\" is missing");
            else rc = lp_sampler_store_load_plugin(st, path, str_field(root, "config"), &v);
        } else if (!strcmp(op, "unload")) {
            const char *name = str_field(root, "name");
            if (!name) rc = lp_error_set(LP_ERR(EINVAL), "control unload: \"name\" is missing");
            else rc = lp_sampler_store_unload_plugin(st, name, &v);
        } else if (!strcmp(op, "rollback")) {
            rc = lp_sampler_store_rollback(st, &v);
        } else if (!strcmp(op, "get")) {
            rc = 0;
        } else {
            rc = lp_error_set(LP_ERR(EINVAL),
                              "control: unknown op \"%.40s\" (set, load, unload, rollback, get)", op);
        }
    }
    lp_json_doc_destroy(&doc);
    sbuf_t b = {0};
    if (rc) {
        sb_add(&b, "{\"ok\":false,\"error\":", 20);
        sb_quote(&b, lp_error_msg());
        sb_add(&b, "}", 1);
    } else {
        lp__config_t *c = lp__store_current(st);
        sb_add(&b, "{\"ok\":true,", 11);
        if (v) sb_printf(&b, "\"changed\":%" PRIu64 ",", v); /* the version this op made */
        describe_config(&b, c);
        sb_add(&b, "}", 1);
        lp__config_unref(&c);
    }
    if (b.oom) {
        free(b.p);
        return rc ? rc : LP_ERR(ENOMEM);
    }
    *reply = b.p;
    return rc;
}
