/*
 * layernorm_f32 seed: y = (x - mean) / sqrt(var + 1e-5) * gamma + beta per row
 * (biased variance).
 *
 * Ideas: rows over THREADS OpenMP threads; every pass is an `omp simd` loop
 * (vector partial sums, which also shortens the float summation chains).
 * ONE_PASS=0: two passes (mean, then sum of squared deviations).
 * ONE_PASS=1: one pass over shifted data d = x - x[row,0], accumulating sum(d)
 * and sum(d^2) together (shifting by a sample keeps the cancellation in
 * E[d^2] - E[d]^2 harmless), then var = S2/N - (S1/N)^2; this reads the row
 * one time fewer.
 */
#include <math.h>
#include "kf_abi.h"

// kfarm:tune THREADS=1,2
// kfarm:tune ONE_PASS=0,1
#ifndef THREADS
#define THREADS 2
#endif
#ifndef ONE_PASS
#define ONE_PASS 0
#endif

static void ln_row(const float *restrict xr, const float *restrict gamma,
                   const float *restrict beta, float *restrict yr, int64_t N)
{
    float mean, var;
#if ONE_PASS
    const float shift = xr[0];
    float s1 = 0.0f, s2 = 0.0f;
#pragma omp simd reduction(+ : s1, s2)
    for (int64_t n = 0; n < N; n++) {
        const float d = xr[n] - shift;
        s1 += d;
        s2 += d * d;
    }
    const float md = s1 / (float)N;
    mean = shift + md;
    var = s2 / (float)N - md * md;
    if (var < 0.0f)
        var = 0.0f;
#else
    float s1 = 0.0f;
#pragma omp simd reduction(+ : s1)
    for (int64_t n = 0; n < N; n++)
        s1 += xr[n];
    mean = s1 / (float)N;
    float s2 = 0.0f;
#pragma omp simd reduction(+ : s2)
    for (int64_t n = 0; n < N; n++) {
        const float d = xr[n] - mean;
        s2 += d * d;
    }
    var = s2 / (float)N;
#endif
    const float rstd = 1.0f / sqrtf(var + 1e-5f);
#pragma omp simd
    for (int64_t n = 0; n < N; n++)
        yr[n] = (xr[n] - mean) * rstd * gamma[n] + beta[n];
}

int kf_entry(const kf_call *call)
{
    if (call->n_inputs != 3 || call->n_outputs != 1 || call->n_sizes != 2)
        return 1;
    const int64_t M = call->sizes[0], N = call->sizes[1];
    const float *x = (const float *)call->inputs[0].data;
    const float *gamma = (const float *)call->inputs[1].data;
    const float *beta = (const float *)call->inputs[2].data;
    float *y = (float *)call->outputs[0].data;

#pragma omp parallel for schedule(static) num_threads(THREADS)
    for (int64_t m = 0; m < M; m++)
        ln_row(x + m * N, gamma, beta, y + m * N, N);
    return 0;
}
