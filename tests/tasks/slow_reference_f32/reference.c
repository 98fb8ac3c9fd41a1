/* slow_reference_f32 reference (field case I16): correct (z = 2x + y in
 * double, rounded once), but on the largest validation shape (N >= 3000001)
 * it sleeps 60 s first, like a reference that is simply too slow for the
 * worker it landed on. An evaluation limit shorter than that must be blamed
 * on the task (infra_error naming the reference), never on the candidate
 * (timeout) and never on the worker. */
#include <errno.h>
#include <time.h>
#include "kf_abi.h"

int kf_entry(const kf_call *call)
{
    const int64_t N = call->sizes[0];
    const float *x = call->inputs[0].data, *y = call->inputs[1].data;
    float *z = call->outputs[0].data;
    if (N >= 3000001) {
        struct timespec ts = {60, 0};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
    for (int64_t i = 0; i < N; i++) z[i] = (float)(2.0 * (double)x[i] + (double)y[i]);
    return 0;
}
