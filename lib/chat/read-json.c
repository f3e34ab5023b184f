/* read-json.c - formats whose arguments are the model's JSON:
 *   Llama 3.x      {"name": "f", "parameters": {...}} as the answer; <|python_tag|>
 *   Mistral        [TOOL_CALLS][{"name", "arguments", "id"}, ...]; [TOOL_CALLS]f[ARGS]{...}
 *   FireFunction   functools[{"name", "arguments"}, ...]
 *   Granite        <|tool_call|>[{"name", "arguments"}, ...]
 *   Command R7B    <|START_ACTION|>[{"tool_call_id", "tool_name", "parameters"}]<|END_ACTION|>
 *   Functionary    >>>f\n{...}  (>>>all\n is text, >>>python\n code)
 *   DeepSeek R1    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{...}\n```<｜tool▁call▁end｜>
 *                  (and V3.1's <｜tool▁call▁begin｜>f<｜tool▁sep｜>{...})
 *   Kimi K2        <|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{...}<|tool_call_end|> */
#include "parse-internal.h"

#include <stdlib.h>
#include <string.h>

static int done_at(P *p, size_t q)
{
    p->pos = q;
    return LP__R_DONE;
}

static bool ident_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.';
}

static void trim(const P *p, size_t *a, size_t *b)
{
    while (*a < *b && lp__is_ws(p->buf[*a])) (*a)++;
    while (*b > *a && lp__is_ws(p->buf[*b - 1])) (*b)--;
}

/* the first of m at or after `from`, within `bound` bytes: its index and
 * *at; -1 and *more when not there yet (*at: where one may still begin); -2
 * when past the bound */
static int find_within(const P *p, size_t from, const char *const *m, size_t n, size_t bound, size_t *at, bool *more)
{
    size_t safe = 0;
    int j = lp__find(p, from, m, n, at, &safe);
    if ((j < 0 ? safe : *at) - from > bound) return -2;
    *more = j < 0;
    if (j < 0) *at = safe;
    return j;
}

/* ---- arrays of call objects --------------------------------------------------- */

enum { A_OPEN = 100, A_ELEM0, A_WRAP, A_AFTER, A_ELEM, A_END };

static int array_run(P *p, const char *end_marker)
{
    lp__rdstate_t *rs = &p->rs;
    for (;;) {
        size_t q = lp__skip_ws(p, rs->q);
        switch (rs->st) {
        case A_OPEN:
            if (q == p->len) return lp__rd_more(p);
            if (p->buf[q] != '[') return LP__R_FAIL;
            rs->q = q + 1;
            rs->st = A_ELEM0;
            break;
        case A_ELEM0:
        case A_ELEM:
            if (q == p->len) return lp__rd_more(p);
            if (p->buf[q] == '{') {
                lp__wrap_reset(&rs->w);
                rs->q = rs->a = q;
                rs->st = A_WRAP;
            } else if (p->buf[q] == ']' && rs->st == A_ELEM0) {
                rs->q = q + 1;
                rs->st = A_END;
            } else
                return rs->n ? done_at(p, q) : LP__R_FAIL;
            break;
        case A_WRAP: {
            int r = lp__wrap_run(p, &rs->w, &rs->q);
            if (r == LP__R_MORE) return lp__rd_more(p);
            if (r == LP__R_FAIL) return rs->n ? done_at(p, rs->a) : LP__R_FAIL;
            rs->n++;
            rs->st = A_AFTER;
            break;
        }
        case A_AFTER:
            if (q == p->len) return lp__rd_more(p);
            if (p->buf[q] == ',') {
                rs->q = q + 1;
                rs->st = A_ELEM;
            } else if (p->buf[q] == ']') {
                rs->q = q + 1;
                rs->st = A_END;
            } else
                return done_at(p, q);
            break;
        case A_END: {
            if (!end_marker) return done_at(p, rs->q);
            int r = lp__at(p, q, end_marker);
            if (r == 0) return LP__R_MORE;
            return done_at(p, r == 1 ? q + strlen(end_marker) : rs->q);
        }
        default: return LP__R_FAIL;
        }
    }
}

static int read_firefunction(P *p)
{
    if (p->rs.st == 0) p->rs.st = A_ELEM0; /* the marker holds the '[' */
    return array_run(p, NULL);
}

static int read_granite(P *p)
{
    if (p->rs.st == 0) p->rs.st = A_OPEN;
    return array_run(p, NULL);
}

