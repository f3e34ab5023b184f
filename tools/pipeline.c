/* pipeline.c - the four services as supervised child processes (see
 * pipeline.h). */
#include "pipeline.h"

#include "client.h"
#include "coord-params.h"
#include "curve.h"
#include "engine-params.h"
#include "http-params.h"
#include "nats-params.h"
#include "sampler-params.h"
#include "tokenizer-params.h"
#include "error.h"
#include "log.h"
#include "shm-ring.h"
#include "sweep.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

enum { P_TOK, P_ENG, P_SAMP, P_COORD, P_HTTP, P_NATS, P_COUNT };
static const char *const svc_names[P_COUNT] = {"tokenizer-svc", "engine-svc", "sampler-svc",
                                               "coordinator", "lmpipe-http", "lmpipe-nats"};
/* Where each binary lies relative to lmpipe in the build tree. */
static const char *const build_paths[P_COUNT] = {"../tokenizer-svc/tokenizer-svc",
                                                 "../engine-svc/engine-svc",
                                                 "../sampler-svc/sampler-svc",
                                                 "../coordinator/coordinator",
                                                 "../gateway/http/lmpipe-http",
                                                 "../gateway/nats/lmpipe-nats"};

typedef struct child {
    uv_process_t proc;
    bool running, spawned;
    bool closing;             /* proc's handle is closing: respawn after its callback */
    int64_t status;
    int term_signal;
    struct lp_pipeline *owner;
    uint64_t t_spawned;       /* ms, the loop's clock */
    unsigned backoff_ms;      /* the next restart's delay */
    uv_timer_t restart;
    bool restart_open;
} child_t;

#define RESTART_MIN_MS 100
#define RESTART_MAX_MS 5000
/* A child that ran this long counts as recovered: its next restart waits
 * RESTART_MIN_MS again.  One that fails as it starts (its model gone, its
 * address taken) dies well within it, and backs off. */
#define RESTART_RECOVERED_MS 250
#define RESTARTS_KEPT 1024

struct lp_pipeline {
    uv_loop_t *loop;
    child_t kids[P_COUNT];
    char run_dir[PATH_MAX];
    bool own_run_dir;
    char ep[P_COUNT][PATH_MAX + 64];
    char tok_bind[PATH_MAX + 64]; /* tokenizer-svc's: the first of the list */
    unsigned run;                 /* LP_PIPELINE_* bits: the services this host runs */
    char shm_name[64];
    char sampler_state[PATH_MAX + 32]; /* sampler-svc --state-file */
    bool failed;
    int failed_idx;
    int http_fd;                  /* the gateway's listening socket, opened here; -1: none */
    bool stopping, stopped;
    unsigned stop_mask;       /* stopping: the children being stopped (1 << index) */
    uint64_t stop_wait_ms;    /* ... and how long they have before SIGKILL */
    lp_pipeline_opts_t opts;  /* for restarting lmpipe-http */
    char conf[PATH_MAX + 32]; /* RUN_DIR/lmpipe.conf: the services' config for this run */
    char curve_key[PATH_MAX]; /* curve.key ("": none), the edges' server key */
    const char *bin_dir;      /* bin_dir, or NULL */
    char *bin_dir_buf;
    bool no_shm, own_state;
    int drain_grace_ms;       /* drain_grace_ms (0: none) */
    int max_restarts, restart_window_s; /* supervise.*: -1: never restart */
    char **env;
    char env_parent[64], env_run_dir[PATH_MAX + 32];
    uv_timer_t http_timer, nats_timer;
    bool http_timer_open;
    char curve_allow[8192]; /* this host's key, then curve.allow */
    bool ready;               /* wait_ready passed: a service that dies is restarted */
    uint64_t restart_t[RESTARTS_KEPT]; /* when the last restarts were (ms), cyclic */
    unsigned n_restarts;
};

static int spawn(lp_pipeline_t *p, int i, char **env);

static void on_http_restart(uv_timer_t *t)
{
    lp_pipeline_t *p = t->data;
    if (p->stopping) return;
    if (spawn(p, P_HTTP, p->env) != 0) LP_ERROR("lmpipe: restarting lmpipe-http: %s", lp_error_msg());
}

static void on_nats_restart(uv_timer_t *t)
{
    lp_pipeline_t *p = t->data;
    if (p->stopping) return;
    if (spawn(p, P_NATS, p->env) != 0) LP_ERROR("lmpipe: restarting lmpipe-nats: %s", lp_error_msg());
}

/* lmpipe up's own keys. */
typedef struct up_opts {
    const char *run_dir, *bin_dir;
    int64_t max_restarts, window_s;
} up_opts_t;

