/* server.c - the gateway's HTTP connections: libuv TCP, llhttp (strict),
 * limits, deadlines and the connection budget (docs/SECURITY.md).  One
 * request at a time per connection: the parser pauses at the end of each
 * message and resumes once its response has gone out (pipelined bytes wait
 * in `pending`).  Reading goes on while a request is answered, so that a
 * client that goes away is seen at once and its generation cancelled.
 *
 * The budget: --max-connections, of which one address holds at most
 * --max-connections-per-address.  When it is spent, a new connection takes
 * the place of the oldest one that has not finished its headers yet (or,
 * failing that, the oldest idle kept-alive one), so that clients who never
 * send a whole request cannot keep anyone out; with none such, it gets one
 * of LP_GW_HEALTH_RESERVE reserved connections that answer /health and
 * /metrics only.  The keys are checked when the headers are in, before any
 * body is read; headers and body each have a total deadline. */
#include "gw.h"

#include "error.h"
#include "log.h"

#include <llhttp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct lp_gw_conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    lp_gw_t *gw;
    llhttp_t parser;
    lp_json_buf_t url, hfield, hval, auth, expect, origin, acrh, body;
    bool in_value;
    bool busy;          /* a request is being answered */
    bool chunked;       /* the response in progress is chunked */
    bool raw_stream;    /* ... or close-delimited (an HTTP/1.0 client) */
    bool head_only;     /* a HEAD request: headers without the body */
    bool head_sent;     /* the response's status line and headers are out */
    bool http10;        /* the request in progress is HTTP/1.0 */
    bool closing;
    bool keep_alive;
    bool close_after;   /* close once the response is written */
    bool counted;       /* counted in gw->n_conns */
    bool reserve;       /* on the health reserve (gw->n_reserve) */
    bool in_message;    /* between a request's first byte and its end */
    bool in_body;       /* its headers are in and passed the checks */
    unsigned n_requests;  /* requests completed on this connection */
    unsigned n_headers;
    size_t header_bytes;
    lp_gw_call_t *call;
    const char *feeding; /* the start of the bytes llhttp is given now */
    lp_json_buf_t pending;    /* bytes read while busy */
    int n_handles;      /* open handles; freed when 0 */
    char peer[64];      /* the client's address ("" for a socketpair) */
    lp_gw_conn_t *prev, *next; /* gw->conns, while open */
};

static llhttp_settings_t settings;

lp_gw_t *lp_gw_conn_gw(lp_gw_conn_t *c) { return c->gw; }
const char *lp_gw_conn_peer(const lp_gw_conn_t *c) { return c->peer; }

const int lp_gw_codes[LP_GW_N_CODES] = {200, 204, 400, 401, 403, 404, 405, 408, 413, 414, 417, 429, 431, 500, 503, 504};

void lp_gw_count(lp_gw_t *gw, int status)
{
    int other = 0;
    for (int i = 0; i < LP_GW_N_CODES; i++) {
        if (lp_gw_codes[i] == status) {
            gw->n_http[i]++;
            return;
        }
        if (lp_gw_codes[i] == 500) other = i;
    }
    gw->n_http[other]++; /* anything else counts with 500 */
}

static void on_handle_closed(uv_handle_t *h)
{
    lp_gw_conn_t *c = h->data;
    if (--c->n_handles > 0) return;
    lp_json_buf_free(&c->url);
    lp_json_buf_free(&c->hfield);
    lp_json_buf_free(&c->hval);
    lp_json_buf_free(&c->auth);
    lp_json_buf_free(&c->expect);
    lp_json_buf_free(&c->origin);
    lp_json_buf_free(&c->acrh);
    lp_json_buf_free(&c->body);
    lp_json_buf_free(&c->pending);
    free(c);
}

static void conn_close(lp_gw_conn_t *c)
{
    if (c->closing) return;
    c->closing = true;
    if (c->counted) c->gw->n_conns--;
    if (c->reserve) c->gw->n_reserve--;
    if (c->prev) c->prev->next = c->next;
    else if (c->gw->conns == c) c->gw->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    if (c->call) {
        lp_gw_call_t *call = c->call;
        c->call = NULL;
        call->abort(call);
    }
    uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
}

