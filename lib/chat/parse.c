/* parse.c - the output parser's engine: input, the text modes (start,
 * reasoning, content), the sinks that record deltas, calls, and the pieces
 * readers share (literals, markers, JSON scanned a byte at a time, call
 * objects, XML-like parameters).  The readers are in read-*.c. */
#include "parse-internal.h"

#include "error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

enum { M_START, M_REASON, M_TEXT, M_READ };

/* ---- input primitives ----------------------------------------------------- */

int lp__at(const P *p, size_t q, const char *s)
{
    size_t n = strlen(s), have = p->len - q;
    if (have >= n) return memcmp(p->buf + q, s, n) ? -1 : 1;
    if (have && memcmp(p->buf + q, s, have)) return -1;
    return p->final ? -1 : 0;
}

size_t lp__skip_ws(const P *p, size_t q)
{
    while (q < p->len && lp__is_ws(p->buf[q])) q++;
    return q;
}

int lp__find(const P *p, size_t from, const char *const *m, size_t n, size_t *at, size_t *safe)
{
    bool first[256] = {false};
    for (size_t j = 0; j < n; j++) first[(unsigned char)m[j][0]] = true;
    for (size_t i = from; i < p->len; i++) {
        if (!first[(unsigned char)p->buf[i]]) continue;
        bool partial = false;
        for (size_t j = 0; j < n; j++) {
            int r = lp__at(p, i, m[j]);
            if (r == 1) {
                *at = i;
                return (int)j;
            }
            if (r == 0) partial = true;
        }
        if (partial) {
            *safe = i;
            return -1;
        }
    }
    *safe = p->len;
    return -1;
}

/* ---- output: deltas and sinks ---------------------------------------------- */

static void add_delta(P *p, uint8_t kind, size_t index, size_t start, size_t end, bool first)
{
    if (p->n_deltas) {
        lp__delta_t *d = &p->deltas[p->n_deltas - 1];
        if (d->kind == kind && d->index == index && d->end == start && !first) {
            d->end = end;
            return;
        }
    }
    if (p->n_deltas == p->cap_deltas) {
        size_t cap = p->cap_deltas ? 2 * p->cap_deltas : 8;
        lp__delta_t *nd = realloc(p->deltas, cap * sizeof(*nd));
        if (!nd) {
            p->oom = true;
            return;
        }
        p->deltas = nd;
        p->cap_deltas = cap;
    }
    p->deltas[p->n_deltas++] = (lp__delta_t){.kind = kind, .first = first, .index = index, .start = start, .end = end};
}

/* The end of the last whole UTF-8 character of s[0..n) (a sequence cut
 * short at the end waits for the next piece). */
static size_t utf8_whole(const char *s, size_t n)
{
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        unsigned char c = (unsigned char)s[n - k];
        if ((c & 0xC0) == 0x80) continue;
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > k ? n - k : n;
    }
    return n;
}

static void out_flush(P *p, lp__out_t *o, uint8_t kind, size_t index, bool all)
{
    size_t end = all ? o->b.n : utf8_whole(o->b.p, o->b.n);
    if (end > o->sent) {
        add_delta(p, kind, index, o->sent, end, false);
        o->sent = end;
    }
}

static void out_put(P *p, lp__out_t *o, const char *s, size_t n, uint8_t kind, size_t index)
{
    lp_json_buf_put(&o->b, s, n);
    if (o->b.oom) p->oom = true;
    out_flush(p, o, kind, index, false);
}

void lp__sink_put(P *p, lp__sink_t *s, const char *t, size_t n)
{
    size_t i = 0, j = n;
    while (j > 0 && lp__is_ws(t[j - 1])) j--;
    if (j == 0) {
        if (!s->strip) lp_json_buf_put(&s->ws, t, n);
        return;
    }
    if (s->strip) {
        while (i < j && lp__is_ws(t[i])) i++;
        s->strip = false;
    } else if (s->ws.n)
        out_put(p, &s->o, s->ws.p, s->ws.n, s->kind, 0);
    s->ws.n = 0;
    out_put(p, &s->o, t + i, j - i, s->kind, 0);
    lp_json_buf_put(&s->ws, t + j, n - j);
    if (s->ws.oom) p->oom = true;
}

void lp__sink_end(P *p, lp__sink_t *s)
{
    (void)p;
    s->ws.n = 0;
    s->strip = true;
}

/* ---- calls ------------------------------------------------------------------ */

static void make_id(P *p, char *id, size_t cap)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    size_t n = (size_t)snprintf(id, cap, "%s", p->id_prefix);
    for (int k = 0; k < p->id_len && n + 1 < cap; k++) {
        /* xorshift64* */
        p->rng ^= p->rng >> 12;
        p->rng ^= p->rng << 25;
        p->rng ^= p->rng >> 27;
        uint64_t r = p->rng * 2685821657736338717ull;
        id[n++] = abc[(r >> 32) % 62];
    }
    id[n] = 0;
}

