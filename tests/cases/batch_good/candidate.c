/* batch_good: good_axpy on axpy_tiny_f32, whose calls last a few µs, so the
 * judge times them in batches of many calls per doorbell. Expected: ok, at
 * a speedup near the baseline's (the doorbell is not what is timed). */
#include <stdint.h>
#include "kf_abi.h"

int kf_entry(const kf_call *call)
{
    const int64_t N = call->sizes[0];
    const float *restrict x = call->inputs[0].data, *restrict y = call->inputs[1].data;
    float *restrict z = call->outputs[0].data;
    for (int64_t i = 0; i < N; i++) z[i] = 2.0f * x[i] + y[i];
    return 0;
}
