/* main.c - lmpipe-nats: the NATS bridge's flags (docs/NATS.md). */
#include "bridge.h"

#include "edge.h"
#include "error.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: lmpipe-nats --coordinator EP [--curve-key F.key --server-key KEY] --url URL[,URL...]\n"
            "                   [--creds FILE] [--user NAME [--password P] | --nkey PUBKEY --nkey-seed FILE]\n"
            "                   [--tls] [--tls-ca FILE] [--tls-cert FILE --tls-key FILE]\n"
            "                   [--stream NAME] [--subjects SUBJ] [--durable NAME] [--max-inflight N]\n"
            "                   [--ack-wait-ms MS] [--nak-delay-ms MS] [--dup-window-ms MS] [--max-body BYTES]\n"
            "                   [--control-subject SUBJ] [--control-user NAME|*]...\n"
            "                   [--events-stream NAME --events-subjects SUBJ [--events-max-age-s S]]\n"
            "Generations over NATS JetStream: requests from a work-queue stream, token events\n"
            "to each request's reply subject, acked after the final event.\n"
            "Exit status: 0 after SIGINT/SIGTERM, 2 for bad flags.\n");
}

int main(int argc, char **argv)
{
    lp_log_init("lmpipe-nats");
    lp_nb_opts_t o = {.stream = "LMPIPE_REQ", .subjects = "lmpipe.req.>", .durable = "lmpipe-bridge",
                      .control_subject = "lmpipe.control.sampler", .ack_wait_ms = 30000, .nak_delay_ms = 1000,
                      .dup_window_ms = 120000, .max_body = 1u << 20, .events_max_age_s = 3600};
    struct {
        const char *flag;
        const char **dst;
    } strs[] = {
        {"--coordinator", &o.coordinator}, {"--curve-key", &o.curve_key}, {"--server-key", &o.server_key},
        {"--url", &o.urls}, {"--creds", &o.creds},
        {"--user", &o.user}, {"--nkey", &o.user}, {"--password", &o.password}, {"--nkey-seed", &o.nkey_seed},
        {"--tls-ca", &o.tls_ca}, {"--tls-cert", &o.tls_cert}, {"--tls-key", &o.tls_key},
        {"--stream", &o.stream}, {"--subjects", &o.subjects}, {"--durable", &o.durable},
        {"--control-subject", &o.control_subject}, {"--events-stream", &o.events_stream},
        {"--events-subjects", &o.events_subjects},
    };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc, done = false;
        long long x;
        for (size_t k = 0; k < sizeof(strs) / sizeof(strs[0]) && !done; k++)
            if (!strcmp(a, strs[k].flag) && has) {
                *strs[k].dst = argv[++i];
                done = true;
            }
        if (done) continue;
        if (!strcmp(a, "--tls")) o.tls = true;
        else if (!strcmp(a, "--control-user") && has) {
            if (o.n_control_users >= LP_NB_MAX_USERS || !argv[i + 1][0]) {
                fprintf(stderr, "lmpipe-nats: --control-user: at most %d non-empty names\n", LP_NB_MAX_USERS);
                return 2;
            }
            o.control_users[o.n_control_users++] = argv[++i];
        } else if (!strcmp(a, "--max-inflight") && has) {
            if (lp_edge_int_arg("lmpipe-nats", a, argv[++i], 0, 65536, &x)) return 2;
            o.max_inflight = (int)x;
        } else if (!strcmp(a, "--ack-wait-ms") && has) {
            if (lp_edge_int_arg("lmpipe-nats", a, argv[++i], 300, 3600000, &x)) return 2;
            o.ack_wait_ms = (int)x;
        } else if (!strcmp(a, "--nak-delay-ms") && has) {
            if (lp_edge_int_arg("lmpipe-nats", a, argv[++i], 0, 3600000, &x)) return 2;
            o.nak_delay_ms = (int)x;
        } else if (!strcmp(a, "--dup-window-ms") && has) {
            if (lp_edge_int_arg("lmpipe-nats", a, argv[++i], 100, 7LL * 86400000, &x)) return 2;
            o.dup_window_ms = x;
        } else if (!strcmp(a, "--max-body") && has) {
            if (lp_edge_int_arg("lmpipe-nats", a, argv[++i], 1, 64LL << 20, &x)) return 2;
            o.max_body = (size_t)x;
        } else if (!strcmp(a, "--events-max-age-s") && has) {
            if (lp_edge_int_arg("lmpipe-nats", a, argv[++i], 1, 365LL * 86400, &x)) return 2;
            o.events_max_age_s = x;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "lmpipe-nats: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    const char *missing = !o.coordinator ? "--coordinator EP" : !o.urls ? "--url URL" : NULL;
    if (!missing && o.events_stream && !o.events_subjects) missing = "--events-subjects (with --events-stream)";
    if (!missing && o.nkey_seed && !o.user) missing = "--nkey PUBKEY (with --nkey-seed)";
    if (!missing && (!o.tls_cert) != (!o.tls_key)) missing = "--tls-cert and --tls-key together";
    if (missing) {
        fprintf(stderr, "lmpipe-nats: %s is required\n", missing);
        usage(stderr);
        return 2;
    }

    lp_edge_t e;
    lp_edge_init(&e);
    lp_nb_t *nb;
    if (lp_nb_start(&e.loop, &o, &nb) != 0) {
        fprintf(stderr, "lmpipe-nats: %s\n", lp_error_msg());
        lp_edge_close(&e);
        uv_loop_close(&e.loop);
        return 2;
    }
    lp_edge_run(&e);
    lp_nb_stop(nb);
    lp_edge_close(&e);
    lp_nb_destroy(&nb);
    uv_loop_close(&e.loop);
    return 0;
}
