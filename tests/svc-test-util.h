/* svc-test-util.h - starting and stopping a service binary in the wire
 * tests (sampler_wire_test, sampler_restart_test, engine_kv_wire_test,
 * engine_stop_test). */
#ifndef LP_TESTS_SVC_TEST_UTIL_H
#define LP_TESTS_SVC_TEST_UTIL_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

/* Run argv[0] (a path) with argv; it dies with the test (LMPIPE_PARENT_PID). */
static inline pid_t test_spawn(char *const argv[])
{
    pid_t pid = fork();
    if (pid == 0) {
        char parent[32];
        snprintf(parent, sizeof(parent), "%d", (int)getppid());
        setenv("LMPIPE_PARENT_PID", parent, 1);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

/* SIGTERM, and a clean exit within 10 s (a service stuck in a wait does
 * not get to its signal handler: SIGKILL then, and the check fails). */
static inline void test_stop(pid_t pid, const char *what)
{
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    int st = 0;
    for (int i = 0; i < 1000 && waitpid(pid, &st, WNOHANG) == 0; i++) usleep(10000);
    if (waitpid(pid, &st, WNOHANG) == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        CHECK(0, "%s %d did not stop within 10 s of SIGTERM", what, (int)pid);
        return;
    }
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s %d did not stop cleanly (status %d)", what,
          (int)pid, st);
}

/* The first of n consecutive free loopback TCP ports, or 0.  They are drawn
 * from below the ephemeral range (32768 up), so that a client socket of a
 * test running beside this one cannot take them before the service binds. */
static inline int test_free_ports(int n)
{
    static unsigned seed;
    if (!seed) seed = (unsigned)time(NULL) ^ ((unsigned)getpid() << 16);
    for (int tries = 0; tries < 1000; tries++) {
        int base = 10000 + (int)(rand_r(&seed) % (32000u - 10000u - (unsigned)n));
        int ok = 1;
        for (int p = base; p < base + n && ok; p++) {
            int fd = socket(AF_INET, SOCK_STREAM, 0);
            struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p)};
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
            if (fd >= 0) close(fd);
        }
        if (ok) return base;
    }
    return 0;
}

#endif
