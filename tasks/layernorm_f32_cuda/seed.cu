/*
 * layernorm_f32_cuda seed: y = (x - mean) / sqrt(var + 1e-5) * gamma + beta per
 * row (biased variance).
 *
 * Ideas:
 *  - TPR threads cooperate on one row, RPB rows per block (short rows get a
 *    warp each instead of a whole block).
 *  - STATS selects how the row statistics are computed:
 *      0: one pass of shifted sums, d = x - x[row,0]: sum(d), sum(d^2)
 *         (shifting by a sample of the row keeps E[d^2] - E[d]^2 accurate);
 *      1: two passes (mean, then sum of squared deviations);
 *      2: one pass of per-thread Welford (count, mean, M2), merged with
 *         Chan's formula.
 *    The statistics are merged with warp shuffles and, when a row spans
 *    several warps, through shared memory. A final pass writes y.
 *  - VEC=4: float4 loads/stores, used when N % 4 == 0 and every pointer is
 *    16-byte aligned (checked at launch; otherwise the scalar path runs).
 * RPB is clamped so a block never exceeds 1024 threads.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include "kf_abi.h"

// kfarm:tune TPR=32,128,256,1024
// kfarm:tune RPB=1,2,4,8
// kfarm:tune VEC=1,4
// kfarm:tune STATS=0,1,2
#ifndef TPR
#define TPR 128
#endif
#ifndef RPB
#define RPB 2
#endif
#ifndef VEC
#define VEC 4
#endif
#ifndef STATS
#define STATS 0
#endif

static_assert(TPR % 32 == 0 && TPR >= 32 && TPR <= 1024, "TPR must be a multiple of 32 in [32, 1024]");
static_assert(RPB >= 1, "RPB >= 1");
static_assert(VEC == 1 || VEC == 4, "VEC is 1 or 4");
static_assert(STATS >= 0 && STATS <= 2, "STATS is 0, 1 or 2");

constexpr int kTPR = TPR;
constexpr int kRPB = (TPR * RPB > 1024) ? (1024 / TPR) : RPB;
constexpr int kBLOCK = kTPR * kRPB;
constexpr int kWPR = kTPR / 32; /* warps per row */

/* Welford state; also used as a plain (a, b) pair of sums with n unused. */
struct St {
    float n, a, b;
};

__device__ __forceinline__ St merge(St x, St y)
{
#if STATS == 2
    const float n = x.n + y.n;
    if (n == 0.0f)
        return x;
    const float d = y.a - x.a, fy = y.n / n;
    St r;
    r.n = n;
    r.a = x.a + d * fy;
    r.b = x.b + y.b + d * d * x.n * fy;
    return r;
#else
    St r;
    r.n = 0.0f;
    r.a = x.a + y.a;
    r.b = x.b + y.b;
    return r;
#endif
}

/* Merge over the TPR threads of one row. Every thread of the block must call
 * this the same number of times (it may __syncthreads). */
__device__ __forceinline__ St row_reduce(St v, St *sh)
{
    for (int o = 16; o > 0; o >>= 1) {
        St w;
        w.n = __shfl_xor_sync(0xffffffffu, v.n, o);
        w.a = __shfl_xor_sync(0xffffffffu, v.a, o);
        w.b = __shfl_xor_sync(0xffffffffu, v.b, o);
        v = merge(v, w);
    }
    if (kWPR > 1) {
        const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
        if (lane == 0)
            sh[warp] = v;
        __syncthreads();
        const int first = (warp / kWPR) * kWPR;
        v = sh[first];
        for (int w = 1; w < kWPR; w++)
            v = merge(v, sh[first + w]);
        __syncthreads();
    }
    return v;
}

/* Accumulate one element into the per-thread state (STATS 0 and 2), or into a
 * plain sum of (v - c) and (v - c)^2 (c = shift or mean). */
__device__ __forceinline__ void acc(St &s, float v, float c)
{
#if STATS == 2
    s.n += 1.0f;
    const float d = v - s.a;
    s.a += __fdividef(d, s.n);
    s.b += d * (v - s.a);
#else
    const float d = v - c;
    s.a += d;
    s.b += d * d;
#endif
}

