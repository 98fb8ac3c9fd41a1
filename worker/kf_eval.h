/*
 * kf_eval.h -- one evaluation of one candidate (prefix kf_eval_).
 *
 * This is the single code path behind both `kfarm-worker eval` (local, no
 * coordinator) and the networked worker: compile reference, baseline and
 * candidate (compile cache; failed builds never cached), then hand them to
 * the judge (worker/judge.c) in a forked child, which runs each in a
 * confined runner process of its own (worker/runner.c), and turn the
 * judge's report into one verdict with its blame.
 */
#ifndef KF_EVAL_H
#define KF_EVAL_H

#include <stddef.h>
#include <stdint.h>
#include "kf_verdict.h"

#define KF_EVAL_MAX_DEFINES 16

typedef struct {
    const char *task_dir;        /* directory with task.json and its files */
    const char *source_path;     /* candidate source file */
    int n_defines;               /* tunable values, compiled as -DNAME=VALUE */
    const char *define_names[KF_EVAL_MAX_DEFINES];
    const char *define_values[KF_EVAL_MAX_DEFINES];
    uint64_t seed;               /* secret for inputs and the check schedule; 0 = draw one at random
                                    (the farm always does; `eval --seed` makes a run reproducible) */
    const char *work_dir;        /* scratch root; one subfolder per evaluation */
    const char *cache_dir;       /* compile cache root (NULL = no cache) */
    double timeout_s;            /* wall-clock limit; 0 = the task's */
    int gpu_index;               /* cuda backend: which device; ignored on cpu */
    const char *arch;            /* cuda: "sm_90" etc; NULL = detect */
    int quick;                   /* fewer timing repetitions (tests) */
    int compile_only;            /* build reference, baseline and candidate (filling
                                    the compile cache) and stop: verdict ok "compiled",
                                    or the build's verdict. Used to compile the next
                                    job while the GPU evaluates the current one. */
    /* Called about once a second while the child runs. Return non-zero to
     * abandon the evaluation (lease lost): the child is killed and the
     * result is infra_error "cancelled". */
    int (*tick)(void *arg);
    void *tick_arg;
    /* cuda, for a caller that evaluates one job after another (the daemon):
     * the judge's process is not waited for once its report is in (its
     * exit tears down a CUDA context, ~0.15 s); its pid is left here, and
     * the next evaluation reaps it before it starts its own judge, so two
     * judges never overlap on the device. NULL: wait as usual. The caller
     * reaps what is left at the end (kf_eval_reap). */
    int *pending_judge;
    /* A serving judge (kf_judge_srv_new, judge.h) kept by the caller: the
     * evaluation runs in it, so its device context and the task's
     * reference and baseline runners outlive the evaluation (only the
     * candidate's runner is new). NULL: a judge process of its own. */
    struct kf_judge_srv *judge_srv;
} kf_eval_req;

typedef struct {
    kf_verdict verdict;
    char detail[1024];           /* one short human-readable line */
    char *metrics_json;          /* structured fields (malloc'ed JSON object) */
    char *compile_log;           /* compiler output, capped (malloc'ed) */
    double candidate_us;         /* weighted median over benchmark shapes, µs; 0 if not timed */
    double baseline_us;          /* same for the baseline, µs */
    double speedup;              /* baseline_us / candidate_us; 0 if not timed */
} kf_eval_res;

/* Run one evaluation. Always fills *res (verdict infra_error with a detail
 * when the worker itself is at fault: compiler missing, disk full, ...).
 * Returns 0, or -1 only for invalid arguments. */
int kf_eval_run(const kf_eval_req *req, kf_eval_res *res);

void kf_eval_res_free(kf_eval_res *res);

/* Wait for a judge left behind in *pending_judge (see kf_eval_req) and
 * clear it. No-op for NULL or 0. */
void kf_eval_reap(int *pending_judge);

#endif
