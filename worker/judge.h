/*
 * judge.h -- the trusted side of an evaluation (prefix kf_judge_).
 *
 * The judge generates inputs from a secret, owns the clock, compares
 * outputs and decides the verdict; it never loads a candidate. Reference,
 * baseline and candidate each run in a runner process of their own
 * (worker/runner.c, protocol worker/rproto.h), exec'ed fresh and confined
 * (worker/confine.h). The only memory a runner shares with the judge is
 * its arena (cpu: a memfd; cuda: a cuMemCreate allocation exported as a
 * file descriptor), holding that runner's own inputs, outputs and workspace.
 *
 * One pipeline serves both backends; a backend (kf_judge_backend) supplies
 * only what the hardware changes: arenas, copies, cache flush, the fence
 * after a call, device peaks. The steps, the check schedule, the verdict
 * precedence, the blame rule and the report are in judge.c (header comment)
 * and docs/metrics.md.
 *
 * The judge runs in a child of the worker (kf_judge_child is a
 * kf_sandbox_fn) and reports one "R <nonce> <json>" line, as before.
 */
#ifndef KF_JUDGE_H
#define KF_JUDGE_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "kf_task.h"
#include "gen.h"
#include "compare.h"
#include "sandbox.h"

typedef struct kf_judge_dev kf_judge_dev; /* a backend's device state */

#define KF_JUDGE_PEAK_ANY (-1) /* peaks(): any dtype, any pipe or tensor format */

/* Memory shared with one runner, or private to the judge. */
typedef struct {
    int fd;              /* descriptor handed to the runner (-1 when private) */
    uint64_t bytes;      /* size, a multiple of the backend's granularity */
    void *host;          /* cpu: the judge's mapping */
    uint64_t dptr;       /* cuda: the judge's device address */
    uint64_t handle;     /* cuda: CUmemGenericAllocationHandle */
} kf_jarena;

/* Unwritten (poison) elements found by a backend's compare. */
typedef struct {
    int64_t cand, cand_first;  /* count in the candidate's output, first index (-1: none) */
    int64_t ref, ref_first;    /* the same in the reference's */
} kf_judge_poison;

