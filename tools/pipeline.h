/* pipeline.h - start the four services as child processes and supervise
 * them with libuv (lmpipe up, lmpipe run, lmpipe bench), and with
 * http_listen the HTTP gateway (lmpipe-http), which is restarted when it
 * exits: the pipeline does not depend on it.  Stopping sends
 * SIGTERM, then SIGKILL after 5 s, and removes what the pipeline leaves:
 * socket files, the run folder, the shared-memory segment. */
#ifndef LP_TOOLS_PIPELINE_H
#define LP_TOOLS_PIPELINE_H

#include <stdbool.h>
#include <uv.h>

#include "config.h"

/* The services, as bits of lp_pipeline_opts_t.only. */
enum {
    LP_PIPELINE_TOKENIZER = 1 << 0,
    LP_PIPELINE_ENGINE = 1 << 1,
    LP_PIPELINE_SAMPLER = 1 << 2,
    LP_PIPELINE_COORDINATOR = 1 << 3,
    LP_PIPELINE_HTTP = 1 << 4,
    LP_PIPELINE_NATS = 1 << 5,
};

#define LP_PIPELINE_MAX_GROUPS 64

/* An engine group the coordinator connects to (config group.NAME.*);
 * the endpoints and keys are borrowed from the config. */
typedef struct lp_pipeline_group {
    char name[65];
    const char *engine, *sampler, *server_key, *sampler_key;
} lp_pipeline_group_t;

#define LP_PIPELINE_NATS_KEYS 24

typedef struct lp_pipeline_opts {
    const char *model;
    const char *run_dir;            /* NULL: a new /tmp/lmpipe-XXXXXX */
    const char *endpoint;           /* client API; NULL: ipc://RUN_DIR/coordinator.sock */
    const char *tokenizer_endpoint; /* NULL: ipc://RUN_DIR/tokenizer.sock, and so on; a
                                     * list EP,EP: the coordinator's tokenizers
                                     * (tokenizer-svc binds the first) */
    lp_pipeline_group_t groups[LP_PIPELINE_MAX_GROUPS]; /* none: engine and sampler endpoints */
    int n_groups;
    unsigned only;                  /* LP_PIPELINE_* bits to run; 0: all (the gateway
                                     * when http_listen is set) */
    const char *engine_endpoint;
    const char *sampler_endpoint;
    const char *sampler_default;    /* sampler-svc's default strategy (JSON); NULL: llama.cpp's */
    const char *chat_template_file; /* tokenizer-svc --chat-template-file; NULL: the model's */
    const char *plugin_dir;         /* sampler-svc --plugin-dir; NULL: plugin loads refused */
    const char *sampler_state_file; /* sampler-svc --state-file; NULL: RUN_DIR/sampler-state.json */
    const char *bin_dir;            /* NULL: next to lmpipe (build tree or install) */
    bool no_shm;
    /* lmpipe-http: started when http_listen ("HOST:PORT") is set; the keys
     * are "k1,k2" lists.  Strings are borrowed until lp_pipeline_destroy(). */
    const char *http_listen;
    const char *http_api_keys;
    const char *http_admin_keys;
    int max_seqs, max_batch_tokens, n_ctx, threads; /* 0: the service's default */
    int prefill_chunk;   /* coordinator: prompt tokens beside decode tokens; 0: its default */
    /* engine-svc's paged KV (engine.kv_block, engine.kv_pool_tokens,
     * engine.kv_pool_mb): --kv-block when has_kv_block (0: contiguous);
     * the pool sizes when > 0. */
    bool has_kv_block;
    int kv_block;
    int64_t kv_pool_tokens, kv_pool_mb;
    int64_t kv_pool_swa_tokens;     /* engine.kv_pool_swa_tokens: the sliding-window
                                     * layers' pool; 0: the engine's default */
    int max_queued_per_client;      /* coordinator; 0: its default (max_requests / 4) */
    bool no_prefix_cache;           /* coordinator --no-prefix-cache (config coordinator.prefix_cache) */
    int kv_blocks;                  /* coordinator --kv-blocks (config coordinator.kv_blocks); 0: all */
    int drain_grace_ms;             /* coordinator's stop (SIGTERM): 0: its default (10 s); < 0: none */
    /* "NOTIFY_SOCKET=..." and "WATCHDOG_USEC=..." for the services (lmpipe
     * up's relay, tools/notify-relay.h) or NULL.  systemd's own NOTIFY_SOCKET,
     * WATCHDOG_USEC and WATCHDOG_PID are never passed on. */
    const char *notify_env[2];
    /* CURVE (docs/SECURITY.md).  curve_key: this host's BASE.key, with which
     * every service binds and every client side connects.  The host's own
     * key is always allowed, and is the default admin and coordinator key
     * and the default server key of every link (all services run here). */
    const char *curve_key, *curve_allow, *curve_admin, *curve_coordinator;
    const char *tokenizer_server_key, *engine_server_key, *sampler_server_key;
    bool allow_insecure_tcp;
    /* lmpipe-nats: started when nats[0] (nats.url) is set; the values of the
     * nats.* config keys in pipeline.c's order, NULL when not given. */
    const char *nats[LP_PIPELINE_NATS_KEYS];
    /* Supervision (lmpipe up): a service that dies once the pipeline is
     * ready is restarted after a backoff (100 ms doubling to 5 s, back to
     * 100 ms once it has run 250 ms), at most max_restarts times in any
     * window_s seconds; past that, or with supervise false, the pipeline
     * stops.  Config supervise.max_restarts (0: never restart) and
     * supervise.window_s. */
    bool supervise;
    int max_restarts, restart_window_s; /* 0 and 0: 10 in 60 s */
} lp_pipeline_opts_t;

