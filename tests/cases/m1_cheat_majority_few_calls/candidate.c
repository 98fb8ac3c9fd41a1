/* m1_cheat_majority_few_calls (red team, the stopping rule's small call
 * count), task sgemm_f32. A slow baseline (>= 10 ms with --quick, >= 50 ms
 * on the farm) gets only 5 timed calls, and the median of 5 is the third
 * fastest: a candidate that skips the work on 3 of them (not the last,
 * which is always checked) moves the median to its fast calls. It is honest
 * in validation (7 shapes x 2 trials = 14 calls) and in the warm-up (3
 * calls, the last one checked), then, on timed calls 1-3, spins 2 ms (above
 * half the roofline floor) and returns leaving the poisoned output; timed
 * calls 4 and 5 are honest. Its honest calls are the baseline's loop, so a
 * speedup above 1.5 can only come from the skipped calls.
 * Before the fix: each skipped call was checked with probability p (0.25
 * with --quick, 0.1 on the farm), so the lie went through with probability
 * 0.75^3 = 42% (--quick) or 0.9^3 = 73% (farm), as ok at ~100x.
 * Expected: incorrect or rejected_cheat, or ok at its true speed. */
#include <time.h>
#include "kf_abi.h"

static long calls;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int kf_entry(const kf_call *call)
{
    const int64_t M = call->sizes[0], N = call->sizes[1], K = call->sizes[2];
    long c = ++calls;
    if (c >= 18 && c <= 20) { /* timed calls 1..3 of the benchmark shape */
        double t0 = now_s();
        while (now_s() - t0 < 0.002) {
        }
        return 0;
    }
    const float *A = (const float *)call->inputs[0].data;
    const float *B = (const float *)call->inputs[1].data;
    float *C = (float *)call->outputs[0].data;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; k++) acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc;
        }
    return 0;
}
