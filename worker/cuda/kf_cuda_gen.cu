/*
 * kf_cuda_gen.cu -- the judge's own kernels (prefix kf_cuda_gen_): in-place
 * input generation and byte comparison of two device ranges. Built only with
 * KFARM_HAVE_CUDA, for every architecture the worker supports (SASS for
 * sm_75..sm_90 and PTX for newer ones, CMakeLists.txt), and launched on the
 * judge's own stream in the judge's own context, never in a runner.
 *
 * Generation: element i of a tensor is gen.h's kf_gen_value(g, i), the same
 * bits as the host's kf_inputs_gen_fill (grid-stride loop, one element per
 * thread per step). 64 MiB of f32 takes ~30 µs on an H200 (memory-bound,
 * 4.8 TB/s) against ~0.3 s for a host fill plus a pageable upload.
 *
 * Comparison: 32-bit words where both ranges are 4-byte aligned (bytes
 * otherwise); the smallest differing word index is kept with atomicMin, so
 * the reported first difference is the true first one.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include "gen.h"

__global__ void kf_cuda_gen_kernel(void *buf, int64_t n, kf_gen_spec g)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        kf_gen_store(buf, g.dtype, (uint64_t)i, kf_gen_value(&g, (uint64_t)i));
}

__global__ void kf_cuda_same_kernel(const unsigned char *a, const unsigned char *b, uint64_t n, int words,
                                    unsigned long long *first)
{
    uint64_t step = (uint64_t)gridDim.x * blockDim.x;
    uint64_t count = words ? n / 4 : n;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step) {
        int diff = words ? ((const uint32_t *)a)[i] != ((const uint32_t *)b)[i] : a[i] != b[i];
        if (diff) {
            atomicMin(first, (unsigned long long)(words ? i * 4 : i));
            return;
        }
    }
    if (words && threadIdx.x == 0 && blockIdx.x == 0)
        for (uint64_t k = count * 4; k < n; k++)
            if (a[k] != b[k]) atomicMin(first, (unsigned long long)k);
}

static unsigned grid_for(uint64_t n)
{
    uint64_t g = (n + 255) / 256;
    return (unsigned)(g < 1 ? 1 : g > 8192 ? 8192 : g);
}

/* Queue the fill of n elements of g's dtype at dptr on stream s. 0 or a cudaError_t. */
extern "C" int kf_cuda_gen_launch(uint64_t dptr, int64_t n, const kf_gen_spec *g, cudaStream_t s)
{
    if (n <= 0) return 0;
    kf_cuda_gen_kernel<<<grid_for((uint64_t)n), 256, 0, s>>>((void *)(uintptr_t)dptr, n, *g);
    return (int)cudaGetLastError();
}

/* Compare n bytes at a and b on stream s (scratch: 8 bytes of device memory)
 * and wait: 1 equal, 0 different (*first = first differing byte), -1 error. */
extern "C" int kf_cuda_gen_same(uint64_t a, uint64_t b, uint64_t n, void *scratch, uint64_t *first, cudaStream_t s)
{
    if (!n) return 1;
    unsigned long long init = ~0ULL, got = ~0ULL;
    int words = (a % 4 == 0) && (b % 4 == 0);
    if (cudaMemcpyAsync(scratch, &init, sizeof(init), cudaMemcpyHostToDevice, s) != cudaSuccess) return -1;
    kf_cuda_same_kernel<<<grid_for(words ? n / 4 + 1 : n), 256, 0, s>>>(
        (const unsigned char *)(uintptr_t)a, (const unsigned char *)(uintptr_t)b, n, words,
        (unsigned long long *)scratch);
    if (cudaGetLastError() != cudaSuccess) return -1;
    if (cudaMemcpyAsync(&got, scratch, sizeof(got), cudaMemcpyDeviceToHost, s) != cudaSuccess) return -1;
    if (cudaStreamSynchronize(s) != cudaSuccess) return -1;
    if (got == ~0ULL) return 1;
    *first = got;
    return 0;
}
