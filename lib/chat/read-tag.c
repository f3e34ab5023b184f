/* read-tag.c - calls inside <tool_call>...</tool_call>, whichever body the
 * model writes there:
 *   {"name": "f", "arguments": {...}}                Hermes, Qwen 2.5/3, SmolLM3
 *   <function=f><parameter=k>\nv\n</parameter></function>   Qwen3-Coder, Qwen3.5
 *   f\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>        GLM 4.5/4.6
 * The formats share the tag, and models drift between the JSON and the XML
 * body, so each format takes both; a bare name (GLM's body) is taken only
 * in the GLM format, where "<tool_call>word</tool_call>" is a call. */
#include "parse-internal.h"

#include <string.h>

enum { T_BODY, T_JSON, T_CLOSE, T_XNAME, T_XP, T_XPNAME, T_XPNL, T_XPVAL, T_GNAME, T_GP, T_GKEY, T_GV0, T_GVAL };

#define MAX_NAME 256

static int done_at(P *p, size_t q)
{
    p->pos = q;
    return LP__R_DONE;
}

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.' || (unsigned char)c >= 0x80;
}

/* [a, b) without white space at either end */
static void trim(const P *p, size_t *a, size_t *b)
{
    while (*a < *b && lp__is_ws(p->buf[*a])) (*a)++;
    while (*b > *a && lp__is_ws(p->buf[*b - 1])) (*b)--;
}

/* the open call's object ends here; the reader goes on after `q` */
static void end_call(P *p)
{
    lp__rdstate_t *rs = &p->rs;
    if (rs->in_param) lp__param_end(p);
    lp__call_args(p, rs->call, "}", 1);
    rs->close_obj = false;
    lp__call_end(p, rs->call, true);
    rs->call = -1;
}

static int open_call(P *p, size_t a, size_t b)
{
    lp__rdstate_t *rs = &p->rs;
    rs->call = lp__call_begin(p, p->buf + a, b - a);
    if (rs->call < 0) return -1;
    lp__call_args(p, rs->call, "{", 1);
    rs->close_obj = true;
    rs->n_params = 0;
    return 0;
}

/* a name or key ending at `stop`: its end, or the input's end when it is not
 * there yet; SIZE_MAX when something else comes first or it is too long */
static size_t scan_until(const P *p, size_t a, char stop)
{
    size_t k = a;
    while (k < p->len && p->buf[k] != stop) {
        if (p->buf[k] == '\n' || p->buf[k] == '<' || k - a > MAX_NAME) return SIZE_MAX;
        k++;
    }
    return k;
}

