/* half_writer (C4): computes the right answer but writes only the first half
 * of its output; stale correct values would fill the rest if buffers were
 * reused. Expected: incorrect "element ... not written". */
#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include "kf_abi.h"

static void softmax_rows(const float *x, float *y, int64_t M, int64_t N)
{
    for (int64_t m = 0; m < M; m++) {
        const float *xr = x + m * N;
        float *yr = y + m * N;
        float mx = -INFINITY;
        for (int64_t n = 0; n < N; n++) mx = fmaxf(mx, xr[n]);
        double sum = 0;
        for (int64_t n = 0; n < N; n++) {
            float e = expf(xr[n] - mx);
            yr[n] = e;
            sum += e;
        }
        const float inv = (float)(1.0 / sum);
        for (int64_t n = 0; n < N; n++) yr[n] *= inv;
    }
}

int kf_entry(const kf_call *call)
{
    const int64_t M = call->sizes[0], N = call->sizes[1];
    float *tmp = malloc((size_t)(M * N) * sizeof(float));
    if (!tmp) return 1;
    softmax_rows(call->inputs[0].data, tmp, M, N);
    int64_t half = (M * N + 1) / 2;
    memcpy(call->outputs[0].data, tmp, (size_t)half * sizeof(float));
    free(tmp);
    return 0;
}
