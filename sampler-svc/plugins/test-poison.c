/* test-poison.c - a plugin that goes wrong on purpose, for the poison-pill
 * tests (tests/poison-test.py): once a sequence has accepted N tokens, its
 * apply crashes (config "crash:N": a write through NULL) or never returns
 * ("hang:N").  Sequences shorter than that are sampled untouched. */
#include "sampler-plugin.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct poison {
    int hang;
    long after, seen;
} poison_t;

static void *poison_init(const char *config)
{
    poison_t *p = calloc(1, sizeof(*p));
    if (!p) return NULL;
    p->hang = !strncmp(config, "hang:", 5);
    if (!p->hang && strncmp(config, "crash:", 6)) {
        free(p);
        return NULL;
    }
    p->after = strtol(strchr(config, ':') + 1, NULL, 10);
    return p;
}

static void poison_accept(void *ctx, int32_t token)
{
    (void)token;
    ((poison_t *)ctx)->seen++;
}

static void poison_apply(void *ctx, lp_token_array_t *cur)
{
    poison_t *p = ctx;
    (void)cur;
    if (p->seen < p->after) return;
    if (p->hang)
        for (;;) pause();
    volatile int *null = NULL;
    *null = 1;
}

static void *poison_clone(const void *ctx)
{
    poison_t *p = malloc(sizeof(*p));
    if (p) memcpy(p, ctx, sizeof(*p));
    return p;
}

static void poison_reset(void *ctx) { ((poison_t *)ctx)->seen = 0; }

static const lp_sampler_plugin_t desc = {
    .abi_version = LP_SAMPLER_PLUGIN_ABI,
    .struct_size = sizeof(lp_sampler_plugin_t),
    .name = "test-poison",
    .init = poison_init,
    .accept = poison_accept,
    .apply = poison_apply,
    .reset = poison_reset,
    .clone = poison_clone,
    .free = free,
};

__attribute__((visibility("default"))) const lp_sampler_plugin_t *lp_sampler_plugin_get(void) { return &desc; }
