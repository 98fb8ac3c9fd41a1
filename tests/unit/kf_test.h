/*
 * kf_test.h -- a minimal test harness for the C unit tests.
 * CHECK records a failure and continues; kf_test_done prints the closing
 * line "N passed, M failed" and returns the exit status.
 */
#ifndef KF_TEST_H
#define KF_TEST_H
#include <stdio.h>
#include <string.h>

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

/* xorshift64 (G. Marsaglia, "Xorshift RNGs", 2003): the next state of *x. */
static inline unsigned long long kf_test_rand(unsigned long long *x)
{
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x;
}

/* One random mutation for the differential tests of a scanner against a
 * full parse: samples[r % n] copied into buf (cap bytes) with 1-4 edits,
 * each a byte replaced by one of alphabet, a cut, a byte deleted or a span
 * of up to 24 bytes duplicated. Returns its length (0 when cut to nothing),
 * or -1 for a sample that is empty or longer than cap / 2 (skip it). Draws
 * from *x. */
static inline long kf_test_mutate(char *buf, size_t cap, const char *const *samples, size_t n,
                                    const char *alphabet, unsigned long long *x)
{
    const char *src = samples[kf_test_rand(x) % n];
    size_t len = strlen(src), na = strlen(alphabet);
    if (len == 0 || len >= cap / 2) return -1;
    memcpy(buf, src, len);
    int edits = 1 + (int)((*x >> 8) % 4);
    for (int e = 0; e < edits && len > 0; e++) {
        kf_test_rand(x);
        size_t at = (size_t)(*x >> 16) % len;
        switch ((*x >> 40) % 4) {
        case 0: buf[at] = alphabet[(*x >> 48) % na]; break; /* replace */
        case 1: len = at; break;                            /* cut */
        case 2:                                             /* delete */
            memmove(buf + at, buf + at + 1, len - at - 1);
            len--;
            break;
        default: { /* duplicate a span */
            size_t n2 = 1 + (size_t)(*x >> 52) % 24;
            if (at + n2 > len) n2 = len - at;
            if (len + n2 < cap) {
                memmove(buf + at + n2, buf + at, len - at);
                len += n2;
            }
        }
        }
    }
    return (long)len;
}
#endif