static int read_command_r7b(P *p)
{
    if (p->rs.st == 0) p->rs.st = A_OPEN;
    return array_run(p, "<|END_ACTION|>");
}

/* ---- Mistral -------------------------------------------------------------------- */

enum { MI_START, MI_NAME, MI_ID, MI_ARGS };

static int read_mistral(P *p)
{
    lp__rdstate_t *rs = &p->rs;
    if (rs->st >= A_OPEN) return array_run(p, NULL);
    for (;;) {
        switch (rs->st) {
        case MI_START: {
            size_t q = lp__skip_ws(p, rs->q);
            if (q == p->len) return lp__rd_more(p);
            if (p->buf[q] == '[') {
                rs->q = q + 1;
                rs->st = A_ELEM0;
                return array_run(p, NULL);
            }
            if (!ident_char(p->buf[q])) return LP__R_FAIL;
            rs->q = rs->a = q;
            rs->st = MI_NAME;
            break;
        }
        case MI_NAME: {
            static const char *const m[] = {"[ARGS]", "[CALL_ID]"};
            size_t at = 0;
            bool more = false;
            int j = find_within(p, rs->a, m, 2, 256, &at, &more);
            if (j == -2) return LP__R_FAIL;
            for (size_t k = rs->a; k < at; k++)
                if (!ident_char(p->buf[k])) return LP__R_FAIL;
            if (more) return lp__rd_more(p);
            rs->call = lp__call_begin(p, p->buf + rs->a, at - rs->a);
            if (rs->call < 0) return LP__R_FAIL;
            rs->q = at + strlen(m[j]);
            rs->st = j == 0 ? MI_ARGS : MI_ID;
            break;
        }
        case MI_ID: {
            const char *m = "[ARGS]";
            size_t at = 0;
            bool more = false;
            int j = find_within(p, rs->q, &m, 1, 64, &at, &more);
            if (j == -2) {
                lp__call_broken(p, rs->call);
                lp__call_end(p, rs->call, true);
                rs->call = -1;
                return done_at(p, rs->q);
            }
            if (more) return lp__rd_more(p);
            rs->q = at + 6;
            rs->st = MI_ARGS;
            break;
        }
        case MI_ARGS:
            if (lp__jargs(p) == LP__R_MORE) return lp__rd_more(p);
            lp__call_end(p, rs->call, true);
            rs->call = -1;
            return done_at(p, rs->q);
        default: return LP__R_FAIL;
        }
    }
}

/* ---- Llama 3.x ------------------------------------------------------------------- */

enum { L_OBJ, L_SEP };

/* {"name": ..., "parameters": ...} as the whole answer, one or more (";") */
static int read_llama_start(P *p)
{
    lp__rdstate_t *rs = &p->rs;
    for (;;) {
        switch (rs->st) {
        case L_OBJ: {
            int r = lp__wrap_run(p, &rs->w, &rs->q);
            if (r == LP__R_MORE) return lp__rd_more(p);
            if (r == LP__R_FAIL) return rs->n ? done_at(p, rs->a) : LP__R_FAIL;
            rs->n++;
            rs->st = L_SEP;
            break;
        }
        case L_SEP: {
            size_t q = lp__skip_ws(p, rs->q);
            if (q < p->len && p->buf[q] == ';') q = lp__skip_ws(p, q + 1);
            if (q == p->len) return p->final ? done_at(p, q) : LP__R_MORE;
            if (p->buf[q] != '{') return done_at(p, q);
            lp__wrap_reset(&rs->w);
            rs->q = rs->a = q;
            rs->st = L_OBJ;
            break;
        }
        default: return LP__R_FAIL;
        }
    }
}

/* Python keyword arguments (k="v", n=1, b=True) as a JSON object; -1 when
 * they are not that */
