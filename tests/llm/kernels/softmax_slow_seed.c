/*
 * A deliberately slow softmax_f32 seed for the goal test (llm_budgets): the
 * baseline's scalar three-pass row softmax (libm expf, double running sum),
 * done SLOW_REPEAT times over. The test is about the stopping rule: a model
 * kernel ~10-20x faster than this clears its noise interval even on a busy
 * CI runner, where a 1.5-2x one did not.
 */
#include <math.h>
#include "kf_abi.h"

#define SLOW_REPEAT 6

int kf_entry(const kf_call *call)
{
    if (call->n_inputs != 1 || call->n_outputs != 1 || call->n_sizes != 2)
        return 1;
    const int64_t M = call->sizes[0], N = call->sizes[1];
    const float *x = (const float *)call->inputs[0].data;
    float *y = (float *)call->outputs[0].data;

    for (int rep = 0; rep < SLOW_REPEAT; rep++)
        for (int64_t m = 0; m < M; m++) {
            const float *xr = x + m * N;
            float *yr = y + m * N;
            float mx = xr[0];
            for (int64_t n = 1; n < N; n++)
                if (xr[n] > mx)
                    mx = xr[n];
            double sum = 0.0;
            for (int64_t n = 0; n < N; n++) {
                yr[n] = expf(xr[n] - mx);
                sum += yr[n];
            }
            const float fsum = (float)sum;
            for (int64_t n = 0; n < N; n++)
                yr[n] = yr[n] / fsum;
        }
    return 0;
}
