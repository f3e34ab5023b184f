/* sweep.c - stale segments and run folders of dead pipelines (see sweep.h). */
#include "sweep.h"

#include "error.h"
#include "shm-ring.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A zombie has exited; only its exit status waits for a parent (an
 * orphan's may wait long where nothing reaps). */
static bool zombie(long pid)
{
    char path[64], buf[256];
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *close = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
    return close && close[1] == ' ' && close[2] == 'Z';
}

/* A PID that may still be running: kill(0) succeeds (and it is no zombie),
 * or the process is someone else's (EPERM).  PID reuse errs on the safe
 * side. */
static bool pid_alive(long pid)
{
    if (pid <= 0 || pid > 0x3fffffff) return true; /* not a PID we made: leave it */
    if (pid == (long)getpid()) return true;
    if (kill((pid_t)pid, 0) != 0) return errno != ESRCH;
    return !zombie(pid);
}

/* "lmpipe-PID-" then exactly `tail_len` characters each passing `ok`;
 * the PID in *pid. */
static bool name_match(const char *name, size_t tail_len, bool hex_only, long *pid)
{
    if (strncmp(name, "lmpipe-", 7)) return false;
    const char *p = name + 7;
    char *end;
    if (*p < '1' || *p > '9') return false;
    *pid = strtol(p, &end, 10);
    if (*end != '-' || end - p > 10) return false;
    const char *tail = end + 1;
    if (strlen(tail) != tail_len) return false;
    for (const char *c = tail; *c; c++) {
        bool hex = (*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f');
        bool alnum = hex || (*c >= 'A' && *c <= 'Z') || (*c >= 'g' && *c <= 'z');
        if (hex_only ? !hex : !alnum) return false;
    }
    return true;
}

static bool mine(int dfd, const char *name, mode_t type, struct stat *st)
{
    return fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW) == 0 && (st->st_mode & S_IFMT) == type &&
           st->st_uid == geteuid();
}

/* The engine that created the segment, from its header; 0 when the header
 * is not a ring's. */
static long segment_owner(int dfd, const char *name)
{
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return 0;
    lp_shm_ring_header_t h;
    ssize_t n = pread(fd, &h, sizeof(h), 0);
    close(fd);
    if (n != (ssize_t)sizeof(h) || h.magic != LP_SHM_RING_MAGIC) return 0;
    return (long)h.owner_pid;
}

static int sweep_segments(const char *shm_dir, int *count)
{
    DIR *d = opendir(shm_dir);
    if (!d) return lp_error_set(LP_ERR(errno), "sweep: %s: %s", shm_dir, strerror(errno));
    struct dirent *e;
    struct stat st;
    long pid;
    while ((e = readdir(d))) {
        if (!name_match(e->d_name, 16, true, &pid) || !mine(dirfd(d), e->d_name, S_IFREG, &st)) continue;
        if (pid_alive(pid)) continue;
        long owner = segment_owner(dirfd(d), e->d_name);
        if (owner && pid_alive(owner)) continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0) (*count)++;
    }
    closedir(d);
    return 0;
}

/* The socket files lmpipe up's services bind in a run folder. */
static const char *const run_socks[] = {"tokenizer.sock", "engine.sock", "sampler.sock", "coordinator.sock"};

static void sweep_run_dir(int parent, const char *name, int *count)
{
    int dfd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) return;
    struct stat st;
    for (size_t i = 0; i < sizeof(run_socks) / sizeof(run_socks[0]); i++)
        if (mine(dfd, run_socks[i], S_IFSOCK, &st)) unlinkat(dfd, run_socks[i], 0);
    close(dfd);
    /* Fails, and leaves the folder, when anything else is in it. */
    if (unlinkat(parent, name, AT_REMOVEDIR) == 0) (*count)++;
}

static int sweep_run_dirs(const char *tmp_dir, int *count)
{
    DIR *d = opendir(tmp_dir);
    if (!d) return lp_error_set(LP_ERR(errno), "sweep: %s: %s", tmp_dir, strerror(errno));
    struct dirent *e;
    struct stat st;
    long pid;
    while ((e = readdir(d))) {
        if (!name_match(e->d_name, 6, false, &pid) || !mine(dirfd(d), e->d_name, S_IFDIR, &st)) continue;
        if (!pid_alive(pid)) sweep_run_dir(dirfd(d), e->d_name, count);
    }
    closedir(d);
    return 0;
}

int lp_sweep_stale(const char *shm_dir, const char *tmp_dir, lp_sweep_counts_t *out)
{
    *out = (lp_sweep_counts_t){0};
    int rc = shm_dir ? sweep_segments(shm_dir, &out->segments) : 0;
    int rc2 = tmp_dir ? sweep_run_dirs(tmp_dir, &out->run_dirs) : 0;
    return rc ? rc : rc2;
}
