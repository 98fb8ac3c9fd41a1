/* all_nan (C2): writes NaN everywhere (NaN never satisfies <=). Expected: incorrect. */
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
    softmax_rows(call->inputs[0].data, y, M, N);
    for (int64_t i = 0; i < M * N; i++) y[i] = NAN;
    return 0;
}
