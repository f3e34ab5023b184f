/* read-gemma.c - Gemma 4's calls:
 *   <|tool_call>call:NAME{key:<|"|>text<|"|>,n:5,list:[1,2],obj:{a:true}}<tool_call|>
 * Keys are bare (or quoted like strings), strings sit between <|"|> marks,
 * other values are written as JSON writes them; the arguments are turned
 * into a JSON object as they come. */
#include "parse-internal.h"

#include <string.h>

#define QUOTE "<|\"|>"

enum { G_CALL, G_NAME, G_ARGS, G_END };
/* inside the arguments */
enum { GS_VALUE, GS_VALUE0, GS_KEY0, GS_KEY1, GS_KEY, GS_QKEY, GS_COLON, GS_STR, GS_LIT, GS_AFTER };

static int done_at(P *p, size_t q)
{
    p->pos = q;
    return LP__R_DONE;
}

static bool key_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.' || c == '$' || (unsigned char)c >= 0x80;
}

static void emit(P *p, const char *s) { lp__call_args(p, p->rs.call, s, strlen(s)); }

/* the arguments broke off: close what is open and end the call */
static int broken(P *p, size_t q)
{
    lp__rdstate_t *rs = &p->rs;
    if (rs->close_str) emit(p, "\"");
    while (rs->gdepth > 0) emit(p, rs->gstack[--rs->gdepth] == 1 ? "}" : "]");
    lp__call_broken(p, rs->call);
    lp__call_end(p, rs->call, true);
    rs->call = -1;
    return done_at(p, q);
}

/* one step of the arguments: 1 moved, 0 needs more, -1 broke, 2 the object closed */
static int args_step(P *p)
{
    lp__rdstate_t *rs = &p->rs;
    size_t q = rs->q;
    switch (rs->gst) {
    case GS_VALUE:
    case GS_VALUE0: {
        q = lp__skip_ws(p, q);
        rs->q = q;
        if (q == p->len) return 0;
        char c = p->buf[q];
        if (rs->gdepth == 0 && c != '{') return -1;
        if (c == ']' && rs->gst == GS_VALUE0) {
            rs->gdepth--;
            emit(p, "]");
            rs->q = q + 1;
            rs->gst = GS_AFTER;
            return rs->gdepth ? 1 : 2;
        }
        if (c == '{' || c == '[') {
            if (rs->gdepth == (int)sizeof(rs->gstack)) return -1;
            rs->gstack[rs->gdepth++] = c == '{' ? 1 : 2;
            emit(p, c == '{' ? "{" : "[");
            rs->q = q + 1;
            rs->gst = c == '{' ? GS_KEY0 : GS_VALUE0;
            return 1;
        }
        int r = lp__at(p, q, QUOTE);
        if (r == 0) return 0;
        if (r == 1) {
            emit(p, "\"");
            rs->close_str = true;
            rs->q = q + 5;
            rs->gst = GS_STR;
            return 1;
        }
        rs->a = q;
        rs->gst = GS_LIT;
        return 1;
    }
    case GS_KEY0:
    case GS_KEY1: {
        q = lp__skip_ws(p, q);
        rs->q = q;
        if (q == p->len) return 0;
        char c = p->buf[q];
        if (c == '}' && rs->gst == GS_KEY0) {
            rs->gdepth--;
            emit(p, "}");
            rs->q = q + 1;
            rs->gst = GS_AFTER;
            return rs->gdepth ? 1 : 2;
        }
        int r = lp__at(p, q, QUOTE);
        if (r == 0) return 0;
        if (r == 1) {
            rs->a = rs->q = q + 5;
            rs->gst = GS_QKEY;
            return 1;
        }
        if (!key_char(c)) return -1;
        rs->a = q;
        rs->gst = GS_KEY;
        return 1;
    }
    case GS_KEY:
    case GS_QKEY: {
        size_t at = 0, safe = 0, end;
        if (rs->gst == GS_QKEY) {
            const char *m = QUOTE;
            int j = lp__find(p, rs->a, &m, 1, &at, &safe);
            end = j < 0 ? safe : at;
            if (end - rs->a > 256) return -1;
            if (j < 0) return 0;
            rs->q = at + 5;
        } else {
            end = rs->a;
            while (end < p->len && key_char(p->buf[end])) end++;
            if (end - rs->a > 256) return -1;
            if (end == p->len) return 0;
            rs->q = end;
        }
        emit(p, "\"");
        lp__call_args_str(p, rs->call, p->buf + rs->a, end - rs->a);
        emit(p, "\": ");
        rs->gst = GS_COLON;
        return 1;
    }
    case GS_COLON:
        q = lp__skip_ws(p, q);
        rs->q = q;
        if (q == p->len) return 0;
        if (p->buf[q] != ':') return -1;
        rs->q = q + 1;
        rs->gst = GS_VALUE;
        return 1;
    case GS_STR: {
        const char *m = QUOTE;
        size_t at = 0, safe = 0;
        int j = lp__find(p, q, &m, 1, &at, &safe);
        size_t end = j < 0 ? safe : at;
        if (end > q) lp__call_args_str(p, rs->call, p->buf + q, end - q);
        rs->q = end;
        if (j < 0) return 0;
        emit(p, "\"");
        rs->close_str = false;
        rs->q = at + 5;
        rs->gst = GS_AFTER;
        return rs->gdepth ? 1 : 2;
    }
    case GS_LIT: {
        size_t k = rs->a;
        while (k < p->len && p->buf[k] != ',' && p->buf[k] != '}' && p->buf[k] != ']' && p->buf[k] != '<' &&
               k - rs->a <= 256)
            k++;
        if (k - rs->a > 256) return -1;
        if (k == p->len) return 0;
        size_t a = rs->a, b = k;
        while (b > a && lp__is_ws(p->buf[b - 1])) b--;
        lp_json_doc_t *doc = NULL;
        const lp_json_t *v = NULL;
        if (b > a && !lp_json_parse(p->buf + a, b - a, &doc)) v = lp_json_root(doc);
        if (v && v->type != LP_JSON_ARRAY && v->type != LP_JSON_OBJECT && v->type != LP_JSON_STRING)
            lp__call_args(p, rs->call, p->buf + a, b - a);
        else {
            emit(p, "\"");
            lp__call_args_str(p, rs->call, p->buf + a, b - a);
            emit(p, "\"");
        }
        lp_json_doc_destroy(&doc);
        rs->q = k;
        rs->gst = GS_AFTER;
        return 1;
    }
    case GS_AFTER: {
        q = lp__skip_ws(p, q);
        rs->q = q;
        if (q == p->len) return 0;
        char c = p->buf[q];
        int top = rs->gstack[rs->gdepth - 1];
        if (c == ',') {
            emit(p, ", ");
            rs->q = q + 1;
            rs->gst = top == 1 ? GS_KEY1 : GS_VALUE;
            return 1;
        }
        if ((c == '}' && top == 1) || (c == ']' && top == 2)) {
            rs->gdepth--;
            emit(p, c == '}' ? "}" : "]");
            rs->q = q + 1;
            return rs->gdepth ? 1 : 2;
        }
        return -1;
    }
    }
    return -1;
}

