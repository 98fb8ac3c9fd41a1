/* i10_daemon (field case I10, "daemon"), task axpy_f32. On its first call
 * kf_entry forks; the child calls setsid (new session and process group, so
 * a kill of the evaluation's process group misses it) and forks again; the
 * grandchild -- no longer anyone's PR_SET_PDEATHSIG target -- closes every
 * inherited descriptor (so nobody waits for its pipes), names itself
 * "kfcase-daemon" (prctl PR_SET_NAME; run_cases.sh looks for that name
 * after every case) and spins a core, disturbing every later evaluation's
 * timing. For the test machine's sake it gives up by itself after 120 s.
 * The parent reaps the intermediate child, computes axpy correctly and
 * returns 0. If the first fork is refused, kf_entry returns 3, so that a
 * refused fork shows as runtime_error "returned 3".
 * Before the judge/runner split: ok, daemon survived the evaluation.
 * Expected: runtime_error (fork refused, or the runner blamed) or
 * rejected_cheat (processes left behind), never ok; and no kfcase-daemon
 * process outlives the evaluation. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "kf_abi.h"

static int spawned;

static void daemon_body(void)
{
    for (int fd = 0; fd < 1024; fd++) close(fd);
    signal(SIGHUP, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    prctl(PR_SET_NAME, "kfcase-daemon", 0, 0, 0);
    time_t end = time(NULL) + 120;
    volatile unsigned long spin = 0;
    while (time(NULL) < end)
        for (int i = 0; i < 1000000; i++) spin++;
    _exit(0);
}

int kf_entry(const kf_call *call)
{
    if (!spawned) {
        spawned = 1;
        pid_t p = fork();
        if (p < 0) return 3;
        if (p == 0) {
            setsid();
            pid_t q = fork();
            if (q == 0) daemon_body();
            _exit(0);
        }
        int st;
        waitpid(p, &st, 0);
    }
    const int64_t N = call->sizes[0];
    const float *x = call->inputs[0].data, *y = call->inputs[1].data;
    float *z = call->outputs[0].data;
    for (int64_t i = 0; i < N; i++) z[i] = 2.0f * x[i] + y[i];
    return 0;
}
