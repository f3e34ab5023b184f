/* service.c - the shared service skeleton (see service.h). */
#include "service.h"

#include "error.h"
#include "hello.h"
#include "log.h"
#include "sdnotify.h"
#include "zap.h"
#include "zloop.h"

#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#define MAX_PEERS 4096

typedef struct peer {
    uint8_t id[LP_FRAME_MAX_PEER];
    size_t len;
} peer_t;

struct lp_service {
    const lp_service_ops_t *ops;
    void *ctx;
    uv_loop_t loop;
    uv_signal_t sigint, sigterm;
    void *zctx, *sock;
    lp_zsock_t *zs;
    lp_sdnotify_t *watchdog;
    peer_t *peers; /* peers that said hello; oldest evicted past MAX_PEERS */
    size_t n_peers, next_evict;
    peer_t controller; /* len 0 until a coordinator says hello */
    uint64_t controller_epoch; /* its Hello.controller_epoch */
    char controller_key[sizeof(((lp_frame_t *)0)->user_id)]; /* over CURVE: its key */
    const char *endpoint; /* borrowed from the caller of lp_service_run */
    lp_curve_t curve;
    lp_zap_t *zap; /* NULL without CURVE */
    uint64_t n_msgs, n_malformed, n_errors, n_refused;
    bool stopping, draining;
};

/* Set by the signal itself (chained before libuv's handler): the loop sees
 * the signal only once the running handler returns. */
static volatile sig_atomic_t stop_signalled;
static struct sigaction uv_sigint, uv_sigterm; /* libuv's handlers, called after ours */

bool lp_service_stop_requested(void) { return stop_signalled != 0; }

static void note_signal(int signum)
{
    stop_signalled = 1;
    const struct sigaction *next = signum == SIGINT ? &uv_sigint : &uv_sigterm;
    if (next->sa_handler != SIG_DFL && next->sa_handler != SIG_IGN) next->sa_handler(signum);
}

/* Put note_signal in front of the handler libuv installed for signum. */
static void chain_signal(int signum, struct sigaction *saved)
{
    struct sigaction sa;
    /* Already in front (a second service loop in this process): libuv's
     * handler is the one saved the first time. */
    if (sigaction(signum, NULL, &sa) != 0 || sa.sa_handler == note_signal || (sa.sa_flags & SA_SIGINFO)) return;
    *saved = sa;
    sa.sa_handler = note_signal;
    sigaction(signum, &sa, NULL);
}

void lp_service_sockopts(void *sock)
{
    int zero = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_setsockopt(sock, ZMQ_SNDHWM, &zero, sizeof(zero));
    zmq_setsockopt(sock, ZMQ_RCVHWM, &zero, sizeof(zero));
    /* A peer that sends more than any message can hold is disconnected
     * before the bytes are buffered. */
    int64_t max = (int64_t)LP_FRAME_MAX_BYTES + 4096;
    zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &max, sizeof(max));
}

void lp_service_watch_parent(void)
{
    const char *s = getenv("LMPIPE_PARENT_PID");
    if (!s) return;
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != (pid_t)atoi(s)) raise(SIGTERM); /* the parent died before prctl */
}

uv_loop_t *lp_service_loop(lp_service_t *svc) { return &svc->loop; }

bool lp_service_from_controller(const lp_service_t *svc, const lp_frame_t *req)
{
    return svc->controller.len && svc->controller.len == req->peer_len &&
           !memcmp(svc->controller.id, req->peer, req->peer_len) &&
           !strcmp(svc->controller_key, req->user_id);
}
bool lp_service_from_admin(const lp_service_t *svc, const lp_frame_t *req)
{
    if (lp_endpoint_is_local(svc->endpoint)) return true;
    return lp_keylist_has(&svc->curve.admin, req->user_id);
}

const lp_curve_t *lp_service_curve(const lp_service_t *svc) { return &svc->curve; }
void *lp_service_zmq_ctx(lp_service_t *svc) { return svc->zctx; }
void lp_service_count_malformed(lp_service_t *svc) { svc->n_malformed++; }

static bool peer_known(const lp_service_t *svc, const uint8_t *id, size_t len)
{
    for (size_t i = 0; i < svc->n_peers; i++)
        if (svc->peers[i].len == len && !memcmp(svc->peers[i].id, id, len)) return true;
    return false;
}

static void peer_add(lp_service_t *svc, const uint8_t *id, size_t len)
{
    if (peer_known(svc, id, len)) return;
    peer_t *p;
    if (svc->n_peers < MAX_PEERS) p = &svc->peers[svc->n_peers++];
    else p = &svc->peers[svc->next_evict++ % MAX_PEERS];
    memcpy(p->id, id, len);
    p->len = len;
}

