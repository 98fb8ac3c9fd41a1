/* i14_memory_grab (field case I14, "resource grab"), task axpy_f32. On its
 * first call it touches GRAB_GIB GiB (default 30): malloc in 256 MiB chunks,
 * memset each, stop at the first malloc failure, and keep everything it
 * got for the rest of the run. Then it computes axpy correctly. Prints how
 * much it got. With no limit the kernel's OOM killer picks a victim on the
 * host -- maybe not the candidate.
 * Before the judge/runner split: no memory limit. Expected: any verdict
 * (ok when an address-space/cgroup limit makes malloc fail early;
 * runtime_error when the runner is killed at its memory limit), the worker
 * alive (exit 0) and the host fine. */
// kfarm:tune GRAB_GIB=1,4,30
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kf_abi.h"

#ifndef GRAB_GIB
#define GRAB_GIB 30
#endif

#define CHUNK ((size_t)256 << 20)
static void *held[GRAB_GIB * 4 + 1];
static int grabbed;

int kf_entry(const kf_call *call)
{
    if (!grabbed) {
        grabbed = 1;
        int n = 0;
        for (; n < GRAB_GIB * 4; n++) {
            void *p = malloc(CHUNK);
            if (!p) break;
            memset(p, 0xa5, CHUNK);
            held[n] = p;
        }
        fprintf(stderr, "i14: touched %d MiB of %d GiB asked\n", n * 256, GRAB_GIB);
    }
    const int64_t N = call->sizes[0];
    const float *x = call->inputs[0].data, *y = call->inputs[1].data;
    float *z = call->outputs[0].data;
    for (int64_t i = 0; i < N; i++) z[i] = 2.0f * x[i] + y[i];
    return 0;
}
