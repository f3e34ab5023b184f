/* http-params.h - lmpipe-http's parameters: one table (lib/params.h), read
 * from the config file (--config FILE --service http) and the flags. */
#ifndef LP_HTTP_PARAMS_H
#define LP_HTTP_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "params.h"

typedef struct lp_http_opts {
    const char *coordinator, *curve_key, *server_key, *listen, *model_name;
    int64_t listen_fd, max_body, max_connections, max_per_address;
    int64_t header_timeout_ms, body_timeout_ms, idle_timeout_ms;
    lp_param_list_t api_keys, admin_keys, cors_origins;
    bool metrics_auth;
} lp_http_opts_t;

#define LP_HTTP_OPTS_INIT                                                                                         \
    {.listen = "127.0.0.1:8080", .max_body = 1 << 20, .max_connections = 256, .max_per_address = -1,             \
     .header_timeout_ms = 10000, .body_timeout_ms = 30000, .idle_timeout_ms = 60000}

extern const lp_params_t lp_http_params;

#endif
