/*
 * softmax_f32_cuda reference: row softmax of x[M,N] (row-major f32) into y[M,N].
 *   y[m,n] = exp(x[m,n] - max_j x[m,j]) / sum_j exp(x[m,j] - max_j x[m,j])
 *
 * One block per row; each thread walks the row with a stride and the block
 * combines with a plain shared-memory tree. Everything in double (exp from
 * the CUDA math library), rounded to f32 once. Simple, not fast.
 */
#include <cuda_runtime.h>
#include <math.h>
#include "kf_abi.h"

#define RB 256

__global__ void __launch_bounds__(RB) ref_softmax(const float *x, float *y, long long M, long long N)
{
    __shared__ double red[RB];
    const int t = threadIdx.x;
    for (long long m = blockIdx.x; m < M; m += gridDim.x) {
        const float *xr = x + m * N;
        float *yr = y + m * N;

        double mx = -INFINITY;
        for (long long n = t; n < N; n += RB)
            mx = fmax(mx, (double)xr[n]);
        red[t] = mx;
        __syncthreads();
        for (int s = RB / 2; s > 0; s >>= 1) {
            if (t < s)
                red[t] = fmax(red[t], red[t + s]);
            __syncthreads();
        }
        mx = red[0];
        __syncthreads();

        double sum = 0.0;
        for (long long n = t; n < N; n += RB)
            sum += exp((double)xr[n] - mx);
        red[t] = sum;
        __syncthreads();
        for (int s = RB / 2; s > 0; s >>= 1) {
            if (t < s)
                red[t] += red[t + s];
            __syncthreads();
        }
        sum = red[0];
        __syncthreads();

        for (long long n = t; n < N; n += RB)
            yr[n] = (float)(exp((double)xr[n] - mx) / sum);
    }
}

int kf_entry(const kf_call *call)
{
    if (call->n_inputs != 1 || call->n_outputs != 1 || call->n_sizes != 2)
        return 1;
    const long long M = call->sizes[0], N = call->sizes[1];
    const unsigned grid = (unsigned)(M < 1048576 ? M : 1048576);
    ref_softmax<<<grid, RB, 0, (cudaStream_t)call->stream>>>((const float *)call->inputs[0].data,
                                                            (float *)call->outputs[0].data, M, N);
    return (int)cudaGetLastError();
}
