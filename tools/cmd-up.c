/* cmd-up.c - `lmpipe up`: start the four services, supervise them, and on
 * SIGINT or SIGTERM stop them and remove what they leave behind. */
#include "lmpipe.h"

#include "config.h"
#include "error.h"
#include "log.h"
#include "notify-relay.h"
#include "pipeline.h"
#include "sdnotify.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct up_state {
    lp_pipeline_t *p;
    uv_signal_t sigint, sigterm;
    uv_timer_t check, watchdog;
    lp_relay_t *relay; /* under systemd: the services' notifications */
    int late_pid;      /* the last service that missed its watchdog, logged once */
    int status;
    bool stop;
} up_state_t;

static void on_signal(uv_signal_t *h, int signum)
{
    up_state_t *s = h->data;
    LP_INFO("lmpipe up: signal %d: stopping", signum);
    lp_sdnotify_send("STOPPING=1");
    s->stop = true;
    uv_stop(h->loop);
}

static void on_check(uv_timer_t *t)
{
    up_state_t *s = t->data;
    const char *who;
    if (lp_pipeline_failed(s->p, &who)) {
        fprintf(stderr, "lmpipe up: %s exited; stopping the pipeline\n", who);
        lp_sdnotify_sendf("STOPPING=1\nSTATUS=lmpipe up: %s exited", who);
        s->status = 1;
        s->stop = true;
        uv_stop(t->loop);
    }
}

/* systemd's watchdog is fed only while every service's loop still pings
 * lmpipe, so that one wedged service gets the unit restarted. */
static void on_watchdog(uv_timer_t *t)
{
    up_state_t *s = t->data;
    int late = 0;
    if (!s->relay || lp_relay_all_alive(s->relay, &late)) {
        lp_sdnotify_send("WATCHDOG=1");
    } else if (late != s->late_pid) {
        s->late_pid = late;
        LP_ERROR("lmpipe up: service pid %d missed its watchdog ping; no longer feeding systemd's", late);
    }
}

static int kid_pids(void *arg, int *out, int cap) { return lp_pipeline_pids(arg, out, cap); }

/* Under systemd, ready when every service has said READY=1 to the relay
 * (the coordinator once its hello checks pass, the gateway once linked). */
static int wait_services_ready(up_state_t *s, uv_loop_t *loop, int timeout_ms)
{
    for (int waited = 0; s->relay && !lp_relay_all_ready(s->relay); waited += 20) {
        const char *who;
        if (lp_pipeline_failed(s->p, &who))
            return lp_error_set(LP_ERR(ECHILD), "%s exited while the pipeline started", who);
        if (waited >= timeout_ms || s->stop)
            return lp_error_set(LP_ERR(ETIMEDOUT), "the services did not all say READY=1 in %d ms",
                                timeout_ms);
        uv_run(loop, UV_RUN_NOWAIT);
        usleep(20000);
    }
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: lmpipe up [--config F] [--model M] [--endpoint EP] [--no-shm]\n"
               "                 [--plugin-dir DIR] [--no-prefix-cache]\n"
               "                 [--http HOST:PORT [--api-key KEY]... [--admin-key KEY]...] [--nats URL]\n"
               "                 [--only SERVICE[,SERVICE...]] [--drain-grace-ms N]\n"
               "Starts the pipeline, prints its client endpoint, and runs until SIGINT/SIGTERM.\n"
               "Each flag sets a config key (deploy/lmpipe.conf); every key is checked against the\n"
               "services' parameter tables (lmpipe schema --config) before anything starts, and\n"
               "each service reads its own keys from RUN_DIR/lmpipe.conf (--config, --service).\n"
               "--http also starts the OpenAI-compatible HTTP gateway (lmpipe-http, docs/HTTP.md);\n"
               "--nats (or nats.url in the config) the NATS JetStream bridge (lmpipe-nats, docs/NATS.md).\n"
               "--plugin-dir (config sampler.plugin_dir): the folder sampler plugins load from.\n"
               "--no-prefix-cache (config coordinator.prefix_cache = false): with a paged engine,\n"
               "no KV block is shared between requests.\n"
               "--only runs just these of tokenizer, engine, sampler, coordinator, http, nats (one\n"
               "host of a deployment across hosts, docs/PIPELINE.md).\n"
               "SIGTERM/SIGINT drain: new requests are refused (\"draining\"), running ones have\n"
               "--drain-grace-ms (config drain_grace_ms, default 10000; 0: none) to finish before\n"
               "they end with the error \"shutting down\"; then the services stop.  At start, the\n"
               "shared-memory segments and run folders of crashed pipelines are removed.\n"
               "A service that dies is restarted (config supervise.max_restarts in\n"
               "supervise.window_s; docs/PIPELINE.md, \"Faults and recovery\").\n");
}

