/*
 * kf_test.h -- a minimal test harness for the C unit tests.
 * CHECK records a failure and continues; kf_test_done prints the closing
 * line "N passed, M failed" and returns the exit status.
 */
#ifndef KF_TEST_H
#define KF_TEST_H
#include <stdio.h>

typedef struct { int passed, failed; } kf_test_state;

#define CHECK(st, cond, ...)                                                     \
    do {                                                                         \
        if (cond) {                                                              \
            (st)->passed++;                                                      \
        } else {                                                                 \
            (st)->failed++;                                                      \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                 \
        }                                                                        \
    } while (0)

static inline int kf_test_done(const kf_test_state *st)
{
    printf("%d passed, %d failed\n", st->passed, st->failed);
    return st->failed ? 1 : 0;
}
#endif
