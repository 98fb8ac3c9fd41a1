/* i8_kill_parent_stop (field case I8), task axpy_f32. On its first call
 * kf_entry sends SIGSTOP to its parent -- before the judge/runner split, the
 * evaluator, which then never reaps it, never reports, and hangs until
 * something outside kills it -- and then computes axpy correctly and
 * returns 0. (A subtler attacker would stop the judge only while its own
 * timed call runs; a frozen judge must not be able to happen at all.)
 * Before the judge/runner split: evaluator stopped forever. Expected:
 * kfarm-worker returns in time (run_cases.sh bounds it by 3 x timeout + 60
 * s) and exits 0 with runtime_error, rejected_cheat, or ok (the signal was
 * refused and the kernel is honest). */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "kf_abi.h"

static int tried;

int kf_entry(const kf_call *call)
{
    if (!tried) {
        tried = 1;
        pid_t pp = getppid();
        int rc = kill(pp, SIGSTOP);
        fprintf(stderr, "i8: kill(%d, SIGSTOP) = %d (%s)\n", (int)pp, rc, rc ? strerror(errno) : "accepted");
    }
    const int64_t N = call->sizes[0];
    const float *x = call->inputs[0].data, *y = call->inputs[1].data;
    float *z = call->outputs[0].data;
    for (int64_t i = 0; i < N; i++) z[i] = 2.0f * x[i] + y[i];
    return 0;
}
