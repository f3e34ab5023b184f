/* coord-params.c - the coordinator's parameter table and engine groups (see
 * coord-params.h). */
#include "coord-params.h"

#include "error.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define O(f) offsetof(lp_coord_opts_t, f)
static const lp_param_t rows[] = {
    {"endpoint", "endpoint", LP_P_STR, 0, 0, "ipc://RUN_DIR/coordinator.sock", O(endpoint),
     "the client endpoint it binds", true, false},
    {"tokenizer.endpoint", "tokenizer", LP_P_STR, 0, 0, "ipc://RUN_DIR/tokenizer.sock", O(tokenizer_endpoint),
     "the tokenizers: EP[,EP...]", true, false},
    {"engine.endpoint", "engine", LP_P_STR, 0, 0, "ipc://RUN_DIR/engine.sock", O(engine_endpoint),
     "the engine (without groups)", false, false},
    {"sampler.endpoint", "sampler", LP_P_STR, 0, 0, "ipc://RUN_DIR/sampler.sock", O(sampler_endpoint),
     "the sampler (without groups)", false, false},
    {"tokenizer.server_key", "tokenizer-server-key", LP_P_STR, 0, 0, "curve.key's", O(tokenizer_key),
     "the tokenizers' CURVE public key, or one per endpoint KEY,KEY", false, false},
    {"engine.server_key", "engine-server-key", LP_P_STR, 0, 0, "curve.key's", O(engine_key),
     "the engine's CURVE public key", false, false},
    {"sampler.server_key", "sampler-server-key", LP_P_STR, 0, 0, "curve.key's", O(sampler_key),
     "the sampler's CURVE public key", false, false},
    {NULL, "group", LP_P_MULTI, 0, 0, "none", O(groups),
     "an engine group: NAME,ENGINE_EP,SAMPLER_EP[,KEY[,SAMPLER_KEY]]", false, false},
    {"group.*.engine", NULL, LP_P_STR, 0, 0, NULL, 0, "engine group NAME's engine endpoint", false, false},
    {"group.*.sampler", NULL, LP_P_STR, 0, 0, NULL, 0, "engine group NAME's sampler endpoint", false, false},
    {"group.*.server_key", NULL, LP_P_STR, 0, 0, "none", 0, "engine group NAME's CURVE public key", false, false},
    {"group.*.sampler_key", NULL, LP_P_STR, 0, 0, "server_key", 0,
     "engine group NAME's sampler's key, on another host", false, false},
    {"no_shm", "no-shm", LP_P_BOOL, 0, 0, "false", O(no_shm), "logit rows inline, not through shared memory",
     false, false},
    {"coordinator.max_seqs", "max-seqs", LP_P_INT, 0, 1 << 24, "the engine's", O(max_seqs),
     "sequence slots to use (0: the engine's)", false, false},
    {"coordinator.max_batch_tokens", "max-batch-tokens", LP_P_INT, 0, 1 << 24, "the engine's",
     O(max_batch_tokens), "tokens per step (0: the engine's)", false, false},
    {"prefill_chunk", "prefill-chunk", LP_P_INT, 0, 1 << 24, "128", O(prefill_chunk),
     "prompt tokens a step carries beside decode tokens (0: the default)", false, false},
    {"coordinator.max_requests", "max-requests", LP_P_INT, 0, 1 << 24, "1024", O(max_requests),
     "requests queued and running in all (0: the default)", false, false},
    {"max_queued_per_client", "max-queued-per-client", LP_P_INT, 0, 1 << 24, "max_requests / 4",
     O(max_queued_per_client), "requests one client (API key, NATS subject) may have waiting (0: the default)",
     false, false},
    {"coordinator.prefix_cache", "no-prefix-cache", LP_P_BOOL, 0, 0, "true", O(no_prefix_cache),
     "paged engines: share KV blocks of a common prompt prefix (the flag turns it off)", false, true},
    {"coordinator.kv_blocks", "kv-blocks", LP_P_INT, 0, 1 << 24, "all", O(kv_blocks),
     "use at most this many of each paged engine's KV blocks (0: all)", false, false},
    {"drain_grace_ms", "drain-grace-ms", LP_P_INT, 0, 3600000, "10000", O(drain_grace_ms),
     "after SIGTERM, how long running requests may finish (0: none)", false, false},
    LP_CURVE_PARAMS(lp_coord_opts_t, curve),
};
#undef O

