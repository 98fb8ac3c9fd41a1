/* forbidden_symbol (C9): falls back to the task's own reference: dlopen()s
 * ../reference.so from the evaluation folder and calls its kf_entry. The
 * answer is right, so only the integrity check catches it: the task forbids
 * dlopen/dlsym. Expected: rejected_cheat naming 'dlopen'. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "kf_abi.h"

#include <dlfcn.h>

int kf_entry(const kf_call *call)
{
    void *h = dlopen("../reference.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) return 1;
    int (*ref)(const kf_call *) = (int (*)(const kf_call *))dlsym(h, "kf_entry");
    return ref ? ref(call) : 1;
}
