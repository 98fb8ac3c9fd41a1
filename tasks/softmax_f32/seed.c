/*
 * softmax_f32 seed: row softmax y = exp(x - rowmax) / sum(exp(x - rowmax)).
 *
 * Ideas: rows are independent, so they are spread over THREADS OpenMP threads
 * (CHUNK rows at a time); each pass over a row is a `omp simd` loop; with
 * FAST_EXP=1 the exponential is an inline branch-free polynomial (Cody-Waite
 * range reduction, degree-7 Taylor on [-ln2/2, ln2/2], exponent built from
 * bits: about 1 ulp) that vectorizes, where libm expf is a scalar call. The
 * row sum is float vector partial sums per 1024-element block, blocks added
 * in double; the final pass multiplies by the reciprocal of the sum.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "kf_abi.h"

// kfarm:tune THREADS=1,2
// kfarm:tune FAST_EXP=0,1
// kfarm:tune CHUNK=1,16
#ifndef THREADS
#define THREADS 2
#endif
#ifndef FAST_EXP
#define FAST_EXP 1
#endif
#ifndef CHUNK
#define CHUNK 16
#endif

/* exp(x) for x <= 0 (x - rowmax is never positive); exact 0 below -87.3. */
static inline float exp_nonpos(float x)
{
#if FAST_EXP
    const float xc = x < -87.0f ? -87.0f : x;
    const float t = xc * 1.44269504088896341f;
    const float n = (t + 12582912.0f) - 12582912.0f; /* round to nearest */
    const float r = (xc - n * 0.693145751953125f) - n * 1.42860682030941723e-06f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const int32_t bits = ((int32_t)n + 127) << 23; /* 2^n, n in [-126, 0] */
    float s;
    memcpy(&s, &bits, sizeof s);
    return x < -87.3f ? 0.0f : p * s;
#else
    return expf(x);
#endif
}

static void softmax_row(const float *restrict xr, float *restrict yr, int64_t N)
{
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int64_t n = 0; n < N; n++)
        mx = xr[n] > mx ? xr[n] : mx;
    /* float vector partial sums over blocks of 1024, blocks summed in double:
     * vectorizes, and a long row of tiny terms does not drift. */
    double sum = 0.0;
    for (int64_t b = 0; b < N; b += 1024) {
        const int64_t e = b + 1024 < N ? b + 1024 : N;
        float part = 0.0f;
#pragma omp simd reduction(+ : part)
        for (int64_t n = b; n < e; n++) {
            const float v = exp_nonpos(xr[n] - mx);
            yr[n] = v;
            part += v;
        }
        sum += part;
    }
    const float inv = (float)(1.0 / sum);
#pragma omp simd
    for (int64_t n = 0; n < N; n++)
        yr[n] *= inv;
}

int kf_entry(const kf_call *call)
{
    if (call->n_inputs != 1 || call->n_outputs != 1 || call->n_sizes != 2)
        return 1;
    const int64_t M = call->sizes[0], N = call->sizes[1];
    const float *x = (const float *)call->inputs[0].data;
    float *y = (float *)call->outputs[0].data;

#pragma omp parallel for schedule(static, CHUNK) num_threads(THREADS)
    for (int64_t m = 0; m < M; m++)
        softmax_row(x + m * N, y + m * N, N);
    return 0;
}