typedef struct {
    const char *name;          /* "cpu", "cuda" */
    const char *runner_name;   /* binary beside the worker: "kfarm-runner", "kfarm-runner-cuda" */
    /* Open the device (cuda: the judge's own context on GPU gpu). 0 or -1 + err. */
    int (*open)(kf_judge_dev **d, int gpu, uint64_t llc_bytes, char *err, size_t cap);
    void (*close)(kf_judge_dev *d);
    /* New arena of at least bytes; shared = exportable to a runner (a->fd). */
    int (*arena_new)(kf_judge_dev *d, uint64_t bytes, int shared, kf_jarena *a, char *err, size_t cap);
    void (*arena_free)(kf_judge_dev *d, kf_jarena *a);
    /* Copies between host memory and arenas, and between arenas. 0 or -1.
     * put, copy and fill32 may complete asynchronously (see sync); get
     * returns with the data. */
    int (*put)(kf_judge_dev *d, kf_jarena *a, uint64_t off, const void *src, uint64_t n);
    int (*get)(kf_judge_dev *d, const kf_jarena *a, uint64_t off, void *dst, uint64_t n);
    int (*copy)(kf_judge_dev *d, kf_jarena *dst, uint64_t doff, const kf_jarena *src, uint64_t soff, uint64_t n);
    /* Fill n bytes (a multiple of 4) with a 32-bit pattern (the poison). */
    int (*fill32)(kf_judge_dev *d, kf_jarena *a, uint64_t off, uint32_t pattern, uint64_t n);
    /* Fill n elements at off with gen.h's counter-based values of g, in
     * place (cuda: one kernel on the judge's stream; cpu: a loop). The bits
     * equal kf_inputs_gen_fill's on the host. 0 or -1. */
    int (*gen)(kf_judge_dev *d, kf_jarena *a, uint64_t off, const kf_gen_spec *g, int64_t n);
    /* Optional (NULL: gen and fill32 once per set): the same for nsets
     * input sets of a batch at off + k x stride, set k generated with seed
     * seeds[k] (g otherwise) / all filled with pattern; nsets <=
     * KF_RP_MAX_BATCH. cuda: one kernel for all sets (a launch per set cost
     * ~3 ms of GPU time before a batch of 149). 0 or -1. */
    int (*gen_sets)(kf_judge_dev *d, kf_jarena *a, uint64_t off, uint64_t stride, int nsets, const kf_gen_spec *g,
                    const uint64_t *seeds, int64_t n);
    int (*fill32_sets)(kf_judge_dev *d, kf_jarena *a, uint64_t off, uint64_t stride, int nsets, uint32_t pattern,
                       uint64_t n);
    /* Whether n bytes at aoff of a equal n bytes at boff of b: 1 equal, 0
     * different (*first = index of the first differing byte), -1 error.
     * Waits for queued work. cuda compares on the device. */
    int (*same)(kf_judge_dev *d, const kf_jarena *a, uint64_t aoff, const kf_jarena *b, uint64_t boff, uint64_t n,
                uint64_t *first);
    /* Compare n elements of dtype at coff of arena c (the candidate's
     * output) with roff of arena r (the reference's) by compare.h's rule,
     * and count poison (unwritten) elements on both sides. Fills *res
     * (kf_compare_conclude applied; max_abs_idx may be -1) and *p. 0 or -1.
     * cpu compares in place through the judge's mapping; cuda reduces on
     * the device and copies back only the summary (issue 8: a 256 MiB
     * output cost ~1 s on the host). */
    int (*compare)(kf_judge_dev *d, const kf_jarena *c, uint64_t coff, const kf_jarena *r, uint64_t roff, int dtype,
                   int64_t n, const kf_tol *tol, int allow_nonfinite, kf_compare_res *res, kf_judge_poison *p);
    /* Bytes each arena should have so that short calls can be batched
     * (several calls per doorbell, each on its own input set): cpu 64 MiB,
     * cuda 1/24 of the device's memory up to 6 GiB. */
    uint64_t (*batch_bytes)(kf_judge_dev *d);
    /* Wait until every put/copy/fill32/gen queued so far is done (before a
     * runner is rung). 0 or -1. */
    int (*sync)(kf_judge_dev *d);
    /* Evict cached data before a timed call: cpu evicts the first `bytes`
     * of arena a (the call's inputs, outputs and workspace) from every cache
     * level with clflushopt; cuda evicts the whole L2 (a memset of 2x L2). */
    void (*flush)(kf_judge_dev *d, const kf_jarena *a, uint64_t bytes);
    /* After a runner's reply, before reading the clock: cuda runs a tiny op
     * of the judge's own and waits for it (the GPU time-slices contexts, so
     * it completes only after work another context still has queued). */
    void (*fence)(kf_judge_dev *d);
    /* Device peaks: DRAM GB/s and GFLOP/s for dtype (a kf_dtype, for the
     * report's roofline), or with KF_JUDGE_PEAK_ANY the fastest any
     * computation can run there (the ceiling behind the physical floor). */
    void (*peaks)(kf_judge_dev *d, int dtype, double *gbs, double *gflops);
    /* Device facts for the report (clocks, temperature, model). New ref. */
    json_t *(*describe)(kf_judge_dev *d);
    /* The device as the runner is told it (cuda: PCI bus id; cpu: "0"). */
    const char *(*device_id)(kf_judge_dev *d);
    /* Runner environment additions (NULL-terminated "K=V"), may be NULL. */
    const char *const *runner_env;
    /* Extra writable paths for the runner's Landlock rules (cuda:
     * /proc/self/task -- cuInit names its threads), may be NULL. */
    const char *const *runner_writes;
    int runner_needs_as_unlimited; /* cuda: no RLIMIT_AS (the driver reserves huge ranges) */
    int runner_profile;            /* kf_confine_profile of its runners */
    int reset_before_timed_call;   /* cuda: the baseline's runner resets device state first (untimed) */
    int gen_in_place;              /* cuda: timed inputs generated straight into each runner's arena (a
                                    * generation costs less than a copy); cpu: generated once into the
                                    * master and copied (a host generation costs more than a memcpy) */
    int freeze_runners;            /* cpu: baseline and candidate runners are SIGSTOPped between calls */
    double idle_cpu_slack;         /* CPU a candidate runner may use while not called: this fraction of
                                      the wall time, plus 2 ms (its runtime's housekeeping threads) */
} kf_judge_backend;

