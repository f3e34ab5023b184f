/* sdnotify_test.c - sd_notify datagrams on a real AF_UNIX socket: nothing
 * without NOTIFY_SOCKET, READY on a path and on an '@' abstract name,
 * WATCHDOG=1 pings from a libuv loop (none when WATCHDOG_PID names another
 * process), a malformed NOTIFY_SOCKET named in the error, and the service
 * skeleton's READY, WATCHDOG and STOPPING from lp_service_run(). */
#include "sdnotify.h"

#include "../tests/check.h"
#include "error.h"
#include "service.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static char dir[64];
static char abs_name[3][64]; /* '@' names with our pid: runs may overlap */

/* A bound datagram socket at `name` ('@' abstract or a path). */
static int listen_at(const char *name)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(name);
    memcpy(sa.sun_path, name, len);
    if (name[0] == '@') sa.sun_path[0] = '\0';
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    socklen_t sl = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (name[0] != '@'));
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sl) != 0) {
        perror("bind");
        exit(1);
    }
    struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

/* The next datagram, or "" after 200 ms. */
static const char *next_msg(int fd)
{
    static char buf[1100];
    ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

static void test_unset(void)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/unset.sock", dir);
    int fd = listen_at(path);
    unsetenv("NOTIFY_SOCKET");
    CHECK(!lp_sdnotify_enabled());
    CHECK_RC(lp_sdnotify_send("READY=1"), 0);
    setenv("WATCHDOG_USEC", "10000", 1);
    lp_sdnotify_t *w = (lp_sdnotify_t *)1;
    CHECK_RC(lp_sdnotify_watchdog_new(uv_default_loop(), &w), 0);
    CHECK(w == NULL, "a watchdog without NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    CHECK(!strcmp(next_msg(fd), ""), "something arrived without NOTIFY_SOCKET");
    close(fd);
}

static void test_ready(const char *name)
{
    int fd = listen_at(name);
    setenv("NOTIFY_SOCKET", name, 1);
    CHECK(lp_sdnotify_enabled());
    CHECK_RC(lp_sdnotify_sendf("READY=1\nSTATUS=%s", "up"), 0);
    const char *m = next_msg(fd);
    CHECK(!strcmp(m, "READY=1\nSTATUS=up"), "%s: got '%s'", name, m);
    unsetenv("NOTIFY_SOCKET");
    close(fd);
}

static void test_bad_socket(void)
{
    setenv("NOTIFY_SOCKET", "relative/path", 1);
    CHECK(lp_sdnotify_send("READY=1") == LP_ERR(EINVAL));
    CHECK(strstr(lp_error_msg(), "NOTIFY_SOCKET 'relative/path'"), "%s", lp_error_msg());
    char path[128];
    snprintf(path, sizeof(path), "%s/nobody.sock", dir);
    setenv("NOTIFY_SOCKET", path, 1);
    CHECK(lp_sdnotify_send("READY=1") < 0, "a send to no socket succeeded");
    CHECK(strstr(lp_error_msg(), path), "%s", lp_error_msg());
    unsetenv("NOTIFY_SOCKET");
}

static void on_stop_timer(uv_timer_t *t) { uv_stop(t->loop); }

static int count_pings(int fd)
{
    int n = 0;
    for (const char *m = next_msg(fd); m[0]; m = next_msg(fd)) {
        CHECK(!strcmp(m, "WATCHDOG=1"), "got '%s'", m);
        n++;
    }
    return n;
}

static void test_watchdog(void)
{
    const char *name = abs_name[1];
    int fd = listen_at(name);
    setenv("NOTIFY_SOCKET", name, 1);
    setenv("WATCHDOG_USEC", "20000", 1); /* pings every 10 ms */
    char pid[16];
    snprintf(pid, sizeof(pid), "%d", (int)getpid());
    setenv("WATCHDOG_PID", pid, 1);
    CHECK(lp_sdnotify_watchdog_usec() == 20000);
    uv_loop_t loop;
    uv_loop_init(&loop);
    uv_timer_t stop;
    uv_timer_init(&loop, &stop);
    lp_sdnotify_t *w;
    CHECK_RC(lp_sdnotify_watchdog_new(&loop, &w), 0);
    CHECK(w != NULL);
    uv_timer_start(&stop, on_stop_timer, 105, 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    lp_sdnotify_watchdog_destroy(&w);
    uv_close((uv_handle_t *)&stop, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    int n = count_pings(fd);
    CHECK(n >= 5 && n <= 11, "%d pings in 105 ms at 10 ms", n);

    /* WATCHDOG_PID of another process (our parent's, inherited): no pings. */
    snprintf(pid, sizeof(pid), "%d", (int)getppid());
    setenv("WATCHDOG_PID", pid, 1);
    CHECK(lp_sdnotify_watchdog_usec() == 0);
    CHECK_RC(lp_sdnotify_watchdog_new(&loop, &w), 0);
    CHECK(w == NULL, "a watchdog for another process's WATCHDOG_PID");
    uv_loop_close(&loop);
    unsetenv("WATCHDOG_PID");
    unsetenv("WATCHDOG_USEC");
    unsetenv("NOTIFY_SOCKET");
    close(fd);
}

/* The service skeleton: READY=1 once bound, pings from its loop, and
 * STOPPING=1 when it is stopped. */
static uv_timer_t svc_timer;
static void on_svc_timer(uv_timer_t *t) { lp_service_stop(t->data); }
static int svc_start(void *ctx, lp_service_t *svc)
{
    (void)ctx;
    uv_timer_init(lp_service_loop(svc), &svc_timer);
    svc_timer.data = svc;
    uv_timer_start(&svc_timer, on_svc_timer, 60, 0);
    return 0;
}
static int svc_handle(void *ctx, lp_service_t *svc, const lp_frame_t *req)
{
    (void)ctx, (void)svc, (void)req;
    return 0;
}

static void test_service(bool ready_later)
{
    const char *name = abs_name[2];
    int fd = listen_at(name);
    setenv("NOTIFY_SOCKET", name, 1);
    setenv("WATCHDOG_USEC", "20000", 1);
    lp_service_ops_t ops = {.name = "test-svc", .role = LMPIPE__ROLE__ROLE_TOKENIZER,
                            .handle = svc_handle, .start = svc_start, .ready_later = ready_later};
    char ep[128];
    snprintf(ep, sizeof(ep), "ipc://%s/svc.sock", dir);
    CHECK_RC(lp_service_run(&ops, NULL, ep), 0);
    unsetenv("WATCHDOG_USEC");
    unsetenv("NOTIFY_SOCKET");
    int ready = 0, pings = 0, stopping = 0, other = 0, last_ready_order = -1, order = 0;
    for (const char *m = next_msg(fd); m[0]; m = next_msg(fd), order++) {
        if (!strncmp(m, "READY=1\nSTATUS=test-svc: serving on ipc://", 42)) {
            ready++;
            last_ready_order = order;
        } else if (!strcmp(m, "WATCHDOG=1")) {
            pings++;
        } else if (!strcmp(m, "STOPPING=1")) {
            stopping++;
            CHECK(order > last_ready_order);
        } else {
            other++;
            fprintf(stderr, "unexpected: '%s'\n", m);
        }
    }
    CHECK(ready == (ready_later ? 0 : 1), "ready_later %d: %d READY", ready_later, ready);
    CHECK(last_ready_order <= 0, "READY is the first message");
    CHECK(pings >= 2, "%d pings in 60 ms at 10 ms", pings);
    CHECK(stopping == 1, "%d STOPPING", stopping);
    CHECK(other == 0);
    close(fd);
}

int main(void)
{
    snprintf(dir, sizeof(dir), "/tmp/sdnotify-test.XXXXXX");
    if (!mkdtemp(dir)) return 1;
    for (int i = 0; i < 3; i++)
        snprintf(abs_name[i], sizeof(abs_name[i]), "@lmpipe-sdnotify-test-%d-%d", (int)getpid(), i);
    test_unset();
    char path[128];
    snprintf(path, sizeof(path), "%s/notify.sock", dir);
    test_ready(path);
    test_ready(abs_name[0]);
    test_bad_socket();
    test_watchdog();
    test_service(false);
    test_service(true);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd)) return 1;
    return CHECK_DONE();
}
