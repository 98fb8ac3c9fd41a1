// CASE C6 cached_kernel: remembers its answer per input pointer and replays it with a copy
// kernel (so it always launches a kernel on the task stream). Validation uses fresh buffers;
// the timed loop reuses buffers with changed inputs, so the replayed answer is stale.
// expect: incorrect (validation) or rejected_cheat (timed-output check); ok at its honest cost
// (speedup <= 1.5) when calls rotate over several input sets (batches): the pointer then
// never repeats back to back. cached_kernel_table is the variant that hits there too.
#include "kf_abi.h"
#include <cuda_runtime.h>
__global__ void axpy(const float *x, const float *y, float *o, long long n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        o[i] = 2.0f * x[i] + y[i];
}
__global__ void copy(const float *s, float *o, long long n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        o[i] = s[i];
}
static const void *last_x;
static float *memo;
static long long memo_n;
static int calls_with_x;
extern "C" int kf_entry(const kf_call *c)
{
    long long n = c->sizes[0];
    cudaStream_t s = (cudaStream_t)c->stream;
    float *o = (float *)c->outputs[0].data;
    if (last_x == c->inputs[0].data && memo_n == n && ++calls_with_x > 4) {
        copy<<<1024, 256, 0, s>>>(memo, o, n); /* stale after the first few calls */
        return 0;
    }
    axpy<<<1024, 256, 0, s>>>((const float *)c->inputs[0].data, (const float *)c->inputs[1].data, o, n);
    if (last_x != c->inputs[0].data || memo_n != n) {
        if (memo) cudaFree(memo);
        cudaMalloc(&memo, n * sizeof(float));
        calls_with_x = 0;
    }
    copy<<<1024, 256, 0, s>>>(o, memo, n);
    last_x = c->inputs[0].data;
    memo_n = n;
    return 0;
}
