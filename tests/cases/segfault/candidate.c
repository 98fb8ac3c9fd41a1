/* segfault (R1 CPU analog): writes past the end of its output. Outputs are
 * followed by a guard page, so the write faults at once. Expected:
 * runtime_error naming SIGSEGV. */
#include "kf_abi.h"

int kf_entry(const kf_call *call)
{
    const int64_t M = call->sizes[0], N = call->sizes[1];
    float *y = (float *)call->outputs[0].data;
    for (int64_t i = 0; i < M * N; i++) y[i] = 0.5f;
    y[M * N + 16] = 1.0f; /* 64 bytes past the end: inside the guard page */
    return 0;
}
