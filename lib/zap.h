/* zap.h - the ZAP handler of a CURVE service (RFC 27): a REP socket on
 * inproc://zeromq.zap.01 in the service's ZeroMQ context, driven from its
 * libuv loop, that accepts only CURVE peers whose public key is on the
 * allow list (User-Id: the Z85 key) and refuses every other peer.
 *
 * Every failed handshake on the served socket (refused by this handler, no
 * key, a key for another server) is counted from the socket's monitor
 * events: a refused peer gets nothing, not even an Error.  Each refused key
 * is logged once; failures before ZAP (no key, wrong server key: the peer's
 * key is not known then) once per kind. */
#ifndef LP_ZAP_H
#define LP_ZAP_H

#include <stdint.h>
#include <uv.h>

#include "curve.h"

typedef struct lp_zap lp_zap_t;

/* Before `server` binds: start the handler in `zctx` and watch `server`'s
 * handshakes.  `allow` is borrowed until lp_zap_destroy; `who` names the
 * service in logs. */
int lp_zap_new(uv_loop_t *loop, void *zctx, void *server, const lp_keylist_t *allow,
               const char *who, lp_zap_t **out);
/* Close both sockets; the loop must run once more before it closes. */
void lp_zap_destroy(lp_zap_t **self_p);
/* Handshakes that failed or were refused. */
uint64_t lp_zap_refused(const lp_zap_t *z);

#endif
