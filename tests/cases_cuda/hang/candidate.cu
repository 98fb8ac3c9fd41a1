// CASE R2 hang: spins on a device flag that is never set. expect: timeout
#include "kf_abi.h"
#include <cuda_runtime.h>
__global__ void spin(volatile int *flag)
{
    while (*flag == 0) { }
}
extern "C" int kf_entry(const kf_call *c)
{
    /* the poisoned output is never 0... so use a zeroed word of our own */
    int *f;
    cudaMalloc(&f, sizeof(int));
    cudaMemsetAsync(f, 0, sizeof(int), (cudaStream_t)c->stream);
    spin<<<1, 1, 0, (cudaStream_t)c->stream>>>(f);
    return 0;
}
