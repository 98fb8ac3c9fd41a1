/* kf_verdict.c -- verdict names. See kf_verdict.h. */
#include "kf_verdict.h"
#include <string.h>

static const char *names[KF_NVERDICTS] = {
    "ok", "compile_error", "load_error", "runtime_error", "timeout",
    "incorrect", "rejected_cheat", "unsupported", "infra_error",
};

const char *kf_verdict_name(kf_verdict v)
{
    return (v >= 0 && v < KF_NVERDICTS) ? names[v] : "infra_error";
}

int kf_verdict_parse(const char *name)
{
    for (int i = 0; i < KF_NVERDICTS; i++)
        if (name && strcmp(name, names[i]) == 0) return i;
    return -1;
}