int lp__call_begin(P *p, const char *name, size_t name_len)
{
    lp__sink_end(p, &p->content);
    if (p->n_calls == p->cap_calls) {
        size_t cap = p->cap_calls ? 2 * p->cap_calls : 4;
        lp__call_t *nc = realloc(p->calls, cap * sizeof(*nc));
        if (!nc) {
            p->oom = true;
            return -1;
        }
        p->calls = nc;
        p->cap_calls = cap;
    }
    lp__call_t *c = &p->calls[p->n_calls];
    memset(c, 0, sizeof(*c));
    c->name = strndup(name, name_len);
    if (!c->name) {
        p->oom = true;
        return -1;
    }
    make_id(p, c->id, sizeof(c->id));
    add_delta(p, LP_CHAT_DELTA_TOOL_CALL, p->n_calls, 0, 0, true);
    return (int)p->n_calls++;
}

void lp__call_args(P *p, int i, const char *s, size_t n)
{
    if (i < 0 || !n) return;
    out_put(p, &p->calls[i].args, s, n, LP_CHAT_DELTA_TOOL_CALL, (size_t)i);
}

void lp__call_args_str(P *p, int i, const char *s, size_t n)
{
    if (i < 0) return;
    char tmp[512];
    size_t k = 0;
    for (size_t j = 0; j < n; j++) {
        unsigned char c = (unsigned char)s[j];
        if (k + 8 > sizeof(tmp)) {
            lp__call_args(p, i, tmp, k);
            k = 0;
        }
        if (c == '"' || c == '\\') {
            tmp[k++] = '\\';
            tmp[k++] = (char)c;
        } else if (c == '\n') {
            tmp[k++] = '\\';
            tmp[k++] = 'n';
        } else if (c == '\t') {
            tmp[k++] = '\\';
            tmp[k++] = 't';
        } else if (c == '\r') {
            tmp[k++] = '\\';
            tmp[k++] = 'r';
        } else if (c < 0x20) {
            k += (size_t)snprintf(tmp + k, sizeof(tmp) - k, "\\u%04x", c);
        } else
            tmp[k++] = (char)c;
    }
    lp__call_args(p, i, tmp, k);
}

void lp__call_end(P *p, int i, bool complete)
{
    if (i < 0) return;
    lp__call_t *c = &p->calls[i];
    if (!c->args.b.n && !c->broken) lp__call_args(p, i, "{}", 2);
    out_flush(p, &c->args, LP_CHAT_DELTA_TOOL_CALL, (size_t)i, true);
    lp_json_doc_t *doc = NULL;
    c->valid = !c->broken && c->args.b.n && !lp_json_parse(c->args.b.p, c->args.b.n, &doc) &&
               lp_json_root(doc)->type == LP_JSON_OBJECT;
    lp_json_doc_destroy(&doc);
    lp_error_clear();
    c->complete = complete;
    lp__sink_end(p, &p->content);
}

void lp__call_broken(P *p, int i)
{
    if (i >= 0) p->calls[i].broken = true;
}

int lp__jargs(P *p)
{
    lp__rdstate_t *rs = &p->rs;
    if (!rs->jstarted) {
        rs->q = lp__skip_ws(p, rs->q);
        if (rs->q == p->len) return LP__R_MORE;
        rs->jstarted = true;
        memset(&rs->js, 0, sizeof(rs->js));
    }
    size_t q = rs->q, from = q;
    while (q < p->len) {
        int r = lp__jscan_feed(&rs->js, (unsigned char)p->buf[q]);
        if (r == 0) {
            q++;
            continue;
        }
        size_t end = r == 1 ? q + 1 : q;
        if (r < 0) lp__call_broken(p, rs->call);
        lp__call_args(p, rs->call, p->buf + from, end - from);
        rs->q = end;
        rs->jstarted = false;
        return LP__R_DONE;
    }
    lp__call_args(p, rs->call, p->buf + from, q - from);
    rs->q = q;
    return LP__R_MORE;
}

int lp__rd_more(P *p)
{
    lp__rdstate_t *rs = &p->rs;
    if (p->final && rs->call >= 0) {
        if (rs->in_param) lp__param_end(p);
        if (rs->close_str) lp__call_args(p, rs->call, "\"", 1);
        while (rs->gdepth > 0) lp__call_args(p, rs->call, rs->gstack[--rs->gdepth] == 1 ? "}" : "]", 1);
        if (rs->close_obj) lp__call_args(p, rs->call, "}", 1);
        lp__call_end(p, rs->call, false);
        rs->call = -1;
        rs->close_str = rs->close_obj = false;
    }
    return LP__R_MORE;
}

/* ---- JSON scanned a byte at a time ------------------------------------------ */

