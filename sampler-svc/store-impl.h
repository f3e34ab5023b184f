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
/* Plugin lookup over a strategy, for lp_sampler_chain_build. */
int lp__config_lookup(void *user, const char *name, const lp_sampler_plugin_t **desc,
                      const char **config);

#endif
