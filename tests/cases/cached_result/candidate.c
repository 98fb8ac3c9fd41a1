/* cached_result (C6): memoizes outputs in an 8-entry cache keyed on the input
 * pointer or a hash of the first 64 bytes, and returns the cached answer on
 * a hit. Validation gives every trial new values in new buffers (misses, so
 * it computes honestly), but the timing loop rotates buffers and checks a
 * random subset of timed calls (and always the first reuse of a buffer set)
 * against the reference on the inputs actually given. Expected: incorrect,
 * detail naming the timed call. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "kf_abi.h"

static void softmax_rows(const float *x, float *y, int64_t M, int64_t N)
{
    for (int64_t m = 0; m < M; m++) {
        const float *xr = x + m * N;
        float *yr = y + m * N;
        float mx = -INFINITY;
        for (int64_t n = 0; n < N; n++) mx = fmaxf(mx, xr[n]);
        double sum = 0;
        for (int64_t n = 0; n < N; n++) {
            float e = expf(xr[n] - mx);
            yr[n] = e;
            sum += e;
        }
        const float inv = (float)(1.0 / sum);
        for (int64_t n = 0; n < N; n++) yr[n] *= inv;
    }
}

#include <stdlib.h>
typedef struct { const void *ptr; uint64_t hash; int64_t n; float *out; } entry;
static entry cache[8];
static int next_slot;

static uint64_t hash64(const void *p, size_t len)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

int kf_entry(const kf_call *call)
{
    const int64_t M = call->sizes[0], N = call->sizes[1], n = M * N;
    const float *x = call->inputs[0].data;
    float *y = call->outputs[0].data;
    uint64_t h = hash64(x, (size_t)(n < 16 ? n : 16) * sizeof(float));
    for (int i = 0; i < 8; i++)
        if (cache[i].out && cache[i].n == n && (cache[i].ptr == x || cache[i].hash == h)) {
            memcpy(y, cache[i].out, (size_t)n * sizeof(float));
            return 0;
        }
    softmax_rows(x, y, M, N);
    entry *e = &cache[next_slot++ % 8];
    free(e->out);
    e->out = malloc((size_t)n * sizeof(float));
    if (e->out) memcpy(e->out, y, (size_t)n * sizeof(float));
    e->ptr = x;
    e->hash = h;
    e->n = n;
    return 0;
}