static void on_timeout(uv_timer_t *t)
{
    lp_gw_conn_t *c = t->data;
    LP_DEBUG("closing a connection: timed out");
    conn_close(c);
}

static void arm(lp_gw_conn_t *c, int ms)
{
    if (c->closing) return;
    uv_timer_start(&c->timer, on_timeout, (uint64_t)ms, 0);
}

typedef struct wreq {
    uv_write_t w;
    lp_gw_conn_t *c;
    char data[];
} wreq_t;

static void on_written(uv_write_t *w, int status)
{
    wreq_t *r = (wreq_t *)w;
    lp_gw_conn_t *c = r->c;
    free(r);
    if (status < 0) {
        conn_close(c);
        return;
    }
    if (c->close_after && !c->closing && uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) == 0)
        conn_close(c);
}

static void out(lp_gw_conn_t *c, const void *data, size_t len)
{
    if (c->closing || len == 0) return;
    /* A client that does not read its stream is dropped, not buffered for. */
    if (uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) > (64u << 20)) {
        conn_close(c);
        return;
    }
    wreq_t *r = malloc(sizeof(*r) + len);
    if (!r) {
        conn_close(c);
        return;
    }
    r->c = c;
    memcpy(r->data, data, len);
    uv_buf_t b = uv_buf_init(r->data, (unsigned)len);
    if (uv_write(&r->w, (uv_stream_t *)&c->tcp, &b, 1, on_written) < 0) {
        free(r);
        conn_close(c);
    }
}

/* The body of the response: nothing of it for HEAD. */
void lp_gw_conn_write(lp_gw_conn_t *c, const void *data, size_t len)
{
    if (!c->head_only) out(c, data, len);
}

static const char *reason_phrase(int s)
{
    switch (s) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 204: return "No Content";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 417: return "Expectation Failed";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Unknown";
    }
}

void lp_gw_conn_head(lp_gw_conn_t *c, int status, const char *ctype, long long len, const char *extra)
{
    lp_gw_count(c->gw, status);
    c->head_sent = true;
    lp_json_buf_t h = {0};
    lp_json_buf_printf(&h, "HTTP/1.1 %d %s\r\n", status, reason_phrase(status));
    if (status != 204) lp_json_buf_printf(&h, "Content-Type: %s\r\n", ctype);
    if (status == 204) { /* no body, and no Content-Length (RFC 9110 8.6) */
    } else if (len >= 0) lp_json_buf_printf(&h, "Content-Length: %lld\r\n", len);
    else if (c->http10) {
        /* RFC 9112 6.1: no chunked coding for an HTTP/1.0 client; the
         * stream ends when the connection closes. */
        lp_json_buf_puts(&h, "Cache-Control: no-cache\r\n");
        c->raw_stream = true;
        c->keep_alive = false;
    } else {
        lp_json_buf_puts(&h, "Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n");
        c->chunked = true;
    }
    if (!c->keep_alive) lp_json_buf_puts(&h, "Connection: close\r\n");
    /* CORS: every response to an allowed origin says so (errors too, so
     * that a browser app can read them) */
    char cors[512];
    lp_gw_cors_headers(c->gw, c->origin.n ? c->origin.p : NULL, cors, sizeof(cors));
    lp_json_buf_puts(&h, cors);
    if (extra) lp_json_buf_puts(&h, extra);
    lp_json_buf_puts(&h, "\r\n");
    if (!h.oom) out(c, h.p, h.n);
    lp_json_buf_free(&h);
}

void lp_gw_conn_chunk(lp_gw_conn_t *c, const void *data, size_t len)
{
    if (!len || c->head_only) return;
    if (c->raw_stream) {
        out(c, data, len);
        return;
    }
    char hd[24];
    int n = snprintf(hd, sizeof(hd), "%zx\r\n", len);
    lp_json_buf_t b = {0};
    lp_json_buf_put(&b, hd, (size_t)n);
    lp_json_buf_put(&b, data, len);
    lp_json_buf_put(&b, "\r\n", 2);
    if (!b.oom) out(c, b.p, b.n);
    lp_json_buf_free(&b);
}

