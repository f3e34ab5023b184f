/* textstream.h - the text of one generation as it streams out: token pieces
 * come in as bytes; what goes out is whole UTF-8 characters, minus any tail
 * that could still grow into a stop string, and nothing from the first stop
 * string on (llama.cpp server's behaviour). */
#ifndef LP_TEXTSTREAM_H
#define LP_TEXTSTREAM_H

#include <stdbool.h>
#include <stddef.h>

typedef struct lp_textstream lp_textstream_t;

/* `stops`: n strings (lens given; copied).  NULL on out-of-memory. */
lp_textstream_t *lp_textstream_new(const char *const *stops, const size_t *lens, size_t n);
void lp_textstream_destroy(lp_textstream_t **self_p);

/* Append a piece.  *out / *out_len: the bytes that may now be sent
 * (borrowed until the next call).  Returns the index of the stop string
 * that matched (the stream is then finished: later pieces give nothing), or
 * -1.  LP_ERR(ENOMEM) on out-of-memory. */
int lp_textstream_push(lp_textstream_t *ts, const char *piece, size_t len, const char **out,
                       size_t *out_len);
/* At the end: what is still held back (an unfinished stop-string prefix and
 * any incomplete UTF-8 tail).  Borrowed until the next call. */
void lp_textstream_flush(lp_textstream_t *ts, const char **out, size_t *out_len);

#endif
