/* nats-params.c - lmpipe-nats's parameter table (see nats-params.h). */
#include "nats-params.h"

#include <stddef.h>

#define O(f) offsetof(lp_nats_opts_t, f)
#define S(key, flag, def, f, help) {key, flag, LP_P_STR, 0, 0, def, O(f), help, false, false}
#define I(key, flag, lo, hi, def, f, help) {key, flag, LP_P_INT, lo, hi, def, O(f), help, false, false}
static const lp_param_t rows[] = {
    {"endpoint", "coordinator", LP_P_STR, 0, 0, "ipc://RUN_DIR/coordinator.sock", O(coordinator),
     "the coordinator's client endpoint", true, false},
    S("curve.key", "curve-key", "none", curve_key, "this host's key pair, for a tcp:// coordinator"),
    S(NULL, "server-key", "none (lmpipe up: curve.key's)", server_key, "the coordinator's CURVE public key"),
    {"nats.url", "url", LP_P_STR, 0, 0, NULL, O(urls), "nats:// or tls:// servers, URL[,URL...], tried in turn",
     true, false},
    S("nats.creds", "creds", "none", creds, "a .creds file (user JWT and nkey seed)"),
    S("nats.user", "user", "none", user, "user name"),
    S("nats.password", "password", "none", password, "its password"),
    S("nats.nkey", "nkey", "none", nkey, "an nkey's public key (with nkey_seed)"),
    S("nats.nkey_seed", "nkey-seed", "none", nkey_seed, "a file holding the nkey's seed"),
    {"nats.tls", "tls", LP_P_BOOL, 0, 0, "false", O(tls), "require TLS", false, false},
    S("nats.tls_ca", "tls-ca", "none", tls_ca, "the CA to trust"),
    S("nats.tls_cert", "tls-cert", "none", tls_cert, "a client certificate (with tls_key)"),
    S("nats.tls_key", "tls-key", "none", tls_key, "its key"),
    S("nats.stream", "stream", "LMPIPE_REQ", stream, "the request stream, created or updated at start"),
    S("nats.subjects", "subjects", "lmpipe.req.>", subjects, "its subjects"),
    S("nats.durable", "durable", "lmpipe-bridge", durable, "the durable consumer (also the deliver group)"),
    I("nats.max_inflight", "max-inflight", 0, 65536, "the pipeline's max_seqs", max_inflight,
      "the consumer's MaxAckPending (0: the default)"),
    I("nats.ack_wait_ms", "ack-wait-ms", 300, 3600000, "30000", ack_wait_ms,
      "the consumer's AckWait: how long a dead bridge holds a request"),
    I("nats.nak_delay_ms", "nak-delay-ms", 0, 3600000, "1000", nak_delay_ms,
      "the redelivery delay of a request naked while the pipeline is not ready"),
    I("nats.dup_window_ms", "dup-window-ms", 100, 7LL * 86400000, "120000", dup_window_ms,
      "the stream's duplicate window for Nats-Msg-Id"),
    I("nats.max_body", "max-body", 1, 64LL << 20, "1048576", max_body, "larger requests get an error event"),
    S("nats.control_subject", "control-subject", "lmpipe.control.sampler", control_subject,
      "sampler control, request/reply"),
    {"nats.control_users", "control-user", LP_P_LIST, 0, 0, "none: control is off", O(control_users),
     "users who may control the sampler (\"*\": nats-server's permissions decide; docs/NATS.md)", false, false},
    S("nats.events_stream", "events-stream", "none", events_stream, "also an output stream over the event subjects"),
    S("nats.events_subjects", "events-subjects", "none", events_subjects, "its subjects"),
    I("nats.events_max_age_s", "events-max-age-s", 1, 365LL * 86400, "3600", events_max_age_s, "its MaxAge"),
};
#undef O
#undef S
#undef I

const lp_params_t lp_nats_params = {"nats", "lmpipe-nats",
                                    "generations over NATS JetStream: requests from a work-queue stream, token "
                                    "events to each request's reply subject, acked after the final event "
                                    "(docs/NATS.md)",
                                    rows, sizeof(rows) / sizeof(rows[0]), sizeof(lp_nats_opts_t)};
