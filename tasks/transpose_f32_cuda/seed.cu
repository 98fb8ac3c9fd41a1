/*
 * transpose_f32_cuda seed: B[n,m] = A[m,n] through a shared-memory tile.
 *
 * A TILE x ROWS thread block loads a TILE x TILE patch of A with coalesced
 * row reads into shared memory, then writes it to B with coalesced row writes
 * (reading the tile by columns). The tile is padded by PAD floats per row so
 * the column reads hit distinct banks (PAD=1 removes the 32-way conflicts of
 * PAD=0). Each thread moves TILE/ROWS elements per direction. Tiles are
 * flattened into a 1-D grid-stride loop (no gridDim.y limit) and every access
 * is bounds-checked, so any M, N works.
 */
#include <cuda_runtime.h>
#include "kf_abi.h"

// kfarm:tune TILE=16,32,64
// kfarm:tune ROWS=4,8,16
// kfarm:tune PAD=0,1
#ifndef TILE
#define TILE 64
#endif
#ifndef ROWS
#define ROWS 8
#endif
#ifndef PAD
#define PAD 1
#endif

static_assert(TILE == 16 || TILE == 32 || TILE == 64, "TILE is 16, 32 or 64");
static_assert(ROWS >= 1 && ROWS <= TILE && TILE % ROWS == 0, "ROWS must divide TILE");
static_assert(TILE * ROWS <= 1024, "block too large");
static_assert(PAD == 0 || PAD == 1, "PAD is 0 or 1");

__global__ void __launch_bounds__(TILE *ROWS) transpose_tiled(const float *__restrict__ A, float *__restrict__ B,
                                                              long long M, long long N)
{
    __shared__ float tile[TILE][TILE + PAD];
    const long long tiles_n = (N + TILE - 1) / TILE, tiles = tiles_n * ((M + TILE - 1) / TILE);
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        const long long n0 = (t % tiles_n) * TILE, m0 = (t / tiles_n) * TILE;
        /* load A[m0 + r, n0 + tx] into tile[r][tx] */
        const long long n = n0 + tx;
#pragma unroll
        for (int r = ty; r < TILE; r += ROWS) {
            const long long m = m0 + r;
            if (m < M && n < N)
                tile[r][tx] = A[m * N + n];
        }
        __syncthreads();
        /* write B[n0 + r, m0 + tx] = tile[tx][r] */
        const long long m = m0 + tx;
#pragma unroll
        for (int r = ty; r < TILE; r += ROWS) {
            const long long nn = n0 + r;
            if (nn < N && m < M)
                B[nn * M + m] = tile[tx][r];
        }
        __syncthreads();
    }
}

int kf_entry(const kf_call *call)
{
    if (call->n_inputs != 1 || call->n_outputs != 1 || call->n_sizes != 2)
        return 1;
    const long long M = call->sizes[0], N = call->sizes[1];
    long long tiles = ((M + TILE - 1) / TILE) * ((N + TILE - 1) / TILE);
    if (tiles > 1048576)
        tiles = 1048576;
    transpose_tiled<<<(unsigned)tiles, dim3(TILE, ROWS), 0, (cudaStream_t)call->stream>>>(
        (const float *)call->inputs[0].data, (float *)call->outputs[0].data, M, N);
    return (int)cudaGetLastError();
}
