/* grammar.c - the grammar that forces tool calls in a format (chat-grammar.h):
 * the format table's literals around each function's arguments, as a
 * structure and as GBNF. */
#include "chat-grammar.h"
#include "parse-internal.h"

#include "error.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- GBNF text ---------------------------------------------------------------- */

/* s as a GBNF string literal; "%i" (when idx) becomes digits, "%c" a call id */
static void put_lit(lp_json_buf_t *b, const char *s, bool idx)
{
    if (!*s) {
        lp_json_buf_puts(b, "\"\"");
        return;
    }
    bool open = false;
    for (; *s; s++) {
        if (idx && s[0] == '%' && (s[1] == 'i' || s[1] == 'c')) {
            if (open) lp_json_buf_puts(b, "\" ");
            lp_json_buf_puts(b, s[1] == 'i' ? "[0-9]+ " : "[a-zA-Z0-9]{9} ");
            open = false;
            s++;
            continue;
        }
        if (!open) lp_json_buf_puts(b, "\"");
        open = true;
        char c = *s;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', c};
            lp_json_buf_put(b, e, 2);
        } else if (c == '\n') lp_json_buf_puts(b, "\\n");
        else if (c == '\r') lp_json_buf_puts(b, "\\r");
        else if (c == '\t') lp_json_buf_puts(b, "\\t");
        else lp_json_buf_put(b, &c, 1);
    }
    if (open) lp_json_buf_puts(b, "\"");
}

/* one code point inside a character class */
static void put_class_cp(lp_json_buf_t *b, uint32_t cp)
{
    char tmp[8];
    if (cp == '\n') lp_json_buf_puts(b, "\\n");
    else if (cp == '\r') lp_json_buf_puts(b, "\\r");
    else if (cp == '\t') lp_json_buf_puts(b, "\\t");
    else if (cp == ']' || cp == '[' || cp == '\\' || cp == '^' || cp == '-') {
        tmp[0] = '\\';
        tmp[1] = (char)cp;
        lp_json_buf_put(b, tmp, 2);
    } else
        lp_json_buf_put(b, tmp, lp_utf8_encode(cp, tmp));
}

/* the code points of s (valid UTF-8: the table's literals); their count */
static size_t code_points(const char *s, uint32_t *out, size_t cap)
{
    size_t n = 0;
    const unsigned char *p = (const unsigned char *)s, *e = p + strlen(s);
    while (p < e && n < cap) {
        size_t k = lp_utf8_seq_len(p, e);
        if (!k) k = 1;
        uint32_t cp = k == 1 ? p[0] : k == 2 ? (p[0] & 0x1Fu) : k == 3 ? (p[0] & 0x0Fu) : (p[0] & 0x07u);
        for (size_t i = 1; i < k; i++) cp = (cp << 6) | (p[i] & 0x3Fu);
        out[n++] = cp;
        p += k;
    }
    return n;
}

static void put_cp_lit(lp_json_buf_t *b, uint32_t cp)
{
    char one[8];
    one[lp_utf8_encode(cp, one)] = 0;
    put_lit(b, one, false);
}

/* [^ a b ] */
static void put_not2(lp_json_buf_t *b, uint32_t x, uint32_t y)
{
    lp_json_buf_puts(b, "[^");
    put_class_cp(b, x);
    if (y != x) put_class_cp(b, y);
    lp_json_buf_puts(b, "]");
}

/* The rule `name` for any text that does not contain `lit` and does not
 * end inside a partial match of it.  lit's first code point L0 must not
 * come back later in it (so for every marker of the table): then a broken
 * partial match falls back to no match, or to L0 when L0 broke it, and the
 * language is written without recursion (one regular lexeme):
 *   ( [^L0] | L0 ( ( L1 ( L2 ... )? )? L0 )* ( [^L1 L0] | L1 ( [^L2 L0] | L2 ... ) ) )*
 * 0, or -1 for a literal that does not qualify. */
