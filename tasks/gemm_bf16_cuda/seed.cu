/*
 * gemm_bf16_cuda seed: C[M,N] (f32) = A[M,K] (bf16) @ B[K,N] (bf16), row-major,
 * fp32 accumulation, tensor cores through nvcuda::wmma (16x16x16 bf16
 * fragments, sm_80+).
 *
 * Ideas:
 *  - Block tile BM x BN, K walked in BK slabs staged in shared memory (rows
 *    padded by 8 bf16 so fragment loads avoid bank conflicts while keeping
 *    the 32-byte alignment wmma needs). WARPS_M x WARPS_N warps; each warp
 *    owns a (BM/WARPS_M) x (BN/WARPS_N) sub-tile of 16x16 accumulators.
 *  - Tiles are loaded with bounds checks and zero fill, so any M, N, K works;
 *    VEC=8 uses 16-byte loads (8 bf16) when K % 8 == 0, N % 8 == 0 and A, B
 *    are 16-byte aligned (checked at launch), scalar 2-byte loads otherwise.
 *  - Epilogue: each 16x16 accumulator goes through a per-warp shared staging
 *    tile and is written with bounds checks.
 *  - Older GPUs (sm_75: no bf16 wmma) and -DSEED_SCALAR=1 compute the same
 *    tiles with scalar FMAs from shared memory (correct, slow).
 * One stage, no cp.async/ldmatrix/swizzle/pipelining: room to improve.
 */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>
#include <stdint.h>
#include "kf_abi.h"

// kfarm:tune BM=64,128
// kfarm:tune BN=64,128
// kfarm:tune BK=32,64
// kfarm:tune WARPS_M=2,4
// kfarm:tune WARPS_N=2,4
// kfarm:tune VEC=1,8
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 64
#endif
#ifndef WARPS_M
#define WARPS_M 4
#endif
#ifndef WARPS_N
#define WARPS_N 2
#endif
#ifndef VEC
#define VEC 8
#endif
#ifndef SEED_SCALAR
#define SEED_SCALAR 0
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !SEED_SCALAR
#define USE_WMMA 1
#else
#define USE_WMMA 0
#endif

constexpr int kThreads = 32 * WARPS_M * WARPS_N;
constexpr int kWTM = BM / WARPS_M, kWTN = BN / WARPS_N; /* warp tile */
constexpr int kFM = kWTM / 16, kFN = kWTN / 16;         /* fragments per warp */
constexpr int kLDA = BK + 8, kLDB = BN + 8;             /* padded leading dims (bf16) */
constexpr int kTileBytes = (BM * kLDA + BK * kLDB) * 2;
constexpr int kStageBytes = WARPS_M * WARPS_N * 256 * 4;
constexpr int kSmemBytes = kTileBytes > kStageBytes ? kTileBytes : kStageBytes;

static_assert(BM % (16 * WARPS_M) == 0 && BN % (16 * WARPS_N) == 0, "warp tiles must be multiples of 16");
static_assert(kFM >= 1 && kFN >= 1, "at least one fragment per warp");
static_assert(BK % 16 == 0, "BK must be a multiple of 16");
static_assert(kThreads <= 1024, "too many warps");
static_assert(VEC == 1 || VEC == 8, "VEC is 1 or 8");
static_assert(kSmemBytes <= 48 * 1024, "static shared memory limit");
static_assert((BM * BN) % kThreads == 0, "scalar path: outputs per thread");

union Pack8 {
    uint4 u;
    __nv_bfloat16 h[8];
};

/* Stage A[bm0.., k0..] (BM x BK) and B[k0.., bn0..] (BK x BN) into shared. */
template <int V>
__device__ __forceinline__ void load_tiles(const __nv_bfloat16 *__restrict__ A, const __nv_bfloat16 *__restrict__ B,
                                           __nv_bfloat16 *As, __nv_bfloat16 *Bs, long long M, long long N,
                                           long long K, long long bm0, long long bn0, long long k0)
{
    const __nv_bfloat16 zero = __float2bfloat16(0.0f);
    if (V == 8) {
        for (int idx = threadIdx.x; idx < BM * BK / 8; idx += kThreads) {
            const int r = idx / (BK / 8), c = (idx % (BK / 8)) * 8;
            const long long gm = bm0 + r, gk = k0 + c;
            uint4 v = make_uint4(0, 0, 0, 0);
            if (gm < M && gk < K) /* K % 8 == 0: the 8 elements are all in or all out */
                v = *(const uint4 *)(A + gm * K + gk);
            *(uint4 *)(As + r * kLDA + c) = v;
        }
        for (int idx = threadIdx.x; idx < BK * BN / 8; idx += kThreads) {
            const int r = idx / (BN / 8), c = (idx % (BN / 8)) * 8;
            const long long gk = k0 + r, gn = bn0 + c;
            uint4 v = make_uint4(0, 0, 0, 0);
            if (gk < K && gn < N)
                v = *(const uint4 *)(B + gk * N + gn);
            *(uint4 *)(Bs + r * kLDB + c) = v;
        }
    } else {
        for (int idx = threadIdx.x; idx < BM * BK; idx += kThreads) {
            const int r = idx / BK, c = idx % BK;
            const long long gm = bm0 + r, gk = k0 + c;
            As[r * kLDA + c] = (gm < M && gk < K) ? A[gm * K + gk] : zero;
        }
        for (int idx = threadIdx.x; idx < BK * BN; idx += kThreads) {
            const int r = idx / BN, c = idx % BN;
            const long long gk = k0 + r, gn = bn0 + c;
            Bs[r * kLDB + c] = (gk < K && gn < N) ? B[gk * N + gn] : zero;
        }
    }
}

