// CASE C6 cached_kernel_table: cached_kernel with a table of answers, one per input pointer
// (up to 64), so that it also hits when the judge rotates calls over several input sets
// (a batch: several calls per doorbell, each on its own set, the same sets every batch).
// After the first few calls on a pointer it replays that pointer's answer with a copy kernel.
// Every timed call gets fresh input values, so every replayed answer is stale.
// expect: incorrect (validation or a checked call/batch) or rejected_cheat
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
#define SLOTS 64
static struct { const void *x; long long n; float *memo; int calls; } tab[SLOTS];
static int used;
extern "C" int kf_entry(const kf_call *c)
{
    long long n = c->sizes[0];
    cudaStream_t s = (cudaStream_t)c->stream;
    float *o = (float *)c->outputs[0].data;
    int k = 0;
    while (k < used && !(tab[k].x == c->inputs[0].data && tab[k].n == n)) k++;
    if (k < used && ++tab[k].calls > 2) {
        copy<<<1024, 256, 0, s>>>(tab[k].memo, o, n); /* stale: the inputs changed */
        return 0;
    }
    axpy<<<1024, 256, 0, s>>>((const float *)c->inputs[0].data, (const float *)c->inputs[1].data, o, n);
    if (k == used) {
        if (used == SLOTS) return 0; /* table full: computed honestly, not remembered */
        tab[k].x = c->inputs[0].data;
        tab[k].n = n;
        tab[k].calls = 0;
        if (cudaMalloc(&tab[k].memo, n * sizeof(float)) != cudaSuccess) return 0;
        used++;
    }
    copy<<<1024, 256, 0, s>>>(o, tab[k].memo, n);
    return 0;
}
