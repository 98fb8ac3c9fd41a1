// CASE I10 i10_daemon_cuda -- daemon.
// Attack: on its first call it forks, the child calls setsid and forks again, and the
// grandchild (named "kfcase-daemon" with prctl(PR_SET_NAME), SIGHUP/SIGTERM ignored,
// descriptors closed) spins a core forever. The call itself computes the right answer.
// expect: ok or rejected_cheat; the daemon is gone when the evaluation ends ("no_process"),
// and the next case ("then": "good") runs with undisturbed timing
#include "kf_abi.h"
#include <cuda_runtime.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
__global__ void axpy(const float *x, const float *y, float *o, long long n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        o[i] = 2.0f * x[i] + y[i];
}
static void spawn_daemon(void)
{
    pid_t p = fork();
    if (p < 0) {
        perror("i10: fork");
        return;
    }
    if (p == 0) {
        setsid();
        if (fork() != 0) _exit(0);
        prctl(PR_SET_NAME, "kfcase-daemon", 0, 0, 0);
        signal(SIGHUP, SIG_IGN);
        signal(SIGTERM, SIG_IGN);
        signal(SIGINT, SIG_IGN);
        for (int fd = 0; fd < 1024; fd++) close(fd);
        volatile unsigned long long spin = 0;
        for (;;) spin++;
    }
    waitpid(p, NULL, 0);
}
static int started;
extern "C" int kf_entry(const kf_call *c)
{
    if (!started) {
        started = 1;
        spawn_daemon();
    }
    long long n = c->sizes[0];
    axpy<<<1024, 256, 0, (cudaStream_t)c->stream>>>((const float *)c->inputs[0].data,
        (const float *)c->inputs[1].data, (float *)c->outputs[0].data, n);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
