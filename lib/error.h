/* error.h - error codes and the per-thread error message.
 *
 * Functions return int: 0 on success, a negative errno-style code on failure
 * (LP_ERR(EINVAL)).  Where a person will read the failure, the function also
 * sets a message with lp_error_set() that names the file, field or value at
 * fault; lp_error_msg() returns it.  The message is thread-local, so a
 * service's threads never see each other's errors. */
#ifndef LP_ERROR_H
#define LP_ERROR_H

#include <errno.h>

#define LP_ERR(e) (-(e))

/* Set the calling thread's error message (printf-style); returns `code` so
 * that a failure path can be written `return lp_error_set(LP_ERR(EINVAL), ...)`. */
int lp_error_set(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prefix the current message with more context ("model.gguf: " + msg). */
void lp_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The calling thread's last message; borrowed, valid until the next set. */
const char *lp_error_msg(void);

void lp_error_clear(void);

/* Text for a code, like strerror(). */
const char *lp_strerror(int code);

#endif