static int read_gemma(P *p)
{
    lp__rdstate_t *rs = &p->rs;
    for (;;) {
        switch (rs->st) {
        case G_CALL: {
            int r = lp__at(p, rs->q, "call:");
            if (r == 0) return lp__rd_more(p);
            if (r < 0) return LP__R_FAIL;
            rs->a = rs->q + 5;
            rs->st = G_NAME;
            break;
        }
        case G_NAME: {
            size_t k = rs->a;
            while (k < p->len && key_char(p->buf[k])) k++;
            if (k - rs->a > 256) return LP__R_FAIL;
            if (k == p->len) return lp__rd_more(p);
            if (p->buf[k] != '{' || k == rs->a) return LP__R_FAIL;
            rs->call = lp__call_begin(p, p->buf + rs->a, k - rs->a);
            if (rs->call < 0) return LP__R_FAIL;
            rs->q = k;
            rs->gst = GS_VALUE;
            rs->st = G_ARGS;
            break;
        }
        case G_ARGS: {
            int r;
            while ((r = args_step(p)) == 1)
                ;
            if (r == 0) return lp__rd_more(p);
            if (r < 0) return broken(p, rs->q);
            lp__call_end(p, rs->call, true);
            rs->call = -1;
            rs->st = G_END;
            break;
        }
        case G_END: {
            size_t q = lp__skip_ws(p, rs->q);
            int r = lp__at(p, q, "<tool_call|>");
            if (r == 0) return LP__R_MORE;
            return done_at(p, r == 1 ? q + 12 : rs->q);
        }
        default: return LP__R_FAIL;
        }
    }
}

const lp__fmt_ops_t lp__ops_gemma4 = {(const lp__marker_t[]){{"<|tool_call>", read_gemma}}, 1, NULL, false};
