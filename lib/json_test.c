/* json_test.c - the strict JSON reader: well-formed documents, then hostile
 * ones (truncation at every byte, deep nesting, bad escapes and UTF-8,
 * duplicates, non-JSON numbers, random mutations).  Run under ASan+UBSan in
 * the sanitize suite. */
#include "json.h"

#include "../tests/check.h"
#include "error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int parse(const char *s, lp_json_doc_t **d)
{
    return lp_json_parse(s, strlen(s), d);
}

static void test_good(void)
{
    lp_json_doc_t *d;
    const char *doc = " {\"a\": [1, -0, 2.5e3, -1.25E-2, true, false, null],"
                      " \"s\": \"x\\\"y\\\\z\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\","
                      " \"o\": {}, \"e\": [], \"k\": \"caf\xc3\xa9\"} ";
    CHECK_RC(parse(doc, &d), 0);
    const lp_json_t *r = lp_json_root(d);
    CHECK(r->type == LP_JSON_OBJECT && r->n == 5);
    const lp_json_t *a = lp_json_get(r, "a");
    CHECK(a && a->type == LP_JSON_ARRAY && a->n == 7);
    if (a && a->n == 7) {
        CHECK(a->u.items[0].u.num == 1.0);
        CHECK(a->u.items[1].u.num == 0.0 && signbit(a->u.items[1].u.num));
        CHECK(a->u.items[2].u.num == 2500.0);
        CHECK(a->u.items[3].u.num == -0.0125);
        CHECK(a->u.items[4].type == LP_JSON_BOOL && a->u.items[4].u.b);
        CHECK(a->u.items[5].type == LP_JSON_BOOL && !a->u.items[5].u.b);
        CHECK(a->u.items[6].type == LP_JSON_NULL);
    }
    const lp_json_t *s = lp_json_get(r, "s");
    /* x"y\z/ BS FF LF CR TAB, e-acute (2 bytes), U+1F600 (4 bytes) */
    const char want[] = "x\"y\\z/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80";
    CHECK(s && s->type == LP_JSON_STRING && s->n == sizeof(want) - 1 &&
          !memcmp(s->u.str, want, sizeof(want)));
    CHECK(lp_json_get(r, "o")->n == 0 && lp_json_get(r, "e")->n == 0);
    CHECK(lp_json_get(r, "missing") == NULL);
    int64_t v;
    CHECK_RC(lp_json_int(&a->u.items[0], 0, 10, &v), 0);
    CHECK(v == 1);
    CHECK(lp_json_int(&a->u.items[3], -10, 10, &v) != 0); /* not an integer */
    CHECK(lp_json_int(&a->u.items[2], 0, 10, &v) != 0);   /* out of range */
    lp_json_doc_destroy(&d);
    CHECK(d == NULL);
    lp_json_doc_destroy(&d); /* safe on NULL */

    /* scalars at the top level, and exactly 64 levels of nesting */
    CHECK_RC(parse("42", &d), 0);
    lp_json_doc_destroy(&d);
    char deep[200];
    memset(deep, '[', 64);
    memset(deep + 64, ']', 64);
    deep[128] = '\0';
    CHECK_RC(parse(deep, &d), 0);
    lp_json_doc_destroy(&d);

    /* quoting for output */
    char q[64];
    size_t n = lp_json_quote(q, sizeof(q), "a\"b\n\x01", 5);
    CHECK(n == strlen("\"a\\\"b\\n\\u0001\"") && !strcmp(q, "\"a\\\"b\\n\\u0001\""));
}

/* Each must be refused with a message that mentions `why`. */
static void refuse(const char *doc, size_t len, const char *why)
{
    lp_json_doc_t *d = NULL;
    int rc = lp_json_parse(doc, len, &d);
    CHECK(rc != 0 && !d, "accepted bad JSON: %.60s", doc);
    if (rc == 0 || d) {
        lp_json_doc_destroy(&d);
        return;
    }
    CHECK(!why || strstr(lp_error_msg(), why), "for %.60s: message '%s' lacks '%s'", doc,
          lp_error_msg(), why);
}

#define REFUSE(s, why) refuse(s, sizeof(s) - 1, why)