#define UO(f) offsetof(up_opts_t, f)
static const lp_param_t up_rows[] = {
    {"run_dir", NULL, LP_P_STR, 0, 0, "a new /tmp/lmpipe-PID-XXXXXX", UO(run_dir),
     "the run folder: the ipc:// sockets, the services' config, the sampler's state", false, false},
    {"bin_dir", NULL, LP_P_STR, 0, 0, "next to lmpipe", UO(bin_dir), "where the service binaries are", false, false},
    {"supervise.max_restarts", NULL, LP_P_INT, 0, 1000000, "10", UO(max_restarts),
     "restarts of dead services allowed in supervise.window_s (0: never restart)", false, false},
    {"supervise.window_s", NULL, LP_P_INT, 1, 86400, "60", UO(window_s), "the window of supervise.max_restarts",
     false, false},
};
#undef UO
static const lp_params_t up_params = {"up", "lmpipe up", "starts the pipeline and supervises it", up_rows,
                                      sizeof(up_rows) / sizeof(up_rows[0]), sizeof(up_opts_t)};

const lp_params_t *const *lp_pipeline_tables(size_t *n)
{
    static const lp_params_t *const tables[] = {&up_params,        &lp_tokenizer_params, &lp_engine_params,
                                                &lp_sampler_params, &lp_coord_params,     &lp_http_params,
                                                &lp_nats_params};
    *n = sizeof(tables) / sizeof(tables[0]);
    return tables;
}

int lp_pipeline_check_config(const lp_config_t *cfg)
{
    size_t n;
    const lp_params_t *const *t = lp_pipeline_tables(&n);
    int rc = lp_params_check_config(t, n, cfg, NULL);
    if (rc) return rc;
    /* the engine groups: each with its engine and sampler */
    lp_coord_opts_t *co = calloc(1, sizeof(*co));
    lp_coord_group_params_t *g = calloc(LP_COORD_MAX_GROUPS, sizeof(*g));
    size_t ng;
    rc = co && g ? lp_coord_groups(cfg, co, g, &ng) : LP_ERR(ENOMEM);
    free(co);
    free(g);
    return rc;
}

int lp_pipeline_parse_only(const char *list, unsigned *out)
{
    static const char *names[] = {"tokenizer", "engine", "sampler", "coordinator", "http", "nats"};
    *out = 0;
    const char *p = list;
    while (*p) {
        size_t n = strcspn(p, ",");
        int k = -1;
        for (int i = 0; i < 6; i++)
            if (strlen(names[i]) == n && !strncmp(p, names[i], n)) k = i;
        if (k < 0)
            return lp_error_set(LP_ERR(EINVAL), "--only: '%.*s' is not one of tokenizer, engine, "
                                "sampler, coordinator, http, nats", (int)n, p);
        *out |= 1u << k;
        p += n + (p[n] == ',');
    }
    if (!*out) return lp_error_set(LP_ERR(EINVAL), "--only: no service named");
    return 0;
}

static void on_proc_closed(uv_handle_t *h)
{
    ((child_t *)h->data)->closing = false;
}

static void fail_child(lp_pipeline_t *p, int idx, const char *why)
{
    if (p->stopping || p->failed) return;
    p->failed = true;
    p->failed_idx = idx;
    const child_t *k = &p->kids[idx];
    LP_ERROR("lmpipe: %s exited (status %lld, signal %d)%s", svc_names[idx], (long long)k->status,
             k->term_signal, why);
}

static void on_restart(uv_timer_t *t)
{
    child_t *k = t->data;
    lp_pipeline_t *p = k->owner;
    int idx = (int)(k - p->kids);
    if (p->stopping || p->failed) return;
    if (k->closing) { /* the old handle's close callback is still to run */
        uv_timer_start(t, on_restart, 10, 0);
        return;
    }
    /* What the dead process left: its socket file, and the engine's ring
     * (the new engine gets a new one: a sampler that stayed up still maps
     * the old name's segment until it is told the new one). */
    if (idx == P_ENG && !p->no_shm) {
        shm_unlink(p->shm_name);
        lp_shm_ring_random_name(p->shm_name, sizeof(p->shm_name));
    }
    if (!strncmp(idx == P_TOK ? p->tok_bind : p->ep[idx], "ipc://", 6))
        unlink((idx == P_TOK ? p->tok_bind : p->ep[idx]) + 6);
    if (spawn(p, idx, p->env) != 0) {
        char why[600];
        snprintf(why, sizeof(why), "; restarting it failed: %s", lp_error_msg());
        fail_child(p, idx, why);
    }
}

