/* check.h - the few assertions the C unit tests use: each failure prints
 * file:line and the expression, and the test exits 1 at the end. */
#ifndef LP_TESTS_CHECK_H
#define LP_TESTS_CHECK_H

#include <stdio.h>

static int lp_check_failures;

#define CHECK(cond)                                                               \
    do {                                                                          \
        if (!(cond)) {                                                            \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            lp_check_failures++;                                                  \
        }                                                                         \
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

#endif
