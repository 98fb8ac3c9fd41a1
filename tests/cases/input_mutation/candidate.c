/* input_mutation (C5): zeroes its inputs and writes zeros. If the reference
 * ran afterwards on the same buffers the two would agree. Expected: incorrect
 * "candidate modified input". */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "kf_abi.h"

int kf_entry(const kf_call *call)
{
    const int64_t N = call->sizes[0];
    float *x = call->inputs[0].data, *y = call->inputs[1].data, *z = call->outputs[0].data;
    memset(x, 0, (size_t)N * sizeof(float));
    memset(y, 0, (size_t)N * sizeof(float));
    for (int64_t i = 0; i < N; i++) z[i] = 2.0f * x[i] + y[i];
    return 0;
}