typedef struct lp_pipeline lp_pipeline_t;

/* Fill opts from config keys (deploy/lmpipe.conf); strings are borrowed from
 * the config.  Unknown keys are an error naming the key. */
int lp_pipeline_opts_from_config(const lp_config_t *cfg, lp_pipeline_opts_t *o);
/* "engine,sampler" (any of tokenizer, engine, sampler, coordinator, http)
 * to LP_PIPELINE_* bits; an unknown name is an error naming it. */
int lp_pipeline_parse_only(const char *list, unsigned *out);

int lp_pipeline_start(uv_loop_t *loop, const lp_pipeline_opts_t *o, lp_pipeline_t **out);
/* The client endpoint; borrowed. */
const char *lp_pipeline_endpoint(const lp_pipeline_t *p);
/* Run the loop and say hello until the coordinator answers (0), a child
 * exits, or timeout_ms passes.  Without a coordinator: until each service
 * started answers a hello. */
int lp_pipeline_wait_ready(lp_pipeline_t *p, int timeout_ms);
/* The running children's pids (at most cap); returns the count. */
int lp_pipeline_pids(const lp_pipeline_t *p, int *out, int cap);
/* Whether this pipeline runs `service` (an LP_PIPELINE_* bit), and the
 * endpoint it binds (borrowed; NULL for the gateway). */
bool lp_pipeline_runs(const lp_pipeline_t *p, unsigned service);
const char *lp_pipeline_service_endpoint(const lp_pipeline_t *p, unsigned service);
/* Services restarted by the supervision so far (all of them). */
unsigned lp_pipeline_restarts(const lp_pipeline_t *p);
/* A child has exited for good (not restarted); *name gets which (borrowed). */
bool lp_pipeline_failed(const lp_pipeline_t *p, const char **name);
/* Stop every child (SIGTERM, then SIGKILL after 5 s; the gateway and the
 * coordinator first, the services once they are gone), wait for them, and
 * remove the files and the segment.  0 when every service exited with
 * status 0 (a clean stop), else LP_ERR(ECHILD) naming the first that did
 * not.  Later calls return 0. */
int lp_pipeline_stop(lp_pipeline_t *p);
/* Stop (if not yet) and free.  Safe on NULL. */
void lp_pipeline_destroy(lp_pipeline_t **self_p);

#endif
