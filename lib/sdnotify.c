/* sdnotify.c - sd_notify datagrams (see sdnotify.h). */
#include "sdnotify.h"

#include "error.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

bool lp_sdnotify_enabled(void)
{
    const char *e = getenv("NOTIFY_SOCKET");
    return e && e[0];
}

int lp_sdnotify_send(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !path[0]) return 0;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || len >= sizeof(sa.sun_path))
        return lp_error_set(LP_ERR(EINVAL), "NOTIFY_SOCKET '%s': not an absolute path or an "
                            "'@' abstract name shorter than %zu bytes", path, sizeof(sa.sun_path));
    memcpy(sa.sun_path, path, len);
    if (path[0] == '@') sa.sun_path[0] = '\0'; /* abstract: no trailing NUL in the address */
    socklen_t sa_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (path[0] == '/'));
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return lp_error_set(LP_ERR(errno), "NOTIFY_SOCKET: socket: %s", strerror(errno));
    ssize_t n = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, sa_len);
    int err = errno;
    close(fd);
    if (n < 0) return lp_error_set(LP_ERR(err), "NOTIFY_SOCKET %s: %s", path, strerror(err));
    return 0;
}

int lp_sdnotify_sendf(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    return lp_sdnotify_send(buf);
}

uint64_t lp_sdnotify_watchdog_usec(void)
{
    const char *us = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
    if (!us || !us[0]) return 0;
    if (pid && pid[0]) {
        char *end;
        long p = strtol(pid, &end, 10);
        if (*end || p != (long)getpid()) return 0;
    }
    char *end;
    unsigned long long v = strtoull(us, &end, 10);
    return *end ? 0 : (uint64_t)v;
}

struct lp_sdnotify {
    uv_timer_t timer;
};

static void on_ping(uv_timer_t *t)
{
    (void)t;
    lp_sdnotify_send("WATCHDOG=1"); /* a lost ping is what the watchdog is for */
}

static void on_closed(uv_handle_t *h) { free(h->data); }

int lp_sdnotify_watchdog_new(uv_loop_t *loop, lp_sdnotify_t **out)
{
    *out = NULL;
    uint64_t us = lp_sdnotify_watchdog_usec();
    if (!lp_sdnotify_enabled() || us == 0) return 0;
    lp_sdnotify_t *w = calloc(1, sizeof(*w));
    if (!w) return LP_ERR(ENOMEM);
    uv_timer_init(loop, &w->timer);
    w->timer.data = w;
    uint64_t ms = us / 2000;
    if (ms < 1) ms = 1;
    uv_timer_start(&w->timer, on_ping, ms, ms);
    *out = w;
    return 0;
}

void lp_sdnotify_watchdog_destroy(lp_sdnotify_t **self_p)
{
    if (!self_p || !*self_p) return;
    uv_close((uv_handle_t *)&(*self_p)->timer, on_closed);
    *self_p = NULL;
}
