/* pipeline.h - start the four services as child processes and supervise
 * them with libuv (lmpipe up, lmpipe run, lmpipe bench), and with
 * http.listen the HTTP gateway (lmpipe-http), which is restarted when it
 * exits: the pipeline does not depend on it.  Stopping sends
 * SIGTERM, then SIGKILL after 5 s, and removes what the pipeline leaves:
 * socket files, the run folder, the shared-memory segment. */
#ifndef LP_TOOLS_PIPELINE_H
#define LP_TOOLS_PIPELINE_H

#include <stdbool.h>
#include <uv.h>

#include "config.h"
#include "params.h"

/* The services, as bits of lp_pipeline_opts_t.only. */
enum {
    LP_PIPELINE_TOKENIZER = 1 << 0,
    LP_PIPELINE_ENGINE = 1 << 1,
    LP_PIPELINE_SAMPLER = 1 << 2,
    LP_PIPELINE_COORDINATOR = 1 << 3,
    LP_PIPELINE_HTTP = 1 << 4,
    LP_PIPELINE_NATS = 1 << 5,
};

/* What to start.  The services' parameters are config keys
 * (deploy/lmpipe.conf; each service's table, `lmpipe schema --config`):
 * lmpipe up checks them all, adds what it decides for the run (the
 * endpoints in the run folder, CURVE's host key as the default of the
 * others), writes them to RUN_DIR/lmpipe.conf and starts every service
 * with `--config RUN_DIR/lmpipe.conf --service NAME`, as Postfix's master
 * starts its daemons.  Its own keys: run_dir, bin_dir, supervise.*. */
typedef struct lp_pipeline_opts {
    const lp_config_t *cfg;  /* the keys; borrowed for lp_pipeline_start() (NULL: none) */
    unsigned only;           /* LP_PIPELINE_* bits to run; 0: all (the gateway when
                              * http.listen is set, the bridge when nats.url is) */
    /* "NOTIFY_SOCKET=..." and "WATCHDOG_USEC=..." for the services (lmpipe
     * up's relay, tools/notify-relay.h) or NULL.  systemd's own NOTIFY_SOCKET,
     * WATCHDOG_USEC and WATCHDOG_PID are never passed on. */
    const char *notify_env[2];
    /* Supervision (lmpipe up): a service that dies once the pipeline is
     * ready is restarted after a backoff (100 ms doubling to 5 s, back to
     * 100 ms once it has run 250 ms), at most supervise.max_restarts times
     * (default 10; 0: never restart) in any supervise.window_s seconds
     * (default 60); past that, or with supervise false, the pipeline stops. */
    bool supervise;
} lp_pipeline_opts_t;

/* Check every key of cfg against the services' parameter tables and
 * lmpipe up's own (an unknown key, a value out of its range, an engine
 * group without its engine or sampler): LP_ERR(EINVAL) naming it. */
int lp_pipeline_check_config(const lp_config_t *cfg);
/* Every parameter table, lmpipe up's own first; n set. */
const lp_params_t *const *lp_pipeline_tables(size_t *n);

typedef struct lp_pipeline lp_pipeline_t;

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
