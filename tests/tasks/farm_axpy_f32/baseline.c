/* farm_axpy_f32 baseline: the plain loop. */
#include "kf_abi.h"
int kf_entry(const kf_call *c)
{
    const float *x = c->inputs[0].data, *y = c->inputs[1].data;
    float *o = c->outputs[0].data;
    for (int64_t i = 0; i < c->sizes[0]; i++) o[i] = 2.0f * x[i] + y[i];
    return 0;
}
