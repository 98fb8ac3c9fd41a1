/*
 * sgemm_f32 baseline: the textbook triple loop in i-j-k order, one f32 dot
 * product per output, single-threaded, no blocking.
 *
 * This is deliberately the first thing a C programmer writes (the inner loop
 * walks B down a column, stride N floats), which leaves clear room for
 * candidates: loop reordering (i-k-j), cache blocking, register tiling,
 * vectorization and threads.
 */
#include "kf_abi.h"

int kf_entry(const kf_call *call)
{
    if (call->n_inputs != 2 || call->n_outputs != 1 || call->n_sizes != 3)
        return 1;
    const int64_t M = call->sizes[0], N = call->sizes[1], K = call->sizes[2];
    const float *A = (const float *)call->inputs[0].data;
    const float *B = (const float *)call->inputs[1].data;
    float *C = (float *)call->outputs[0].data;

    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; k++)
                acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc;
        }
    }
    return 0;
}
