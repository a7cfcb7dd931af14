/* Minimal test harness: CHECK records a failure and goes on; every test binary
 * ends with tg_test_finish(), which prints "N passed, N failed" and returns the
 * exit code. */
#ifndef TG_TEST_H
#define TG_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tg_test_passed_;
static int tg_test_failed_;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (cond) {                                                                   \
            tg_test_passed_++;                                                        \
        } else {                                                                      \
            tg_test_failed_++;                                                        \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);  \
        }                                                                             \
    } while (0)

#define CHECK_MSG(cond, ...)                                                          \
    do {                                                                              \
        if (cond) {                                                                   \
            tg_test_passed_++;                                                        \
        } else {                                                                      \
            tg_test_failed_++;                                                        \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);  \
            fprintf(stderr, __VA_ARGS__);                                             \
            fprintf(stderr, "\n");                                                    \
        }                                                                             \
    } while (0)

/* Status check: prints tg_last_error() on failure. */
#define CHECK_OK(expr)                                                                \
    do {                                                                              \
        enum tg_status st_ = (expr);                                                  \
        CHECK_MSG(st_ == TG_OK, "%s -> %s: %s", #expr, tg_status_name(st_),           \
                  tg_last_error());                                                   \
    } while (0)

#define CHECK_STATUS(expr, want)                                                      \
    do {                                                                              \
        enum tg_status st_ = (expr);                                                  \
        CHECK_MSG(st_ == (want), "%s -> %s (want %s): %s", #expr, tg_status_name(st_),\
                  tg_status_name(want), tg_last_error());                             \
    } while (0)

/* Message contains a substring. */
#define CHECK_ERR_HAS(sub)                                                            \
    CHECK_MSG(strstr(tg_last_error(), (sub)) != NULL, "message '%s' lacks '%s'",      \
              tg_last_error(), (sub))

static inline int tg_test_finish(void) {
    printf("%d passed, %d failed\n", tg_test_passed_, tg_test_failed_);
    return tg_test_failed_ ? 1 : 0;
}

/* For tests whose real subject is missing here (no CUDA device): what could
 * still run (self-tests, dry runs) decides between a failure and a ctest skip
 * (77); with the subject present, the usual finish. */
static inline int tg_test_finish_or_skip(int subject_present, const char *what_ran) {
    if (subject_present) return tg_test_finish();
    printf("GPU part skipped (%s: %d passed, %d failed)\n", what_ran, tg_test_passed_, tg_test_failed_);
    return tg_test_failed_ ? 1 : 77;
}


#endif
