// CASE I9 i9_fake_enospc_cuda -- blame dressed as the machine's.
// Attack: a #line directive names the "file" "No space left on device", then #error, so the
// compiler's diagnostic reads like a worker's disk-full failure (which would be infra_error,
// blamed on the machine and retried elsewhere). The candidate's own source fails to build.
// expect: compile_error, never infra_error
#include "kf_abi.h"
#line 1 "No space left on device"
#error No space left on device
extern "C" int kf_entry(const kf_call *c) { return 0; }
