/* error.c - per-thread error messages. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char msg_buf[1024];
static _Thread_local char param_buf[64];
static _Thread_local enum lp_error_kind kind_now;

int lp_error_set(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg_buf, sizeof(msg_buf), fmt, ap);
    va_end(ap);
    param_buf[0] = '\0';
    kind_now = LP_EK_UNSPECIFIED;
    return code;
}

void lp_error_mark(enum lp_error_kind kind, const char *param)
{
    kind_now = kind;
    snprintf(param_buf, sizeof(param_buf), "%s", param ? param : "");
}

int lp_error_set_kind(int code, enum lp_error_kind kind, const char *param, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg_buf, sizeof(msg_buf), fmt, ap);
    va_end(ap);
    lp_error_mark(kind, param);
    return code;
}

enum lp_error_kind lp_error_kind_of(int code)
{
    switch (code < 0 ? -code : code) {
    case EINVAL:
    case ERANGE:
    case E2BIG: return LP_EK_INVALID_REQUEST;
    case EBUSY: return LP_EK_RATE_LIMITED;
    case ENOENT: return LP_EK_NOT_FOUND;
    case EAGAIN:
    case EPROTO:
    case ETIMEDOUT:
    case EHOSTUNREACH:
    case ECONNRESET:
    case ESHUTDOWN:
    case EPIPE: return LP_EK_UNAVAILABLE;
    case ETIME: return LP_EK_DEADLINE;
    default: return LP_EK_INTERNAL;
    }
}

enum lp_error_kind lp_error_kind(int code)
{
    return kind_now != LP_EK_UNSPECIFIED ? kind_now : lp_error_kind_of(code);
}

const char *lp_error_param(void) { return param_buf; }

const char *lp_error_kind_name(enum lp_error_kind kind)
{
    static const char *const names[LP_EK_COUNT] = {
        "internal", "invalid_request", "context_length_exceeded", "not_found", "rate_limited",
        "unavailable", "internal", "deadline_exceeded"};
    return (unsigned)kind < LP_EK_COUNT ? names[kind] : "internal";
}

void lp_error_prefix(const char *fmt, ...)
{
    char prefix[512], old[sizeof(msg_buf)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    memcpy(old, msg_buf, sizeof(old));
    size_t n = strlen(prefix);
    if (n >= sizeof(msg_buf)) n = sizeof(msg_buf) - 1;
    memcpy(msg_buf, prefix, n);
    size_t rest = strnlen(old, sizeof(old) - 1);
    if (rest > sizeof(msg_buf) - 1 - n) rest = sizeof(msg_buf) - 1 - n;
    memcpy(msg_buf + n, old, rest);
    msg_buf[n + rest] = '\0';
}

const char *lp_error_msg(void)
{
    return msg_buf[0] ? msg_buf : "no error message";
}

void lp_error_clear(void)
{
    msg_buf[0] = '\0';
    param_buf[0] = '\0';
    kind_now = LP_EK_UNSPECIFIED;
}

const char *lp_strerror(int code)
{
    return strerror(code < 0 ? -code : code);
}