enum { JS_START, JS_STR, JS_STR_ESC, JS_LIT, JS_IN, JS_IN_STR, JS_IN_ESC, JS_DONE };

static bool json_outside_byte(unsigned char c)
{
    /* what JSON has outside strings besides brackets and quotes */
    return lp__is_ws((char)c) || c == ':' || c == ',' || (c >= '0' && c <= '9') || c == '-' || c == '+' ||
           c == '.' || c == 'e' || c == 'E' || strchr("truefalsn", c);
}

int lp__jscan_feed(lp__jscan_t *s, unsigned char c)
{
    switch (s->st) {
    case JS_START:
        if (c == '{' || c == '[') {
            s->depth = 1;
            s->st = JS_IN;
            return 0;
        }
        if (c == '"') {
            s->st = JS_STR;
            return 0;
        }
        if (c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n') {
            s->st = JS_LIT;
            return 0;
        }
        return -1;
    case JS_STR:
        if (c == '\\') s->st = JS_STR_ESC;
        else if (c == '"') {
            s->st = JS_DONE;
            return 1;
        }
        return 0;
    case JS_STR_ESC: s->st = JS_STR; return 0;
    case JS_LIT:
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' || c == '+' ||
            c == '-')
            return 0;
        s->st = JS_DONE;
        return 2;
    case JS_IN:
        if (c == '"') s->st = JS_IN_STR;
        else if (c == '{' || c == '[') {
            if (++s->depth > LP_JSON_MAX_DEPTH) return -1;
        } else if (c == '}' || c == ']') {
            if (--s->depth == 0) {
                s->st = JS_DONE;
                return 1;
            }
        } else if (!json_outside_byte(c))
            return -1;
        return 0;
    case JS_IN_STR:
        if (c == '\\') s->st = JS_IN_ESC;
        else if (c == '"') s->st = JS_IN;
        return 0;
    case JS_IN_ESC: s->st = JS_IN_STR; return 0;
    default: return -1;
    }
}

bool lp__jscan_in_literal(const lp__jscan_t *s) { return s->st == JS_LIT; }

/* ---- call objects ------------------------------------------------------------ */

enum { W_OPEN, W_KEY0, W_KEY1, W_KEY, W_KEY_ESC, W_COLON, W_VAL, W_NAME, W_NAME_ESC, W_ARGS, W_SKIP, W_AFTER };
enum { K_NAME, K_ARGS, K_SKIP, K_OTHER };

void lp__wrap_reset(lp__wrap_t *w)
{
    free(w->name);
    memset(w, 0, sizeof(*w));
    w->args_at = w->args_end = SIZE_MAX;
    w->call = -1;
}

static int key_of(const char *k, size_t n)
{
#define IS(s) (n == sizeof(s) - 1 && !memcmp(k, s, n))
    if (IS("name") || IS("tool_name")) return K_NAME;
    if (IS("arguments") || IS("parameters")) return K_ARGS;
    if (IS("id") || IS("tool_call_id") || IS("type")) return K_SKIP;
#undef IS
    return K_OTHER;
}

/* commit once the name is known and the arguments have begun (or the object ended) */
static void wrap_commit(P *p, lp__wrap_t *w, bool ended)
{
    if (w->call >= 0 || !w->has_name || (w->args_at == SIZE_MAX && !ended)) return;
    w->call = lp__call_begin(p, w->name, strlen(w->name));
    p->rs.call = w->call;
}

/* arguments read up to q go to the call; a string is sent decoded once it ends */
static void wrap_flush(P *p, lp__wrap_t *w, size_t q)
{
    if (w->call < 0 || w->args_at == SIZE_MAX) return;
    if (w->args_str) {
        if (w->args_end == SIZE_MAX || w->args_sent == w->args_end) return;
        lp_json_doc_t *doc = NULL;
        const char *s = p->buf + w->args_at;
        size_t n = w->args_end - w->args_at;
        if (!lp_json_parse(s, n, &doc)) lp__call_args(p, w->call, lp_json_root(doc)->u.str, lp_json_root(doc)->n);
        else lp__call_args(p, w->call, s, n);
        lp_json_doc_destroy(&doc);
        lp_error_clear();
        w->args_sent = w->args_end;
        return;
    }
    size_t upto = q < w->args_end ? q : w->args_end;
    if (upto > w->args_sent) {
        lp__call_args(p, w->call, p->buf + w->args_sent, upto - w->args_sent);
        w->args_sent = upto;
    }
}

static int wrap_close(P *p, lp__wrap_t *w)
{
    lp__call_end(p, w->call, true);
    p->rs.call = -1;
    w->call = -1;
    return LP__R_DONE;
}

