/* sampler-plugin.h - the ABI of a sampler plugin: a shared object that adds
 * one sampling step to the chain.  This header stands alone (C99, no lmpipe
 * headers) so that a plugin builds against it and nothing else.
 *
 * A plugin exports one function,
 *
 *     const lp_sampler_plugin_t *lp_sampler_plugin_get(void);
 *
 * returning a descriptor with abi_version == LP_SAMPLER_PLUGIN_ABI.  The
 * loader refuses a missing symbol, a NULL descriptor, another ABI version, a
 * missing name or apply, or a name already taken, and the current strategy
 * stays in place.
 *
 * A plugin step sees the candidates as an explicit list (id, logit, p).  It
 * may lower logits (-INFINITY removes a token), reorder, or shrink `size`;
 * it must not add IDs that were not there.  Its context is per sequence:
 * init runs when a sequence's chain is built, free when it is dropped. */
#ifndef LP_SAMPLER_PLUGIN_H
#define LP_SAMPLER_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LP_SAMPLER_PLUGIN_ABI 1u
#define LP_SAMPLER_PLUGIN_SYMBOL "lp_sampler_plugin_get"

typedef struct lp_token_data {
    int32_t id;
    float logit;
    float p; /* probability after the last softmax; 0 when not computed */
} lp_token_data_t;

typedef struct lp_token_array {
    lp_token_data_t *data; /* borrowed for the call */
    size_t size;
    int64_t selected;      /* index into data of the chosen token, or -1 */
    bool sorted;           /* data is in descending logit order */
} lp_token_array_t;

typedef struct lp_sampler_plugin {
    uint32_t abi_version; /* LP_SAMPLER_PLUGIN_ABI */
    uint32_t struct_size; /* sizeof(lp_sampler_plugin_t) */
    const char *name;     /* [a-z0-9_-], at most 31 bytes; names the step in "samplers" */
    /* Make a per-sequence context from the configuration string given at
     * load time (may be ""); NULL means failure.  May be NULL: ctx is NULL. */
    void *(*init)(const char *config);
    /* A token was accepted into the sequence.  May be NULL. */
    void (*accept)(void *ctx, int32_t token);
    /* Required. */
    void (*apply)(void *ctx, lp_token_array_t *cur);
    /* Forget the sequence's history.  May be NULL. */
    void (*reset)(void *ctx);
    /* Copy a context; NULL means failure.  May be NULL when init is NULL. */
    void *(*clone)(const void *ctx);
    /* May be NULL. */
    void (*free)(void *ctx);
} lp_sampler_plugin_t;

typedef const lp_sampler_plugin_t *(*lp_sampler_plugin_get_fn)(void);

#endif
