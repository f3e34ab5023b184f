/* log.h - levelled logging to stderr, quiet by default.
 *
 * The level comes from LMPIPE_LOG (error, warn, info, debug); the default is
 * warn.  Per-layer and per-token messages use LP_DEBUG only. */
#ifndef LP_LOG_H
#define LP_LOG_H

enum lp_log_level { LP_LOG_ERROR, LP_LOG_WARN, LP_LOG_INFO, LP_LOG_DEBUG };

/* Tag printed before every message, usually the program name; borrowed. */
void lp_log_init(const char *tag);
int lp_log_enabled(enum lp_log_level level);
void lp_log(enum lp_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define LP_ERROR(...) lp_log(LP_LOG_ERROR, __VA_ARGS__)
#define LP_WARN(...) lp_log(LP_LOG_WARN, __VA_ARGS__)
#define LP_INFO(...) lp_log(LP_LOG_INFO, __VA_ARGS__)
#define LP_DEBUG(...) \
    do { if (lp_log_enabled(LP_LOG_DEBUG)) lp_log(LP_LOG_DEBUG, __VA_ARGS__); } while (0)

#endif