int lp_service_send(lp_service_t *svc, const uint8_t *peer, size_t peer_len, Lmpipe__Msg *msg,
                    const void *raw, size_t raw_len)
{
    int rc = lp_frame_send(svc->sock, peer, peer_len, msg, raw, raw_len);
    lp_zsock_kick(svc->zs);
    return rc;
}

int lp_service_reply(lp_service_t *svc, const lp_frame_t *req, Lmpipe__Msg *msg, const void *raw,
                     size_t raw_len)
{
    msg->id = req->msg->id;
    return lp_service_send(svc, req->peer, req->peer_len, msg, raw, raw_len);
}

/* kind and param: the handler's marks (lp_error_mark), or the code's kind. */
static void reply_error(lp_service_t *svc, const lp_frame_t *f, uint64_t id, int code, enum lp_error_kind kind,
                        const char *param, const char *text)
{
    svc->n_errors++;
    lp_frame_send_error_kind(svc->sock, f->peer, f->peer_len, id, code, kind, param, "%s: %s", svc->ops->name,
                             text);
    lp_zsock_kick(svc->zs);
}

/* Whether the controller's connection is gone (closed, or dropped by the
 * heartbeats): with ROUTER_MANDATORY a message to it then fails at once.
 * Where it is still there it learns who asked. */
static bool controller_gone(lp_service_t *svc, uint64_t epoch)
{
    int rc = lp_frame_send_error(svc->sock, svc->controller.id, svc->controller.len, 0, LP_ERR(EBUSY),
                                 "%s: a coordinator with a newer epoch (%llu) said hello; this one "
                                 "stays the controller while its link is up", svc->ops->name,
                                 (unsigned long long)epoch);
    lp_zsock_kick(svc->zs);
    return rc == LP_ERR(EHOSTUNREACH);
}

static void on_hello(lp_service_t *svc, const lp_frame_t *f)
{
    const Lmpipe__Hello *peer = f->msg->hello;
    int rc = lp_hello_check(peer, LMPIPE__ROLE__ROLE_UNKNOWN);
    Lmpipe__Hello mine;
    lp_hello_init(&mine, svc->ops->role);
    bool same = lp_service_from_controller(svc, f);
    /* Over CURVE the controller role is the coordinator keys' alone: any
     * other peer saying hello first would take it and wedge the pipeline. */
    if (!rc && f->user_id[0] && peer->role == LMPIPE__ROLE__ROLE_COORDINATOR &&
        !lp_keylist_has(&svc->curve.coordinator, f->user_id))
        rc = lp_error_set(LP_ERR(EACCES), "key %s may not act as coordinator (not in "
                          "curve.coordinator)", f->user_id);
    bool coord = peer->role == LMPIPE__ROLE__ROLE_COORDINATOR;
    /* The controller role is a lease: a coordinator with a higher epoch (a
     * restarted one) takes it once the old controller's link is gone. */
    bool ctl = same || (coord && svc->controller.len == 0) ||
               (!rc && coord && peer->controller_epoch > svc->controller_epoch &&
                controller_gone(svc, peer->controller_epoch));
    if (!rc && svc->ops->hello) rc = svc->ops->hello(svc->ctx, peer, ctl, &mine);
    if (rc) {
        if (rc == LP_ERR(EAGAIN) || rc == LP_ERR(ESHUTDOWN)) /* not ready yet, or stopping */
            LP_DEBUG("%s: deferred hello from %s (pid %u): %s", svc->ops->name,
                     lp_role_name(peer->role), peer->pid, lp_error_msg());
        else if (svc->n_refused++ < 3) /* then counted in n_errors only */
            LP_WARN("%s: refused hello from %s (pid %u): %s%s", svc->ops->name,
                    lp_role_name(peer->role), peer->pid, lp_error_msg(),
                    svc->n_refused == 3 ? " (no more of these are logged)" : "");
        reply_error(svc, f, f->msg->id, rc, lp_error_kind(rc), lp_error_param(), lp_error_msg());
        return;
    }
    peer_add(svc, f->peer, f->peer_len);
    if (ctl && !same) {
        if (svc->controller.len)
            LP_WARN("%s: a new coordinator (pid %u, epoch %llu) takes over as controller", svc->ops->name,
                    peer->pid, (unsigned long long)peer->controller_epoch);
        memcpy(svc->controller.id, f->peer, f->peer_len);
        svc->controller.len = f->peer_len;
        snprintf(svc->controller_key, sizeof(svc->controller_key), "%s", f->user_id);
    }
    if (ctl && peer->controller_epoch > svc->controller_epoch) svc->controller_epoch = peer->controller_epoch;
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.body_case = LMPIPE__MSG__BODY_HELLO;
    m.hello = &mine;
    lp_service_reply(svc, f, &m, NULL, 0);
}

