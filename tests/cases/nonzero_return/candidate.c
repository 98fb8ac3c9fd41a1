/* nonzero_return: kf_entry reports failure. Expected: runtime_error. */
#include "kf_abi.h"

int kf_entry(const kf_call *call) { return 7; }
