/*
 * kf_cuda_child.h -- what the parent hands the CUDA child (internal to
 * worker/cuda). The child is kf_cuda_child, a kf_sandbox_fn (see
 * kf_cuda_harness.c); it exists only in builds with KFARM_HAVE_CUDA.
 */
#ifndef KF_CUDA_CHILD_H
#define KF_CUDA_CHILD_H

#include <stdint.h>
#include "kf_task.h"

typedef struct {
    const kf_task *task;
    const char *reference_so, *baseline_so, *candidate_so;
    uint64_t seed;          /* inputs derive from (seed, shape, trial, tensor) */
    int gpu;                /* CUDA device index */
    int quick;              /* fewer timing repetitions */
    int validate_only;      /* skip timing */
    int discover_only;      /* report the GPUs and exit */
    double budget_s;        /* seconds the child may spend timing */
    char nonce[33];         /* result-line nonce chosen by the parent */
} kf_cuda_child_cfg;

/* Sandbox callback: writes "P phase" lines and one "R nonce json" line. */
int kf_cuda_child(void *arg, int report_fd);

#endif
