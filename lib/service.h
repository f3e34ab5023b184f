/* service.h - the skeleton every lmpipe service runs in: a ROUTER socket
 * bound to the service's endpoint, a libuv loop with SIGINT/SIGTERM, the
 * hello handshake, counters, and one handler per request.
 *
 * main.c parses its flags, builds its library object, and hands both to
 * lp_service_run(), which returns when a signal stops the loop.  Malformed
 * messages are counted, logged once, answered with an Error where the peer
 * is known, and the service goes on. */
#ifndef LP_SERVICE_H
#define LP_SERVICE_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "curve.h"
#include "frame.h"
#include "lmpipe.pb-c.h"

typedef struct lp_service lp_service_t;

typedef struct lp_service_ops {
    const char *name;  /* for logs: "engine-svc" */
    Lmpipe__Role role;
    /* Fill this side's facts into `mine` (already lp_hello_init'ed) and check
     * the peer's.  `controller`: the peer is (or becomes, if this hello is
     * accepted) the service's controller: the first peer that said hello as
     * ROLE_COORDINATOR (over CURVE only a curve.coordinator key may).  Return 0, or a negative code with lp_error_set() to
     * refuse the peer.  Strings put in `mine` must live until the next call.
     * May be NULL. */
    int (*hello)(void *ctx, const Lmpipe__Hello *peer, bool controller, Lmpipe__Hello *mine);
    /* One request from a peer that has said hello.  Reply with
     * lp_service_reply() at most once, or return a negative code with
     * lp_error_set() and the skeleton replies with an Error. */
    int (*handle)(void *ctx, lp_service_t *svc, const lp_frame_t *req);
    /* After the socket is bound and before the loop runs; may be NULL.  A
     * negative return stops the service. */
    int (*start)(void *ctx, lp_service_t *svc);
    /* After the loop stops, before the socket closes; may be NULL. */
    void (*stop)(void *ctx, lp_service_t *svc);
    /* The first SIGINT/SIGTERM: stop taking new work, let the running work
     * end, and call lp_service_stop() when it has (the skeleton then closes
     * the socket with a short linger, so the last replies still go out).  A
     * second signal stops at once.  May be NULL: the first signal stops. */
    void (*drain)(void *ctx, lp_service_t *svc);
    /* The service's own counters in a StatsReply (n_active); may be NULL. */
    void (*stats)(void *ctx, Lmpipe__StatsReply *out);
    /* false: the skeleton tells systemd READY=1 once bound and started;
     * true: the service sends it itself when it is ready (the coordinator,
     * once its hello checks pass; lib/sdnotify.h). */
    bool ready_later;
    /* > 0: ZeroMQ heartbeats to every peer every heartbeat_ms (a peer silent
     * for 3 times that is disconnected, and sends to it fail); 0: none. */
    int heartbeat_ms;
} lp_service_ops_t;

/* Bind a ROUTER to `endpoint` and serve until SIGINT or SIGTERM.  Under
 * systemd (NOTIFY_SOCKET) it also sends READY=1, WATCHDOG=1 from the loop
 * and STOPPING=1 (lib/sdnotify.h).  Returns 0 after a clean stop, or a
 * negative code with lp_error_msg() set.  `sec` (may be NULL: no keys) are
 * the CURVE flags: a non-local endpoint binds as a CURVE server behind a ZAP
 * handler (lib/zap.h), or is refused without keys unless
 * sec->allow_insecure_tcp.  An ipc:// socket file gets mode 0600. */
int lp_service_run_secure(const lp_service_ops_t *ops, void *ctx, const char *endpoint,
                          const lp_curve_opts_t *sec);
/* The same without keys. */
int lp_service_run(const lp_service_ops_t *ops, void *ctx, const char *endpoint);

/* Reply to `req` with `msg` (its id is set to the request's) and an
 * optional raw frame. */
int lp_service_reply(lp_service_t *svc, const lp_frame_t *req, Lmpipe__Msg *msg, const void *raw,
                     size_t raw_len);
/* Send to any peer that has said hello (events that follow a request). */
int lp_service_send(lp_service_t *svc, const uint8_t *peer, size_t peer_len, Lmpipe__Msg *msg,
                    const void *raw, size_t raw_len);

/* Whether `req` comes from the controller (see ops.hello).  Engine steps,
 * sampler sessions and detokenizer streams are the controller's alone, so
 * that no other peer can disturb the coordinator's requests. */
bool lp_service_from_controller(const lp_service_t *svc, const lp_frame_t *req);
/* Whether `req` may change what every client gets (SamplerControl): a peer
 * on an ipc:// endpoint (this host, guarded by file modes), or a CURVE peer
 * whose key is on the admin list (--curve-admin). */
bool lp_service_from_admin(const lp_service_t *svc, const lp_frame_t *req);
/* The service's loaded CURVE settings, for its own client sides (the
 * coordinator's links); borrowed for the service's life. */
const lp_curve_t *lp_service_curve(const lp_service_t *svc);

uv_loop_t *lp_service_loop(lp_service_t *svc);
void *lp_service_zmq_ctx(lp_service_t *svc);
/* Stop the loop as a signal does. */
void lp_service_stop(lp_service_t *svc);
/* Whether SIGINT or SIGTERM has arrived, even while a handler still runs
 * and the loop has not seen it: a handler that waits long (engine-svc on a
 * full ring) checks it to give up.  Safe from any thread. */
bool lp_service_stop_requested(void);
void lp_service_count_malformed(lp_service_t *svc);

/* Socket options every lmpipe socket gets: linger 0, no HWM limits. */
void lp_service_sockopts(void *sock);

/* When LMPIPE_PARENT_PID names this process's parent (lmpipe up), ask the
 * kernel for SIGTERM when that parent dies. */
void lp_service_watch_parent(void);

#endif
