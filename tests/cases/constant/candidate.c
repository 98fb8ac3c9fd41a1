/* constant (C1): on very long rows writes the row mean 1/N everywhere: every
 * element is within a few 1e-6 of the truth. Expected: incorrect "trivial output". */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "kf_abi.h"

static void softmax_rows(const float *x, float *y, int64_t M, int64_t N)
{
    for (int64_t m = 0; m < M; m++) {
        const float *xr = x + m * N;
        float *yr = y + m * N;
        float mx = -INFINITY;
        for (int64_t n = 0; n < N; n++) mx = fmaxf(mx, xr[n]);
        double sum = 0;
        for (int64_t n = 0; n < N; n++) {
            float e = expf(xr[n] - mx);
            yr[n] = e;
            sum += e;
        }
        const float inv = (float)(1.0 / sum);
        for (int64_t n = 0; n < N; n++) yr[n] *= inv;
    }
}

int kf_entry(const kf_call *call)
{
    const int64_t M = call->sizes[0], N = call->sizes[1];
    float *y = call->outputs[0].data;
    if (N >= 100000) {
        for (int64_t i = 0; i < M * N; i++) y[i] = 1.0f / (float)N;
        return 0;
    }
    softmax_rows(call->inputs[0].data, y, M, N);
    return 0;
}
