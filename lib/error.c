/* error.c - per-thread error messages. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char msg_buf[1024];

int lp_error_set(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg_buf, sizeof(msg_buf), fmt, ap);
    va_end(ap);
    return code;
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
}

const char *lp_strerror(int code)
{
    return strerror(code < 0 ? -code : code);
}