/* Restart child idx, within the budget: whether it will be. */
static bool supervise(lp_pipeline_t *p, int idx)
{
    child_t *k = &p->kids[idx];
    if (!p->opts.supervise || !p->ready || (k->status == 0 && k->term_signal == 0)) return false;
    int max = p->max_restarts, window = p->restart_window_s;
    if (max < 0) return false;
    uint64_t now = uv_now(p->loop);
    unsigned in_window = 0;
    for (unsigned i = 0; i < p->n_restarts && i < RESTARTS_KEPT; i++)
        in_window += now - p->restart_t[(p->n_restarts - 1 - i) % RESTARTS_KEPT] < (uint64_t)window * 1000;
    if (in_window >= (unsigned)max) {
        char why[200];
        snprintf(why, sizeof(why), "; %u restarts in the last %d s (supervise.max_restarts = %d, "
                 "supervise.window_s = %d): stopping the pipeline", in_window, window, max, window);
        fail_child(p, idx, why);
        return true;
    }
    if (now - k->t_spawned >= RESTART_RECOVERED_MS || !k->backoff_ms) k->backoff_ms = RESTART_MIN_MS;
    p->restart_t[p->n_restarts++ % RESTARTS_KEPT] = now;
    LP_WARN("lmpipe: %s exited (status %lld, signal %d); restarting it in %.1f s (restart %u)",
            svc_names[idx], (long long)k->status, k->term_signal, k->backoff_ms / 1000.0, p->n_restarts);
    if (!k->restart_open) {
        uv_timer_init(p->loop, &k->restart);
        k->restart.data = k;
        k->restart_open = true;
    }
    uv_timer_start(&k->restart, on_restart, k->backoff_ms, 0);
    k->backoff_ms = k->backoff_ms * 2 > RESTART_MAX_MS ? RESTART_MAX_MS : k->backoff_ms * 2;
    return true;
}

unsigned lp_pipeline_restarts(const lp_pipeline_t *p) { return p->n_restarts; }

static void on_exit_cb(uv_process_t *h, int64_t status, int term_signal)
{
    child_t *k = h->data;
    k->running = false;
    k->status = status;
    k->term_signal = term_signal;
    lp_pipeline_t *p = k->owner;
    int idx = (int)(k - p->kids);
    if ((idx == P_HTTP || idx == P_NATS) && status == 2 && !p->stopping) {
        /* Bad flags would only fail again: that stops the pipeline at once. */
        uv_close((uv_handle_t *)h, NULL);
        fail_child(p, idx, "");
        return;
    }
    if (idx == P_HTTP || idx == P_NATS) {
        /* The gateway is a client: the pipeline goes on, and it comes back. */
        if (!p->stopping) {
            LP_ERROR("lmpipe: %s exited (status %lld, signal %d); restarting it in 1 s", svc_names[idx],
                     (long long)status, term_signal);
            if (idx == P_HTTP) uv_timer_start(&p->http_timer, on_http_restart, 1000, 0);
            else uv_timer_start(&p->nats_timer, on_nats_restart, 1000, 0);
        }
        uv_close((uv_handle_t *)h, NULL);
        return;
    }
    k->closing = true;
    uv_close((uv_handle_t *)h, on_proc_closed);
    if (!p->stopping && !p->failed && !supervise(p, idx)) fail_child(p, idx, "");
}

static int find_bin(const char *bin_dir, int i, char *out, size_t cap)
{
    const char *base = strrchr(build_paths[i], '/') + 1;
    if (bin_dir) {
        snprintf(out, cap, "%s/%s", bin_dir, base);
        if (access(out, X_OK) == 0) return 0;
        return lp_error_set(LP_ERR(ENOENT), "%s not found in bin_dir %s", base, bin_dir);
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) return lp_error_set(LP_ERR(ENOENT), "cannot read /proc/self/exe");
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    *slash = '\0';
    snprintf(out, cap, "%s/%s", self, build_paths[i]);
    if (access(out, X_OK) == 0) return 0;
    snprintf(out, cap, "%s/%s", self, base);
    if (access(out, X_OK) == 0) return 0;
    return lp_error_set(LP_ERR(ENOENT), "%s not found next to %s (set bin_dir)", base, self);
}

/* The service names of --service (the parameter tables'). */
static const char *const service_names[P_COUNT] = {"tokenizer", "engine", "sampler", "coordinator", "http", "nats"};

/* Child i: its binary with `--config RUN_DIR/lmpipe.conf --service NAME`
 * (it reads its own keys: its parameter table), and only what this run
 * decides at each start beside: the engine's ring, the sampler's state
 * file, the gateway's socket, the edges' server key. */
