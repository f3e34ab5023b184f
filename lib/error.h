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

/* What kind of failure an error is, for the edges to choose a status from
 * (the wire's ErrorKind, with the same numbers; docs/PROTOCOL.md "Errors"). */
enum lp_error_kind {
    LP_EK_UNSPECIFIED = 0,
    LP_EK_INVALID_REQUEST = 1,   /* a bad or unsupported request field */
    LP_EK_CONTEXT_LENGTH = 2,    /* the prompt does not fit the context */
    LP_EK_NOT_FOUND = 3,
    LP_EK_RATE_LIMITED = 4,      /* a full queue, or the client's share of it */
    LP_EK_UNAVAILABLE = 5,       /* not ready, draining, a stage lost: try again */
    LP_EK_INTERNAL = 6,
    LP_EK_DEADLINE = 7,          /* the request's deadline_ms passed */
    LP_EK_COUNT
};

/* Mark the current error (after lp_error_set) with its kind and the request
 * field at fault (copied; NULL: none).  lp_error_set clears both. */
void lp_error_mark(enum lp_error_kind kind, const char *param);
/* lp_error_set and lp_error_mark at once; returns code. */
int lp_error_set_kind(int code, enum lp_error_kind kind, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The current error's kind when marked, else the kind of `code`: EINVAL,
 * ERANGE, E2BIG a bad request; EBUSY rate limited; ENOENT not found; EAGAIN,
 * EPROTO, ETIMEDOUT, EHOSTUNREACH, ECONNRESET, ESHUTDOWN, EPIPE unavailable;
 * ETIME the deadline; anything else internal. */
enum lp_error_kind lp_error_kind(int code);
enum lp_error_kind lp_error_kind_of(int code);
/* The marked field, or "" (borrowed until the next set). */
const char *lp_error_param(void);
/* "invalid_request", "context_length_exceeded", ... */
const char *lp_error_kind_name(enum lp_error_kind kind);

/* Text for a code, like strerror(). */
const char *lp_strerror(int code);

#endif
