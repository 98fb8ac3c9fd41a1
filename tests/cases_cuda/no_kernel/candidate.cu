// CASE C10 no_kernel: defines a kernel but computes on the host (copy in, compute, copy out).
// expect: rejected_cheat (no kernel)
#include "kf_abi.h"
#include <cuda_runtime.h>
#include <stdlib.h>
__global__ void never_launched(float *o) { o[0] = 0; }
extern "C" int kf_entry(const kf_call *c)
{
    long long n = c->sizes[0];
    size_t b = n * sizeof(float);
    float *x = (float *)malloc(b), *y = (float *)malloc(b);
    cudaMemcpy(x, c->inputs[0].data, b, cudaMemcpyDeviceToHost);
    cudaMemcpy(y, c->inputs[1].data, b, cudaMemcpyDeviceToHost);
    for (long long i = 0; i < n; i++) x[i] = 2.0f * x[i] + y[i];
    cudaMemcpy(c->outputs[0].data, x, b, cudaMemcpyHostToDevice);
    free(x);
    free(y);
    return 0;
}
