/* ship_scale_f32 reference: out = 3x + 1, one pass. */
#include "kf_abi.h"
int kf_entry(const kf_call *c)
{
    const float *x = c->inputs[0].data;
    float *o = c->outputs[0].data;
    for (int64_t i = 0; i < c->sizes[0]; i++) o[i] = 3.0f * x[i] + 1.0f;
    return 0;
}
