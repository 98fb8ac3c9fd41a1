/*
 * kf_verdict.h -- the verdicts of DESIGN.md (prefix kf_verdict_).
 * One per evaluation, stored as text in the database and on the wire.
 */
#ifndef KF_VERDICT_H
#define KF_VERDICT_H

typedef enum {
    KF_OK = 0,
    KF_COMPILE_ERROR,   /* the candidate does not build */
    KF_LOAD_ERROR,      /* built, but dlopen / entry lookup failed */
    KF_RUNTIME_ERROR,   /* crashed, returned non-zero, sticky CUDA error */
    KF_TIMEOUT,         /* exceeded the wall-clock limit */
    KF_INCORRECT,       /* outputs do not match the reference */
    KF_REJECTED_CHEAT,  /* integrity check failed */
    KF_UNSUPPORTED,     /* cannot run on this architecture */
    KF_INFRA_ERROR,     /* the worker's fault: retried elsewhere */
    KF_NVERDICTS
} kf_verdict;

const char *kf_verdict_name(kf_verdict v);
/* -1 if unknown */
int kf_verdict_parse(const char *name);

#endif