int lp__read_tagcall(P *p)
{
    lp__rdstate_t *rs = &p->rs;
    for (;;) {
        switch (rs->st) {
        case T_BODY: {
            size_t q = lp__skip_ws(p, rs->q);
            if (q == p->len) return lp__rd_more(p);
            char c = p->buf[q];
            if (c == '{') {
                rs->q = q;
                rs->st = T_JSON;
            } else if (c == '<') {
                int r = lp__at(p, q, "<function=");
                if (r == 0) return lp__rd_more(p);
                if (r < 0) return LP__R_FAIL;
                rs->q = rs->a = q + 10;
                rs->st = T_XNAME;
            } else if (name_char(c) && p->fi->format == LP_CHAT_FORMAT_GLM45) {
                rs->q = rs->a = q;
                rs->st = T_GNAME;
            } else
                return LP__R_FAIL;
            break;
        }
        case T_JSON: {
            int r = lp__wrap_run(p, &rs->w, &rs->q);
            if (r == LP__R_MORE) return lp__rd_more(p);
            if (r == LP__R_FAIL) return LP__R_FAIL;
            rs->st = T_CLOSE;
            break;
        }
        case T_CLOSE: {
            size_t q = lp__skip_ws(p, rs->q);
            int r = lp__at(p, q, "</tool_call>");
            if (r == 0) return LP__R_MORE;
            return done_at(p, r == 1 ? q + 12 : rs->q);
        }
        /* ---- <function=NAME> <parameter=KEY> VALUE </parameter> </function> */
        case T_XNAME: {
            size_t k = scan_until(p, rs->a, '>');
            if (k == SIZE_MAX) return LP__R_FAIL;
            if (k == p->len) return lp__rd_more(p);
            size_t a = rs->a, b = k;
            trim(p, &a, &b);
            if (a == b || open_call(p, a, b)) return LP__R_FAIL;
            rs->q = k + 1;
            rs->st = T_XP;
            break;
        }
        case T_XP: {
            static const char *const m[] = {"<parameter=", "</function>", "</tool_call>"};
            size_t q = lp__skip_ws(p, rs->q);
            rs->q = q;
            int j = -1;
            for (int k = 0; k < 3 && j < 0; k++) {
                int r = lp__at(p, q, m[k]);
                if (r == 0 || q == p->len) return lp__rd_more(p);
                if (r == 1) j = k;
            }
            if (j == 0) {
                rs->q = rs->a = q + 11;
                rs->st = T_XPNAME;
                break;
            }
            end_call(p);
            if (j == 1) {
                rs->q = q + 11;
                rs->st = T_CLOSE;
                break;
            }
            return done_at(p, j == 2 ? q + 12 : q);
        }
        case T_XPNAME: {
            size_t k = scan_until(p, rs->a, '>');
            if (k == SIZE_MAX) {
                end_call(p);
                return done_at(p, rs->a - 11);
            }
            if (k == p->len) return lp__rd_more(p);
            size_t a = rs->a, b = k;
            trim(p, &a, &b);
            lp__param_begin(p, p->buf + a, b - a);
            rs->q = k + 1;
            rs->st = T_XPNL;
            break;
        }
        case T_XPNL:
            if (rs->q == p->len) return lp__rd_more(p);
            if (p->buf[rs->q] == '\n') rs->q++;
            rs->st = T_XPVAL;
            break;
        case T_XPVAL: {
            /* the value's last newline belongs to the closing tag */
            static const char *const m[] = {"\n</parameter>", "</parameter>", "\n<parameter=", "<parameter=",
                                            "\n</function>", "</function>", "\n</tool_call>", "</tool_call>"};
            size_t at = 0, safe = 0;
            int j = lp__find(p, rs->q, m, 8, &at, &safe);
            size_t end = j < 0 ? safe : at;
            if (end > rs->q) lp__param_text(p, p->buf + rs->q, end - rs->q);
            rs->q = end;
            if (j < 0) return lp__rd_more(p);
            lp__param_end(p);
            if (j < 2) rs->q = at + strlen(m[j]);
            else if (m[j][0] == '\n') rs->q = at + 1;
            rs->st = T_XP;
            break;
        }
        /* ---- NAME <arg_key>KEY</arg_key> <arg_value>VALUE</arg_value> */
        case T_GNAME: {
            static const char *const m[] = {"\n", "<arg_key>", "</tool_call>"};
            size_t at = 0, safe = 0;
            int j = lp__find(p, rs->a, m, 3, &at, &safe);
            size_t end = j < 0 ? safe : at;
            for (size_t k = rs->a; k < end; k++)
                if (!name_char(p->buf[k]) && p->buf[k] != ' ') return LP__R_FAIL;
            if (end - rs->a > MAX_NAME) return LP__R_FAIL;
            if (j < 0) return lp__rd_more(p);
            size_t a = rs->a, b = at;
            trim(p, &a, &b);
            if (a == b || open_call(p, a, b)) return LP__R_FAIL;
            rs->q = at;
            rs->st = T_GP;
            break;
        }
        case T_GP: {
            size_t q = lp__skip_ws(p, rs->q);
            rs->q = q;
            int r1 = lp__at(p, q, "<arg_key>"), r2 = lp__at(p, q, "</tool_call>");
            if (r1 == 0 || r2 == 0 || q == p->len) return lp__rd_more(p);
            if (r1 == 1) {
                rs->q = rs->a = q + 9;
                rs->st = T_GKEY;
                break;
            }
            end_call(p);
            return done_at(p, r2 == 1 ? q + 12 : q);
        }
        case T_GKEY: {
            const char *m = "</arg_key>";
            size_t at = 0, safe = 0;
            int j = lp__find(p, rs->a, &m, 1, &at, &safe);
            if ((j < 0 ? safe : at) - rs->a > MAX_NAME) {
                end_call(p);
                return done_at(p, rs->a - 9);
            }
            if (j < 0) return lp__rd_more(p);
            size_t a = rs->a, b = at;
            trim(p, &a, &b);
            lp__param_begin(p, p->buf + a, b - a);
            rs->q = at + 10;
            rs->st = T_GV0;
            break;
        }
        case T_GV0: {
            size_t q = lp__skip_ws(p, rs->q);
            int r = lp__at(p, q, "<arg_value>");
            if (r == 0 || q == p->len) {
                rs->q = q;
                return lp__rd_more(p);
            }
            if (r == 1) {
                rs->q = q + 11;
                rs->st = T_GVAL;
            } else {
                lp__param_end(p);
                rs->q = q;
                rs->st = T_GP;
            }
            break;
        }
        case T_GVAL: {
            static const char *const m[] = {"</arg_value>", "</tool_call>"};
            size_t at = 0, safe = 0;
            int j = lp__find(p, rs->q, m, 2, &at, &safe);
            size_t end = j < 0 ? safe : at;
            if (end > rs->q) lp__param_text(p, p->buf + rs->q, end - rs->q);
            rs->q = end;
            if (j < 0) return lp__rd_more(p);
            lp__param_end(p);
            rs->q = j == 0 ? at + 12 : at;
            rs->st = T_GP;
            break;
        }
        default: return LP__R_FAIL;
        }
    }
}
