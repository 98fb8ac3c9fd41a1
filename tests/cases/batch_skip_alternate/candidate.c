/* batch_skip_alternate (class I4, calls skipped inside a batch), task
 * axpy_tiny_f32: its calls are timed many per doorbell, so a candidate that
 * computes every other call halves its time per batch while each batch still
 * holds correct outputs. The judge checks a checked batch whole -- every
 * call of it -- so half the calls of any checked batch are wrong.
 * Expected: incorrect (or rejected_cheat), for every seed. Its honest calls
 * do the work twice, so an ok above 1.5x could only come from skipping. */
#include "kf_abi.h"

static long calls;

int kf_entry(const kf_call *call)
{
    if (++calls > 16 && (calls & 1)) return 0;
    const int64_t N = call->sizes[0];
    const float *x = call->inputs[0].data, *y = call->inputs[1].data;
    float *z = call->outputs[0].data;
    for (int pass = 0; pass < 2; pass++) {
        for (int64_t i = 0; i < N; i++) z[i] = 2.0f * x[i] + y[i];
        __asm__ volatile("" ::: "memory");
    }
    return 0;
}
