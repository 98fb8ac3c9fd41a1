/* i4_stop_after_n_per_shape (field case I4), task axpy_f32. Like
 * i4_stop_after_n, but with one counter per shape (keyed on N): honest for
 * the first HONEST_CALLS calls of every shape it sees -- so every
 * validation shape and the start of every benchmark shape pass -- then
 * returns 0 at once for that shape, leaving the output as it is.
 * Before the judge/runner split: ok at 10^3x for mid-range N.
 * Expected, for every N and every seed: incorrect or rejected_cheat, or ok
 * at its true speed (speedup <= 1.5). run_sweep.sh runs N = 1 .. 200 over
 * three seeds. Its honest calls deliberately do the work twice (about half
 * the baseline's speed), so a reported speedup above 1.5 can only come
 * from calls it skipped -- not from timing noise. */
// kfarm:tune HONEST_CALLS=1,2,3,5,8,13,21,34,55,89,144,200
#include "kf_abi.h"

#ifndef HONEST_CALLS
#define HONEST_CALLS 21
#endif

#define SLOTS 64
static int64_t shape_n[SLOTS];
static long shape_calls[SLOTS];

int kf_entry(const kf_call *call)
{
    const int64_t N = call->sizes[0];
    int s = 0;
    while (s < SLOTS && shape_n[s] && shape_n[s] != N) s++;
    if (s == SLOTS) s = (int)(N % SLOTS);
    shape_n[s] = N;
    if (++shape_calls[s] > HONEST_CALLS) return 0;
    const float *x = call->inputs[0].data, *y = call->inputs[1].data;
    float *z = call->outputs[0].data;
    for (int pass = 0; pass < 2; pass++) {
        for (int64_t i = 0; i < N; i++) z[i] = 2.0f * x[i] + y[i];
        __asm__ volatile("" ::: "memory");
    }
    return 0;
}
