/* notify-relay.c - the children's sd_notify messages (see notify-relay.h). */
#include "notify-relay.h"

#include "error.h"
#include "sdnotify.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_KIDS 32

typedef struct kid {
    int pid;
    bool ready;
    uint64_t last_ms; /* last WATCHDOG=1 or READY=1, or when first seen */
} kid_t;

struct lp_relay {
    uv_loop_t *loop;
    uv_poll_t poll;
    int fd;
    uint64_t watchdog_ms;
    char env_socket[96], env_watchdog[48];
    lp_relay_pids_fn pids;
    void *pids_arg;
    kid_t kids[MAX_KIDS];
    int n_kids;
};

/* The entries of the current children, in the order the callback gives;
 * a child not seen before starts its interval now. */
static int current(lp_relay_t *r, kid_t **out)
{
    int pids[MAX_KIDS];
    int n = r->pids ? r->pids(r->pids_arg, pids, MAX_KIDS) : 0;
    kid_t now[MAX_KIDS];
    for (int i = 0; i < n; i++) {
        now[i] = (kid_t){.pid = pids[i], .last_ms = uv_now(r->loop)};
        for (int j = 0; j < r->n_kids; j++)
            if (r->kids[j].pid == pids[i]) now[i] = r->kids[j];
    }
    memcpy(r->kids, now, sizeof(kid_t) * (size_t)n); /* exited children drop out */
    r->n_kids = n;
    *out = r->kids;
    return n;
}

static void on_readable(uv_poll_t *h, int status, int events)
{
    lp_relay_t *r = h->data;
    (void)status, (void)events;
    for (;;) {
        char buf[4096];
        union {
            struct cmsghdr h;
            char b[CMSG_SPACE(sizeof(struct ucred))];
        } ctl;
        struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf) - 1};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &ctl,
                            .msg_controllen = sizeof(ctl)};
        ssize_t n = recvmsg(r->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0) return;
        buf[n] = '\0';
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_CREDENTIALS) continue;
        struct ucred cred;
        memcpy(&cred, CMSG_DATA(c), sizeof(cred));
        kid_t *kids;
        int nk = current(r, &kids);
        for (int i = 0; i < nk; i++) {
            if (kids[i].pid != cred.pid) continue;
            for (char *line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
                if (!strncmp(line, "READY=1", 7)) kids[i].ready = true;
                if (!strncmp(line, "READY=1", 7) || !strncmp(line, "WATCHDOG=1", 10))
                    kids[i].last_ms = uv_now(r->loop);
            }
        }
    }
}

int lp_relay_new(uv_loop_t *loop, lp_relay_t **out)
{
    *out = NULL;
    if (!lp_sdnotify_enabled()) return 0;
    lp_relay_t *r = calloc(1, sizeof(*r));
    if (!r) return LP_ERR(ENOMEM);
    r->loop = loop;
    uint32_t rnd = 0;
    if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) rnd = (uint32_t)uv_hrtime();
    char name[64];
    snprintf(name, sizeof(name), "@lmpipe-notify-%d-%08x", (int)getpid(), rnd);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path + 1, name + 1, strlen(name) - 1);
    socklen_t sl = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(name));
    int one = 1;
    r->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (r->fd < 0 || setsockopt(r->fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) != 0 ||
        bind(r->fd, (struct sockaddr *)&sa, sl) != 0) {
        int rc = lp_error_set(LP_ERR(errno), "notify relay %s: %s", name, strerror(errno));
        if (r->fd >= 0) close(r->fd);
        free(r);
        return rc;
    }
    snprintf(r->env_socket, sizeof(r->env_socket), "NOTIFY_SOCKET=%s", name);
    uint64_t us = lp_sdnotify_watchdog_usec();
    r->watchdog_ms = us / 1000;
    if (us) snprintf(r->env_watchdog, sizeof(r->env_watchdog), "WATCHDOG_USEC=%llu", (unsigned long long)us);
    uv_poll_init(loop, &r->poll, r->fd);
    r->poll.data = r;
    uv_poll_start(&r->poll, UV_READABLE, on_readable);
    *out = r;
    return 0;
}

const char *lp_relay_env_socket(const lp_relay_t *r) { return r->env_socket; }
const char *lp_relay_env_watchdog(const lp_relay_t *r) { return r->env_watchdog[0] ? r->env_watchdog : NULL; }

void lp_relay_set_children(lp_relay_t *r, lp_relay_pids_fn fn, void *arg)
{
    r->pids = fn;
    r->pids_arg = arg;
}

bool lp_relay_all_ready(lp_relay_t *r)
{
    kid_t *kids;
    int n = current(r, &kids);
    for (int i = 0; i < n; i++)
        if (!kids[i].ready) return false;
    return n > 0;
}

bool lp_relay_all_alive(lp_relay_t *r, int *late)
{
    kid_t *kids;
    int n = current(r, &kids);
    uint64_t now = uv_now(r->loop);
    for (int i = 0; i < n; i++)
        if (now - kids[i].last_ms > r->watchdog_ms) {
            *late = kids[i].pid;
            return false;
        }
    return true;
}

static void on_closed(uv_handle_t *h)
{
    lp_relay_t *r = h->data;
    close(r->fd);
    free(r);
}

void lp_relay_destroy(lp_relay_t **self_p)
{
    if (!self_p || !*self_p) return;
    uv_close((uv_handle_t *)&(*self_p)->poll, on_closed);
    *self_p = NULL;
}
