/*
 * layernorm_f32 baseline: straightforward single-threaded two-pass layer norm
 * (mean, then variance of the deviations, then normalize, scale and shift).
 * The two row sums are kept in double (the usual precaution for long rows: a
 * float running sum over 200000 elements drifts past the tolerance); scalar
 * double adds cost the same as float ones. No threads, no attention to
 * vectorization (gcc does not vectorize these scalar reductions).
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
        float *yr = y + m * N;
        double sum = 0.0;
        for (int64_t n = 0; n < N; n++)
            sum += xr[n];
        const float mean = (float)(sum / (double)N);
        double sq = 0.0;
        for (int64_t n = 0; n < N; n++) {
            const float d = xr[n] - mean;
            sq += d * d;
        }
        const float rstd = 1.0f / sqrtf((float)(sq / (double)N) + 1e-5f);
        for (int64_t n = 0; n < N; n++)
            yr[n] = (xr[n] - mean) * rstd * gamma[n] + beta[n];
    }
    return 0;
}
