/* test-bad-abi.c - a plugin built for another ABI version, for the loader
 * test: the loader must refuse it and keep the current strategy. */
#include "sampler-plugin.h"

static void apply(void *ctx, lp_token_array_t *cur)
{
    (void)ctx;
    cur->size = 0; /* would empty every list if it were ever run */
}

static const lp_sampler_plugin_t descriptor = {
    .abi_version = 999,
    .struct_size = sizeof(lp_sampler_plugin_t),
    .name = "bad-abi",
    .apply = apply,
};

__attribute__((visibility("default"))) const lp_sampler_plugin_t *lp_sampler_plugin_get(void)
{
    return &descriptor;
}