int lp__wrap_run(P *p, lp__wrap_t *w, size_t *qp)
{
    size_t q = *qp;
    while (q < p->len) {
        unsigned char c = (unsigned char)p->buf[q];
        switch (w->st) {
        case W_OPEN:
            if (lp__is_ws((char)c)) break;
            if (c != '{') goto fail;
            w->st = W_KEY0;
            break;
        case W_KEY0:
        case W_KEY1:
            if (lp__is_ws((char)c)) break;
            if (c == '"') {
                w->tok = q + 1;
                w->st = W_KEY;
            } else if (c == '}' && w->st == W_KEY0) {
                q++;
                goto ended;
            } else
                goto broken;
            break;
        case W_KEY:
            if (c == '\\') w->st = W_KEY_ESC;
            else if (c == '"') {
                w->key = (uint8_t)key_of(p->buf + w->tok, q - w->tok);
                /* an object whose first key is not a call's is not a call */
                if (w->key == K_OTHER && !w->any_key && w->call < 0) goto fail;
                if (w->key == K_OTHER) w->key = K_SKIP;
                if (w->key == K_NAME && w->has_name) w->key = K_SKIP;
                if (w->key == K_ARGS && w->args_at != SIZE_MAX) w->key = K_SKIP;
                w->any_key = true;
                w->st = W_COLON;
            } else if (q - w->tok > 64)
                goto broken;
            break;
        case W_KEY_ESC: w->st = W_KEY; break;
        case W_COLON:
            if (lp__is_ws((char)c)) break;
            if (c != ':') goto broken;
            w->st = W_VAL;
            break;
        case W_VAL:
            if (lp__is_ws((char)c)) break;
            if (w->key == K_NAME) {
                if (c != '"') goto broken;
                w->tok = q;
                w->st = W_NAME;
                break;
            }
            memset(&w->js, 0, sizeof(w->js));
            if (w->key == K_ARGS) {
                w->args_at = w->args_sent = q;
                w->args_str = c == '"';
                w->st = W_ARGS;
                wrap_commit(p, w, false);
            } else
                w->st = W_SKIP;
            continue; /* the scanner takes this byte */
        case W_NAME:
            if (c == '\\') w->st = W_NAME_ESC;
            else if (c == '"') {
                lp_json_doc_t *doc = NULL;
                if (lp_json_parse(p->buf + w->tok, q + 1 - w->tok, &doc)) {
                    lp_error_clear();
                    goto broken;
                }
                const lp_json_t *s = lp_json_root(doc);
                bool ok = s->n > 0 && !memchr(s->u.str, 0, s->n);
                if (ok) w->name = strndup(s->u.str, s->n);
                lp_json_doc_destroy(&doc);
                if (!ok) goto broken;
                if (!w->name) {
                    p->oom = true;
                    goto fail;
                }
                w->has_name = true;
                w->st = W_AFTER;
                wrap_commit(p, w, false);
                wrap_flush(p, w, q);
            } else if (q - w->tok > 256)
                goto broken;
            break;
        case W_NAME_ESC: w->st = W_NAME; break;
        case W_ARGS:
        case W_SKIP: {
            int r = lp__jscan_feed(&w->js, c);
            if (r < 0) goto broken;
            if (r == 0) break;
            size_t end = r == 1 ? q + 1 : q;
            if (w->st == W_ARGS) {
                w->args_end = end;
                wrap_flush(p, w, end);
            }
            w->st = W_AFTER;
            q = end;
            continue;
        }
        case W_AFTER:
            if (lp__is_ws((char)c)) break;
            if (c == ',') w->st = W_KEY1;
            else if (c == '}') {
                q++;
                goto ended;
            } else
                goto broken;
            break;
        }
        q++;
    }
    wrap_flush(p, w, q);
    *qp = q;
    return LP__R_MORE;

ended:
    if (!w->has_name) goto fail;
    wrap_commit(p, w, true);
    wrap_flush(p, w, q);
    *qp = q;
    return wrap_close(p, w);
broken:
    if (w->call < 0) goto fail;
    if (w->st == W_ARGS) {
        w->args_end = q;
        wrap_flush(p, w, q);
    }
    *qp = q;
    return wrap_close(p, w);
fail:
    *qp = q;
    return LP__R_FAIL;
}

/* ---- XML-like parameters ----------------------------------------------------- */

static const lp_json_t *find_tool(const P *p, const char *fn)
{
    if (!p->tools) return NULL;
    const lp_json_t *arr = lp_json_root(p->tools);
    if (arr->type != LP_JSON_ARRAY) return NULL;
    for (size_t i = 0; i < arr->n; i++) {
        const lp_json_t *t = &arr->u.items[i];
        const lp_json_t *f = lp_json_get(t, "function");
        if (!f) f = t;
        const lp_json_t *nm = lp_json_get(f, "name");
        if (nm && nm->type == LP_JSON_STRING && !strcmp(nm->u.str, fn)) return f;
    }
    return NULL;
}

