/* farm_axpy_f32 reference: out[i] = 2*x[i] + y[i], computed in double. */
#include "kf_abi.h"
int kf_entry(const kf_call *c)
{
    const float *x = c->inputs[0].data, *y = c->inputs[1].data;
    float *o = c->outputs[0].data;
    for (int64_t i = 0; i < c->sizes[0]; i++) o[i] = (float)(2.0 * (double)x[i] + (double)y[i]);
    return 0;
}
