/* pipeline.c - the four services as supervised child processes (see
 * pipeline.h). */
#include "pipeline.h"

#include "client.h"
#include "curve.h"
#include "error.h"
#include "log.h"
#include "shm-ring.h"
#include "sweep.h"

#include <errno.h>
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
    char **env;
    char env_parent[64], env_run_dir[PATH_MAX + 32];
    uv_timer_t http_timer, nats_timer;
    bool http_timer_open;
    char curve_allow[8192]; /* this host's key, then curve.allow */
    bool ready;               /* wait_ready passed: a service that dies is restarted */
    uint64_t restart_t[RESTARTS_KEPT]; /* when the last restarts were (ms), cyclic */
    unsigned n_restarts;
};

static int spawn(lp_pipeline_t *p, const lp_pipeline_opts_t *o, int i, char **env);

static void on_http_restart(uv_timer_t *t)
{
    lp_pipeline_t *p = t->data;
    if (p->stopping) return;
    if (spawn(p, &p->opts, P_HTTP, p->env) != 0) LP_ERROR("lmpipe: restarting lmpipe-http: %s", lp_error_msg());
}

static void on_nats_restart(uv_timer_t *t)
{
    lp_pipeline_t *p = t->data;
    if (p->stopping) return;
    if (spawn(p, &p->opts, P_NATS, p->env) != 0) LP_ERROR("lmpipe: restarting lmpipe-nats: %s", lp_error_msg());
}

/* lmpipe-nats's config keys: nats.X becomes its flag --X (underscores as
 * dashes); nats.control_users is a comma list of --control-user, nats.tls a
 * boolean. */
static const char *const nats_keys[LP_PIPELINE_NATS_KEYS] = {
    "nats.url", "nats.creds", "nats.user", "nats.password", "nats.nkey", "nats.nkey_seed", "nats.tls",
    "nats.tls_ca", "nats.tls_cert", "nats.tls_key", "nats.stream", "nats.subjects", "nats.durable",
    "nats.max_inflight", "nats.ack_wait_ms", "nats.nak_delay_ms", "nats.dup_window_ms", "nats.max_body",
    "nats.control_subject", "nats.control_users", "nats.events_stream", "nats.events_subjects",
    "nats.events_max_age_s"};

static const char *keys[] = {"model", "run_dir", "endpoint", "tokenizer.endpoint",
                             "engine.endpoint", "sampler.endpoint", "bin_dir", "no_shm",
                             "max_seqs", "max_batch_tokens", "prefill_chunk", "n_ctx", "threads",
                             "sampler.default", "http.listen", "http.api_key", "http.admin_key",
                             "sampler.plugin_dir", "sampler.state_file", "max_queued_per_client",
                             "curve.key", "curve.allow", "curve.admin", "curve.coordinator",
                             "allow_insecure_tcp", "tokenizer.server_key", "engine.server_key",
                             "sampler.server_key", "coordinator.prefix_cache",
                             "coordinator.kv_blocks", "drain_grace_ms", "engine.kv_block",
                             "engine.kv_pool_tokens", "engine.kv_pool_mb",
                             "engine.kv_pool_swa_tokens", "supervise.max_restarts",
                             "supervise.window_s", "tokenizer.chat_template_file"};
/* group.NAME.FIELD: the engine groups a coordinator connects to. */
static const char *group_fields[] = {"engine", "sampler", "server_key", "sampler_key"};

/* A group.NAME.FIELD key: the group (added in the order the config first
 * names it) and the field's slot in it. */
