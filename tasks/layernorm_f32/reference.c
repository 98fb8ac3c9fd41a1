/*
 * layernorm_f32 reference: per row m of x[M,N] (row-major f32)
 *   mean = (1/N) sum_n x[m,n]
 *   var  = (1/N) sum_n (x[m,n] - mean)^2          (biased, as in PyTorch)
 *   y[m,n] = (x[m,n] - mean) / sqrt(var + 1e-5) * gamma[n] + beta[n]
 * Two passes in double, rounded to f32 once.
 */
#include <math.h>
#include "kf_abi.h"

int kf_entry(const kf_call *call)
{
    if (call->n_inputs != 3 || call->n_outputs != 1 || call->n_sizes != 2)
        return 1;
    const int64_t M = call->sizes[0], N = call->sizes[1];
    const float *x = (const float *)call->inputs[0].data;
    const float *gamma = (const float *)call->inputs[1].data;
    const float *beta = (const float *)call->inputs[2].data;
    float *y = (float *)call->outputs[0].data;

    for (int64_t m = 0; m < M; m++) {
        const float *xr = x + m * N;
        double mean = 0.0;
        for (int64_t n = 0; n < N; n++)
            mean += xr[n];
        mean /= (double)N;
        double var = 0.0;
        for (int64_t n = 0; n < N; n++) {
            const double d = (double)xr[n] - mean;
            var += d * d;
        }
        var /= (double)N;
        const double rstd = 1.0 / sqrt(var + 1e-5);
        for (int64_t n = 0; n < N; n++)
            y[m * N + n] = (float)(((double)xr[n] - mean) * rstd * (double)gamma[n] + (double)beta[n]);
    }
    return 0;
}