/* lmpipe up's flags: each sets a config key (a flag wins over the file). */
static const struct {
    const char *flag, *key, *value; /* value NULL: the flag's argument */
    bool append;                   /* a list: each flag adds one */
} flag_keys[] = {
    {"--model", "model", NULL, false},
    {"--endpoint", "endpoint", NULL, false},
    {"--no-shm", "no_shm", "true", false},
    {"--no-prefix-cache", "coordinator.prefix_cache", "false", false},
    {"--plugin-dir", "sampler.plugin_dir", NULL, false},
    {"--drain-grace-ms", "drain_grace_ms", NULL, false},
    {"--http", "http.listen", NULL, false},
    {"--nats", "nats.url", NULL, false},
    {"--api-key", "http.api_key", NULL, true},
    {"--admin-key", "http.admin_key", NULL, true},
};

int lp_cmd_up(int argc, char **argv)
{
    lp_pipeline_opts_t o = {0};
    lp_config_t *cfg = NULL;
    unsigned only = 0;
    /* the file first, whatever the order: the flags win over it */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--config") && i + 1 < argc) {
            lp_config_destroy(&cfg);
            if (lp_config_load(argv[++i], &cfg)) {
                fprintf(stderr, "lmpipe up: %s\n", lp_error_msg());
                return 1;
            }
        }
    if (!cfg && !(cfg = lp_config_new())) return 1;
    bool listed[sizeof(flag_keys) / sizeof(flag_keys[0])] = {false};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc) {
            i++;
            continue;
        }
        if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            if (lp_pipeline_parse_only(argv[++i], &only)) {
                lp_config_destroy(&cfg);
                return lp_cmd_usage_error("up", "%s", lp_error_msg());
            }
            continue;
        }
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            lp_config_destroy(&cfg);
            return 0;
        }
        size_t k = 0;
        while (k < sizeof(flag_keys) / sizeof(flag_keys[0]) && strcmp(argv[i], flag_keys[k].flag)) k++;
        if (k == sizeof(flag_keys) / sizeof(flag_keys[0]) || (!flag_keys[k].value && i + 1 >= argc)) {
            usage(stderr);
            lp_config_destroy(&cfg);
            return lp_cmd_usage_error("up", "unknown or incomplete option '%s'", argv[i]);
        }
        const char *v = flag_keys[k].value ? flag_keys[k].value : argv[++i];
        int rc;
        if (flag_keys[k].append) {
            /* a key is one word: the list is comma-separated */
            if (!v[0] || strpbrk(v, ", ")) {
                lp_config_destroy(&cfg);
                return lp_cmd_usage_error("up", "%s: a key is a non-empty word without ',' or ' '", argv[i - 1]);
            }
            const char *had = listed[k] ? lp_config_get(cfg, flag_keys[k].key, NULL) : NULL;
            char list[4096];
            snprintf(list, sizeof(list), "%s%s%s", had ? had : "", had ? "," : "", v);
            rc = lp_config_set(cfg, flag_keys[k].key, list);
            listed[k] = true;
        } else
            rc = lp_config_set(cfg, flag_keys[k].key, v);
        if (rc) {
            lp_config_destroy(&cfg);
            return 1;
        }
    }
    /* every key of every service, its range, before anything starts */
    if (lp_pipeline_check_config(cfg)) {
        fprintf(stderr, "lmpipe up: %s\n", lp_error_msg());
        lp_config_destroy(&cfg);
        return 1;
    }
    o.cfg = cfg;
    o.only = only;
    o.supervise = true; /* lmpipe run and bench stop at the first death */
    const char *http = lp_config_get(cfg, "http.listen", NULL), *nats = lp_config_get(cfg, "nats.url", NULL);

    signal(SIGPIPE, SIG_IGN);
    uv_loop_t loop;
    uv_loop_init(&loop);
    up_state_t s = {0};
    /* Signals first: a SIGTERM during start-up still stops cleanly. */
    uv_signal_init(&loop, &s.sigint);
    uv_signal_init(&loop, &s.sigterm);
    s.sigint.data = s.sigterm.data = &s;
    uv_signal_start(&s.sigint, on_signal, SIGINT);
    uv_signal_start(&s.sigterm, on_signal, SIGTERM);
    int rc = lp_relay_new(&loop, &s.relay);
    if (!rc && s.relay) {
        o.notify_env[0] = lp_relay_env_socket(s.relay);
        o.notify_env[1] = lp_relay_env_watchdog(s.relay);
    }
    if (!rc) rc = lp_pipeline_start(&loop, &o, &s.p);
    if (s.relay && s.p) lp_relay_set_children(s.relay, kid_pids, s.p);
    if (!rc) rc = lp_pipeline_wait_ready(s.p, 60000);
    if (!rc) rc = wait_services_ready(&s, &loop, 60000);
    if (rc) {
        fprintf(stderr, "lmpipe up: %s\n", lp_error_msg());
        s.status = 1;
    } else {
        if (lp_pipeline_runs(s.p, LP_PIPELINE_COORDINATOR)) {
            printf("lmpipe up: ready on %s\n", lp_pipeline_endpoint(s.p));
        } else {
            static const char *names[] = {"tokenizer-svc", "engine-svc", "sampler-svc"};
            for (unsigned k = 0; k < 3; k++)
                if (lp_pipeline_runs(s.p, 1u << k))
                    printf("lmpipe up: %s ready on %s\n", names[k], lp_pipeline_service_endpoint(s.p, 1u << k));
        }
        if (lp_pipeline_runs(s.p, LP_PIPELINE_HTTP)) printf("lmpipe up: HTTP on http://%s\n", http);
        if (lp_pipeline_runs(s.p, LP_PIPELINE_NATS)) printf("lmpipe up: NATS bridge to %s\n", nats);
        fflush(stdout);
        if (lp_sdnotify_sendf("READY=1\nSTATUS=lmpipe up: ready on %s", lp_pipeline_endpoint(s.p)))
            LP_WARN("lmpipe up: %s", lp_error_msg());
        uint64_t wd_us = lp_sdnotify_enabled() ? lp_sdnotify_watchdog_usec() : 0;
        uint64_t wd_ms = wd_us && wd_us < 2000 ? 1 : wd_us / 2000;
        uv_timer_init(&loop, &s.watchdog);
        s.watchdog.data = &s;
        if (wd_ms) uv_timer_start(&s.watchdog, on_watchdog, wd_ms, wd_ms);
        uv_timer_init(&loop, &s.check);
        s.check.data = &s;
        uv_timer_start(&s.check, on_check, 100, 100);
        while (!s.stop) uv_run(&loop, UV_RUN_DEFAULT);
        uv_close((uv_handle_t *)&s.check, NULL);
        uv_close((uv_handle_t *)&s.watchdog, NULL);
    }
    if (s.p && lp_pipeline_stop(s.p) != 0 && s.status == 0) {
        fprintf(stderr, "lmpipe up: %s\n", lp_error_msg());
        s.status = 1;
    }
    lp_pipeline_destroy(&s.p);
    lp_relay_destroy(&s.relay);
    uv_close((uv_handle_t *)&s.sigint, NULL);
    uv_close((uv_handle_t *)&s.sigterm, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    lp_config_destroy(&cfg);
    return s.status;
}
