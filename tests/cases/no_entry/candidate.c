/* no_entry: builds, but exports no kf_entry. Expected: load_error. */
#include "kf_abi.h"

int kf_entry_typo(const kf_call *call) { return 0; }
