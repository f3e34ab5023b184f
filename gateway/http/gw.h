/* gw.h - lmpipe-http, the HTTP gateway: internal interfaces between its
 * parts (server.c: connections and llhttp; router.c: routes, auth, errors,
 * CORS; gen.c: completions, chat and /completion; proxy.c: tokenize,
 * detokenize, apply-template, sampler; metrics.c: /metrics).  What it
 * shares with lmpipe-nats is in gateway/common/: the coordinator link
 * (link.h), the process shell and error statuses (edge.h), and requests
 * read through the request schema (gen-request.h); JSON is written with
 * lib/json.h's writer. */
#ifndef LP_GW_H
#define LP_GW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "frame.h"
#include "json.h"
#include "link.h"
#include "request-schema.h"

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
    /* CORS (docs/HTTP.md): origins whose browsers may call the API; "*":
     * any.  None: no CORS headers, and OPTIONS is 405 as any other method
     * a route does not take. */
    const char *cors_origins[LP_GW_MAX_KEYS];
    int n_cors_origins;
} lp_gw_opts_t;

typedef struct lp_gw lp_gw_t;
typedef struct lp_gw_conn lp_gw_conn_t;

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
    const char *origin;          /* the Origin header, or NULL */
    const char *acr_headers;     /* Access-Control-Request-Headers, or NULL */
    const char *peer;            /* the client's address ("" for a socketpair) */
    bool health_only;            /* a reserved connection: /health and /metrics only */
} lp_gw_req_t;

/* Limits that are not flags (docs/SECURITY.md). */
#define LP_GW_MAX_URL 8192          /* longer: 414 */
#define LP_GW_MAX_HEADERS 100       /* more header lines: 431 */
#define LP_GW_MAX_HEADER_BYTES 32768 /* request line and headers together: 431 */
#define LP_GW_HEALTH_RESERVE 8      /* connections past --max-connections for /health and /metrics */

/* Responses counted by status (http_requests_total); others count as 500. */
#define LP_GW_N_CODES 16
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
    uint64_t n_bad_requests; /* refused by the request schema here (errors_total{kind="bad_request"}) */
    lp_link_t link;       /* the coordinator (gateway/common/link.h) */
};

int lp_gw_start(uv_loop_t *loop, const lp_gw_opts_t *o, lp_gw_t **out);
void lp_gw_stop(lp_gw_t *gw);
void lp_gw_destroy(lp_gw_t **self_p);

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
/* The CORS headers of a response to a request with this Origin (NULL:
 * none), whole lines ("Access-Control-Allow-Origin: ...\r\n"), or "" when
 * the origin is not allowed or CORS is off. */
void lp_gw_cors_headers(const lp_gw_t *gw, const char *origin, char *out, size_t cap);
/* Who a request counts against in the coordinator's queue (docs/HTTP.md):
 * its API key's index, or its address on a gateway without keys. */
void lp_gw_tenant(lp_gw_conn_t *c, const lp_gw_req_t *r, char *out, size_t cap);
/* OpenAI's error JSON. */
void lp_gw_error(lp_gw_conn_t *c, int status, const char *type, const char *param, const char *code,
                 const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* An error of a kind (lib/error.h): its status, type and code as
 * gateway/common/edge.h says them. */
void lp_gw_error_kind(lp_gw_conn_t *c, enum lp_error_kind kind, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A coordinator Error as the client's error response. */
void lp_gw_error_msg(lp_gw_conn_t *c, const Lmpipe__Error *e);

/* ---- endpoints (gen.c, proxy.c, metrics.c) ---- */
/* /v1/completions, /v1/chat/completions, /completion: root read through
 * the request schema for ep. */
void lp_gw_generate(lp_gw_conn_t *c, const lp_gw_req_t *r, const lp_json_t *root, enum lp_rs_endpoint ep);
/* /tokenize, /detokenize, /apply-template, and /sampler: one message, one reply. */
void lp_gw_proxy(lp_gw_conn_t *c, const lp_gw_req_t *r, const lp_json_t *root, const char *what);
void lp_gw_metrics(lp_gw_conn_t *c);

/* The embedded page (page.c, generated). */
extern const unsigned char lp_gw_page[];
extern const size_t lp_gw_page_len;

#endif
