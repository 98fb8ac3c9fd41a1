/*
 * transpose_f32_cuda baseline: the naive transpose with coalesced reads.
 *
 * A 32 x 8 thread block walks a 32 x 32 patch of A: consecutive threads read
 * consecutive A[m, n..n+31] (coalesced), and write B[n.., m] with a stride of
 * M floats (one 32-byte sector per element: uncoalesced). The standard fix is
 * to stage a tile through shared memory (with padding against bank
 * conflicts) so both reads and writes are coalesced.
 */
#include <cuda_runtime.h>
#include "kf_abi.h"

#define TILE 32
#define ROWS 8

__global__ void __launch_bounds__(TILE *ROWS) transpose_naive(const float *__restrict__ A, float *__restrict__ B,
                                                              long long M, long long N)
{
    const long long tiles_n = (N + TILE - 1) / TILE, tiles = tiles_n * ((M + TILE - 1) / TILE);
    for (long long tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const long long n = (tile % tiles_n) * TILE + threadIdx.x;
        const long long m0 = (tile / tiles_n) * TILE;
        if (n >= N)
            continue;
        for (int r = threadIdx.y; r < TILE; r += ROWS) {
            const long long m = m0 + r;
            if (m < M)
                B[n * M + m] = A[m * N + n];
        }
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
    transpose_naive<<<(unsigned)tiles, dim3(TILE, ROWS), 0, (cudaStream_t)call->stream>>>(
        (const float *)call->inputs[0].data, (float *)call->outputs[0].data, M, N);
    return (int)cudaGetLastError();
}
