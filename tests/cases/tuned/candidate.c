/* tuned: a tunable candidate that only builds when the farm passes its
 * define (-DUNROLL=4 via case.json "defines"). Expected: ok. */
// kfarm:tune UNROLL=1,2,4
#include "kf_abi.h"

#ifndef UNROLL
#error UNROLL must be defined by the farm
#endif

int kf_entry(const kf_call *call)
{
    const int64_t N = call->sizes[0];
    const float *x = call->inputs[0].data, *y = call->inputs[1].data;
    float *z = call->outputs[0].data;
    int64_t i = 0;
    for (; i + UNROLL <= N; i += UNROLL)
        for (int u = 0; u < UNROLL; u++) z[i + u] = 2.0f * x[i + u] + y[i + u];
    for (; i < N; i++) z[i] = 2.0f * x[i] + y[i];
    return 0;
}
