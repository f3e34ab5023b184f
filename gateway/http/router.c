/* router.c - the gateway's routes: method checks, API keys, JSON bodies,
 * and the small endpoints (/, /health, /v1/models). */
#include "gw.h"

#include "edge.h"
#include "error.h"

#include <errno.h>
#include <llhttp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

void lp_gw_error(lp_gw_conn_t *c, int status, const char *type, const char *param, const char *code,
                 const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    lp_json_buf_t b = {0};
    lp_json_buf_puts(&b, "{\"error\":{\"message\":");
    lp_json_buf_str(&b, msg, strlen(msg));
    lp_json_buf_puts(&b, ",\"type\":");
    lp_json_buf_str(&b, type, strlen(type));
    lp_json_buf_puts(&b, ",\"param\":");
    if (param) lp_json_buf_str(&b, param, strlen(param));
    else lp_json_buf_puts(&b, "null");
    lp_json_buf_puts(&b, ",\"code\":");
    if (code) lp_json_buf_str(&b, code, strlen(code));
    else lp_json_buf_printf(&b, "%d", status);
    lp_json_buf_puts(&b, "}}\n");
    const char *extra = status == 401 ? "WWW-Authenticate: Bearer\r\n" : NULL;
    lp_gw_respond(c, status, "application/json", b.p ? b.p : "", b.n, extra);
    lp_json_buf_free(&b);
}

void lp_gw_error_kind(lp_gw_conn_t *c, enum lp_error_kind kind, const char *param, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    lp_gw_error(c, lp_edge_http_status(kind), lp_edge_openai_type(kind), param, lp_edge_openai_code(kind), "%s", msg);
}

void lp_gw_error_msg(lp_gw_conn_t *c, const Lmpipe__Error *e)
{
    const char *msg = e->message ? e->message : "";
    if (!strncmp(msg, "coordinator: ", 13)) msg += 13;
    lp_gw_error_kind(c, lp_frame_error_kind(e), e->param && e->param[0] ? e->param : NULL, "%s", msg);
}

/* Compare without an early exit, so that timing does not reveal a key's prefix. */
static bool key_eq(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char d = (unsigned char)(la != lb);
    for (size_t i = 0; i < la; i++) d |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
    return d == 0 && lb;
}

static const char *bearer(const lp_gw_req_t *r)
{
    if (!r->auth || strncasecmp(r->auth, "Bearer ", 7)) return NULL;
    const char *k = r->auth + 7;
    while (*k == ' ') k++;
    return k;
}

static bool in_keys(const char *k, const char *const *keys, int n)
{
    bool ok = false;
    for (int i = 0; i < n; i++) ok |= key_eq(k, keys[i]);
    return ok;
}

/* 0 when the request may go on; else answered with 401. */
static int check_key(lp_gw_conn_t *c, const lp_gw_req_t *r)
{
    lp_gw_t *gw = lp_gw_conn_gw(c);
    if (!gw->o.n_api_keys) return 0; /* open, as vLLM without --api-key */
    const char *k = bearer(r);
    if (!k) {
        lp_gw_error(c, 401, "invalid_request_error", NULL, "invalid_api_key",
                    "missing API key: send it as 'Authorization: Bearer KEY'");
        return -1;
    }
    if (!in_keys(k, gw->o.api_keys, gw->o.n_api_keys) && !in_keys(k, gw->o.admin_keys, gw->o.n_admin_keys)) {
        lp_gw_error(c, 401, "invalid_request_error", NULL, "invalid_api_key", "incorrect API key");
        return -1;
    }
    return 0;
}

static int check_admin(lp_gw_conn_t *c, const lp_gw_req_t *r)
{
    lp_gw_t *gw = lp_gw_conn_gw(c);
    if (!gw->o.n_admin_keys) {
        lp_gw_error(c, 403, "permission_error", NULL, "admin_disabled",
                    "changing the sampler needs an admin key: start lmpipe-http with --admin-key");
        return -1;
    }
    const char *k = bearer(r);
    if (!k || !in_keys(k, gw->o.admin_keys, gw->o.n_admin_keys)) {
        lp_gw_error(c, 401, "invalid_request_error", NULL, "invalid_api_key",
                    k ? "this endpoint needs an admin key (--admin-key)"
                      : "missing admin key: send it as 'Authorization: Bearer KEY'");
        return -1;
    }
    return 0;
}

