/* Red-team case (found by trying the judge as a hostile model would, 2026-11-30); see case.json for the expected verdict. */
/* d1_deadline_squeeze: blame shifted onto the task/worker. The judge's
 * deadline is t_start + 0.85*timeout_s (public: task.json timeout_s, 60 s ->
 * 51 s; this test uses --timeout 10 -> 8.5 s). The candidate, honest
 * otherwise, makes its LAST validation call sleep until just before the
 * deadline, then answers correctly. After it the judge still has ~0.5 s of
 * its own work before the next candidate call (41 overhead probes on the
 * baseline with a 48 MiB flush each, the pristine sets, the warm-up's
 * baseline calls), so the deadline expires while the judge waits on the
 * baseline: fail_wait() blames the task (noop_rtt never sets call_t0, so the
 * 'budget ran out' test sees the candidate's long call) or the worker. */
#define _GNU_SOURCE
#include <stdint.h>
#include <time.h>
#include "kf_abi.h"
#ifndef BUDGET_S
#define BUDGET_S 8.5   /* 0.85 * timeout_s */
#endif
static double t0;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
__attribute__((constructor)) static void ctor(void) { t0 = now(); }
static int ncalls;

int kf_entry(const kf_call *call)
{
    const int64_t N = call->sizes[0];
    const float *x = call->inputs[0].data, *y = call->inputs[1].data;
    float *z = call->outputs[0].data;
    for (int64_t i = 0; i < N; i++) z[i] = 2.0f * x[i] + y[i];
    if (++ncalls == 6) { /* validation: N=1 x2, N=1000 x2, N=3000001 x2 */
        double until = t0 + BUDGET_S - 0.35;
        while (now() < until) { struct timespec s = {0, 2000000}; nanosleep(&s, NULL); }
    }
    return 0;
}
