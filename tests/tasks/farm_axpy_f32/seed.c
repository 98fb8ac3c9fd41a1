/* farm_axpy_f32 seed for the farm's own tests: a correct kernel whose
 * DELAY_MS tunable makes every call slow, so fault tests can kill a worker
 * or the coordinator while a job is leased. */
// kfarm:tune DELAY_MS=200,201,202,203
// kfarm:tune UNROLL=1,4
#include <time.h>
#include "kf_abi.h"
#ifndef DELAY_MS
#define DELAY_MS 0
#endif
#ifndef UNROLL
#define UNROLL 1
#endif
int kf_entry(const kf_call *c)
{
    const float *x = c->inputs[0].data, *y = c->inputs[1].data;
    float *o = c->outputs[0].data;
    int64_t n = c->sizes[0];
    int64_t i = 0;
    for (; i + UNROLL <= n; i += UNROLL)
        for (int u = 0; u < UNROLL; u++) o[i + u] = 2.0f * x[i + u] + y[i + u];
    for (; i < n; i++) o[i] = 2.0f * x[i] + y[i];
    struct timespec ts = {DELAY_MS / 1000, (DELAY_MS % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    return 0;
}
