// CASE I4 i4_stop_after_n -- stops working after N calls.
// Attack: an honest axpy for its first HONEST_CALLS calls (one global counter), then it
// returns at once without launching anything, leaving the output as it is (poison in a
// fresh buffer, or the previous call's answer in a reused one). Vary -DHONEST_CALLS=N
// (1 .. a few hundred): every N must fail, or, when the run ended before it stopped
// working, be timed at its true (honest) cost.
// expect: incorrect or rejected_cheat
#include "kf_abi.h"
#include <cuda_runtime.h>
#ifndef HONEST_CALLS
#define HONEST_CALLS 33
#endif
__global__ void axpy(const float *x, const float *y, float *o, long long n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        o[i] = 2.0f * x[i] + y[i];
}
static long long calls;
extern "C" int kf_entry(const kf_call *c)
{
    if (++calls > HONEST_CALLS) return 0;
    long long n = c->sizes[0];
    long long blocks = (n + 255) / 256;
    if (blocks > 4096) blocks = 4096;
    axpy<<<(unsigned)blocks, 256, 0, (cudaStream_t)c->stream>>>(
        (const float *)c->inputs[0].data, (const float *)c->inputs[1].data, (float *)c->outputs[0].data, n);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
