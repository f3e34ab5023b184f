/* plugin.h - loading sampler plugins (dlopen) with their ABI checked, and
 * keeping each loaded while any strategy or sequence still uses it. */
#ifndef LP_SAMPLER_PLUGIN_LOADER_H
#define LP_SAMPLER_PLUGIN_LOADER_H

#include "sampler-plugin.h"

typedef struct lp_plugin lp_plugin_t;

/* Where a plugin may come from, checked before anything is opened (a
 * library's constructor runs inside dlopen, before any ABI check).  `path`
 * (relative paths are relative to `dir`) is resolved with realpath and must
 * lie inside realpath(dir); the file must be a regular file, and it and
 * every directory from it up to / must be owned by root or this process's
 * user and writable by neither group nor others (sshd's StrictModes; a
 * sticky /tmp counts as writable).  NULL or empty `dir`: every path is
 * refused.  *resolved (caller frees) is the path to hand to lp_plugin_open. */
int lp_plugin_resolve(const char *dir, const char *path, char **resolved);
/* Check that `dir` can serve as the plugin folder: it exists, is a
 * directory, and passes the same ownership and mode checks up to /. */
int lp_plugin_check_dir(const char *dir);

/* dlopen `path` (trusted: from lp_plugin_resolve or a local user's own
 * command line) and check its descriptor.  Refuses, with a message naming
 * the file and the problem: a file that does not load, a missing
 * lp_sampler_plugin_get, a NULL descriptor, another ABI version, a short
 * struct, a bad name, a missing apply.  *out holds one reference. */
int lp_plugin_open(const char *path, lp_plugin_t **out);
const lp_sampler_plugin_t *lp_plugin_desc(const lp_plugin_t *p);
const char *lp_plugin_path(const lp_plugin_t *p);
void lp_plugin_ref(lp_plugin_t *p);
/* Drop a reference; the last one dlcloses.  Sets *p_p to NULL. */
void lp_plugin_unref(lp_plugin_t **p_p);

#endif
