/* Test task reference: z = 2x + y, in double, rounded once. */
#include "kf_abi.h"

int kf_entry(const kf_call *call)
{
    const int64_t N = call->sizes[0];
    const float *x = call->inputs[0].data, *y = call->inputs[1].data;
    float *z = call->outputs[0].data;
    for (int64_t i = 0; i < N; i++) z[i] = (float)(2.0 * (double)x[i] + (double)y[i]);
    return 0;
}
