/* ship_scale_f32 baseline: twelve passes (a slow library). Its helper and
 * global share their names with the seed's on purpose: kfarm ship must keep
 * them apart when both land in one file. */
#include "kf_abi.h"
int ship_passes = 12;
static float ship_scale(float v) { return 3.0f * v + 1.0f; }
int kf_entry(const kf_call *c)
{
    const float *x = c->inputs[0].data;
    float *o = c->outputs[0].data;
    for (int p = 0; p < ship_passes; p++)
        for (int64_t i = 0; i < c->sizes[0]; i++) o[i] = ship_scale(x[i]);
    return 0;
}
