/*
 * gemm_bf16_cuda reference: C[M,N] (f32) = A[M,K] (bf16) @ B[K,N] (bf16), all
 * row-major. One thread per output element; the bf16 operands are widened
 * exactly to f32, each product is exact in f32, and the K products are
 * accumulated in f32 in order. Simple, not fast.
 */
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include "kf_abi.h"

__global__ void ref_gemm(const __nv_bfloat16 *A, const __nv_bfloat16 *B, float *C, long long M, long long N,
                         long long K)
{
    const long long total = M * N;
    for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < total;
         o += (long long)gridDim.x * blockDim.x) {
        const long long i = o / N, j = o % N;
        float acc = 0.0f;
        for (long long k = 0; k < K; k++)
            acc = fmaf(__bfloat162float(A[i * K + k]), __bfloat162float(B[k * N + j]), acc);
        C[o] = acc;
    }
}

int kf_entry(const kf_call *call)
{
    if (call->n_inputs != 2 || call->n_outputs != 1 || call->n_sizes != 3)
        return 1;
    const long long M = call->sizes[0], N = call->sizes[1], K = call->sizes[2];
    long long blocks = (M * N + 255) / 256;
    if (blocks > 1048576)
        blocks = 1048576;
    ref_gemm<<<(unsigned)blocks, 256, 0, (cudaStream_t)call->stream>>>(
        (const __nv_bfloat16 *)call->inputs[0].data, (const __nv_bfloat16 *)call->inputs[1].data,
        (float *)call->outputs[0].data, M, N, K);
    return (int)cudaGetLastError();
}