/* The backends. kf_judge_backend_cuda is NULL in builds without CUDA. */
extern const kf_judge_backend kf_judge_backend_cpu;
const kf_judge_backend *kf_judge_backend_cuda(void);

typedef struct {
    const kf_task *task;
    const kf_judge_backend *backend;
    const char *so[3];          /* reference, baseline, candidate shared objects (each in its own folder) */
    const char *runner_path;    /* absolute path of the runner binary */
    uint64_t secret;            /* inputs and the check schedule derive from it; the runners never see it */
    int gpu;                    /* cuda device index */
    int quick;                  /* shorter timing (tests) */
    int validate_only;          /* skip timing (a statically rejected candidate) */
    int allow_unconfined;       /* run even when a confinement mechanism is absent (operator's choice) */
    double budget_s;            /* wall seconds the judge may use */
    uint64_t llc_bytes;         /* cpu: last-level cache size (flush); 0 = 64 MiB */
    char nonce[33];             /* report-line nonce */
} kf_judge_cfg;

/* kf_sandbox_fn: run the evaluation described by arg (a kf_judge_cfg) and
 * write "P <phase>" lines and one "R <nonce> <json>" line to report_fd, where
 * json = {"verdict", "detail", "blame", "metrics"}. Returns the exit status. */
int kf_judge_child(void *arg, int report_fd);



/* kf_sandbox_fn for kf_sandbox_srv_start: a serving judge. It answers
 * requests (kf_judge_srv_eval's, one at a time, each with the report of
 * kf_judge_child) while keeping its device open (the judge's CUDA context)
 * and the task's reference and baseline runners loaded between evaluations
 * of the same task: only the candidate's runner is new per evaluation. An
 * evaluation that ends with blame "task" or "worker" (or a malformed
 * request) ends the server; so does its 500th evaluation. */
int kf_judge_serve(void *arg, int ctl_fd);

/* Worker side: a serving judge for one device, started on first use and
 * again whenever the last one ended. work_dir holds its scratch folder.
 * NULL with err on failure. */
typedef struct kf_judge_srv kf_judge_srv;
kf_judge_srv *kf_judge_srv_new(const char *work_dir, char *err, size_t cap);
void kf_judge_srv_free(kf_judge_srv *s);

/* Run the evaluation cfg describes (its task loaded from task_dir by the
 * server) in s's serving judge, and fill *res as kf_sandbox_run would for
 * kf_judge_child (sr: timeout_s, tick, caps; fsize_limit and isolation
 * apply to a server it starts). Returns kf_sandbox_srv_call's value. */
int kf_judge_srv_eval(kf_judge_srv *s, const kf_judge_cfg *cfg, const char *task_dir,
                      const kf_sandbox_req *sr, kf_sandbox_res *res);

/* Worker side: fill nonce (33 bytes) with 32 random hex digits (getrandom). */
void kf_judge_new_nonce(char nonce[33]);

/* Worker side: parse the judge's report. *phase receives the last progress
 * text ("" if none); returns the result JSON (malloc'ed, without the
 * "R <nonce> " prefix) when a complete result line with the right nonce is
 * present, else NULL. */
char *kf_judge_parse_report(const char *report, const char *nonce, char *phase, size_t phase_cap);
#endif
