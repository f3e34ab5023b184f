/* coord.h - the coordinator: owns the generation requests.  It tokenizes
 * each prompt through tokenizer-svc, schedules engine steps (prefill chunks
 * bounded by max_batch_tokens plus one decode token per active request:
 * continuous batching), has sampler-svc pick each next token, checks the
 * stop conditions, and streams the text the sampler's decoder gives to the
 * client.
 *
 * It serves the client API on a ROUTER (through the service skeleton) and
 * holds one DEALER to each tokenizer-svc and to the engine-svc and
 * sampler-svc of each engine group. */
#ifndef LP_COORD_H
#define LP_COORD_H

#include <stdbool.h>

#include "service.h"

#define LP_COORD_MAX_GROUPS 64
#define LP_COORD_MAX_TOKENIZERS 16
#define LP_COORD_DRAIN_GRACE_MS 10000
/* Prompt tokens a step carries beside decode tokens (docs/ARCHITECTURE.md,
 * "Chunked prefill and decode"). */
#define LP_COORD_PREFILL_CHUNK 128

/* One engine group: an engine-svc and the sampler-svc that reads its rows.
 * Strings borrowed until lp_coord_destroy(). */
typedef struct lp_coord_group_params {
    const char *name;        /* [a-z0-9_-], 1-64 characters */
    const char *engine;      /* endpoints */
    const char *sampler;
    const char *server_key;  /* CURVE public key of the group's host; NULL: none */
    const char *sampler_key; /* the sampler's, when on another host; NULL: server_key */
} lp_coord_group_params_t;

typedef struct lp_coord_params {
    const char *tokenizer_endpoint; /* EP[,EP...]: tokenizations spread across them */
    const char *tokenizer_key;      /* CURVE public key of the tokenizers' host, or KEY,KEY..
                                       one per tokenizer endpoint; NULL: none */
    const lp_coord_group_params_t *groups; /* borrowed; n_groups of them */
    size_t n_groups;
    const char *engine_endpoint;    /* with no groups: the one group "default" */
    const char *sampler_endpoint;
    /* With no groups: the engine's and sampler's CURVE public keys (KEY
     * values, curve.h); NULL: no CURVE (then ipc://, or allow_insecure_tcp). */
    const char *engine_key, *sampler_key;
    bool no_shm;          /* rows inline even where the ring would work */
    int max_seqs;         /* 0: the engine's */
    int max_batch_tokens; /* 0: the engine's */
    int prefill_chunk;    /* prompt tokens in a step that also decodes; 0: LP_COORD_PREFILL_CHUNK */
    int max_requests;     /* queued + active; 0: 1024 */
    int max_queued_per_client; /* one client's requests waiting for a slot; 0: max_requests / 4 */
    /* Paged engines (Hello.kv_block > 0) only: */
    bool no_prefix_cache; /* no block is shared between requests */
    int kv_blocks;        /* use at most this many of each engine's KV blocks; 0: all */
    /* After SIGTERM: how long running requests may go on before they end
     * with FINISH_ERROR "shutting down"; 0: LP_COORD_DRAIN_GRACE_MS, < 0: none. */
    int drain_grace_ms;
} lp_coord_params_t;

typedef struct lp_coord lp_coord_t;

int lp_coord_new(const lp_coord_params_t *p, lp_coord_t **out);
void lp_coord_destroy(lp_coord_t **self_p);
extern const lp_service_ops_t lp_coord_ops;

#endif
