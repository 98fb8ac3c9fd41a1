/* good_axpy: a correct vectorized z = 2x + y with OpenMP. Expected: ok. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "kf_abi.h"

int kf_entry(const kf_call *call)
{
    const int64_t N = call->sizes[0];
    const float *restrict x = call->inputs[0].data, *restrict y = call->inputs[1].data;
    float *restrict z = call->outputs[0].data;
#pragma omp parallel for simd schedule(static) if (N > 262144)
    for (int64_t i = 0; i < N; i++) z[i] = 2.0f * x[i] + y[i];
    return 0;
}
