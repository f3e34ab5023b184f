/* mask-tokens.c - an example sampler plugin: never sample the listed tokens.
 *
 * Configuration: token IDs separated by commas or spaces ("13, 198").  The
 * step sets their logits to -INFINITY.  Built as a shared module; it uses
 * nothing but sampler-plugin.h and libc. */
#include "sampler-plugin.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct mask {
    size_t n;
    int32_t ids[]; /* sorted */
} mask_t;

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static void *mask_init(const char *config)
{
    size_t cap = 1;
    for (const char *p = config; *p; p++) cap += *p == ',' || *p == ' ';
    mask_t *m = malloc(sizeof(*m) + cap * sizeof(int32_t));
    if (!m) return NULL;
    m->n = 0;
    const char *p = config;
    for (;;) {
        while (*p == ' ' || *p == ',') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX || m->n == cap ||
            (*end && *end != ',' && *end != ' ')) {
            free(m); /* not a list of token IDs: refuse */
            return NULL;
        }
        m->ids[m->n++] = (int32_t)v;
        p = end;
    }
    qsort(m->ids, m->n, sizeof(int32_t), cmp_i32);
    return m;
}

static void mask_apply(void *ctx, lp_token_array_t *cur)
{
    const mask_t *m = ctx;
    size_t k = 0;
    for (size_t i = 0; i < cur->size; i++) {
        if (bsearch(&cur->data[i].id, m->ids, m->n, sizeof(int32_t), cmp_i32)) continue;
        cur->data[k++] = cur->data[i];
    }
    cur->size = k;
}

static void *mask_clone(const void *ctx)
{
    const mask_t *m = ctx;
    mask_t *c = malloc(sizeof(*m) + (m->n ? m->n : 1) * sizeof(int32_t));
    if (c) memcpy(c, m, sizeof(*m) + m->n * sizeof(int32_t));
    return c;
}

static void mask_free(void *ctx)
{
    free(ctx);
}

static const lp_sampler_plugin_t descriptor = {
    .abi_version = LP_SAMPLER_PLUGIN_ABI,
    .struct_size = sizeof(lp_sampler_plugin_t),
    .name = "mask-tokens",
    .init = mask_init,
    .apply = mask_apply,
    .clone = mask_clone,
    .free = mask_free,
};

__attribute__((visibility("default"))) const lp_sampler_plugin_t *lp_sampler_plugin_get(void)
{
    return &descriptor;
}