template <int V>
__global__ void __launch_bounds__(kThreads) gemm_seed(const __nv_bfloat16 *__restrict__ A,
                                                      const __nv_bfloat16 *__restrict__ B, float *__restrict__ C,
                                                      long long M, long long N, long long K)
{
    __shared__ __align__(128) unsigned char smem[kSmemBytes];
    __nv_bfloat16 *As = (__nv_bfloat16 *)smem;
    __nv_bfloat16 *Bs = As + BM * kLDA;
    const long long tiles_n = (N + BN - 1) / BN, tiles = tiles_n * ((M + BM - 1) / BM);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;

    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        const long long bm0 = (t / tiles_n) * BM, bn0 = (t % tiles_n) * BN;
#if USE_WMMA
        using namespace nvcuda;
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kFM][kFN];
#pragma unroll
        for (int i = 0; i < kFM; i++)
#pragma unroll
            for (int j = 0; j < kFN; j++)
                wmma::fill_fragment(acc[i][j], 0.0f);
        for (long long k0 = 0; k0 < K; k0 += BK) {
            load_tiles<V>(A, B, As, Bs, M, N, K, bm0, bn0, k0);
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < BK; kk += 16) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa[kFM];
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb[kFN];
#pragma unroll
                for (int i = 0; i < kFM; i++)
                    wmma::load_matrix_sync(fa[i], As + (wm * kWTM + i * 16) * kLDA + kk, kLDA);
#pragma unroll
                for (int j = 0; j < kFN; j++)
                    wmma::load_matrix_sync(fb[j], Bs + kk * kLDB + wn * kWTN + j * 16, kLDB);
#pragma unroll
                for (int i = 0; i < kFM; i++)
#pragma unroll
                    for (int j = 0; j < kFN; j++)
                        wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
            }
            __syncthreads();
        }
        /* epilogue: the tile buffers are free now; each warp stages 16x16 */
        float *stage = (float *)smem + warp * 256;
#pragma unroll
        for (int i = 0; i < kFM; i++) {
#pragma unroll
            for (int j = 0; j < kFN; j++) {
                wmma::store_matrix_sync(stage, acc[i][j], 16, wmma::mem_row_major);
                __syncwarp();
                const long long gm0 = bm0 + wm * kWTM + i * 16, gn0 = bn0 + wn * kWTN + j * 16;
                for (int e = lane; e < 256; e += 32) {
                    const long long gm = gm0 + e / 16, gn = gn0 + e % 16;
                    if (gm < M && gn < N)
                        C[gm * N + gn] = stage[e];
                }
                __syncwarp();
            }
        }
        __syncthreads();
#else
        /* scalar path: thread owns outputs e = tid + q * kThreads of the tile */
        constexpr int kEPT = BM * BN / kThreads;
        float acc[kEPT];
#pragma unroll
        for (int q = 0; q < kEPT; q++)
            acc[q] = 0.0f;
        for (long long k0 = 0; k0 < K; k0 += BK) {
            load_tiles<V>(A, B, As, Bs, M, N, K, bm0, bn0, k0);
            __syncthreads();
#pragma unroll 1
            for (int q = 0; q < kEPT; q++) {
                const int e = threadIdx.x + q * kThreads, r = e / BN, c = e % BN;
                float s = acc[q];
#pragma unroll 8
                for (int kk = 0; kk < BK; kk++)
                    s = fmaf(__bfloat162float(As[r * kLDA + kk]), __bfloat162float(Bs[kk * kLDB + c]), s);
                acc[q] = s;
            }
            __syncthreads();
        }
#pragma unroll
        for (int q = 0; q < kEPT; q++) {
            const int e = threadIdx.x + q * kThreads;
            const long long gm = bm0 + e / BN, gn = bn0 + e % BN;
            if (gm < M && gn < N)
                C[gm * N + gn] = acc[q];
        }
        (void)warp;
        (void)lane;
        (void)wm;
        (void)wn;
#endif
    }
}

int kf_entry(const kf_call *call)
{
    if (call->n_inputs != 2 || call->n_outputs != 1 || call->n_sizes != 3)
        return 1;
    const long long M = call->sizes[0], N = call->sizes[1], K = call->sizes[2];
    const __nv_bfloat16 *A = (const __nv_bfloat16 *)call->inputs[0].data;
    const __nv_bfloat16 *B = (const __nv_bfloat16 *)call->inputs[1].data;
    float *C = (float *)call->outputs[0].data;
    cudaStream_t stream = (cudaStream_t)call->stream;
    long long tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
    if (tiles > 1048576)
        tiles = 1048576;
    const bool vec = VEC == 8 && K % 8 == 0 && N % 8 == 0 && ((((uintptr_t)A) | ((uintptr_t)B)) & 15) == 0;
    if (vec)
        gemm_seed<8><<<(unsigned)tiles, kThreads, 0, stream>>>(A, B, C, M, N, K);
    else
        gemm_seed<1><<<(unsigned)tiles, kThreads, 0, stream>>>(A, B, C, M, N, K);
    return (int)cudaGetLastError();
}