static int pykwargs_json(const char *s, size_t n, lp_json_buf_t *b)
{
    size_t i = 0;
    int count = 0;
    lp_json_buf_puts(b, "{");
    for (;;) {
        while (i < n && lp__is_ws(s[i])) i++;
        if (i == n) break;
        if (count) {
            if (s[i] != ',') return -1;
            i++;
            while (i < n && lp__is_ws(s[i])) i++;
        }
        size_t k0 = i;
        while (i < n && (ident_char(s[i]) && s[i] != '.' && s[i] != '-')) i++;
        if (i == k0) return -1;
        size_t k1 = i;
        while (i < n && lp__is_ws(s[i])) i++;
        if (i == n || s[i] != '=') return -1;
        i++;
        while (i < n && lp__is_ws(s[i])) i++;
        if (i == n) return -1;
        if (count++) lp_json_buf_puts(b, ", ");
        lp_json_buf_str(b, s + k0, k1 - k0);
        lp_json_buf_puts(b, ": ");
        if (s[i] == '"' || s[i] == '\'') {
            char qc = s[i++];
            lp_json_buf_t v = {0};
            while (i < n && s[i] != qc) {
                char c = s[i++];
                if (c == '\\' && i < n) {
                    c = s[i++];
                    c = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
                }
                lp_json_buf_put(&v, &c, 1);
            }
            if (i == n) {
                free(v.p);
                return -1;
            }
            i++;
            lp_json_buf_str(b, v.p ? v.p : "", v.n);
            free(v.p);
        } else {
            size_t v0 = i;
            while (i < n && s[i] != ',' && !lp__is_ws(s[i])) i++;
            const char *v = s + v0;
            size_t vn = i - v0;
            lp_json_doc_t *doc = NULL;
            if (vn == 4 && !memcmp(v, "True", 4)) lp_json_buf_puts(b, "true");
            else if (vn == 5 && !memcmp(v, "False", 5)) lp_json_buf_puts(b, "false");
            else if (vn == 4 && !memcmp(v, "None", 4)) lp_json_buf_puts(b, "null");
            else if (!lp_json_parse(v, vn, &doc) && lp_json_root(doc)->type == LP_JSON_NUMBER)
                lp_json_buf_put(b, v, vn);
            else
                lp_json_buf_str(b, v, vn);
            lp_json_doc_destroy(&doc);
        }
    }
    lp_json_buf_puts(b, "}");
    return 0;
}

enum { PT_START, PT_JSON, PT_BUILTIN, PT_CODE };

/* after <|python_tag|>: a call object, NAME.call(k=v, ...), or Python code */
static int read_python_tag(P *p)
{
    lp__rdstate_t *rs = &p->rs;
    for (;;) {
        switch (rs->st) {
        case PT_START: {
            size_t q = lp__skip_ws(p, rs->q);
            if (q == p->len) return lp__rd_more(p);
            if (p->buf[q] == '{') {
                rs->q = q;
                rs->st = PT_JSON;
                break;
            }
            size_t k = q;
            while (k < p->len && ident_char(p->buf[k]) && p->buf[k] != '.') k++;
            if (k > q) {
                int r = lp__at(p, k, ".call(");
                if (r == 0 || (k == p->len && !p->final)) return lp__rd_more(p);
                if (r == 1) {
                    rs->a = q;
                    rs->q = k + 6;
                    rs->st = PT_BUILTIN;
                    break;
                }
            }
            rs->call = lp__call_begin(p, "python", 6);
            if (rs->call < 0) return LP__R_FAIL;
            lp__call_args(p, rs->call, "{", 1);
            rs->close_obj = true;
            lp__param_begin_kind(p, "code", 4, LP__P_STRING);
            rs->q = q;
            rs->st = PT_CODE;
            break;
        }
        case PT_JSON: {
            int r = lp__wrap_run(p, &rs->w, &rs->q);
            if (r == LP__R_MORE) return lp__rd_more(p);
            if (r == LP__R_FAIL) return LP__R_FAIL;
            return done_at(p, rs->q);
        }
        case PT_BUILTIN: {
            /* the closing parenthesis outside quotes */
            size_t k = rs->q;
            char quote = 0;
            for (; k < p->len; k++) {
                char c = p->buf[k];
                if (quote) {
                    if (c == '\\') k++;
                    else if (c == quote) quote = 0;
                } else if (c == '"' || c == '\'')
                    quote = c;
                else if (c == ')')
                    break;
            }
            if (k >= p->len) return k - rs->q > 65536 ? LP__R_FAIL : lp__rd_more(p);
            lp_json_buf_t b = {0};
            int bad = pykwargs_json(p->buf + rs->q, k - rs->q, &b);
            if (!bad) {
                size_t name_end = rs->a;
                while (p->buf[name_end] != '.') name_end++;
                rs->call = lp__call_begin(p, p->buf + rs->a, name_end - rs->a);
                lp__call_args(p, rs->call, b.p, b.n);
                lp__call_end(p, rs->call, true);
                rs->call = -1;
            }
            free(b.p);
            return bad ? LP__R_FAIL : done_at(p, k + 1);
        }
        case PT_CODE: {
            static const char *const m[] = {"<|eom_id|>", "<|eot_id|>"};
            size_t at = 0, safe = 0;
            int j = lp__find(p, rs->q, m, 2, &at, &safe);
            size_t end = j < 0 ? safe : at;
            /* the code's trailing white space waits: it may end the code */
            size_t keep = end;
            while (keep > rs->q && lp__is_ws(p->buf[keep - 1])) keep--;
            if (keep > rs->q) lp__param_text(p, p->buf + rs->q, keep - rs->q);
            rs->q = keep;
            if (j < 0 && !p->final) return LP__R_MORE;
            lp__param_end(p);
            lp__call_args(p, rs->call, "}", 1);
            rs->close_obj = false;
            lp__call_end(p, rs->call, true);
            rs->call = -1;
            return done_at(p, j < 0 ? p->len : at + strlen(m[j]));
        }
        default: return LP__R_FAIL;
        }
    }
}