int lp__param_kind(const P *p, const char *fn, const char *key, size_t key_len)
{
    const lp_json_t *f = find_tool(p, fn);
    const lp_json_t *props = lp_json_get(lp_json_get(f, "parameters"), "properties");
    if (!props || props->type != LP_JSON_OBJECT) return LP__P_STRING;
    const lp_json_t *s = NULL;
    for (size_t i = 0; i < props->n; i++)
        if (props->u.items[i].key_len == key_len && !memcmp(props->u.items[i].key, key, key_len))
            s = &props->u.items[i];
    if (!s) return LP__P_STRING;
    const lp_json_t *t = lp_json_get(s, "type");
    if (t && t->type == LP_JSON_STRING) {
        if (!strcmp(t->u.str, "string")) return LP__P_STRING;
        return !strcmp(t->u.str, "boolean") ? LP__P_BOOL : LP__P_JSON;
    }
    if (t && t->type == LP_JSON_ARRAY) {
        for (size_t i = 0; i < t->n; i++)
            if (t->u.items[i].type == LP_JSON_STRING && !strcmp(t->u.items[i].u.str, "string")) return LP__P_STRING;
        return LP__P_JSON;
    }
    const lp_json_t *e = lp_json_get(s, "enum");
    if (e && e->type == LP_JSON_ARRAY) {
        for (size_t i = 0; i < e->n; i++)
            if (e->u.items[i].type != LP_JSON_STRING) return LP__P_JSON;
        return LP__P_STRING;
    }
    if (lp_json_get(s, "anyOf") || lp_json_get(s, "oneOf") || lp_json_get(s, "properties") || lp_json_get(s, "items"))
        return LP__P_JSON;
    return LP__P_STRING;
}

void lp__param_begin(P *p, const char *key, size_t key_len)
{
    lp__param_begin_kind(p, key, key_len, lp__param_kind(p, p->calls[p->rs.call].name, key, key_len));
}

void lp__param_begin_kind(P *p, const char *key, size_t key_len, int kind)
{
    lp__rdstate_t *rs = &p->rs;
    if (rs->n_params++) lp__call_args(p, rs->call, ", ", 2);
    lp__call_args(p, rs->call, "\"", 1);
    lp__call_args_str(p, rs->call, key, key_len);
    lp__call_args(p, rs->call, "\": ", 3);
    rs->pkind = kind;
    rs->pstarted = false;
    rs->in_param = true;
    rs->tmp.n = 0;
}

void lp__param_text(P *p, const char *s, size_t n)
{
    lp__rdstate_t *rs = &p->rs;
    if (rs->pkind != LP__P_STRING) {
        lp_json_buf_put(&rs->tmp, s, n);
        if (rs->tmp.oom) p->oom = true;
        return;
    }
    if (!rs->pstarted) {
        lp__call_args(p, rs->call, "\"", 1);
        rs->pstarted = true;
    }
    lp__call_args_str(p, rs->call, s, n);
}

void lp__param_end(P *p)
{
    lp__rdstate_t *rs = &p->rs;
    rs->in_param = false;
    if (rs->pkind == LP__P_STRING) {
        lp__call_args(p, rs->call, rs->pstarted ? "\"" : "\"\"", rs->pstarted ? 1 : 2);
        return;
    }
    /* a typed value: itself when it is JSON, else the text as a string */
    const char *s = rs->tmp.p ? rs->tmp.p : "";
    size_t a = 0, b = rs->tmp.n;
    while (a < b && lp__is_ws(s[a])) a++;
    while (b > a && lp__is_ws(s[b - 1])) b--;
    if (rs->pkind == LP__P_BOOL && (b - a == 4 || b - a == 5) &&
        (!strncasecmp(s + a, "true", b - a) || !strncasecmp(s + a, "false", b - a))) {
        bool t = (s[a] | 0x20) == 't';
        lp__call_args(p, rs->call, t ? "true" : "false", t ? 4 : 5);
        return;
    }
    lp_json_doc_t *doc = NULL;
    if (b > a && !lp_json_parse(s + a, b - a, &doc)) {
        lp__call_args(p, rs->call, s + a, b - a);
    } else {
        lp_error_clear();
        lp__call_args(p, rs->call, "\"", 1);
        lp__call_args_str(p, rs->call, s, rs->tmp.n);
        lp__call_args(p, rs->call, "\"", 1);
    }
    lp_json_doc_destroy(&doc);
}

/* ---- the text modes ------------------------------------------------------------ */