static void feed(lp_gw_conn_t *c, const char *data, size_t len);

void lp_gw_conn_end(lp_gw_conn_t *c)
{
    if (c->chunked && !c->head_only) out(c, "0\r\n\r\n", 5);
    c->chunked = c->raw_stream = c->head_only = c->head_sent = false;
    c->call = NULL;
    if (c->closing) return;
    if (!c->keep_alive) { /* stays busy: nothing more is read */
        c->close_after = true;
        if (uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) == 0) conn_close(c);
        return;
    }
    c->busy = false;
    c->n_requests++;
    arm(c, c->gw->o.idle_timeout_ms);
    llhttp_resume(&c->parser);
    if (c->pending.n) {
        lp_json_buf_t p = c->pending;
        memset(&c->pending, 0, sizeof(c->pending));
        feed(c, p.p, p.n);
        lp_json_buf_free(&p);
    }
}

void lp_gw_conn_set_call(lp_gw_conn_t *c, lp_gw_call_t *call) { c->call = call; }

void lp_gw_respond(lp_gw_conn_t *c, int status, const char *ctype, const char *body, size_t len,
                   const char *extra)
{
    lp_gw_conn_head(c, status, ctype, (long long)len, extra);
    lp_gw_conn_write(c, body, len);
    lp_gw_conn_end(c);
}

/* A response to a request that cannot be read on: then the connection closes. */
static void refuse(lp_gw_conn_t *c, int status, const char *code, const char *fmt, const char *detail)
{
    c->keep_alive = false;
    c->busy = true;
    lp_gw_error(c, status, "invalid_request_error", NULL, code, fmt, detail);
}

/* ---- llhttp callbacks ---- */

static lp_gw_conn_t *of(llhttp_t *p) { return p->data; }

static int on_message_begin(llhttp_t *p)
{
    lp_gw_conn_t *c = of(p);
    c->url.n = c->hfield.n = c->hval.n = c->auth.n = c->expect.n = c->origin.n = c->acrh.n = c->body.n = 0;
    c->in_value = c->in_body = false;
    c->in_message = true;
    c->auth.oom = false;
    c->n_headers = 0;
    c->header_bytes = 0;
    /* The first request's deadline runs from the accept; a later one's
     * from its first byte (the idle timeout ran until then). */
    if (c->n_requests) arm(c, c->gw->o.header_timeout_ms);
    return 0;
}

static int too_big(lp_gw_conn_t *c, size_t n)
{
    c->header_bytes += n;
    if (c->header_bytes <= LP_GW_MAX_HEADER_BYTES) return 0;
    refuse(c, 431, "headers_too_large", "the request line and headers are over %s bytes", "32768");
    return HPE_USER;
}

static int on_url(llhttp_t *p, const char *at, size_t n)
{
    lp_gw_conn_t *c = of(p);
    if (c->url.n + n > LP_GW_MAX_URL) {
        refuse(c, 414, "uri_too_long", "the request target is over %s bytes", "8192");
        return HPE_USER;
    }
    lp_json_buf_put(&c->url, at, n);
    return too_big(c, n);
}

static void header_done(lp_gw_conn_t *c)
{
    if (!c->in_value) return;
    lp_json_buf_t *keep = NULL;
    if (c->hfield.n == 13 && !strncasecmp(c->hfield.p, "authorization", 13)) keep = &c->auth;
    else if (c->hfield.n == 6 && !strncasecmp(c->hfield.p, "expect", 6)) keep = &c->expect;
    else if (c->hfield.n == 6 && !strncasecmp(c->hfield.p, "origin", 6)) keep = &c->origin;
    else if (c->hfield.n == 30 && !strncasecmp(c->hfield.p, "access-control-request-headers", 30)) keep = &c->acrh;
    if (keep) {
        keep->n = 0;
        lp_json_buf_put(keep, c->hval.p ? c->hval.p : "", c->hval.n);
    }
    c->hfield.n = c->hval.n = 0;
    c->in_value = false;
}

