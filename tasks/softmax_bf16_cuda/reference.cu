/*
 * softmax_bf16_cuda reference: row softmax of x[M,N] (row-major bf16) into y[M,N] (bf16).
 *   y[m,n] = exp(x[m,n] - max_j x[m,j]) / sum_j exp(x[m,j] - max_j x[m,j])
 *
 * One block per row; each thread walks the row with a stride and the block
 * combines with a plain shared-memory tree. The bf16 inputs are widened exactly;
 * everything is computed in double (exp from the CUDA math library) and each
 * result is rounded to bf16 (round-to-nearest-even) once. Simple, not fast.
 */
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <math.h>
#include "kf_abi.h"

#define RB 256

__global__ void __launch_bounds__(RB) ref_softmax(const __nv_bfloat16 *x, __nv_bfloat16 *y, long long M, long long N)
{
    __shared__ double red[RB];
    const int t = threadIdx.x;
    for (long long m = blockIdx.x; m < M; m += gridDim.x) {
        const __nv_bfloat16 *xr = x + m * N;
        __nv_bfloat16 *yr = y + m * N;

        double mx = -INFINITY;
        for (long long n = t; n < N; n += RB)
            mx = fmax(mx, (double)__bfloat162float(xr[n]));
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
            sum += exp((double)__bfloat162float(xr[n]) - mx);
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
            yr[n] = __double2bfloat16(exp((double)__bfloat162float(xr[n]) - mx) / sum);
    }
}

int kf_entry(const kf_call *call)
{
    if (call->n_inputs != 1 || call->n_outputs != 1 || call->n_sizes != 2)
        return 1;
    const long long M = call->sizes[0], N = call->sizes[1];
    const unsigned grid = (unsigned)(M < 1048576 ? M : 1048576);
    ref_softmax<<<grid, RB, 0, (cudaStream_t)call->stream>>>((const __nv_bfloat16 *)call->inputs[0].data,
                                                            (__nv_bfloat16 *)call->outputs[0].data, M, N);
    return (int)cudaGetLastError();
}
