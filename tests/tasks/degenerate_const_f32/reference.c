/* degenerate_const_f32 reference (field case I11): deliberately broken. It
 * ignores its inputs and writes the constant 1/N to every element (a
 * "softmax of nothing"), so a candidate that writes 1/N would "match" it.
 * The farm must notice, when it loads the task, that this reference's
 * output does not depend on its inputs and refuse the task with that
 * reason. */
#include "kf_abi.h"

int kf_entry(const kf_call *call)
{
    const int64_t N = call->sizes[0];
    float *z = call->outputs[0].data;
    const float c = (float)(1.0 / (double)N);
    for (int64_t i = 0; i < N; i++) z[i] = c;
    return 0;
}