static int group_key(const lp_config_t *cfg, const char *k, lp_pipeline_opts_t *o)
{
    const char *name = k + 6, *dot = strrchr(k, '.');
    size_t len = (size_t)(dot - name);
    int f = -1;
    for (int j = 0; j < 4; j++)
        if (!strcmp(dot + 1, group_fields[j])) f = j;
    bool name_ok = dot > name && len <= 64;
    for (const char *c = name; name_ok && c < dot; c++)
        name_ok = (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_' || *c == '-';
    if (f < 0 || !name_ok)
        return lp_error_set(LP_ERR(EINVAL), "config: unknown key '%s' (groups are group.NAME.engine, "
                            ".sampler, .server_key, .sampler_key; NAME of a-z 0-9 _ -)", k);
    int g = 0;
    while (g < o->n_groups && !(strlen(o->groups[g].name) == len && !strncmp(o->groups[g].name, name, len))) g++;
    if (g == o->n_groups) {
        if (g == LP_PIPELINE_MAX_GROUPS)
            return lp_error_set(LP_ERR(EINVAL), "config: %s: more than %d groups", k, LP_PIPELINE_MAX_GROUPS);
        o->groups[g] = (lp_pipeline_group_t){0};
        memcpy(o->groups[g].name, name, len);
        o->n_groups++;
    }
    const char **dst[4] = {&o->groups[g].engine, &o->groups[g].sampler, &o->groups[g].server_key,
                           &o->groups[g].sampler_key};
    *dst[f] = lp_config_get(cfg, k, NULL);
    return 0;
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

int lp_pipeline_opts_from_config(const lp_config_t *cfg, lp_pipeline_opts_t *o)
{
    for (int i = 0; i < lp_config_n_keys(cfg); i++) {
        const char *k = lp_config_key_at(cfg, i);
        bool known = false;
        for (size_t j = 0; j < sizeof(keys) / sizeof(keys[0]); j++) known |= !strcmp(k, keys[j]);
        for (size_t j = 0; j < LP_PIPELINE_NATS_KEYS; j++) known |= nats_keys[j] && !strcmp(k, nats_keys[j]);
        if (known) continue;
        int rc = !strncmp(k, "group.", 6) ? group_key(cfg, k, o)
                                           : lp_error_set(LP_ERR(EINVAL), "config: unknown key '%s'", k);
        if (rc) return rc;
    }
    for (int g = 0; g < o->n_groups; g++)
        if (!o->groups[g].engine || !o->groups[g].sampler)
            return lp_error_set(LP_ERR(EINVAL), "config: group.%s: needs both group.%s.engine and "
                                "group.%s.sampler", o->groups[g].name, o->groups[g].name, o->groups[g].name);
    o->model = lp_config_get(cfg, "model", o->model);
    o->run_dir = lp_config_get(cfg, "run_dir", o->run_dir);
    o->endpoint = lp_config_get(cfg, "endpoint", o->endpoint);
    o->tokenizer_endpoint = lp_config_get(cfg, "tokenizer.endpoint", o->tokenizer_endpoint);
    o->engine_endpoint = lp_config_get(cfg, "engine.endpoint", o->engine_endpoint);
    o->sampler_endpoint = lp_config_get(cfg, "sampler.endpoint", o->sampler_endpoint);
    o->sampler_default = lp_config_get(cfg, "sampler.default", o->sampler_default);
    o->chat_template_file = lp_config_get(cfg, "tokenizer.chat_template_file", o->chat_template_file);
    o->plugin_dir = lp_config_get(cfg, "sampler.plugin_dir", o->plugin_dir);
    o->sampler_state_file = lp_config_get(cfg, "sampler.state_file", o->sampler_state_file);
    o->bin_dir = lp_config_get(cfg, "bin_dir", o->bin_dir);
    o->http_listen = lp_config_get(cfg, "http.listen", o->http_listen);
    o->http_api_keys = lp_config_get(cfg, "http.api_key", o->http_api_keys);
    o->http_admin_keys = lp_config_get(cfg, "http.admin_key", o->http_admin_keys);
    o->curve_key = lp_config_get(cfg, "curve.key", o->curve_key);
    o->curve_allow = lp_config_get(cfg, "curve.allow", o->curve_allow);
    o->curve_admin = lp_config_get(cfg, "curve.admin", o->curve_admin);
    o->curve_coordinator = lp_config_get(cfg, "curve.coordinator", o->curve_coordinator);
    o->tokenizer_server_key = lp_config_get(cfg, "tokenizer.server_key", o->tokenizer_server_key);
    o->engine_server_key = lp_config_get(cfg, "engine.server_key", o->engine_server_key);
    o->sampler_server_key = lp_config_get(cfg, "sampler.server_key", o->sampler_server_key);
    int rc = lp_config_get_bool(cfg, "no_shm", o->no_shm, &o->no_shm);
    if (!rc) rc = lp_config_get_bool(cfg, "allow_insecure_tcp", o->allow_insecure_tcp, &o->allow_insecure_tcp);
    bool prefix_cache = !o->no_prefix_cache;
    if (!rc) rc = lp_config_get_bool(cfg, "coordinator.prefix_cache", prefix_cache, &prefix_cache);
    o->no_prefix_cache = !prefix_cache;
    for (size_t j = 0; !rc && j < LP_PIPELINE_NATS_KEYS && nats_keys[j]; j++) {
        if (!strcmp(nats_keys[j], "nats.tls")) {
            bool tls = o->nats[j] != NULL;
            rc = lp_config_get_bool(cfg, "nats.tls", tls, &tls);
            o->nats[j] = tls ? "true" : NULL;
        } else
            o->nats[j] = lp_config_get(cfg, nats_keys[j], o->nats[j]);
    }
    int64_t v;
    /* drain_grace_ms = 0 is "no grace"; absent, the coordinator's default. */
    if (!rc) rc = lp_config_get_int(cfg, "drain_grace_ms", -2, &v);
    if (!rc && v != -2 && (v < 0 || v > 3600000))
        rc = lp_error_set(LP_ERR(EINVAL), "config key drain_grace_ms: %lld is not 0..3600000", (long long)v);
    if (!rc && v != -2) o->drain_grace_ms = v ? (int)v : -1;
    const char *ints[] = {"max_seqs", "max_batch_tokens", "n_ctx", "threads",
                          "max_queued_per_client", "coordinator.kv_blocks", "prefill_chunk"};
    int *dst[] = {&o->max_seqs, &o->max_batch_tokens, &o->n_ctx, &o->threads,
                  &o->max_queued_per_client, &o->kv_blocks, &o->prefill_chunk};
    if (!rc) {
        rc = lp_config_get_int(cfg, "supervise.max_restarts", o->max_restarts, &v);
        if (!rc && (v < 0 || v > 1000000))
            rc = lp_error_set(LP_ERR(EINVAL), "config key supervise.max_restarts: %lld is not in 0..1000000",
                              (long long)v);
        /* 0 means never: stored as -1 so that 0 stays "the default". */
        if (!rc && lp_config_get(cfg, "supervise.max_restarts", NULL)) o->max_restarts = v ? (int)v : -1;
    }
    if (!rc) {
        rc = lp_config_get_int(cfg, "supervise.window_s", o->restart_window_s, &v);
        if (!rc && (v < 1 || v > 86400) && lp_config_get(cfg, "supervise.window_s", NULL))
            rc = lp_error_set(LP_ERR(EINVAL), "config key supervise.window_s: %lld is not in 1..86400",
                              (long long)v);
        if (!rc) o->restart_window_s = (int)v;
    }
    for (size_t i = 0; !rc && i < sizeof(ints) / sizeof(ints[0]); i++) {
        rc = lp_config_get_int(cfg, ints[i], *dst[i], &v);
        if (!rc && (v < 0 || v > (1 << 24)))
            rc = lp_error_set(LP_ERR(EINVAL), "config key %s: %lld is out of range", ints[i], (long long)v);
        if (!rc) *dst[i] = (int)v;
    }
    /* engine-svc's --kv-* flags, with its ranges */
    if (!rc && lp_config_get(cfg, "engine.kv_block", NULL)) {
        rc = lp_config_get_int(cfg, "engine.kv_block", 0, &v);
        if (!rc && (v < 0 || v > (1 << 16)))
            rc = lp_error_set(LP_ERR(EINVAL), "config key engine.kv_block: %lld is not in 0..%d "
                              "(0: no paging)", (long long)v, 1 << 16);
        if (!rc) {
            o->has_kv_block = true;
            o->kv_block = (int)v;
        }
    }
    const char *pool[] = {"engine.kv_pool_tokens", "engine.kv_pool_mb", "engine.kv_pool_swa_tokens"};
    int64_t *pdst[] = {&o->kv_pool_tokens, &o->kv_pool_mb, &o->kv_pool_swa_tokens};
    const int64_t pmax[] = {1LL << 40, 1LL << 30, 1LL << 40};
    for (int i = 0; !rc && i < 3; i++) {
        rc = lp_config_get_int(cfg, pool[i], *pdst[i], &v);
        if (!rc && (v < 0 || v > pmax[i]))
            rc = lp_error_set(LP_ERR(EINVAL), "config key %s: %lld is not in 0..%lld (0: the "
                              "engine's default)", pool[i], (long long)v, (long long)pmax[i]);
        if (!rc) *pdst[i] = v;
    }
    return rc;
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
    if (idx == P_ENG && !p->opts.no_shm) {
        shm_unlink(p->shm_name);
        lp_shm_ring_random_name(p->shm_name, sizeof(p->shm_name));
    }
    if (!strncmp(idx == P_TOK ? p->tok_bind : p->ep[idx], "ipc://", 6))
        unlink((idx == P_TOK ? p->tok_bind : p->ep[idx]) + 6);
    if (spawn(p, &p->opts, idx, p->env) != 0) {
        char why[600];
        snprintf(why, sizeof(why), "; restarting it failed: %s", lp_error_msg());
        fail_child(p, idx, why);
    }
}

/* Restart child idx, within the budget: whether it will be. */
static bool supervise(lp_pipeline_t *p, int idx)
{
    child_t *k = &p->kids[idx];
    const lp_pipeline_opts_t *o = &p->opts;
    if (!o->supervise || !p->ready || (k->status == 0 && k->term_signal == 0)) return false;
    int max = o->max_restarts ? o->max_restarts : 10;
    int window = o->restart_window_s ? o->restart_window_s : 60;
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

static int find_bin(const lp_pipeline_opts_t *o, int i, char *out, size_t cap)
{
    const char *base = strrchr(build_paths[i], '/') + 1;
    if (o->bin_dir) {
        snprintf(out, cap, "%s/%s", o->bin_dir, base);
        if (access(out, X_OK) == 0) return 0;
        return lp_error_set(LP_ERR(ENOENT), "%s not found in bin_dir %s", base, o->bin_dir);
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

/* The CURVE flags of child `i` (docs/SECURITY.md); returns how many. */
static int curve_args(lp_pipeline_t *p, const lp_pipeline_opts_t *o, int i, char **argv)
{
    int n = 0;
    bool edge = i == P_HTTP || i == P_NATS;
    if (o->allow_insecure_tcp && !edge) argv[n++] = "--allow-insecure-tcp";
    if (!o->curve_key) return n;
    argv[n++] = "--curve-key";
    argv[n++] = (char *)o->curve_key;
    if (edge) { /* a client of this host's coordinator */
        argv[n++] = "--server-key";
        argv[n++] = (char *)o->curve_key;
        return n;
    }
    snprintf(p->curve_allow, sizeof(p->curve_allow), "%s%s%s", o->curve_key,
             o->curve_allow ? "," : "", o->curve_allow ? o->curve_allow : "");
    argv[n++] = "--curve-allow";
    argv[n++] = p->curve_allow;
    argv[n++] = "--curve-admin";
    argv[n++] = (char *)(o->curve_admin ? o->curve_admin : o->curve_key);
    argv[n++] = "--curve-coordinator";
    argv[n++] = (char *)(o->curve_coordinator ? o->curve_coordinator : o->curve_key);
    return n;
}

static char *int_str(char *buf, int v)
{
    sprintf(buf, "%d", v);
    return buf;
}

static int spawn(lp_pipeline_t *p, const lp_pipeline_opts_t *o, int i, char **env)
{
    char bin[PATH_MAX + 64];
    int rc = find_bin(o, i, bin, sizeof(bin));
    if (rc) return rc;
    char *argv[64 + 4 * 16 + 2 * LP_PIPELINE_MAX_GROUPS];
    char *group_args[LP_PIPELINE_MAX_GROUPS] = {0};
    int n = 0;
    char b1[16], b2[16], b3[16], b4[16], b5[16], b6[16], b7[24], b8[24], b9[16], b10[16], b11[24];
    argv[n++] = bin;
    char keys_copy[2][4096];
    char nats_flags[LP_PIPELINE_NATS_KEYS][40];
    if (i == P_NATS) {
        argv[n++] = "--coordinator";
        argv[n++] = p->ep[P_COORD];
        for (int j = 0; j < LP_PIPELINE_NATS_KEYS && nats_keys[j]; j++) {
            if (!o->nats[j]) continue;
            if (!strcmp(nats_keys[j], "nats.control_users")) {
                snprintf(keys_copy[0], sizeof(keys_copy[0]), "%s", o->nats[j]);
                char *save = NULL;
                int count = 0;
                for (char *tok = strtok_r(keys_copy[0], ", ", &save); tok && count < 16;
                     tok = strtok_r(NULL, ", ", &save), count++) {
                    argv[n++] = "--control-user";
                    argv[n++] = tok;
                }
                continue;
            }
            snprintf(nats_flags[j], sizeof(nats_flags[j]), "--%s", nats_keys[j] + 5);
            for (char *c = nats_flags[j]; *c; c++)
                if (*c == '_') *c = '-';
            argv[n++] = nats_flags[j];
            if (strcmp(nats_keys[j], "nats.tls")) argv[n++] = (char *)o->nats[j];
        }
    } else if (i == P_HTTP) {
        argv[n++] = "--coordinator";
        argv[n++] = p->ep[P_COORD];
        argv[n++] = "--listen";
        argv[n++] = (char *)o->http_listen;
        argv[n++] = "--listen-fd"; /* the socket lmpipe up listens on: stdio[3] below */
        argv[n++] = "3";
        const char *lists[2] = {o->http_api_keys, o->http_admin_keys};
        for (int l = 0; l < 2; l++) {
            if (!lists[l]) continue;
            snprintf(keys_copy[l], sizeof(keys_copy[l]), "%s", lists[l]);
            char *save = NULL;
            int count = 0;
            for (char *tok = strtok_r(keys_copy[l], ", ", &save); tok && count < 16;
                 tok = strtok_r(NULL, ", ", &save), count++) {
                argv[n++] = l ? "--admin-key" : "--api-key";
                argv[n++] = tok;
            }
        }
    } else if (i != P_COORD) {
        argv[n++] = "--model";
        argv[n++] = (char *)o->model;
    }
    if (i != P_HTTP && i != P_NATS) {
        argv[n++] = "--endpoint";
        argv[n++] = i == P_TOK ? p->tok_bind : p->ep[i];
    }
    if (i == P_ENG) {
        if (o->no_shm) argv[n++] = "--no-shm";
        else {
            argv[n++] = "--shm-name";
            argv[n++] = p->shm_name;
        }
        if (o->max_seqs) { argv[n++] = "--max-seqs"; argv[n++] = int_str(b1, o->max_seqs); }
        if (o->max_batch_tokens) { argv[n++] = "--max-batch-tokens"; argv[n++] = int_str(b2, o->max_batch_tokens); }
        if (o->n_ctx) { argv[n++] = "--n-ctx"; argv[n++] = int_str(b3, o->n_ctx); }
        if (o->threads) { argv[n++] = "--threads"; argv[n++] = int_str(b4, o->threads); }
        if (o->has_kv_block) { argv[n++] = "--kv-block"; argv[n++] = int_str(b6, o->kv_block); }
        if (o->kv_pool_tokens) {
            snprintf(b7, sizeof(b7), "%lld", (long long)o->kv_pool_tokens);
            argv[n++] = "--kv-pool-tokens";
            argv[n++] = b7;
        }
        if (o->kv_pool_mb) {
            snprintf(b8, sizeof(b8), "%lld", (long long)o->kv_pool_mb);
            argv[n++] = "--kv-pool-mb";
            argv[n++] = b8;
        }
        if (o->kv_pool_swa_tokens) {
            snprintf(b11, sizeof(b11), "%lld", (long long)o->kv_pool_swa_tokens);
            argv[n++] = "--kv-pool-swa-tokens";
            argv[n++] = b11;
        }
    }
    if (i == P_TOK && o->chat_template_file) {
        argv[n++] = "--chat-template-file";
        argv[n++] = (char *)o->chat_template_file;
    }
    if (i == P_SAMP && o->no_shm) argv[n++] = "--no-shm";
    if (i == P_SAMP && o->sampler_default) {
        argv[n++] = "--default";
        argv[n++] = (char *)o->sampler_default;
    }
    if (i == P_SAMP && o->plugin_dir) {
        argv[n++] = "--plugin-dir";
        argv[n++] = (char *)o->plugin_dir;
    }
    if (i == P_SAMP) {
        /* live strategy swaps survive a restart of sampler-svc */
        argv[n++] = "--state-file";
        argv[n++] = p->sampler_state;
    }
    if (i == P_COORD) {
        argv[n++] = "--tokenizer";
        argv[n++] = p->ep[P_TOK];
        if (o->n_groups == 0) {
            argv[n++] = "--engine";
            argv[n++] = p->ep[P_ENG];
            argv[n++] = "--sampler";
            argv[n++] = p->ep[P_SAMP];
        }
        for (int g = 0; g < o->n_groups; g++) {
            const lp_pipeline_group_t *q = &o->groups[g];
            /* NAME,ENGINE,SAMPLER[,KEY[,SAMPLER_KEY]]: an empty key is "none". */
            bool sk = q->sampler_key && q->sampler_key[0];
            if (asprintf(&group_args[g], "%s,%s,%s%s%s%s%s", q->name, q->engine, q->sampler,
                         q->server_key || sk ? "," : "", q->server_key ? q->server_key : "",
                         sk ? "," : "", sk ? q->sampler_key : "") < 0) {
                for (int k = 0; k < g; k++) free(group_args[k]);
                return LP_ERR(ENOMEM);
            }
            argv[n++] = "--group";
            argv[n++] = group_args[g];
        }
        if (o->no_shm) argv[n++] = "--no-shm";
        if (o->no_prefix_cache) argv[n++] = "--no-prefix-cache";
        if (o->kv_blocks) { argv[n++] = "--kv-blocks"; argv[n++] = int_str(b6, o->kv_blocks); }
        if (o->prefill_chunk) { argv[n++] = "--prefill-chunk"; argv[n++] = int_str(b10, o->prefill_chunk); }
        if (o->max_queued_per_client) {
            argv[n++] = "--max-queued-per-client";
            argv[n++] = int_str(b5, o->max_queued_per_client);
        }
        if (o->drain_grace_ms) {
            argv[n++] = "--drain-grace-ms";
            argv[n++] = int_str(b9, o->drain_grace_ms < 0 ? 0 : o->drain_grace_ms);
        }
        if (o->curve_key) {
            const char *keys[3] = {o->tokenizer_server_key, o->engine_server_key, o->sampler_server_key};
            const char *flags[3] = {"--tokenizer-server-key", "--engine-server-key", "--sampler-server-key"};
            for (int l = 0; l < 3; l++) {
                argv[n++] = (char *)flags[l];
                argv[n++] = (char *)(keys[l] ? keys[l] : o->curve_key);
            }
        }
    }
    n += curve_args(p, o, i, argv + n);
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
    for (int g = 0; g < o->n_groups; g++) free(group_args[g]);
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

/* Flags that need a key refuse early, naming the config key. */
static int check_curve(const lp_pipeline_opts_t *o)
{
    if (o->curve_key) {
        lp_curve_keypair_t kp;
        int rc = lp_curve_keypair_load(o->curve_key, &kp);
        memset(&kp, 0, sizeof(kp));
        if (rc) lp_error_prefix("curve.key: ");
        return rc;
    }
    const char *eps[] = {o->endpoint, o->tokenizer_endpoint, o->engine_endpoint, o->sampler_endpoint};
    const char *ep_keys[] = {"endpoint", "tokenizer.endpoint", "engine.endpoint", "sampler.endpoint"};
    for (int i = 0; i < 4 && !o->allow_insecure_tcp; i++)
        if (eps[i] && !lp_endpoint_is_local(eps[i]))
            return lp_error_set(LP_ERR(EACCES), "%s = %s needs CURVE keys: set curve.key (lmpipe "
                                "keygen) and curve.allow, or allow_insecure_tcp = true", ep_keys[i], eps[i]);
    const char *needs[] = {o->curve_allow, o->curve_admin, o->curve_coordinator,
                           o->tokenizer_server_key, o->engine_server_key, o->sampler_server_key};
    const char *names[] = {"curve.allow", "curve.admin", "curve.coordinator",
                           "tokenizer.server_key", "engine.server_key", "sampler.server_key"};
    for (int i = 0; i < 6; i++)
        if (needs[i]) return lp_error_set(LP_ERR(EINVAL), "%s needs curve.key (this host's key pair)", names[i]);
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

int lp_pipeline_start(uv_loop_t *loop, const lp_pipeline_opts_t *o, lp_pipeline_t **out)
{
    *out = NULL;
    unsigned run = o->only ? o->only
                           : LP_PIPELINE_TOKENIZER | LP_PIPELINE_ENGINE | LP_PIPELINE_SAMPLER |
                                 LP_PIPELINE_COORDINATOR | (o->http_listen ? LP_PIPELINE_HTTP : 0) |
                                 (o->nats[0] ? LP_PIPELINE_NATS : 0);
    if ((run & LP_PIPELINE_HTTP) && !o->http_listen)
        return lp_error_set(LP_ERR(EINVAL), "--only http: no address to listen on (--http or http.listen)");
    if ((run & LP_PIPELINE_NATS) && !o->nats[0])
        return lp_error_set(LP_ERR(EINVAL), "--only nats: no NATS URL (--nats or nats.url)");
    bool need_model = run & (LP_PIPELINE_TOKENIZER | LP_PIPELINE_ENGINE | LP_PIPELINE_SAMPLER);
    if (need_model && !o->model)
        return lp_error_set(LP_ERR(EINVAL), "no model: give --model or 'model =' in the config");
    if (need_model && access(o->model, R_OK) != 0)
        return lp_error_set(LP_ERR(errno), "model %s: %s", o->model, strerror(errno));
    int crc = check_curve(o);
    if (crc) return crc;
    /* The gateway's address first: one that cannot be had stops lmpipe up
     * here, before any service starts (and a restarted gateway never races
     * another process for it). */
    int http_fd = -1;
    if ((run & LP_PIPELINE_HTTP) && (crc = listen_http(o->http_listen, &http_fd)) != 0) return crc;
    sweep_stale();
    lp_pipeline_t *p = calloc(1, sizeof(*p));
    if (!p) {
        if (http_fd >= 0) close(http_fd);
        return LP_ERR(ENOMEM);
    }
    p->loop = loop;
    p->http_fd = http_fd;
    p->failed_idx = -1;
    p->run = run;
    if (o->run_dir) {
        snprintf(p->run_dir, sizeof(p->run_dir), "%s", o->run_dir);
        int rc = run_dir_private(p->run_dir);
        if (rc) {
            free(p);
            return rc;
        }
    } else {
        /* The PID in the name: a later start can tell a dead pipeline's folder (sweep.h). */
        snprintf(p->run_dir, sizeof(p->run_dir), "/tmp/lmpipe-%d-XXXXXX", (int)getpid());
        if (!mkdtemp(p->run_dir)) {
            int rc = lp_error_set(LP_ERR(errno), "mkdtemp %s: %s", p->run_dir, strerror(errno));
            free(p);
            return rc;
        }
        p->own_run_dir = true;
    }
    /* lmpipe up's own state file lives as long as this run: a file left by
     * an earlier one would bring back strategies that its config no
     * longer asks for (sampler.state_file keeps them on purpose) */
    if (o->sampler_state_file) {
        snprintf(p->sampler_state, sizeof(p->sampler_state), "%s", o->sampler_state_file);
    } else {
        snprintf(p->sampler_state, sizeof(p->sampler_state), "%s/sampler-state.json", p->run_dir);
        if (run & LP_PIPELINE_SAMPLER) unlink(p->sampler_state);
    }
    default_ep(p, P_TOK, o->tokenizer_endpoint);
    default_ep(p, P_ENG, o->engine_endpoint);
    default_ep(p, P_SAMP, o->sampler_endpoint);
    default_ep(p, P_COORD, o->endpoint);
    snprintf(p->tok_bind, sizeof(p->tok_bind), "%.*s", (int)strcspn(p->ep[P_TOK], ","), p->ep[P_TOK]);
    p->opts = *o;
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
    int rc = env ? 0 : LP_ERR(ENOMEM);
    if (env) {
        env[k++] = parent;
        env[k++] = run_dir;
        for (int i = 0; i < 2; i++)
            if (o->notify_env[i]) env[k++] = (char *)o->notify_env[i];
    }
    for (int i = 0; !rc && i < P_COUNT; i++)
        if (run & (1u << i)) rc = spawn(p, o, i, env);
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
    int rc = lp_client_new_curve(i == P_TOK ? p->tok_bind : p->ep[i], p->opts.curve_key,
                                 p->opts.curve_key, &c);
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
    int grace = p->opts.drain_grace_ms == 0 ? 10000 : p->opts.drain_grace_ms < 0 ? 0 : p->opts.drain_grace_ms;
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
    if (p->kids[P_SAMP].spawned && !p->opts.sampler_state_file) unlink(p->sampler_state);
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
    free(*self_p);
    *self_p = NULL;
}
