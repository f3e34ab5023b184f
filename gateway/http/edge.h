/* edge.h - the process shell of an edge process (lmpipe-http,
 * lmpipe-nats): a libuv loop that SIGINT/SIGTERM stop (telling systemd
 * STOPPING=1), that feeds systemd's watchdog while it runs, and whose
 * process ends with its parent (lmpipe up).  READY=1 comes from the
 * coordinator link (link.c), once the coordinator answers. */
#ifndef LP_GW_EDGE_H
#define LP_GW_EDGE_H

#include <uv.h>

typedef struct lp_edge {
    uv_loop_t loop;
    uv_signal_t sigint, sigterm;
} lp_edge_t;

/* SIGPIPE ignored, the parent watched, the loop and its signals set up. */
void lp_edge_init(lp_edge_t *e);
/* Run until SIGINT or SIGTERM, feeding systemd's watchdog. */
void lp_edge_run(lp_edge_t *e);
/* Close the signal handles and run their close callbacks; the caller then
 * frees what it started and closes the loop. */
void lp_edge_close(lp_edge_t *e);

/* A flag's integer in [lo, hi]; on anything else prints "PROG: FLAG: 'S'
 * is not an integer in [lo, hi]" and returns -1. */
int lp_edge_int_arg(const char *prog, const char *flag, const char *s, long long lo, long long hi,
                    long long *out);

#endif
