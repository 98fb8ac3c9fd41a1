// CASE C4 half_writer: writes only the first half of the output. expect: incorrect (not written)
#include "kf_abi.h"
#include <cuda_runtime.h>
__global__ void axpy(const float *x, const float *y, float *o, long long n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        o[i] = 2.0f * x[i] + y[i];
}
extern "C" int kf_entry(const kf_call *c)
{
    long long n = c->sizes[0] / 2;
    if (n < 1) n = 1;
    axpy<<<1024, 256, 0, (cudaStream_t)c->stream>>>((const float *)c->inputs[0].data,
        (const float *)c->inputs[1].data, (float *)c->outputs[0].data, n);
    return 0;
}