/* ---- Functionary v3.2 --------------------------------------------------------------- */

enum { F_NAME, F_ARGS0, F_ARGS, F_CODE };

static int read_functionary(P *p)
{
    lp__rdstate_t *rs = &p->rs;
    for (;;) {
        switch (rs->st) {
        case F_NAME: {
            if (!rs->a) rs->a = rs->q;
            size_t k = rs->a;
            while (k < p->len && p->buf[k] != '\n') {
                if (!ident_char(p->buf[k]) || k - rs->a > 128) return LP__R_FAIL;
                k++;
            }
            if (k == p->len) return lp__rd_more(p);
            if (k == rs->a) return LP__R_FAIL;
            if (k - rs->a == 3 && !memcmp(p->buf + rs->a, "all", 3)) return done_at(p, k + 1);
            rs->q = k + 1;
            rs->st = F_ARGS0;
            break;
        }
        case F_ARGS0: {
            size_t q = lp__skip_ws(p, rs->q);
            if (q == p->len) return lp__rd_more(p);
            size_t name_end = rs->a;
            while (p->buf[name_end] != '\n') name_end++;
            bool python = name_end - rs->a == 6 && !memcmp(p->buf + rs->a, "python", 6);
            if (p->buf[q] != '{' && !python) return LP__R_FAIL;
            rs->call = lp__call_begin(p, p->buf + rs->a, name_end - rs->a);
            if (rs->call < 0) return LP__R_FAIL;
            rs->q = q;
            if (p->buf[q] == '{') {
                rs->st = F_ARGS;
                break;
            }
            lp__call_args(p, rs->call, "{", 1);
            rs->close_obj = true;
            lp__param_begin_kind(p, "code", 4, LP__P_STRING);
            rs->st = F_CODE;
            break;
        }
        case F_ARGS:
            if (lp__jargs(p) == LP__R_MORE) return lp__rd_more(p);
            lp__call_end(p, rs->call, true);
            rs->call = -1;
            return done_at(p, rs->q);
        case F_CODE: {
            const char *m = ">>>";
            size_t at = 0, safe = 0;
            int j = lp__find(p, rs->q, &m, 1, &at, &safe);
            size_t end = j < 0 ? safe : at, keep = end;
            while (keep > rs->q && lp__is_ws(p->buf[keep - 1])) keep--;
            if (keep > rs->q) lp__param_text(p, p->buf + rs->q, keep - rs->q);
            rs->q = keep;
            if (j < 0 && !p->final) return LP__R_MORE;
            lp__param_end(p);
            lp__call_args(p, rs->call, "}", 1);
            rs->close_obj = false;
            lp__call_end(p, rs->call, true);
            rs->call = -1;
            return done_at(p, j < 0 ? p->len : at);
        }
        default: return LP__R_FAIL;
        }
    }
}

/* the output begins after the prompt's ">>>" */
static int read_functionary_start(P *p)
{
    if (!p->prompt_functionary) return LP__R_FAIL;
    return read_functionary(p);
}

/* ---- sections of delimited calls (DeepSeek, Kimi) ------------------------------------ */

/* At a section's next call: 1 when call_begin is there (rs->q and rs->a
 * after it), else what the reader returns: more, done at sec_end or at
 * anything else once a call was read, fail before. */
