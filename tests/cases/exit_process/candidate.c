/* exit_process: calls exit() from kf_entry. Expected: runtime_error
 * "candidate exited the process (status 3) before the harness reported". */
#include <stdlib.h>
#include "kf_abi.h"

int kf_entry(const kf_call *call)
{
    exit(3);
}
