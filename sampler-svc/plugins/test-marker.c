/* test-marker.c - a plugin whose constructor creates the file named by
 * LP_TEST_PLUGIN_MARKER, for the plugin-folder test: the constructor runs
 * inside dlopen, before any ABI check, so the file exists exactly when the
 * library was opened.  Otherwise a valid plugin that changes nothing. */
#include "sampler-plugin.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void mark(void)
{
    const char *path = getenv("LP_TEST_PLUGIN_MARKER");
    if (!path) return;
    int fd = open(path, O_WRONLY | O_CREAT, 0600);
    if (fd >= 0) close(fd);
}

static void apply(void *ctx, lp_token_array_t *cur)
{
    (void)ctx;
    (void)cur;
}

static const lp_sampler_plugin_t descriptor = {
    .abi_version = LP_SAMPLER_PLUGIN_ABI,
    .struct_size = sizeof(lp_sampler_plugin_t),
    .name = "marker",
    .apply = apply,
};

__attribute__((visibility("default"))) const lp_sampler_plugin_t *lp_sampler_plugin_get(void)
{
    return &descriptor;
}
