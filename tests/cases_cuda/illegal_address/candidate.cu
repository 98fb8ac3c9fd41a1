// CASE R1 illegal_address: writes far past its allocation. expect: runtime_error (illegal address)
#include "kf_abi.h"
#include <cuda_runtime.h>
__global__ void bad(float *o, long long n)
{
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) o[i + (1ll << 36)] = 1.0f; /* 256 GiB past the buffer */
}
extern "C" int kf_entry(const kf_call *c)
{
    long long n = c->sizes[0];
    bad<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)c->stream>>>((float *)c->outputs[0].data, n);
    return 0;
}
