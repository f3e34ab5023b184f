/* main.c - lmpipe-http: the HTTP gateway's flags (docs/HTTP.md). */
#include "gw.h"

#include "edge.h"
#include "error.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: lmpipe-http --coordinator EP [--listen HOST:PORT] [--api-key KEY]...\n"
            "                   [--admin-key KEY]... [--model-name NAME] [--max-body BYTES]\n"
            "                   [--max-connections N] [--max-connections-per-address N]\n"
            "                   [--header-timeout-ms MS] [--body-timeout-ms MS] [--idle-timeout-ms MS]\n"
            "                   [--metrics-auth] [--curve-key F.key --server-key KEY] [--listen-fd FD]\n"
            "OpenAI- and llama.cpp-compatible HTTP in front of an lmpipe coordinator.\n"
            "--listen-fd: a socket already listening on --listen's address (lmpipe up's).\n"
            "API keys also come from LMPIPE_API_KEY.  No TLS: terminate it in front.\n"
            "Exit status: 0 after SIGINT/SIGTERM, 2 for bad flags or an address it cannot listen on.\n");
}

int main(int argc, char **argv)
{
    lp_log_init("lmpipe-http");
    lp_gw_opts_t o = {.listen = "127.0.0.1:8080", .max_body = 1u << 20, .max_connections = 256,
                      .max_per_address = -1, .header_timeout_ms = 10000, .body_timeout_ms = 30000,
                      .idle_timeout_ms = 60000};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        long long x;
        if (!strcmp(a, "--coordinator") && has) o.coordinator = argv[++i];
        else if (!strcmp(a, "--listen") && has) o.listen = argv[++i];
        else if (!strcmp(a, "--listen-fd") && has) {
            /* lmpipe up's socket, already listening on --listen's address */
            if (lp_edge_int_arg("lmpipe-http", a, argv[++i], 3, 1 << 20, &x)) return 2;
            o.listen_fd = (int)x;
        }
        else if (!strcmp(a, "--curve-key") && has) o.curve_key = argv[++i];
        else if (!strcmp(a, "--server-key") && has) o.server_key = argv[++i];
        else if ((!strcmp(a, "--api-key") || !strcmp(a, "--admin-key")) && has) {
            bool admin = a[2] == 'a' && a[3] == 'd';
            int *n = admin ? &o.n_admin_keys : &o.n_api_keys;
            if (*n >= LP_GW_MAX_KEYS || !argv[i + 1][0]) {
                fprintf(stderr, "lmpipe-http: %s: at most %d non-empty keys\n", a, LP_GW_MAX_KEYS);
                return 2;
            }
            (admin ? o.admin_keys : o.api_keys)[(*n)++] = argv[++i];
        } else if (!strcmp(a, "--model-name") && has) o.model_name = argv[++i];
        else if (!strcmp(a, "--max-body") && has) {
            if (lp_edge_int_arg("lmpipe-http", a, argv[++i], 1, 1LL << 30, &x)) return 2;
            o.max_body = (size_t)x;
        } else if (!strcmp(a, "--max-connections") && has) {
            if (lp_edge_int_arg("lmpipe-http", a, argv[++i], 1, 100000, &x)) return 2;
            o.max_connections = (int)x;
        } else if (!strcmp(a, "--max-connections-per-address") && has) {
            if (lp_edge_int_arg("lmpipe-http", a, argv[++i], 1, 100000, &x)) return 2;
            o.max_per_address = (int)x;
        } else if (!strcmp(a, "--body-timeout-ms") && has) {
            if (lp_edge_int_arg("lmpipe-http", a, argv[++i], 1, 3600000, &x)) return 2;
            o.body_timeout_ms = (int)x;
        } else if (!strcmp(a, "--header-timeout-ms") && has) {
            if (lp_edge_int_arg("lmpipe-http", a, argv[++i], 1, 3600000, &x)) return 2;
            o.header_timeout_ms = (int)x;
        } else if (!strcmp(a, "--idle-timeout-ms") && has) {
            if (lp_edge_int_arg("lmpipe-http", a, argv[++i], 1, 3600000, &x)) return 2;
            o.idle_timeout_ms = (int)x;
        } else if (!strcmp(a, "--metrics-auth")) o.metrics_auth = true;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "lmpipe-http: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!o.coordinator) {
        fprintf(stderr, "lmpipe-http: --coordinator EP is required\n");
        usage(stderr);
        return 2;
    }
    /* by default one address may hold a quarter of the connections, or 32 */
    if (o.max_per_address < 0) {
        int q = o.max_connections / 4, m = o.max_connections < 32 ? o.max_connections : 32;
        o.max_per_address = q > m ? q : m;
    }
    const char *env = getenv("LMPIPE_API_KEY");
    if (env && env[0] && o.n_api_keys < LP_GW_MAX_KEYS) o.api_keys[o.n_api_keys++] = env;

    lp_edge_t e;
    lp_edge_init(&e);
    lp_gw_t *gw;
    if (lp_gw_start(&e.loop, &o, &gw) != 0) {
        /* 2, as for bad flags: lmpipe up does not restart a gateway that cannot listen */
        fprintf(stderr, "lmpipe-http: %s\n", lp_error_msg());
        lp_edge_close(&e);
        uv_loop_close(&e.loop);
        return 2;
    }
    LP_INFO("listening on %s", o.listen);
    lp_edge_run(&e);
    lp_gw_stop(gw);
    lp_edge_close(&e);
    uv_loop_close(&e.loop);
    lp_gw_destroy(&gw);
    return 0;
}
