/* Skips the normalization "because the sum is close to one" (it is not). */
#include <math.h>
#include "kf_abi.h"

int kf_entry(const kf_call *call)
{
    const int64_t M = call->sizes[0], N = call->sizes[1];
    const float *x = (const float *)call->inputs[0].data;
    float *y = (float *)call->outputs[0].data;
#pragma omp parallel for num_threads(2)
    for (int64_t m = 0; m < M; m++) {
        float mx = -INFINITY;
        for (int64_t n = 0; n < N; n++) mx = fmaxf(mx, x[m * N + n]);
        for (int64_t n = 0; n < N; n++) y[m * N + n] = expf(x[m * N + n] - mx);
    }
    return 0;
}
