/*
 * transpose_f32_cuda reference: B[n,m] = A[m,n], A is M x N f32 row-major,
 * B is N x M f32 row-major. One thread per output element (grid-stride over
 * all M*N outputs, 64-bit indices). Simple, not fast.
 */
#include <cuda_runtime.h>
#include "kf_abi.h"

__global__ void ref_transpose(const float *A, float *B, long long M, long long N)
{
    const long long total = M * N;
    for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < total;
         o += (long long)gridDim.x * blockDim.x) {
        const long long n = o / M, m = o % M; /* output B[n, m] */
        B[o] = A[m * N + n];
    }
}

int kf_entry(const kf_call *call)
{
    if (call->n_inputs != 1 || call->n_outputs != 1 || call->n_sizes != 2)
        return 1;
    const long long M = call->sizes[0], N = call->sizes[1];
    long long blocks = (M * N + 255) / 256;
    if (blocks > 65536)
        blocks = 65536;
    ref_transpose<<<(unsigned)blocks, 256, 0, (cudaStream_t)call->stream>>>(
        (const float *)call->inputs[0].data, (float *)call->outputs[0].data, M, N);
    return (int)cudaGetLastError();
}
