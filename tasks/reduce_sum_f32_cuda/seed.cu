/*
 * reduce_sum_f32_cuda seed: row sums y[m] = sum_n x[m,n] (M = 1: one long vector).
 *
 * Ideas:
 *  - Long rows are cut into P chunks of BLOCK*VEC*ITEMS elements (P <= 1024
 *    and M*P <= 1M partials, the 4 MiB workspace); one block per chunk. Each
 *    thread keeps four independent accumulators and issues four loads per
 *    step (bytes in flight hide DRAM latency). Partials go to the workspace
 *    and one warp per row adds them; with P == 1 the block writes y directly.
 *  - VEC=4: float4 loads, used when N % 4 == 0 and x is 16-byte aligned.
 *  - SMALL=1: rows of at most 4096 elements get one warp each (8 rows per
 *    block) instead of a whole block.
 * fp32 accumulation; every combination is correct for any M, N.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include "kf_abi.h"

// kfarm:tune BLOCK=128,256,512,1024
// kfarm:tune VEC=1,4
// kfarm:tune ITEMS=4,16,64
// kfarm:tune SMALL=0,1
#ifndef BLOCK
#define BLOCK 512
#endif
#ifndef VEC
#define VEC 4
#endif
#ifndef ITEMS
#define ITEMS 16
#endif
#ifndef SMALL
#define SMALL 1
#endif

static_assert(BLOCK % 32 == 0 && BLOCK >= 32 && BLOCK <= 1024, "BLOCK must be a multiple of 32 in [32, 1024]");
static_assert(VEC == 1 || VEC == 4, "VEC is 1 or 4");
static_assert(ITEMS >= 1, "ITEMS >= 1");

#define WS_FLOATS (1 << 20)
#define SMALL_MAX 4096

template <int V> struct vec_of;
template <> struct vec_of<1> {
    typedef float type;
    static __device__ __forceinline__ float sum(float v) { return v; }
};
template <> struct vec_of<4> {
    typedef float4 type;
    static __device__ __forceinline__ float sum(float4 v) { return (v.x + v.y) + (v.z + v.w); }
};

/* Sum of the elements [i0, i1) of row vector r (in units of V floats),
 * strided by `stride` starting at i0 + t. */
template <int V>
__device__ __forceinline__ float strided_sum(const typename vec_of<V>::type *__restrict__ r, long long i0,
                                             long long i1, int t, int stride)
{
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    long long i = i0 + t;
    for (; i + 3LL * stride < i1; i += 4LL * stride) {
        const typename vec_of<V>::type v0 = r[i], v1 = r[i + stride], v2 = r[i + 2LL * stride],
                                       v3 = r[i + 3LL * stride];
        a0 += vec_of<V>::sum(v0);
        a1 += vec_of<V>::sum(v1);
        a2 += vec_of<V>::sum(v2);
        a3 += vec_of<V>::sum(v3);
    }
    for (; i < i1; i += stride)
        a0 += vec_of<V>::sum(r[i]);
    return (a0 + a1) + (a2 + a3);
}

__device__ __forceinline__ float warp_sum(float s)
{
    for (int o = 16; o > 0; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    return s;
}

template <int V>
__global__ void __launch_bounds__(BLOCK) chunk_sums(const float *__restrict__ x, float *__restrict__ out,
                                                    long long M, long long N, long long P, long long chunk)
{
    typedef typename vec_of<V>::type T;
    __shared__ float sh[BLOCK / 32];
    const long long NV = N / V; /* V == 4 only when N % 4 == 0 */
    for (long long b = blockIdx.x; b < M * P; b += gridDim.x) {
        const long long m = b / P, p = b % P;
        const long long i0 = p * chunk, i1 = i0 + chunk < NV ? i0 + chunk : NV;
        float s = strided_sum<V>((const T *)(x + m * N), i0, i1, threadIdx.x, BLOCK);
        s = warp_sum(s);
        if ((threadIdx.x & 31) == 0)
            sh[threadIdx.x >> 5] = s;
        __syncthreads();
        if (threadIdx.x < 32) {
            float t = threadIdx.x < BLOCK / 32 ? sh[threadIdx.x] : 0.0f;
            t = warp_sum(t);
            if (threadIdx.x == 0)
                out[b] = t; /* P == 1: out is y and b == m */
        }
        __syncthreads();
    }
}

/* One warp per row: y[m] = sum of row m of a (M x L) matrix of V-vectors. */
template <int V>
__global__ void warp_rows(const float *__restrict__ a, float *__restrict__ y, long long M, long long L)
{
    typedef typename vec_of<V>::type T;
    const int lane = threadIdx.x & 31;
    const long long warps = (long long)gridDim.x * (blockDim.x / 32);
    for (long long m = (long long)blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5); m < M; m += warps) {
        float s = strided_sum<V>((const T *)(a + m * L * V), 0, L, lane, 32);
        s = warp_sum(s);
        if (lane == 0)
            y[m] = s;
    }
}

static unsigned grid_for(long long blocks) { return (unsigned)(blocks < 1048576 ? blocks : 1048576); }

int kf_entry(const kf_call *call)
{
    if (call->n_inputs != 1 || call->n_outputs != 1 || call->n_sizes != 2)
        return 1;
    const long long M = call->sizes[0], N = call->sizes[1];
    const float *x = (const float *)call->inputs[0].data;
    float *y = (float *)call->outputs[0].data;
    float *ws = (float *)call->workspace;
    cudaStream_t stream = (cudaStream_t)call->stream;
    const bool vec = VEC == 4 && N % 4 == 0 && ((uintptr_t)x & 15) == 0;

    if (SMALL && N <= SMALL_MAX) {
        if (vec)
            warp_rows<4><<<grid_for((M + 7) / 8), 256, 0, stream>>>(x, y, M, N / 4);
        else
            warp_rows<1><<<grid_for((M + 7) / 8), 256, 0, stream>>>(x, y, M, N);
        return (int)cudaGetLastError();
    }

    const long long V = vec ? 4 : 1, NV = N / V;
    long long chunk = (long long)BLOCK * ITEMS; /* in V-vectors */
    long long P = (NV + chunk - 1) / chunk;
    if (P > 1024)
        P = 1024;
    if (P > WS_FLOATS / M)
        P = WS_FLOATS / M;
    if (ws == NULL || call->workspace_bytes < (size_t)(M * P) * sizeof(float))
        P = 1;
    if (P < 1)
        P = 1;
    chunk = (NV + P - 1) / P;
    float *out = P == 1 ? y : ws;
    if (vec)
        chunk_sums<4><<<grid_for(M * P), BLOCK, 0, stream>>>(x, out, M, N, P, chunk);
    else
        chunk_sums<1><<<grid_for(M * P), BLOCK, 0, stream>>>(x, out, M, N, P, chunk);
    if (P > 1)
        warp_rows<1><<<grid_for((M + 7) / 8), 256, 0, stream>>>(ws, y, M, P);
    return (int)cudaGetLastError();
}