template <int V>
__device__ __forceinline__ St row_pass(const float *__restrict__ xr, long long N, int t, float c)
{
    St s;
    s.n = 0.0f;
    s.a = 0.0f;
    s.b = 0.0f;
    if (V == 4) {
        const float4 *x4 = (const float4 *)xr;
        for (long long i = t; i < N / 4; i += kTPR) {
            const float4 v = x4[i];
            acc(s, v.x, c);
            acc(s, v.y, c);
            acc(s, v.z, c);
            acc(s, v.w, c);
        }
    } else {
        for (long long n = t; n < N; n += kTPR)
            acc(s, xr[n], c);
    }
    return s;
}

template <int V>
__global__ void __launch_bounds__(kBLOCK) layernorm_seed(const float *__restrict__ x,
                                                         const float *__restrict__ gamma,
                                                         const float *__restrict__ beta,
                                                         float *__restrict__ y, long long M, long long N)
{
    __shared__ St sh[kBLOCK / 32];
    const int r = threadIdx.x / kTPR, t = threadIdx.x % kTPR;
    const float fN = (float)N;
    for (long long m0 = (long long)blockIdx.x * kRPB; m0 < M; m0 += (long long)gridDim.x * kRPB) {
        const long long m = m0 + r;
        const bool valid = m < M;
        const float *xr = x + (valid ? m : 0) * N;
        float mean, var;
#if STATS == 0
        const float shift = valid ? xr[0] : 0.0f;
        St s = valid ? row_pass<V>(xr, N, t, shift) : St{0.0f, 0.0f, 0.0f};
        s = row_reduce(s, sh);
        const float md = s.a / fN;
        mean = shift + md;
        var = fmaxf(s.b / fN - md * md, 0.0f);
#elif STATS == 1
        St s = valid ? row_pass<V>(xr, N, t, 0.0f) : St{0.0f, 0.0f, 0.0f};
        s = row_reduce(s, sh);
        mean = s.a / fN;
        s = valid ? row_pass<V>(xr, N, t, mean) : St{0.0f, 0.0f, 0.0f};
        s = row_reduce(s, sh);
        var = s.b / fN;
#else
        St s = valid ? row_pass<V>(xr, N, t, 0.0f) : St{0.0f, 0.0f, 0.0f};
        s = row_reduce(s, sh);
        mean = s.a;
        var = s.b / fN;
#endif
        const float rstd = rsqrtf(var + 1e-5f);
        if (valid) {
            float *yr = y + m * N;
            if (V == 4) {
                const float4 *x4 = (const float4 *)xr, *g4 = (const float4 *)gamma, *b4 = (const float4 *)beta;
                float4 *y4 = (float4 *)yr;
                for (long long i = t; i < N / 4; i += kTPR) {
                    const float4 v = x4[i], g = g4[i], b = b4[i];
                    y4[i] = make_float4((v.x - mean) * rstd * g.x + b.x, (v.y - mean) * rstd * g.y + b.y,
                                        (v.z - mean) * rstd * g.z + b.z, (v.w - mean) * rstd * g.w + b.w);
                }
            } else {
                for (long long n = t; n < N; n += kTPR)
                    yr[n] = (xr[n] - mean) * rstd * gamma[n] + beta[n];
            }
        }
    }
}

int kf_entry(const kf_call *call)
{
    if (call->n_inputs != 3 || call->n_outputs != 1 || call->n_sizes != 2)
        return 1;
    const long long M = call->sizes[0], N = call->sizes[1];
    const float *x = (const float *)call->inputs[0].data;
    const float *g = (const float *)call->inputs[1].data;
    const float *b = (const float *)call->inputs[2].data;
    float *y = (float *)call->outputs[0].data;
    cudaStream_t stream = (cudaStream_t)call->stream;
    long long blocks = (M + kRPB - 1) / kRPB;
    if (blocks > 1048576)
        blocks = 1048576;
    const bool vec = VEC == 4 && N % 4 == 0 &&
                     ((((uintptr_t)x) | ((uintptr_t)g) | ((uintptr_t)b) | ((uintptr_t)y)) & 15) == 0;
    if (vec)
        layernorm_seed<4><<<(unsigned)blocks, kBLOCK, 0, stream>>>(x, g, b, y, M, N);
    else
        layernorm_seed<1><<<(unsigned)blocks, kBLOCK, 0, stream>>>(x, g, b, y, M, N);
    return (int)cudaGetLastError();
}
