/* Test task baseline: straightforward f32 softmax with a double row sum. */
#include <math.h>
#include "kf_abi.h"

int kf_entry(const kf_call *call)
{
    const int64_t M = call->sizes[0], N = call->sizes[1];
    const float *x = (const float *)call->inputs[0].data;
    float *y = (float *)call->outputs[0].data;
    for (int64_t m = 0; m < M; m++) {
        const float *xr = x + m * N;
        float *yr = y + m * N;
        float mx = -INFINITY;
        for (int64_t n = 0; n < N; n++) mx = xr[n] > mx ? xr[n] : mx;
        double sum = 0;
        for (int64_t n = 0; n < N; n++) {
            float e = expf(xr[n] - mx);
            yr[n] = e;
            sum += e;
        }
        float inv = (float)(1.0 / sum);
        for (int64_t n = 0; n < N; n++) yr[n] *= inv;
    }
    return 0;
}
