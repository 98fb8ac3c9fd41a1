/*
 * sgemm_f32 reference: C[M,N] = A[M,K] @ B[K,N], row-major f32.
 * Every output is one dot product accumulated in double over k = 0..K-1 in
 * order and rounded to f32 once -- the ground truth, not a fast kernel.
 * The output is computed in tiles of 4 rows by 8 columns whose 32 double
 * accumulators stay in registers while k runs: every C[i,j] is still one
 * multiply and add per k, k ascending, exactly the order of the textbook
 * i, j, k loop, with the same result bit for bit (checked on the task's
 * validation shapes against the row-at-a-time i, k, j loop it replaced).
 * The judge runs the reference on every checked call and in every
 * validation trial: ~0.5 s at 512^3 for i, j, k, 0.09 s for i, k, j, 0.02 s
 * here (this 2-core dev VM, -O2 -march=native).
 */
#include <stdlib.h>

#include "kf_abi.h"

int kf_entry(const kf_call *call)
{
    if (call->n_inputs != 2 || call->n_outputs != 1 || call->n_sizes != 3)
        return 1;
    const int64_t M = call->sizes[0], N = call->sizes[1], K = call->sizes[2];
    const float *A = (const float *)call->inputs[0].data;
    const float *B = (const float *)call->inputs[1].data;
    float *C = (float *)call->outputs[0].data;
    enum { RI = 4, RJ = 8 }; /* the tile */
    for (int64_t i = 0; i < M; i += RI) {
        const int64_t ni = M - i < RI ? M - i : RI;
        for (int64_t j = 0; j < N; j += RJ) {
            const int64_t nj = N - j < RJ ? N - j : RJ;
            double c[RI][RJ] = {{0}};
            if (ni == RI && nj == RJ) {
                for (int64_t k = 0; k < K; k++) {
                    const float *b = B + k * N + j;
                    double bk[RJ];
                    for (int t = 0; t < RJ; t++) bk[t] = (double)b[t];
                    for (int r = 0; r < RI; r++) {
                        const double x = (double)A[(i + r) * K + k];
                        for (int t = 0; t < RJ; t++) c[r][t] += x * bk[t];
                    }
                }
            } else { /* an edge tile */
                for (int64_t k = 0; k < K; k++)
                    for (int64_t r = 0; r < ni; r++) {
                        const double x = (double)A[(i + r) * K + k];
                        for (int64_t t = 0; t < nj; t++) c[r][t] += x * (double)B[k * N + j + t];
                    }
            }
            for (int64_t r = 0; r < ni; r++)
                for (int64_t t = 0; t < nj; t++) C[(i + r) * N + j + t] = (float)c[r][t];
        }
    }
    return 0;
}
