/* small_size (C7): correct and fast while N fits its hard-coded 65536-element
 * staging buffer; beyond that the index wraps. Validation includes the
 * largest size (N = 3000001). Expected: incorrect at that shape. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "kf_abi.h"

static float stage[65536];

int kf_entry(const kf_call *call)
{
    const int64_t N = call->sizes[0];
    const float *x = call->inputs[0].data, *y = call->inputs[1].data;
    float *z = call->outputs[0].data;
    for (int64_t i = 0; i < N; i++) stage[i & 65535] = 2.0f * x[i] + y[i];
    for (int64_t i = 0; i < N; i++) z[i] = stage[i & 65535];
    return 0;
}
