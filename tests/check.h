/* check.h - the assertions and the random numbers the C tests share.
 *
 *   CHECK(cond)                      on failure: file:line, the expression
 *   CHECK(cond, fmt, ...)            and the printf-style message, if any
 *   CHECK_NEAR(a, b, tol, fmt, ...)  |a - b| <= tol (NaN fails); prints
 *                                    both values too
 *   CHECK_RC(expr, want)             expr returns want; prints both codes
 *                                    and lp_error_msg()
 *   return CHECK_DONE();             1 when any check failed, else 0
 *
 * A failed check is counted and the test goes on.  The message is an
 * optional part of CHECK rather than a second macro, so tests written with
 * either form compile; fmt must be a string literal.  CHECK(cond) passes
 * no variadic argument, which C23, C++20 and GNU C allow.
 *
 * lp_check_rand / _frand / _irand: xorshift64 (Marsaglia 2003, shifts 13,
 * 7, 17) on a state the test owns, so each test keeps its own seed and
 * its own sequence. */
#ifndef LP_TESTS_CHECK_H
#define LP_TESTS_CHECK_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

static int lp_check_failures __attribute__((unused));

/* Report a failed check: where, what, and the message.  fmt is " "
 * followed by the caller's message, if any (see CHECK). */
static inline void lp_check_vfail(const char *file, int line, const char *expr,
                                  const char *fmt, va_list ap)
{
    fprintf(stderr, "%s:%d: CHECK failed: %s", file, line, expr);
    if (fmt[1]) {
        fputc(':', stderr);
        vfprintf(stderr, fmt, ap);
    }
    fputc('\n', stderr);
    lp_check_failures++;
}

static inline void lp_check_fail(const char *file, int line, const char *expr, const char *fmt,
                                 ...) __attribute__((format(printf, 4, 5)));
static inline void lp_check_fail(const char *file, int line, const char *expr, const char *fmt,
                                 ...)
{
    va_list ap;
    va_start(ap, fmt);
    lp_check_vfail(file, line, expr, fmt, ap);
    va_end(ap);
}

/* The same with the two values compared, for CHECK_NEAR. */
static inline void lp_check_fail_near(const char *file, int line, const char *expr, double a,
                                      double b, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static inline void lp_check_fail_near(const char *file, int line, const char *expr, double a,
                                      double b, const char *fmt, ...)
{
    char what[512];
    snprintf(what, sizeof(what), "%s (%.7g vs %.7g)", expr, a, b);
    va_list ap;
    va_start(ap, fmt);
    lp_check_vfail(file, line, what, fmt, ap);
    va_end(ap);
}

#define CHECK(cond, ...)                                                          \
    do {                                                                          \
        if (!(cond)) lp_check_fail(__FILE__, __LINE__, #cond, " " __VA_ARGS__);  \
    } while (0)

#define CHECK_NEAR(a, b, tol, ...)                                                \
    do {                                                                          \
        double a_ = (a), b_ = (b);                                                \
        if (!(fabs(a_ - b_) <= (tol)))                                            \
            lp_check_fail_near(__FILE__, __LINE__, "|" #a " - " #b "| <= " #tol,  \
                               a_, b_, " " __VA_ARGS__);                          \
    } while (0)

#define CHECK_RC(expr, want)                                                      \
    do {                                                                          \
        int rc_ = (expr);                                                         \
        if (rc_ != (want)) {                                                      \
            fprintf(stderr, "%s:%d: %s returned %d, expected %d (%s)\n", __FILE__, \
                    __LINE__, #expr, rc_, (int)(want), lp_error_msg());            \
            lp_check_failures++;                                                  \
        }                                                                         \
    } while (0)

#define CHECK_DONE()                                                              \
    (lp_check_failures ? (fprintf(stderr, "%d check(s) failed\n", lp_check_failures), 1) : 0)

/* The next state; a state of 0 stays 0, so seeds must be nonzero. */
static inline uint64_t lp_check_rand(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

/* Uniform in [-1, 1), a multiple of 2^-23 (the top 24 bits, exact in a
 * float). */
static inline float lp_check_frand(uint64_t *state)
{
    return (float)((lp_check_rand(state) >> 40) * 0x1p-23 - 1.0);
}

/* Uniform enough in [0, n), n > 0: bits 11..63 modulo n. */
static inline int32_t lp_check_irand(uint64_t *state, int32_t n)
{
    return (int32_t)((lp_check_rand(state) >> 11) % (uint64_t)n);
}

#endif
