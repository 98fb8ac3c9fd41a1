/* constructor_exit: a shared-object constructor that exits the process
 * during dlopen. Policy: load_error (the candidate never became callable;
 * a crash or exit inside dlopen is a load failure). */
#include <stdlib.h>
#include "kf_abi.h"

__attribute__((constructor)) static void on_load(void) { exit(4); }

int kf_entry(const kf_call *call) { return 0; }