static bool ready_or_503(lp_gw_conn_t *c)
{
    lp_gw_t *gw = lp_gw_conn_gw(c);
    if (gw->link.ready) return true;
    lp_gw_error(c, 503, "server_error", NULL, "not_ready", "the pipeline is not ready: %s", gw->link.reason);
    return false;
}

/* 200 "ok"; 200 "degraded" while a stage is down (restarting) but requests
 * are still served or queued; 503 "draining" while the coordinator stops,
 * "unavailable" when nothing can serve (docs/HTTP.md). */
static void health(lp_gw_conn_t *c)
{
    lp_gw_t *gw = lp_gw_conn_gw(c);
    lp_json_buf_t b = {0};
    int status = 200;
    if (!gw->link.ready) {
        status = 503;
        lp_json_buf_puts(&b, "{\"status\":\"unavailable\",\"reason\":");
        lp_json_buf_str(&b, gw->link.reason, strlen(gw->link.reason));
        lp_json_buf_puts(&b, "}\n");
    } else if (gw->link.draining) {
        status = 503;
        lp_json_buf_puts(&b, "{\"status\":\"draining\",\"reason\":\"the coordinator is shutting down\"}\n");
    } else if (gw->link.unserving || gw->link.degraded) {
        status = gw->link.unserving ? 503 : 200;
        lp_json_buf_printf(&b, "{\"status\":\"%s\",\"down\":%s}\n", gw->link.unserving ? "unavailable" : "degraded",
                     gw->link.down_json[0] ? gw->link.down_json : "[]");
    } else
        lp_json_buf_puts(&b, "{\"status\":\"ok\"}\n");
    lp_gw_respond(c, status, "application/json", b.p, b.n, NULL);
    lp_json_buf_free(&b);
}

static void models(lp_gw_conn_t *c)
{
    lp_gw_t *gw = lp_gw_conn_gw(c);
    lp_json_buf_t b = {0};
    lp_json_buf_puts(&b, "{\"object\":\"list\",\"data\":[{\"id\":");
    lp_json_buf_str(&b, gw->link.model, strlen(gw->link.model));
    lp_json_buf_printf(&b, ",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"lmpipe\",\"max_model_len\":%u}]}\n",
                 (long long)time(NULL), gw->link.n_ctx);
    lp_gw_respond(c, 200, "application/json", b.p, b.n, NULL);
    lp_json_buf_free(&b);
}

/* The methods a route takes.  HEAD goes wherever GET does (RFC 9110). */
enum { M_GET = 1, M_POST = 2 };

typedef struct route {
    const char *path;
    unsigned methods;   /* M_GET, M_POST */
    const char *allow;  /* the Allow header's value */
    int kind;
    bool admin;         /* every method but GET and HEAD needs an admin key */
} route_t;

enum { R_PAGE, R_HEALTH, R_METRICS, R_MODELS, R_COMPL, R_CHAT, R_LLAMA, R_TOKENIZE, R_DETOKENIZE,
       R_TEMPLATE, R_SAMPLER };

static const route_t routes[] = {
    {"/", M_GET, "GET, HEAD", R_PAGE, false},
    {"/health", M_GET, "GET, HEAD", R_HEALTH, false},
    {"/metrics", M_GET, "GET, HEAD", R_METRICS, false},
    {"/v1/models", M_GET, "GET, HEAD", R_MODELS, false},
    {"/models", M_GET, "GET, HEAD", R_MODELS, false},
    {"/v1/completions", M_POST, "POST", R_COMPL, false},
    {"/v1/chat/completions", M_POST, "POST", R_CHAT, false},
    {"/completion", M_POST, "POST", R_LLAMA, false},
    {"/tokenize", M_POST, "POST", R_TOKENIZE, false},
    {"/detokenize", M_POST, "POST", R_DETOKENIZE, false},
    {"/apply-template", M_POST, "POST", R_TEMPLATE, false},
    {"/sampler", M_GET | M_POST, "GET, HEAD, POST", R_SAMPLER, true},
};