static int sec_next(P *p, const char *call_begin, const char *sec_end, int *ret)
{
    lp__rdstate_t *rs = &p->rs;
    size_t q = lp__skip_ws(p, rs->q);
    int r1 = lp__at(p, q, call_begin), r2 = lp__at(p, q, sec_end);
    if (r1 == 0 || r2 == 0 || (q == p->len && !p->final)) *ret = lp__rd_more(p);
    else if (r1 == 1) {
        rs->q = rs->a = q + strlen(call_begin);
        return 1;
    } else if (r2 == 1)
        *ret = done_at(p, q + strlen(sec_end));
    else
        *ret = rs->n ? done_at(p, q) : LP__R_FAIL;
    return 0;
}

/* After a call's arguments (and DeepSeek's closing fence): 1 when call_end
 * closed it (rs->q after), else what the reader returns. */
static int sec_after(P *p, const char *call_end, bool fence, int *ret)
{
    lp__rdstate_t *rs = &p->rs;
    size_t q = lp__skip_ws(p, rs->q);
    if (fence) {
        int r = lp__at(p, q, "```");
        if (r == 0) {
            *ret = lp__rd_more(p);
            return 0;
        }
        if (r == 1) q = lp__skip_ws(p, q + 3);
    }
    int r = lp__at(p, q, call_end);
    if (r == 0 || (q == p->len && !p->final)) {
        *ret = lp__rd_more(p);
        return 0;
    }
    lp__call_end(p, rs->call, true);
    rs->call = -1;
    rs->n++;
    if (r < 0) {
        *ret = done_at(p, q);
        return 0;
    }
    rs->q = q + strlen(call_end);
    return 1;
}

/* ---- DeepSeek R1 / V3.1 -------------------------------------------------------------- */

#define DS_CALLS_BEGIN "<｜tool▁calls▁begin｜>"
#define DS_CALLS_END "<｜tool▁calls▁end｜>"
#define DS_CALL_BEGIN "<｜tool▁call▁begin｜>"
#define DS_CALL_END "<｜tool▁call▁end｜>"
#define DS_SEP "<｜tool▁sep｜>"

enum { D_SEC, D_TYPE, D_NAME, D_FENCE, D_ARGS, D_AFTER, D_NEXT };

static int ds_run(P *p)
{
    lp__rdstate_t *rs = &p->rs;
    for (;;) {
        switch (rs->st) {
        case D_SEC:
        case D_NEXT: {
            int ret;
            if (!sec_next(p, DS_CALL_BEGIN, DS_CALLS_END, &ret)) return ret;
            rs->st = D_TYPE;
            break;
        }
        case D_TYPE: {
            const char *m = DS_SEP;
            size_t at = 0;
            bool more = false;
            int j = find_within(p, rs->a, &m, 1, 256, &at, &more);
            if (j == -2) return rs->n ? done_at(p, rs->a) : LP__R_FAIL;
            if (more) return lp__rd_more(p);
            size_t a = rs->a, b = at;
            trim(p, &a, &b);
            rs->q = at + strlen(DS_SEP);
            if (b - a == 8 && !memcmp(p->buf + a, "function", 8)) {
                rs->a = rs->q;
                rs->st = D_NAME;
                break;
            }
            if (a == b) return rs->n ? done_at(p, rs->q) : LP__R_FAIL;
            rs->call = lp__call_begin(p, p->buf + a, b - a);
            if (rs->call < 0) return LP__R_FAIL;
            rs->st = D_ARGS;
            break;
        }
        case D_NAME: {
            static const char *const m[] = {"\n", "```"};
            size_t at = 0;
            bool more = false;
            int j = find_within(p, rs->a, m, 2, 256, &at, &more);
            if (j == -2) return rs->n ? done_at(p, rs->a) : LP__R_FAIL;
            if (more) return lp__rd_more(p);
            size_t a = rs->a, b = at;
            trim(p, &a, &b);
            if (a == b) return rs->n ? done_at(p, rs->a) : LP__R_FAIL;
            rs->call = lp__call_begin(p, p->buf + a, b - a);
            if (rs->call < 0) return LP__R_FAIL;
            rs->q = at;
            rs->st = D_FENCE;
            break;
        }
        case D_FENCE: {
            size_t q = lp__skip_ws(p, rs->q);
            int r = lp__at(p, q, "```json");
            if (r == 0 || q == p->len) return lp__rd_more(p);
            if (r == 1) q += 7;
            else if (lp__at(p, q, "```") == 1) q += 3;
            rs->q = q;
            rs->st = D_ARGS;
            break;
        }
        case D_ARGS:
            if (lp__jargs(p) == LP__R_MORE) return lp__rd_more(p);
            rs->st = D_AFTER;
            break;
        case D_AFTER: {
            int ret;
            if (!sec_after(p, DS_CALL_END, true, &ret)) return ret;
            rs->st = D_NEXT;
            break;
        }
        default: return LP__R_FAIL;
        }
    }
}

