/* i12_subnormal_honest (control for field case I12), task
 * tests/tasks/subnormal_scale_f32. The same formula as i12_ftz_daz,
 * x * 2^-65 * 2^-65, with the default FP environment: gradual underflow
 * gives the exact subnormal results. Shows that the task itself is sound:
 * an honest kernel passes, so i12_ftz_daz fails for flushing, not because
 * the task cannot be passed. Expected: ok. */
#include "kf_abi.h"

int kf_entry(const kf_call *call)
{
    const int64_t N = call->sizes[0];
    const float *x = call->inputs[0].data;
    float *z = call->outputs[0].data;
    for (int64_t i = 0; i < N; i++) z[i] = (x[i] * 0x1p-65f) * 0x1p-65f;
    return 0;
}
