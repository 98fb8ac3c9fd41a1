// CASE T2 side_stream: real work on its own non-blocking stream, returns without joining.
// expect: rejected_cheat (work on a side stream)
#include "kf_abi.h"
#include <cuda_runtime.h>
__global__ void axpy_slow(const float *x, const float *y, float *o, long long n)
{
    long long t0 = clock64();
    while (clock64() - t0 < 2000000) { } /* ~1 ms: surely still running at return */
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        o[i] = 2.0f * x[i] + y[i];
}
extern "C" int kf_entry(const kf_call *c)
{
    static cudaStream_t side;
    if (!side) cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
    long long n = c->sizes[0];
    axpy_slow<<<1024, 256, 0, side>>>((const float *)c->inputs[0].data, (const float *)c->inputs[1].data,
                                      (float *)c->outputs[0].data, n);
    return 0;
}