static void on_stats(lp_service_t *svc, const lp_frame_t *f)
{
    Lmpipe__StatsReply s = LMPIPE__STATS_REPLY__INIT;
    s.n_msgs = svc->n_msgs;
    s.n_malformed = svc->n_malformed;
    s.n_errors = svc->n_errors;
    s.auth_refused = svc->zap ? lp_zap_refused(svc->zap) : 0;
    if (svc->ops->stats) svc->ops->stats(svc->ctx, &s);
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.body_case = LMPIPE__MSG__BODY_STATS_REPLY;
    m.stats_reply = &s;
    lp_service_reply(svc, f, &m, NULL, 0);
}

static void on_msg(lp_zsock_t *zs, void *sock, void *arg)
{
    lp_service_t *svc = arg;
    lp_frame_t f;
    int rc = lp_frame_recv(sock, true, &f);
    if (rc == LP_ERR(EAGAIN)) return;
    svc->n_msgs++;
    if (rc) {
        if (svc->n_malformed++ == 0)
            LP_WARN("%s: %s (logged once; see StatsReply.n_malformed)", svc->ops->name, lp_error_msg());
        if (f.peer_len) reply_error(svc, &f, 0, rc, lp_error_kind(rc), lp_error_param(), lp_error_msg());
        lp_frame_clear(&f);
        return;
    }
    if (f.msg->body_case == LMPIPE__MSG__BODY_HELLO) {
        on_hello(svc, &f);
    } else if (!peer_known(svc, f.peer, f.peer_len)) {
        reply_error(svc, &f, f.msg->id, LP_ERR(EPROTO), LP_EK_UNAVAILABLE, NULL, "no hello yet: every connection opens with "
                    "a hello");
    } else if (f.msg->body_case == LMPIPE__MSG__BODY_STATS) {
        on_stats(svc, &f);
    } else {
        lp_error_clear();
        rc = svc->ops->handle(svc->ctx, svc, &f);
        if (rc) reply_error(svc, &f, f.msg->id, rc, lp_error_kind(rc), lp_error_param(), lp_error_msg());
    }
    lp_frame_clear(&f);
    (void)zs;
}

void lp_service_stop(lp_service_t *svc)
{
    if (svc->stopping) return;
    svc->stopping = true;
    lp_sdnotify_send("STOPPING=1");
    uv_stop(&svc->loop);
}

static void on_signal(uv_signal_t *h, int signum)
{
    lp_service_t *svc = h->data;
    if (svc->ops->drain && !svc->draining && !svc->stopping) {
        LP_INFO("%s: signal %d, draining", svc->ops->name, signum);
        svc->draining = true;
        lp_sdnotify_send("STOPPING=1");
        svc->ops->drain(svc->ctx, svc);
        return;
    }
    LP_INFO("%s: signal %d, stopping", svc->ops->name, signum);
    lp_service_stop(svc);
}

static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h)) uv_close(h, NULL);
}

int lp_service_run(const lp_service_ops_t *ops, void *ctx, const char *endpoint)
{
    return lp_service_run_secure(ops, ctx, endpoint, NULL);
}

/* Bind `endpoint`: an ipc:// socket file is created 0600 (umask around the
 * bind, which creates the file in this thread) so that only this user's
 * processes can connect. */
static int bind_endpoint(lp_service_t *svc, const char *endpoint)
{
    bool ipc = !strncmp(endpoint, "ipc://", 6);
    mode_t old = ipc ? umask(077) : 0;
    int rc = zmq_bind(svc->sock, endpoint);
    int e = zmq_errno();
    if (ipc) umask(old);
    if (rc != 0)
        return lp_error_set(LP_ERR(e), "%s: bind %s: %s", svc->ops->name, endpoint, zmq_strerror(e));
    if (ipc && chmod(endpoint + 6, 0600) != 0)
        return lp_error_set(LP_ERR(errno), "%s: chmod 600 %s: %s", svc->ops->name, endpoint + 6,
                            strerror(errno));
    return 0;
}

