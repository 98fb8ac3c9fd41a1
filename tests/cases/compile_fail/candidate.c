/* compile_fail: a syntax error. Expected: compile_error with the first error line. */
#include "kf_abi.h"

int kf_entry(const kf_call *call)
{
    return call->n_inputs +   /* missing operand */ ;
}
