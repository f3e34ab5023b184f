/* main.c - lmpipe-nats: the NATS bridge (docs/NATS.md).  Its parameters:
 * nats-params.c. */
#include "bridge.h"
#include "nats-params.h"

#include "edge.h"
#include "error.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    lp_log_init("lmpipe-nats");
    lp_nats_opts_t n = LP_NATS_OPTS_INIT;
    lp_params_ctx_t *ctx;
    int prc = lp_params_parse(&lp_nats_params, &n, argc, argv, &ctx);
    if (prc) return prc == 1 ? 0 : 2;
    lp_nb_opts_t o = {0};
    o.coordinator = n.coordinator;
    o.curve_key = n.curve_key;
    o.server_key = n.server_key;
    o.urls = n.urls;
    o.creds = n.creds;
    o.user = n.nkey ? n.nkey : n.user; /* an nkey is its user */
    o.password = n.password;
    o.nkey_seed = n.nkey_seed;
    o.tls = n.tls;
    o.tls_ca = n.tls_ca;
    o.tls_cert = n.tls_cert;
    o.tls_key = n.tls_key;
    o.stream = n.stream;
    o.subjects = n.subjects;
    o.durable = n.durable;
    o.control_subject = n.control_subject;
    for (int i = 0; i < n.control_users.n && i < LP_NB_MAX_USERS; i++) o.control_users[o.n_control_users++] = n.control_users.v[i];
    o.max_inflight = (int)n.max_inflight;
    o.ack_wait_ms = (int)n.ack_wait_ms;
    o.nak_delay_ms = (int)n.nak_delay_ms;
    o.dup_window_ms = n.dup_window_ms;
    o.max_body = (size_t)n.max_body;
    o.events_stream = n.events_stream;
    o.events_subjects = n.events_subjects;
    o.events_max_age_s = n.events_max_age_s;
    const char *missing = NULL;
    if (o.events_stream && !o.events_subjects) missing = "--events-subjects (with --events-stream)";
    if (!missing && o.nkey_seed && !o.user) missing = "--nkey PUBKEY (with --nkey-seed)";
    if (!missing && (!o.tls_cert) != (!o.tls_key)) missing = "--tls-cert and --tls-key together";
    if (missing) {
        fprintf(stderr, "lmpipe-nats: %s is required\n", missing);
        lp_params_ctx_destroy(&ctx);
        return 2;
    }

    lp_edge_t e;
    lp_edge_init(&e);
    lp_nb_t *nb;
    if (lp_nb_start(&e.loop, &o, &nb) != 0) {
        fprintf(stderr, "lmpipe-nats: %s\n", lp_error_msg());
        lp_edge_close(&e);
        uv_loop_close(&e.loop);
        lp_params_ctx_destroy(&ctx);
        return 2;
    }
    lp_edge_run(&e);
    lp_nb_stop(nb);
    lp_edge_close(&e);
    lp_nb_destroy(&nb);
    uv_loop_close(&e.loop);
    lp_params_ctx_destroy(&ctx);
    return 0;
}
