/*
 * sgemm_f32 seed: cache-blocked GEMM, C[M,N] = A[M,K] @ B[K,N] (row-major f32).
 *
 * Idea: tile C into BM x BN blocks (parallelized with OpenMP over blocks),
 * walk K in BK slabs so the B slab (BK x BN) stays in L2, and inside a block
 * use i-k-j order with four rows of C at a time: each B row segment is loaded
 * once and feeds four FMAs, and the contiguous j loop vectorizes. Every loop
 * bound is clamped, so any M, N, K (including non-multiples of the tiles and
 * sizes smaller than one tile) is handled.
 */
#include "kf_abi.h"

// kfarm:tune BM=32,64,128
// kfarm:tune BN=128,256,512
// kfarm:tune BK=64,128,256
// kfarm:tune THREADS=1,2
#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 512
#endif
#ifndef BK
#define BK 128
#endif
#ifndef THREADS
#define THREADS 2
#endif

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* C[i0:i1, j0:j1] += A[i0:i1, k0:k1] @ B[k0:k1, j0:j1] */
static void block_mul(const float *restrict A, const float *restrict B, float *restrict C,
                      int64_t N, int64_t K, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
                      int64_t k0, int64_t k1)
{
    int64_t i = i0;
    for (; i + 4 <= i1; i += 4) {
        float *restrict c0 = C + (i + 0) * N;
        float *restrict c1 = C + (i + 1) * N;
        float *restrict c2 = C + (i + 2) * N;
        float *restrict c3 = C + (i + 3) * N;
        for (int64_t k = k0; k < k1; k++) {
            const float a0 = A[(i + 0) * K + k], a1 = A[(i + 1) * K + k];
            const float a2 = A[(i + 2) * K + k], a3 = A[(i + 3) * K + k];
            const float *restrict b = B + k * N;
#pragma omp simd
            for (int64_t j = j0; j < j1; j++) {
                const float bj = b[j];
                c0[j] += a0 * bj;
                c1[j] += a1 * bj;
                c2[j] += a2 * bj;
                c3[j] += a3 * bj;
            }
        }
    }
    for (; i < i1; i++) {
        float *restrict c0 = C + i * N;
        for (int64_t k = k0; k < k1; k++) {
            const float a0 = A[i * K + k];
            const float *restrict b = B + k * N;
#pragma omp simd
            for (int64_t j = j0; j < j1; j++)
                c0[j] += a0 * b[j];
        }
    }
}

int kf_entry(const kf_call *call)
{
    if (call->n_inputs != 2 || call->n_outputs != 1 || call->n_sizes != 3)
        return 1;
    const int64_t M = call->sizes[0], N = call->sizes[1], K = call->sizes[2];
    const float *A = (const float *)call->inputs[0].data;
    const float *B = (const float *)call->inputs[1].data;
    float *C = (float *)call->outputs[0].data;

    const int64_t mb = (M + BM - 1) / BM, nb = (N + BN - 1) / BN;
#pragma omp parallel for collapse(2) schedule(static) num_threads(THREADS)
    for (int64_t ib = 0; ib < mb; ib++) {
        for (int64_t jb = 0; jb < nb; jb++) {
            const int64_t i0 = ib * BM, i1 = min64(i0 + BM, M);
            const int64_t j0 = jb * BN, j1 = min64(j0 + BN, N);
            for (int64_t i = i0; i < i1; i++)
                for (int64_t j = j0; j < j1; j++)
                    C[i * N + j] = 0.0f;
            for (int64_t k0 = 0; k0 < K; k0 += BK)
                block_mul(A, B, C, N, K, i0, i1, j0, j1, k0, min64(k0 + BK, K));
        }
    }
    return 0;
}
