/* store-impl.h - the store's internals, shared with the sequences. */
#ifndef LP_SAMPLER_STORE_IMPL_H
#define LP_SAMPLER_STORE_IMPL_H

#include "breakers.h"
#include "plugin.h"
#include "sampler.h"

#include <pthread.h>
#include <stdatomic.h>

#define LP_STORE_MAX_PLUGINS 8
#define LP_STORE_HISTORY 32 /* strategies kept for rollback */

/* One strategy: immutable once published, shared by reference. */
typedef struct lp__config {
    atomic_int refs;
    uint64_t version;
    lp_sampler_params_t params;
    int n_plugins;
    struct {
        lp_plugin_t *plugin; /* one reference held */
        char *config;        /* owned */
    } plugins[LP_STORE_MAX_PLUGINS];
} lp__config_t;

struct lp_sampler_store {
    pthread_mutex_t lock;
    lp__config_t *cur;                     /* one reference */
    lp__config_t *history[LP_STORE_HISTORY]; /* older strategies, newest last */
    int n_history;
    uint64_t next_version;
    char *plugin_dir;    /* the only folder plugins load from; NULL: none do */
    char *state_file;    /* every change is saved here first; NULL: kept in memory only */
    /* the vocabulary guard; set before sequences start, read without the lock */
    int32_t n_real;      /* 0: the row length */
    int32_t *masked;     /* ids < n_real that are never sampled */
    int32_t n_masked;
    uint8_t *mask;       /* n_real bytes, 1 = never sample (NULL: none) */
    /* text DRY breakers: the vocabulary as text, and resolved tables */
    pthread_mutex_t breakers_lock;
    bool has_vocab_text;
    lp_sampler_vocab_text_t vocab_text;
    struct {
        lp_sampler_params_t *key; /* only the text breakers are compared */
        lp_dry_breakers_t *table;
    } breakers_cache[8];
    int n_breakers_cache;
};

/* p's DRY breakers, text ones resolved against the vocabulary (cached); a
 * new table for the caller. */
int lp__store_dry_breakers(lp_sampler_store_t *st, const lp_sampler_params_t *p,
                           lp_dry_breakers_t **out);

/* The current strategy, with a reference for the caller. */
lp__config_t *lp__store_current(lp_sampler_store_t *st);
void lp__config_unref(lp__config_t **c_p);
/* A copy with one reference (plugins referenced again); NULL on
 * out-of-memory. */
lp__config_t *lp__config_copy(const lp__config_t *src);
/* A strategy is usable when its chain builds. */
int lp__config_check(lp__config_t *c);

enum lp__publish {
    LP__PUBLISH_PUSH,    /* the current strategy goes to the history (swap, load, unload) */
    LP__PUBLISH_POP,     /* the newest of the history is dropped (rollback), and current */
    LP__PUBLISH_REPLACE, /* current is replaced, the history stays */
};
/* Publish `next` (takes its reference, also on failure) under the next
 * version, with the lock held.  With a state file the new state is saved
 * first; a failed save changes nothing. */
int lp__store_publish(lp_sampler_store_t *st, lp__config_t *next, enum lp__publish how,
                      uint64_t *version_out);
/* store-state.c: write the state file (temp file, fsync, rename). */
int lp__store_state_save(const char *path, uint64_t next_version, const lp__config_t *cur,
                         lp__config_t *const *hist, int n_hist);

/* Plugin lookup over a strategy, for lp_sampler_chain_build. */
int lp__config_lookup(void *user, const char *name, const lp_sampler_plugin_t **desc,
                      const char **config);

#endif
