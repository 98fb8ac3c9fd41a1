/* Red-team case (found by trying the judge as a hostile model would, 2026-11-30); see case.json for the expected verdict. */
/* f1_invalid_utf8_output: blame pushed onto the worker. The judge copies a
 * runner's stdout/stderr tail into the report with json_stringn_nocheck()
 * (no UTF-8 validation); jansson's json_dumps() then fails on the invalid
 * bytes, finish() writes no report at all, and eval.c's take_report() turns
 * the missing report into infra_error blame "worker" ("the judge gave no
 * verdict"). Works with any verdict: here the kernel is honest axpy. */
#include <stdio.h>
#include <unistd.h>
#include "kf_abi.h"

__attribute__((constructor)) static void ctor(void) { write(1, "\xff\xfe\xc0\n", 4); }

int kf_entry(const kf_call *call)
{
    const int64_t N = call->sizes[0];
    const float *x = call->inputs[0].data, *y = call->inputs[1].data;
    float *z = call->outputs[0].data;
    for (int64_t i = 0; i < N; i++) z[i] = 2.0f * x[i] + y[i];
    return 0;
}
