/* server.c - the gateway's HTTP connections: libuv TCP, llhttp, limits and
 * timeouts.  One request at a time per connection: the parser pauses at
 * the end of each message and resumes once its response has gone out
 * (pipelined bytes wait in `pending`).  Reading goes on while a request is
 * answered, so that a client that goes away is seen at once and its
 * generation cancelled. */
#include "gw.h"

#include "error.h"
#include "log.h"

#include <llhttp.h>
#include <stdlib.h>
#include <string.h>

struct lp_gw_conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    lp_gw_t *gw;
    llhttp_t parser;
    lp_sb_t url, hfield, hval, auth, body;
    bool in_value;
    bool busy;          /* a request is being answered */
    bool chunked;       /* the response in progress is chunked */
    bool closing;
    bool keep_alive;
    bool close_after;   /* close once the response is written */
    bool counted;       /* counted in gw->n_conns */
    lp_gw_call_t *call;
    lp_sb_t pending;    /* bytes read while busy */
    int n_handles;      /* open handles; freed when 0 */
    lp_gw_conn_t *prev, *next; /* gw->conns, while open */
};

static llhttp_settings_t settings;

lp_gw_t *lp_gw_conn_gw(lp_gw_conn_t *c) { return c->gw; }

void lp_gw_count(lp_gw_t *gw, int status)
{
    static const int codes[LP_GW_N_CODES] = {200, 400, 401, 403, 404, 405, 413, 429, 500, 503};
    for (int i = 0; i < LP_GW_N_CODES; i++)
        if (codes[i] == status) {
            gw->n_http[i]++;
            return;
        }
    gw->n_http[8]++; /* anything else counts with 500 */
}

static void on_handle_closed(uv_handle_t *h)
{
    lp_gw_conn_t *c = h->data;
    if (--c->n_handles > 0) return;
    lp_sb_free(&c->url);
    lp_sb_free(&c->hfield);
    lp_sb_free(&c->hval);
    lp_sb_free(&c->auth);
    lp_sb_free(&c->body);
    lp_sb_free(&c->pending);
    free(c);
}

static void conn_close(lp_gw_conn_t *c)
{
    if (c->closing) return;
    c->closing = true;
    if (c->counted) c->gw->n_conns--;
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

void lp_gw_conn_write(lp_gw_conn_t *c, const void *data, size_t len)
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
    case 413: return "Payload Too Large";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Unknown";
    }
}

