/* g3_slow_stop_raw_ratio (red team, the slow-candidate stop), task
 * farm_axpy_f32 (N=100000, ~40 us calls, timed in batches).
 * The stop "a candidate slower than the baseline stops once its speedup is
 * known" (stopped_by speedup_precision) tests the ratio of the RAW
 * per-call medians, which hold each side's share of the doorbell overhead
 * (ov / batch), while the verdict uses the corrected ones. The candidate
 * picks its own batch: it spins SLOW_US in the first SLOW_CALLS calls of
 * N=100000 (2 validation trials, 3 warm-ups, the first batch warm-up), so
 * its batch is 1 while the baseline's is ~20; then it computes z = 2x + y
 * with two threads (allowed: an unbatched call is not charged its CPU) and
 * pads every call to PAD_US from entry, so that its spread is ~0. Raw, it
 * carries the whole overhead and looks slower than the baseline (the loop
 * stops at its minimum); corrected (at most half its median subtracted) it
 * can be faster: an early stop on a verdict that is not slow.
 * Seen (2-core machine, SLOW_CALLS=10): its batch stays 1; THREADS=1 ok
 * 0.95x / 0.90x (seeds 7, 11), THREADS=2 PAD_US=60 ok 0.33x; the stop did
 * not fire (its spread stayed over the target, and at batch 1 the overhead
 * correction, capped at half its median, leaves it slower). SLOW_CALLS=16
 * SLOW_US=150 (slow through the first timed calls, fast after): ok 0.57x /
 * 0.63x. Where the stop does fire on a raw ratio < 1, it fires when the
 * baseline's running median is low, which lowers the candidate's speedup,
 * and the last call is still checked: no better verdict, no check skipped.
 * Expected: ok, at no more than its true two-thread speed (<= 2x). */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include "kf_abi.h"
#ifndef SLOW_CALLS
#define SLOW_CALLS 6
#endif
#ifndef SLOW_US
#define SLOW_US 1500
#endif
#ifndef PAD_US
#define PAD_US 0
#endif
#ifndef THREADS
#define THREADS 2
#endif

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}
static const float *gx, *gy;
static float *gz;
static int64_t gmid, gN;
static atomic_int gen, done;
static long n100k;
static int started;

static void *helper(void *a)
{
    (void)a;
    int seen = 0;
    for (;;) {
        while (atomic_load(&gen) == seen) ; /* frozen with the runner when not called */
        seen = atomic_load(&gen);
        for (int64_t i = gmid; i < gN; i++) gz[i] = 2.0f * gx[i] + gy[i];
        atomic_store(&done, seen);
    }
    return NULL;
}

int kf_entry(const kf_call *call)
{
    double t0 = now_us();
    const int64_t N = call->sizes[0];
    const float *x = call->inputs[0].data, *y = call->inputs[1].data;
    float *z = call->outputs[0].data;
    long c = N == 100000 ? ++n100k : 0;
    if (THREADS > 1 && !started) {
        pthread_t t;
        started = 1;
        pthread_create(&t, NULL, helper, NULL);
    }
    if (c >= 1 && c <= SLOW_CALLS) while (now_us() - t0 < SLOW_US) ;
    if (THREADS > 1 && N >= 65536) {
        gx = x; gy = y; gz = z; gN = N; gmid = N / 2;
        int g = atomic_fetch_add(&gen, 1) + 1;
        for (int64_t i = 0; i < N / 2; i++) z[i] = 2.0f * x[i] + y[i];
        while (atomic_load(&done) != g) ;
    } else {
        for (int64_t i = 0; i < N; i++) z[i] = 2.0f * x[i] + y[i];
    }
    if (c > SLOW_CALLS && PAD_US > 0) while (now_us() - t0 < PAD_US) ;
    return 0;
}