static void enter_reader(P *p, lp__reader_fn fn, size_t mlen)
{
    lp__rdstate_t *rs = &p->rs;
    lp__wrap_reset(&rs->w);
    lp_json_buf_t tmp = rs->tmp;
    memset(rs, 0, sizeof(*rs));
    tmp.n = 0;
    rs->tmp = tmp;
    lp__wrap_reset(&rs->w);
    rs->q = p->pos + mlen;
    rs->call = -1;
    p->rd = fn;
    p->rd_mlen = mlen;
    p->rd_calls0 = p->n_calls;
    p->mode = M_READ;
}

/* 1 when it moved on, 0 when it needs more of the output */
static int step(P *p)
{
    const lp_chat_format_info_t *fi = p->fi;
    switch (p->mode) {
    case M_START: {
        size_t i = lp__skip_ws(p, p->pos);
        if (i == p->len && !p->final) return 0;
        if (!p->ops->own_reasoning && fi->reasoning_open) {
            int r = lp__at(p, i, fi->reasoning_open);
            if (r == 0) return 0;
            if (r == 1) {
                size_t n = strlen(fi->reasoning_open);
                if (p->rf == LP_CHAT_REASONING_NONE) lp__sink_put(p, &p->content, p->buf + i, n);
                p->pos = i + n;
                p->mode = M_REASON;
                return 1;
            }
        }
        p->pos = i;
        p->mode = M_TEXT;
        if (p->ops->start) enter_reader(p, p->ops->start, 0);
        return 1;
    }
    case M_REASON: {
        const char *close = fi->reasoning_close;
        size_t at = 0, safe = 0;
        int j = lp__find(p, p->pos, &close, 1, &at, &safe);
        size_t end = j < 0 ? safe : at;
        if (end > p->pos) lp__sink_put(p, p->rsink, p->buf + p->pos, end - p->pos);
        p->pos = end;
        if (j < 0) return 0;
        size_t n = strlen(close);
        if (p->rf == LP_CHAT_REASONING_NONE) lp__sink_put(p, &p->content, p->buf + at, n);
        else {
            lp__sink_end(p, &p->reasoning);
            lp__sink_end(p, &p->content);
        }
        p->pos = at + n;
        p->mode = M_TEXT;
        return 1;
    }
    case M_TEXT: {
        const lp__fmt_ops_t *ops = p->ops;
        const char *ms[16];
        size_t nm = ops->n_markers < 16 ? ops->n_markers : 16;
        for (size_t k = 0; k < nm; k++) ms[k] = ops->markers[k].text;
        size_t at = 0, safe = 0;
        int j = nm ? lp__find(p, p->pos, ms, nm, &at, &safe) : -1;
        if (!nm) safe = p->len;
        size_t end = j < 0 ? safe : at;
        if (end > p->pos) lp__sink_put(p, &p->content, p->buf + p->pos, end - p->pos);
        p->pos = end;
        if (j < 0) return 0;
        size_t mlen = strlen(ms[j]);
        if (ops->markers[j].read) enter_reader(p, ops->markers[j].read, mlen);
        else p->pos += mlen;
        return 1;
    }
    case M_READ: {
        size_t start = p->pos;
        int r = p->rd(p);
        if (r == LP__R_MORE) {
            if (!p->final) return 0;
            lp__rd_more(p);
            if (p->n_calls > p->rd_calls0) {
                p->pos = p->len;
                r = LP__R_DONE;
            } else
                r = LP__R_FAIL;
        }
        p->mode = M_TEXT;
        if (r == LP__R_DONE) {
            if (p->rs.call >= 0) {
                lp__call_end(p, p->rs.call, false);
                p->rs.call = -1;
            }
            if (p->pos < start + p->rd_mlen) p->pos = start + p->rd_mlen;
            lp__sink_end(p, &p->content);
        } else {
            lp__sink_put(p, &p->content, p->buf + p->pos, p->rd_mlen);
            p->pos += p->rd_mlen;
        }
        return 1;
    }
    }
    return 0;
}

static int run(P *p)
{
    while (step(p) && !p->oom)
        ;
    if (p->oom) return lp_error_set(LP_ERR(ENOMEM), "chat output: out of memory");
    return 0;
}

/* ---- the API ------------------------------------------------------------------- */

