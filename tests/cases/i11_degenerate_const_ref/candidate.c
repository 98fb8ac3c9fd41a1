/* i11_degenerate_const_ref (field case I11), task
 * tests/tasks/degenerate_const_f32: a copy of axpy_f32 whose reference is
 * broken and writes 1/N whatever its inputs. This candidate writes 1/N too,
 * matching the broken reference exactly at many times the baseline's speed
 * (a constant output is "trivial" only when the reference varies).
 * Before the judge/runner split: ok. Expected: the task is refused when it
 * is loaded: `kfarm-worker eval` exits 2 with one line on stderr naming the
 * reference (task_dir_valid: false in case.json). */
#include "kf_abi.h"

int kf_entry(const kf_call *call)
{
    const int64_t N = call->sizes[0];
    float *z = call->outputs[0].data;
    const float c = (float)(1.0 / (double)N);
    for (int64_t i = 0; i < N; i++) z[i] = c;
    return 0;
}
