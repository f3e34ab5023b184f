/* plugin.c - the sampler plugin loader. */
#include "plugin.h"

#include "error.h"
#include "sampling-params.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct lp_plugin {
    atomic_int refs;
    void *handle;
    const lp_sampler_plugin_t *desc;
    char *path;
};

static bool name_ok(const char *s)
{
    size_t n = s ? strnlen(s, LP_SAMPLER_NAME_MAX) : 0;
    if (n == 0 || n >= LP_SAMPLER_NAME_MAX) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return false;
    }
    return true;
}

int lp_plugin_open(const char *path, lp_plugin_t **out)
{
    *out = NULL;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        return lp_error_set(LP_ERR(ENOENT), "plugin %s: cannot load: %s", path,
                            why ? why : "unknown error");
    }
    int rc = 0;
    dlerror();
    void *sym = dlsym(h, LP_SAMPLER_PLUGIN_SYMBOL);
    const lp_sampler_plugin_t *d = NULL;
    if (!sym) {
        rc = lp_error_set(LP_ERR(ENOENT), "plugin %s: missing symbol %s", path,
                          LP_SAMPLER_PLUGIN_SYMBOL);
        goto fail;
    }
    lp_sampler_plugin_get_fn get;
    memcpy(&get, &sym, sizeof(get));
    d = get();
    if (!d) {
        rc = lp_error_set(LP_ERR(EINVAL), "plugin %s: %s returned no descriptor", path,
                          LP_SAMPLER_PLUGIN_SYMBOL);
        goto fail;
    }
    if (d->abi_version != LP_SAMPLER_PLUGIN_ABI) {
        rc = lp_error_set(LP_ERR(EPROTO), "plugin %s: ABI version %u, this service needs %u",
                          path, d->abi_version, LP_SAMPLER_PLUGIN_ABI);
        goto fail;
    }
    if (d->struct_size < sizeof(lp_sampler_plugin_t)) {
        rc = lp_error_set(LP_ERR(EPROTO), "plugin %s: descriptor of %u bytes, expected %zu",
                          path, d->struct_size, sizeof(lp_sampler_plugin_t));
        goto fail;
    }
    if (!name_ok(d->name)) {
        rc = lp_error_set(LP_ERR(EINVAL), "plugin %s: name must be 1 to %d of [a-z0-9_-]", path,
                          LP_SAMPLER_NAME_MAX - 1);
        goto fail;
    }
    if (!d->apply) {
        rc = lp_error_set(LP_ERR(EINVAL), "plugin %s (%s): missing apply", path, d->name);
        goto fail;
    }
    if (d->init && !d->clone) {
        rc = lp_error_set(LP_ERR(EINVAL), "plugin %s (%s): has init but no clone", path, d->name);
        goto fail;
    }
    lp_plugin_t *p = calloc(1, sizeof(*p));
    char *pc = strdup(path);
    if (!p || !pc) {
        free(p);
        free(pc);
        rc = lp_error_set(LP_ERR(ENOMEM), "plugin %s: out of memory", path);
        goto fail;
    }
    atomic_init(&p->refs, 1);
    p->handle = h;
    p->desc = d;
    p->path = pc;
    *out = p;
    return 0;
fail:
    dlclose(h);
    return rc;
}

const lp_sampler_plugin_t *lp_plugin_desc(const lp_plugin_t *p)
{
    return p->desc;
}

const char *lp_plugin_path(const lp_plugin_t *p)
{
    return p->path;
}

void lp_plugin_ref(lp_plugin_t *p)
{
    atomic_fetch_add(&p->refs, 1);
}

void lp_plugin_unref(lp_plugin_t **p_p)
{
    if (!p_p || !*p_p) return;
    lp_plugin_t *p = *p_p;
    *p_p = NULL;
    if (atomic_fetch_sub(&p->refs, 1) == 1) {
        dlclose(p->handle);
        free(p->path);
        free(p);
    }
}
