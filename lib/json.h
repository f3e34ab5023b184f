/* json.h - a small, strict JSON reader (RFC 8259) for control messages and
 * request parameters.
 *
 * Strict means: one value and nothing after it but white space; no comments,
 * no trailing commas, no NaN/Infinity, no leading zeros, no duplicate keys in
 * an object, strings must be valid UTF-8 with no raw control characters,
 * \u escapes must pair surrogates, nesting is at most LP_JSON_MAX_DEPTH.
 * Every refusal returns LP_ERR(EINVAL) and sets lp_error_msg() to a message
 * with the byte offset and what was expected there.
 *
 * The parsed document is a tree of lp_json_t nodes owned by one lp_json_doc_t;
 * every pointer into it is borrowed and valid until lp_json_doc_destroy(). */
#ifndef LP_JSON_H
#define LP_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LP_JSON_MAX_DEPTH 64
#define LP_JSON_MAX_INPUT (16u << 20) /* bytes; larger input is refused */

enum lp_json_type {
    LP_JSON_NULL,
    LP_JSON_BOOL,
    LP_JSON_NUMBER,
    LP_JSON_STRING,
    LP_JSON_ARRAY,
    LP_JSON_OBJECT,
};

typedef struct lp_json lp_json_t;
struct lp_json {
    enum lp_json_type type;
    const char *key;   /* member name when the parent is an object, else NULL */
    size_t key_len;
    size_t n;          /* STRING, NUMBER: byte length; ARRAY/OBJECT: number of items */
    bool is_int;       /* NUMBER written as an integer (no fraction, no exponent)
                        * that fits int64_t: inum holds it exactly */
    bool is_intlike;   /* NUMBER written as an integer, whether it fits or not */
    int64_t inum;
    union {
        bool b;              /* BOOL */
        double num;          /* NUMBER */
        const char *str;     /* STRING: NUL-terminated, may contain "\0" escapes */
        lp_json_t *items;    /* ARRAY/OBJECT: n nodes in order */
    } u;
    const char *num_text;    /* NUMBER: as written (n bytes, NUL-terminated); else NULL */
};

typedef struct lp_json_doc lp_json_doc_t;

/* Parse `len` bytes of `text` (NUL not needed).  On success *out owns the tree. */
int lp_json_parse(const char *text, size_t len, lp_json_doc_t **out);
void lp_json_doc_destroy(lp_json_doc_t **self_p);
/* The root value; borrowed. */
const lp_json_t *lp_json_root(const lp_json_doc_t *doc);

/* Object member by name, NULL when absent or when `obj` is not an object. */
const lp_json_t *lp_json_get(const lp_json_t *obj, const char *key);
const char *lp_json_type_name(enum lp_json_type t);

/* Number that is an exact integer within [lo, hi]: 0, else LP_ERR(EINVAL). */
int lp_json_int(const lp_json_t *v, int64_t lo, int64_t hi, int64_t *out);

/* ---- UTF-8 ------------------------------------------------------------------ */

/* Encode cp (below 0x110000) into out[4]; returns the byte count. */
size_t lp_utf8_encode(uint32_t cp, char *out);
/* The length of the well-formed sequence at p (no overlongs, no surrogates,
 * at most U+10FFFF; end bounds it), or 0. */
size_t lp_utf8_seq_len(const unsigned char *p, const unsigned char *end);

/* ---- writing: lmpipe's one JSON writer -------------------------------------
 *
 * Everything lmpipe writes as JSON goes through these: the gateways'
 * responses and events, the sampler's strategy and state file, the CLI.
 * Strings are checked as UTF-8 (a byte that is not part of a well-formed
 * sequence becomes U+FFFD), so that what is written always reads back
 * through lp_json_parse; numbers are the shortest text that reads back to
 * the same value (0.8f is "0.8", not "0.800000012"). */

/* A growing text (malloc'd, NUL-terminated; the caller frees p).  Running
 * out of memory sets oom and stops further writes. */
typedef struct lp_json_buf {
    char *p;
    size_t n, cap;
    bool oom;
} lp_json_buf_t;

/* Raw text (already JSON, or not JSON at all: an SSE "data: " prefix). */
void lp_json_buf_put(lp_json_buf_t *b, const char *s, size_t n);
void lp_json_buf_puts(lp_json_buf_t *b, const char *s);
void lp_json_buf_printf(lp_json_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s (n bytes, any bytes) as a quoted JSON string */
void lp_json_buf_str(lp_json_buf_t *b, const char *s, size_t n);
/* A number: integers exactly, others as the shortest text that reads back
 * to the same double (lp_json_buf_num) or float (lp_json_buf_float);
 * infinities as +-1e30. */
void lp_json_buf_num(lp_json_buf_t *b, double x);
void lp_json_buf_float(lp_json_buf_t *b, float x);
/* v as compact JSON; a number as it was read: an integer exactly, one
 * written with a fraction or an exponent still with one (1.0 stays a float) */
void lp_json_buf_value(lp_json_buf_t *b, const lp_json_t *v);
/* The text (caller frees), or NULL after running out of memory; b is empty
 * afterwards. */
char *lp_json_buf_take(lp_json_buf_t *b, size_t *len);
void lp_json_buf_free(lp_json_buf_t *b);

/* `s` (len bytes) as a quoted JSON string into buf, by the same rules as
 * lp_json_buf_str; returns the number of bytes that the full string needs,
 * like snprintf. */
size_t lp_json_quote(char *buf, size_t cap, const char *s, size_t len);

#endif
