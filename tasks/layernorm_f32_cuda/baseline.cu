/*
 * layernorm_f32_cuda baseline: the classic one-block-per-row layer norm.
 *
 * 256 threads per row, two-pass statistics (mean, then the mean of squared
 * deviations) with warp-shuffle + shared-memory block sums, then a third pass
 * that normalizes, scales and shifts. Scalar loads; the row is read three
 * times. Candidates can compute the statistics in one pass (Welford / shifted
 * sums), keep the row in registers or shared memory, vectorize, and give
 * short rows a warp instead of a block.
 */
#include <cuda_runtime.h>
#include <math.h>
#include "kf_abi.h"

#define BLOCK 256

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

__global__ void __launch_bounds__(BLOCK) layernorm_rows(const float *__restrict__ x,
                                                        const float *__restrict__ gamma,
                                                        const float *__restrict__ beta,
                                                        float *__restrict__ y, long long M, long long N)
{
    __shared__ float sh[BLOCK / 32];
    for (long long m = blockIdx.x; m < M; m += gridDim.x) {
        const float *xr = x + m * N;
        float *yr = y + m * N;
        float s = 0.0f;
        for (long long n = threadIdx.x; n < N; n += BLOCK)
            s += xr[n];
        const float mean = block_sum(s, sh) / (float)N;
        float q = 0.0f;
        for (long long n = threadIdx.x; n < N; n += BLOCK) {
            const float d = xr[n] - mean;
            q += d * d;
        }
        const float rstd = rsqrtf(block_sum(q, sh) / (float)N + 1e-5f);
        for (long long n = threadIdx.x; n < N; n += BLOCK)
            yr[n] = (xr[n] - mean) * rstd * gamma[n] + beta[n];
    }
}

int kf_entry(const kf_call *call)
{
    if (call->n_inputs != 3 || call->n_outputs != 1 || call->n_sizes != 2)
        return 1;
    const long long M = call->sizes[0], N = call->sizes[1];
    const unsigned grid = (unsigned)(M < 1048576 ? M : 1048576);
    layernorm_rows<<<grid, BLOCK, 0, (cudaStream_t)call->stream>>>(
        (const float *)call->inputs[0].data, (const float *)call->inputs[1].data,
        (const float *)call->inputs[2].data, (float *)call->outputs[0].data, M, N);
    return (int)cudaGetLastError();
}
