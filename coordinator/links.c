/* links.c - the coordinator's links to its services: one DEALER each, and
 * the FIFO of operations whose replies are due (a service answers in the
 * order of the requests). */
#include "coord-internal.h"

#include "error.h"
#include "hello.h"
#include "log.h"

#include <stdlib.h>
#include <string.h>
#include <zmq.h>

static int op_push(lp__link_t *l, lp__op_t op)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        lp__op_t *n = malloc(cap * sizeof(lp__op_t));
        if (!n) return LP_ERR(ENOMEM);
        for (size_t i = 0; i < l->n; i++) n[i] = l->ops[(l->head + i) % l->cap];
        free(l->ops);
        l->ops = n;
        l->head = 0;
        l->cap = cap;
    }
    l->ops[(l->head + l->n++) % l->cap] = op;
    return 0;
}

int lp__link_send(lp__link_t *l, enum lp__opkind kind, uint64_t req, Lmpipe__Msg *m,
                  const void *raw, size_t raw_len)
{
    m->id = ++l->next_id;
    int rc = kind == OP_NONE ? 0 : op_push(l, (lp__op_t){m->id, kind, req});
    if (rc) return rc;
    rc = lp_frame_send(l->sock, NULL, 0, m, raw, raw_len);
    lp_zsock_kick(l->zs);
    if (rc) {
        if (kind != OP_NONE) l->n--; /* never sent: forget it */
        LP_ERROR("coordinator: send to %s: %s", l->name, lp_error_msg());
    }
    return rc;
}

void lp__link_send_hello(lp_coord_t *c, lp__link_t *l)
{
    Lmpipe__Hello h;
    lp_hello_init(&h, LMPIPE__ROLE__ROLE_COORDINATOR);
    h.no_shm = c->p.no_shm;
    /* The sampler maps the ring its engine named. */
    if (l->group && l == &l->group->samp && !c->p.no_shm) {
        const Lmpipe__Hello *e = l->group->eng.hello->hello;
        if (e->shm_name && e->shm_name[0]) h.shm_name = e->shm_name;
    }
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.body_case = LMPIPE__MSG__BODY_HELLO;
    m.hello = &h;
    lp__link_send(l, OP_HELLO, 0, &m, NULL, 0);
}

/* The operation a reply answers: the oldest pending one with its id (older
 * ones got no reply and are dropped).  False for a reply to nothing pending
 * (an Error for a quiet step). */
static bool op_pop(lp__link_t *l, const Lmpipe__Msg *msg, lp__op_t *op)
{
    bool pending = false;
    for (size_t i = 0; i < l->n && !pending; i++) pending = l->ops[(l->head + i) % l->cap].id == msg->id;
    if (!pending) {
        if (msg->body_case == LMPIPE__MSG__BODY_ERROR)
            LP_WARN("coordinator: %s: %s", l->name, msg->error->message);
        else
            LP_WARN("coordinator: %s: unexpected reply %llu", l->name, (unsigned long long)msg->id);
        return false;
    }
    while (l->n > 0) {
        *op = l->ops[l->head];
        l->head = (l->head + 1) % l->cap;
        l->n--;
        if (op->id == msg->id) return true;
        LP_WARN("coordinator: %s: no reply to message %llu", l->name, (unsigned long long)op->id);
    }
    return false;
}

static void on_link(lp_zsock_t *zs, void *sock, void *arg)
{
    lp__link_t *l = arg;
    lp_coord_t *c = l->owner;
    lp_frame_t f;
    int rc = lp_frame_recv(sock, false, &f);
    if (rc == LP_ERR(EAGAIN)) return;
    if (rc) {
        lp_service_count_malformed(c->svc);
        LP_WARN("coordinator: malformed reply from %s: %s", l->name, lp_error_msg());
        lp_frame_clear(&f);
        return;
    }
    lp__op_t op;
    bool found = op_pop(l, f.msg, &op);
    if (found) lp__coord_on_reply(c, l, &op, &f);
    lp_frame_clear(&f);
    if (found) lp__coord_pump(c);
    (void)zs;
}

int lp__link_open(lp_coord_t *c, lp__link_t *l, const char *name, Lmpipe__Role role,
                  const char *endpoint, const char *server_key, lp__group_t *group)
{
    l->name = name;
    l->role = role;
    l->endpoint = endpoint;
    l->owner = c;
    l->group = group;
    l->sock = zmq_socket(lp_service_zmq_ctx(c->svc), ZMQ_DEALER);
    if (!l->sock)
        return lp_error_set(LP_ERR(zmq_errno()), "coordinator: socket for %s: %s", name,
                            zmq_strerror(zmq_errno()));
    lp_service_sockopts(l->sock);
    /* A service on tcp:// without keys only with allow_insecure_tcp. */
    int rc = lp_curve_connect(l->sock, endpoint, lp_service_curve(c->svc), server_key, false, name);
    if (rc) {
        lp_error_prefix("coordinator: ");
        return rc;
    }
    return lp_zsock_new(lp_service_loop(c->svc), l->sock, on_link, l, &l->zs);
}

void lp__link_close(lp__link_t *l)
{
    lp_zsock_destroy(&l->zs);
    if (l->sock) zmq_close(l->sock);
    l->sock = NULL;
}

void lp__link_free(lp__link_t *l)
{
    lp__link_close(l);
    if (l->hello) lmpipe__msg__free_unpacked(l->hello, NULL);
    l->hello = NULL;
    free(l->ops);
    l->ops = NULL;
}
