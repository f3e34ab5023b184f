/* zap.c - the ZAP handler and handshake-failure counter (see zap.h). */
#include "zap.h"

#include "error.h"
#include "log.h"
#include "zloop.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#define MAX_LOGGED 64 /* refused keys remembered for "logged once" */
#define MAX_PARTS 8   /* a ZAP request has 7 parts for CURVE */

struct lp_zap {
    const char *who;
    const lp_keylist_t *allow; /* borrowed */
    void *server;              /* borrowed: the served socket */
    void *rep, *mon;
    lp_zsock_t *zrep, *zmon;
    uint64_t n_refused;
    char logged[MAX_LOGGED][LP_CURVE_KEY_LEN + 1];
    size_t n_logged;
    bool logged_full, logged_nokey, logged_proto, logged_other;
};

uint64_t lp_zap_refused(const lp_zap_t *z) { return z->n_refused; }

/* Receive one whole multipart message; false (and nothing kept) when it has
 * more than MAX_PARTS parts. */
static int recv_parts(void *sock, zmq_msg_t *parts, int *n)
{
    *n = 0;
    int more = 1;
    bool ok = true;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            break;
        }
        more = zmq_msg_more(&m);
        if (*n < MAX_PARTS) parts[(*n)++] = m;
        else {
            ok = false;
            zmq_msg_close(&m);
        }
    }
    return ok && *n > 0 ? 0 : LP_ERR(EPROTO);
}

static void close_parts(zmq_msg_t *parts, int n)
{
    for (int i = 0; i < n; i++) zmq_msg_close(&parts[i]);
}

static bool part_is(zmq_msg_t *m, const char *s)
{
    size_t n = strlen(s);
    return zmq_msg_size(m) == n && !memcmp(zmq_msg_data(m), s, n);
}

static void log_refused(lp_zap_t *z, const char *key, const char *address, const char *why)
{
    for (size_t i = 0; i < z->n_logged; i++)
        if (!strcmp(z->logged[i], key)) return;
    if (z->n_logged == MAX_LOGGED) {
        if (!z->logged_full)
            LP_WARN("%s: more refused keys; no more are logged (see StatsReply.auth_refused)", z->who);
        z->logged_full = true;
        return;
    }
    snprintf(z->logged[z->n_logged++], LP_CURVE_KEY_LEN + 1, "%s", key);
    LP_WARN("%s: refused %s from %s: %s (logged once per key)", z->who, key, address, why);
}

