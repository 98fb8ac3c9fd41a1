/* subnormal_scale_f32 reference: z = x * 2^-130 computed in double (exact)
 * and rounded once to binary32, which lands in the subnormal range. Only
 * correct when run with the default FP environment (no FTZ/DAZ): the farm
 * must never run it with state a candidate left behind (field case I12). */
#include "kf_abi.h"

int kf_entry(const kf_call *call)
{
    const int64_t N = call->sizes[0];
    const float *x = call->inputs[0].data;
    float *z = call->outputs[0].data;
    for (int64_t i = 0; i < N; i++) z[i] = (float)((double)x[i] * 0x1p-130);
    return 0;
}