void lp_gw_conn_head(lp_gw_conn_t *c, int status, const char *ctype, long long len, const char *extra)
{
    lp_gw_count(c->gw, status);
    lp_sb_t h = {0};
    lp_sb_printf(&h, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n", status, reason_phrase(status), ctype);
    if (len >= 0) lp_sb_printf(&h, "Content-Length: %lld\r\n", len);
    else {
        lp_sb_puts(&h, "Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n");
        c->chunked = true;
    }
    if (!c->keep_alive) lp_sb_puts(&h, "Connection: close\r\n");
    if (extra) lp_sb_puts(&h, extra);
    lp_sb_puts(&h, "\r\n");
    if (!h.oom) lp_gw_conn_write(c, h.p, h.len);
    lp_sb_free(&h);
}

void lp_gw_conn_chunk(lp_gw_conn_t *c, const void *data, size_t len)
{
    if (!len) return;
    char hd[24];
    int n = snprintf(hd, sizeof(hd), "%zx\r\n", len);
    lp_sb_t b = {0};
    lp_sb_putn(&b, hd, (size_t)n);
    lp_sb_putn(&b, data, len);
    lp_sb_putn(&b, "\r\n", 2);
    if (!b.oom) lp_gw_conn_write(c, b.p, b.len);
    lp_sb_free(&b);
}

static void feed(lp_gw_conn_t *c, const char *data, size_t len);

void lp_gw_conn_end(lp_gw_conn_t *c)
{
    if (c->chunked) lp_gw_conn_write(c, "0\r\n\r\n", 5);
    c->chunked = false;
    c->call = NULL;
    if (c->closing) return;
    if (!c->keep_alive) { /* stays busy: nothing more is read */
        c->close_after = true;
        if (uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) == 0) conn_close(c);
        return;
    }
    c->busy = false;
    arm(c, c->gw->o.idle_timeout_ms);
    llhttp_resume(&c->parser);
    if (c->pending.len) {
        lp_sb_t p = c->pending;
        memset(&c->pending, 0, sizeof(c->pending));
        feed(c, p.p, p.len);
        lp_sb_free(&p);
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

/* A response to a request that could not be parsed: then the connection closes. */
static void refuse(lp_gw_conn_t *c, int status, const char *fmt, const char *detail)
{
    c->keep_alive = false;
    c->busy = true;
    lp_gw_error(c, status, "invalid_request_error", NULL, NULL, fmt, detail);
}

/* ---- llhttp callbacks ---- */

static lp_gw_conn_t *of(llhttp_t *p) { return p->data; }

static int on_message_begin(llhttp_t *p)
{
    lp_gw_conn_t *c = of(p);
    c->url.len = c->hfield.len = c->hval.len = c->auth.len = c->body.len = 0;
    c->in_value = false;
    c->auth.oom = false;
    arm(c, c->gw->o.header_timeout_ms);
    return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t n)
{
    lp_gw_conn_t *c = of(p);
    if (c->url.len + n > 8192) return HPE_USER;
    lp_sb_putn(&c->url, at, n);
    return 0;
}

static void header_done(lp_gw_conn_t *c)
{
    if (!c->in_value) return;
    if (c->hfield.len == 13 && !strncasecmp(c->hfield.p, "authorization", 13)) {
        c->auth.len = 0;
        lp_sb_putn(&c->auth, c->hval.p ? c->hval.p : "", c->hval.len);
    }
    c->hfield.len = c->hval.len = 0;
    c->in_value = false;
}

static int on_header_field(llhttp_t *p, const char *at, size_t n)
{
    lp_gw_conn_t *c = of(p);
    header_done(c);
    if (c->hfield.len + n > 256) {
        c->hfield.len = 0; /* a long name is none we read */
        return 0;
    }
    lp_sb_putn(&c->hfield, at, n);
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n)
{
    lp_gw_conn_t *c = of(p);
    c->in_value = true;
    if (c->hval.len + n > 8192) return HPE_USER;
    lp_sb_putn(&c->hval, at, n);
    return 0;
}

static int on_headers_complete(llhttp_t *p)
{
    lp_gw_conn_t *c = of(p);
    header_done(c);
    uv_timer_stop(&c->timer);
    arm(c, c->gw->o.idle_timeout_ms);
    if ((p->flags & F_CONTENT_LENGTH) && p->content_length > c->gw->o.max_body) {
        c->keep_alive = false;
        c->busy = true;
        lp_gw_error(c, 413, "invalid_request_error", NULL, "body_too_large",
                    "the request body has %llu bytes; the limit is %zu (--max-body)",
                    (unsigned long long)p->content_length, c->gw->o.max_body);
        return HPE_USER;
    }
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
    lp_gw_conn_t *c = of(p);
    if (c->body.len + n > c->gw->o.max_body) {
        c->keep_alive = false;
        c->busy = true;
        lp_gw_error(c, 413, "invalid_request_error", NULL, "body_too_large",
                    "the request body is longer than the limit of %zu bytes (--max-body)",
                    c->gw->o.max_body);
        return HPE_USER;
    }
    lp_sb_putn(&c->body, at, n);
    arm(c, c->gw->o.idle_timeout_ms);
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    lp_gw_conn_t *c = of(p);
    uv_timer_stop(&c->timer);
    c->keep_alive = llhttp_should_keep_alive(p);
    c->busy = true;
    if (c->url.oom || c->body.oom || c->auth.oom) {
        c->keep_alive = false;
        lp_gw_error(c, 500, "server_error", NULL, NULL, "out of memory");
        return HPE_PAUSED;
    }
    lp_sb_putn(&c->url, "", 0);
    lp_sb_putn(&c->body, "", 0);
    char *url = c->url.p ? c->url.p : "";
    char *q = strchr(url, '?');
    if (q) *q++ = '\0';
    lp_gw_req_t r = {.method = llhttp_get_method(p), .path = url, .query = q ? q : "",
                     .body = c->body.p ? c->body.p : "", .body_len = c->body.len,
                     .auth = c->auth.len ? c->auth.p : NULL};
    if (c->auth.len) lp_sb_putn(&c->auth, "", 0);
    lp_gw_route(c, &r);
    /* Answered at once: parse on; else wait for lp_gw_conn_end(). */
    return c->busy ? HPE_PAUSED : 0;
}

static void feed(lp_gw_conn_t *c, const char *data, size_t len)
{
    while (len && !c->closing) {
        if (c->busy) {
            if (c->pending.len + len > c->gw->o.max_body + 65536) {
                conn_close(c); /* a client that floods while its answer is pending */
                return;
            }
            lp_sb_putn(&c->pending, data, len);
            return;
        }
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
 refuse(c, 400, "malformed HTTP request: %s", llhttp_get_error_reason(&c->parser));
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
    c->next = gw->conns;
    if (c->next) c->next->prev = c;
    gw->conns = c;
    gw->n_conns++;
    c->counted = true;
    llhttp_init(&c->parser, HTTP_REQUEST, &settings);
    c->parser.data = c;
    if (gw->n_conns > gw->o.max_connections) {
        c->keep_alive = false;
        c->busy = true;
        lp_gw_error(c, 503, "server_error", NULL, "too_many_connections",
                    "too many connections (--max-connections %d)", gw->o.max_connections);
        return 0;
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
    int e = uv_tcp_bind(&gw->server, (struct sockaddr *)&sa, 0);
    if (!e) e = uv_listen((uv_stream_t *)&gw->server, 511, on_connection);
    if (e) {
        rc = lp_error_set(LP_ERR(-e), "--listen %s: %s", o->listen, uv_strerror(e));
        uv_close((uv_handle_t *)&gw->server, NULL);
        uv_run(loop, UV_RUN_NOWAIT);
        free(gw);
        return rc;
    }
    if ((rc = lp_gw_link_start(gw)) != 0) {
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
    lp_gw_link_stop(gw);
}

void lp_gw_destroy(lp_gw_t **self_p)
{
    if (!self_p || !*self_p) return;
    lp_gw_t *gw = *self_p;
    if (gw->vocab) {
        for (uint32_t i = 0; i < gw->vocab_n; i++) free(gw->vocab[i]);
        free(gw->vocab);
        free(gw->vocab_len);
    }
    free(gw);
    *self_p = NULL;
}