/* A method as the route table knows it: compared by value, never used as a
 * shift count (llhttp numbers methods past 31: HTTP_SOURCE is 33). */
static unsigned method_bit(int method)
{
    switch (method) {
    case HTTP_GET:
    case HTTP_HEAD: return M_GET;
    case HTTP_POST: return M_POST;
    default: return 0;
    }
}

static const route_t *find_route(const char *path)
{
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
        if (!strcmp(path, routes[i].path)) return &routes[i];
    return NULL;
}

/* ---- CORS ---- */

static bool origin_allowed(const lp_gw_t *gw, const char *origin, bool *any)
{
    *any = false;
    for (int i = 0; origin && i < gw->o.n_cors_origins; i++) {
        if (!strcmp(gw->o.cors_origins[i], "*")) return *any = true;
        if (!strcmp(gw->o.cors_origins[i], origin)) return true;
    }
    return false;
}

void lp_gw_cors_headers(const lp_gw_t *gw, const char *origin, char *out, size_t cap)
{
    bool any;
    out[0] = '\0';
    if (!origin_allowed(gw, origin, &any)) return;
    /* "*" for any origin; else the origin itself, and caches keyed by it */
    if (any) snprintf(out, cap, "Access-Control-Allow-Origin: *\r\n");
    else snprintf(out, cap, "Access-Control-Allow-Origin: %.300s\r\nVary: Origin\r\n", origin);
}

/* A preflight (OPTIONS) to a known route while CORS is on: 204 with the
 * methods the route takes and the headers the browser asks for (the key
 * goes in Authorization), before any key check: a preflight carries no
 * key, and its answer changes and reveals nothing. */
static void preflight(lp_gw_conn_t *c, const lp_gw_req_t *r, const char *allow)
{
    lp_gw_t *gw = lp_gw_conn_gw(c);
    bool any;
    if (!origin_allowed(gw, r->origin, &any)) {
        lp_gw_error(c, 403, "permission_error", NULL, "cors_origin_not_allowed",
                    "origin '%.200s' is not in http.cors_origins", r->origin ? r->origin : "(none)");
        return;
    }
    char extra[1024];
    snprintf(extra, sizeof(extra),
             "Allow: %s, OPTIONS\r\nAccess-Control-Allow-Methods: %s, OPTIONS\r\n"
             "Access-Control-Allow-Headers: %.600s\r\nAccess-Control-Max-Age: 600\r\n",
             allow, allow, r->acr_headers && r->acr_headers[0] ? r->acr_headers : "Authorization, Content-Type");
    lp_gw_respond(c, 204, "text/plain", "", 0, extra);
}

/* What every request goes through, with or without its body: the
 * endpoint, the reserve, the method and the keys.  The route when the
 * request may go on; NULL when answered. */
static const route_t *admit(lp_gw_conn_t *c, const lp_gw_req_t *r)
{
    lp_gw_t *gw = lp_gw_conn_gw(c);
    const route_t *rt = find_route(r->path);
    if (r->health_only && (!rt || (rt->kind != R_HEALTH && rt->kind != R_METRICS))) {
        lp_gw_error(c, 503, "server_error", NULL, "too_many_connections",
                    "too many connections (--max-connections %d): this one answers /health and /metrics only",
                    gw->o.max_connections);
        return NULL;
    }
    if (!rt) {
        lp_gw_error(c, 404, "invalid_request_error", NULL, "not_found", "no endpoint %s", r->path);
        return NULL;
    }
    if (r->method == HTTP_OPTIONS && gw->o.n_cors_origins) {
        preflight(c, r, rt->allow);
        return NULL;
    }
    bool read_only = r->method == HTTP_GET || r->method == HTTP_HEAD;
    /* On an admin path, anything but a read needs the admin key before the
     * method is even looked at: no method can slip past as a read. */
    if (rt->admin && !read_only && check_admin(c, r)) return NULL;
    if (!(rt->methods & method_bit(r->method))) {
        char allow[64];
        snprintf(allow, sizeof(allow), "Allow: %s\r\n", rt->allow);
        char msg[1024];
        lp_json_buf_t b = {0};
        snprintf(msg, sizeof(msg), "%s does not take %s; use %s", r->path,
                 llhttp_method_name((llhttp_method_t)r->method), rt->allow);
        lp_json_buf_puts(&b, "{\"error\":{\"message\":");
        lp_json_buf_str(&b, msg, strlen(msg));
        lp_json_buf_puts(&b, ",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"method_not_allowed\"}}\n");
        lp_gw_respond(c, 405, "application/json", b.p, b.n, allow);
        lp_json_buf_free(&b);
        return NULL;
    }
    if (rt->kind == R_PAGE || ((rt->kind == R_HEALTH || rt->kind == R_METRICS) && !gw->o.metrics_auth))
        return rt;
    if (!(rt->admin && !read_only) && check_key(c, r)) return NULL;
    return rt;
}