static void test_bad(void)
{
    REFUSE("", "end of input");
    REFUSE("   ", "end of input");
    REFUSE("{\"a\":1,}", "member name");
    REFUSE("[1,]", "expected a value");
    REFUSE("[1 2]", "expected ','");
    REFUSE("{\"a\" 1}", "expected ':'");
    REFUSE("{\"a\":1,\"a\":2}", "duplicate");
    REFUSE("{a:1}", "member name");
    REFUSE("01", "leading zero");
    REFUSE("-", "digit");
    REFUSE("1.", "digit after '.'");
    REFUSE("1e", "exponent");
    REFUSE("+1", "expected a value");
    REFUSE("NaN", "expected a value");
    REFUSE("[Infinity]", "expected a value");
    REFUSE("1e999", "out of range");
    REFUSE("tru", "expected a value");
    REFUSE("nul", "expected a value");
    REFUSE("[1] x", "after the value");
    REFUSE("{} {}", "after the value");
    REFUSE("/* c */ 1", "expected a value");
    REFUSE("\"abc", "unterminated");
    REFUSE("\"a\\", "unterminated");
    REFUSE("\"\\x\"", "unknown escape");
    REFUSE("\"\\u12\"", "four hex digits");
    REFUSE("\"\\u12G4\"", "four hex digits");
    REFUSE("\"\\ud800\"", "surrogate");
    REFUSE("\"\\ud800\\u0041\"", "low surrogate");
    REFUSE("\"\\udc00\"", "lone low surrogate");
    REFUSE("\"a\nb\"", "control character");
    REFUSE("\"\xc0\x80\"", "UTF-8");         /* overlong NUL */
    REFUSE("\"\xed\xa0\x80\"", "UTF-8");     /* encoded surrogate */
    REFUSE("\"\xf5\x80\x80\x80\"", "UTF-8"); /* beyond U+10FFFF */
    REFUSE("\"\xe2\x82\"", "UTF-8");         /* truncated sequence */
    REFUSE("\"\x80\"", "UTF-8");             /* stray continuation */
    refuse("[1,\0 2]", 7, NULL);             /* embedded NUL */
    refuse("\"a\0b\"", 5, "control character");

    /* 65 levels of nesting */
    char deep[200];
    memset(deep, '[', 65);
    memset(deep + 65, ']', 65);
    deep[130] = '\0';
    refuse(deep, 130, "nesting");
    /* 100000 open brackets: refused at depth 65, no stack exhaustion */
    char *huge = malloc(100000);
    memset(huge, '[', 100000);
    refuse(huge, 100000, "nesting");
    memset(huge, '{', 100000);
    refuse(huge, 100000, "member name");
    free(huge);
    /* NULL input */
    lp_json_doc_t *d;
    CHECK(lp_json_parse(NULL, 5, &d) != 0);
}

/* Every proper prefix of a valid document is refused; no crash anywhere. */
static void test_truncation(void)
{
    const char *doc = "{\"temperature\":0.7,\"samplers\":[\"top_k\",\"min_p\"],"
                      "\"logit_bias\":[[15043,-1.5],[42,false]],\"s\":\"\\u00e9\\ud83d\\ude00\","
                      "\"n\":[null,true,-1e-3]}";
    size_t n = strlen(doc);
    lp_json_doc_t *d;
    CHECK_RC(lp_json_parse(doc, n, &d), 0);
    lp_json_doc_destroy(&d);
    for (size_t k = 0; k < n; k++) {
        int rc = lp_json_parse(doc, k, &d);
        CHECK(rc != 0, "prefix of %zu bytes accepted", k);
        if (rc == 0) lp_json_doc_destroy(&d);
    }
}

/* Random byte mutations of a valid document: must never crash or leak
 * (ASan checks); any accepted result must be walkable. */
static size_t walk(const lp_json_t *v)
{
    size_t n = 1;
    if (v->type == LP_JSON_ARRAY || v->type == LP_JSON_OBJECT)
        for (size_t i = 0; i < v->n; i++) n += walk(&v->u.items[i]);
    return n;
}

static void test_mutations(void)
{
    const char *seed = "{\"a\":[1,2.5,{\"b\":\"x\\u00e9\"}],\"c\":true,\"d\":null,\"e\":\"\\n\"}";
    size_t n = strlen(seed);
    char buf[128];
    uint64_t s = 0x9e3779b97f4a7c15ull;
    size_t accepted = 0;
    const char alphabet[] = "{}[]\",:\\u0123456789eE.-+truefalsn \x80\xc3\xff";
    for (int iter = 0; iter < 200000; iter++) {
        memcpy(buf, seed, n);
        size_t len = n;
        int edits = 1 + (int)(s % 3);
        for (int e = 0; e < edits; e++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            size_t at = (size_t)(s >> 33) % len;
            char ch = alphabet[(s >> 17) % (sizeof(alphabet) - 1)];
            switch ((s >> 45) % 3) {
            case 0: buf[at] = ch; break;                                 /* replace */
            case 1: if (len > 1) { memmove(buf + at, buf + at + 1, len - at - 1); len--; } break;
            default: if (len < sizeof(buf) - 1) { memmove(buf + at + 1, buf + at, len - at); buf[at] = ch; len++; }
            }
        }
        lp_json_doc_t *d;
        if (lp_json_parse(buf, len, &d) == 0) {
            accepted++;
            CHECK(walk(lp_json_root(d)) >= 1);
            lp_json_doc_destroy(&d);
        }
    }
    CHECK(accepted > 0); /* some mutations stay valid (e.g. a digit for a digit) */
}

int main(void)
{
    test_good();
    test_bad();
    test_truncation();
    test_mutations();
    return CHECK_DONE();
}
