/* textstream_test.c - hand-worked cases of UTF-8 hold-back and stop strings. */
#include "textstream.h"

#include "../tests/check.h"
#include "error.h"

#include <string.h>

static char got[1024];
static size_t got_len;

static int push(lp_textstream_t *ts, const char *p, size_t n)
{
    const char *o;
    size_t ol;
    int rc = lp_textstream_push(ts, p, n, &o, &ol);
    memcpy(got + got_len, o, ol);
    got_len += ol;
    return rc;
}

static void flush(lp_textstream_t *ts)
{
    const char *o;
    size_t ol;
    lp_textstream_flush(ts, &o, &ol);
    memcpy(got + got_len, o, ol);
    got_len += ol;
}

#define GOT(s) (got_len == strlen(s) && !memcmp(got, s, got_len))

int main(void)
{
    /* UTF-8: "é" = c3 a9 arrives in two pieces; "€" = e2 82 ac in three. */
    lp_textstream_t *ts = lp_textstream_new(NULL, NULL, 0);
    got_len = 0;
    CHECK(push(ts, "a\xc3", 2) == -1 && GOT("a"));
    CHECK(push(ts, "\xa9", 1) == -1 && GOT("a\xc3\xa9"));
    CHECK(push(ts, "\xe2", 1) == -1 && push(ts, "\x82", 1) == -1 && GOT("a\xc3\xa9"));
    CHECK(push(ts, "\xac!", 2) == -1 && GOT("a\xc3\xa9\xe2\x82\xac!"));
    /* A dangling lead byte comes out at flush. */
    CHECK(push(ts, "\xf0\x9f", 2) == -1 && GOT("a\xc3\xa9\xe2\x82\xac!"));
    flush(ts);
    CHECK(GOT("a\xc3\xa9\xe2\x82\xac!\xf0\x9f"));
    lp_textstream_destroy(&ts);
    CHECK(ts == NULL);

    /* Stop strings: "\n\n" and "END".  A prefix is held back until it
     * is known not to be a stop. */
    const char *stops[] = {"\n\n", "END", ""};
    size_t lens[] = {2, 3, 0};
    ts = lp_textstream_new(stops, lens, 3);
    got_len = 0;
    CHECK(push(ts, "Hello E", 7) == -1 && GOT("Hello "));
    CHECK(push(ts, "N", 1) == -1 && GOT("Hello "));
    CHECK(push(ts, "D? no", 5) == 1 && GOT("Hello "));
    CHECK(push(ts, "more", 4) == -1 && GOT("Hello "));
    flush(ts);
    CHECK(GOT("Hello "));
    lp_textstream_destroy(&ts);

    ts = lp_textstream_new(stops, lens, 3);
    got_len = 0;
    CHECK(push(ts, "EN", 2) == -1 && GOT(""));
    CHECK(push(ts, "Dless", 5) == 1 && GOT(""));
    lp_textstream_destroy(&ts);

    ts = lp_textstream_new(stops, lens, 3);
    got_len = 0;
    CHECK(push(ts, "ab\n", 3) == -1 && GOT("ab"));
    CHECK(push(ts, "c", 1) == -1 && GOT("ab\nc"));
    CHECK(push(ts, "EX", 2) == -1 && GOT("ab\ncEX"));
    CHECK(push(ts, "x\n", 2) == -1 && push(ts, "\nrest", 5) == 0 && GOT("ab\ncEXx"));
    lp_textstream_destroy(&ts);
    return CHECK_DONE();
}
