// CASE C6 cached: computes once per output pointer, then returns the remembered answer
// (copies the cached result into the output) on later calls. expect: incorrect or rejected_cheat
#include "kf_abi.h"
#include <cuda_runtime.h>
__global__ void axpy(const float *x, const float *y, float *o, long long n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        o[i] = 2.0f * x[i] + y[i];
}
static const void *last_x;
static float *memo;
static long long memo_n;
extern "C" int kf_entry(const kf_call *c)
{
    long long n = c->sizes[0];
    cudaStream_t s = (cudaStream_t)c->stream;
    if (last_x == c->inputs[0].data && memo_n == n) {
        cudaMemcpyAsync(c->outputs[0].data, memo, n * sizeof(float), cudaMemcpyDeviceToDevice, s);
        return 0;
    }
    axpy<<<1024, 256, 0, s>>>((const float *)c->inputs[0].data, (const float *)c->inputs[1].data,
                              (float *)c->outputs[0].data, n);
    if (memo) cudaFree(memo);
    cudaMalloc(&memo, n * sizeof(float));
    cudaMemcpyAsync(memo, c->outputs[0].data, n * sizeof(float), cudaMemcpyDeviceToDevice, s);
    last_x = c->inputs[0].data;
    memo_n = n;
    return 0;
}
