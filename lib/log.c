/* log.c - levelled logging to stderr. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *log_tag = "lmpipe";
static int log_level = -1;

static int log_level_from_env(void)
{
    const char *s = getenv("LMPIPE_LOG");
    if (!s || !*s) return LP_LOG_WARN;
    if (!strcmp(s, "debug")) return LP_LOG_DEBUG;
    if (!strcmp(s, "info")) return LP_LOG_INFO;
    if (!strcmp(s, "warn")) return LP_LOG_WARN;
    if (!strcmp(s, "error")) return LP_LOG_ERROR;
    return LP_LOG_WARN;
}

void lp_log_init(const char *tag)
{
    if (tag) log_tag = tag;
    log_level = log_level_from_env();
}

int lp_log_enabled(enum lp_log_level level)
{
    if (log_level < 0) log_level = log_level_from_env();
    return (int)level <= log_level;
}

void lp_log(enum lp_log_level level, const char *fmt, ...)
{
    static const char *names[] = {"error", "warn", "info", "debug"};
    if (!lp_log_enabled(level)) return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: %s: %s\n", log_tag, names[level], line);
}
