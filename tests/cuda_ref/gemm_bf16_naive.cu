/*
 * The one-thread-per-output gemm_bf16_cuda reference, kept as the oracle of
 * the tiled tasks/gemm_bf16_cuda/reference.cu: tools/gpu-check evaluates it
 * as a candidate of the task with rtol = atol = 0, so the tiled reference must
 * give the same bits on every validation shape.
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
