/*
 * The one-block-per-row reduce_sum_f32_cuda reference, kept as the oracle of
 * the split tasks/reduce_sum_f32_cuda/reference.cu: tools/gpu-check judges it
 * as a candidate of the task (same double sums in another order: the task's
 * tolerance). Row sums y[m] = sum_{n<N} x[m,n] in double, rounded once.
 */
#include <cuda_runtime.h>
#include "kf_abi.h"

#define RB 1024

__global__ void __launch_bounds__(RB) ref_rowsum(const float *x, float *y, long long M, long long N)
{
    __shared__ double red[RB];
    const int t = threadIdx.x;
    for (long long m = blockIdx.x; m < M; m += gridDim.x) {
        const float *xr = x + m * N;
        double s = 0.0;
        for (long long n = t; n < N; n += RB)
            s += (double)xr[n];
        red[t] = s;
        __syncthreads();
        for (int k = RB / 2; k > 0; k >>= 1) {
            if (t < k)
                red[t] += red[t + k];
            __syncthreads();
        }
        if (t == 0)
            y[m] = (float)red[0];
        __syncthreads();
    }
}

int kf_entry(const kf_call *call)
{
    if (call->n_inputs != 1 || call->n_outputs != 1 || call->n_sizes != 2)
        return 1;
    const long long M = call->sizes[0], N = call->sizes[1];
    const unsigned grid = (unsigned)(M < 1048576 ? M : 1048576);
    ref_rowsum<<<grid, RB, 0, (cudaStream_t)call->stream>>>((const float *)call->inputs[0].data,
                                                           (float *)call->outputs[0].data, M, N);
    return (int)cudaGetLastError();
}
