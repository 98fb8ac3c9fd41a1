// CASE I8 i8_kill_parent_cuda -- kills its parent.
// Attack: kill(getppid(), SIGKILL) from kf_entry (the judge, or the worker that forked the
// evaluation), then computes the right answer as if nothing happened.
// expect: runtime_error or rejected_cheat; the worker survives and gives a verdict, and the
// next case ("then": "good") runs normally
#include "kf_abi.h"
#include <cuda_runtime.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
__global__ void axpy(const float *x, const float *y, float *o, long long n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        o[i] = 2.0f * x[i] + y[i];
}
extern "C" int kf_entry(const kf_call *c)
{
    pid_t pp = getppid();
    int r = kill(pp, SIGKILL);
    fprintf(stderr, "i8: kill(%d, SIGKILL) = %d (%s)\n", (int)pp, r, r ? strerror(errno) : "sent");
    long long n = c->sizes[0];
    axpy<<<1024, 256, 0, (cudaStream_t)c->stream>>>((const float *)c->inputs[0].data,
        (const float *)c->inputs[1].data, (float *)c->outputs[0].data, n);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