static int spawn(lp_pipeline_t *p, int i, char **env)
{
    char bin[PATH_MAX + 64];
    int rc = find_bin(p->bin_dir, i, bin, sizeof(bin));
    if (rc) return rc;
    char *argv[16];
    int n = 0;
    argv[n++] = bin;
    argv[n++] = "--config";
    argv[n++] = p->conf;
    argv[n++] = "--service";
    argv[n++] = (char *)service_names[i];
    if (i == P_ENG && !p->no_shm) {
        argv[n++] = "--shm-name";
        argv[n++] = p->shm_name;
    }
    if (i == P_SAMP) {
        /* live strategy swaps survive a restart of sampler-svc */
        argv[n++] = "--state-file";
        argv[n++] = p->sampler_state;
    }
    if (i == P_HTTP) {
        argv[n++] = "--listen-fd"; /* the socket lmpipe up listens on: stdio[3] below */
        argv[n++] = "3";
    }
    if ((i == P_HTTP || i == P_NATS) && p->curve_key[0]) { /* a client of this host's coordinator */
        argv[n++] = "--server-key";
        argv[n++] = p->curve_key;
    }
    argv[n] = NULL;
    uv_process_options_t po = {0};
    uv_stdio_container_t stdio[4];
    stdio[0].flags = UV_IGNORE;
    stdio[1].flags = UV_INHERIT_FD;
    stdio[1].data.fd = 2; /* a service never writes to lmpipe's stdout */
    stdio[2].flags = UV_INHERIT_FD;
    stdio[2].data.fd = 2;
    po.file = bin;
    po.args = argv;
    po.env = env;
    po.exit_cb = on_exit_cb;
    po.stdio_count = 3;
    if (i == P_HTTP) {
        stdio[3].flags = UV_INHERIT_FD;
        stdio[3].data.fd = p->http_fd;
        po.stdio_count = 4;
    }
    po.stdio = stdio;
    child_t *k = &p->kids[i];
    k->owner = p;
    k->proc.data = k;
    rc = uv_spawn(p->loop, &k->proc, &po);
    if (rc) {
        uv_close((uv_handle_t *)&k->proc, NULL);
        return lp_error_set(rc, "spawn %s: %s", bin, uv_strerror(rc));
    }
    k->running = k->spawned = true;
    k->t_spawned = uv_now(p->loop);
    return 0;
}

static void default_ep(lp_pipeline_t *p, int i, const char *given)
{
    static const char *files[P_COUNT] = {"tokenizer.sock", "engine.sock", "sampler.sock",
                                         "coordinator.sock"};
    if (given) snprintf(p->ep[i], sizeof(p->ep[i]), "%s", given);
    else snprintf(p->ep[i], sizeof(p->ep[i]), "ipc://%s/%s", p->run_dir, files[i]);
}

/* systemd's notification variables: for lmpipe up alone (a service that
 * said READY=1 itself would make the unit ready too early). */
static bool is_notify_var(const char *e)
{
    return !strncmp(e, "NOTIFY_SOCKET=", 14) || !strncmp(e, "WATCHDOG_USEC=", 14) ||
           !strncmp(e, "WATCHDOG_PID=", 13);
}

/* The ipc:// sockets are guarded by the run folder: this user's alone
 * (0700), made so when it is ours, refused when it is someone else's. */
