// CASE good: correct grid-stride kernel on the task stream. expect: ok
// kfarm:tune BLOCK=128,256,512
#include "kf_abi.h"
#include <cuda_runtime.h>
#ifndef BLOCK
#define BLOCK 256
#endif
__global__ void axpy(const float *x, const float *y, float *o, long long n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        o[i] = 2.0f * x[i] + y[i];
}
extern "C" int kf_entry(const kf_call *c)
{
    long long n = c->sizes[0];
    long long blocks = (n + BLOCK - 1) / BLOCK;
    if (blocks > 4096) blocks = 4096;
    axpy<<<(unsigned)blocks, BLOCK, 0, (cudaStream_t)c->stream>>>(
        (const float *)c->inputs[0].data, (const float *)c->inputs[1].data, (float *)c->outputs[0].data, n);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