static int on_header_field_complete(llhttp_t *p)
{
    lp_gw_conn_t *c = of(p);
    if (++c->n_headers <= LP_GW_MAX_HEADERS) return 0;
    refuse(c, 431, "too_many_headers", "more than %s header fields", "100");
    return HPE_USER;
}

static int on_header_field(llhttp_t *p, const char *at, size_t n)
{
    lp_gw_conn_t *c = of(p);
    header_done(c);
    if (c->hfield.n + n > 256) {
        c->hfield.n = 0; /* a long name is none we read */
        return too_big(c, n);
    }
    lp_json_buf_put(&c->hfield, at, n);
    return too_big(c, n);
}

static int on_header_value(llhttp_t *p, const char *at, size_t n)
{
    lp_gw_conn_t *c = of(p);
    /* A value goes on in a second span only at the start of the next read;
     * one that goes on within a read was folded onto the next line (llhttp
     * unfolds it): refused (RFC 9112 5.2), since a proxy in front may read
     * it otherwise. */
    if (c->in_value && at != c->feeding) {
        refuse(c, 400, "malformed_http", "malformed HTTP request: %s", "a header line folded onto the next");
        return HPE_USER;
    }
    c->in_value = true;
    if (c->hval.n + n > 8192) {
        refuse(c, 431, "header_too_large", "a header field's value is over %s bytes", "8192");
        return HPE_USER;
    }
    lp_json_buf_put(&c->hval, at, n);
    return too_big(c, n);
}

/* The request as far as it is read; url and auth are terminated here. */
static lp_gw_req_t request_of(lp_gw_conn_t *c, llhttp_t *p, bool with_body)
{
    lp_json_buf_put(&c->url, "", 0);
    char *url = c->url.p ? c->url.p : "";
    size_t plen = strcspn(url, "?");
    lp_gw_req_t r = {.method = llhttp_get_method(p), .path = url, .query = "",
                     .auth = c->auth.n ? c->auth.p : NULL, .peer = c->peer, .health_only = c->reserve};
    /* split at '?' (the headers' call splits it; the message's finds it split) */
    if (url[plen] || plen < c->url.n) {
        url[plen] = '\0';
        r.query = url + plen + 1;
    }
    if (c->auth.n) {
        lp_json_buf_put(&c->auth, "", 0);
    }
    if (c->origin.n) {
        lp_json_buf_put(&c->origin, "", 0);
        r.origin = c->origin.p;
    }
    if (c->acrh.n) {
        lp_json_buf_put(&c->acrh, "", 0);
        r.acr_headers = c->acrh.p;
    }
    if (with_body) {
        lp_json_buf_put(&c->body, "", 0);
        r.body = c->body.p ? c->body.p : "";
        r.body_len = c->body.n;
    }
    return r;
}