static int run_dir_private(const char *dir)
{
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return lp_error_set(LP_ERR(errno), "run_dir %s: %s", dir, strerror(errno));
    struct stat st;
    if (stat(dir, &st) != 0) return lp_error_set(LP_ERR(errno), "run_dir %s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return lp_error_set(LP_ERR(ENOTDIR), "run_dir %s: not a folder", dir);
    if (st.st_uid != geteuid())
        return lp_error_set(LP_ERR(EPERM), "run_dir %s: owned by uid %u, not by this user", dir,
                            (unsigned)st.st_uid);
    if ((st.st_mode & 077) && chmod(dir, 0700) != 0)
        return lp_error_set(LP_ERR(errno), "run_dir %s: chmod 700: %s", dir, strerror(errno));
    return 0;
}

/* Keys that need a key refuse early, naming the config key. */
static int check_curve(const lp_config_t *cfg)
{
    const char *key = lp_config_get(cfg, "curve.key", NULL);
    if (key) {
        lp_curve_keypair_t kp;
        int rc = lp_curve_keypair_load(key, &kp);
        memset(&kp, 0, sizeof(kp));
        if (rc) lp_error_prefix("curve.key: ");
        return rc;
    }
    bool insecure = false;
    int rc = lp_config_get_bool(cfg, "allow_insecure_tcp", false, &insecure);
    if (rc) return rc;
    const char *ep_keys[] = {"endpoint", "tokenizer.endpoint", "engine.endpoint", "sampler.endpoint"};
    for (int i = 0; i < 4 && !insecure; i++) {
        const char *ep = lp_config_get(cfg, ep_keys[i], NULL);
        if (ep && !lp_endpoint_is_local(ep))
            return lp_error_set(LP_ERR(EACCES), "%s = %s needs CURVE keys: set curve.key (lmpipe "
                                "keygen) and curve.allow, or allow_insecure_tcp = true", ep_keys[i], ep);
    }
    const char *names[] = {"curve.allow", "curve.admin", "curve.coordinator",
                           "tokenizer.server_key", "engine.server_key", "sampler.server_key"};
    for (int i = 0; i < 6; i++)
        if (lp_config_get(cfg, names[i], NULL))
            return lp_error_set(LP_ERR(EINVAL), "%s needs curve.key (this host's key pair)", names[i]);
    return 0;
}

/* What crashed pipelines of this user left (their owners are dead): the
 * sweep never touches a live pipeline's files. */
static void sweep_stale(void)
{
    lp_sweep_counts_t n;
    if (lp_sweep_stale("/dev/shm", "/tmp", &n)) LP_DEBUG("lmpipe: %s", lp_error_msg());
    if (n.segments || n.run_dirs)
        LP_INFO("lmpipe: removed %d shared-memory segments and %d run folders of pipelines that crashed",
                n.segments, n.run_dirs);
}

/* Bind and listen on HOST:PORT ([IPv6]:PORT) for lmpipe-http, which gets
 * the socket as its fd 3 (--listen-fd). */
static int listen_http(const char *addr, int *out)
{
    const char *colon = strrchr(addr, ':');
    char host[256];
    size_t n = colon ? (size_t)(colon - addr) : 0;
    char *end = NULL;
    long port = colon ? strtol(colon + 1, &end, 10) : -1;
    if (!colon || n == 0 || n >= sizeof(host) || !colon[1] || *end || port < 0 || port > 65535)
        return lp_error_set(LP_ERR(EINVAL), "http.listen %s: expected HOST:PORT", addr);
    if (addr[0] == '[' && addr[n - 1] == ']') {
        memcpy(host, addr + 1, n - 2);
        host[n - 2] = '\0';
    } else {
        memcpy(host, addr, n);
        host[n] = '\0';
    }
    struct sockaddr_storage sa;
    if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)&sa) != 0 &&
        uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)&sa) != 0)
        return lp_error_set(LP_ERR(EINVAL), "http.listen %s: '%s' is not an IP address", addr, host);
    int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0) return lp_error_set(LP_ERR(errno), "http.listen %s: socket: %s", addr, strerror(errno));
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)); /* as libuv does */
    socklen_t len = sa.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    if (bind(fd, (struct sockaddr *)&sa, len) != 0 || listen(fd, 511) != 0) {
        int e = errno;
        close(fd);
        return lp_error_set(LP_ERR(e), "http.listen %s: %s", addr, strerror(e));
    }
    *out = fd;
    return 0;
}

/* The run's config for the services: the keys given, and what this run
 * decides where they leave it open (the endpoints in the run folder;
 * CURVE's host key first on the allow list and the default admin,
 * controller and server key).  Written 0600 in the run folder (0700). */
static int write_run_config(lp_pipeline_t *p, const lp_config_t *cfg)
{
    lp_config_t *eff = lp_config_new();
    if (!eff) return LP_ERR(ENOMEM);
    int rc = 0;
    for (int i = 0; !rc && cfg && i < lp_config_n_keys(cfg); i++)
        rc = lp_config_set(eff, lp_config_key_at(cfg, i), lp_config_get(cfg, lp_config_key_at(cfg, i), ""));
    static const char *const ep_keys[] = {"tokenizer.endpoint", "engine.endpoint", "sampler.endpoint", "endpoint"};
    for (int i = 0; !rc && i < 4; i++)
        if (!lp_config_get(eff, ep_keys[i], NULL)) rc = lp_config_set(eff, ep_keys[i], p->ep[i]);
    const char *key = lp_config_get(cfg, "curve.key", NULL);
    if (!rc && key) {
        const char *allow = lp_config_get(cfg, "curve.allow", NULL);
        char list[8192];
        snprintf(list, sizeof(list), "%s%s%s", key, allow ? "," : "", allow ? allow : "");
        rc = lp_config_set(eff, "curve.allow", list);
        static const char *const defaults[] = {"curve.admin", "curve.coordinator", "tokenizer.server_key",
                                               "engine.server_key", "sampler.server_key"};
        for (int i = 0; !rc && i < 5; i++)
            if (!lp_config_get(cfg, defaults[i], NULL)) rc = lp_config_set(eff, defaults[i], key);
    }
    if (!rc) rc = lp_config_save(eff, p->conf);
    lp_config_destroy(&eff);
    return rc;
}

