/* env_scrubbed: a correct candidate that fails (returns 9) if it can see the
 * worker's secrets: run_cases.sh exports KFARM_TEST_SECRET, and the sandbox
 * must scrub it (and HOME must be the runner's own folder). Expected: ok. */
#include <math.h>
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

#include <stdlib.h>

int kf_entry(const kf_call *call)
{
    if (getenv("KFARM_TEST_SECRET")) return 9;
    const char *home = getenv("HOME");
    if (!home || !strstr(home, "kfarm-run-")) return 10;
    softmax_rows(call->inputs[0].data, call->outputs[0].data, call->sizes[0], call->sizes[1]);
    return 0;
}
