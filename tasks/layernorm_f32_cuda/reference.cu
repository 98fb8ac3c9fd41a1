/*
 * layernorm_f32_cuda reference: per row m of x[M,N] (row-major f32)
 *   mean = (1/N) sum_n x[m,n]
 *   var  = (1/N) sum_n (x[m,n] - mean)^2          (biased, as in PyTorch)
 *   y[m,n] = (x[m,n] - mean) / sqrt(var + 1e-5) * gamma[n] + beta[n]
 *
 * One block per row, strided per-thread sums and a plain shared-memory tree,
 * two passes, everything in double, rounded to f32 once. Simple, not fast.
 */
#include <cuda_runtime.h>
#include <math.h>
#include "kf_abi.h"

#define RB 256

__device__ double block_sum(double v, double *red)
{
    const int t = threadIdx.x;
    red[t] = v;
    __syncthreads();
    for (int s = RB / 2; s > 0; s >>= 1) {
        if (t < s)
            red[t] += red[t + s];
        __syncthreads();
    }
    v = red[0];
    __syncthreads();
    return v;
}

__global__ void __launch_bounds__(RB) ref_layernorm(const float *x, const float *gamma, const float *beta,
                                                    float *y, long long M, long long N)
{
    __shared__ double red[RB];
    const int t = threadIdx.x;
    for (long long m = blockIdx.x; m < M; m += gridDim.x) {
        const float *xr = x + m * N;
        double s = 0.0;
        for (long long n = t; n < N; n += RB)
            s += (double)xr[n];
        const double mean = block_sum(s, red) / (double)N;
        double q = 0.0;
        for (long long n = t; n < N; n += RB) {
            const double d = (double)xr[n] - mean;
            q += d * d;
        }
        const double var = block_sum(q, red) / (double)N;
        const double rstd = 1.0 / sqrt(var + 1e-5);
        for (long long n = t; n < N; n += RB)
            y[m * N + n] = (float)(((double)xr[n] - mean) * rstd * (double)gamma[n] + (double)beta[n]);
    }
}

int kf_entry(const kf_call *call)
{
    if (call->n_inputs != 3 || call->n_outputs != 1 || call->n_sizes != 2)
        return 1;
    const long long M = call->sizes[0], N = call->sizes[1];
    const unsigned grid = (unsigned)(M < 1048576 ? M : 1048576);
    ref_layernorm<<<grid, RB, 0, (cudaStream_t)call->stream>>>(
        (const float *)call->inputs[0].data, (const float *)call->inputs[1].data,
        (const float *)call->inputs[2].data, (float *)call->outputs[0].data, M, N);
    return (int)cudaGetLastError();
}
