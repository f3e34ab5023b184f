/* nats-params.h - lmpipe-nats's parameters: one table (lib/params.h), read
 * from the config file (--config FILE --service nats) and the flags. */
#ifndef LP_NATS_PARAMS_H
#define LP_NATS_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "params.h"

typedef struct lp_nats_opts {
    const char *coordinator, *curve_key, *server_key, *urls, *creds, *user, *password, *nkey, *nkey_seed;
    const char *tls_ca, *tls_cert, *tls_key, *stream, *subjects, *durable, *control_subject;
    const char *events_stream, *events_subjects;
    bool tls;
    lp_param_list_t control_users;
    int64_t max_inflight, ack_wait_ms, nak_delay_ms, dup_window_ms, max_body, events_max_age_s;
} lp_nats_opts_t;

#define LP_NATS_OPTS_INIT                                                                                         \
    {.stream = "LMPIPE_REQ", .subjects = "lmpipe.req.>", .durable = "lmpipe-bridge",                              \
     .control_subject = "lmpipe.control.sampler", .ack_wait_ms = 30000, .nak_delay_ms = 1000,                     \
     .dup_window_ms = 120000, .max_body = 1 << 20, .events_max_age_s = 3600}

extern const lp_params_t lp_nats_params;

#endif
