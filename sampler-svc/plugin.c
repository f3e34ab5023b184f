/* plugin.c - the sampler plugin loader. */
#include "plugin.h"

#include "error.h"
#include "sampling-params.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* ---- where a plugin may come from ------------------------------------------ */

/* One path as sshd's StrictModes sees it: of the right kind, owned by root
 * or this process's user, writable by no one else.  `what` names the
 * request in the message.  `above`: a directory above the plugin folder,
 * where one kind of shared directory is trusted (sticky_ok). */
static bool sticky_ok(const struct stat *st)
{
    /* A root-owned directory with the sticky bit (mode 1777: /tmp,
     * /var/tmp): in it only an entry's owner, the directory's owner (root)
     * or root may rename or remove the entry, so no other user can swap the
     * folder below it, and that folder is checked like any other node of the
     * chain (owned by root or this user, writable only by its owner).  sshd's
     * StrictModes refuses such a path, systemd's chase(CHASE_SAFE) looks only
     * at owners; this follows the kernel's own rule for sticky directories
     * (docs/SECURITY.md, "Plugin folders"). */
    return S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX) && st->st_uid == 0;
}

static int safe_node(const char *what, const char *node, bool want_dir, bool above)
{
    struct stat st;
    if (stat(node, &st) != 0) {
        int e = errno;
        return lp_error_set(LP_ERR(e), "%s: cannot stat %s: %s", what, node, strerror(e));
    }
    if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
        return lp_error_set(LP_ERR(EPERM), "%s: refused: %s is not a %s", what, node,
                            want_dir ? "directory" : "regular file");
    if (st.st_uid != 0 && st.st_uid != geteuid())
        return lp_error_set(LP_ERR(EPERM),
                            "%s: refused: %s is owned by uid %u, neither root nor this "
                            "service's user (uid %u)",
                            what, node, (unsigned)st.st_uid, (unsigned)geteuid());
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(above && sticky_ok(&st)))
        return lp_error_set(LP_ERR(EPERM),
                            "%s: refused: %s is writable by %s (mode %04o); a plugin, its folder "
                            "and every directory above must be writable only by their owner (or, "
                            "above the folder, be root's with the sticky bit, as /tmp)",
                            what, node, st.st_mode & S_IWOTH ? "others" : "its group",
                            (unsigned)(st.st_mode & 07777));
    return 0;
}

/* `real` (resolved, absolute) and every directory above it up to /: any
 * one of them writable by someone else would let that someone swap the
 * file.  `folder`: the plugin folder (resolved); the directories above it
 * may be sticky and root's. */
static int safe_chain(const char *what, const char *real, bool is_dir, const char *folder)
{
    char *buf = strdup(real);
    if (!buf) return lp_error_set(LP_ERR(ENOMEM), "%s: out of memory", what);
    size_t nf = strlen(folder);
    int rc = safe_node(what, buf, is_dir, false);
    while (!rc && strcmp(buf, "/") != 0) {
        char *slash = strrchr(buf, '/');
        if (slash == buf) slash[1] = '\0';
        else *slash = '\0';
        /* above the folder: a proper prefix of it */
        bool above = strlen(buf) < nf && !strncmp(buf, folder, strlen(buf));
        rc = safe_node(what, buf, true, above);
    }
    free(buf);
    return rc;
}

int lp_plugin_check_dir(const char *dir)
{
    char what[PATH_MAX + 32];
    snprintf(what, sizeof(what), "plugin folder %s", dir ? dir : "");
    if (!dir || !dir[0]) return lp_error_set(LP_ERR(EINVAL), "plugin folder: empty path");
    char *rdir = realpath(dir, NULL);
    if (!rdir) {
        int e = errno;
        return lp_error_set(LP_ERR(e), "%s: %s", what, strerror(e));
    }
    int rc = safe_chain(what, rdir, true, rdir);
    free(rdir);
    return rc;
}

int lp_plugin_resolve(const char *dir, const char *path, char **resolved)
{
    *resolved = NULL;
    if (!dir || !dir[0])
        return lp_error_set(LP_ERR(EPERM),
                            "plugin %s: refused: no plugin folder is set; start sampler-svc with "
                            "--plugin-dir DIR (config key sampler.plugin_dir) and put plugins there",
                            path);
    if (!path[0]) return lp_error_set(LP_ERR(EINVAL), "plugin: empty path");
    char what[PATH_MAX + 32];
    snprintf(what, sizeof(what), "plugin %s", path);
    char *rdir = realpath(dir, NULL), *full = NULL, *rfile = NULL;
    int rc = 0;
    if (!rdir) {
        int e = errno;
        return lp_error_set(LP_ERR(e), "%s: plugin folder %s: %s", what, dir, strerror(e));
    }
    if (path[0] == '/') full = strdup(path);
    else if (asprintf(&full, "%s/%s", rdir, path) < 0) full = NULL;
    if (!full) {
        rc = lp_error_set(LP_ERR(ENOMEM), "%s: out of memory", what);
        goto out;
    }
    if (!(rfile = realpath(full, NULL))) {
        int e = errno;
        rc = lp_error_set(LP_ERR(e), "%s: cannot load: %s", what, strerror(e));
        goto out;
    }
    /* Inside means below: the folder itself is no plugin. */
    size_t nd = strlen(rdir);
    bool inside = !strcmp(rdir, "/") ? rfile[1] != '\0'
                                     : !strncmp(rfile, rdir, nd) && rfile[nd] == '/';
    if (!inside) {
        rc = lp_error_set(LP_ERR(EPERM), "%s: refused: it is %s, outside the plugin folder %s",
                          what, rfile, rdir);
        goto out;
    }
    if ((rc = safe_chain(what, rfile, false, rdir)) != 0) goto out;
    *resolved = rfile;
    rfile = NULL;
out:
    free(rdir);
    free(full);
    free(rfile);
    return rc;
}

/* ---- loading ------------------------------------------------------------------ */

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