static int on_headers_complete(llhttp_t *p)
{
    lp_gw_conn_t *c = of(p);
    header_done(c);
    if (c->url.oom || c->auth.oom || c->expect.oom || c->origin.oom || c->acrh.oom) {
        c->keep_alive = false;
        c->busy = true;
        lp_gw_error(c, 500, "server_error", NULL, NULL, "out of memory");
        return HPE_USER;
    }
    c->http10 = p->http_major == 1 && p->http_minor == 0;
    c->head_only = llhttp_get_method(p) == HTTP_HEAD;
    bool has_body = (p->flags & F_CHUNKED) || ((p->flags & F_CONTENT_LENGTH) && p->content_length > 0);
    if (!has_body) return 0; /* the whole request is in: on_message_complete routes it */
    /* Keys, endpoint and method first: a client without a key never gets
     * to send a body (nor to trickle one). */
    c->keep_alive = false; /* answered here, the unread body ends the connection */
    lp_gw_req_t r = request_of(c, p, false);
    c->busy = true;
    if (lp_gw_route_head(c, &r) != 0) return HPE_USER;
    c->busy = false;
    if ((p->flags & F_CONTENT_LENGTH) && p->content_length > c->gw->o.max_body) {
        c->busy = true;
        lp_gw_error(c, 413, "invalid_request_error", NULL, "body_too_large",
                    "the request body has %llu bytes; the limit is %zu (--max-body)",
                    (unsigned long long)p->content_length, c->gw->o.max_body);
        return HPE_USER;
    }
    if (c->expect.n) {
        if (c->expect.n != 12 || strncasecmp(c->expect.p, "100-continue", 12)) {
            c->busy = true;
            lp_gw_error(c, 417, "invalid_request_error", NULL, "expectation_failed",
                        "Expect: only 100-continue is known");
            return HPE_USER;
        }
        if (!c->http10) out(c, "HTTP/1.1 100 Continue\r\n\r\n", 25);
    }
    c->in_body = true;
    /* One deadline for the whole body: a byte now and then does not extend it. */
    arm(c, c->gw->o.body_timeout_ms);
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
    lp_gw_conn_t *c = of(p);
    if (c->body.n + n > c->gw->o.max_body) {
        c->keep_alive = false;
        c->busy = true;
        lp_gw_error(c, 413, "invalid_request_error", NULL, "body_too_large",
                    "the request body is longer than the limit of %zu bytes (--max-body)",
                    c->gw->o.max_body);
        return HPE_USER;
    }
    lp_json_buf_put(&c->body, at, n);
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    lp_gw_conn_t *c = of(p);
    uv_timer_stop(&c->timer);
    c->keep_alive = llhttp_should_keep_alive(p);
    c->in_message = c->in_body = false;
    c->busy = true;
    if (c->url.oom || c->body.oom || c->auth.oom) {
        c->keep_alive = false;
        lp_gw_error(c, 500, "server_error", NULL, NULL, "out of memory");
        return HPE_PAUSED;
    }
    lp_gw_req_t r = request_of(c, p, true);
    lp_gw_route(c, &r);
    /* Answered at once: parse on; else wait for lp_gw_conn_end(). */
    return c->busy ? HPE_PAUSED : 0;
}

static void feed(lp_gw_conn_t *c, const char *data, size_t len)
{
    while (len && !c->closing) {
        if (c->busy) {
            if (c->pending.n + len > c->gw->o.max_body + 65536) {
                conn_close(c); /* a client that floods while its answer is pending */
                return;
            }
            lp_json_buf_put(&c->pending, data, len);
            return;
        }
        c->feeding = data;
        llhttp_errno_t e = llhttp_execute(&c->parser, data, len);
        if (e == HPE_OK) return;
        if (e == HPE_PAUSED) {
            const char *pos = llhttp_get_error_pos(&c->parser);
            size_t used = pos ? (size_t)(pos - data) : len;
            if (used > len) used = len;
            data += used;
            len -= used;
            continue;
        }
        if (e == HPE_PAUSED_UPGRADE) {
            /* No protocol switch here: the request is answered as plain
             * HTTP, then the connection closes. */
            c->keep_alive = false;
            if (!c->busy) {
                c->busy = c->close_after = true;
                if (uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) == 0) conn_close(c);
            }
            return;
        }
        if (c->busy || c->closing) return; /* answered already (413) */
        const char *why = llhttp_get_error_reason(&c->parser);
        refuse(c, 400, "malformed_http", "malformed HTTP request: %s", why ? why : llhttp_errno_name(e));
        return;
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    static char slab[65536];
    *buf = uv_buf_init(slab, sizeof(slab));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    lp_gw_conn_t *c = s->data;
    if (n < 0) {
        conn_close(c);
        return;
    }
    if (n > 0) feed(c, buf->base, (size_t)n);
}

/* Whether c may be closed to make room: it is reading a request's headers
 * (the key is not known yet) or waiting idle between requests. */
static bool evictable(const lp_gw_conn_t *c) { return !c->closing && !c->busy && !c->in_body; }

/* The oldest connection of the pool (reserve or not; of one address when
 * `peer` is not NULL) that may go, preferring one that never finished a
 * request; NULL when every one is at work. */
