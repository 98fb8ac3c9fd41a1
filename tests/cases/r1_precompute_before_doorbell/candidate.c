/* Red-team case (found by trying the judge as a hostile model would, 2026-11-30); see case.json for the expected verdict. */
/* a1_precompute_axpy: compute the outputs BEFORE the doorbell, inside the
 * judge's 2 ms CPU slack window. A helper thread sleeps-polls the output
* (budget in WALL time: the process CPU clock is tick-stale for a running thread)
 * tensor; once the judge's prep_inputs() has poisoned it (inputs final),
 * it computes as much of z = 2x+y as a CPU budget allows (measured on
 * CLOCK_PROCESS_CPUTIME_ID, what the judge reads), while the judge runs its
 * 64 MiB LLC flush. kf_entry then only finishes the rest. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include "kf_abi.h"
#ifndef BUDGET_NS
#define BUDGET_NS 1100000LL
#endif
static const float *volatile gx, *volatile gy;
static float *volatile gz;
static volatile int64_t gN;
static atomic_int armed, stop, busy, have;
static atomic_long done;
static int started;

static int64_t pcpu(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }
static int is_poison(const volatile float *p) { uint32_t u; memcpy(&u, (const void *)p, 4); return u == 0xffffffffu; }

static void *worker(void *arg)
{
    (void)arg;
    struct timespec sl = {0, 2000000};
    for (;;) {
        nanosleep(&sl, NULL);
        if (!atomic_load(&armed) || atomic_load(&have)) continue;
        int64_t N = gN;
        float *z = gz;
        if (!(is_poison(&z[0]) && is_poison(&z[N / 2]) && is_poison(&z[N - 1]))) continue;
        atomic_store(&busy, 1);
        if (atomic_load(&stop) || !atomic_load(&armed)) { atomic_store(&busy, 0); continue; }
        struct timespec d = {0, 150000}; /* let the poison memset drain */
        nanosleep(&d, NULL);
        int64_t c0 = pcpu();
        const float *x = gx, *y = gy;
        int64_t i = 0;
        atomic_store(&have, 1);
        while (i < N && !atomic_load(&stop) && pcpu() - c0 < BUDGET_NS) {
            int64_t e = i + 16384 < N ? i + 16384 : N;
            for (int64_t k = i; k < e; k++) z[k] = 2.0f * x[k] + y[k];
            i = e;
            atomic_store(&done, i);
        }
        atomic_store(&busy, 0);
    }
    return NULL;
}

int kf_entry(const kf_call *call)
{
    const int64_t N = call->sizes[0];
    const float *x = call->inputs[0].data, *y = call->inputs[1].data;
    float *z = call->outputs[0].data;
    if (!started) { pthread_t t; started = 1; if (BUDGET_NS > 0) pthread_create(&t, NULL, worker, NULL); }
    atomic_store(&stop, 1);
    while (atomic_load(&busy)) ;
    int64_t pre = 0;
    if (atomic_load(&armed) && atomic_load(&have) && gN == N && gz == z && gx == x) pre = atomic_load(&done);
    atomic_store(&armed, 0);
    for (int64_t i = pre; i < N; i++) z[i] = 2.0f * x[i] + y[i];
    if (N == 1048576 || N == 4194304) {
        gx = x; gy = y; gz = z; gN = N;
        atomic_store(&done, 0);
        atomic_store(&have, 0);
        atomic_store(&stop, 0);
        atomic_store(&armed, 1);
    }
    return 0;
}
