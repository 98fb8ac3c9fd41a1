/* i8_kill_parent (field case I8, "kills its parent"), task axpy_f32. On
 * its first call kf_entry sends SIGKILL to its parent -- kill(getppid(),
 * SIGKILL), and the same through the pidfd API -- which, before the
 * judge/runner split, is the evaluator itself: no verdict at all. Then it
 * computes axpy correctly and returns 0 (if the signal was refused, the
 * candidate is otherwise honest). Prints whether the kill was accepted.
 * Before the judge/runner split: evaluator killed, no verdict. Expected:
 * kfarm-worker survives (exit 0, run_cases.sh checks) with runtime_error,
 * rejected_cheat, or ok (the signal was refused and the kernel is honest). */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "kf_abi.h"

static int tried;

int kf_entry(const kf_call *call)
{
    if (!tried) {
        tried = 1;
        pid_t pp = getppid();
        int rc = kill(pp, SIGKILL);
        fprintf(stderr, "i8: kill(%d, SIGKILL) = %d (%s)\n", (int)pp, rc, rc ? strerror(errno) : "accepted");
#ifdef SYS_pidfd_open
        int pfd = (int)syscall(SYS_pidfd_open, pp, 0);
        if (pfd >= 0) {
            rc = (int)syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
            fprintf(stderr, "i8: pidfd_send_signal(SIGKILL) = %d\n", rc);
            close(pfd);
        }
#endif
    }
    const int64_t N = call->sizes[0];
    const float *x = call->inputs[0].data, *y = call->inputs[1].data;
    float *z = call->outputs[0].data;
    for (int64_t i = 0; i < N; i++) z[i] = 2.0f * x[i] + y[i];
    return 0;
}
