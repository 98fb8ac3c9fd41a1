/* constructor_abort: a constructor that aborts during dlopen. Expected:
 * load_error naming SIGABRT. */
#include <stdlib.h>
#include "kf_abi.h"

__attribute__((constructor)) static void on_load(void) { abort(); }

int kf_entry(const kf_call *call) { return 0; }
