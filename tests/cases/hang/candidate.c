/* hang (R2): spins forever. Expected: timeout within the limit; the process
 * group is killed. */
#include "kf_abi.h"

int kf_entry(const kf_call *call)
{
    volatile int done = 0;
    while (!done) {
    }
    return 0;
}
