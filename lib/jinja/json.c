/* json.c - JSON in and out: context values become Python's (an integer
 * stays an int, a number with a fraction or exponent is a float, objects
 * keep their order), and tojson writes what json.dumps writes with the
 * arguments transformers passes (ensure_ascii=False, ", " and ": "). */
#include "jinja-internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define MAX_NESTING 200

static jv from_json(jr_t *r, const lp_json_t *j, int depth)
{
    if (depth > MAX_NESTING) JERR(r, "a context value nested too deeply");
    switch (j->type) {
    case LP_JSON_NULL: return jv_none();
    case LP_JSON_BOOL: return jv_bool(j->u.b);
    case LP_JSON_NUMBER:
        if (j->is_int) return jv_int(j->inum);
        if (j->is_intlike) JERR(r, "integer %.0f in the context is out of range", j->u.num);
        return jv_float(j->u.num);
    case LP_JSON_STRING: return lp__jv_str(r, j->u.str, j->n);
    case LP_JSON_ARRAY: {
        jlist_t *l = lp__jlist_new(r, j->n, JL_LIST);
        for (size_t i = 0; i < j->n; i++) l->v[i] = from_json(r, &j->u.items[i], depth + 1);
        return lp__jv_list(l);
    }
    case LP_JSON_OBJECT: {
        jdict_t *d = lp__jdict_new(r);
        jv dv = lp__jv_dict(d);
        for (size_t i = 0; i < j->n; i++)
            lp__jdict_set(r, d, lp__jv_str(r, j->u.items[i].key, j->u.items[i].key_len),
                          from_json(r, &j->u.items[i], depth + 1));
        return dv;
    }
    }
    return jv_none();
}

jv lp__jfrom_json(jr_t *r, const lp_json_t *j) { return from_json(r, j, 0); }

/* ---- tojson --------------------------------------------------------------------------- */

typedef struct jopts {
    bool ascii, has_indent, sort;
    const char *indent, *item_sep, *key_sep;
    size_t indent_n;
} jopts_t;

static void put_json_str(jr_t *r, sb_t *b, const char *s, size_t n, bool ascii)
{
    lp__sb_putc(r, b, '"');
    size_t run = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        char tmp[16];
        const char *esc = NULL;
        size_t adv = 1;
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (c < 0x20 || (ascii && c == 0x7f)) {
                snprintf(tmp, sizeof(tmp), "\\u%04x", c);
                esc = tmp;
            } else if (c >= 0x80) {
                size_t j = i;
                uint32_t cp = lp__u8_next(s, n, &j);
                adv = j - i;
                if (ascii) {
                    if (cp >= 0x10000) {
                        uint32_t v = cp - 0x10000;
                        snprintf(tmp, sizeof(tmp), "\\u%04x\\u%04x", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
                    } else
                        snprintf(tmp, sizeof(tmp), "\\u%04x", cp);
                    esc = tmp;
                }
            }
        }
        if (esc) {
            lp__sb_put(r, b, s + i - run, run);
            run = 0;
            lp__sb_puts(r, b, esc);
        } else
            run += adv;
        i += adv;
    }
    lp__sb_put(r, b, s + n - run, run);
    lp__sb_putc(r, b, '"');
}

static void put_float(jr_t *r, sb_t *b, double d)
{
    if (isnan(d)) lp__sb_puts(r, b, "NaN");
    else if (isinf(d)) lp__sb_puts(r, b, d < 0 ? "-Infinity" : "Infinity");
    else {
        char buf[64];
        lp__jfloat_repr(buf, sizeof(buf), d);
        lp__sb_puts(r, b, buf);
    }
}

static void newline_indent(jr_t *r, sb_t *b, const jopts_t *o, int level)
{
    lp__sb_putc(r, b, '\n');
    for (int i = 0; i < level; i++) lp__sb_put(r, b, o->indent, o->indent_n);
}

/* A dict key as json.dumps converts it; false when the type is refused. */
static bool key_str(jr_t *r, sb_t *b, jv k)
{
    char buf[64];
    switch (k.t) {
    case JT_STR: lp__sb_put(r, b, k.u.s->p, k.u.s->len); return true;
    case JT_BOOL: lp__sb_puts(r, b, k.u.b ? "true" : "false"); return true;
    case JT_NONE: lp__sb_puts(r, b, "null"); return true;
    case JT_INT: lp__sb_printf(r, b, "%" PRId64, k.u.i); return true;
    case JT_FLOAT:
        if (isnan(k.u.d)) lp__sb_puts(r, b, "NaN");
        else if (isinf(k.u.d)) lp__sb_puts(r, b, k.u.d < 0 ? "-Infinity" : "Infinity");
        else {
            lp__jfloat_repr(buf, sizeof(buf), k.u.d);
            lp__sb_puts(r, b, buf);
        }
        return true;
    default: return false;
    }
}

