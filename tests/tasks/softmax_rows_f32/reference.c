/* Test task reference: row softmax in double, rounded to f32 once. */
#include <math.h>
#include "kf_abi.h"

int kf_entry(const kf_call *call)
{
    if (call->n_inputs != 1 || call->n_outputs != 1 || call->n_sizes != 2) return 1;
    const int64_t M = call->sizes[0], N = call->sizes[1];
    const float *x = (const float *)call->inputs[0].data;
    float *y = (float *)call->outputs[0].data;
    for (int64_t m = 0; m < M; m++) {
        const float *xr = x + m * N;
        float *yr = y + m * N;
        double mx = -INFINITY, sum = 0;
        for (int64_t n = 0; n < N; n++) if (xr[n] > mx) mx = xr[n];
        for (int64_t n = 0; n < N; n++) sum += exp((double)xr[n] - mx);
        for (int64_t n = 0; n < N; n++) yr[n] = (float)(exp((double)xr[n] - mx) / sum);
    }
    return 0;
}
