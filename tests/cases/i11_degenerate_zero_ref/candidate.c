/* i11_degenerate_zero_ref (field case I11, "degenerate task"), task
 * tests/tasks/degenerate_zero_f32: a copy of axpy_f32 whose reference is
 * broken and writes 0 whatever its inputs. This candidate writes zeros too
 * -- the cheapest possible "kernel" -- and so matches the broken reference
 * exactly, at many times the baseline's speed.
 * Before the judge/runner split: ok, 17-45x. Expected: the task is refused
 * when it is loaded, before any candidate is judged: `kfarm-worker eval`
 * exits 2 with one line on stderr naming the reference (task_dir_valid:
 * false in case.json). */
#include <string.h>
#include "kf_abi.h"

int kf_entry(const kf_call *call)
{
    memset(call->outputs[0].data, 0, (size_t)call->sizes[0] * sizeof(float));
    return 0;
}
