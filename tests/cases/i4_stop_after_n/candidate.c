/* i4_stop_after_n (field case I4, "stops working after N calls"), task
 * axpy_f32. Honest for its first HONEST_CALLS calls (one global counter),
 * then returns 0 at once on every later call, leaving the output exactly as
 * the farm handed it over. Validation is a handful of calls, so for N past
 * validation every timed call is free unless it is checked; the farm's
 * checked calls must be spread over the whole run (last call included) and
 * unpredictable, so that every N is caught.
 * Before the judge/runner split: ok at 10^3-10^4x for N around 33-37.
 * Expected, for every N and every seed: incorrect or rejected_cheat, or ok
 * at its true speed (speedup <= 1.5: the run ended before it stopped
 * working). run_sweep.sh runs N = 1 .. 200 over three seeds.
 * Its honest calls deliberately do the work twice (about half the
 * baseline's speed), so a reported speedup above 1.5 can only come from
 * calls it skipped -- not from timing noise. *
 * tests/cases/batch_stop_after_n runs this file on axpy_tiny_f32 with
 * HONEST_CALLS=300, where the judge times calls in batches of hundreds. */
// kfarm:tune HONEST_CALLS=1,2,3,5,8,13,21,34,55,89,144,200
#include "kf_abi.h"

#ifndef HONEST_CALLS
#define HONEST_CALLS 34
#endif

static long calls;

int kf_entry(const kf_call *call)
{
    if (++calls > HONEST_CALLS) return 0;
    const int64_t N = call->sizes[0];
    const float *x = call->inputs[0].data, *y = call->inputs[1].data;
    float *z = call->outputs[0].data;
    for (int pass = 0; pass < 2; pass++) {
        for (int64_t i = 0; i < N; i++) z[i] = 2.0f * x[i] + y[i];
        __asm__ volatile("" ::: "memory");
    }
    return 0;
}
