/* gw.h - lmpipe-http, the HTTP gateway: internal interfaces between its
 * parts (server.c: connections and llhttp; link.c: the coordinator's client
 * API; router.c: routes, auth, errors; gen.c: completions, chat and
 * /completion; proxy.c: tokenize, detokenize, apply-template, sampler;
 * metrics.c: /metrics; sb.c: output buffers and JSON writing). */
#ifndef LP_GW_H
#define LP_GW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "frame.h"
#include "json.h"

/* ---- growable output buffer and JSON writing (sb.c) ---- */
typedef struct lp_sb {
    char *p;
    size_t len, cap;
    bool oom;
} lp_sb_t;

void lp_sb_putn(lp_sb_t *b, const void *s, size_t n);
void lp_sb_puts(lp_sb_t *b, const char *s);
void lp_sb_printf(lp_sb_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string; bytes that are not valid UTF-8 become U+FFFD. */
void lp_sb_json_str(lp_sb_t *b, const char *s, size_t n);
/* A JSON number: integers exactly, others with 17 significant digits. */
void lp_sb_json_num(lp_sb_t *b, double x);
/* Re-serialize a parsed value. */
void lp_sb_json_value(lp_sb_t *b, const lp_json_t *v);
void lp_sb_free(lp_sb_t *b);

/* ---- configuration and the process ---- */
#define LP_GW_MAX_KEYS 16

typedef struct lp_gw_opts {
    const char *coordinator;
    const char *curve_key;  /* --curve-key: this host's BASE.key; NULL: no CURVE */
    const char *server_key; /* --server-key: the coordinator's public key (KEY value) */
    const char *listen;          /* HOST:PORT */
    int listen_fd;               /* > 0: a listening socket to take (lmpipe up's), for `listen` */
    const char *api_keys[LP_GW_MAX_KEYS];
    int n_api_keys;
    const char *admin_keys[LP_GW_MAX_KEYS];
    int n_admin_keys;
    const char *model_name;      /* NULL: the coordinator's */
    size_t max_body;
    int max_connections;
    int max_per_address;         /* connections from one peer address */
    int header_timeout_ms;       /* the whole request line and headers */
    int body_timeout_ms;         /* the whole body, from the end of the headers */
    int idle_timeout_ms;
    bool metrics_auth;
} lp_gw_opts_t;

typedef struct lp_gw lp_gw_t;
typedef struct lp_gw_conn lp_gw_conn_t;

/* One outstanding message to the coordinator: replies and events with its
 * id go to on_msg until lp_gw_link_forget(). */
typedef struct lp_gw_op lp_gw_op_t;
struct lp_gw_op {
    uint64_t id;
    lp_gw_op_t *next;            /* hash chain */
    void (*on_msg)(lp_gw_op_t *op, const Lmpipe__Msg *m);
    void *arg;
    int idx;
    bool registered;
};

/* The HTTP request being answered on a connection.  abort() is called when
 * the client goes away first: it cancels its work and frees itself. */
typedef struct lp_gw_call lp_gw_call_t;
struct lp_gw_call {
    void (*abort)(lp_gw_call_t *call);
};

typedef struct lp_gw_req {
    int method;                  /* llhttp_method_t */
    const char *path;            /* without the query */
    const char *query;           /* after '?', or "" */
    const char *body;            /* NULL while only the headers are in */
    size_t body_len;
    const char *auth;            /* the Authorization header, or NULL */
    const char *peer;            /* the client's address ("" for a socketpair) */
    bool health_only;            /* a reserved connection: /health and /metrics only */
} lp_gw_req_t;

/* Limits that are not flags (docs/SECURITY.md). */
#define LP_GW_MAX_URL 8192          /* longer: 414 */
#define LP_GW_MAX_HEADERS 100       /* more header lines: 431 */
#define LP_GW_MAX_HEADER_BYTES 32768 /* request line and headers together: 431 */
#define LP_GW_HEALTH_RESERVE 8      /* connections past --max-connections for /health and /metrics */

/* Responses counted by status (http_requests_total); others count as 500. */
#define LP_GW_N_CODES 14
extern const int lp_gw_codes[LP_GW_N_CODES];
struct lp_gw {
    uv_loop_t *loop;
    lp_gw_opts_t o;
    uv_tcp_t server;
    lp_gw_conn_t *conns;  /* open connections, newest first */
    int n_conns;          /* counted against --max-connections */
    int n_reserve;        /* open on the health reserve */
    uint64_t n_evicted;   /* connections closed to make room (still in their headers, or idle) */
    uint64_t n_refused;   /* connections refused: no room, or over the per-address cap */
    uint64_t n_http[LP_GW_N_CODES];  /* responses by status, see lp_gw_code_slot */
    /* the coordinator link */
    void *zctx, *sock;
    struct lp_zsock *zs;
    uv_timer_t hello_timer;
    uint64_t next_id, hello_id;
    uint64_t hello_sent_ms;
    bool ready;
    char reason[256];
    char model[256];
    uint32_t n_ctx, n_vocab;
    uint32_t max_seqs;    /* the pipeline's sequence slots (the hello) */
    lp_gw_op_t *ops[1024];
    /* token texts for logprobs (after the hello; NULL until then) */
    char **vocab;
    uint32_t *vocab_len;
    uint32_t vocab_n;
    lp_gw_op_t vocab_op;
    bool vocab_failed;
    /* liveness: a StatsRequest every 2 s; no answer in 5 s fails every
     * outstanding request, so that none waits forever on a dead coordinator */
    lp_gw_op_t ping_op;
    uint64_t ping_sent_ms, last_rx_ms;
    /* the link's socket monitor: a disconnection (the coordinator stopped or
     * crashed, or its heartbeats stopped) fails them at once */
    void *mon;
    struct lp_zsock *mzs;
    /* the coordinator's word on its stages, from the ping's StatsReply
     * (links_down, can_serve, draining), for /health */
    bool degraded, unserving, draining;
    char down_json[1024]; /* StatsReply.links_down as a JSON array */
};

int lp_gw_start(uv_loop_t *loop, const lp_gw_opts_t *o, lp_gw_t **out);
void lp_gw_stop(lp_gw_t *gw);
void lp_gw_destroy(lp_gw_t **self_p);

/* ---- the coordinator link (link.c) ---- */
int lp_gw_link_start(lp_gw_t *gw);
void lp_gw_link_stop(lp_gw_t *gw);
/* Send `m` under a fresh id (op->id); events with that id go to op. */
int lp_gw_link_send(lp_gw_t *gw, Lmpipe__Msg *m, lp_gw_op_t *op);
void lp_gw_link_forget(lp_gw_t *gw, lp_gw_op_t *op);
int lp_gw_link_cancel(lp_gw_t *gw, uint64_t id);

/* ---- connections (server.c) ---- */
/* Start the response: status line and headers; `extra` are whole header
 * lines ("Allow: GET\r\n") or NULL.  len < 0: chunked (streaming). */
void lp_gw_conn_head(lp_gw_conn_t *c, int status, const char *ctype, long long len, const char *extra);
void lp_gw_conn_write(lp_gw_conn_t *c, const void *data, size_t len);
/* One chunk of a chunked body. */
void lp_gw_conn_chunk(lp_gw_conn_t *c, const void *data, size_t len);
/* The response is complete (chunked: the last chunk goes out): the
 * connection reads the next request or closes. */
void lp_gw_conn_end(lp_gw_conn_t *c);
void lp_gw_conn_set_call(lp_gw_conn_t *c, lp_gw_call_t *call);
lp_gw_t *lp_gw_conn_gw(lp_gw_conn_t *c);
/* The client's address as text ("" for a socketpair); borrowed, lives with c. */
const char *lp_gw_conn_peer(const lp_gw_conn_t *c);
/* A whole response with a body. */
void lp_gw_respond(lp_gw_conn_t *c, int status, const char *ctype, const char *body, size_t len,
                   const char *extra);
void lp_gw_count(lp_gw_t *gw, int status);
/* Serve a connection on an open stream socket (the fuzz target's socketpair). */
int lp__gw_conn_adopt(lp_gw_t *gw, int fd);

/* ---- routes (router.c) ---- */
void lp_gw_route(lp_gw_conn_t *c, const lp_gw_req_t *r);
/* The checks that need no body (endpoint, method, keys), as soon as the
 * headers are in: 0 when the body may be read, else answered. */
int lp_gw_route_head(lp_gw_conn_t *c, const lp_gw_req_t *r);
/* Who a request counts against in the coordinator's queue (docs/HTTP.md):
 * its API key's index, or its address on a gateway without keys. */
void lp_gw_tenant(lp_gw_conn_t *c, const lp_gw_req_t *r, char *out, size_t cap);
/* OpenAI's error JSON. */
void lp_gw_error(lp_gw_conn_t *c, int status, const char *type, const char *param, const char *code,
                 const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* The HTTP status for a coordinator Error (EINVAL and friends: 400). */
int lp_gw_status_of(int code, const char *msg);

/* ---- endpoints (gen.c, proxy.c, metrics.c) ---- */
void lp_gw_openai_completions(lp_gw_conn_t *c, const lp_gw_req_t *r, const lp_json_t *root, bool chat);
void lp_gw_llama_completion(lp_gw_conn_t *c, const lp_gw_req_t *r, const lp_json_t *root);
/* /tokenize, /detokenize, /apply-template, and /sampler: one message, one reply. */
void lp_gw_proxy(lp_gw_conn_t *c, const lp_gw_req_t *r, const lp_json_t *root, const char *what);
void lp_gw_metrics(lp_gw_conn_t *c);

/* The embedded page (page.c, generated). */
extern const unsigned char lp_gw_page[];
extern const size_t lp_gw_page_len;

#endif
