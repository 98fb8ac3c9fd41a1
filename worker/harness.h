/*
 * harness.h -- the child side of a cpu evaluation: validate, then time
 * (prefix kf_harness_).
 *
 * kf_harness_child is a kf_sandbox_fn: it runs inside the sandboxed child,
 * dlopens the reference, baseline and candidate, validates the candidate on
 * every validation shape and trial, times baseline and candidate interleaved
 * on every benchmark shape, and writes its findings to the report
 * descriptor. The parent (worker/eval.c) turns that report -- or the way the
 * child died -- into a verdict.
 *
 * Report protocol, one record per line:
 *
 *     P <phase text>            progress: what the child is about to do
 *     R <nonce> <json>          the final result (exactly once, last)
 *
 * The phase lines let the parent blame the right party when the child dies
 * without a result: a crash while the candidate is being loaded (its
 * constructors run inside dlopen) is load_error; any death after the
 * candidate was loaded is the candidate's (it may have corrupted the
 * process); a death before that is the task's (infra_error). The nonce is
 * chosen by the parent per evaluation, so text a candidate prints cannot be
 * mistaken for a result. Known limit: the candidate shares the child's
 * address space, so a determined candidate could find the nonce and forge
 * a record; closing that needs the harness in a separate process from the
 * candidate (shared-memory buffers), which the CUDA child would share.
 *
 * The result JSON is {"verdict": name, "detail": line, "metrics": {...}}
 * where metrics holds "validation" (per shape and trial: max abs/rel error
 * per output) and "timing" (per benchmark shape: baseline and candidate
 * median/min/CV/reps, speedup, GFLOP/s, GB/s; overall speedup as the
 * weighted geometric mean; flags such as "noisy").
 *
 * The rules it enforces are in DESIGN.md "Evaluation" and the field cases;
 * harness.c's header comment maps each check to its case.
 */
#ifndef KF_HARNESS_H
#define KF_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include "kf_task.h"

typedef struct {
    const kf_task *task;
    const char *reference_so, *baseline_so, *candidate_so;
    uint64_t seed;             /* job seed: inputs derive from (seed, shape, trial, tensor) */
    int quick;                 /* fewer timing repetitions (tests) */
    int validate_only;         /* skip timing */
    double budget_s;           /* seconds the child may use; timing is trimmed to fit */
    uint64_t llc_bytes;        /* last-level cache size for the flush buffer; 0 = 64 MiB */
    char nonce[33];            /* hex; set by the parent before forking */
} kf_harness_cfg;

/* Sandbox callback (kf_sandbox_fn): arg is a kf_harness_cfg. Writes progress
 * and one result record to report_fd; returns the child's exit status (0). */
int kf_harness_child(void *arg, int report_fd);

/* Fill cfg->nonce with 32 random hex digits (getrandom; falls back to the
 * clock and pid). */
void kf_harness_new_nonce(kf_harness_cfg *cfg);

/* Parent side: parse a report. *phase receives the last progress text ("" if
 * none); *loaded_candidate whether the child started loading the candidate;
 * returns the result JSON text (malloc'ed, without the "R <nonce> " prefix)
 * when a complete result record with the right nonce is present, else NULL. */
char *kf_harness_parse_report(const char *report, const char *nonce, char *phase, size_t phase_cap,
                              int *loaded_candidate);

#endif