int lp_service_run_secure(const lp_service_ops_t *ops, void *ctx, const char *endpoint,
                          const lp_curve_opts_t *sec)
{
    signal(SIGPIPE, SIG_IGN);
    lp_service_watch_parent();
    lp_service_t *svc = calloc(1, sizeof(*svc));
    if (!svc) return LP_ERR(ENOMEM);
    svc->peers = calloc(MAX_PEERS, sizeof(peer_t));
    if (!svc->peers) {
        free(svc);
        return LP_ERR(ENOMEM);
    }
    svc->ops = ops;
    svc->ctx = ctx;
    svc->endpoint = endpoint;
    bool bound = false;
    int rc = lp_curve_load(sec, &svc->curve);
    if (rc) {
        lp_error_prefix("%s: ", ops->name);
        free(svc->peers);
        free(svc);
        return rc;
    }
    uv_loop_init(&svc->loop);
    svc->zctx = zmq_ctx_new();
    svc->sock = zmq_socket(svc->zctx, ZMQ_ROUTER);
    lp_service_sockopts(svc->sock);
    int one = 1;
    zmq_setsockopt(svc->sock, ZMQ_ROUTER_MANDATORY, &one, sizeof(one));
    if (ops->heartbeat_ms > 0) { /* before the bind: the listener copies them */
        int hb[][2] = {{ZMQ_HEARTBEAT_IVL, ops->heartbeat_ms}, {ZMQ_HEARTBEAT_TIMEOUT, 3 * ops->heartbeat_ms},
                       {ZMQ_HEARTBEAT_TTL, 6 * ops->heartbeat_ms}};
        for (size_t i = 0; i < sizeof(hb) / sizeof(hb[0]); i++) zmq_setsockopt(svc->sock, hb[i][0], &hb[i][1], sizeof(int));
    }
    /* The coordinator reconnects with the same routing id (its link keeps
     * it): the new connection replaces the old one even while this
     * service's thread is busy and has not yet seen the old one close.
     * Over CURVE the controller is also bound to its key (on_hello). */
    zmq_setsockopt(svc->sock, ZMQ_ROUTER_HANDOVER, &one, sizeof(one));
    rc = lp_curve_bind(svc->sock, endpoint, &svc->curve, ops->name);
    /* The handler is in place before the first peer can connect. */
    if (!rc && svc->curve.keyed && !lp_endpoint_is_local(endpoint))
        rc = lp_zap_new(&svc->loop, svc->zctx, svc->sock, &svc->curve.allow, ops->name, &svc->zap);
    if (rc) goto out;
    if ((rc = bind_endpoint(svc, endpoint)) != 0) goto out;
    bound = true;
    rc = lp_zsock_new(&svc->loop, svc->sock, on_msg, svc, &svc->zs);
    if (rc) goto out;
    uv_signal_init(&svc->loop, &svc->sigint);
    uv_signal_init(&svc->loop, &svc->sigterm);
    svc->sigint.data = svc->sigterm.data = svc;
    uv_signal_start(&svc->sigint, on_signal, SIGINT);
    uv_signal_start(&svc->sigterm, on_signal, SIGTERM);
    chain_signal(SIGINT, &uv_sigint);
    chain_signal(SIGTERM, &uv_sigterm);
    if ((rc = lp_sdnotify_watchdog_new(&svc->loop, &svc->watchdog)) != 0) goto out;
    if (ops->start && (rc = ops->start(ctx, svc)) != 0) goto out;
    LP_INFO("%s: serving on %s", ops->name, endpoint);
    if (!ops->ready_later && lp_sdnotify_sendf("READY=1\nSTATUS=%s: serving on %s", ops->name, endpoint))
        LP_WARN("%s: %s", ops->name, lp_error_msg());
    uv_run(&svc->loop, UV_RUN_DEFAULT);
    if (ops->stop) ops->stop(ctx, svc);
out:
    lp_sdnotify_watchdog_destroy(&svc->watchdog);
    lp_zsock_destroy(&svc->zs);
    lp_zap_destroy(&svc->zap);
    uv_walk(&svc->loop, close_walk, NULL);
    uv_run(&svc->loop, UV_RUN_DEFAULT);
    uv_loop_close(&svc->loop);
    if (svc->draining) { /* the final replies of the drain are still queued */
        int linger = 1000;
        zmq_setsockopt(svc->sock, ZMQ_LINGER, &linger, sizeof(linger));
    }
    zmq_close(svc->sock);
    /* An ipc:// endpoint leaves its socket file behind after close. */
    if (bound && !strncmp(endpoint, "ipc://", 6)) unlink(endpoint + 6);
    /* The run folder of `lmpipe up`: the last service out removes it (rmdir
     * fails while another socket file is still there), so that nothing is
     * left even when lmpipe itself was killed. */
    const char *run_dir = getenv("LMPIPE_RUN_DIR");
    if (run_dir && run_dir[0]) {
        /* lmpipe up gone too (killed): nothing will start a service again,
         * so the run's config goes with the last of us */
        const char *pp = getenv("LMPIPE_PARENT_PID");
        if (pp && atoi(pp) != (int)getppid()) {
            char conf[4096];
            snprintf(conf, sizeof(conf), "%s/lmpipe.conf", run_dir);
            unlink(conf);
        }
        rmdir(run_dir);
    }
    zmq_ctx_term(svc->zctx);
    lp_curve_clear(&svc->curve);
    free(svc->peers);
    free(svc);
    return rc;
}
