/* plugin-watch.h - what sampler-svc was doing inside a plugin, kept where
 * a crash cannot take it (a small shared mapping of a file beside the state
 * file), and a watchdog for plugin calls that do not return.
 *
 * Every call into a plugin (init, accept, apply, reset, clone, free) is
 * bracketed by enter/leave, which only store into the mapping.  A process
 * killed inside one (SIGSEGV, or the watchdog's SIGKILL past the budget)
 * leaves its slot marked; the next start reads the mark, and the service
 * goes back to the last strategy without that plugin (docs/SAMPLER.md). */
#ifndef LP_SAMPLER_PLUGIN_WATCH_H
#define LP_SAMPLER_PLUGIN_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the previous process left: the plugin it died in, if any. */
typedef struct lp_plugin_watch_report {
    bool died_in_plugin;
    bool hung;            /* the watchdog killed it, past the budget */
    char plugin[64];
    char what[16];        /* "apply", "accept", ... */
    uint32_t fallbacks;   /* strategy fallbacks so far, this one not counted */
} lp_plugin_watch_report_t;

/* Map `path` (created 0600; NULL: an anonymous mapping, nothing survives a
 * crash), read what the last process left into *rep, clear it, and start
 * the watchdog when budget_ms > 0.  Once per process. */
int lp_plugin_watch_start(const char *path, int budget_ms, lp_plugin_watch_report_t *rep);
/* Count one fallback (kept in the file). */
void lp_plugin_watch_count_fallback(void);
uint32_t lp_plugin_watch_fallbacks(void);

/* Around a call into plugin `name`; no-ops before lp_plugin_watch_start.
 * `what` is a string literal. */
void lp_plugin_watch_enter(const char *name, const char *what);
void lp_plugin_watch_leave(void);

#endif
