/* m2_cheat_majority_early_stop (red team, the stopping rule), task
 * axpy_f32. The timed loop stops at the first multiple of 5 calls from its
 * minimum (20 on the farm, 10 with --quick) where both medians are known to
 * 1% (2% quick), and a candidate can make that happen: calls that all take
 * the same time have a median absolute deviation of 0. On each benchmark
 * shape (counted by its size; the 3 warm-up calls are honest, the last one
 * is checked) this candidate, on the first benchmark shape only (its speedup is the
 * geometric mean over both), skips the work on timed calls 1-6 (spinning
 * 80 us, above half the roofline floor, and leaving the poisoned output),
 * so at the 10th call its median is one of its skipped calls and its
 * spread is zero; the loop stops, the 11th call (always checked) is honest,
 * and the median of 11 is still a skipped call. Its honest calls on the
 * first shape do the work twice, on the second once (0.7x overall), so a
 * speedup above 1.5 can only come from skipped calls.
 * Before the fix: each skipped call checked with probability 0.25 (quick),
 * all 6 escaped 18% of the time (0.9^10 = 35% for 10 of 20 on the
 * farm), as ok at several times the baseline.
 * Expected: incorrect or rejected_cheat, or ok at its true speed. */
#include <time.h>
#include "kf_abi.h"

static long n1;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int kf_entry(const kf_call *call)
{
    const int64_t N = call->sizes[0];
    long c = N == 1048576 ? ++n1 : 0;
    if (c >= 4 && c <= 9) { /* timed calls 1..6 of the first benchmark shape */
        double t0 = now_s();
        while (now_s() - t0 < 80e-6) {
        }
        return 0;
    }
    const float *x = call->inputs[0].data, *y = call->inputs[1].data;
    float *z = call->outputs[0].data;
    for (int pass = 0; pass < (N == 4194304 ? 1 : 2); pass++) {
        for (int64_t i = 0; i < N; i++) z[i] = 2.0f * x[i] + y[i];
        __asm__ volatile("" ::: "memory");
    }
    return 0;
}