int lp_gw_route_head(lp_gw_conn_t *c, const lp_gw_req_t *r) { return admit(c, r) ? 0 : -1; }

void lp_gw_tenant(lp_gw_conn_t *c, const lp_gw_req_t *r, char *out, size_t cap)
{
    lp_gw_t *gw = lp_gw_conn_gw(c);
    const char *k = bearer(r);
    if (k)
        for (int a = 0; a < 2; a++) {
            const char *const *keys = a ? gw->o.admin_keys : gw->o.api_keys;
            int n = a ? gw->o.n_admin_keys : gw->o.n_api_keys;
            for (int i = 0; i < n; i++)
                if (key_eq(k, keys[i])) {
                    snprintf(out, cap, "http:%s%d", a ? "admin-key:" : "key:", i);
                    return;
                }
        }
    /* a gateway without keys: each address is a client */
    snprintf(out, cap, "http:addr:%s", r->peer ? r->peer : "");
}

void lp_gw_route(lp_gw_conn_t *c, const lp_gw_req_t *r)
{
    const route_t *rt = admit(c, r);
    if (!rt) return;
    bool read_only = r->method == HTTP_GET || r->method == HTTP_HEAD;
    switch (rt->kind) {
    case R_PAGE:
        lp_gw_respond(c, 200, "text/html; charset=utf-8", (const char *)lp_gw_page, lp_gw_page_len, NULL);
        return;
    case R_HEALTH:
        health(c);
        return;
    case R_METRICS:
        if (ready_or_503(c)) lp_gw_metrics(c);
        return;
    default: break;
    }
    if (!ready_or_503(c)) return;
    if (rt->kind == R_MODELS) {
        models(c);
        return;
    }
    if (rt->kind == R_SAMPLER && read_only) {
        lp_gw_proxy(c, r, NULL, "sampler");
        return;
    }
    lp_json_doc_t *doc = NULL;
    if (lp_json_parse(r->body, r->body_len, &doc) != 0) {
        lp_gw_error(c, 400, "invalid_request_error", NULL, "invalid_json", "the body is not valid JSON: %s",
                    lp_error_msg());
        return;
    }
    const lp_json_t *root = lp_json_root(doc);
    if (root->type != LP_JSON_OBJECT) {
        lp_gw_error(c, 400, "invalid_request_error", NULL, "invalid_json",
                    "the body must be a JSON object, got %s", lp_json_type_name(root->type));
    } else {
        switch (rt->kind) {
        case R_COMPL: lp_gw_generate(c, r, root, LP_RS_COMPLETIONS); break;
        case R_CHAT: lp_gw_generate(c, r, root, LP_RS_CHAT); break;
        case R_LLAMA: lp_gw_generate(c, r, root, LP_RS_COMPLETION); break;
        case R_TOKENIZE: lp_gw_proxy(c, r, root, "tokenize"); break;
        case R_DETOKENIZE: lp_gw_proxy(c, r, root, "detokenize"); break;
        case R_TEMPLATE: lp_gw_proxy(c, r, root, "apply-template"); break;
        case R_SAMPLER: lp_gw_proxy(c, r, root, "sampler"); break;
        default: break;
        }
    }
    lp_json_doc_destroy(&doc);
}
