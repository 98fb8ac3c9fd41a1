// CASE B1 wrong_arch: uses setmaxnreg, an sm_90a-only instruction (also not in plain sm_90).
// expect on sm_86 / plain sm_90: unsupported (arch), never incorrect, never timed.
#include "kf_abi.h"
#include <cuda_runtime.h>
__global__ void __launch_bounds__(128) axpy(const float *x, const float *y, float *o, long long n)
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::);
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) o[i] = 2.0f * x[i] + y[i];
}
extern "C" int kf_entry(const kf_call *c)
{
    long long n = c->sizes[0];
    axpy<<<(unsigned)((n + 127) / 128), 128, 0, (cudaStream_t)c->stream>>>((const float *)c->inputs[0].data,
        (const float *)c->inputs[1].data, (float *)c->outputs[0].data, n);
    return 0;
}
