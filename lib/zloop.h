/* zloop.h - a ZeroMQ socket inside a libuv loop.
 *
 * ZMQ_FD is edge-triggered: it signals that ZMQ_EVENTS may have changed, not
 * that a message is waiting.  So after every wakeup the socket is drained,
 * one message per callback, until ZMQ_EVENTS shows no POLLIN; and after every
 * send, which can consume an edge, lp_zsock_kick() schedules another drain
 * from a libuv idle handle (the loop does not block until it has run).  A
 * prepare handle looks once more right before the loop blocks. */
#ifndef LP_ZLOOP_H
#define LP_ZLOOP_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

typedef struct lp_zsock lp_zsock_t;

/* Called once per waiting message; the callback receives it from `sock`
 * with ZMQ_DONTWAIT (every part of it). */
typedef void (*lp_zsock_cb)(lp_zsock_t *zs, void *sock, void *arg);

/* Watch `sock` (borrowed: the caller closes it after lp_zsock_destroy). */
int lp_zsock_new(uv_loop_t *loop, void *sock, lp_zsock_cb on_msg, void *arg, lp_zsock_t **out);
/* Stop watching; the handles are freed in their close callbacks, so the
 * loop must run once more (uv_run) before it is closed. */
void lp_zsock_destroy(lp_zsock_t **self_p);
/* Schedule a drain: call after every send on the socket. */
void lp_zsock_kick(lp_zsock_t *zs);
void *lp_zsock_socket(const lp_zsock_t *zs);

/* Receive one event from a socket monitor's PAIR (zmq_socket_monitor: a
 * frame [uint16 event, uint32 value], then the endpoint), without waiting:
 * the ZMQ_EVENT_* number, 0 for a malformed one, -1 when none is waiting. */
int lp_zmq_monitor_event(void *mon);

#endif
