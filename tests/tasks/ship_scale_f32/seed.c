/* ship_scale_f32 seed: one pass from N = 262144 up, forty below (a setup
 * cost), so it beats the baseline's twelve passes only at the large shape. */
// kfarm:tune UNROLL=1,4
#include "kf_abi.h"
#ifndef UNROLL
#define UNROLL 1
#endif
#define SHIP_SMALL 262144
int ship_passes = 40;
static float ship_scale(float v) { return 3.0f * v + 1.0f; }
int kf_entry(const kf_call *c)
{
    const float *x = c->inputs[0].data;
    float *o = c->outputs[0].data;
    int64_t n = c->sizes[0];
    int passes = n < SHIP_SMALL ? ship_passes : 1;
    for (int p = 0; p < passes; p++) {
        int64_t i = 0;
        for (; i + UNROLL <= n; i += UNROLL)
            for (int u = 0; u < UNROLL; u++) o[i + u] = ship_scale(x[i + u]);
        for (; i < n; i++) o[i] = ship_scale(x[i]);
    }
    return 0;
}
