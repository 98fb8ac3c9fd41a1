/* g1_finish_while_stopping (red team, the window between the judge's clock
 * and the SIGSTOP that freezes the runner), task axpy_f32.
 * On cpu the judge reads its clock when the answer arrives (t1), then sends
 * SIGSTOP and waits up to 2 s for the runner to report stopped; the
 * runner's CPU mark (for the idle check) and the output snapshot are taken
 * only after the stop. So work done after the answer but before the stop
 * lands is neither timed nor idle-checked. A process-directed SIGSTOP is
 * taken by the main thread (it is blocked in read(), so it "wants" the
 * signal): the candidate makes the main thread SCHED_IDLE and pins it to
 * core A, then, on each call, computes only HEAD_PCT % of z = 2x + y on the
 * main thread, hands the rest to two worker threads (one pinned to core B,
 * starting at once; one pinned to core A, starting DELAY_US later so that
 * the main thread can answer first) and returns. While the workers run, the
 * SCHED_IDLE main thread cannot run to take the SIGSTOP; the group stop
 * happens when they are done, so the snapshot sees a complete, correct
 * output, and the clock saw HEAD_PCT % of the work.
 * Before the fix (the clock ended at the answer): ok at 2.7x and 1.9x
 * overall (8.9x and 5.5x on the unbatched N=4194304 shape; 1.1x when the
 * DELAY_US race was lost), seeds 7, 11 (23: 0.85x). Controls: HEAD_PCT=100
 * 0.95x; IDLE_MAIN=0 incorrect (the stop lands at once, the tail unwritten).
 * After it (on cpu the clock runs to the runner's confirmed stop, both
 * sides and the overhead probe): ok at 1.0x and 1.26x -- two threads on one
 * unbatched call, a parallelism every candidate may use.
 * Expected: ok at no more than its true speed (two threads: <= 2x), or
 * incorrect / rejected_cheat. */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <stdio.h>
#ifndef DEBUG
#define DEBUG 0
#endif
#include "kf_abi.h"
#ifndef HEAD_PCT
#define HEAD_PCT 5
#endif
#ifndef DELAY_US
#define DELAY_US 15
#endif
#ifndef IDLE_MAIN
#define IDLE_MAIN 1
#endif

static const float *gx, *gy;
static float *gz;
static int64_t glo, ghi;
static atomic_int gen, done_b, done_a;
static int started, cpu_a = -1, cpu_b = -1;

static void fwait(atomic_int *a, int v) { syscall(SYS_futex, a, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0); }
static void fwake(atomic_int *a) { syscall(SYS_futex, a, FUTEX_WAKE_PRIVATE, 64, NULL, NULL, 0); }
static void pin(int cpu)
{
    if (cpu < 0) return;
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    sched_setaffinity(0, sizeof(s), &s); /* 0: the calling thread (allowed) */
}
static void axpy(int64_t a, int64_t b)
{
    for (int64_t i = a; i < b; i++) gz[i] = 2.0f * gx[i] + gy[i];
}

static void *worker(void *arg)
{
    int is_a = (int)(intptr_t)arg;
    pin(is_a ? cpu_a : cpu_b);
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); /* precise DELAY_US */
    int seen = 0;
    for (;;) {
        int g;
        while ((g = atomic_load(&gen)) == seen) fwait(&gen, seen);
        seen = g;
        int64_t mid = glo + (ghi - glo) / 2;
        if (is_a) {
            struct timespec d = {0, (long)(DELAY_US * 1000.0)};
            nanosleep(&d, NULL); /* let the main thread answer first */
            axpy(mid, ghi);
            /* keep core A busy until B is done: the main thread must not take the SIGSTOP before */
            while (atomic_load(&done_b) != g) ;
            atomic_store(&done_a, g);
        } else {
            axpy(glo, mid);
            atomic_store(&done_b, g);
        }
    }
    return NULL;
}

int kf_entry(const kf_call *call)
{
    const int64_t N = call->sizes[0];
    if (!started) {
        started = 1;
        cpu_set_t s;
        CPU_ZERO(&s);
        sched_getaffinity(0, sizeof(s), &s);
        cpu_a = sched_getcpu();
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &s) && c != cpu_a) { cpu_b = c; break; }
        pin(cpu_a);
        pthread_t t;
        pthread_create(&t, NULL, worker, (void *)(intptr_t)1);
        pthread_create(&t, NULL, worker, (void *)(intptr_t)0);
        if (IDLE_MAIN) {
            struct sched_param sp = {0};
            int r = sched_setscheduler(0, SCHED_IDLE, &sp);
            if (DEBUG) fprintf(stderr, "g1: setscheduler %d policy %d cpu_a %d cpu_b %d\n", r, sched_getscheduler(0), cpu_a, cpu_b);
        }
    }
    /* the previous call's workers must be done (normally they were, before the stop landed) */
    while (atomic_load(&done_a) != atomic_load(&gen)) ;
    gx = call->inputs[0].data;
    gy = call->inputs[1].data;
    gz = call->outputs[0].data;
    int64_t head = N < 4096 ? N : N * HEAD_PCT / 100;
    axpy(0, head);
    if (head < N) {
        glo = head;
        ghi = N;
        atomic_fetch_add(&gen, 1);
        fwake(&gen);
    }
    return 0;
}
