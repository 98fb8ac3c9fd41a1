/* degenerate_zero_f32 reference (field case I11): deliberately broken. It
 * ignores its inputs and writes 0 to every element, so any candidate that
 * writes zeros would "match" it. The farm must notice, when it loads the
 * task, that this reference's output does not depend on its inputs (or is
 * trivial) and refuse the task with that reason. */
#include "kf_abi.h"

int kf_entry(const kf_call *call)
{
    const int64_t N = call->sizes[0];
    float *z = call->outputs[0].data;
    for (int64_t i = 0; i < N; i++) z[i] = 0.0f;
    return 0;
}
