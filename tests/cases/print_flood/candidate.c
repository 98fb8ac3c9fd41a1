/* print_flood: correct, but prints 32 MiB on its first call. Output is
 * captured through a capped pipe; the evaluation is unaffected. Expected: ok. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "kf_abi.h"

int kf_entry(const kf_call *call)
{
    static int printed;
    if (!printed) {
        printed = 1;
        static char line[1024];
        memset(line, '#', sizeof(line) - 1);
        for (int i = 0; i < 32 * 1024; i++) puts(line);
    }
    const int64_t M = call->sizes[0], N = call->sizes[1];
    const float *x = call->inputs[0].data;
    float *y = call->outputs[0].data;
    for (int64_t m = 0; m < M; m++) {
        float mx = -INFINITY;
        double sum = 0;
        for (int64_t n = 0; n < N; n++) mx = fmaxf(mx, x[m * N + n]);
        for (int64_t n = 0; n < N; n++) sum += (y[m * N + n] = expf(x[m * N + n] - mx));
        for (int64_t n = 0; n < N; n++) y[m * N + n] = (float)(y[m * N + n] / sum);
    }
    return 0;
}