typedef struct kv {
    jv k, v;
} kv_t;

static void dump(jr_t *r, sb_t *b, jv v, const jopts_t *o, int level);

static void dump_dict(jr_t *r, sb_t *b, jdict_t *d, const jopts_t *o, int level)
{
    if (!d->n) {
        lp__sb_puts(r, b, "{}");
        return;
    }
    size_t n = d->n;
    jobj_t *obj;
    kv_t *e = lp__jraw(r, n * sizeof(kv_t), &obj);
    for (size_t i = 0; i < n; i++) {
        e[i].k = d->k[i];
        e[i].v = d->v[i];
    }
    if (o->sort) {
        /* insertion sort by key (a stable order); mixed key types are refused */
        for (size_t i = 1; i < n; i++) {
            kv_t x = e[i];
            size_t j = i;
            while (j > 0) {
                int c = lp__jcmp(r, x.k, e[j - 1].k, "<");
                if (c == 2 || c >= 0) break;
                e[j] = e[j - 1];
                j--;
            }
            e[j] = x;
            lp__jstep(r, i);
        }
    }
    lp__sb_putc(r, b, '{');
    for (size_t i = 0; i < n; i++) {
        if (i) lp__sb_puts(r, b, o->item_sep);
        if (o->has_indent) newline_indent(r, b, o, level + 1);
        sb_t ks = {0};
        if (!key_str(r, &ks, e[i].k))
            JERR(r, "keys must be str, int, float, bool or None, not %s", lp__jtype_name(e[i].k));
        put_json_str(r, b, ks.p ? ks.p : "", ks.n, o->ascii);
        lp__sb_free(r, &ks);
        lp__sb_puts(r, b, o->key_sep);
        dump(r, b, e[i].v, o, level + 1);
    }
    if (o->has_indent) newline_indent(r, b, o, level);
    lp__sb_putc(r, b, '}');
    lp__jfree_obj(r, obj);
}

static void dump(jr_t *r, sb_t *b, jv v, const jopts_t *o, int level)
{
    if (level > MAX_NESTING) JERR(r, "Circular reference detected");
    lp__jstep(r, 1);
    switch (v.t) {
    case JT_NONE: lp__sb_puts(r, b, "null"); return;
    case JT_BOOL: lp__sb_puts(r, b, v.u.b ? "true" : "false"); return;
    case JT_INT: lp__sb_printf(r, b, "%" PRId64, v.u.i); return;
    case JT_FLOAT: put_float(r, b, v.u.d); return;
    case JT_STR: put_json_str(r, b, v.u.s->p, v.u.s->len, o->ascii); return;
    case JT_DICT: dump_dict(r, b, v.u.dc, o, level); return;
    case JT_LIST:
        if (v.u.l->kind == JL_LIST || v.u.l->kind == JL_TUPLE) {
            jlist_t *l = v.u.l;
            if (!l->n) {
                lp__sb_puts(r, b, "[]");
                return;
            }
            lp__sb_putc(r, b, '[');
            for (size_t i = 0; i < l->n; i++) {
                if (i) lp__sb_puts(r, b, o->item_sep);
                if (o->has_indent) newline_indent(r, b, o, level + 1);
                dump(r, b, l->v[i], o, level + 1);
            }
            if (o->has_indent) newline_indent(r, b, o, level);
            lp__sb_putc(r, b, ']');
            return;
        }
        break;
    default: break;
    }
    JERR(r, "Object of type %s is not JSON serializable", lp__jtype_name(v));
}

void lp__jtojson(jr_t *r, sb_t *b, jv v, bool ensure_ascii, const char *indent, size_t indent_len,
                 bool has_indent, const char *item_sep, const char *key_sep, bool sort_keys)
{
    jopts_t o = {ensure_ascii, has_indent, sort_keys, indent, item_sep, key_sep, indent_len};
    dump(r, b, v, &o, 0);
}
