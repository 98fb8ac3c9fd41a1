/* Row softmax on one thread; the exponential is a branch-free polynomial
 * that vectorizes (libm expf does not). softmax_good without OpenMP threads:
 * on a busy 2-core CI runner its two threads timed at a CV of up to 90%. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "kf_abi.h"

static inline float exp_nonpos(float x)
{
    const float xc = x < -87.0f ? -87.0f : x;
    const float t = xc * 1.44269504088896341f;
    const float n = (t + 12582912.0f) - 12582912.0f;
    const float r = (xc - n * 0.693145751953125f) - n * 1.42860682030941723e-06f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const int32_t bits = ((int32_t)n + 127) << 23;
    float s;
    memcpy(&s, &bits, sizeof s);
    return x < -87.3f ? 0.0f : p * s;
}

static void row(const float *restrict xr, float *restrict yr, int64_t N)
{
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int64_t n = 0; n < N; n++) mx = xr[n] > mx ? xr[n] : mx;
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
    for (int64_t n = 0; n < N; n++) yr[n] *= inv;
}

int kf_entry(const kf_call *call)
{
    const int64_t M = call->sizes[0], N = call->sizes[1];
    const float *x = (const float *)call->inputs[0].data;
    float *y = (float *)call->outputs[0].data;
    for (int64_t m = 0; m < M; m++) row(x + m * N, y + m * N, N);
    return 0;
}