static void on_zap(lp_zsock_t *zs, void *sock, void *arg)
{
    lp_zap_t *z = arg;
    zmq_msg_t p[MAX_PARTS];
    int n;
    if (recv_parts(sock, p, &n) != 0 && n == 0) return;
    /* version, request id, domain, address, routing id, mechanism, credentials */
    const char *status = "400", *text = "refused";
    char key[LP_CURVE_KEY_LEN + 1] = "";
    char address[64] = "?";
    if (n >= 6 && part_is(&p[0], "1.0")) {
        size_t al = zmq_msg_size(&p[3]) < sizeof(address) ? zmq_msg_size(&p[3]) : sizeof(address) - 1;
        memcpy(address, zmq_msg_data(&p[3]), al);
        address[al] = '\0';
        if (!part_is(&p[5], "CURVE")) {
            text = "CURVE only";
            log_refused(z, "a peer without CURVE", address, text);
        } else if (n == 7 && zmq_msg_size(&p[6]) == 32) {
            zmq_z85_encode(key, zmq_msg_data(&p[6]), 32);
            if (lp_keylist_has(z->allow, key)) {
                status = "200";
                text = "OK";
            } else {
                text = "not on the allow list";
                log_refused(z, key, address, text);
            }
        }
    }
    if (n >= 2 && part_is(&p[0], "1.0")) {
        bool ok = !strcmp(status, "200");
        zmq_send(sock, "1.0", 3, ZMQ_SNDMORE | ZMQ_DONTWAIT);
        zmq_send(sock, zmq_msg_data(&p[1]), zmq_msg_size(&p[1]), ZMQ_SNDMORE | ZMQ_DONTWAIT);
        zmq_send(sock, status, 3, ZMQ_SNDMORE | ZMQ_DONTWAIT);
        zmq_send(sock, text, strlen(text), ZMQ_SNDMORE | ZMQ_DONTWAIT);
        zmq_send(sock, ok ? key : "", ok ? LP_CURVE_KEY_LEN : 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
        zmq_send(sock, "", 0, ZMQ_DONTWAIT);
        lp_zsock_kick(zs);
    } else {
        /* A REP socket must answer before it can read again; a request too
         * short to answer is a programmer's error in libzmq, not a peer's. */
        zmq_send(sock, "", 0, ZMQ_DONTWAIT);
        lp_zsock_kick(zs);
    }
    close_parts(p, n);
}

static void on_monitor(lp_zsock_t *zs, void *sock, void *arg)
{
    lp_zap_t *z = arg;
    zmq_msg_t p[MAX_PARTS];
    int n;
    recv_parts(sock, p, &n);
    if (n >= 1 && zmq_msg_size(&p[0]) == 6) {
        const uint8_t *d = zmq_msg_data(&p[0]);
        uint16_t event;
        uint32_t value;
        memcpy(&event, d, 2);
        memcpy(&value, d + 2, 4);
        if (event & (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                     ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)) {
            z->n_refused++;
            /* ZAP refusals were logged with their key above. */
            bool nokey = value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH;
            bool *once = nokey ? &z->logged_nokey : &z->logged_proto;
            if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL && !*once) {
                *once = true;
                LP_WARN("%s: refused a peer: %s (logged once; see StatsReply.auth_refused)", z->who,
                        nokey ? "no CURVE key" : "CURVE handshake failed (a key for another server?)");
            } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL && !z->logged_other) {
                z->logged_other = true;
                LP_WARN("%s: a peer's handshake failed (logged once; see StatsReply.auth_refused)",
                        z->who);
            }
        }
    }
    close_parts(p, n);
    (void)zs;
}

int lp_zap_new(uv_loop_t *loop, void *zctx, void *server, const lp_keylist_t *allow,
               const char *who, lp_zap_t **out)
{
    *out = NULL;
    lp_zap_t *z = calloc(1, sizeof(*z));
    if (!z) return LP_ERR(ENOMEM);
    z->who = who;
    z->allow = allow;
    z->server = server;
    int zero = 0, rc = 0;
    char mon_ep[64];
    snprintf(mon_ep, sizeof(mon_ep), "inproc://lmpipe-monitor-%p", server);
    z->rep = zmq_socket(zctx, ZMQ_REP);
    z->mon = zmq_socket(zctx, ZMQ_PAIR);
    if (!z->rep || !z->mon) rc = LP_ERR(zmq_errno());
    if (!rc) {
        zmq_setsockopt(z->rep, ZMQ_LINGER, &zero, sizeof(zero));
        zmq_setsockopt(z->mon, ZMQ_LINGER, &zero, sizeof(zero));
        if (zmq_bind(z->rep, "inproc://zeromq.zap.01") != 0) rc = LP_ERR(zmq_errno());
    }
    if (!rc && zmq_socket_monitor(server, mon_ep, ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                                  ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) != 0)
        rc = LP_ERR(zmq_errno());
    if (!rc && zmq_connect(z->mon, mon_ep) != 0) rc = LP_ERR(zmq_errno());
    if (rc) rc = lp_error_set(rc, "%s: ZAP handler: %s", who, zmq_strerror(-rc));
    if (!rc) rc = lp_zsock_new(loop, z->rep, on_zap, z, &z->zrep);
    if (!rc) rc = lp_zsock_new(loop, z->mon, on_monitor, z, &z->zmon);
    if (rc) {
        lp_zap_destroy(&z);
        return rc;
    }
    *out = z;
    return 0;
}

void lp_zap_destroy(lp_zap_t **self_p)
{
    if (!self_p || !*self_p) return;
    lp_zap_t *z = *self_p;
    lp_zsock_destroy(&z->zrep);
    lp_zsock_destroy(&z->zmon);
    if (z->server) zmq_socket_monitor(z->server, NULL, 0);
    if (z->rep) zmq_close(z->rep);
    if (z->mon) zmq_close(z->mon);
    free(z);
    *self_p = NULL;
}
