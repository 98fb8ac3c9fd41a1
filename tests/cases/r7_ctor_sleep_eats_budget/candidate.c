/* Red-team case (found by trying the judge as a hostile model would, 2026-12-01); see case.json for the expected verdict. */
/* r7_ctor_sleep_eats_budget: blame for a slow load pushed onto the worker.
 * The candidate's shared-object constructor sleeps SLP seconds (default 14
 * of the 17 s judge budget that --timeout 20 gives), then kf_entry computes
 * axpy honestly. loaded_wait() only times the load out at the deadline, and
 * the load time is not counted in cand_used_s (only calls are, judge.c
 * call()), so when timing() runs out of budget before floor_reps the judge
 * finishes infra_error blame "worker" ("out of time after 2 of at least 20
 * timed calls ... the candidate used 0.1 s of the 17.0 s budget"), and with
 * a longer sleep a reference wait times out inside fail_wait() with the
 * same blame. Expected: timeout (the candidate's own load used the budget)
 * or ok; never infra_error. */
#include <unistd.h>
#include "kf_abi.h"

#ifndef SLP
#define SLP 14
#endif

__attribute__((constructor)) static void slow_load(void)
{
    usleep((useconds_t)(SLP * 1000000.0));
}

int kf_entry(const kf_call *call)
{
    const int64_t N = call->sizes[0];
    const float *x = call->inputs[0].data, *y = call->inputs[1].data;
    float *z = call->outputs[0].data;
    for (int64_t i = 0; i < N; i++) z[i] = 2.0f * x[i] + y[i];
    return 0;
}
