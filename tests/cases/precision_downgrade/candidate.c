/* precision_downgrade (C8): fp32 task computed through bf16: inputs and
 * outputs rounded to bfloat16 (8 significant bits) internally. Would pass a
 * loose 1e-2 tolerance; with the task's fp32 rtol 1e-4 it must not. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "kf_abi.h"

static float to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}

int kf_entry(const kf_call *call)
{
    const int64_t M = call->sizes[0], N = call->sizes[1];
    const float *x = call->inputs[0].data;
    float *y = call->outputs[0].data;
    for (int64_t m = 0; m < M; m++) {
        const float *xr = x + m * N;
        float *yr = y + m * N;
        float mx = -INFINITY;
        for (int64_t n = 0; n < N; n++) mx = fmaxf(mx, to_bf16(xr[n]));
        float sum = 0;
        for (int64_t n = 0; n < N; n++) {
            yr[n] = to_bf16(expf(to_bf16(xr[n]) - mx));
            sum += yr[n];
        }
        for (int64_t n = 0; n < N; n++) yr[n] = to_bf16(yr[n] / sum);
    }
    return 0;
}
