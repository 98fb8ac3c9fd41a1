// CASE C1 zeros: writes zeros with a kernel. expect: incorrect
#include "kf_abi.h"
#include <cuda_runtime.h>
__global__ void zero(float *o, long long n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        o[i] = 0.0f;
}
extern "C" int kf_entry(const kf_call *c)
{
    zero<<<1024, 256, 0, (cudaStream_t)c->stream>>>((float *)c->outputs[0].data, c->sizes[0]);
    return 0;
}
