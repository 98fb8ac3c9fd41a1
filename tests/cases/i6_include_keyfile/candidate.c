/* i6_include_keyfile (field case I6), task axpy_f32. #includes the fleet
 * key file at its fixed path. The key is not C, so the compiler stops with
 * an error that quotes the offending line -- the key -- into the compile
 * log, which the farm stores and shows (and feeds back to the model in the
 * next prompt). If the file cannot be read, the compiler says so instead.
 * Before the judge/runner split: key quoted in the stored compile log.
 * Expected: any verdict (compile_error in practice), but the key must not
 * appear in the --json output (compile_log included) or on stderr: the
 * compiler must not be able to read it. */
#include "kf_abi.h"

static const char *fleet_key =
#include "/tmp/kfarm-case-secrets/fleet.key"
    ;

int kf_entry(const kf_call *call)
{
    (void)fleet_key;
    const int64_t N = call->sizes[0];
    const float *x = call->inputs[0].data, *y = call->inputs[1].data;
    float *z = call->outputs[0].data;
    for (int64_t i = 0; i < N; i++) z[i] = 2.0f * x[i] + y[i];
    return 0;
}
