// CASE T1 async: busy-waits ~2 ms on the device clock (%globaltimer), then writes the answer;
// returns at once.
// expect: ok, candidate time >= 2000 us (both variants within noise of each other)
#include "kf_abi.h"
#include <cuda_runtime.h>
__device__ unsigned long long gtimer()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
__global__ void slow_axpy(const float *x, const float *y, float *o, long long n)
{
    if (threadIdx.x == 0) {
        unsigned long long t0 = gtimer();
        while (gtimer() - t0 < 2000000ull) { }
    }
    __syncthreads();
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        o[i] = 2.0f * x[i] + y[i];
}
extern "C" int kf_entry(const kf_call *c)
{
    long long n = c->sizes[0];
    slow_axpy<<<1024, 256, 0, (cudaStream_t)c->stream>>>((const float *)c->inputs[0].data,
        (const float *)c->inputs[1].data, (float *)c->outputs[0].data, n);
    
    return 0;
}