static int read_ds_calls(P *p) { return ds_run(p); }

static int read_ds_call(P *p)
{
    if (p->rs.st == D_SEC) {
        p->rs.a = p->rs.q;
        p->rs.st = D_TYPE;
    }
    return ds_run(p);
}

/* ---- Kimi K2 ---------------------------------------------------------------------------- */

#define K_CALL_BEGIN "<|tool_call_begin|>"
#define K_ARG_BEGIN "<|tool_call_argument_begin|>"
#define K_CALL_END "<|tool_call_end|>"
#define K_SEC_END "<|tool_calls_section_end|>"

enum { K_NEXT, K_HEAD, K_ARGS, K_AFTER };

static int read_kimi(P *p)
{
    lp__rdstate_t *rs = &p->rs;
    for (;;) {
        switch (rs->st) {
        case K_NEXT: {
            int ret;
            if (!sec_next(p, K_CALL_BEGIN, K_SEC_END, &ret)) return ret;
            rs->st = K_HEAD;
            break;
        }
        case K_HEAD: {
            const char *m = K_ARG_BEGIN;
            size_t at = 0;
            bool more = false;
            int j = find_within(p, rs->a, &m, 1, 512, &at, &more);
            if (j == -2) return rs->n ? done_at(p, rs->a) : LP__R_FAIL;
            if (more) return lp__rd_more(p);
            /* functions.NAME:INDEX */
            size_t a = rs->a, b = at;
            trim(p, &a, &b);
            if (b - a > 10 && !memcmp(p->buf + a, "functions.", 10)) a += 10;
            size_t c = b;
            while (c > a && p->buf[c - 1] >= '0' && p->buf[c - 1] <= '9') c--;
            if (c > a && c < b && p->buf[c - 1] == ':') b = c - 1;
            if (a == b) return rs->n ? done_at(p, rs->a) : LP__R_FAIL;
            rs->call = lp__call_begin(p, p->buf + a, b - a);
            if (rs->call < 0) return LP__R_FAIL;
            rs->q = at + strlen(K_ARG_BEGIN);
            rs->st = K_ARGS;
            break;
        }
        case K_ARGS:
            if (lp__jargs(p) == LP__R_MORE) return lp__rd_more(p);
            rs->st = K_AFTER;
            break;
        case K_AFTER: {
            int ret;
            if (!sec_after(p, K_CALL_END, false, &ret)) return ret;
            rs->st = K_NEXT;
            break;
        }
        default: return LP__R_FAIL;
        }
    }
}

/* ---- the formats' markers ---------------------------------------------------------------- */

#define OPS(name, start, ...)                                                                       \
    static const lp__marker_t name##_markers[] = {__VA_ARGS__};                                    \
    const lp__fmt_ops_t lp__ops_##name = {name##_markers, sizeof(name##_markers) / sizeof(lp__marker_t), start, false};

OPS(hermes, NULL, {"<tool_call>", lp__read_tagcall})
OPS(llama3, read_llama_start, {"<|python_tag|>", read_python_tag})
OPS(mistral, NULL, {"[TOOL_CALLS]", read_mistral})
OPS(firefunction, NULL, {"functools[", read_firefunction})
OPS(granite, NULL, {"<|tool_call|>", read_granite}, {"<response>", NULL}, {"</response>", NULL})
OPS(command_r7b, NULL, {"<|START_ACTION|>", read_command_r7b}, {"<|START_RESPONSE|>", NULL},
    {"<|END_RESPONSE|>", NULL})
OPS(functionary, read_functionary_start, {">>>", read_functionary})
OPS(deepseek, NULL, {DS_CALLS_BEGIN, read_ds_calls}, {DS_CALL_BEGIN, read_ds_call})
OPS(kimi, NULL, {"<|tool_calls_section_begin|>", read_kimi})
