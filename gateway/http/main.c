/* main.c - lmpipe-http: the HTTP gateway (docs/HTTP.md).  Its parameters:
 * http-params.c. */
#include "gw.h"
#include "http-params.h"

#include "edge.h"
#include "error.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    lp_log_init("lmpipe-http");
    lp_http_opts_t h = LP_HTTP_OPTS_INIT;
    lp_params_ctx_t *ctx;
    int prc = lp_params_parse(&lp_http_params, &h, argc, argv, &ctx);
    if (prc) return prc == 1 ? 0 : 2;
    lp_gw_opts_t o = {0};
    o.coordinator = h.coordinator;
    o.curve_key = h.curve_key;
    o.server_key = h.server_key;
    o.listen = h.listen;
    o.listen_fd = (int)h.listen_fd;
    o.model_name = h.model_name;
    o.max_body = (size_t)h.max_body;
    o.max_connections = (int)h.max_connections;
    o.header_timeout_ms = (int)h.header_timeout_ms;
    o.body_timeout_ms = (int)h.body_timeout_ms;
    o.idle_timeout_ms = (int)h.idle_timeout_ms;
    o.metrics_auth = h.metrics_auth;
    /* by default one address may hold a quarter of the connections, or 32 */
    if (h.max_per_address < 0) {
        int q = o.max_connections / 4, m = o.max_connections < 32 ? o.max_connections : 32;
        o.max_per_address = q > m ? q : m;
    } else
        o.max_per_address = (int)h.max_per_address;
    for (int i = 0; i < h.api_keys.n; i++) o.api_keys[o.n_api_keys++] = h.api_keys.v[i];
    for (int i = 0; i < h.admin_keys.n; i++) o.admin_keys[o.n_admin_keys++] = h.admin_keys.v[i];
    for (int i = 0; i < h.cors_origins.n; i++) o.cors_origins[o.n_cors_origins++] = h.cors_origins.v[i];
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
        lp_params_ctx_destroy(&ctx);
        return 2;
    }
    LP_INFO("listening on %s", o.listen);
    lp_edge_run(&e);
    lp_gw_stop(gw);
    lp_edge_close(&e);
    uv_loop_close(&e.loop);
    lp_gw_destroy(&gw);
    lp_params_ctx_destroy(&ctx);
    return 0;
}