static int put_not_containing(lp_json_buf_t *b, const char *name, const char *lit)
{
    uint32_t L[64];
    size_t m = code_points(lit, L, 64);
    if (!m || m == 64) return -1;
    for (size_t k = 1; k < m; k++)
        if (L[k] == L[0]) return -1;
    lp_json_buf_puts(b, name);
    lp_json_buf_puts(b, " ::= ( ");
    put_not2(b, L[0], L[0]);
    if (m == 1) {
        lp_json_buf_puts(b, " )*\n");
        return 0;
    }
    lp_json_buf_puts(b, " | ");
    put_cp_lit(b, L[0]);
    lp_json_buf_puts(b, " ( ");
    for (size_t k = 1; k + 1 < m; k++) {
        lp_json_buf_puts(b, "( ");
        put_cp_lit(b, L[k]);
        lp_json_buf_puts(b, " ");
    }
    for (size_t k = 1; k + 1 < m; k++) lp_json_buf_puts(b, ")? ");
    put_cp_lit(b, L[0]);
    lp_json_buf_puts(b, " )* ");
    for (size_t k = 1; k < m; k++) {
        if (k + 1 < m) lp_json_buf_puts(b, "( ");
        put_not2(b, L[k], L[0]);
        if (k + 1 < m) {
            lp_json_buf_puts(b, " | ");
            put_cp_lit(b, L[k]);
            lp_json_buf_puts(b, " ");
        }
    }
    for (size_t k = 1; k + 1 < m; k++) lp_json_buf_puts(b, " )");
    lp_json_buf_puts(b, " )*\n");
    return 0;
}

/* ---- the structure ---------------------------------------------------------------- */

static char *dup_buf(lp_json_buf_t *b, bool *oom)
{
    if (b->oom || !b->p) {
        *oom = *oom || b->oom;
        free(b->p);
        char *e = strdup("");
        if (!e) *oom = true;
        return e;
    }
    return b->p;
}

void lp_chat_grammar_destroy(lp_chat_grammar_t **self_p)
{
    lp_chat_grammar_t *g = *self_p;
    if (!g) return;
    free(g->trigger);
    free(g->prefix);
    free(g->separator);
    free(g->suffix);
    for (size_t i = 0; i < g->n_fns; i++) {
        free(g->fns[i].name);
        free(g->fns[i].begin);
        free(g->fns[i].end);
        free(g->fns[i].schema);
    }
    free(g->fns);
    for (size_t i = 0; i < g->n_refs; i++) {
        free(g->refs[i].rule);
        free(g->refs[i].schema);
    }
    free(g->refs);
    free(g->gbnf);
    free(g);
    *self_p = NULL;
}

static int add_ref(lp_chat_grammar_t *g, const char *rule, const lp_json_t *schema)
{
    lp_chat_grammar_ref_t *r = realloc(g->refs, (g->n_refs + 1) * sizeof(*r));
    if (!r) return LP_ERR(ENOMEM);
    g->refs = r;
    lp_json_buf_t s = {0};
    if (schema) lp_json_buf_value(&s, schema);
    else lp_json_buf_puts(&s, "{\"type\":\"object\",\"properties\":{}}");
    bool oom = false;
    r[g->n_refs].rule = strdup(rule);
    r[g->n_refs].schema = dup_buf(&s, &oom);
    g->n_refs++;
    return oom || !r[g->n_refs - 1].rule ? LP_ERR(ENOMEM) : 0;
}

static bool is_string_schema(const lp_json_t *s)
{
    const lp_json_t *t = lp_json_get(s, "type");
    if (t && t->type == LP_JSON_STRING) return !strcmp(t->u.str, "string");
    if (t) return false;
    const lp_json_t *e = lp_json_get(s, "enum");
    if (!e || e->type != LP_JSON_ARRAY || !e->n) return false;
    for (size_t i = 0; i < e->n; i++)
        if (e->u.items[i].type != LP_JSON_STRING) return false;
    return true;
}

static bool in_required(const lp_json_t *params, const char *key, size_t n)
{
    const lp_json_t *req = lp_json_get(params, "required");
    if (!req || req->type != LP_JSON_ARRAY) return false;
    for (size_t i = 0; i < req->n; i++)
        if (req->u.items[i].type == LP_JSON_STRING && req->u.items[i].n == n && !memcmp(req->u.items[i].u.str, key, n))
            return true;
    return false;
}

