/* i16_slow_reference (field case I16, "the task's own reference is too slow
 * for the worker"), task tests/tasks/slow_reference_f32: an axpy whose
 * reference sleeps 60 s on the largest validation shape. This candidate is
 * honest and fast (plain axpy). The evaluation runs with a 5 s limit, so
 * the reference cannot finish before any candidate output can be judged.
 * Before the judge/runner split: timeout, blamed on the candidate.
 * Expected: infra_error with a detail naming the reference (the task's
 * fault: the campaign pauses with that reason), never the candidate's
 * timeout, and not a worker fault. */
#include "kf_abi.h"

int kf_entry(const kf_call *call)
{
    const int64_t N = call->sizes[0];
    const float *x = call->inputs[0].data, *y = call->inputs[1].data;
    float *z = call->outputs[0].data;
    for (int64_t i = 0; i < N; i++) z[i] = 2.0f * x[i] + y[i];
    return 0;
}
