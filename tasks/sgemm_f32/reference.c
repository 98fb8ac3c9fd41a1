/*
 * sgemm_f32 reference: C[M,N] = A[M,K] @ B[K,N], row-major f32.
 * One dot product per output, accumulated in double, rounded to f32 once.
 * Deliberately simple: this is the ground truth, not a fast kernel.
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
            double acc = 0.0;
            for (int64_t k = 0; k < K; k++)
                acc += (double)A[i * K + k] * (double)B[k * N + j];
            C[i * N + j] = (float)acc;
        }
    }
    return 0;
}
