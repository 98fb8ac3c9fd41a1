/*
 * softmax_bf16_cuda baseline: the classic one-block-per-row softmax, bf16 in/out, fp32 math.
 *
 * 256 threads per row, three passes over global memory (max, sum of exp,
 * write), block reductions with warp shuffles plus a shared-memory step,
 * accurate expf, scalar 2-byte loads, bf16 widened to fp32 on load and
 * rounded (nearest-even) on store. A solid kernel, not a tuned one: candidates
 * can fuse the max and sum passes (online softmax), keep the row on chip,
 * vectorize loads, fit several short rows per block, use exp2 tricks.
 */
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <math.h>
#include "kf_abi.h"

#define BLOCK 256

__device__ __forceinline__ float block_max(float v, float *sh)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0)
        sh[warp] = v;
    __syncthreads();
    v = sh[0];
    for (int w = 1; w < BLOCK / 32; w++)
        v = fmaxf(v, sh[w]);
    __syncthreads();
    return v;
}

__device__ __forceinline__ float block_sum(float v, float *sh)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0)
        sh[warp] = v;
    __syncthreads();
    v = 0.0f;
    for (int w = 0; w < BLOCK / 32; w++)
        v += sh[w];
    __syncthreads();
    return v;
}

__global__ void __launch_bounds__(BLOCK) softmax_rows(const __nv_bfloat16 *__restrict__ x,
                                                      __nv_bfloat16 *__restrict__ y,
                                                      long long M, long long N)
{
    __shared__ float sh[BLOCK / 32];
    for (long long m = blockIdx.x; m < M; m += gridDim.x) {
        const __nv_bfloat16 *xr = x + m * N;
        __nv_bfloat16 *yr = y + m * N;
        float mx = -INFINITY;
        for (long long n = threadIdx.x; n < N; n += BLOCK)
            mx = fmaxf(mx, __bfloat162float(xr[n]));
        mx = block_max(mx, sh);
        float sum = 0.0f;
        for (long long n = threadIdx.x; n < N; n += BLOCK)
            sum += expf(__bfloat162float(xr[n]) - mx);
        sum = block_sum(sum, sh);
        const float inv = 1.0f / sum;
        for (long long n = threadIdx.x; n < N; n += BLOCK)
            yr[n] = __float2bfloat16(expf(__bfloat162float(xr[n]) - mx) * inv);
    }
}

int kf_entry(const kf_call *call)
{
    if (call->n_inputs != 1 || call->n_outputs != 1 || call->n_sizes != 2)
        return 1;
    const long long M = call->sizes[0], N = call->sizes[1];
    const unsigned grid = (unsigned)(M < 1048576 ? M : 1048576);
    softmax_rows<<<grid, BLOCK, 0, (cudaStream_t)call->stream>>>((const __nv_bfloat16 *)call->inputs[0].data,
                                                               (__nv_bfloat16 *)call->outputs[0].data, M, N);
    return (int)cudaGetLastError();
}
