/* bridge.h - lmpipe-nats, the NATS JetStream bridge (docs/NATS.md): requests
 * from a work-queue stream, token events to each request's reply subject,
 * acks only after the final event.  A client of the coordinator's API through
 * the edges' link (gateway/common/link.h); requests are read through the
 * request schema (lib/request-schema.h), as lmpipe-http reads them. */
#ifndef LP_NB_H
#define LP_NB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define LP_NB_MAX_USERS 16
#define LP_NB_SCHEMA 1 /* the "v" of requests and events */

typedef struct lp_nb_opts {
    const char *coordinator;
    const char *curve_key;       /* --curve-key: this host's BASE.key; NULL: no CURVE */
    const char *server_key;      /* --server-key: the coordinator's public key */
    const char *urls;            /* comma-separated nats:// or tls:// URLs */
    const char *creds;           /* a .creds file (JWT and nkey seed) */
    const char *nkey_seed;       /* a file holding an nkey seed (SU...) */
    const char *user, *password; /* or plain user and password (also in the URL) */
    bool tls;                    /* require TLS */
    const char *tls_ca, *tls_cert, *tls_key;
    const char *stream, *subjects, *durable;
    const char *control_subject;
    const char *control_users[LP_NB_MAX_USERS];
    int n_control_users;
    int max_inflight;            /* 0: the coordinator's max_seqs */
    int ack_wait_ms, nak_delay_ms;
    long long dup_window_ms;
    size_t max_body;
    const char *events_stream, *events_subjects;
    long long events_max_age_s;
} lp_nb_opts_t;

typedef struct lp_nb lp_nb_t;

/* Connect (NATS and the coordinator) and serve on `loop`.  Bad options or
 * a first connection that fails for a reason other than an absent server
 * return an LP_ERR code with the message set. */
int lp_nb_start(uv_loop_t *loop, const lp_nb_opts_t *o, lp_nb_t **out);
/* Close every handle (run the loop afterwards for the close callbacks). */
void lp_nb_stop(lp_nb_t *nb);
void lp_nb_destroy(lp_nb_t **self_p);

#endif
