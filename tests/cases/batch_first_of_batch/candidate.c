/* batch_first_of_batch (class I4, calls skipped inside a batch), task
 * axpy_tiny_f32: finds the batch's boundaries from its own pointers (a call
 * of the same size whose output lies above the previous call's is a later
 * call of the same batch: sets are laid out upwards) and computes only the first call of
 * each batch, so a batch of k calls costs it one call. The judge checks a
 * checked batch whole, and which batches it checks is drawn from its
 * secret; the last batch is always checked.
 * Expected: incorrect (or rejected_cheat), for every seed. */
#include <stdint.h>
#include "kf_abi.h"

static uintptr_t last_out;
static int64_t last_n = -1;

int kf_entry(const kf_call *call)
{
    const int64_t N = call->sizes[0];
    uintptr_t out = (uintptr_t)call->outputs[0].data;
    int later = N == last_n && out > last_out;
    last_out = out;
    last_n = N;
    if (later) return 0;
    const float *x = call->inputs[0].data, *y = call->inputs[1].data;
    float *z = call->outputs[0].data;
    for (int64_t i = 0; i < N; i++) z[i] = 2.0f * x[i] + y[i];
    return 0;
}
