/* http-params.c - lmpipe-http's parameter table (see http-params.h). */
#include "http-params.h"

#include <stddef.h>

#define O(f) offsetof(lp_http_opts_t, f)
static const lp_param_t rows[] = {
    {"endpoint", "coordinator", LP_P_STR, 0, 0, "ipc://RUN_DIR/coordinator.sock", O(coordinator),
     "the coordinator's client endpoint", true, false},
    {"curve.key", "curve-key", LP_P_STR, 0, 0, "none", O(curve_key),
     "this host's key pair, for a tcp:// coordinator (docs/SECURITY.md)", false, false},
    {NULL, "server-key", LP_P_STR, 0, 0, "none (lmpipe up: curve.key's)", O(server_key),
     "the coordinator's CURVE public key", false, false},
    {"http.listen", "listen", LP_P_STR, 0, 0, "127.0.0.1:8080", O(listen), "HOST:PORT or [IPv6]:PORT", false, false},
    {NULL, "listen-fd", LP_P_INT, 3, 1 << 20, "none", O(listen_fd),
     "take this listening socket (lmpipe up's, bound to --listen) instead of binding", false, false},
    {"http.api_key", "api-key", LP_P_LIST, 0, 0, "none: open", O(api_keys),
     "keys for Authorization: Bearer KEY (also LMPIPE_API_KEY)", false, false},
    {"http.admin_key", "admin-key", LP_P_LIST, 0, 0, "none", O(admin_keys),
     "keys for POST /sampler (an admin key is an API key too)", false, false},
    {"http.cors_origins", "cors-origin", LP_P_LIST, 0, 0, "none", O(cors_origins),
     "origins whose browsers may call the API (\"*\": any; docs/HTTP.md, CORS)", false, false},
    {"http.model_name", "model-name", LP_P_STR, 0, 0, "the coordinator's", O(model_name),
     "the id in /v1/models and the name `model` must match", false, false},
    {"http.max_body", "max-body", LP_P_INT, 1, 1LL << 30, "1048576", O(max_body), "bytes; larger bodies get 413",
     false, false},
    {"http.max_connections", "max-connections", LP_P_INT, 1, 100000, "256", O(max_connections),
     "connections at once (docs/SECURITY.md)", false, false},
    {"http.max_connections_per_address", "max-connections-per-address", LP_P_INT, 1, 100000,
     "a quarter of max_connections, at least 32 (or all)", O(max_per_address), "connections from one address",
     false, false},
    {"http.header_timeout_ms", "header-timeout-ms", LP_P_INT, 1, 3600000, "10000", O(header_timeout_ms),
     "the request line and headers, in all", false, false},
    {"http.body_timeout_ms", "body-timeout-ms", LP_P_INT, 1, 3600000, "30000", O(body_timeout_ms),
     "the body, in all, from the end of the headers", false, false},
    {"http.idle_timeout_ms", "idle-timeout-ms", LP_P_INT, 1, 3600000, "60000", O(idle_timeout_ms),
     "between requests on a kept-alive connection", false, false},
    {"http.metrics_auth", "metrics-auth", LP_P_BOOL, 0, 0, "false", O(metrics_auth),
     "/health and /metrics need a key too", false, false},
};
#undef O

const lp_params_t lp_http_params = {"http", "lmpipe-http",
                                    "OpenAI- and llama.cpp-compatible HTTP in front of an lmpipe coordinator "
                                    "(docs/HTTP.md); no TLS: terminate it in front",
                                    rows, sizeof(rows) / sizeof(rows[0]), sizeof(lp_http_opts_t)};