int lp_chat_parser_new(const lp_chat_parser_opts_t *opts, lp_chat_parser_t **out)
{
    *out = NULL;
    const lp_chat_format_info_t *fi = lp_chat_format_info(opts->format);
    if (!fi) return lp_error_set(LP_ERR(EINVAL), "chat output: unknown format %d", (int)opts->format);
    P *p = calloc(1, sizeof(*p));
    if (!p) return lp_error_set(LP_ERR(ENOMEM), "chat output: out of memory");
    p->fi = fi;
    p->ops = lp__fmt_ops(opts->format);
    /* never NULL, so that offsets into it are always pointers */
    p->cap = 1024;
    p->buf = malloc(p->cap);
    if (!p->buf) {
        free(p);
        return lp_error_set(LP_ERR(ENOMEM), "chat output: out of memory");
    }
    p->buf[0] = 0;
    p->rf = opts->reasoning == LP_CHAT_REASONING_NONE ? LP_CHAT_REASONING_NONE : LP_CHAT_REASONING_DEEPSEEK;
    p->content.kind = LP_CHAT_DELTA_CONTENT;
    p->content.strip = true;
    p->reasoning.kind = LP_CHAT_DELTA_REASONING;
    p->reasoning.strip = true;
    p->rsink = p->rf == LP_CHAT_REASONING_NONE ? &p->content : &p->reasoning;
    p->rs.call = -1;
    p->rs.w.call = -1;
    p->mode = M_START;
    if (!p->ops->own_reasoning && lp_chat_prompt_opens_reasoning(opts->format, opts->prompt, opts->prompt_len))
        p->mode = M_REASON;
    if (opts->format == LP_CHAT_FORMAT_FUNCTIONARY_V32 && opts->prompt) {
        size_t n = opts->prompt_len;
        p->prompt_functionary = n >= 3 && !memcmp(opts->prompt + n - 3, ">>>", 3);
    }
    if (opts->tools) {
        lp_json_buf_t b = {0};
        lp_json_buf_value(&b, opts->tools);
        int rc = b.oom ? LP_ERR(ENOMEM) : lp_json_parse(b.p, b.n, &p->tools);
        free(b.p);
        if (rc) {
            lp_chat_parser_destroy(&p);
            return lp_error_set(rc, "chat output: tools: %s", lp_error_msg());
        }
    }
    if (opts->format == LP_CHAT_FORMAT_MISTRAL) {
        p->id_prefix = "";
        p->id_len = 9;
    } else {
        p->id_prefix = "call_";
        p->id_len = 24;
    }
    p->rng = opts->id_seed;
    if (!p->rng && getrandom(&p->rng, sizeof(p->rng), 0) != (ssize_t)sizeof(p->rng))
        p->rng = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)p;
    if (!p->rng) p->rng = 0x9E3779B97F4A7C15ull;
    *out = p;
    return 0;
}

void lp_chat_parser_destroy(lp_chat_parser_t **self_p)
{
    P *p = *self_p;
    if (!p) return;
    free(p->buf);
    free(p->content.o.b.p);
    free(p->content.ws.p);
    free(p->reasoning.o.b.p);
    free(p->reasoning.ws.p);
    for (size_t i = 0; i < p->n_calls; i++) {
        free(p->calls[i].name);
        free(p->calls[i].args.b.p);
    }
    free(p->calls);
    free(p->deltas);
    lp__wrap_reset(&p->rs.w);
    free(p->rs.tmp.p);
    lp_json_doc_destroy(&p->tools);
    free(p->view);
    free(p);
    *self_p = NULL;
}

int lp_chat_parser_feed(lp_chat_parser_t *p, const char *text, size_t len)
{
    p->n_deltas = 0;
    if (p->finished) return lp_error_set(LP_ERR(EINVAL), "chat output: fed after its end");
    if (len > LP_CHAT_PARSE_MAX_OUTPUT - p->len)
        return lp_error_set(LP_ERR(E2BIG), "chat output: longer than %u bytes", LP_CHAT_PARSE_MAX_OUTPUT);
    if (p->len + len + 1 > p->cap) {
        size_t cap = p->cap ? p->cap : 1024;
        while (cap < p->len + len + 1) cap *= 2;
        char *nb = realloc(p->buf, cap);
        if (!nb) return lp_error_set(LP_ERR(ENOMEM), "chat output: out of memory");
        p->buf = nb;
        p->cap = cap;
    }
    if (len) memcpy(p->buf + p->len, text, len);
    p->len += len;
    p->buf[p->len] = 0;
    return run(p);
}

int lp_chat_parser_finish(lp_chat_parser_t *p)
{
    p->n_deltas = 0;
    if (p->finished) return lp_error_set(LP_ERR(EINVAL), "chat output: finished twice");
    p->final = true;
    int rc = run(p);
    p->finished = true;
    /* what waited for a whole character goes now */
    out_flush(p, &p->content.o, LP_CHAT_DELTA_CONTENT, 0, true);
    out_flush(p, &p->reasoning.o, LP_CHAT_DELTA_REASONING, 0, true);
    for (size_t i = 0; i < p->n_calls; i++) out_flush(p, &p->calls[i].args, LP_CHAT_DELTA_TOOL_CALL, i, true);
    if (!rc && p->oom) rc = lp_error_set(LP_ERR(ENOMEM), "chat output: out of memory");
    return rc;
}

size_t lp_chat_parser_n_deltas(const lp_chat_parser_t *p) { return p->n_deltas; }

