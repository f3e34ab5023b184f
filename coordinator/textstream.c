/* textstream.c - UTF-8 whole characters and stop strings (see textstream.h). */
#include "textstream.h"

#include "error.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct lp_textstream {
    char **stops;
    size_t *stop_len;
    size_t n_stops, max_stop;
    char *text;      /* everything received */
    size_t len, cap;
    size_t sent;     /* bytes handed out */
    bool stopped;
};

lp_textstream_t *lp_textstream_new(const char *const *stops, const size_t *lens, size_t n)
{
    lp_textstream_t *ts = calloc(1, sizeof(*ts));
    if (!ts) return NULL;
    ts->stops = calloc(n ? n : 1, sizeof(char *));
    ts->stop_len = calloc(n ? n : 1, sizeof(size_t));
    if (!ts->stops || !ts->stop_len) goto fail;
    for (size_t i = 0; i < n; i++) {
        if (lens[i] == 0) continue; /* an empty stop string never matches */
        char *s = malloc(lens[i]);
        if (!s) goto fail;
        memcpy(s, stops[i], lens[i]);
        ts->stops[ts->n_stops] = s;
        ts->stop_len[ts->n_stops++] = lens[i];
        if (lens[i] > ts->max_stop) ts->max_stop = lens[i];
    }
    return ts;
fail:
    lp_textstream_destroy(&ts);
    return NULL;
}

void lp_textstream_destroy(lp_textstream_t **self_p)
{
    if (!self_p || !*self_p) return;
    lp_textstream_t *ts = *self_p;
    for (size_t i = 0; ts->stops && i < ts->n_stops; i++) free(ts->stops[i]);
    free(ts->stops);
    free(ts->stop_len);
    free(ts->text);
    free(ts);
    *self_p = NULL;
}

/* Length of the longest prefix of text[0..n) that ends on a character
 * boundary: an incomplete multi-byte sequence at the end is held back. */
static size_t utf8_complete(const char *text, size_t n)
{
    size_t i = n, back = 0;
    while (i > 0 && back < 4) {
        uint8_t c = (uint8_t)text[i - 1];
        if ((c & 0xc0) != 0x80) { /* a lead byte or ASCII */
            size_t need = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3
                        : (c & 0xf8) == 0xf0 ? 4 : 1; /* an invalid lead byte passes as is */
            return back + 1 >= need ? n : i - 1;
        }
        i--;
        back++;
    }
    return n; /* four or more continuation bytes: invalid, pass them on */
}

static const char *find(const char *hay, size_t hn, const char *needle, size_t nn)
{
    return nn <= hn ? memmem(hay, hn, needle, nn) : NULL;
}

int lp_textstream_push(lp_textstream_t *ts, const char *piece, size_t len, const char **out,
                       size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    if (ts->stopped) return -1;
    if (ts->len + len > ts->cap) {
        size_t cap = ts->cap ? ts->cap : 256;
        while (cap < ts->len + len) cap *= 2;
        char *t = realloc(ts->text, cap);
        if (!t) return LP_ERR(ENOMEM);
        ts->text = t;
        ts->cap = cap;
    }
    if (len) memcpy(ts->text + ts->len, piece, len); /* piece may be NULL when len is 0 */
    size_t old = ts->len;
    ts->len += len;
    /* A new match must end inside the new piece: search from max_stop-1
     * bytes before it. */
    size_t from = old > ts->max_stop ? old - ts->max_stop + 1 : 0;
    if (from < ts->sent) from = ts->sent;
    size_t best = SIZE_MAX;
    int which = -1;
    for (size_t i = 0; i < ts->n_stops; i++) {
        const char *m = find(ts->text + from, ts->len - from, ts->stops[i], ts->stop_len[i]);
        if (m && (size_t)(m - ts->text) < best) {
            best = (size_t)(m - ts->text);
            which = (int)i;
        }
    }
    size_t end;
    if (which >= 0) {
        end = best;
        ts->stopped = true;
    } else {
        /* Hold back the longest tail that is a prefix of some stop string. */
        size_t hold = 0;
        for (size_t i = 0; i < ts->n_stops; i++)
            for (size_t k = ts->stop_len[i] - 1; k > hold; k--)
                if (k <= ts->len - ts->sent && !memcmp(ts->text + ts->len - k, ts->stops[i], k)) {
                    hold = k;
                    break;
                }
        end = utf8_complete(ts->text, ts->len - hold);
    }
    if (end > ts->sent) {
        *out = ts->text + ts->sent;
        *out_len = end - ts->sent;
        ts->sent = end;
    }
    return which;
}

void lp_textstream_flush(lp_textstream_t *ts, const char **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    if (ts->stopped || ts->sent >= ts->len) return;
    *out = ts->text + ts->sent;
    *out_len = ts->len - ts->sent;
    ts->sent = ts->len;
}
