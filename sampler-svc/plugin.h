/* plugin.h - loading sampler plugins (dlopen) with their ABI checked, and
 * keeping each loaded while any strategy or sequence still uses it. */
#ifndef LP_SAMPLER_PLUGIN_LOADER_H
#define LP_SAMPLER_PLUGIN_LOADER_H

#include "sampler-plugin.h"

typedef struct lp_plugin lp_plugin_t;

/* dlopen `path` and check its descriptor.  Refuses, with a message naming
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
