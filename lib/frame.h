/* frame.h - lmpipe messages on ZeroMQ sockets.
 *
 * A message is [routing id (ROUTER only)] [Msg (protobuf)] [raw (optional)].
 * The raw frame carries logit rows inline (float32, row after row).  A
 * message with any other shape, or whose Msg does not decode, is malformed:
 * lp_frame_recv() consumes every part of it and returns LP_ERR(EPROTO). */
#ifndef LP_FRAME_H
#define LP_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "error.h"
#include "lmpipe.pb-c.h"

#define LP_FRAME_MAX_PEER 255
#define LP_FRAME_MAX_BYTES (256u << 20) /* largest Msg or raw frame accepted */

typedef struct lp_frame {
    uint8_t peer[LP_FRAME_MAX_PEER]; /* routing id, ROUTER sockets only */
    size_t peer_len;
    /* The peer's CURVE public key (Z85) as the ZAP handler accepted it;
     * "" on ipc:// and plain TCP. */
    char user_id[41];
    Lmpipe__Msg *msg;                /* owned; NULL after a failed recv */
    zmq_msg_t raw;                   /* valid when has_raw */
    bool has_raw;
} lp_frame_t;

/* Receive one whole message without blocking.  `router`: the first part is
 * a routing id.  Returns 0, LP_ERR(EAGAIN) when none waits, or
 * LP_ERR(EPROTO) for a malformed message (message set, peer kept when one
 * was read).  Call lp_frame_clear() after every call. */
int lp_frame_recv(void *sock, bool router, lp_frame_t *f);
void lp_frame_clear(lp_frame_t *f);
const void *lp_frame_raw(const lp_frame_t *f, size_t *len);

/* Send `msg` (and `raw` when raw_len > 0; NULL peer for DEALER sockets)
 * without blocking.  LP_ERR(EHOSTUNREACH) when a ROUTER's peer has gone
 * (ZMQ_ROUTER_MANDATORY), LP_ERR(EAGAIN) at the high-water mark. */
int lp_frame_send(void *sock, const uint8_t *peer, size_t peer_len, const Lmpipe__Msg *msg,
                  const void *raw, size_t raw_len);
/* Send Msg{id, error{code, message, kind}}, the kind that of the code
 * (lp_error_kind_of). */
int lp_frame_send_error(void *sock, const uint8_t *peer, size_t peer_len, uint64_t id, int code,
                        const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* The same with the kind and the request field at fault (NULL: none). */
int lp_frame_send_error_kind(void *sock, const uint8_t *peer, size_t peer_len, uint64_t id, int code,
                             enum lp_error_kind kind, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 8, 9)));
/* An Error's kind: its kind field, or from its code when a peer left it out. */
enum lp_error_kind lp_frame_error_kind(const Lmpipe__Error *e);
/* A FinalEvent's error kind: unavailable when retryable, its error_kind,
 * else internal. */
enum lp_error_kind lp_frame_final_kind(const Lmpipe__FinalEvent *f);

/* The name of a Msg body ("hello", "step", ...), for messages. */
const char *lp_msg_body_name(Lmpipe__Msg__BodyCase c);

#endif
