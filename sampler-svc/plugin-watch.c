/* plugin-watch.c - see plugin-watch.h. */
#include "plugin-watch.h"

#include "error.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MAGIC 0x4c505057u /* "LPPW" */
#define N_SLOTS 16

typedef struct slot {
    _Atomic uint32_t busy;
    uint32_t hung;
    uint64_t since_ms;    /* CLOCK_MONOTONIC, this process's */
    char plugin[64];
    char what[16];
} slot_t;

typedef struct page {
    uint32_t magic;
    _Atomic uint32_t fallbacks;
    slot_t slot[N_SLOTS];
} page_t;

static page_t *pg;
static int budget;
static _Atomic int next_slot;
static __thread int my_slot = -1;

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void lp_plugin_watch_enter(const char *name, const char *what)
{
    if (!pg) return;
    if (my_slot < 0) my_slot = atomic_fetch_add(&next_slot, 1) % N_SLOTS;
    slot_t *s = &pg->slot[my_slot];
    strncpy(s->plugin, name ? name : "?", sizeof(s->plugin) - 1);
    strncpy(s->what, what, sizeof(s->what) - 1);
    s->since_ms = now_ms();
    atomic_store(&s->busy, 1);
}

void lp_plugin_watch_leave(void)
{
    if (pg && my_slot >= 0) atomic_store(&pg->slot[my_slot].busy, 0);
}

void lp_plugin_watch_count_fallback(void)
{
    if (pg) atomic_fetch_add(&pg->fallbacks, 1);
}

uint32_t lp_plugin_watch_fallbacks(void) { return pg ? atomic_load(&pg->fallbacks) : 0; }

/* A plugin call past the budget: the process goes, marked, and lmpipe up
 * (or systemd) starts it again; the next start falls back. */
static void *watchdog(void *arg)
{
    (void)arg;
    for (;;) {
        usleep((useconds_t)(budget >= 40 ? budget / 4 : 10) * 1000);
        uint64_t now = now_ms();
        for (int i = 0; i < N_SLOTS; i++) {
            slot_t *s = &pg->slot[i];
            if (!atomic_load(&s->busy) || now - s->since_ms <= (uint64_t)budget) continue;
            s->hung = 1;
            LP_ERROR("sampler-svc: plugin %.64s's %.16s has not returned in %d ms "
                     "(--plugin-timeout-ms): stopping, to be restarted without it", s->plugin, s->what, budget);
            kill(getpid(), SIGKILL);
        }
    }
    return NULL;
}

int lp_plugin_watch_start(const char *path, int budget_ms, lp_plugin_watch_report_t *rep)
{
    memset(rep, 0, sizeof(*rep));
    void *m;
    if (path) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0) return lp_error_set(LP_ERR(errno), "%s: %s", path, strerror(errno));
        off_t size = lseek(fd, 0, SEEK_END);
        if (size != (off_t)sizeof(page_t) && ftruncate(fd, 0) == 0 && ftruncate(fd, sizeof(page_t)) != 0) {
            int e = errno;
            close(fd);
            return lp_error_set(LP_ERR(e), "%s: %s", path, strerror(e));
        }
        m = mmap(NULL, sizeof(page_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
    } else {
        m = mmap(NULL, sizeof(page_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    }
    if (m == MAP_FAILED) return lp_error_set(LP_ERR(errno), "plugin watch: mmap: %s", strerror(errno));
    page_t *p = m;
    if (p->magic != MAGIC) {
        memset(p, 0, sizeof(*p));
        p->magic = MAGIC;
    }
    for (int i = 0; i < N_SLOTS; i++) {
        slot_t *s = &p->slot[i];
        if (atomic_load(&s->busy) && !rep->died_in_plugin) {
            rep->died_in_plugin = true;
            rep->hung = s->hung != 0;
            memcpy(rep->plugin, s->plugin, sizeof(rep->plugin));
            rep->plugin[sizeof(rep->plugin) - 1] = '\0';
            memcpy(rep->what, s->what, sizeof(rep->what));
            rep->what[sizeof(rep->what) - 1] = '\0';
        }
        memset(s, 0, sizeof(*s));
    }
    rep->fallbacks = atomic_load(&p->fallbacks);
    pg = p;
    budget = budget_ms;
    if (budget_ms > 0) {
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        int e = pthread_create(&t, &a, watchdog, NULL);
        pthread_attr_destroy(&a);
        if (e) return lp_error_set(LP_ERR(e), "plugin watch: thread: %s", strerror(e));
    }
    return 0;
}