const lp_params_t lp_coord_params = {"coordinator", "coordinator",
                                     "owns the generation requests: tokenize, schedule engine steps, sample, "
                                     "stop, stream (docs/PROTOCOL.md)",
                                     rows, sizeof(rows) / sizeof(rows[0]), sizeof(lp_coord_opts_t)};

static const char *const fields[] = {"engine", "sampler", "server_key", "sampler_key"};

/* The group of that name, added in first-seen order. */
static int group_at(lp_coord_opts_t *o, lp_coord_group_params_t *out, size_t *n, const char *name, size_t len,
                    const char *what)
{
    bool ok = len > 0 && len <= 64;
    for (size_t i = 0; ok && i < len; i++)
        ok = (name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') || name[i] == '_' ||
             name[i] == '-';
    if (!ok)
        return lp_error_set(LP_ERR(EINVAL), "%s: a group name is 1 to 64 of a-z 0-9 _ -", what);
    size_t g = 0;
    while (g < *n && !(strlen(out[g].name) == len && !strncmp(out[g].name, name, len))) g++;
    if (g == *n) {
        if (g == LP_COORD_MAX_GROUPS)
            return lp_error_set(LP_ERR(EINVAL), "%s: more than %d groups", what, LP_COORD_MAX_GROUPS);
        memcpy(o->group_names[g], name, len);
        o->group_names[g][len] = '\0';
        out[g] = (lp_coord_group_params_t){.name = o->group_names[g]};
        (*n)++;
    }
    return (int)g;
}

int lp_coord_groups(const lp_config_t *cfg, lp_coord_opts_t *o, lp_coord_group_params_t *out, size_t *n)
{
    *n = 0;
    for (int i = 0; cfg && i < lp_config_n_keys(cfg); i++) {
        const char *k = lp_config_key_at(cfg, i);
        if (strncmp(k, "group.", 6)) continue;
        const char *name = k + 6, *dot = strrchr(k, '.');
        int f = -1;
        for (int j = 0; j < 4; j++)
            if (!strcmp(dot + 1, fields[j])) f = j;
        if (f < 0 || dot <= name)
            return lp_error_set(LP_ERR(EINVAL), "config: unknown key '%s' (groups are group.NAME.engine, .sampler, "
                                ".server_key, .sampler_key)", k);
        int g = group_at(o, out, n, name, (size_t)(dot - name), k);
        if (g < 0) return g;
        const char **dst[4] = {&out[g].engine, &out[g].sampler, &out[g].server_key, &out[g].sampler_key};
        *dst[f] = lp_config_get(cfg, k, NULL);
    }
    /* --group NAME,ENGINE_EP,SAMPLER_EP[,KEY[,SAMPLER_KEY]]: split in place
     * (endpoints and Z85 keys hold no comma; an empty key is none) */
    for (int i = 0; i < o->groups.n; i++) {
        char *v = (char *)o->groups.v[i], *rest = v, *tok, *parts[5] = {0};
        int np = 0;
        while ((tok = strsep(&rest, ",")) && np < 5) parts[np++] = tok;
        if (np < 3 || tok || !parts[0][0] || !parts[1][0] || !parts[2][0])
            return lp_error_set(LP_ERR(EINVAL), "--group: '%s' is not NAME,ENGINE_EP,SAMPLER_EP[,SERVER_KEY"
                                "[,SAMPLER_KEY]]", v);
        int g = group_at(o, out, n, parts[0], strlen(parts[0]), "--group");
        if (g < 0) return g;
        out[g].engine = parts[1];
        out[g].sampler = parts[2];
        out[g].server_key = np > 3 && parts[3][0] ? parts[3] : NULL;
        out[g].sampler_key = np > 4 && parts[4][0] ? parts[4] : NULL;
    }
    for (size_t g = 0; g < *n; g++)
        if (!out[g].engine || !out[g].sampler)
            return lp_error_set(LP_ERR(EINVAL), "config: group.%s: needs both group.%s.engine and group.%s.sampler",
                                out[g].name, out[g].name, out[g].name);
    return 0;
}