/* an XML-like call's parameters: their rules into b; 0 or an error */
static int put_xml_params(lp_chat_grammar_t *g, const lp_chat_format_info_t *fi, size_t f, const lp_json_t *params,
                          lp_json_buf_t *b, lp_json_buf_t *rules)
{
    const lp_json_t *props = lp_json_get(params, "properties");
    char tmp[128];
    snprintf(tmp, sizeof(tmp), "params-%zu ::=", f);
    lp_json_buf_puts(rules, tmp);
    if (!props || props->type != LP_JSON_OBJECT || !props->n) lp_json_buf_puts(rules, " \"\"");
    for (size_t i = 0; props && props->type == LP_JSON_OBJECT && i < props->n; i++) {
        const lp_json_t *p = &props->u.items[i];
        bool req = in_required(params, p->key, p->key_len);
        snprintf(tmp, sizeof(tmp), " param-%zu-%zu%s", f, i, req ? "" : "?");
        lp_json_buf_puts(rules, tmp);
    }
    lp_json_buf_puts(rules, "\n");
    for (size_t i = 0; props && props->type == LP_JSON_OBJECT && i < props->n; i++) {
        const lp_json_t *p = &props->u.items[i];
        char *key = strndup(p->key, p->key_len);
        if (!key) return LP_ERR(ENOMEM);
        snprintf(tmp, sizeof(tmp), "param-%zu-%zu ::= ", f, i);
        lp_json_buf_puts(rules, tmp);
        put_lit(rules, fi->param_open, false);
        lp_json_buf_puts(rules, " ");
        put_lit(rules, key, false);
        lp_json_buf_puts(rules, " ");
        put_lit(rules, fi->param_name_close, false);
        lp_json_buf_puts(rules, " ");
        free(key);
        const lp_json_t *en = lp_json_get(p, "enum");
        if (is_string_schema(p) && en && en->type == LP_JSON_ARRAY && en->n) {
            lp_json_buf_puts(rules, "(");
            for (size_t k = 0; k < en->n; k++) {
                if (k) lp_json_buf_puts(rules, " | ");
                char *v = strndup(en->u.items[k].u.str, en->u.items[k].n);
                if (!v) return LP_ERR(ENOMEM);
                put_lit(rules, v, false);
                free(v);
            }
            lp_json_buf_puts(rules, ")");
        } else if (is_string_schema(p))
            lp_json_buf_puts(rules, "xml-text");
        else {
            snprintf(tmp, sizeof(tmp), "args-%zu-%zu", f, i);
            lp_json_buf_puts(rules, tmp);
            int rc = add_ref(g, tmp, p);
            if (rc) return rc;
        }
        lp_json_buf_puts(rules, " ");
        put_lit(rules, fi->param_close, false);
        lp_json_buf_puts(rules, "\n");
    }
    (void)b;
    return 0;
}

