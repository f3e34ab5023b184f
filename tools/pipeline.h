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

#define LP_PIPELINE_NATS_KEYS 24

typedef struct lp_pipeline_opts {
    const char *model;
    const char *run_dir;            /* NULL: a new /tmp/lmpipe-XXXXXX */
    const char *endpoint;           /* client API; NULL: ipc://RUN_DIR/coordinator.sock */
    const char *tokenizer_endpoint; /* NULL: ipc://RUN_DIR/tokenizer.sock, and so on */
    const char *engine_endpoint;
    const char *sampler_endpoint;
    const char *sampler_default;    /* sampler-svc's default strategy (JSON); NULL: llama.cpp's */
    const char *bin_dir;            /* NULL: next to lmpipe (build tree or install) */
    bool no_shm;
    /* lmpipe-http: started when http_listen ("HOST:PORT") is set; the keys
     * are "k1,k2" lists.  Strings are borrowed until lp_pipeline_destroy(). */
    const char *http_listen;
    const char *http_api_keys;
    const char *http_admin_keys;
    int max_seqs, max_batch_tokens, n_ctx, threads; /* 0: the service's default */
    /* lmpipe-nats: started when nats[0] (nats.url) is set; the values of the
     * nats.* config keys in pipeline.c's order, NULL when not given. */
    const char *nats[LP_PIPELINE_NATS_KEYS];
} lp_pipeline_opts_t;

typedef struct lp_pipeline lp_pipeline_t;

/* Fill opts from config keys (deploy/lmpipe.conf); strings are borrowed from
 * the config.  Unknown keys are an error naming the key. */
int lp_pipeline_opts_from_config(const lp_config_t *cfg, lp_pipeline_opts_t *o);

int lp_pipeline_start(uv_loop_t *loop, const lp_pipeline_opts_t *o, lp_pipeline_t **out);
/* The client endpoint; borrowed. */
const char *lp_pipeline_endpoint(const lp_pipeline_t *p);
/* Run the loop and say hello until the coordinator answers (0), a child
 * exits, or timeout_ms passes. */
int lp_pipeline_wait_ready(lp_pipeline_t *p, int timeout_ms);
/* A child has exited; *name gets which (borrowed). */
bool lp_pipeline_failed(const lp_pipeline_t *p, const char **name);
/* Stop every child (SIGTERM, then SIGKILL after 5 s), wait for them, and
 * remove the files and the segment.  0 when every service exited with
 * status 0 (a clean stop), else LP_ERR(ECHILD) naming the first that did
 * not.  Later calls return 0. */
int lp_pipeline_stop(lp_pipeline_t *p);
/* Stop (if not yet) and free.  Safe on NULL. */
void lp_pipeline_destroy(lp_pipeline_t **self_p);

#endif