void lp_chat_parser_delta(const lp_chat_parser_t *p, size_t i, lp_chat_delta_t *out)
{
    memset(out, 0, sizeof(*out));
    if (i >= p->n_deltas) return;
    const lp__delta_t *d = &p->deltas[i];
    out->kind = (lp_chat_delta_kind_t)d->kind;
    out->index = d->index;
    const lp_json_buf_t *b = d->kind == LP_CHAT_DELTA_CONTENT     ? &p->content.o.b
                             : d->kind == LP_CHAT_DELTA_REASONING ? &p->reasoning.o.b
                                                                  : &p->calls[d->index].args.b;
    out->text = b->p ? b->p + d->start : "";
    out->len = d->end - d->start;
    if (d->first) {
        out->id = p->calls[d->index].id;
        out->name = p->calls[d->index].name;
    }
}

void lp_chat_parser_msg(const lp_chat_parser_t *p, lp_chat_msg_t *out)
{
    P *mp = (P *)p;
    out->content = p->content.o.b.p ? p->content.o.b.p : "";
    out->content_len = p->content.o.b.n;
    out->reasoning = p->reasoning.o.b.p ? p->reasoning.o.b.p : "";
    out->reasoning_len = p->reasoning.o.b.n;
    free(mp->view);
    mp->view = p->n_calls ? calloc(p->n_calls, sizeof(*mp->view)) : NULL;
    out->tool_calls = mp->view;
    out->n_tool_calls = mp->view ? p->n_calls : 0;
    for (size_t i = 0; mp->view && i < p->n_calls; i++) {
        const lp__call_t *c = &p->calls[i];
        mp->view[i] = (lp_chat_tool_call_t){.id = c->id, .name = c->name,
                                            .arguments = c->args.b.p ? c->args.b.p : "",
                                            .arguments_len = c->args.b.n, .valid = c->valid,
                                            .complete = c->complete};
    }
}

/* ---- JSON out --------------------------------------------------------------------- */

static void write_call_head(lp_json_buf_t *b, size_t index, const char *id, const char *name)
{
    char tmp[48];
    snprintf(tmp, sizeof(tmp), "{\"index\":%zu", index);
    lp_json_buf_puts(b, tmp);
    if (id) {
        lp_json_buf_puts(b, ",\"id\":");
        lp_json_buf_str(b, id, strlen(id));
        lp_json_buf_puts(b, ",\"type\":\"function\"");
    }
    lp_json_buf_puts(b, ",\"function\":{");
    if (name) {
        lp_json_buf_puts(b, "\"name\":");
        lp_json_buf_str(b, name, strlen(name));
        lp_json_buf_puts(b, ",");
    }
}

void lp_chat_delta_write_json(const lp_chat_delta_t *d, lp_json_buf_t *b)
{
    switch (d->kind) {
    case LP_CHAT_DELTA_CONTENT:
    case LP_CHAT_DELTA_REASONING:
        lp_json_buf_puts(b, d->kind == LP_CHAT_DELTA_CONTENT ? "{\"content\":" : "{\"reasoning_content\":");
        lp_json_buf_str(b, d->text, d->len);
        lp_json_buf_puts(b, "}");
        break;
    case LP_CHAT_DELTA_TOOL_CALL:
        lp_json_buf_puts(b, "{\"tool_calls\":[");
        write_call_head(b, d->index, d->id, d->name);
        lp_json_buf_puts(b, "\"arguments\":");
        lp_json_buf_str(b, d->text, d->len);
        lp_json_buf_puts(b, "}}]}");
        break;
    }
}

void lp_chat_msg_write_json(const lp_chat_msg_t *m, lp_json_buf_t *b)
{
    lp_json_buf_puts(b, "{\"role\":\"assistant\",\"content\":");
    if (m->content_len || !m->n_tool_calls) lp_json_buf_str(b, m->content, m->content_len);
    else lp_json_buf_puts(b, "null");
    if (m->reasoning_len) {
        lp_json_buf_puts(b, ",\"reasoning_content\":");
        lp_json_buf_str(b, m->reasoning, m->reasoning_len);
    }
    if (m->n_tool_calls) {
        lp_json_buf_puts(b, ",\"tool_calls\":[");
        for (size_t i = 0; i < m->n_tool_calls; i++) {
            const lp_chat_tool_call_t *c = &m->tool_calls[i];
            if (i) lp_json_buf_puts(b, ",");
            lp_json_buf_puts(b, "{\"id\":");
            lp_json_buf_str(b, c->id, strlen(c->id));
            lp_json_buf_puts(b, ",\"type\":\"function\",\"function\":{\"name\":");
            lp_json_buf_str(b, c->name, strlen(c->name));
            lp_json_buf_puts(b, ",\"arguments\":");
            lp_json_buf_str(b, c->arguments, c->arguments_len);
            lp_json_buf_puts(b, "}}");
        }
        lp_json_buf_puts(b, "]");
    }
    lp_json_buf_puts(b, "}");
}
