/*
 * gemm_bf16_cuda reference: C[M,N] (f32) = A[M,K] (bf16) @ B[K,N] (bf16), all
 * row-major. Every output element is one f32 sum in k order:
 *
 *     acc = 0; for k in 0..K-1: acc = fmaf(float(A[i,k]), float(B[k,j]), acc)
 *
 * The bf16 operands are widened exactly to f32 and each product is exact in
 * f32 (8-bit x 8-bit significands), so the result depends only on that
 * order. The order is what makes it the reference; the tiling below only
 * decides where the operands are read from: a block computes a 64x64 tile
 * of C, 16x16 threads with 4x4 outputs each, K in slabs of 16 staged in
 * shared memory, and a thread's inner loop runs k in order within the slab
 * (k beyond K is never added, so even the sign of a zero sum is the naive
 * loop's). It is bit-identical to the one-thread-per-output loop (checked
 * on the H200 over every validation shape, tools/gpu-check) and ~10x
 * faster: the judge runs the reference for every checked timed call, and
 * the naive loop took tens of ms per 4096^3 call.
 */
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include "kf_abi.h"

#define RT_M 64  /* C rows per block */
#define RT_N 64  /* C columns per block */
#define RT_K 16  /* k per shared-memory slab */

__global__ void __launch_bounds__(256) ref_gemm(const __nv_bfloat16 *A, const __nv_bfloat16 *B, float *C,
                                                long long M, long long N, long long K)
{
    __shared__ float As[RT_K][RT_M]; /* As[k][i] = A[i0 + i, k0 + k] */
    __shared__ float Bs[RT_K][RT_N]; /* Bs[k][j] = B[k0 + k, j0 + j] */
    const int t = threadIdx.x, tx = t % 16, ty = t / 16;
    for (long long bi = blockIdx.y; bi * RT_M < M; bi += gridDim.y)
        for (long long bj = blockIdx.x; bj * RT_N < N; bj += gridDim.x) {
            const long long i0 = bi * RT_M, j0 = bj * RT_N;
            float acc[4][4]; /* acc[r][c]: C[i0 + ty + 16r, j0 + tx + 16c] */
            for (int r = 0; r < 4; r++)
                for (int c = 0; c < 4; c++) acc[r][c] = 0.0f;
            for (long long k0 = 0; k0 < K; k0 += RT_K) {
                for (int e = t; e < RT_M * RT_K; e += 256) {
                    const int ai = e / RT_K, ak = e % RT_K; /* A: 16 consecutive k of a row */
                    As[ak][ai] = i0 + ai < M && k0 + ak < K ? __bfloat162float(A[(i0 + ai) * K + k0 + ak]) : 0.0f;
                    const int bk = e / RT_N, bj2 = e % RT_N; /* B: 64 consecutive j of a row */
                    Bs[bk][bj2] = k0 + bk < K && j0 + bj2 < N ? __bfloat162float(B[(k0 + bk) * N + j0 + bj2]) : 0.0f;
                }
                __syncthreads();
                const int kn = K - k0 < RT_K ? (int)(K - k0) : RT_K;
                for (int k = 0; k < kn; k++) {
                    float a[4], b[4];
                    for (int r = 0; r < 4; r++) a[r] = As[k][ty + 16 * r];
                    for (int c = 0; c < 4; c++) b[c] = Bs[k][tx + 16 * c];
                    for (int r = 0; r < 4; r++)
                        for (int c = 0; c < 4; c++) acc[r][c] = fmaf(a[r], b[c], acc[r][c]);
                }
                __syncthreads();
            }
            for (int r = 0; r < 4; r++)
                for (int c = 0; c < 4; c++) {
                    const long long i = i0 + ty + 16 * r, j = j0 + tx + 16 * c;
                    if (i < M && j < N) C[i * N + j] = acc[r][c];
                }
        }
}

int kf_entry(const kf_call *call)
{
    if (call->n_inputs != 2 || call->n_outputs != 1 || call->n_sizes != 3)
        return 1;
    const long long M = call->sizes[0], N = call->sizes[1], K = call->sizes[2];
    long long gx = (N + RT_N - 1) / RT_N, gy = (M + RT_M - 1) / RT_M;
    if (gx > 65535) gx = 65535;
    if (gy > 65535) gy = 65535;
    if (gx < 1) gx = 1;
    if (gy < 1) gy = 1;
    ref_gemm<<<dim3((unsigned)gx, (unsigned)gy), 256, 0, (cudaStream_t)call->stream>>>(
        (const __nv_bfloat16 *)call->inputs[0].data, (const __nv_bfloat16 *)call->inputs[1].data,
        (float *)call->outputs[0].data, M, N, K);
    return (int)cudaGetLastError();
}
