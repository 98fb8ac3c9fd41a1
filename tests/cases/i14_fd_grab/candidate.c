/* i14_fd_grab (field case I14), task axpy_f32. On its first call it opens
 * /dev/null 20000 times (raising its own RLIMIT_NOFILE soft limit to the
 * hard limit first, as any program may), stops at the first failure, and
 * keeps every descriptor open for the rest of the run. Then it computes
 * axpy correctly. Prints how many it got.
 * Before the judge/runner split: no descriptor limit beyond the inherited
 * one. Expected: any verdict, the worker alive (exit 0). */
#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>
#include "kf_abi.h"

static int grabbed;

int kf_entry(const kf_call *call)
{
    if (!grabbed) {
        grabbed = 1;
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
            rl.rlim_cur = rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &rl);
        }
        int n = 0;
        for (; n < 20000; n++)
            if (open("/dev/null", O_RDONLY) < 0) break;
        fprintf(stderr, "i14: %d of 20000 descriptors opened\n", n);
    }
    const int64_t N = call->sizes[0];
    const float *x = call->inputs[0].data, *y = call->inputs[1].data;
    float *z = call->outputs[0].data;
    for (int64_t i = 0; i < N; i++) z[i] = 2.0f * x[i] + y[i];
    return 0;
}
