/*
 * softmax_f32 reference: row softmax of x[M,N] (row-major f32) into y[M,N].
 *   y[m,n] = exp(x[m,n] - max_j x[m,j]) / sum_j exp(x[m,j] - max_j x[m,j])
 * Computed in double (exp from libm, double sum), rounded to f32 once.
 */
#include <math.h>
#include "kf_abi.h"

int kf_entry(const kf_call *call)
{
    if (call->n_inputs != 1 || call->n_outputs != 1 || call->n_sizes != 2)
        return 1;
    const int64_t M = call->sizes[0], N = call->sizes[1];
    const float *x = (const float *)call->inputs[0].data;
    float *y = (float *)call->outputs[0].data;

    for (int64_t m = 0; m < M; m++) {
        const float *xr = x + m * N;
        float *yr = y + m * N;
        double mx = -INFINITY;
        for (int64_t n = 0; n < N; n++)
            if ((double)xr[n] > mx)
                mx = xr[n];
        double sum = 0.0;
        for (int64_t n = 0; n < N; n++)
            sum += exp((double)xr[n] - mx);
        for (int64_t n = 0; n < N; n++)
            yr[n] = (float)(exp((double)xr[n] - mx) / sum);
    }
    return 0;
}
