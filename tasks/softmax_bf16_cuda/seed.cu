/*
 * softmax_bf16_cuda seed: row softmax y = exp(x - rowmax) / sum(exp(x - rowmax)),
 * bf16 in and out, fp32 math.
 *
 * Ideas:
 *  - TPR threads cooperate on one row, RPB rows per block (short rows get a
 *    warp each instead of a whole block; rows are never split across blocks).
 *  - Online softmax: one read pass keeps a running (max, sum) per thread,
 *    rescaling the sum when the max grows; the pairs are merged with warp
 *    shuffles and, when a row spans several warps, through shared memory.
 *    A second pass writes exp(x - max) / sum rounded to bf16 (nearest-even).
 *  - VEC=8: 16-byte loads/stores of 8 bf16, used when N % 8 == 0 and x, y are
 *    16-byte aligned (checked at launch; otherwise the scalar path runs).
 *  - FAST_EXP=1: __expf (ex2.approx), FAST_EXP=0: accurate expf; either is
 *    far below bf16 resolution.
 * Every launch shape is legal for any tunable combination: RPB is clamped so
 * a block never exceeds 1024 threads.
 */
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include "kf_abi.h"

// kfarm:tune TPR=32,128,256,1024
// kfarm:tune RPB=1,2,4,8
// kfarm:tune VEC=1,8
// kfarm:tune FAST_EXP=0,1
#ifndef TPR
#define TPR 32
#endif
#ifndef RPB
#define RPB 2
#endif
#ifndef VEC
#define VEC 8
#endif
#ifndef FAST_EXP
#define FAST_EXP 1
#endif

static_assert(TPR % 32 == 0 && TPR >= 32 && TPR <= 1024, "TPR must be a multiple of 32 in [32, 1024]");
static_assert(RPB >= 1, "RPB >= 1");
static_assert(VEC == 1 || VEC == 8, "VEC is 1 or 8");

constexpr int kTPR = TPR;
constexpr int kRPB = (TPR * RPB > 1024) ? (1024 / TPR) : RPB;
constexpr int kBLOCK = kTPR * kRPB;
constexpr int kWPR = kTPR / 32; /* warps per row */

__device__ __forceinline__ float ex(float v)
{
#if FAST_EXP
    return __expf(v);
#else
    return expf(v);
#endif
}

struct MS {
    float m, s; /* running max, sum of exp(x - m) */
};

__device__ __forceinline__ void upd(MS &a, float v)
{
    if (v > a.m) {
        a.s = a.s * ex(a.m - v) + 1.0f; /* ex(-inf) = 0 on the first element */
        a.m = v;
    } else {
        a.s += ex(v - a.m);
    }
}

__device__ __forceinline__ MS combine(MS a, MS b)
{
    const float m = fmaxf(a.m, b.m);
    if (m == -INFINITY)
        return a; /* both empty */
    MS r;
    r.m = m;
    r.s = a.s * ex(a.m - m) + b.s * ex(b.m - m);
    return r;
}

/* Merge (max, sum) over the TPR threads of one row. Every thread of the
 * block must call this the same number of times (it may __syncthreads). */
__device__ __forceinline__ MS row_reduce(MS a, MS *sh)
{
    for (int o = 16; o > 0; o >>= 1) {
        MS b;
        b.m = __shfl_xor_sync(0xffffffffu, a.m, o);
        b.s = __shfl_xor_sync(0xffffffffu, a.s, o);
        a = combine(a, b);
    }
    if (kWPR > 1) {
        const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
        if (lane == 0)
            sh[warp] = a;
        __syncthreads();
        const int first = (warp / kWPR) * kWPR;
        a = sh[first];
        for (int w = 1; w < kWPR; w++)
            a = combine(a, sh[first + w]);
        __syncthreads();
    }
    return a;
}

union Pack8 {
    uint4 u;
    __nv_bfloat162 h[4];
};

template <int V>
__global__ void __launch_bounds__(kBLOCK) softmax_seed(const __nv_bfloat16 *__restrict__ x,
                                                       __nv_bfloat16 *__restrict__ y, long long M, long long N)
{
    __shared__ MS sh[kBLOCK / 32];
    const int r = threadIdx.x / kTPR, t = threadIdx.x % kTPR;
    for (long long m0 = (long long)blockIdx.x * kRPB; m0 < M; m0 += (long long)gridDim.x * kRPB) {
        const long long m = m0 + r;
        const bool valid = m < M;
        MS a;
        a.m = -INFINITY;
        a.s = 0.0f;
        if (valid) {
            const __nv_bfloat16 *xr = x + m * N;
            if (V == 8) {
                const uint4 *x8 = (const uint4 *)xr;
                for (long long i = t; i < N / 8; i += kTPR) {
                    Pack8 p;
                    p.u = x8[i];
#pragma unroll
                    for (int k = 0; k < 4; k++) {
                        const float2 f = __bfloat1622float2(p.h[k]);
                        upd(a, f.x);
                        upd(a, f.y);
                    }
                }
            } else {
                for (long long n = t; n < N; n += kTPR)
                    upd(a, __bfloat162float(xr[n]));
            }
        }
        a = row_reduce(a, sh);
        if (valid) {
            const __nv_bfloat16 *xr = x + m * N;
            __nv_bfloat16 *yr = y + m * N;
            const float inv = 1.0f / a.s;
            if (V == 8) {
                const uint4 *x8 = (const uint4 *)xr;
                uint4 *y8 = (uint4 *)yr;
                for (long long i = t; i < N / 8; i += kTPR) {
                    Pack8 p, q;
                    p.u = x8[i];
#pragma unroll
                    for (int k = 0; k < 4; k++) {
                        const float2 f = __bfloat1622float2(p.h[k]);
                        q.h[k] = __floats2bfloat162_rn(ex(f.x - a.m) * inv, ex(f.y - a.m) * inv);
                    }
                    y8[i] = q.u;
                }
            } else {
                for (long long n = t; n < N; n += kTPR)
                    yr[n] = __float2bfloat16(ex(__bfloat162float(xr[n]) - a.m) * inv);
            }
        }
    }
}

int kf_entry(const kf_call *call)
{
    if (call->n_inputs != 1 || call->n_outputs != 1 || call->n_sizes != 2)
        return 1;
    const long long M = call->sizes[0], N = call->sizes[1];
    const __nv_bfloat16 *x = (const __nv_bfloat16 *)call->inputs[0].data;
    __nv_bfloat16 *y = (__nv_bfloat16 *)call->outputs[0].data;
    cudaStream_t stream = (cudaStream_t)call->stream;
    long long blocks = (M + kRPB - 1) / kRPB;
    if (blocks > 1048576)
        blocks = 1048576;
    const bool vec = VEC == 8 && N % 8 == 0 && ((uintptr_t)x & 15) == 0 && ((uintptr_t)y & 15) == 0;
    if (vec)
        softmax_seed<8><<<(unsigned)blocks, kBLOCK, 0, stream>>>(x, y, M, N);
    else
        softmax_seed<1><<<(unsigned)blocks, kBLOCK, 0, stream>>>(x, y, M, N);
    return (int)cudaGetLastError();
}
