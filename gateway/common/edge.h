/* edge.h - the process shell of an edge process (lmpipe-http,
 * lmpipe-nats): a libuv loop that SIGINT/SIGTERM stop (telling systemd
 * STOPPING=1), that feeds systemd's watchdog while it runs, and whose
 * process ends with its parent (lmpipe up).  READY=1 comes from the
 * coordinator link (link.c), once the coordinator answers.  And what both
 * edges say about an error: its HTTP status, OpenAI's error type and code,
 * and the NATS error event's code, all from the error's kind (never from
 * its message). */
#ifndef LP_GW_EDGE_H
#define LP_GW_EDGE_H

#include <stdbool.h>
#include <uv.h>

#include "error.h"

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

/* An error's kind as HTTP says it: invalid_request and
 * context_length_exceeded 400, not_found 404, rate_limited 429,
 * unavailable 503, deadline_exceeded 504, internal 500. */
int lp_edge_http_status(enum lp_error_kind kind);
/* OpenAI's error "type" ("invalid_request_error", "server_error", ...) and
 * "code" ("context_length_exceeded", "rate_limit_exceeded", ...; NULL: the
 * status) for a kind. */
const char *lp_edge_openai_type(enum lp_error_kind kind);
const char *lp_edge_openai_code(enum lp_error_kind kind);
/* The NATS error event's code: "invalid_request" (the request's fault: a
 * bad field, a prompt longer than the context), "deadline_exceeded", or
 * "internal"; the event's "kind" is lp_error_kind_name(). */
const char *lp_edge_nats_code(enum lp_error_kind kind);

#endif
