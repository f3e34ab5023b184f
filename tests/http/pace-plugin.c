/* pace-plugin.c - a sampler plugin for the browser test: wait a set time
 * before each token, so that stories260K's stream (thousands of tokens a
 * second) lasts long enough for a page to show it growing and to swap the
 * strategy in the middle of it.  Configuration: microseconds per token
 * (1 to 1000000).  It leaves the candidates as they are. */
#include "sampler-plugin.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

typedef struct pace {
    long us;
} pace_t;

static void *pace_init(const char *config)
{
    char *end;
    errno = 0;
    long us = strtol(config, &end, 10);
    if (end == config || *end || errno || us < 1 || us > 1000000) return NULL; /* refused */
    pace_t *p = malloc(sizeof(*p));
    if (p) p->us = us;
    return p;
}

static void pace_apply(void *ctx, lp_token_array_t *cur)
{
    (void)cur;
    const pace_t *p = ctx;
    struct timespec ts = {p->us / 1000000, (p->us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) && errno == EINTR) {
    }
}

static void *pace_clone(const void *ctx)
{
    pace_t *c = malloc(sizeof(*c));
    if (c) *c = *(const pace_t *)ctx;
    return c;
}

static void pace_free(void *ctx)
{
    free(ctx);
}

static const lp_sampler_plugin_t descriptor = {
    .abi_version = LP_SAMPLER_PLUGIN_ABI,
    .struct_size = sizeof(lp_sampler_plugin_t),
    .name = "pace",
    .init = pace_init,
    .apply = pace_apply,
    .clone = pace_clone,
    .free = pace_free,
};

__attribute__((visibility("default"))) const lp_sampler_plugin_t *lp_sampler_plugin_get(void)
{
    return &descriptor;
}