int lp_pipeline_start(uv_loop_t *loop, const lp_pipeline_opts_t *o, lp_pipeline_t **out)
{
    *out = NULL;
    lp_config_t *none = NULL;
    const lp_config_t *cfg = o->cfg;
    if (!cfg && !(cfg = none = lp_config_new())) return LP_ERR(ENOMEM);
    int crc = lp_pipeline_check_config(cfg);
    up_opts_t uo = {.max_restarts = 10, .window_s = 60};
    if (!crc) crc = lp_params_from_config(&up_params, cfg, &uo, NULL);
    const char *http_listen = lp_config_get(cfg, "http.listen", NULL), *nats_url = lp_config_get(cfg, "nats.url", NULL);
    const char *model = lp_config_get(cfg, "model", NULL);
    unsigned run = o->only ? o->only
                           : LP_PIPELINE_TOKENIZER | LP_PIPELINE_ENGINE | LP_PIPELINE_SAMPLER |
                                 LP_PIPELINE_COORDINATOR | (http_listen ? LP_PIPELINE_HTTP : 0) |
                                 (nats_url ? LP_PIPELINE_NATS : 0);
    bool need_model = run & (LP_PIPELINE_TOKENIZER | LP_PIPELINE_ENGINE | LP_PIPELINE_SAMPLER);
    if (crc) {
    } else if ((run & LP_PIPELINE_HTTP) && !http_listen)
        crc = lp_error_set(LP_ERR(EINVAL), "--only http: no address to listen on (--http or http.listen)");
    else if ((run & LP_PIPELINE_NATS) && !nats_url)
        crc = lp_error_set(LP_ERR(EINVAL), "--only nats: no NATS URL (--nats or nats.url)");
    else if (need_model && !model)
        crc = lp_error_set(LP_ERR(EINVAL), "no model: give --model or 'model =' in the config");
    else if (need_model && access(model, R_OK) != 0)
        crc = lp_error_set(LP_ERR(errno), "model %s: %s", model, strerror(errno));
    if (!crc) crc = check_curve(cfg);
    /* The gateway's address first: one that cannot be had stops lmpipe up
     * here, before any service starts (and a restarted gateway never races
     * another process for it). */
    int http_fd = -1;
    if (!crc && (run & LP_PIPELINE_HTTP)) crc = listen_http(http_listen, &http_fd);
    lp_pipeline_t *p = crc ? NULL : calloc(1, sizeof(*p));
    if (!crc && !p) crc = LP_ERR(ENOMEM);
    if (crc) {
        if (http_fd >= 0) close(http_fd);
        lp_config_destroy(&none);
        return crc;
    }
    sweep_stale();
    p->loop = loop;
    p->http_fd = http_fd;
    p->failed_idx = -1;
    p->run = run;
    p->opts = *o;
    p->opts.cfg = NULL; /* borrowed only while starting: what the children need is below */
    p->bin_dir = NULL;
    p->max_restarts = uo.max_restarts ? (int)uo.max_restarts : -1;
    p->restart_window_s = (int)uo.window_s;
    int64_t grace = 10000;
    int rc = lp_config_get_bool(cfg, "no_shm", false, &p->no_shm);
    if (!rc) rc = lp_config_get_int(cfg, "drain_grace_ms", 10000, &grace);
    p->drain_grace_ms = (int)grace;
    snprintf(p->curve_key, sizeof(p->curve_key), "%s", lp_config_get(cfg, "curve.key", ""));
    if (uo.bin_dir && !(p->bin_dir = p->bin_dir_buf = strdup(uo.bin_dir))) rc = LP_ERR(ENOMEM);
    if (!rc && uo.run_dir) {
        snprintf(p->run_dir, sizeof(p->run_dir), "%s", uo.run_dir);
        rc = run_dir_private(p->run_dir);
    } else if (!rc) {
        /* The PID in the name: a later start can tell a dead pipeline's folder (sweep.h). */
        snprintf(p->run_dir, sizeof(p->run_dir), "/tmp/lmpipe-%d-XXXXXX", (int)getpid());
        if (!mkdtemp(p->run_dir)) rc = lp_error_set(LP_ERR(errno), "mkdtemp %s: %s", p->run_dir, strerror(errno));
        else p->own_run_dir = true;
    }
    if (rc) {
        free(p->bin_dir_buf);
        free(p);
        if (http_fd >= 0) close(http_fd);
        lp_config_destroy(&none);
        return rc;
    }
    /* lmpipe up's own state file lives as long as this run: a file left by
     * an earlier one would bring back strategies that its config no
     * longer asks for (sampler.state_file keeps them on purpose) */
    const char *state = lp_config_get(cfg, "sampler.state_file", NULL);
    if (state) {
        snprintf(p->sampler_state, sizeof(p->sampler_state), "%s", state);
    } else {
        snprintf(p->sampler_state, sizeof(p->sampler_state), "%s/sampler-state.json", p->run_dir);
        p->own_state = true;
        if (run & LP_PIPELINE_SAMPLER) unlink(p->sampler_state);
    }
    default_ep(p, P_TOK, lp_config_get(cfg, "tokenizer.endpoint", NULL));
    default_ep(p, P_ENG, lp_config_get(cfg, "engine.endpoint", NULL));
    default_ep(p, P_SAMP, lp_config_get(cfg, "sampler.endpoint", NULL));
    default_ep(p, P_COORD, lp_config_get(cfg, "endpoint", NULL));
    snprintf(p->tok_bind, sizeof(p->tok_bind), "%.*s", (int)strcspn(p->ep[P_TOK], ","), p->ep[P_TOK]);
    snprintf(p->conf, sizeof(p->conf), "%s/lmpipe.conf", p->run_dir);
    rc = write_run_config(p, cfg);
    lp_config_destroy(&none);
    uv_timer_init(loop, &p->http_timer);
    p->http_timer.data = p;
    uv_timer_init(loop, &p->nats_timer);
    p->nats_timer.data = p;
    p->http_timer_open = true;
    lp_shm_ring_random_name(p->shm_name, sizeof(p->shm_name));

    /* The environment, plus the parent pid for PR_SET_PDEATHSIG. */
    size_t n_env = 0;
    while (environ[n_env]) n_env++;
    char **env = calloc(n_env + 5, sizeof(char *));
    char *parent = p->env_parent, *run_dir = p->env_run_dir;
    snprintf(parent, sizeof(p->env_parent), "LMPIPE_PARENT_PID=%d", (int)getpid());
    snprintf(run_dir, sizeof(p->env_run_dir), "LMPIPE_RUN_DIR=%s", p->own_run_dir ? p->run_dir : "");
    size_t k = 0;
    for (size_t i = 0; env && i < n_env; i++)
        if (strncmp(environ[i], "LMPIPE_PARENT_PID=", 18) && strncmp(environ[i], "LMPIPE_RUN_DIR=", 15) &&
            !is_notify_var(environ[i]))
            env[k++] = environ[i];
    if (!rc && !env) rc = LP_ERR(ENOMEM);
    if (env) {
        env[k++] = parent;
        env[k++] = run_dir;
        for (int i = 0; i < 2; i++)
            if (o->notify_env[i]) env[k++] = (char *)o->notify_env[i];
    }
    for (int i = 0; !rc && i < P_COUNT; i++)
        if (run & (1u << i)) rc = spawn(p, i, env);
    p->env = env; /* kept for restarting lmpipe-http and lmpipe-nats */
    *out = p;
    return rc; /* on failure the caller destroys p, which stops what started */
}

