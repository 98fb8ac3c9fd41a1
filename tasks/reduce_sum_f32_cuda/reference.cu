/*
 * reduce_sum_f32_cuda reference: row sums y[m] = sum_{n<N} x[m,n], x is M x N
 * f32 row-major, y has M elements. M = 1 is the sum of one long vector.
 *
 * One block of 1024 threads per row, strided per-thread sums and a plain
 * shared-memory tree, all in double, rounded to f32 once. Rows longer than
 * one chunk (RCH elements) when there are few of them are split over
 * blocks first (ref_rowsum_chunks, partial sums in double in the task's
 * workspace), then each row's partials are added in order: the same
 * double-precision sum in another order, deterministic, still rounded once.
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

/* Split rows (few long ones, e.g. M = 1, N = 2^27): block b sums chunk
 * b % C of row b / C (RCH elements, strided over the block's threads, in
 * double) into part[b]; ref_rowsum_parts then adds a row's C partials in
 * index order. Deterministic, and ~30x faster than one block per row for
 * M = 1 (one SM read 512 MiB: the judge runs the reference for every
 * checked timed call). */
#define RCH 65536

__global__ void __launch_bounds__(RB) ref_rowsum_chunks(const float *x, double *part, long long M, long long N,
                                                      long long C)
{
    __shared__ double red[RB];
    const int t = threadIdx.x;
    for (long long b = blockIdx.x; b < M * C; b += gridDim.x) {
        const long long m = b / C, c = b % C;
        const float *xr = x + m * N;
        const long long n1 = (c + 1) * RCH < N ? (c + 1) * RCH : N;
        double s = 0.0;
        for (long long n = c * RCH + t; n < n1; n += RB)
            s += (double)xr[n];
        red[t] = s;
        __syncthreads();
        for (int k = RB / 2; k > 0; k >>= 1) {
            if (t < k)
                red[t] += red[t + k];
            __syncthreads();
        }
        if (t == 0)
            part[b] = red[0];
        __syncthreads();
    }
}

__global__ void __launch_bounds__(RB) ref_rowsum_parts(const double *part, float *y, long long M, long long C)
{
    __shared__ double red[RB];
    const int t = threadIdx.x;
    for (long long m = blockIdx.x; m < M; m += gridDim.x) {
        double s = 0.0;
        for (long long c = t; c < C; c += RB)
            s += part[m * C + c];
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
    cudaStream_t st = (cudaStream_t)call->stream;
    const float *x = (const float *)call->inputs[0].data;
    float *y = (float *)call->outputs[0].data;
    const long long C = (N + RCH - 1) / RCH; /* chunks per row */
    if (C > 1 && M <= 4096 && call->workspace && (unsigned long long)(M * C) * sizeof(double) <= call->workspace_bytes) {
        const long long nb = M * C < 1048576 ? M * C : 1048576;
        double *part = (double *)call->workspace;
        ref_rowsum_chunks<<<(unsigned)nb, RB, 0, st>>>(x, part, M, N, C);
        ref_rowsum_parts<<<(unsigned)(M < 1048576 ? M : 1048576), RB, 0, st>>>(part, y, M, C);
        return (int)cudaGetLastError();
    }
    const unsigned grid = (unsigned)(M < 1048576 ? M : 1048576);
    ref_rowsum<<<grid, RB, 0, st>>>(x, y, M, N);
    return (int)cudaGetLastError();
}
