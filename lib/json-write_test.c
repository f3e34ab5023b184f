/* json-write_test.c - lmpipe's one JSON writer (lib/json.h): escapes,
 * invalid UTF-8 as U+FFFD, numbers as the shortest text that reads back to
 * the same value, and parsed values written back to equal text. */
#include "json.h"

#include "check.h"
#include "error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int str_is(const char *s, size_t n, const char *want)
{
    lp_json_buf_t b = {0};
    lp_json_buf_str(&b, s, n);
    int ok = b.p && !strcmp(b.p, want);
    if (!ok) fprintf(stderr, "  got %s, want %s\n", b.p ? b.p : "(null)", want);
    lp_json_buf_free(&b);
    return ok;
}

static int float_is(float x, const char *want)
{
    lp_json_buf_t b = {0};
    lp_json_buf_float(&b, x);
    int ok = b.p && !strcmp(b.p, want);
    if (!ok) fprintf(stderr, "  got %s, want %s\n", b.p ? b.p : "(null)", want);
    lp_json_buf_free(&b);
    return ok;
}

static int num_is(double x, const char *want)
{
    lp_json_buf_t b = {0};
    lp_json_buf_num(&b, x);
    int ok = b.p && !strcmp(b.p, want);
    if (!ok) fprintf(stderr, "  got %s, want %s\n", b.p ? b.p : "(null)", want);
    lp_json_buf_free(&b);
    return ok;
}

int main(void)
{
    CHECK(str_is("a\"b\\c\n\r\t", 8, "\"a\\\"b\\\\c\\n\\r\\t\""));
    CHECK(str_is("\x01\x1f\x7f", 3, "\"\\u0001\\u001f\\u007f\""));
    CHECK(str_is("a\0b", 3, "\"a\\u0000b\""));
    CHECK(str_is("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9, "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\""));
    /* a lone continuation byte, a cut sequence, an overlong form, a surrogate */
    CHECK(str_is("\x80", 1, "\"\xef\xbf\xbd\""));
    CHECK(str_is("x\xe2\x82", 3, "\"x\xef\xbf\xbd\xef\xbf\xbd\""));
    CHECK(str_is("\xc0\xaf", 2, "\"\xef\xbf\xbd\xef\xbf\xbd\""));
    CHECK(str_is("\xed\xa0\x80", 3, "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""));
    CHECK(str_is("\xf4\x90\x80\x80", 4, "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""));

    CHECK(num_is(3, "3"));
    CHECK(num_is(-17, "-17"));
    CHECK(num_is(0.5, "0.5"));
    CHECK(num_is(1.0 / 0.0, "1e30"));
    CHECK(num_is(-1.0 / 0.0, "-1e30"));

    /* shortest round trip: what a person typed comes back as typed */
    CHECK(float_is(0.8f, "0.8"));
    CHECK(float_is(0.95f, "0.95"));
    CHECK(float_is(0.05f, "0.05"));
    CHECK(float_is(1.75f, "1.75"));
    CHECK(float_is(-2.5f, "-2.5"));
    CHECK(float_is(1e-7f, "1e-07"));
    CHECK(num_is(0.1, "0.1"));
    CHECK(num_is(0.1 + 0.2, "0.30000000000000004"));
    CHECK(num_is(1.0 / 3.0, "0.3333333333333333"));
    /* and every value reads back exactly: floats through strtof, doubles strtod */
    unsigned seed = 12345;
    for (int i = 0; i < 20000; i++) {
        seed = seed * 1103515245u + 12345u;
        float f;
        uint32_t bits = seed ^ (seed << 13);
        memcpy(&f, &bits, sizeof(f));
        if (!isfinite(f)) continue;
        lp_json_buf_t b = {0};
        lp_json_buf_float(&b, f);
        CHECK(b.p && strtof(b.p, NULL) == f, "%.9g written as %s", (double)f, b.p ? b.p : "(null)");
        lp_json_buf_free(&b);
        double d = (double)f * 1.000000123456789;
        lp_json_buf_num(&b, d);
        CHECK(b.p && strtod(b.p, NULL) == d, "%.17g written as %s", d, b.p ? b.p : "(null)");
        lp_json_buf_free(&b);
    }

    /* lp_json_quote is the same writer, snprintf-style */
    char q[16];
    CHECK(lp_json_quote(q, sizeof(q), "a\x80", 2) == 6 && !strcmp(q, "\"a\xef\xbf\xbd\""), "%s", q);
    CHECK(lp_json_quote(q, 4, "abcdef", 6) == 8 && !strcmp(q, "\"ab"), "%s", q);

    /* Every string the writer makes parses, and a parsed document written
     * back parses to the same text again. */
    const char *doc = "{\"a\":[1,-2.5,true,false,null,\"x\\u0000y\"],\"b\":{\"c\":\"\\ud83d\\ude00\"},\"d\":1e300}";
    lp_json_doc_t *d1 = NULL, *d2 = NULL;
    CHECK_RC(lp_json_parse(doc, strlen(doc), &d1), 0);
    lp_json_buf_t b1 = {0}, b2 = {0};
    if (d1) lp_json_buf_value(&b1, lp_json_root(d1));
    CHECK(b1.p != NULL);
    if (b1.p) {
        CHECK_RC(lp_json_parse(b1.p, b1.n, &d2), 0);
        if (d2) lp_json_buf_value(&b2, lp_json_root(d2));
        CHECK(b2.p && !strcmp(b1.p, b2.p), "%s vs %s", b1.p, b2.p ? b2.p : "(null)");
    }
    for (int c = 0; c < 256; c++) {
        char in[3] = {'a', (char)c, (char)0x80};
        lp_json_buf_t b = {0};
        lp_json_buf_str(&b, in, 3);
        lp_json_doc_t *d = NULL;
        CHECK_RC(lp_json_parse(b.p, b.n, &d), 0);
        lp_json_doc_destroy(&d);
        lp_json_buf_free(&b);
    }
    lp_json_buf_free(&b1);
    lp_json_buf_free(&b2);
    lp_json_doc_destroy(&d1);
    lp_json_doc_destroy(&d2);
    return CHECK_DONE();
}
