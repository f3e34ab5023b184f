/* sweep_test.c - lp_sweep_stale on fake shm and tmp folders: a dead
 * (or unreaped) owner's segment and run folder go; a live owner's, a foreign name, a
 * segment whose engine still runs, and a run folder with other files stay. */
#include "sweep.h"

#include "../tests/check.h"
#include "error.h"
#include "shm-ring.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static char base[64];

static void path(char *out, size_t n, const char *rel) { snprintf(out, n, "%s/%s", base, rel); }

static bool exists(const char *rel)
{
    char p[256];
    path(p, sizeof(p), rel);
    struct stat st;
    return lstat(p, &st) == 0;
}

static void touch(const char *rel, long owner_pid)
{
    char p[256];
    path(p, sizeof(p), rel);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    if (owner_pid >= 0) { /* a ring header */
        lp_shm_ring_header_t h = {0};
        h.magic = LP_SHM_RING_MAGIC;
        h.owner_pid = (uint32_t)owner_pid;
        fwrite(&h, sizeof(h), 1, f);
    }
    fclose(f);
}

static void sock(const char *rel)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    path(a.sun_path, sizeof(a.sun_path), rel);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
    close(fd); /* the file stays, as after a crash */
}

static void mk(const char *rel)
{
    char p[256];
    path(p, sizeof(p), rel);
    CHECK(mkdir(p, 0700) == 0);
}

/* A PID that was just used and is now dead. */
static long dead_pid(void)
{
    pid_t p = fork();
    if (p == 0) _exit(0);
    waitpid(p, NULL, 0);
    return (long)p;
}

/* A PID that has exited but is not reaped yet. */
static long zombie_pid(void)
{
    pid_t p = fork();
    if (p == 0) _exit(0);
    for (int i = 0; i < 200; i++) { /* until it has exited */
        siginfo_t si = {0};
        if (waitid(P_PID, (id_t)p, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == p) break;
        usleep(5000);
    }
    return (long)p;
}

int main(void)
{
    snprintf(base, sizeof(base), "/tmp/lp-sweep-test-XXXXXX");
    CHECK(mkdtemp(base) != NULL);
    long dead = dead_pid(), live = (long)getppid();
    char n[256];
    mk("shm");
    mk("tmp");
    /* segments */
    snprintf(n, sizeof(n), "shm/lmpipe-%ld-0123456789abcdef", dead);
    touch(n, dead); /* stale: goes */
    char stale_seg[256];
    snprintf(stale_seg, sizeof(stale_seg), "%s", n);
    snprintf(n, sizeof(n), "shm/lmpipe-%ld-0123456789abcdee", dead);
    touch(n, live); /* its engine still runs: stays */
    char engine_live[256];
    snprintf(engine_live, sizeof(engine_live), "%s", n);
    snprintf(n, sizeof(n), "shm/lmpipe-%ld-0123456789abcdef", live);
    touch(n, -1); /* live owner: stays */
    char live_seg[256];
    snprintf(live_seg, sizeof(live_seg), "%s", n);
    snprintf(n, sizeof(n), "shm/lmpipe-%ld-0123456789ABCDEF", dead);
    touch(n, -1); /* not a name lmpipe makes: stays */
    char odd_seg[256];
    snprintf(odd_seg, sizeof(odd_seg), "%s", n);
    touch("shm/other-1-0123456789abcdef", -1);
    long zpid = zombie_pid();
    char zombie_seg[256];
    snprintf(zombie_seg, sizeof(zombie_seg), "shm/lmpipe-%ld-00000000000000aa", zpid);
    touch(zombie_seg, zpid); /* its owners have exited, unreaped: goes */
    /* run folders */
    char stale_dir[128], busy_dir[128], live_dir[128], odd_dir[128];
    snprintf(stale_dir, sizeof(stale_dir), "tmp/lmpipe-%ld-aB3xYz", dead);
    mk(stale_dir);
    snprintf(n, sizeof(n), "%s/engine.sock", stale_dir);
    sock(n);
    snprintf(busy_dir, sizeof(busy_dir), "tmp/lmpipe-%ld-Q1w2E3", dead);
    mk(busy_dir);
    snprintf(n, sizeof(n), "%s/coordinator.sock", busy_dir);
    sock(n);
    snprintf(n, sizeof(n), "%s/notes.txt", busy_dir);
    touch(n, -1);
    snprintf(live_dir, sizeof(live_dir), "tmp/lmpipe-%ld-aB3xYz", live);
    mk(live_dir);
    snprintf(n, sizeof(n), "%s/engine.sock", live_dir);
    sock(n);
    snprintf(odd_dir, sizeof(odd_dir), "tmp/lmpipe-wire-%ld", dead);
    mk(odd_dir);

    char shm_dir[128], tmp_dir[128];
    path(shm_dir, sizeof(shm_dir), "shm");
    path(tmp_dir, sizeof(tmp_dir), "tmp");
    lp_sweep_counts_t c;
    CHECK_RC(lp_sweep_stale(shm_dir, tmp_dir, &c), 0);
    CHECK(c.segments == 2 && c.run_dirs == 1, "%d segments, %d run folders swept", c.segments, c.run_dirs);
    CHECK(!exists(stale_seg) && !exists(zombie_seg));
    waitpid((pid_t)zpid, NULL, 0);
    CHECK(exists(engine_live) && exists(live_seg) && exists(odd_seg) && exists("shm/other-1-0123456789abcdef"));
    CHECK(!exists(stale_dir));
    snprintf(n, sizeof(n), "%s/notes.txt", busy_dir);
    CHECK(exists(busy_dir) && exists(n)); /* its socket went, the rest stays */
    snprintf(n, sizeof(n), "%s/coordinator.sock", busy_dir);
    CHECK(!exists(n));
    snprintf(n, sizeof(n), "%s/engine.sock", live_dir);
    CHECK(exists(live_dir) && exists(n));
    CHECK(exists(odd_dir));
    /* A missing folder is an error naming it; the other is still swept. */
    CHECK(lp_sweep_stale("/nonexistent-lp-sweep", tmp_dir, &c) < 0);

    char cmd[160];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", base);
    CHECK(system(cmd) == 0);
    return CHECK_DONE();
}