static lp_gw_conn_t *victim(lp_gw_t *gw, bool reserve, const char *peer)
{
    lp_gw_conn_t *fresh = NULL, *idle = NULL;
    for (lp_gw_conn_t *c = gw->conns; c; c = c->next) { /* newest first: the last match is the oldest */
        if (c->reserve != reserve || !(c->counted || c->reserve) || !evictable(c)) continue;
        if (peer && strcmp(c->peer, peer)) continue;
        if (c->n_requests == 0) fresh = c;
        else idle = c;
    }
    return fresh ? fresh : idle;
}

/* Connections from `peer` counted against --max-connections. */
static int same_peer(const lp_gw_t *gw, const char *peer)
{
    int n = 0;
    for (const lp_gw_conn_t *c = gw->conns; c; c = c->next) n += !c->closing && c->counted && !strcmp(c->peer, peer);
    return n;
}

static void evict(lp_gw_conn_t *old)
{
    LP_DEBUG("closing a connection from %s to make room: %s", old->peer,
             old->n_requests ? "idle" : "its headers are not in yet");
    old->gw->n_evicted++;
    conn_close(old);
}

static void peer_name(lp_gw_conn_t *c)
{
    struct sockaddr_storage sa;
    int len = sizeof(sa);
    c->peer[0] = '\0';
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&sa, &len) != 0) return;
    if (sa.ss_family == AF_INET) uv_ip4_name((struct sockaddr_in *)&sa, c->peer, sizeof(c->peer));
    else if (sa.ss_family == AF_INET6) uv_ip6_name((struct sockaddr_in6 *)&sa, c->peer, sizeof(c->peer));
}

/* A connection that gets no room: one 503, then it closes. */
static void turn_away(lp_gw_conn_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void turn_away(lp_gw_conn_t *c, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    c->gw->n_refused++;
    c->keep_alive = false;
    c->busy = true;
    lp_gw_error(c, 503, "server_error", NULL, "too_many_connections", "%s", msg);
}

/* A new connection: accepted from `server`, or (server NULL) on the open
 * socket `fd` (lp__gw_conn_adopt). */
static int conn_new(lp_gw_t *gw, uv_stream_t *server, uv_os_sock_t fd)
{
    lp_gw_conn_t *c = calloc(1, sizeof(*c));
    if (!c) return LP_ERR(ENOMEM);
    c->gw = gw;
    uv_tcp_init(gw->loop, &c->tcp);
    uv_timer_init(gw->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->n_handles = 2;
    int e = server ? uv_accept(server, (uv_stream_t *)&c->tcp) : uv_tcp_open(&c->tcp, fd);
    if (e < 0) {
        c->closing = true;
        uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
        uv_close((uv_handle_t *)&c->timer, on_handle_closed);
        return lp_error_set(LP_ERR(-e), "accept: %s", uv_strerror(e));
    }
    uv_tcp_nodelay(&c->tcp, 1);
    peer_name(c);
    llhttp_init(&c->parser, HTTP_REQUEST, &settings);
    c->parser.data = c;
    c->next = gw->conns;
    if (c->next) c->next->prev = c;
    gw->conns = c;
    /* An address at its cap competes with itself; the budget at its cap,
     * with everyone.  Who cannot get a place gets the reserve. */
    lp_gw_conn_t *old;
    bool addr_full = same_peer(gw, c->peer) >= gw->o.max_per_address;
    if (addr_full && (old = victim(gw, false, c->peer))) {
        evict(old);
        addr_full = false;
    }
    if (!addr_full && gw->n_conns >= gw->o.max_connections && (old = victim(gw, false, NULL))) evict(old);
    if (!addr_full && gw->n_conns < gw->o.max_connections) {
        gw->n_conns++;
        c->counted = true;
    } else {
        if (gw->n_reserve >= LP_GW_HEALTH_RESERVE && (old = victim(gw, true, NULL))) evict(old);
        if (gw->n_reserve >= LP_GW_HEALTH_RESERVE) {
            if (addr_full)
                turn_away(c, "too many connections from %s (--max-connections-per-address %d)",
                          c->peer[0] ? c->peer : "this client", gw->o.max_per_address);
            else
                turn_away(c, "too many connections (--max-connections %d)", gw->o.max_connections);
            return 0;
        }
        gw->n_reserve++;
        c->reserve = true;
    }
    arm(c, gw->o.header_timeout_ms);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    return 0;
}

static void on_connection(uv_stream_t *server, int status)
{
    if (status >= 0) conn_new(server->data, server, -1);
}

int lp__gw_conn_adopt(lp_gw_t *gw, int fd) { return conn_new(gw, NULL, fd); }

static int parse_listen(const char *s, char *host, size_t cap, int *port)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || (size_t)(colon - s) >= cap)
        return lp_error_set(LP_ERR(EINVAL), "--listen %s: expected HOST:PORT", s);
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (*end || p < 0 || p > 65535)
        return lp_error_set(LP_ERR(EINVAL), "--listen %s: bad port '%s'", s, colon + 1);
    size_t n = (size_t)(colon - s);
    if (s[0] == '[' && n >= 2 && s[n - 1] == ']') { /* [::1]:8080 */
        memcpy(host, s + 1, n - 2);
        host[n - 2] = '\0';
    } else {
        memcpy(host, s, n);
        host[n] = '\0';
    }
    *port = (int)p;
    return 0;
}

