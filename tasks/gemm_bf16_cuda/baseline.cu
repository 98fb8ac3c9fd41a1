/*
 * gemm_bf16_cuda baseline: cuBLAS. C[M,N] (f32) = A[M,K] (bf16) @ B[K,N] (bf16),
 * row-major, fp32 accumulation (CUBLAS_COMPUTE_32F, tensor cores where the GPU
 * has them).
 *
 * cuBLAS is column-major: a row-major X is the column-major X^T, so we ask
 * for C^T (N x M) = B^T (N x K) @ A^T (K x M), i.e. gemm(N, M, K) with B as
 * the first operand (ld N) and A as the second (ld K), C with ld N.
 *
 * The handle is created once per process (first call) and bound to the
 * task's stream on every call; cuBLAS gets the farm's workspace so it never
 * allocates during a timed call. Linked with -lcublas ("link" in task.json).
 * Candidates may not call cuBLAS ("forbid").
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include "kf_abi.h"

static cublasHandle_t g_handle;

int kf_entry(const kf_call *call)
{
    if (call->n_inputs != 2 || call->n_outputs != 1 || call->n_sizes != 3)
        return 1;
    const long long M = call->sizes[0], N = call->sizes[1], K = call->sizes[2];
    if (M > 2147483647LL || N > 2147483647LL || K > 2147483647LL)
        return 2;
    if (g_handle == NULL && cublasCreate(&g_handle) != CUBLAS_STATUS_SUCCESS)
        return 3;
    if (cublasSetStream(g_handle, (cudaStream_t)call->stream) != CUBLAS_STATUS_SUCCESS)
        return 4;
    if (call->workspace != NULL && call->workspace_bytes > 0 &&
        cublasSetWorkspace(g_handle, call->workspace, call->workspace_bytes) != CUBLAS_STATUS_SUCCESS)
        return 5;
    const float alpha = 1.0f, beta = 0.0f;
    const cublasStatus_t st =
        cublasGemmEx(g_handle, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K, &alpha, call->inputs[1].data,
                     CUDA_R_16BF, (int)N, call->inputs[0].data, CUDA_R_16BF, (int)K, &beta,
                     call->outputs[0].data, CUDA_R_32F, (int)N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return st == CUBLAS_STATUS_SUCCESS ? 0 : 100 + (int)st;
}
