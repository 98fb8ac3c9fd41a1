/* i12_ftz_daz (field case I12 / F25, "FP environment left behind"), task
 * tests/tasks/subnormal_scale_f32 (z = x * 2^-130: every output is
 * subnormal). A constructor turns on flush-to-zero and denormals-are-zero
 * (MXCSR FTZ|DAZ) in the loading thread and never restores them; kf_entry
 * sets them again (in case the caller reset MXCSR) and computes the right
 * formula, x * 2^-65 * 2^-65 -- which, flushed, is 0 everywhere. In a
 * process shared with the reference and the comparison, the reference's
 * subnormal results are flushed to 0 as well (and DAZ reads any subnormal
 * reference value as 0), so all-zeros "matches".
 * Before the judge/runner split: ok. Expected: incorrect (the reference
 * and the comparison never run with the candidate's FP state). */
#include <xmmintrin.h>
#include "kf_abi.h"

#define FTZ_DAZ 0x8040u /* MXCSR bit 15 flush-to-zero, bit 6 denormals-are-zero */

__attribute__((constructor)) static void flush_everything(void) { _mm_setcsr(_mm_getcsr() | FTZ_DAZ); }

int kf_entry(const kf_call *call)
{
    _mm_setcsr(_mm_getcsr() | FTZ_DAZ);
    const int64_t N = call->sizes[0];
    const float *x = call->inputs[0].data;
    float *z = call->outputs[0].data;
    for (int64_t i = 0; i < N; i++) z[i] = (x[i] * 0x1p-65f) * 0x1p-65f;
    return 0;
}