const char *lp_pipeline_endpoint(const lp_pipeline_t *p) { return p->ep[P_COORD]; }

int lp_pipeline_pids(const lp_pipeline_t *p, int *out, int cap)
{
    int n = 0;
    for (int i = 0; i < P_COUNT && n < cap; i++)
        if (p->kids[i].running) out[n++] = p->kids[i].proc.pid;
    return n;
}

bool lp_pipeline_failed(const lp_pipeline_t *p, const char **name)
{
    if (name) *name = p->failed ? svc_names[p->failed_idx] : NULL;
    return p->failed;
}

/* Say hello to service i until it answers as `role`. */
static int wait_one(lp_pipeline_t *p, int i, Lmpipe__Role role, int timeout_ms)
{
    lp_client_t *c;
    /* This host's own services: their server key is this host's. */
    const char *key = p->curve_key[0] ? p->curve_key : NULL;
    int rc = lp_client_new_curve(i == P_TOK ? p->tok_bind : p->ep[i], key, key, &c);
    if (rc) return rc;
    rc = LP_ERR(ETIMEDOUT);
    for (int waited = 0; waited < timeout_ms; waited += 250) {
        uv_run(p->loop, UV_RUN_NOWAIT);
        const char *who;
        if (lp_pipeline_failed(p, &who)) {
            rc = lp_error_set(LP_ERR(ECHILD), "%s exited while the pipeline started", who);
            break;
        }
        rc = role == LMPIPE__ROLE__ROLE_COORDINATOR ? lp_client_hello(c, 250)
                                                    : lp_client_hello_as(c, role, 250);
        if (rc != LP_ERR(ETIMEDOUT)) break;
    }
    lp_client_destroy(&c);
    return rc;
}

int lp_pipeline_wait_ready(lp_pipeline_t *p, int timeout_ms)
{
    if (p->run & LP_PIPELINE_COORDINATOR) {
        int rc = wait_one(p, P_COORD, LMPIPE__ROLE__ROLE_COORDINATOR, timeout_ms);
        p->ready = rc == 0;
        return rc;
    }
    /* A host without the coordinator: each of its services answers. */
    static const Lmpipe__Role roles[3] = {LMPIPE__ROLE__ROLE_TOKENIZER, LMPIPE__ROLE__ROLE_ENGINE,
                                          LMPIPE__ROLE__ROLE_SAMPLER};
    for (int i = P_TOK; i <= P_SAMP; i++) {
        if (!(p->run & (1u << i))) continue;
        int rc = wait_one(p, i, roles[i], timeout_ms);
        if (rc) return rc;
    }
    p->ready = true;
    return 0;
}

bool lp_pipeline_runs(const lp_pipeline_t *p, unsigned service) { return (p->run & service) != 0; }