int lp_chat_grammar_build(const lp_chat_grammar_opts_t *o, lp_chat_grammar_t **out)
{
    *out = NULL;
    const lp_chat_format_info_t *fi = lp_chat_format_info(o->format);
    if (!fi) return lp_error_set(LP_ERR(EINVAL), "tool grammar: unknown format %d", (int)o->format);
    /* which calls */
    const lp_json_t *tc = o->tool_choice;
    bool lazy = true;
    const char *named = NULL;
    if (tc && tc->type == LP_JSON_STRING) {
        if (!strcmp(tc->u.str, "none")) return 0;
        if (!strcmp(tc->u.str, "required")) lazy = false;
        else if (strcmp(tc->u.str, "auto"))
            return lp_error_set(LP_ERR(EINVAL), "tool_choice: \"%s\" is not \"auto\", \"none\", \"required\" or a function",
                                tc->u.str);
    } else if (tc && tc->type == LP_JSON_OBJECT) {
        const lp_json_t *f = lp_json_get(tc, "function"), *n = lp_json_get(f, "name");
        if (!n || n->type != LP_JSON_STRING)
            return lp_error_set(LP_ERR(EINVAL), "tool_choice: a named choice is {\"type\": \"function\", \"function\": {\"name\": ...}}");
        named = n->u.str;
        lazy = false;
    } else if (tc && tc->type != LP_JSON_NULL)
        return lp_error_set(LP_ERR(EINVAL), "tool_choice: must be a string or an object");
    const lp_json_t *tools = o->tools;
    if (!tools || tools->type != LP_JSON_ARRAY || !tools->n) {
        if (!lazy) return lp_error_set(LP_ERR(EINVAL), "tool_choice: \"required\" or a named function needs tools");
        return 0;
    }
    if (!fi->prefix) {
        if (lazy) return 0; /* auto: the model answers in text */
        return lp_error_set(LP_ERR(ENOTSUP), "tool calls: the chat template writes no tool calls (format \"%s\")",
                            fi->name);
    }
    if (fi->args == LP_CHAT_ARGS_GEMMA)
        return lp_error_set(LP_ERR(ENOTSUP), "tool calls: format \"%s\" writes arguments that are not JSON; "
                                             "they cannot be constrained to a JSON Schema", fi->name);
    lp_chat_grammar_t *g = calloc(1, sizeof(*g));
    if (!g) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    int rc = 0;
    bool oom = false;
    lp_json_buf_t b = {0}, rules = {0};
    g->lazy = lazy;
    g->trigger = strdup(lazy && fi->trigger ? fi->trigger : "");
    g->prefix = strdup(fi->prefix);
    g->separator = strdup(fi->separator ? fi->separator : "");
    g->suffix = strdup(fi->suffix);
    g->max_calls = o->parallel_tool_calls && fi->separator ? 0 : 1;
    if (!g->trigger || !g->prefix || !g->separator || !g->suffix) goto nomem;
    g->fns = calloc(tools->n, sizeof(*g->fns));
    if (!g->fns) goto nomem;
    char tmp[128];
    lp_json_buf_puts(&rules, "call ::=");
    size_t nf = 0;
    for (size_t i = 0; i < tools->n; i++) {
        const lp_json_t *t = &tools->u.items[i], *f = lp_json_get(t, "function");
        const lp_json_t *name = lp_json_get(f, "name"), *params = lp_json_get(f, "parameters");
        if (!name || name->type != LP_JSON_STRING || !name->n || memchr(name->u.str, 0, name->n)) {
            rc = lp_error_set(LP_ERR(EINVAL), "tools[%zu].function.name: must be a non-empty string", i);
            goto fail;
        }
        if (params && params->type != LP_JSON_OBJECT) {
            rc = lp_error_set(LP_ERR(EINVAL), "tools[%zu].function.parameters: must be an object", i);
            goto fail;
        }
        if (named && strcmp(named, name->u.str)) continue;
        lp_chat_grammar_fn_t *fn = &g->fns[nf];
        fn->name = strdup(name->u.str);
        /* the name inside a JSON string is written as one */
        size_t ol = strlen(fi->call_open);
        bool json_name = ol && fi->call_open[ol - 1] == '"';
        lp_json_buf_t begin = {0}, sch = {0};
        lp_json_buf_puts(&begin, fi->call_open);
        if (json_name) {
            lp_json_buf_str(&begin, name->u.str, name->n);
            begin.n--; /* the quotes are the format's */
            memmove(begin.p + ol, begin.p + ol + 1, begin.n - ol);
            begin.n--;
            begin.p[begin.n] = 0;
        } else
            lp_json_buf_put(&begin, name->u.str, name->n);
        lp_json_buf_puts(&begin, fi->name_close);
        fn->begin = dup_buf(&begin, &oom);
        fn->end = strdup(fi->call_close);
        if (params) lp_json_buf_value(&sch, params);
        else lp_json_buf_puts(&sch, "{\"type\":\"object\",\"properties\":{}}");
        fn->schema = dup_buf(&sch, &oom);
        if (oom || !fn->name || !fn->end) goto nomem;
        nf++;
        g->n_fns = nf;
        snprintf(tmp, sizeof(tmp), "%s call-%zu", nf > 1 ? " |" : "", nf - 1);
        lp_json_buf_puts(&rules, tmp);
    }
    if (!nf) {
        rc = lp_error_set(LP_ERR(EINVAL), "tool_choice: function \"%s\" is not among the tools", named);
        goto fail;
    }
    lp_json_buf_puts(&rules, "\n");
    for (size_t f = 0; f < nf; f++) {
        const lp_chat_grammar_fn_t *fn = &g->fns[f];
        snprintf(tmp, sizeof(tmp), "call-%zu ::= ", f);
        lp_json_buf_puts(&rules, tmp);
        put_lit(&rules, fn->begin, true);
        if (fi->args == LP_CHAT_ARGS_XML) snprintf(tmp, sizeof(tmp), " params-%zu", f);
        else snprintf(tmp, sizeof(tmp), " args-%zu", f);
        lp_json_buf_puts(&rules, tmp);
        if (*fn->end) {
            lp_json_buf_puts(&rules, " ");
            put_lit(&rules, fn->end, true);
        }
        lp_json_buf_puts(&rules, "\n");
        lp_json_doc_t *sd = NULL;
        if (lp_json_parse(fn->schema, strlen(fn->schema), &sd)) goto nomem;
        if (fi->args == LP_CHAT_ARGS_XML) rc = put_xml_params(g, fi, f, lp_json_root(sd), &b, &rules);
        else {
            snprintf(tmp, sizeof(tmp), "args-%zu", f);
            rc = add_ref(g, tmp, lp_json_root(sd));
        }
        lp_json_doc_destroy(&sd);
        if (rc) goto fail;
    }
    if (fi->args == LP_CHAT_ARGS_XML) {
        /* a string parameter's raw text: anything but its closing tag */
        char close[64];
        snprintf(close, sizeof(close), "%s", fi->param_close);
        size_t cn = strlen(close);
        while (cn > 1 && close[cn - 1] == '\n') close[--cn] = 0;
        if (put_not_containing(&rules, "xml-text", close)) goto internal;
    }
    /* the root: reasoning first when it may or must come, then the calls */
    bool reason = !lazy && fi->reasoning_open && (o->starts_in_reasoning || o->allow_reasoning);
    lp_json_buf_puts(&b, "root ::= ");
    /* models often open with a newline (GLM's "\n<think>"); Functionary's
     * output continues the prompt's ">>>" with the name */
    if (!lazy && o->format != LP_CHAT_FORMAT_FUNCTIONARY_V32) lp_json_buf_puts(&b, "[ \\t\\n]* ");
    if (reason) {
        if (!o->starts_in_reasoning) {
            lp_json_buf_puts(&b, "( ");
            put_lit(&b, fi->reasoning_open, false);
            lp_json_buf_puts(&b, " ");
        }
        lp_json_buf_puts(&b, "reasoning ");
        put_lit(&b, fi->reasoning_close, false);
        const char *next = fi->reasoning_next ? fi->reasoning_next : "";
        bool blank = strspn(next, " \t\n") == strlen(next);
        lp_json_buf_puts(&b, " ");
        if (blank) lp_json_buf_puts(&b, "[ \\t\\n]*");
        else put_lit(&b, next, false);
        lp_json_buf_puts(&b, o->starts_in_reasoning ? " " : " )? ");
    }
    /* a lazy grammar begins at its trigger (Functionary's ">>>" precedes its first call) */
    if (lazy && *g->trigger) {
        lp_json_buf_t start = {0};
        lp_json_buf_puts(&start, fi->prefix);
        lp_json_buf_puts(&start, g->fns[0].begin);
        bool first = start.p && !strncmp(start.p, g->trigger, strlen(g->trigger));
        free(start.p);
        if (!first) {
            put_lit(&b, g->trigger, false);
            lp_json_buf_puts(&b, " ");
        }
    }
    if (*fi->prefix) {
        put_lit(&b, fi->prefix, false);
        lp_json_buf_puts(&b, " ");
    }
    lp_json_buf_puts(&b, "call");
    if (!g->max_calls) {
        lp_json_buf_puts(&b, " ( ");
        if (*g->separator) {
            put_lit(&b, g->separator, false);
            lp_json_buf_puts(&b, " ");
        }
        lp_json_buf_puts(&b, "call )*");
    }
    if (*fi->suffix) {
        lp_json_buf_puts(&b, " ");
        put_lit(&b, fi->suffix, false);
        if (fi->suffix_optional) lp_json_buf_puts(&b, "?");
    }
    lp_json_buf_puts(&b, "\n");
    if (reason && put_not_containing(&b, "reasoning", fi->reasoning_close)) goto internal;
    lp_json_buf_put(&b, rules.p, rules.n);
    free(rules.p);
    rules.p = NULL;
    for (size_t i = 0; i < g->n_refs; i++) {
        lp_json_buf_puts(&b, "# ");
        lp_json_buf_puts(&b, g->refs[i].rule);
        lp_json_buf_puts(&b, ": the JSON Schema ");
        lp_json_buf_puts(&b, g->refs[i].schema);
        lp_json_buf_puts(&b, "\n");
    }
    g->gbnf = dup_buf(&b, &oom);
    b.p = NULL;
    if (oom) goto nomem;
    *out = g;
    return 0;
internal:
    rc = lp_error_set(LP_ERR(ENOTSUP), "tool grammar: format \"%s\": a marker repeats its first character", fi->name);
    goto fail;
nomem:
    rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");
fail:
    free(b.p);
    free(rules.p);
    lp_chat_grammar_destroy(&g);
    return rc;
}