int lp_gw_start(uv_loop_t *loop, const lp_gw_opts_t *o, lp_gw_t **out)
{
    *out = NULL;
    llhttp_settings_init(&settings);
    settings.on_message_begin = on_message_begin;
    settings.on_url = on_url;
    settings.on_header_field = on_header_field;
    settings.on_header_field_complete = on_header_field_complete;
    settings.on_header_value = on_header_value;
    settings.on_headers_complete = on_headers_complete;
    settings.on_body = on_body;
    settings.on_message_complete = on_message_complete;

    char host[256];
    int port = 0, rc = parse_listen(o->listen, host, sizeof(host), &port);
    if (rc) return rc;
    struct sockaddr_storage sa;
    if (uv_ip4_addr(host, port, (struct sockaddr_in *)&sa) != 0 &&
        uv_ip6_addr(host, port, (struct sockaddr_in6 *)&sa) != 0)
        return lp_error_set(LP_ERR(EINVAL), "--listen %s: '%s' is not an IP address", o->listen, host);
    lp_gw_t *gw = calloc(1, sizeof(*gw));
    if (!gw) return LP_ERR(ENOMEM);
    gw->loop = loop;
    gw->o = *o;
    uv_tcp_init(loop, &gw->server);
    gw->server.data = gw;
    int e = o->listen_fd > 0 ? uv_tcp_open(&gw->server, o->listen_fd)
                             : uv_tcp_bind(&gw->server, (struct sockaddr *)&sa, 0);
    if (!e) e = uv_listen((uv_stream_t *)&gw->server, 511, on_connection);
    if (e) {
        rc = lp_error_set(LP_ERR(-e), "--listen %s: %s", o->listen, uv_strerror(e));
        uv_close((uv_handle_t *)&gw->server, NULL);
        uv_run(loop, UV_RUN_NOWAIT);
        free(gw);
        return rc;
    }
    gw->link.loop = loop;
    gw->link.coordinator = gw->o.coordinator;
    gw->link.curve_key = gw->o.curve_key;
    gw->link.server_key = gw->o.server_key;
    gw->link.model_name = gw->o.model_name;
    if ((rc = lp_link_start(&gw->link)) != 0) {
        uv_close((uv_handle_t *)&gw->server, NULL);
        uv_run(loop, UV_RUN_NOWAIT);
        free(gw);
        return rc;
    }
    *out = gw;
    return 0;
}

void lp_gw_stop(lp_gw_t *gw)
{
    uv_close((uv_handle_t *)&gw->server, NULL);
    while (gw->conns) conn_close(gw->conns);
    lp_link_stop(&gw->link);
}

void lp_gw_destroy(lp_gw_t **self_p)
{
    if (!self_p || !*self_p) return;
    lp_gw_t *gw = *self_p;
    lp_link_clear(&gw->link);
    free(gw);
    *self_p = NULL;
}