const char *lp_pipeline_service_endpoint(const lp_pipeline_t *p, unsigned service)
{
    for (int i = 0; i < P_HTTP; i++)
        if (service == 1u << i) return i == P_TOK ? p->tok_bind : p->ep[i];
    return NULL;
}

static void on_kill_timer(uv_timer_t *t)
{
    lp_pipeline_t *p = t->data;
    for (int i = 0; i < P_COUNT; i++)
        if ((p->stop_mask & (1u << i)) && p->kids[i].running) {
            LP_WARN("lmpipe: %s did not stop in %llu ms; killing it", svc_names[i],
                    (unsigned long long)p->stop_wait_ms);
            uv_process_kill(&p->kids[i].proc, SIGKILL);
        }
}

static void unlink_ep(const char *ep)
{
    if (!strncmp(ep, "ipc://", 6)) unlink(ep + 6);
}

/* SIGTERM to the children in `mask`, and SIGKILL to those still running
 * after wait_ms. */
static void stop_kids(lp_pipeline_t *p, unsigned mask, uint64_t wait_ms, uv_timer_t *timer)
{
    p->stop_mask = mask;
    p->stop_wait_ms = wait_ms;
    for (int i = P_COUNT - 1; i >= 0; i--)
        if ((mask & (1u << i)) && p->kids[i].running) uv_process_kill(&p->kids[i].proc, SIGTERM);
    /* The loop's clock stood still while it was not running: without this
     * the wait would count from the last time it ran. */
    uv_update_time(p->loop);
    uv_timer_start(timer, on_kill_timer, wait_ms, 0);
    for (;;) {
        bool any = false;
        for (int i = 0; i < P_COUNT; i++) any |= (mask & (1u << i)) && p->kids[i].running;
        if (!any) break;
        uv_run(p->loop, UV_RUN_ONCE);
    }
    uv_timer_stop(timer);
}

/* The coordinator drains first (it refuses new requests and gives the
 * running ones drain_grace_ms to finish, then ends them with an error), with
 * the gateways still up to pass its final events on; then the gateways; then
 * the services, so that the coordinator neither sends to a stopping service
 * nor reports it as dropped out. */
static void stop_in_order(lp_pipeline_t *p, uv_timer_t *timer)
{
    int grace = p->drain_grace_ms;
    stop_kids(p, 1u << P_COORD, (uint64_t)grace + 5000, timer);
    stop_kids(p, (1u << P_HTTP) | (1u << P_NATS), 5000, timer);
    stop_kids(p, (1u << P_TOK) | (1u << P_ENG) | (1u << P_SAMP), 5000, timer);
}

int lp_pipeline_stop(lp_pipeline_t *p)
{
    if (!p || p->stopped) return 0;
    p->stopping = true;
    uv_timer_t timer;
    uv_timer_init(p->loop, &timer);
    timer.data = p;
    stop_in_order(p, &timer);
    uv_close((uv_handle_t *)&timer, NULL);
    for (int i = 0; i < P_COUNT; i++)
        if (p->kids[i].restart_open) {
            uv_close((uv_handle_t *)&p->kids[i].restart, NULL);
            p->kids[i].restart_open = false;
        }
    if (p->http_timer_open) {
        uv_close((uv_handle_t *)&p->http_timer, NULL);
        uv_close((uv_handle_t *)&p->nats_timer, NULL);
    }
    p->http_timer_open = false;
    uv_run(p->loop, UV_RUN_NOWAIT); /* the close callbacks */
    /* What a killed service could not remove (only its own: another host's
     * or another lmpipe up's files stay). */
    if (p->kids[P_ENG].spawned) shm_unlink(p->shm_name);
    for (int i = 0; i < P_HTTP; i++)
        if (p->kids[i].spawned) unlink_ep(i == P_TOK ? p->tok_bind : p->ep[i]);
    if (p->kids[P_SAMP].spawned && p->own_state) unlink(p->sampler_state);
    unlink(p->conf);
    if (p->own_run_dir) rmdir(p->run_dir);
    p->stopped = true;
    int rc = 0;
    for (int i = 0; i < P_COUNT; i++) {
        const child_t *k = &p->kids[i];
        if (i != P_HTTP && i != P_NATS && k->spawned && !rc && (k->status != 0 || k->term_signal != 0))
            rc = lp_error_set(LP_ERR(ECHILD), "%s ended with status %lld, signal %d", svc_names[i],
                              (long long)k->status, k->term_signal);
    }
    return rc;
}

void lp_pipeline_destroy(lp_pipeline_t **self_p)
{
    if (!self_p || !*self_p) return;
    lp_pipeline_stop(*self_p);
    if ((*self_p)->http_fd >= 0) close((*self_p)->http_fd);
    free((*self_p)->env);
    free((*self_p)->bin_dir_buf);
    free(*self_p);
    *self_p = NULL;
}
