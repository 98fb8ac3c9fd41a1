// CASE I13 i13_l2_persist -- device state left for the baseline.
// Attack: an honest axpy on the task stream; after the launch it sets the device-wide
// persisting-L2 limit to its maximum (cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize))
// and an access-policy window (persisting, hitRatio 1) over a junk 32 MiB buffer on the task
// stream, on every call. If the baseline shares the context, the stream or the device-wide
// L2 setting, its normal accesses lose most of the L2 and it gets slower, so the candidate
// looks faster. (H200, 2M-element axpy: baseline 12.4 us clean, 22.8 us after this.)
// expect: ok, and this evaluation's baseline time within 25% of the plain good case's
// ("baseline_like": "good")
#include "kf_abi.h"
#include <cuda_runtime.h>
__global__ void axpy(const float *x, const float *y, float *o, long long n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        o[i] = 2.0f * x[i] + y[i];
}
static void *junk;
extern "C" int kf_entry(const kf_call *c)
{
    cudaStream_t s = (cudaStream_t)c->stream;
    long long n = c->sizes[0];
    long long blocks = (n + 255) / 256;
    if (blocks > 4096) blocks = 4096;
    axpy<<<(unsigned)blocks, 256, 0, s>>>((const float *)c->inputs[0].data, (const float *)c->inputs[1].data,
                                          (float *)c->outputs[0].data, n);
    if (cudaGetLastError() != cudaSuccess) return 1;
    const size_t junk_bytes = 32u << 20;
    if (!junk && cudaMalloc(&junk, junk_bytes) != cudaSuccess) junk = NULL;
    int dev = 0, max_persist = 0, max_window = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&max_persist, cudaDevAttrMaxPersistingL2CacheSize, dev);
    cudaDeviceGetAttribute(&max_window, cudaDevAttrMaxAccessPolicyWindowSize, dev);
    if (max_persist > 0) cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, (size_t)max_persist);
    if (junk && max_window > 0) {
        cudaStreamAttrValue v = {};
        v.accessPolicyWindow.base_ptr = junk;
        v.accessPolicyWindow.num_bytes = junk_bytes < (size_t)max_window ? junk_bytes : (size_t)max_window;
        v.accessPolicyWindow.hitRatio = 1.0f;
        v.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
        v.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
        cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &v);
    }
    cudaGetLastError(); /* the state calls may be refused: the kernel is what counts */
    return 0;
}
