/*
 * judge.c -- one evaluation pipeline for every backend (see judge.h).
 *
 * Steps (each names the cases of shared/cases/README.md it answers):
 *  1. Open the device (the judge's own context on cuda) and spawn three
 *     runners -- reference, baseline, candidate -- each exec'ed fresh after
 *     a pre-exec child confined itself (kf_confine_apply; the facts it
 *     established come back over a close-on-exec pipe, and the judge
 *     re-reads /proc/PID/status). A mechanism absent on this host refuses
 *     the evaluation unless the operator allowed it. A runner answers READY
 *     before its shared object's code runs (only that answer may report a
 *     setup failure) and LOADED after.                       [I5-I10, I14]
 *  2. Validation: every validation shape x task trials. Inputs come from
 *     (secret, shape, trial, tensor) -- the runner never sees the secret. The
 *     judge writes them into the reference's and the candidate's arenas,
 *     poisons outputs and workspace, runs the reference, then the candidate;
 *     reads the candidate's outputs the moment it answers; checks that it
 *     used no CPU after answering and that its outputs do not change later
 *     (work left running: rejected_cheat), that its inputs are unchanged
 *     (incorrect), that every element was written (incorrect), and compares
 *     with rtol/atol (compare.c: scaled measure, NaN/Inf, trivial outputs).
 *     The reference's output for trial 0 and trial 1 of the first shape must
 *     differ, or the task is degenerate (the task's fault).
 *                                       [C1-C7, T2, I1, I4, I11, I12]
 *  3. Timing per benchmark shape, only after validation passed: before
 *     every call every element of every input gets a fresh value from
 *     (secret, shape, rep), generated outside the clock (no part of an earlier
 *     answer is reusable, not even incrementally); outputs are poisoned, the
 *     cache is flushed; the judge's clock runs from the doorbell to the answer
 *     plus the backend fence (on cpu: to the runner's confirmed stop). On cpu the baseline's and the candidate's
 *     runners are stopped (SIGSTOP) whenever they are not being called, so
 *     nothing can be computed before the doorbell or after the answer.
 *     Baseline and candidate alternate, order swapped every repetition. The
 *     number of repetitions is fixed before the loop from the warm-up (the
 *     baseline's kernel time and the judge's measured wall time per pair),
 *     never from the candidate turning fast. Which calls are checked against
 *     the reference on the same inputs is drawn from the secret (probability
 *     p per call) and always includes the last call, so a candidate that
 *     stops working after any N calls is caught with probability
 *     >= 1 - (1-p)^(calls after N), and certainly when N is smaller than the
 *     number of calls. The candidate's CPU clock may not advance while it is
 *     not being called (2 ms + 2% slack): a thread left running is
 *     rejected_cheat.                                      [C6, I3, I4, T1, T2]
 *  4. The fixed per-call overhead of the doorbell is measured on the
 *     baseline's runner (NOOP round trips; the candidate cannot slow them)
 *     and the same value is subtracted from both sides. A candidate time
 *     below the roofline floor (task bytes / peak GB/s, flops / peak
 *     GFLOP/s) is never a win: measured raw below the floor ->
 *     rejected_cheat; corrected below it -> the floor is used.
 *
 * Blame: whatever a runner of the candidate does -- crash, exit, hang, lie,
 * garbage on its reply pipe (or closing it), a CUDA error once the
 * reference proved the device sound, spending the budget so that the task's
 * runners run out of time -- is the candidate's verdict. A
 * reference or baseline that fails, hangs or writes nothing is the task's
 * (infra_error, blame "task": the campaign's problem, not the worker's). The
 * judge's own failures (allocation, spawning) are the worker's (blame
 * "worker").
 *
 * Serving judge (kf_judge_serve, one per GPU in `kfarm-worker run` and
 * `kfarm-worker eval --each`): the same pipeline, one request at a time,
 * in a process that keeps what costs setup time and holds nothing of a
 * candidate: the judge's device context and master arena, and the task's
 * reference and baseline runners (the task's own code, already loaded),
 * reused when the next request's shared objects, runner binary and arena
 * size hash the same. The candidate's runner is new for every request: it
 * is started (process, confinement, context, arena; nothing loaded) while
 * the previous candidate is validated -- never during timing -- and loads
 * the next request's candidate, copied into a folder of its own. After the
 * report the candidate's runner is killed; the task's runners are kept
 * only when the evaluation did not end on them (blame none or candidate,
 * each alive and owing no answer: metrics.task_runners_kept). Any failure
 * blamed on the task or the worker ends the server (a fresh one takes the
 * next request), and so does its 500th evaluation (bounds slow leaks).
 * finish() returns to the server's loop (longjmp) instead of exiting; what
 * an evaluation allocates is held in the judge struct so that it is freed
 * there. Tested by tests/cases/run_cases_served.py: every field case
 * through one server, each followed by the task's good candidate on the
 * same warm runners.
 *
 * Precedence is applied by the caller (eval.c): compile_error/infra_error/
 * unsupported > load_error > runtime_error/timeout > rejected_cheat >
 * incorrect > ok. The judge stops at the first failure.
 */
#define _GNU_SOURCE
#include "judge.h"
#include "compare.h"
#include "kf_cuda.h" /* kf_cuda_stats_of: median, min, mean, CV (GPU-independent) */
#include "confine.h"
#include "inputs.h"
#include "kf_util.h"
#include "kf_verdict.h"
#include "rproto.h"
#include "sandbox.h"
#include "compile.h" /* kf_compile_copy_file */

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NSETS 3
#define LATE_CHECK_MS 5
#define CPU_SLACK_NS 2000000LL     /* 2 ms of CPU while not called = work left running */
#define OUT_KEEP 8192
#define KF_SKIP_ESCAPE 0.01         /* chance that a median moved by skipped calls escapes every check */
#define HOST_GEN_MAX (1 << 20)       /* validation inputs up to this many elements are generated on the host */
#define KF_BATCH_OV 20.0             /* a batch lasts at least this many doorbell round trips */
#define KF_CHECK_SETS 4              /* calls checked in a checked batch (the last one and three drawn) */

enum { R_REF = 0, R_BASE = 1, R_CAND = 2 };
static const char *const role_name[3] = {"reference", "baseline", "candidate"};

typedef struct {
    int role;
    pid_t pid;
    int cmd_w, rep_r, out_r;
    kf_jarena arena;
    clockid_t cpuclock;
    int have_cpuclock;
    char out[OUT_KEEP + 1];
    size_t out_len;
    int out_dropped;
    int dead, wstatus;
    kf_confine_facts facts;
    int facts_ok;
    int freeze;              /* stopped (SIGSTOP) whenever it is not being called */
    int frozen;
    int busy;                /* a command was sent and its answer not read yet */
    double cpu_limit_s;      /* its RLIMIT_CPU */
} runner;

/* What a serving judge (kf_judge_serve) keeps between evaluations: its
 * device (the judge's CUDA context), the master arena, and the task's
 * reference and baseline runners, still loaded, for the next evaluation of
 * the same task. Only the candidate's runner is new per evaluation. */
typedef struct {
    jmp_buf jb;              /* finish() returns here */
    const kf_judge_backend *be;
    kf_judge_dev *dev;
    int gpu;
    kf_jarena master;        /* bytes 0: none */
    uint64_t master_asked;   /* the arena size it was made for (master.bytes is that rounded up to the
                              * backend's allocation granularity) */
    runner warm[2];          /* reference, baseline (pid 0: none) */
    char key[65];            /* what they run: sha256 over both shared objects, the runner, the arena size */
    int broken;              /* the last evaluation ended with blame task or worker: serve no more */
    unsigned evals;
    /* The next evaluation's candidate runner, started (process, confinement,
     * CUDA context) right after the last report while the worker prepares
     * the next request; it loads nothing until that request's shared object
     * is copied to next_so. */
    runner next;             /* pid 0: none */
    char next_so[PATH_MAX];  /* where it will dlopen the candidate */
    char runner_hash[65];    /* sha256 of the runner binary it runs (runner_copy) */
    char rdir[PATH_MAX];     /* the server's runner folder: /tmp/kfarm-run-XXXXXX (0711), "" = none */
    char runner_copy[PATH_MAX + 32];
    int reap;                /* the last candidate's runner: killed, not yet reaped (0: none) */
    unsigned next_seq;       /* names the pre-started runners' folders */
    char next_why[160];      /* why there is no pre-started runner ("" when there is one) */
} keeper;

/* Where tensors lie for one shape (same offsets in every arena). */
typedef struct {
    int64_t sizes[KF_MAX_SIZES];
    uint64_t in_off[KF_MAX_TENSORS], out_off[KF_MAX_TENSORS], ws_off, ws_bytes;
    uint64_t in_bytes[KF_MAX_TENSORS], out_bytes[KF_MAX_TENSORS];
    int64_t in_n[KF_MAX_TENSORS], out_n[KF_MAX_TENSORS];
    int64_t in_shape[KF_MAX_TENSORS][KF_MAX_DIMS], out_shape[KF_MAX_TENSORS][KF_MAX_DIMS];
    uint64_t total;
} layout;

typedef struct {
    const kf_judge_cfg *cfg;
    const kf_task *t;
    const kf_judge_backend *be;
    kf_judge_dev *dev;
    int fd;
    double t_start, deadline;
    double prep_s, call_s, check_s; /* timing phase: inputs + flush, doorbells (both sides), checks */
    double prep_gen_s, prep_reset_s, prep_flush_s, prep_idle_s; /* prep_s by step: inputs and poison queued,
                                     * the baseline's device reset (a doorbell), the L2 flush (waits for
                                     * the queued inputs too), the candidate's idle check */
    double cand_call_cpu_s;         /* CPU seconds of the candidate's process in its last doorbell (-1: unknown) */
    int base_reset_valid;           /* the baseline's runner reset its device state and the candidate was not
                                     * sent a command since (reset_runner() may skip the next reset) */
    int resets_skipped;             /* ... how often it did */
    int base_inputs_kept;           /* timed baseline batches run on the inputs of its shape's first batch */
    int base_inputs_inplace;        /* shapes where the baseline changed its inputs (then regenerated per batch) */
    runner r[3];
    uint64_t arena_bytes;
    kf_jarena master;        /* the judge's private copy of the current timed call's inputs */
    int master_b, master_rep, master_count, master_valid;
    double call_t0;          /* when the current call was rung */
    double cand_used_s;      /* wall seconds spent inside the candidate's load and calls */
    int64_t cand_mark;       /* the candidate runner's CPU clock (ns) when it last answered or was last checked */
    double cand_mark_wall;   /* ... and the wall clock then (s) */
    char idle_strike[192];   /* the one idle gap so far over the slack (idle_check), "" when none */
    kf_rng seqrng, chkrng;
    json_t *metrics, *validation;
    double overhead_us;
    keeper *keep;            /* serving judge (kf_judge_serve): what outlives this evaluation; else NULL */
    void *vhost[KF_MAX_TENSORS]; /* validation's host inputs (freed by finish when it ends the evaluation) */
    void *vlate;             /* validation's pending late checks (a vlate; finish() frees it) */
    double *tsb, *tsc;       /* timing's per-shape samples (the same) */
    /* verdict */
    int done;
} judge;

/* ---------------- report ---------------- */

static void progress(judge *j, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line + 2, sizeof(line) - 3, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n > sizeof(line) - 4) n = (int)sizeof(line) - 4;
    line[0] = 'P';
    line[1] = ' ';
    line[2 + n] = '\n';
    kf_sandbox_write_all(j->fd, line, (size_t)n + 3);
}

/* Kill the runners whose bit is set in mask (1 << role). */
static void kill_runners(judge *j, unsigned mask)
{
    /* every runner killed first: their exits (CUDA contexts torn down) overlap */
    for (int i = 0; i < 3; i++)
        if ((mask >> i & 1) && j->r[i].pid > 0 && !j->r[i].dead) kill(j->r[i].pid, SIGKILL);
    for (int i = 0; i < 3; i++)
        if ((mask >> i & 1) && j->r[i].pid > 0) {
            if (!j->r[i].dead) waitpid(j->r[i].pid, &j->r[i].wstatus, 0);
            j->r[i].dead = 1;
        }
}

/* A live runner that owes no answer: it can serve the next evaluation. */
static int runner_reusable(runner *r)
{
    if (r->pid <= 0 || r->dead || r->busy) return 0;
    int st;
    return waitpid(r->pid, &st, WNOHANG) == 0;
}

/* An empty runner slot: no process, no descriptors, no arena. */
static void runner_clear(runner *r)
{
    memset(r, 0, sizeof(*r));
    r->cmd_w = r->rep_r = r->out_r = r->arena.fd = -1;
}

/* Close what the judge holds of a dead runner and free its arena. */
static void runner_release(judge *j, runner *r)
{
    if (r->cmd_w >= 0) close(r->cmd_w);
    if (r->rep_r >= 0) close(r->rep_r);
    if (r->out_r >= 0) close(r->out_r);
    r->cmd_w = r->rep_r = r->out_r = -1;
    if (r->arena.bytes) j->be->arena_free(j->dev, &r->arena);
    memset(&r->arena, 0, sizeof(r->arena));
    r->arena.fd = -1;
    r->pid = 0;
}

static void keeper_drop_warm(keeper *k);

/* A runner the keeper holds is not wanted any more: kill and reap it, close
 * its descriptors, free its arena (with the keeper's device), clear it. */
static void keeper_drop_runner(keeper *k, runner *r)
{
    if (r->pid > 0 && !r->dead) {
        kill(r->pid, SIGKILL);
        waitpid(r->pid, &r->wstatus, 0);
    }
    if (r->pid > 0 || r->arena.bytes) {
        judge tmp; /* runner_release needs the backend and device */
        memset(&tmp, 0, sizeof(tmp));
        tmp.be = k->be;
        tmp.dev = k->dev;
        runner_release(&tmp, r);
    }
    runner_clear(r);
}

static int runner_spawn(judge *j, int role, char *err, size_t cap);

/* Wait for the exit of the last evaluation's candidate runner, killed when
 * its report was written: its CUDA context's teardown (~70 ms on the H200)
 * overlaps this evaluation's setup and validation, but ends before anything
 * that needs what it held (a new runner's context and arena, the master's
 * arena) or that a driver busy with it could disturb (timing). Adds the
 * time waited to the metric last_candidate_reap_wait_s. */
static void reap_last(judge *j)
{
    keeper *k = j->keep;
    if (!k || k->reap <= 0) return;
    double t0 = kf_util_now_s();
    waitpid(k->reap, NULL, 0);
    k->reap = 0;
    json_object_set_new(j->metrics, "last_candidate_reap_wait_s", json_real(kf_util_now_s() - t0));
}

/* Start the next evaluation's candidate runner (see keeper.next) once this
 * evaluation's candidate has loaded, so that its process, confinement and
 * CUDA context (~0.15 s on the H200) are ready by the next request: with this
 * evaluation's arena size and a folder of its own under the server's runner
 * folder. It is made before validation, never during timing, and then
 * waits, idle, for a LOAD. Best effort: on any failure the next evaluation
 * starts its runner itself. */
static void prespawn(judge *j)
{
    keeper *k = j->keep;
    /* the runner binary: the server's own copy (keep_runner_copy), made
     * while the request's copy existed: that one goes with the request's
     * folder as soon as the report is in */
    if (!k->runner_hash[0]) {
        snprintf(k->next_why, sizeof(k->next_why), "no copy of the runner binary");
        return;
    }
    /* not waiting for the last candidate's exit (reap_last): the new
     * process starts while that one's context is torn down; when that one
     * still holds the device's memory (I14) the arena fails, and the next
     * evaluation starts its runner itself, after the reap */
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%.3000s/cand-%u", k->rdir, ++k->next_seq);
    if (mkdir(dir, 0755) != 0) {
        snprintf(k->next_why, sizeof(k->next_why), "mkdir %.80s: %s", dir, strerror(errno));
        return;
    }
    chmod(dir, 0755);
    snprintf(k->next_so, sizeof(k->next_so), "%.3000s/candidate.so", dir);
    kf_judge_cfg pc = *j->cfg;
    pc.so[R_CAND] = k->next_so;
    pc.runner_path = k->runner_copy;
    const kf_judge_cfg *was = j->cfg;
    runner *cand = malloc(sizeof(runner)); /* this evaluation's candidate, aside while the slot is used */
    if (!cand) return;
    *cand = j->r[R_CAND];
    j->cfg = &pc;
    char err[256];
    int rc = runner_spawn(j, R_CAND, err, sizeof(err));
    j->cfg = was;
    if (rc != 0) {
        snprintf(k->next_why, sizeof(k->next_why), "start: %.140s", err);
        runner *r = &j->r[R_CAND];
        if (r->pid > 0) {
            kill(r->pid, SIGKILL);
            waitpid(r->pid, NULL, 0);
        }
        runner_release(j, r);
        kf_util_rmtree(dir);
    } else {
        k->next = j->r[R_CAND];
        k->next_why[0] = 0;
    }
    j->r[R_CAND] = *cand;
    free(cand);
}

/* Keep the server's copy of the runner binary (path, sha256 hash) the same
 * as this evaluation's: pre-started runners run it. 0, or -1 (none kept). */
static int keep_runner_copy(judge *j, const char *hash)
{
    keeper *k = j->keep;
    if (!strcmp(hash, k->runner_hash)) return 0;
    k->runner_hash[0] = 0;
    if (!k->rdir[0]) {
        const char *rroot = getenv("KFARM_RUNNER_TMP");
        if (!rroot || !*rroot) rroot = "/tmp";
        snprintf(k->rdir, sizeof(k->rdir), "%s/kfarm-run-XXXXXX", rroot);
        if (!mkdtemp(k->rdir)) {
            k->rdir[0] = 0;
            return -1;
        }
        chmod(k->rdir, 0711);
    }
    snprintf(k->runner_copy, sizeof(k->runner_copy), "%s/%s", k->rdir, j->be->runner_name);
    unlink(k->runner_copy);
    if (kf_compile_copy_file(j->cfg->runner_path, k->runner_copy) != 0 || chmod(k->runner_copy, 0755) != 0) return -1;
    snprintf(k->runner_hash, sizeof(k->runner_hash), "%s", hash);
    return 0;
}

/* The pre-started candidate runner is not used: kill it, free its arena,
 * remove its folder. */
static void drop_next(keeper *k)
{
    if (k->next.pid <= 0) return;
    keeper_drop_runner(k, &k->next);
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", k->next_so);
    char *sl = strrchr(dir, '/');
    if (sl) {
        *sl = 0;
        kf_util_rmtree(dir);
    }
}

/* Take the pre-started candidate runner for this evaluation when it fits
 * (same arena size and runner binary, still alive and owing nothing): copy
 * the candidate's shared object where it will load it. 1 taken, 0 not. */
static int take_next(judge *j, const char *runner_hash)
{
    keeper *k = j->keep;
    runner *r = &k->next;
    if (r->pid <= 0) {
        if (!k->next_why[0]) snprintf(k->next_why, sizeof(k->next_why), "none started");
        return 0;
    }
    /* arenas are rounded up to the backend's granularity: compare with the
     * task's runners', made for this same size */
    const char *why = r->arena.bytes != j->r[R_REF].arena.bytes ? "another arena size"
                      : strcmp(runner_hash, k->runner_hash) != 0 ? "another runner binary"
                      : !runner_reusable(r) ? "it died or owes an answer"
                      : kf_compile_copy_file(j->cfg->so[R_CAND], k->next_so) != 0 ? "cannot copy the shared object"
                      : chmod(k->next_so, 0644) != 0 ? "cannot chmod the shared object" : NULL;
    if (why) {
        snprintf(k->next_why, sizeof(k->next_why), "%s", why);
        drop_next(k);
        return 0;
    }
    j->r[R_CAND] = *r;
    runner_clear(r);
    return 1;
}

/* After the report of a served evaluation: free what was this
 * evaluation's, hand the task's runners back to the keeper when they are
 * still good, and return to kf_judge_serve's loop. */
__attribute__((noreturn)) static void keeper_end(judge *j, int keep_task, const char *blame)
{
    keeper *k = j->keep;
    if (j->dev) j->be->sync(j->dev); /* nothing queued may touch an arena freed below */
    for (int i = 0; i < KF_MAX_TENSORS; i++) free(j->vhost[i]);
    free(j->tsb);
    free(j->tsc);
    free(j->vlate);
    json_decref(j->metrics);
    for (int i = 0; i < 3; i++) {
        if (i != R_CAND && keep_task) continue;
        if (j->r[i].pid > 0 || j->r[i].arena.bytes) runner_release(j, &j->r[i]);
    }
    if (keep_task) {
        k->warm[0] = j->r[R_REF];
        k->warm[1] = j->r[R_BASE];
    } else {
        k->key[0] = 0;
    }
    if (strcmp(blame, "none") && strcmp(blame, "candidate")) k->broken = 1;
    longjmp(k->jb, 1);
}

static json_t *runners_json(judge *j)
{
    json_t *o = json_object();
    for (int i = 0; i < 3; i++) {
        runner *r = &j->r[i];
        if (r->pid <= 0) continue;
        json_t *x = json_object();
        if (r->out_len) {
            kf_util_utf8_sanitize(r->out, r->out_len); /* untrusted bytes */
            json_object_set_new(x, "output_tail", json_stringn(r->out, r->out_len));
        }
        if (r->out_dropped) json_object_set_new(x, "output_truncated", json_true());
        json_object_set_new(o, role_name[i], x);
    }
    return o;
}

/* Write the verdict and end the judge. blame: "none", "candidate", "task", "worker". */
__attribute__((noreturn, format(printf, 4, 5))) static void finish(judge *j, kf_verdict v, const char *blame,
                                                                   const char *fmt, ...)
{
    char detail[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    kf_util_utf8_sanitize(detail, strlen(detail)); /* may quote a runner's message */
    /* a serving judge keeps the task's runners for the next evaluation
     * when this one did not end on them (blame none or candidate, each
     * alive and owing no answer); the candidate's runner always dies */
    int keep_task = j->keep && (!strcmp(blame, "none") || !strcmp(blame, "candidate")) &&
                    runner_reusable(&j->r[R_REF]) && runner_reusable(&j->r[R_BASE]);
    if (j->keep && keep_task) {
        /* the candidate's runner is killed; its exit (a CUDA context torn
         * down) is reaped before the next evaluation starts, overlapping
         * with the worker's handling of this report */
        runner *c = &j->r[R_CAND];
        if (c->pid > 0 && !c->dead) {
            kill(c->pid, SIGKILL);
            if (j->keep->reap > 0) waitpid(j->keep->reap, NULL, 0); /* the one before, ended before timing */
            j->keep->reap = c->pid;
            c->dead = 1;
        }
    } else {
        kill_runners(j, 7u);
    }
    json_object_set_new(j->metrics, "runners", runners_json(j));
    /* the secret is revealed only now: the candidate's runner is dead (a
     * serving judge's task runners, the task's own code, stay) */
    json_object_set_new(j->metrics, "input_seed", json_integer((json_int_t)j->cfg->secret));
    json_object_set_new(j->metrics, "judge_s", json_real(kf_util_now_s() - j->t_start));
    if (j->keep) json_object_set_new(j->metrics, "task_runners_kept", json_boolean(keep_task));
    json_t *o = json_object();
    json_object_set_new(o, "verdict", json_string(kf_verdict_name(v)));
    json_object_set_new(o, "detail", json_string(detail));
    json_object_set_new(o, "blame", json_string(blame));
    json_object_set(o, "metrics", j->metrics);
    char *txt = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9));
    if (!txt) { /* never leave without a report: drop what came from runners */
        json_object_del(j->metrics, "runners");
        txt = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9));
    }
    json_decref(o);
    if (txt) {
        char head[64];
        snprintf(head, sizeof(head), "R %s ", j->cfg->nonce);
        kf_sandbox_write_all(j->fd, head, strlen(head));
        kf_sandbox_write_all(j->fd, txt, strlen(txt));
        kf_sandbox_write_all(j->fd, "\n", 1);
        free(txt);
    }
    if (j->keep) {
        kf_sandbox_srv_done(j->fd); /* the report is complete */
        keeper_end(j, keep_task, blame);
    }
    close(j->fd); /* the report is complete (the worker may stop waiting here) */
    if (j->dev) j->be->close(j->dev);
    _exit(0);
}

/* ---------------- runners ---------------- */

static const char *signame(int sig)
{
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    case SIGKILL: return "SIGKILL";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    case SIGSYS: return "SIGSYS";
    case SIGTERM: return "SIGTERM";
    case SIGPIPE: return "SIGPIPE";
    case SIGTRAP: return "SIGTRAP";
    }
    return "signal";
}

static void drain_output(runner *r)
{
    char tmp[16384];
    for (;;) {
        ssize_t n = read(r->out_r, tmp, sizeof(tmp));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        /* keep the first half and the latest half of OUT_KEEP */
        for (ssize_t i = 0; i < n; i++) {
            if (r->out_len < OUT_KEEP) {
                r->out[r->out_len++] = tmp[i];
            } else {
                memmove(r->out + OUT_KEEP / 2, r->out + OUT_KEEP / 2 + 1, OUT_KEEP / 2 - 1);
                r->out[OUT_KEEP - 1] = tmp[i];
                r->out_dropped = 1;
            }
        }
    }
}

/* The confinement of a runner for role r (see confine.h), built before the
 * fork: the default allow-list globs and allocates. sodir holds the folder. */
static void runner_spec(judge *j, runner *r, kf_confine_spec *specp, char *sodir, size_t sodir_cap)
{
    kf_confine_spec spec;
    memset(&spec, 0, sizeof(spec));
    spec.profile = (kf_confine_profile)j->be->runner_profile;
    int nr = 0;
    snprintf(sodir, sodir_cap, "%s", j->cfg->so[r->role]);
    char *slash = strrchr(sodir, '/');
    if (slash && slash != sodir) *slash = 0;
    spec.read_paths[nr++] = sodir;
    spec.read_paths[nr++] = j->cfg->runner_path;
    spec.read_paths[nr] = NULL;
    kf_confine_default_reads(&spec);
    int nw = 0;
    while (nw < KF_CONFINE_MAX_PATHS - 1 && spec.write_paths[nw]) nw++;
    if (j->be->runner_writes)
        for (int i = 0; j->be->runner_writes[i] && nw < KF_CONFINE_MAX_PATHS - 1; i++)
            spec.write_paths[nw++] = j->be->runner_writes[i];
    spec.write_paths[nw] = NULL;
    spec.as_bytes = j->be->runner_needs_as_unlimited ? 0 : (uint64_t)r->arena.bytes + (8ull << 30);
    spec.nofile = 256;
    spec.nproc = 4096;
    spec.fsize_bytes = 1 << 20;
    spec.cpu_s = j->cfg->budget_s * 4 + 30;
    r->cpu_limit_s = spec.cpu_s;
    spec.drop_uid = 1;
    *specp = spec;
}

/* Pre-exec child: wire the descriptors, confine, exec the runner. Never returns. */
__attribute__((noreturn)) static void runner_child(judge *j, runner *r, const kf_confine_spec *specp, int cmd_r,
                                                   int rep_w, int out_w, int info_w, pid_t parent)
{
    kf_confine_spec spec = *specp;
    setsid();
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126);
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP) signal(s, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int afd = r->arena.fd;
    /* move everything above 6 first so the dup2s below cannot clobber each other */
    int fds[6] = {devnull, out_w, cmd_r, rep_w, afd, info_w};
    for (int i = 0; i < 6; i++) {
        if (fds[i] < 0 && i != 4) _exit(125);
        if (fds[i] >= 0) fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 16);
    }
    if (dup2(fds[0], 0) < 0 || dup2(fds[1], 1) < 0 || dup2(fds[1], 2) < 0 || dup2(fds[2], KF_RP_FD_CMD) < 0 ||
        dup2(fds[3], KF_RP_FD_REPLY) < 0 || (fds[4] >= 0 && dup2(fds[4], KF_RP_FD_ARENA) < 0) ||
        dup2(fds[5], 6) < 0)
        _exit(125);
    fcntl(6, F_SETFD, FD_CLOEXEC);
    kf_sandbox_close_from(7);
    int info = 6;

    kf_confine_facts f;
    char err[256] = "";
    memset(&f, 0, sizeof(f));
    int rc = kf_confine_apply(&spec, &f, err, sizeof(err));
    char line[512];
    int n = snprintf(line, sizeof(line), "%d %d %d %d %d %d %d %d %d %s\n", rc, f.landlock_abi, f.landlock_fs,
                     f.landlock_scoped, f.seccomp, f.no_new_privs, f.uid_dropped, f.uid, f.rlimits, err);
    kf_sandbox_write_all(info, line, (size_t)n);
    if (rc != 0) _exit(124);
    /* the uid switch cleared the parent-death signal: set it again */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126);

    char arena_s[32], gpu_s[64];
    snprintf(arena_s, sizeof(arena_s), "%llu", (unsigned long long)r->arena.bytes);
    snprintf(gpu_s, sizeof(gpu_s), "%s", j->be->device_id(j->dev));
    char *argv[] = {(char *)j->cfg->runner_path, (char *)role_name[r->role], (char *)j->be->name,
                    (char *)j->cfg->so[r->role], arena_s, gpu_s, NULL};
    char *envp[16];
    int ne = 0;
    envp[ne++] = "PATH=/usr/bin:/bin";
    envp[ne++] = "LANG=C";
    envp[ne++] = "LC_ALL=C";
    /* OpenMP workers sleep at once when idle: a spinning worker would take
     * the CPU the judge needs to read the answer (on small machines that
     * costs more than the wake-up; measured in docs/benchmarks.md) */
    envp[ne++] = "OMP_WAIT_POLICY=passive";
    envp[ne++] = "GOMP_SPINCOUNT=0";
    char home[PATH_MAX + 8];
    snprintf(home, sizeof(home), "HOME=%s", spec.read_paths[0]); /* its own read-only folder */
    envp[ne++] = home;
    if (j->be->runner_env)
        for (int i = 0; j->be->runner_env[i] && ne < 15; i++) envp[ne++] = (char *)j->be->runner_env[i];
    envp[ne] = NULL;
    execve(j->cfg->runner_path, argv, envp);
    dprintf(info, "exec %s: %s\n", j->cfg->runner_path, strerror(errno));
    _exit(127);
}

static int runner_spawn(judge *j, int role, char *err, size_t cap)
{
    runner *r = &j->r[role];
    runner_clear(r);
    r->role = role;
    if (j->be->arena_new(j->dev, j->arena_bytes, 1, &r->arena, err, cap) != 0) return -1;
    int cmd[2], rep[2], out[2], info[2];
    if (pipe2(cmd, O_CLOEXEC) || pipe2(rep, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(info, O_CLOEXEC)) {
        snprintf(err, cap, "pipe: %s", strerror(errno));
        return -1;
    }
    kf_confine_spec spec;
    char sodir[PATH_MAX];
    runner_spec(j, r, &spec, sodir, sizeof(sodir));
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, cap, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) runner_child(j, r, &spec, cmd[0], rep[1], out[1], info[1], parent);
    close(cmd[0]);
    close(rep[1]);
    close(out[1]);
    close(info[1]);
    r->pid = pid;
    r->cmd_w = cmd[1];
    r->rep_r = rep[0];
    r->out_r = out[0];
    fcntl(r->out_r, F_SETFL, O_NONBLOCK);
    /* the facts line, then EOF when exec succeeds (close-on-exec) */
    char buf[1024];
    size_t len = 0;
    for (;;) {
        ssize_t n = read(info[0], buf + len, sizeof(buf) - 1 - len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        len += (size_t)n;
        if (len >= sizeof(buf) - 1) break;
    }
    close(info[0]);
    buf[len] = 0;
    int rc = -1;
    kf_confine_facts *f = &r->facts;
    char cerr[256] = "";
    if (sscanf(buf, "%d %d %d %d %d %d %d %d %d %255[^\n]", &rc, &f->landlock_abi, &f->landlock_fs,
               &f->landlock_scoped, &f->seccomp, &f->no_new_privs, &f->uid_dropped, &f->uid, &f->rlimits,
               cerr) < 9) {
        snprintf(err, cap, "%s runner did not start: %.400s", role_name[role], len ? buf : "no word from it");
        return -1;
    }
    if (rc != 0) {
        snprintf(err, cap, "confining the %s runner failed: %s", role_name[role], cerr);
        return -1;
    }
    char *nl = strchr(buf, '\n');
    if (nl && nl[1]) { /* "exec ...: error" after the facts line */
        snprintf(err, cap, "%s runner: %s", role_name[role], nl + 1);
        return -1;
    }
    r->facts_ok = 1;
    if (clock_getcpuclockid(pid, &r->cpuclock) == 0) r->have_cpuclock = 1;
    return 0;
}

static int64_t cpu_ns(runner *r)
{
    struct timespec ts;
    if (!r->have_cpuclock || clock_gettime(r->cpuclock, &ts) != 0) return -1;
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The runner's CPU clock once its calling thread is off the CPU. Linux
 * adds a running thread's time to the clock another process reads only
 * when that thread is descheduled or at the next scheduler tick (up to
 * 1/CONFIG_HZ, 4 ms at HZ=250), so a sample taken while the runner is
 * still returning from its answer reads low by up to a tick, and the next
 * idle check would charge that tick as work done after the answer (seen
 * in CI on a loaded 2-core machine: "4.0 ms of CPU in 5.0 ms"). A stopped
 * runner is off the CPU; otherwise wait up to 5 ms for its main thread to
 * block (it blocks on the next command at once unless the candidate keeps
 * it busy, which the idle check then sees). Returns -1 when unreadable. */
static int64_t settled_cpu_ns(runner *r)
{
    if (!r->frozen && !r->dead) {
        char path[64], buf[256];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)r->pid);
        for (int i = 0; i < 100; i++) {
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0) break;
            ssize_t n = read(fd, buf, sizeof(buf) - 1);
            close(fd);
            if (n <= 0) break;
            buf[n] = 0;
            const char *rp = strrchr(buf, ')'); /* "pid (comm) S ..." */
            if (!rp || rp[1] != ' ' || rp[2] != 'R') break;
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
    return cpu_ns(r);
}

enum { WT_OK = 0, WT_TIMEOUT = -1, WT_DIED = -2, WT_PROTO = -3 };

/* Stop r until its next command (SIGSTOP cannot be caught): a runner that
 * is not being called cannot compute ahead, finish late or disturb the
 * baseline. Waits until the kernel reports it stopped (at most 2 s).
 * Returns the judge's clock when the stop was seen (now when r is not
 * frozen by this call): until then the runner's threads could still run.
 * The stop is not instant, and a candidate can delay it: a process-directed
 * SIGSTOP is taken by the main thread, which the candidate can make
 * SCHED_IDLE on a core its own threads keep busy, so that they finish the
 * work after the answer and the group stops only then (red team
 * g1_finish_while_stopping: 9x on a shape, all checked outputs right).
 * call() and noop_rtt() therefore end their clock here, on both timed
 * sides and the overhead probe alike; the first 2 ms are polled without
 * sleeping so that the stop is seen within microseconds. */
static double freeze_runner(runner *r)
{
    if (!r->freeze || r->frozen || r->dead) return kf_util_now_s();
    kill(r->pid, SIGSTOP);
    double t_kill = kf_util_now_s();
    for (;;) {
        siginfo_t si;
        memset(&si, 0, sizeof(si));
        if (waitid(P_PID, (id_t)r->pid, &si, WSTOPPED | WEXITED | WNOHANG | WNOWAIT) != 0) return kf_util_now_s();
        double now = kf_util_now_s();
        if (si.si_pid == r->pid) {
            if (si.si_code == CLD_STOPPED) {
                waitid(P_PID, (id_t)r->pid, &si, WSTOPPED | WNOHANG); /* consume the report */
                r->frozen = 1;
            }
            return now; /* stopped, or exited (the next wait sees it) */
        }
        if (now - t_kill > 2.0) return now;
        if (now - t_kill < 0.002) {
            sched_yield(); /* the runner's thread that takes the signal may need this core */
        } else {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
}

static int runner_send(judge *j, runner *r, kf_rp_cmd *c)
{
    c->magic = KF_RP_MAGIC;
    c->seq = kf_inputs_rng_next(&j->seqrng);
    const char *p = (const char *)c;
    size_t n = sizeof(*c);
    while (n) {
        ssize_t w = write(r->cmd_w, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    r->busy = 1;
    if (r->role == R_CAND) j->base_reset_valid = 0; /* it may change device state again */
    if (r->frozen) { /* the command is in the pipe: let it run */
        kill(r->pid, SIGCONT);
        r->frozen = 0;
    }
    return 0;
}

/* Wait for the answer to c (seq) until the deadline; drains the runner's output. */
static int runner_wait(judge *j, runner *r, uint64_t seq, uint32_t kind, kf_rp_reply *rep)
{
    size_t got = 0;
    for (;;) {
        double left = j->deadline - kf_util_now_s();
        if (left <= 0) return WT_TIMEOUT;
        struct pollfd pf[2] = {{.fd = r->rep_r, .events = POLLIN}, {.fd = r->out_r, .events = POLLIN}};
        int ms = left > 0.2 ? 200 : (int)(left * 1000) + 1;
        int pr = poll(pf, 2, ms);
        if (pr < 0 && errno != EINTR) return WT_DIED;
        if (pf[1].revents) drain_output(r);
        if (pf[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = read(r->rep_r, (char *)rep + got, sizeof(*rep) - got);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                /* reply pipe closed: the runner is gone, or closed it to
                 * hang the judge -- either way it ends now */
                drain_output(r);
                int st = 0;
                pid_t wp = 0;
                /* an exiting process closes its descriptors before it
                 * becomes a zombie: give it 200 ms to finish dying */
                for (int i = 0; i < 200 && (wp = waitpid(r->pid, &st, WNOHANG)) == 0; i++) {
                    struct timespec ts = {0, 1000000};
                    nanosleep(&ts, NULL);
                }
                if (wp == 0) {
                    kill(r->pid, SIGKILL);
                    waitpid(r->pid, &st, 0);
                    r->wstatus = st;
                    r->dead = 1;
                    return WT_PROTO;
                }
                if (wp == r->pid) {
                    r->wstatus = st;
                    r->dead = 1;
                }
                return got ? WT_PROTO : WT_DIED;
            }
            got += (size_t)n;
            if (got < sizeof(*rep)) continue;
            if (rep->magic != KF_RP_MAGIC || rep->kind != kind || rep->seq != seq) return WT_PROTO;
            rep->msg[sizeof(rep->msg) - 1] = 0;
            if (kind != KF_RP_READY) r->busy = 0;
            return WT_OK;
        }
    }
}

/* Describe how a runner ended (after WT_DIED). */
static void death_text(runner *r, char *buf, size_t cap, int *sig)
{
    *sig = 0;
    if (!r->dead) {
        if (waitpid(r->pid, &r->wstatus, 0) == r->pid) r->dead = 1;
    }
    if (WIFSIGNALED(r->wstatus)) {
        *sig = WTERMSIG(r->wstatus);
        snprintf(buf, cap, "died with %s (%s)", signame(*sig), strsignal(*sig));
    } else if (WIFEXITED(r->wstatus)) {
        snprintf(buf, cap, "exited the process (status %d)", WEXITSTATUS(r->wstatus));
    } else {
        snprintf(buf, cap, "ended");
    }
}

/* Blame a failed wait: the candidate's runner -> the candidate; the others -> the task. */
__attribute__((noreturn)) static void fail_wait(judge *j, runner *r, int w, const char *where)
{
    char d[256];
    int sig = 0;
    if (r->role != R_CAND) {
        /* a candidate that spent the budget (slow calls, to leave the task's
         * runners none) is the one out of time */
        if (w == WT_TIMEOUT && j->cand_used_s > 0.4 * j->cfg->budget_s)
            finish(j, KF_TIMEOUT, "candidate", "the candidate used %.1f s of the evaluation's %.0f s budget in its "
                   "own load and calls; out of time %s", j->cand_used_s, j->cfg->budget_s, where);
        /* too slow is the task's fault only when this one call used a real
         * share of the budget; otherwise the judge's own plan ran out */
        if (w == WT_TIMEOUT && kf_util_now_s() - j->call_t0 < 0.25 * j->cfg->budget_s)
            finish(j, KF_INFRA_ERROR, "worker", "judge: the evaluation's %.0f s budget ran out %s", j->cfg->budget_s,
                   where);
        if (w == WT_TIMEOUT)
            finish(j, KF_INFRA_ERROR, "task", "the task's %s exceeded the %.0f s limit %s: the task is too slow "
                   "for this worker", role_name[r->role], j->cfg->budget_s, where);
        if (w == WT_DIED) {
            death_text(r, d, sizeof(d), &sig);
            finish(j, KF_INFRA_ERROR, "task", "the task's %s %s %s", role_name[r->role], d, where);
        }
        finish(j, KF_INFRA_ERROR, "task", "the task's %s broke the runner protocol %s", role_name[r->role], where);
    }
    if (w == WT_TIMEOUT)
        finish(j, KF_TIMEOUT, "candidate", "the candidate's call exceeded the judge's %.0f s budget (85%% of the task's time limit) %s", j->cfg->budget_s, where);
    if (w == WT_PROTO)
        finish(j, KF_REJECTED_CHEAT, "candidate", "wrote on the runner's reply channel %s (forged or "
               "malformed answer)", where);
    death_text(r, d, sizeof(d), &sig);
    if (sig == SIGILL)
        finish(j, KF_RUNTIME_ERROR, "candidate", "candidate %s %s (an instruction this CPU lacks?)", d, where);
    finish(j, KF_RUNTIME_ERROR, "candidate", "candidate %s %s", d, where);
}

/* ---------------- layouts and data ---------------- */

static uint64_t align_page(uint64_t x) { return (x + 4095) & ~(uint64_t)4095; }

static int make_layout(judge *j, const int64_t *sizes, layout *L, char *err, size_t cap)
{
    const kf_task *t = j->t;
    memset(L, 0, sizeof(*L));
    memcpy(L->sizes, sizes, sizeof(L->sizes));
    uint64_t off = 0;
    for (int io = 0; io < 2; io++) {
        int n = io ? t->n_outputs : t->n_inputs;
        for (int i = 0; i < n; i++) {
            const kf_tensor_spec *ts = io ? &t->outputs[i] : &t->inputs[i];
            int64_t *shape = io ? L->out_shape[i] : L->in_shape[i];
            int64_t cnt = kf_task_shape(t, ts, sizes, shape);
            if (cnt <= 0) {
                snprintf(err, cap, "tensor '%s': bad shape", ts->name);
                return -1;
            }
            /* each tensor ends (64-byte rounded) right before a guard page
             * the cpu runner maps PROT_NONE (kf_rp_guard), so an overrun
             * faults at once (R1) */
            uint64_t b = (uint64_t)cnt * kf_dtype_size(ts->dtype);
            uint64_t rounded = (b + 63) & ~(uint64_t)63, pages = align_page(rounded ? rounded : 64);
            uint64_t start = off + pages - rounded;
            if (io) {
                L->out_off[i] = start;
                L->out_bytes[i] = b;
                L->out_n[i] = cnt;
            } else {
                L->in_off[i] = start;
                L->in_bytes[i] = b;
                L->in_n[i] = cnt;
            }
            off += pages + 4096;
        }
    }
    double wsb = 0;
    char e2[128];
    if (t->workspace[0] && kf_task_eval_expr(t, t->workspace, sizes, &wsb, e2, sizeof(e2)) != 0) wsb = 0;
    if (wsb > 0) {
        uint64_t rounded = ((uint64_t)wsb + 63) & ~(uint64_t)63, pages = align_page(rounded);
        L->ws_off = off + pages - rounded;
        L->ws_bytes = (uint64_t)wsb;
        off += pages + 4096;
    }
    L->total = off ? off : 4096;
    return 0;
}

static void fill_cmd(judge *j, const layout *L, kf_rp_cmd *c, int op)
{
    const kf_task *t = j->t;
    memset(c, 0, sizeof(*c));
    c->op = (uint32_t)op;
    c->n_in = t->n_inputs;
    c->n_out = t->n_outputs;
    c->n_sizes = t->n_sizes;
    for (int i = 0; i < t->n_inputs; i++) {
        c->in[i].offset = L->in_off[i];
        c->in[i].dtype = t->inputs[i].dtype;
        c->in[i].ndim = t->inputs[i].ndim;
        memcpy(c->in[i].shape, L->in_shape[i], sizeof(c->in[i].shape));
    }
    for (int i = 0; i < t->n_outputs; i++) {
        c->out[i].offset = L->out_off[i];
        c->out[i].dtype = t->outputs[i].dtype;
        c->out[i].ndim = t->outputs[i].ndim;
        memcpy(c->out[i].shape, L->out_shape[i], sizeof(c->out[i].shape));
    }
    for (int i = 0; i < t->n_sizes; i++) c->sizes[i] = L->sizes[i];
    c->ws_offset = L->ws_off;
    c->ws_bytes = L->ws_bytes;
}

static uint32_t poison_of(int dtype) { return dtype == KF_I32 ? (uint32_t)KF_INPUTS_I32_POISON : KF_INPUTS_F32_POISON; }

static void io_fail(judge *j, const char *what)
{
    finish(j, KF_INFRA_ERROR, "worker", "judge: %s failed", what);
}

static void poison(judge *j, runner *r, const layout *L)
{
    for (int o = 0; o < j->t->n_outputs; o++)
        if (j->be->fill32(j->dev, &r->arena, L->out_off[o], poison_of(j->t->outputs[o].dtype),
                          (L->out_bytes[o] + 3) & ~3ull))
            io_fail(j, "poison");
    if (L->ws_bytes && j->be->fill32(j->dev, &r->arena, L->ws_off, KF_INPUTS_F32_POISON, (L->ws_bytes + 3) & ~3ull))
        io_fail(j, "poison");
}

static void shape_str(const kf_task *t, const int64_t *sizes, char *out, size_t cap)
{
    size_t p = 0;
    out[0] = 0;
    for (int i = 0; i < t->n_sizes && p < cap; i++)
        p += (size_t)snprintf(out + p, cap - p, "%s%s=%lld", i ? "," : "", t->size_names[i], (long long)sizes[i]);
}

static json_t *shape_json(const kf_task *t, const int64_t *sizes)
{
    json_t *o = json_object();
    for (int i = 0; i < t->n_sizes; i++) json_object_set_new(o, t->size_names[i], json_integer(sizes[i]));
    return o;
}

/* Untimed: a trusted runner resets its device state before a timed call.
 * Skipped for the baseline when it already reset and the candidate's runner
 * was sent nothing since (timing()'s order B C, C B, B C, ... puts two
 * baseline batches back to back every other pair). The reset undoes what
 * the candidate's calls left (a persisting-L2 limit, access-policy
 * windows, persisting lines); with no call since the last reset there is
 * nothing new to undo. What a thread or kernel of the candidate's does
 * while it is not called, it could do between a reset and the call as well
 * (the idle check and the late check are the guards there, not the reset). */
static void reset_runner(judge *j, runner *r, const char *where)
{
    if (!j->be->reset_before_timed_call) return;
    if (r->role == R_BASE && j->base_reset_valid) {
        j->resets_skipped++;
        return;
    }
    kf_rp_cmd c;
    memset(&c, 0, sizeof(c));
    c.op = KF_RP_RESET;
    if (runner_send(j, r, &c) != 0) fail_wait(j, r, WT_DIED, where);
    kf_rp_reply rep;
    int w = runner_wait(j, r, c.seq, KF_RP_DONE, &rep);
    if (w != WT_OK) fail_wait(j, r, w, where);
    freeze_runner(r);
    if (r->role == R_BASE) j->base_reset_valid = 1;
}

/* One doorbell on runner r: count calls (a batch: call i on the set at
 * i x L->total bytes, see timing()); returns the judge-clock time in µs of
 * the whole batch (doorbell to answer + fence). */
static double call(judge *j, runner *r, const layout *L, int count, int flags, const char *where, kf_rp_reply *rep)
{
    kf_rp_cmd c;
    fill_cmd(j, L, &c, KF_RP_CALL);
    c.flags = flags;
    c.count = count;
    c.stride = L->total;
    if (j->be->sync(j->dev)) io_fail(j, "device sync");
    int64_t cpu0 = r->role == R_CAND ? j->cand_mark : -1; /* idle_check just read it */
    double t0 = kf_util_now_s();
    j->call_t0 = t0;
    if (runner_send(j, r, &c) != 0) fail_wait(j, r, WT_DIED, where);
    int w = runner_wait(j, r, c.seq, KF_RP_DONE, rep);
    if (w != WT_OK) fail_wait(j, r, w, where);
    j->be->fence(j->dev);
    double t1 = kf_util_now_s();
    /* a frozen runner's call lasts until it is stopped: what its threads
     * do between the answer and the stop is on the clock (freeze_runner) */
    double ts = freeze_runner(r);
    if (r->freeze && ts > t1) t1 = ts;
    if (r->role == R_CAND) { /* from its answer on, it must be idle */
        j->cand_mark = settled_cpu_ns(r);
        j->cand_mark_wall = kf_util_now_s();
        /* CPU the candidate's process used during this doorbell, all threads */
        j->cand_call_cpu_s = cpu0 >= 0 && j->cand_mark >= 0 ? (double)(j->cand_mark - cpu0) * 1e-9 : -1;
    }
    if (r->role == R_CAND) j->cand_used_s += t1 - t0;
    const char *who = role_name[r->role];
    if (rep->status == KF_RP_ST_ARCH) {
        if (r->role == R_CAND) finish(j, KF_UNSUPPORTED, "candidate", "no kernel image for this device %s: %s", where, rep->msg);
        finish(j, KF_INFRA_ERROR, "task", "the task's %s has no kernel image for this device %s", who, where);
    }
    if (rep->status == KF_RP_ST_CUDA_ERROR) {
        if (r->role == R_CAND) {
            /* prove the device sound before blaming the candidate: the
             * reference, in its own context, must still run (same layout) */
            kf_rp_cmd h;
            kf_rp_reply hr;
            fill_cmd(j, L, &h, KF_RP_CALL);
            runner *R = &j->r[R_REF];
            int hw = R->pid > 0 && !R->dead && runner_send(j, R, &h) == 0 ? runner_wait(j, R, h.seq, KF_RP_DONE, &hr)
                                                                            : WT_DIED;
            if (hw != WT_OK || hr.status != KF_RP_ST_OK)
                finish(j, KF_INFRA_ERROR, "worker", "the device failed: the candidate got a CUDA error %s (%s) and "
                       "the task's reference then failed too%s%s", where, rep->msg, hw == WT_OK ? ": " : "",
                       hw == WT_OK ? hr.msg : "");
            finish(j, KF_RUNTIME_ERROR, "candidate", "CUDA error %s: %s", where, rep->msg);
        }
        finish(j, KF_INFRA_ERROR, "task", "the task's %s failed %s: %s", who, where, rep->msg);
    }
    if (rep->status != KF_RP_ST_OK) {
        if (r->role == R_CAND) finish(j, KF_RUNTIME_ERROR, "candidate", "runner error %s: %s", where, rep->msg);
        finish(j, KF_INFRA_ERROR, "worker", "runner error for the %s %s: %s", who, where, rep->msg);
    }
    if (rep->rc != 0) {
        if (r->role == R_CAND) finish(j, KF_RUNTIME_ERROR, "candidate", "candidate kf_entry returned %d %s", rep->rc, where);
        finish(j, KF_INFRA_ERROR, "task", "the task's %s kf_entry returned %d %s", who, rep->rc, where);
    }
    return (t1 - t0) * 1e6;
}

/* The candidate must not run while it is not being called: its runner's
 * CPU clock may not advance by more than CPU_SLACK_NS plus the backend's
 * share of the wall time (runtime housekeeping threads) between the moment
 * it answered (or the last check) and now. Called before every candidate
 * call and around everything the judge does between calls.
 *
 * One gap over that slack, but under 3x it, is let pass and kept in the
 * metrics (idle_cpu_excess): an honest CUDA runner's driver threads were
 * seen using 2.5-2.8 ms in a 6-8 ms gap about once in 100 evaluations on
 * the H200 (2026-12-04), and work done in one gap of an evaluation's
 * hundreds speeds up one call, which no median sees. A second such gap, or
 * one over 3x the slack, is work left running: rejected_cheat. */
static void idle_check(judge *j, const char *where)
{
    runner *c = &j->r[R_CAND];
    int64_t now = cpu_ns(c);
    double wall = kf_util_now_s();
    double allowed = (double)CPU_SLACK_NS + j->be->idle_cpu_slack * (wall - j->cand_mark_wall) * 1e9;
    if (j->cand_mark >= 0 && now >= 0 && (double)(now - j->cand_mark) > allowed) {
        double used_ms = (double)(now - j->cand_mark) / 1e6, gap_ms = (wall - j->cand_mark_wall) * 1e3;
        if (j->idle_strike[0] || (double)(now - j->cand_mark) > 3.0 * allowed)
            finish(j, KF_REJECTED_CHEAT, "candidate",
                   "the candidate used %.1f ms of CPU in %.1f ms while it was not being called %s: work left running "
                   "after kf_entry returned%s%s", used_ms, gap_ms, where, j->idle_strike[0] ? "; before that " : "",
                   j->idle_strike);
        snprintf(j->idle_strike, sizeof(j->idle_strike), "%.1f ms of CPU in %.1f ms %.120s", used_ms, gap_ms, where);
        json_object_set_new(j->metrics, "idle_cpu_excess",
                            json_pack("{s:f,s:f,s:f,s:s}", "cpu_ms", used_ms, "wall_ms", gap_ms, "allowed_ms",
                                      allowed / 1e6, "where", where));
    }
    j->cand_mark = now;
    j->cand_mark_wall = wall;
}

/* Snapshot the candidate's outputs the moment it answered: a device (or
 * memory) copy into the output regions of the judge's master arena, which
 * hold nothing else (the master keeps only timed inputs). */
static void snap_outputs(judge *j, const layout *L)
{
    for (int o = 0; o < j->t->n_outputs; o++)
        if (j->be->copy(j->dev, &j->master, L->out_off[o], &j->r[R_CAND].arena, L->out_off[o], L->out_bytes[o]))
            io_fail(j, "snapshot outputs");
}

/* Work left running after the answer: LATE_CHECK_MS later, the candidate's
 * outputs must still equal the snapshot (compared where they lie). */
static void late_check(judge *j, const layout *L, const int *sets, int nsets, double snap_t, const char *where)
{
    if (j->r[R_CAND].frozen) return;
    /* LATE_CHECK_MS after the snapshot (what the judge did since counts) */
    double wait_s = snap_t + LATE_CHECK_MS * 1e-3 - kf_util_now_s();
    if (wait_s > 0) {
        struct timespec ts = {0, (long)(wait_s * 1e9)};
        nanosleep(&ts, NULL);
    }
    for (int q = 0; q < nsets; q++)
    for (int o = 0; o < j->t->n_outputs; o++) {
        int k = sets[q];
        uint64_t off = L->out_off[o] + (uint64_t)k * L->total;
        uint64_t first = 0;
        int same = j->be->same(j->dev, &j->r[R_CAND].arena, off, &j->master, off, L->out_bytes[o], &first);
        if (same < 0) io_fail(j, "compare outputs");
        if (!same)
            finish(j, KF_REJECTED_CHEAT, "candidate", "output '%s' changed after kf_entry returned (element %llu%s%.0d) "
                   "%s: work was left running after return", j->t->outputs[o].name,
                   (unsigned long long)(first / kf_dtype_size(j->t->outputs[o].dtype)),
                   nsets > 1 || k > 0 ? " of the batch's call " : "", nsets > 1 || k > 0 ? k + 1 : 0, where);
    }
}

static void vlate_pending_flush(judge *j);

/* Compare the candidate's outputs (layout L) with the reference's (layout
 * LR: the same shape, maybe another set of the arena) where they lie (the
 * backend's compare: on the device for cuda); finish on failure. An
 * unwritten reference element is the task's fault, an unwritten candidate
 * element is incorrect, then the tolerance rule (compare.h). */
static void judge_outputs(judge *j, const layout *L, const layout *LR, const char *where, json_t *rec)
{
    const kf_task *t = j->t;
    json_t *outs = json_array();
    json_object_set_new(rec, "outputs", outs);
    for (int o = 0; o < t->n_outputs; o++) {
        const kf_tensor_spec *ts = &t->outputs[o];
        int64_t n = L->out_n[o];
        kf_compare_res cr;
        kf_judge_poison pz;
        if (j->be->compare(j->dev, &j->r[R_CAND].arena, L->out_off[o], &j->r[R_REF].arena, LR->out_off[o], ts->dtype,
                           n, &t->tol[ts->dtype], t->allow_nonfinite, &cr, &pz))
            io_fail(j, "compare outputs");
        if (pz.ref)
            finish(j, KF_INFRA_ERROR, "task", "the task's reference did not write output '%s' element %lld %s",
                   ts->name, (long long)pz.ref_first, where);
        if (pz.cand || !cr.ok) vlate_pending_flush(j); /* a late writer is rejected_cheat first */
        if (pz.cand)
            finish(j, KF_INCORRECT, "candidate", "output '%s' element %lld not written (%lld of %lld elements still "
                   "hold the poison pattern when the candidate answered) %s", ts->name, (long long)pz.cand_first,
                   (long long)pz.cand, (long long)n, where);
        json_t *oj = json_object();
        json_object_set_new(oj, "name", json_string(ts->name));
        json_object_set_new(oj, "max_abs_err", json_real(cr.max_abs_err));
        json_object_set_new(oj, "max_rel_err", json_real(cr.max_rel_err));
        json_object_set_new(oj, "scale", json_real(cr.scale));
        json_object_set_new(oj, "n_bad", json_integer(cr.n_bad));
        json_object_set_new(oj, "ok", json_boolean(cr.ok));
        if (cr.first_bad >= 0) {
            json_object_set_new(oj, "first_bad", json_integer(cr.first_bad));
            json_object_set_new(oj, "candidate", isfinite(cr.first_cand) ? json_real(cr.first_cand)
                                                 : json_string(isnan(cr.first_cand) ? "nan" : cr.first_cand > 0 ? "inf" : "-inf"));
            json_object_set_new(oj, "reference", isfinite(cr.first_ref) ? json_real(cr.first_ref)
                                                 : json_string(isnan(cr.first_ref) ? "nan" : "inf"));
        }
        json_array_append_new(outs, oj);
        if (!cr.ok) {
            if (cr.ref_nonfinite && !t->allow_nonfinite)
                finish(j, KF_INFRA_ERROR, "task", "output '%s': %s %s (the reference is not finite)", ts->name,
                       cr.reason, where);
            finish(j, KF_INCORRECT, "candidate", "output '%s' %s: %s", ts->name, where, cr.reason);
        }
    }
}

/* Input i of the candidate (layout L) must equal the same range of arena
 * `expect` (compared by the backend: on the device for cuda); else the
 * candidate modified its input: incorrect, with the first changed element. */
static void input_unchanged(judge *j, const layout *L, int i, const kf_jarena *expect, const char *where)
{
    runner *C = &j->r[R_CAND];
    uint64_t first = 0;
    int same = j->be->same(j->dev, &C->arena, L->in_off[i], expect, L->in_off[i], L->in_bytes[i], &first);
    if (same < 0) io_fail(j, "compare inputs");
    if (same) return;
    vlate_pending_flush(j);
    const kf_tensor_spec *ts = &j->t->inputs[i];
    size_t es = kf_dtype_size(ts->dtype);
    uint64_t idx = first / es;
    unsigned char was[8] = {0}, is[8] = {0};
    if (j->be->get(j->dev, expect, L->in_off[i] + idx * es, was, es) ||
        j->be->get(j->dev, &C->arena, L->in_off[i] + idx * es, is, es))
        io_fail(j, "read inputs");
    finish(j, KF_INCORRECT, "candidate", "candidate modified input '%s' (element %llu: was %.9g, now %.9g) %s",
           ts->name, (unsigned long long)idx, kf_inputs_get(was, ts->dtype, 0), kf_inputs_get(is, ts->dtype, 0),
           where);
}

/* Inputs in the candidate's arena must equal what was written: tensor i is
 * written again into the reference's arena (its outputs were already
 * compared or are not read again) -- expect[i] when it was generated on the
 * host, else regenerated from gen[i] -- and compared there (on the device
 * for cuda). */
static void check_inputs(judge *j, const layout *L, void **expect, const kf_gen_spec *gen, const char *where)
{
    runner *R = &j->r[R_REF];
    for (int i = 0; i < j->t->n_inputs; i++) {
        int e = expect[i] ? j->be->put(j->dev, &R->arena, L->in_off[i], expect[i], L->in_bytes[i])
                          : j->be->gen(j->dev, &R->arena, L->in_off[i], &gen[i], L->in_n[i]);
        if (e) io_fail(j, "write inputs");
        input_unchanged(j, L, i, &R->arena, where);
    }
}

/* ---------------- validation ---------------- */

/* Deferred late checks of validation (see validate()): the trials whose
 * outputs were snapshot and not yet compared again. */
#define VLATE_MAX 64

typedef struct {
    layout S[VLATE_MAX];
    char where[VLATE_MAX][256];
    int n;
    double snap_t; /* the newest snapshot: every pending one is at least this old */
} vlate;

/* The pending trials' late check: LATE_CHECK_MS after the newest snapshot,
 * each trial's outputs must still equal its snapshot (late_check()). */
static void vlate_flush(judge *j, vlate *v)
{
    static const int set0[1] = {0};
    for (int q = 0; q < v->n; q++) late_check(j, &v->S[q], set0, 1, v->snap_t, v->where[q]);
    v->n = 0;
}

static layout layout_shift(const layout *L, uint64_t sh);

static void vlate_pending_flush(judge *j)
{
    if (j->vlate) vlate_flush(j, j->vlate);
}

/* Validation. Each trial of a shape runs in a slot of its own in the arenas
 * (the shape's layout shifted by the bytes the earlier trials use), so a
 * trial's outputs stay where they were until its late check: the late checks
 * of every trial that fits in the arena are done together, LATE_CHECK_MS
 * after the last snapshot, instead of one wait per trial (18 trials x 5 ms
 * was 60-70% of a warm evaluation's validation on the H100). A shape of
 * which two trials do not fit in the arena gets one slot, reused, and its
 * late check after every trial, as before. I11 (the reference depends on its
 * inputs): trial 1's reference outputs against trial 0's, still in the
 * reference's arena at slot 0 (or, with one slot, copied to the master's
 * output regions first). A late check that fails is rejected_cheat; the
 * pending ones are done before any other failure is reported (precedence). */
static void validate(judge *j)
{
    const kf_task *t = j->t;
    runner *R = &j->r[R_REF], *C = &j->r[R_CAND];
    int depends = 0;
    vlate *pend = calloc(1, sizeof(vlate));
    if (!pend) io_fail(j, "allocation");
    j->vlate = pend;
    uint64_t voff = 0; /* the next free byte of the arenas' slots */
    for (int s = 0; s < t->n_validation; s++) {
        const int64_t *sizes = t->validation[s].sizes;
        char sh[160], err[256];
        shape_str(t, sizes, sh, sizeof(sh));
        layout L;
        if (make_layout(j, sizes, &L, err, sizeof(err))) finish(j, KF_INFRA_ERROR, "task", "%s (shape %s)", err, sh);
        /* slots: every trial its own when two fit in the arena */
        int slots = 2 * L.total <= j->arena_bytes;
        if (!slots || voff + (uint64_t)(t->trials < 2 ? 1 : 2) * L.total > j->arena_bytes ||
            pend->n + 2 > VLATE_MAX) {
            vlate_flush(j, pend); /* trial 0 and 1 of this shape in one run of slots (I11) */
            voff = 0;
        }
        layout S0 = L;
        for (int tr = 0; tr < t->trials; tr++) {
            char where[256];
            snprintf(where, sizeof(where), "(validation shape %s, trial %d)", sh, tr);
            double trial_t0 = kf_util_now_s();
            if (slots && (voff + L.total > j->arena_bytes || pend->n == VLATE_MAX)) {
                vlate_flush(j, pend);
                voff = 0;
            }
            layout S = slots ? layout_shift(&L, voff) : L;
            if (slots) voff += L.total;
            if (tr == 0) S0 = S;
            /* Inputs up to HOST_GEN_MAX elements: the full-tailed Box-Muller
             * normal of inputs.c, generated on the host and copied in (the
             * small shapes are where edge values matter); larger ones are
             * generated in place by the backend (gen.h), like timed inputs. */
            void **host = j->vhost; /* freed below, or by finish() */
            kf_gen_spec gen[KF_MAX_TENSORS];
            for (int i = 0; i < t->n_inputs; i++) {
                uint64_t seed = kf_inputs_derive_seed(j->cfg->secret, (uint64_t)s, (uint64_t)tr, (uint64_t)i);
                if (L.in_n[i] > HOST_GEN_MAX) {
                    kf_inputs_gen_spec(&t->inputs[i], seed, &gen[i]);
                    if (j->be->gen(j->dev, &R->arena, S.in_off[i], &gen[i], L.in_n[i]) ||
                        j->be->gen(j->dev, &C->arena, S.in_off[i], &gen[i], L.in_n[i]))
                        io_fail(j, "generate inputs");
                    continue;
                }
                host[i] = malloc(L.in_bytes[i] ? L.in_bytes[i] : 1);
                if (!host[i]) io_fail(j, "allocation");
                kf_inputs_fill(host[i], t->inputs[i].dtype, L.in_n[i], &t->inputs[i], seed);
                if (j->be->put(j->dev, &R->arena, S.in_off[i], host[i], L.in_bytes[i]) ||
                    j->be->put(j->dev, &C->arena, S.in_off[i], host[i], L.in_bytes[i]))
                    io_fail(j, "write inputs");
            }
            poison(j, R, &S);
            poison(j, C, &S);
            kf_rp_reply rep;
            /* With one slot, trial 1 looking for I11's evidence needs trial
             * 0's reference outputs, which wait in the master's output
             * regions until the snapshot overwrites them: the reference runs
             * first there and its late check is not overlapped. Otherwise
             * the reference's call and the comparisons fill the late check's
             * wait. A late writer is caught either way: the comparison reads
             * the outputs after the snapshot, and the late check compares
             * them with it afterwards (incorrect if they were wrong when it
             * answered, rejected_cheat if they changed). */
            int overlap = slots || depends || tr >= 2;
            if (!overlap) {
                progress(j, "validate reference %s", where);
                call(j, R, &S, 1, 0, where, &rep);
                if (tr == 1)
                    for (int o = 0; o < t->n_outputs && !depends; o++) {
                        uint64_t first = 0;
                        int same = j->be->same(j->dev, &R->arena, S.out_off[o], &j->master, S.out_off[o],
                                               L.out_bytes[o], &first);
                        if (same < 0) io_fail(j, "compare outputs");
                        depends = !same;
                    }
            }

            progress(j, "validate candidate %s", where);
            idle_check(j, where);
            int64_t c0 = cpu_ns(C);
            double us = call(j, C, &S, 1, KF_RP_F_KERNELS, where, &rep);
            int n_kernels = rep.n_kernels;
            int64_t c1 = j->cand_mark;
            snap_outputs(j, &S);
            double snap_t = kf_util_now_s();
            static const int set0[1] = {0};
            if (!overlap) {
                late_check(j, &S, set0, 1, snap_t, where);
                idle_check(j, where);
            } else {
                if (slots) { /* checked with the slots' run */
                    pend->S[pend->n] = S;
                    snprintf(pend->where[pend->n], sizeof(pend->where[0]), "%s", where);
                    pend->n++;
                    pend->snap_t = snap_t;
                }
                progress(j, "validate reference %s", where);
                kf_rp_reply rr;
                call(j, R, &S, 1, 0, where, &rr);
                /* I11: the reference's output must depend on its inputs: on
                 * at least one shape, two trials must give different outputs
                 * (trial 0's still in the reference's slot 0) */
                if (slots && tr == 1)
                    for (int o = 0; o < t->n_outputs && !depends; o++) {
                        uint64_t first = 0;
                        int same = j->be->same(j->dev, &R->arena, S.out_off[o], &R->arena, S0.out_off[o],
                                               L.out_bytes[o], &first);
                        if (same < 0) io_fail(j, "compare outputs");
                        depends = !same;
                    }
            }
            check_inputs(j, &S, host, gen, where);
            json_t *rec = json_object();
            json_object_set_new(rec, "shape", shape_json(t, sizes));
            json_object_set_new(rec, "trial", json_integer(tr));
            json_object_set_new(rec, "candidate_call_us", json_real(us));
            if (c0 >= 0 && c1 >= 0) json_object_set_new(rec, "candidate_cpu_us", json_real((double)(c1 - c0) / 1e3));
            if (n_kernels >= 0) json_object_set_new(rec, "kernels", json_integer(n_kernels));
            json_array_append_new(j->validation, rec);
            if (n_kernels == 0 && t->require_kernel) {
                vlate_flush(j, pend);
                finish(j, KF_REJECTED_CHEAT, "candidate", "the candidate launched no kernel %s (the task requires "
                       "its own kernel; CUPTI saw none)", where);
            }
            judge_outputs(j, &S, &S, where, rec);
            if (overlap) {
                if (!slots) late_check(j, &S, set0, 1, snap_t, where);
                idle_check(j, where);
            }
            if (!slots && tr == 0 && !depends)
                for (int o = 0; o < t->n_outputs; o++)
                    if (j->be->copy(j->dev, &j->master, S.out_off[o], &R->arena, S.out_off[o], L.out_bytes[o]))
                        io_fail(j, "copy outputs");
            json_object_set_new(rec, "judge_s", json_real(kf_util_now_s() - trial_t0)); /* the trial's wall time */
            for (int i = 0; i < t->n_inputs; i++) {
                free(host[i]);
                host[i] = NULL;
            }
        }
    }
    vlate_flush(j, pend);
    idle_check(j, "(validation, after the last late check)");
    j->vlate = NULL;
    free(pend);
    if (!depends && t->trials >= 2)
        finish(j, KF_INFRA_ERROR, "task", "degenerate task: the reference gives the same output for different "
               "inputs on every validation shape, so a constant would pass");
}

/* ---------------- timing ---------------- */

static json_t *stats_json(const kf_cuda_stats *s, double overhead)
{
    json_t *o = json_object();
    json_object_set_new(o, "median_us", json_real(s->median));
    json_object_set_new(o, "raw_median_us", json_real(s->median + overhead));
    json_object_set_new(o, "min_us", json_real(s->min));
    json_object_set_new(o, "mean_us", json_real(s->mean));
    json_object_set_new(o, "cv", json_real(s->cv));
    json_object_set_new(o, "reps", json_integer(s->n));
    return o;
}

/* L with every tensor and the workspace sh bytes further into the arena. */
static layout layout_shift(const layout *L, uint64_t sh)
{
    layout S = *L;
    for (int i = 0; i < KF_MAX_TENSORS; i++) {
        S.in_off[i] += sh;
        S.out_off[i] += sh;
    }
    S.ws_off += sh;
    return S;
}

/* Set k of a batch: L shifted by k x L->total. */
static layout layout_at(const layout *L, int k) { return layout_shift(L, (uint64_t)k * L->total); }

/* Fresh values for every element of every input of a timed call, from
 * (secret, shape, rep): generated once per rep, in place, into the judge's
 * private master arena by the backend (gen.h's counter-based generator; on
 * cuda one kernel of the judge's, outside the clock), then copied into the
 * runner's arena (a copy costs a fraction of a generation, and no runner's
 * arena is ever a source: what a candidate did to its inputs after its call
 * cannot reach the baseline's). No two calls share an input element and no
 * part of an earlier answer is reusable (an incremental recompute gains
 * nothing). Identical for the baseline, the candidate and the reference on
 * the same rep. Outputs are poisoned. A batch (count > 1) gets count
 * sets, set k at k x L->total, each with values of its own. */
/* The seed of input i of set k of call rep of benchmark shape b: every call
 * of every batch has its own counter-based stream, derived from the secret
 * (rep may be negative: warm-up). */
static uint64_t set_seed(const judge *j, int b, int rep, int k, int i)
{
    uint64_t idx = (uint64_t)((int64_t)rep * KF_RP_MAX_BATCH + k + 16 * KF_RP_MAX_BATCH);
    return kf_inputs_derive_seed(j->cfg->secret, 1000u + (uint64_t)b, idx, (uint64_t)i);
}

/* Generate input set k of call rep of benchmark shape b into arena a at set
 * k's offsets. */
static void gen_set(judge *j, kf_jarena *a, const layout *L, int b, int rep, int k)
{
    const kf_task *t = j->t;
    layout S = layout_at(L, k);
    for (int i = 0; i < t->n_inputs; i++) {
        kf_gen_spec g;
        kf_inputs_gen_spec(&t->inputs[i], set_seed(j, b, rep, k, i), &g);
        if (j->be->gen(j->dev, a, S.in_off[i], &g, S.in_n[i])) io_fail(j, "generate inputs");
    }
}

/* Sets 0..count-1 of call rep of shape b in arena a, each input of all sets
 * in one gen_sets (the same bits as gen_set per set), outputs and workspace
 * poisoned with one fill32_sets each. */
static void gen_sets_poisoned(judge *j, kf_jarena *a, const layout *L, int b, int rep, int count)
{
    const kf_task *t = j->t;
    uint64_t seeds[KF_RP_MAX_BATCH];
    for (int i = 0; i < t->n_inputs; i++) {
        for (int k = 0; k < count; k++) seeds[k] = set_seed(j, b, rep, k, i);
        kf_gen_spec g;
        kf_inputs_gen_spec(&t->inputs[i], seeds[0], &g);
        if (j->be->gen_sets(j->dev, a, L->in_off[i], L->total, count, &g, seeds, L->in_n[i]))
            io_fail(j, "generate inputs");
    }
    for (int o = 0; o < t->n_outputs; o++)
        if (j->be->fill32_sets(j->dev, a, L->out_off[o], L->total, count, poison_of(t->outputs[o].dtype),
                               (L->out_bytes[o] + 3) & ~3ull))
            io_fail(j, "poison");
    if (L->ws_bytes &&
        j->be->fill32_sets(j->dev, a, L->ws_off, L->total, count, KF_INPUTS_F32_POISON, (L->ws_bytes + 3) & ~3ull))
        io_fail(j, "poison");
}

/* The master's inputs for the sets of call rep of shape b: all count sets
 * (cached: both sides of a pair use them), or with sets only those (a
 * checked batch, when the runners' inputs were generated in place). */
static void gen_master(judge *j, const layout *L, int b, int rep, int count, const int *sets, int ns)
{
    if (sets) {
        j->master_valid = 0;
        for (int q = 0; q < ns; q++) gen_set(j, &j->master, L, b, rep, sets[q]);
        return;
    }
    if (!j->master_valid || j->master_b != b || j->master_rep != rep || j->master_count != count) {
        for (int k = 0; k < count; k++) gen_set(j, &j->master, L, b, rep, k);
        j->master_b = b;
        j->master_rep = rep;
        j->master_count = count;
        j->master_valid = 1;
    }
}

/* Copy input set `from` of the master into set `to` of runner r's arena and
 * poison that set's outputs. */
static void copy_set_to(judge *j, runner *r, const layout *L, int from, int to)
{
    layout F = layout_at(L, from), T = layout_at(L, to);
    for (int i = 0; i < j->t->n_inputs; i++)
        if (j->be->copy(j->dev, &r->arena, T.in_off[i], &j->master, F.in_off[i], F.in_bytes[i]))
            io_fail(j, "copy inputs");
    poison(j, r, &T);
}

/* Copy input set k of the master into set k of runner r's arena, outputs poisoned. */
static void copy_set(judge *j, runner *r, const layout *L, int k) { copy_set_to(j, r, L, k, k); }

/* Inputs of call rep of shape b for count calls of runner r, outputs
 * poisoned: generated in place (gen_in_place backends) or copied from the
 * master. */
static void prep_inputs(judge *j, runner *r, const layout *L, int b, int rep, int count)
{
    if (j->be->gen_in_place) {
        if (count > 1 && j->be->gen_sets && j->be->fill32_sets && count <= KF_RP_MAX_BATCH) {
            gen_sets_poisoned(j, &r->arena, L, b, rep, count);
            return;
        }
        for (int k = 0; k < count; k++) {
            layout S = layout_at(L, k);
            gen_set(j, &r->arena, L, b, rep, k);
            poison(j, r, &S);
        }
        return;
    }
    gen_master(j, L, b, rep, count, NULL, 0);
    for (int k = 0; k < count; k++) copy_set(j, r, L, k);
}

/* Whether the baseline's arena still holds the inputs of call rep of shape
 * b (count sets): its first and last set compared, input by input, with the
 * master regenerated from the secret. 0 (and counted) when the baseline
 * wrote them. */
static int base_inputs_intact(judge *j, const layout *L, int b, int rep, int count)
{
    int sets[2] = {0, count - 1}, ns = count > 1 ? 2 : 1;
    gen_master(j, L, b, rep, count, j->be->gen_in_place ? sets : NULL, ns);
    for (int q = 0; q < ns; q++) {
        layout S = layout_at(L, sets[q]);
        for (int i = 0; i < j->t->n_inputs; i++) {
            uint64_t first = 0;
            int same = j->be->same(j->dev, &j->r[R_BASE].arena, S.in_off[i], &j->master, S.in_off[i], S.in_bytes[i],
                                   &first);
            if (same < 0) io_fail(j, "compare inputs");
            if (!same) {
                j->base_inputs_inplace++;
                return 0;
            }
        }
    }
    return 1;
}

/* On a checked timed call: the candidate's inputs must still be what the
 * judge generated, compared with the judge's master copy. */
static void check_inputs_timed(judge *j, const layout *L, const char *where)
{
    for (int i = 0; i < j->t->n_inputs; i++) input_unchanged(j, L, i, &j->master, where);
}

/* One empty doorbell on runner r (judge-clock µs): the fixed cost of a
 * batch, whatever its number of calls. */
static double noop_rtt(judge *j, runner *r)
{
    kf_rp_cmd c;
    memset(&c, 0, sizeof(c));
    c.op = KF_RP_NOOP;
    /* the same state as a timed call: the judge's flush just ran (of an
     * empty working set: the probe moves no data) */
    j->be->flush(j->dev, &r->arena, 0);
    if (j->be->sync(j->dev)) io_fail(j, "device sync");
    double t0 = kf_util_now_s();
    j->call_t0 = t0;
    if (runner_send(j, r, &c)) fail_wait(j, r, WT_DIED, "(overhead probe)");
    kf_rp_reply rep;
    int w = runner_wait(j, r, c.seq, KF_RP_DONE, &rep);
    if (w != WT_OK) fail_wait(j, r, w, "(overhead probe)");
    j->be->fence(j->dev);
    double t1 = kf_util_now_s();
    double ts = freeze_runner(r); /* as in call(): the same stop on both sides' clocks */
    if (r->freeze && ts > t1) t1 = ts;
    return (t1 - t0) * 1e6;
}

/* Check the candidate's last batch (count calls on the inputs generated
 * for rep of benchmark shape b): the calls checked -- all of them up to
 * KF_CHECK_SETS, else the last one and KF_CHECK_SETS - 1 others drawn from
 * the secret's check stream -- must have their inputs unchanged, outputs
 * equal to the reference's on the same inputs, and nothing written after
 * the candidate answered. A candidate that skips a fraction f of a batch's
 * calls is caught by one checked batch with probability about
 * 1 - (1-f)^KF_CHECK_SETS, and checked batches are drawn per shape (timing()).
 * Returns the number of calls checked. */
static int check_call(judge *j, const layout *L, int b, int rep, int count, const char *where)
{
    runner *R = &j->r[R_REF];
    kf_rp_reply rr;
    int sets[KF_CHECK_SETS] = {0}, ns = 0;
    if (count <= KF_CHECK_SETS) {
        for (int k = 0; k < count; k++) sets[ns++] = k;
    } else {
        sets[ns++] = count - 1; /* the last call of the batch, always */
        while (ns < KF_CHECK_SETS) {
            int k = (int)(kf_inputs_rng_uniform(&j->chkrng) * (count - 1));
            int dup = 0;
            for (int q = 0; q < ns; q++) dup |= sets[q] == k;
            if (!dup && k < count - 1) sets[ns++] = k;
        }
    }
    layout S[KF_CHECK_SETS];
    char w[KF_CHECK_SETS][320];
    for (int q = 0; q < ns; q++) {
        S[q] = layout_at(L, sets[q]);
        snprintf(w[q], sizeof(w[q]), "%s%s%.0d", where, count > 1 ? ", call of the batch " : "",
                 count > 1 ? sets[q] + 1 : 0);
        snap_outputs(j, &S[q]);
    }
    double snap_t = kf_util_now_s();
    /* the master holds this call's inputs (copied from it), or now the
     * checked sets' (generated in place: regenerated from the secret) */
    gen_master(j, L, b, rep, count, j->be->gen_in_place ? sets : NULL, ns);
    for (int q = 0; q < ns; q++) check_inputs_timed(j, &S[q], w[q]);
    /* the reference computes only the checked calls, each on the same input
     * set as the candidate's call, copied to its sets 0..ns-1: one doorbell
     * for all of them (a doorbell is ~0.3 ms of GPU context switches) */
    for (int q = 0; q < ns; q++) copy_set_to(j, R, L, sets[q], q);
    call(j, R, L, ns, 0, w[0], &rr);
    late_check(j, L, sets, ns, snap_t, where);
    idle_check(j, where);
    for (int q = 0; q < ns; q++) {
        json_t *rec = json_object();
        layout RQ = layout_at(L, q);
        judge_outputs(j, &S[q], &RQ, w[q], rec);
        json_decref(rec);
    }
    return ns;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Relative standard error of the median of x[0..n): the large-sample
 * standard error of a median, sqrt(pi/2) * sigma / sqrt(n), with sigma
 * estimated robustly as 1.4826 * MAD (median absolute deviation), divided by
 * the median. Inf when n < 2 or the median is not positive. The median
 * itself goes to *median when that is not NULL (NAN when n < 2). */
static double rse_median(const double *x, int n, double *median)
{
    if (median) *median = NAN;
    if (n < 2) return INFINITY;
    double *v = malloc((size_t)n * sizeof(double));
    if (!v) return INFINITY;
    memcpy(v, x, (size_t)n * sizeof(double));
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    double med = n & 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    if (median) *median = med;
    for (int i = 0; i < n; i++) v[i] = fabs(v[i] - med);
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    double mad = n & 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    free(v);
    if (!(med > 0)) return INFINITY;
    return 1.2533141373155 * 1.4826 * mad / sqrt((double)n) / med;
}

/* A batch the candidate computed with more than one CPU at a time. Calls
 * of a batch are independent, so threads can run several of them at once --
 * a parallelism no single call has (red team: two threads, 1.6x on a 2-core
 * machine, more with more cores). Such a batch is charged its process's CPU
 * time (every thread; a runner may not create processes) instead of its
 * wall time (timing()). On cpu the runner is stopped before the doorbell and
 * after the answer, so its CPU clock is exact and one thread can never
 * exceed the wall time: any excess (5 µs for rounding) is charged. On cuda
 * the runner keeps running and its other threads are counted only up to the
 * last scheduler tick (up to 4 ms late at HZ=250): charged beyond 1.15 x the
 * wall time + 4 ms (what lands later is caught by the idle check). Shapes
 * of longer calls are not batched, so threads that speed up one call are
 * never charged. */
static int batch_parallel(const judge *j, int kb, double batch_us)
{
    if (kb < 2 || j->cand_call_cpu_s < 0) return 0;
    if (j->be->freeze_runners) return j->cand_call_cpu_s > batch_us * 1e-6 + 5e-6;
    return j->cand_call_cpu_s > 1.15 * batch_us * 1e-6 + 0.004;
}

/* Calls per doorbell for a call of kt µs (the baseline's kernel, the
 * doorbell excluded; call_us: the slower side's call with it): 1 when the doorbell is at most 5% of the call, else
 * enough that the doorbell is 1/KF_BATCH_OV of the batch, within the arena,
 * 5% of the shape's wall cap, and KF_RP_MAX_BATCH. */
static int batch_size(const judge *j, const layout *L, double kt, double call_us, double shape_cap_s)
{
    if (!(j->overhead_us > 0.05 * kt)) return 1;
    double want = ceil(KF_BATCH_OV * j->overhead_us / kt);
    double cap_mem = (double)(j->arena_bytes / L->total);
    double cap_wall = 0.05 * shape_cap_s * 1e6 / fmax(call_us, 0.01);
    double kb = fmin(fmin(want, cap_mem), fmin(cap_wall, (double)KF_RP_MAX_BATCH));
    return kb < 2 ? 1 : (int)kb;
}

static void timing(judge *j)
{
    const kf_task *t = j->t;
    const kf_judge_cfg *cfg = j->cfg;
    runner *B = &j->r[R_BASE], *C = &j->r[R_CAND];
    double p_check = cfg->quick ? 0.25 : 0.1;
    double target_s = cfg->quick ? 0.05 : 0.25;         /* baseline seconds per shape */
    /* at least 10 batches per side and shape: the stopping rule (both
     * medians' relative standard error <= target_rse, tested every 5th pair)
     * ends the loop there when the samples are quiet; noisy ones run on to
     * the shape's cap. 20 until 2026-12-03: on the H200 every small task's
     * loop ran 21 pairs of batches whose medians were known to 0.3-0.9% */
    int min_reps = 10, max_reps = cfg->quick ? 60 : 2000;
    reap_last(j); /* no context torn down beside the clock */
    double shape_cap_s = cfg->quick ? 1.0 : 5.0;        /* judge wall seconds per shape */
    double target_rse = cfg->quick ? 0.02 : 0.01;       /* relative standard error of each median */

    /* fixed overhead of one doorbell round trip, on the baseline's runner */
    double ov[41];
    for (int i = 0; i < 41; i++) ov[i] = noop_rtt(j, B);
    kf_cuda_stats os;
    kf_cuda_stats_of(ov, 41, &os);
    j->overhead_us = os.median;

    json_t *tj = json_object();
    json_t *shapes = json_array(), *flags = json_array();
    json_object_set_new(tj, "overhead_us", json_real(os.median));
    json_object_set_new(tj, "check_probability", json_real(p_check));
    json_object_set_new(tj, "shapes", shapes);
    json_object_set_new(tj, "flags", flags);
    json_object_set_new(j->metrics, "timing", tj);
    int noisy = 0, truncated = 0, at_floor = 0;
    double wsum = 0, lsp = 0, lc = 0, lb = 0;

    for (int b = 0; b < t->n_benchmark && !truncated; b++) {
        const int64_t *sizes = t->benchmark[b].sizes;
        char sh[160], err[256];
        shape_str(t, sizes, sh, sizeof(sh));
        layout L;
        if (make_layout(j, sizes, &L, err, sizeof(err))) finish(j, KF_INFRA_ERROR, "task", "%s (shape %s)", err, sh);
        kf_rp_reply rep;
        char where[240];
        snprintf(where, sizeof(where), "(warm-up, benchmark shape %s)", sh);
        progress(j, "warm-up (benchmark shape %s)", sh);
        double wb[NSETS], wc[NSETS];
        double warm_t0 = kf_util_now_s();
        int nb = NSETS;          /* baseline warm-up calls */
        double pair_s = 0;
        for (int k = 0; k < NSETS; k++) {
            if (k < nb) {
                prep_inputs(j, B, &L, b, -1 - k, 1);
                reset_runner(j, B, where);
                j->be->flush(j->dev, &B->arena, L.total);
                wb[k] = call(j, B, &L, 1, 0, where, &rep);
            }
            prep_inputs(j, C, &L, b, -1 - k, 1);
            j->be->flush(j->dev, &C->arena, L.total);
            idle_check(j, where);
            wc[k] = call(j, C, &L, 1, 0, where, &rep);
            if (k == 0) {
                pair_s = kf_util_now_s() - warm_t0;
                /* a slow baseline (>= 20 ms) is warm after one call: more
                 * would only spend time; the candidate still gets all its
                 * warm-up calls (thread pools, first-touch pages) */
                if (wb[0] >= 20000) nb = 1;
            }
        }
        /* the last warm-up call is checked like a timed call, which also
         * measures what a check costs the judge at this shape (outputs
         * compared where they lie: on the device for cuda) */
        double check_t0 = kf_util_now_s();
        check_call(j, &L, b, -NSETS, 1, where);
        double check_s = kf_util_now_s() - check_t0;
        kf_cuda_stats ws, wcs;
        kf_cuda_stats_of(wb, nb, &ws);
        kf_cuda_stats_of(wc, NSETS, &wcs);

        /* Batches: where the doorbell (overhead_us, ~300 µs with a CV of
         * 20-60% on cuda: two GPU context switches) is more than 5% of a
         * side's call, one doorbell rings kb calls, each on its own input
         * set (set k at k x L.total in every arena), so the doorbell is at
         * most 1/KF_BATCH_OV of the batch (JUDGE.md: "batch k calls per
         * doorbell, with the judge's flush between batches"). Sets are
         * distinct memory: no call reads what an earlier call of its batch
         * left in a cache. Each side has its own kb (kbb, kbc), from its own
         * calls: a candidate 10x slower than the baseline needs a tenth of
         * the calls for the doorbell to be the same share of its batch (a
         * gemm variant at 2.1 ms per call ran batches of 24 sized for the
         * baseline's 0.2 ms: 1.2 s of a 5 s evaluation on the H200). Both
         * are fixed here: first from the warm-up's single calls, then
         * re-estimated from a warm-up batch (a single call of a few µs
         * under a doorbell of tens is mostly the doorbell's noise: kb ranged
         * 3..1327 on one task); at most four warm-up batches. A call's
         * time is its batch's over its calls, less the doorbell's share
         * (overhead_us / kb of its side). What batching changes for a call
         * -- its launch overlapping the previous call's kernel, one L2
         * flush per batch -- is at most a few µs per batch, and a batch
         * lasts at least KF_BATCH_OV doorbells (~6 ms). */
        double pair1_s = pair_s, check1_s = check_s, per_batch_us = ws.median;
        int kbb = batch_size(j, &L, fmax(ws.median - j->overhead_us, 1.0), ws.median, shape_cap_s);
        int kbc = batch_size(j, &L, fmax(wcs.median - j->overhead_us, 1.0), wcs.median, shape_cap_s);
        int kbb_meas = 1;                  /* the batch per_batch_us was measured with */
        int touched_b = 0, touched_c = 0;  /* the largest batches whose sets were touched (first-touch faults) */
        int checked_kbc = 0;               /* the batch size check_s was last measured at */
        for (int wb_i = 0; (kbb > 1 || kbc > 1) && wb_i < 4; wb_i++) {
            /* one warm-up batch per side, the candidate's checked: the cost
             * of a batch pair and of its check; the first at a new size
             * touches new memory and is not a measurement of the call */
            snprintf(where, sizeof(where), "(warm-up batches of %d and %d calls, benchmark shape %s)", kbb, kbc, sh);
            double t0 = kf_util_now_s();
            prep_inputs(j, B, &L, b, -1 - NSETS - wb_i, kbb);
            reset_runner(j, B, where);
            j->be->flush(j->dev, &B->arena, L.total * (uint64_t)kbb);
            per_batch_us = call(j, B, &L, kbb, 0, where, &rep);
            kbb_meas = kbb;
            prep_inputs(j, C, &L, b, -1 - NSETS - wb_i, kbc);
            j->be->flush(j->dev, &C->arena, L.total * (uint64_t)kbc);
            idle_check(j, where);
            double cand_batch_us = call(j, C, &L, kbc, 0, where, &rep);
            pair_s = kf_util_now_s() - t0;
            /* the first warm-up batch is checked (what a check of a batch
             * costs the judge, for the plan below); a re-estimate's batch of
             * similar size is not (a check is ~40% of a warm-up pair) */
            if (wb_i == 0 || kbc > 2 * checked_kbc) {
                check_t0 = kf_util_now_s();
                check_call(j, &L, b, -1 - NSETS - wb_i, kbc, where);
                check_s = kf_util_now_s() - check_t0;
                checked_kbc = kbc;
            }
            if (kbb > touched_b || kbc > touched_c) {
                touched_b = kbb > touched_b ? kbb : touched_b;
                touched_c = kbc > touched_c ? kbc : touched_c;
                continue;
            }
            int kbb2 = batch_size(j, &L, fmax((per_batch_us - j->overhead_us) / kbb, 0.01), per_batch_us / kbb,
                                  shape_cap_s);
            int kbc2 = batch_size(j, &L, fmax((cand_batch_us - j->overhead_us) / kbc, 0.01), cand_batch_us / kbc,
                                  shape_cap_s);
            if (kbb2 <= kbb + kbb / 2 && kbb2 >= kbb / 2 && kbc2 <= kbc + kbc / 2 && kbc2 >= kbc / 2)
                break; /* stable */
            kbb = kbb2;
            kbc = kbc2;
            if (kbb == 1 && kbc == 1) { /* not worth batching after all: plan from the single calls */
                pair_s = pair1_s;
                check_s = check1_s;
            }
        }
        /* the baseline's batch time at its final kb (planning only) */
        if (kbb == 1)
            per_batch_us = ws.median;
        else if (kbb != kbb_meas)
            per_batch_us = j->overhead_us + (per_batch_us - j->overhead_us) / kbb_meas * kbb;
        /* The number of batches is fixed here, before the timed loop: enough
         * baseline time (target_s), within a wall cap per shape that counts
         * everything a pair of batches costs the judge (inputs, flush, fence,
         * and p_check of a check), measured on the warm-up, and within what
         * is left of the budget. */
        double per = per_batch_us > 1 ? per_batch_us * 1e-6 : 1e-6;
        int reps = (int)(target_s / per);
        double left_s = j->deadline - kf_util_now_s();
        int shapes_left = t->n_benchmark - b;
        double wall_cap = fmin(shape_cap_s, 0.6 * left_s / shapes_left);
        /* a slow baseline needs fewer calls: its per-call noise is small
         * against its time (at least 5, at most the usual minimum) */
        int floor_reps = (int)ceil(target_s / per);
        if (floor_reps < 5) floor_reps = 5;
        if (floor_reps > min_reps) floor_reps = min_reps;
        /* The loop may end after floor_reps batches (precision or budget),
         * and a candidate that skips the work on floor(n/2) batches that are
         * not the last moves the median to its skipped batches: each of them
         * must be checked often enough that all of them escape with
         * probability at most KF_SKIP_ESCAPE (0.1 per batch let 3 skipped of
         * 5 through 73% of the time, 10 of 20 35%). A checked batch
         * checks KF_CHECK_SETS of its calls (check_call()). */
        int skip_k = floor_reps / 2;
        double p_shape = fmax(p_check, skip_k > 0 ? 1.0 - pow(KF_SKIP_ESCAPE, 1.0 / skip_k) : 1.0);
        if (p_shape > 1.0) p_shape = 1.0;
        double per_pair_s = pair_s * (1 + p_shape) + p_shape * check_s;
        if (per_pair_s > 0 && reps > (int)((wall_cap - check_s) / per_pair_s))
            reps = (int)((wall_cap - check_s) / per_pair_s);
        if (reps < floor_reps) reps = floor_reps;
        if (reps > max_reps) reps = max_reps;

        int parallel_batches = 0;
        double *sb = j->tsb = calloc((size_t)reps, sizeof(double)), *sc = j->tsc = calloc((size_t)reps, sizeof(double));
        if (!sb || !sc) io_fail(j, "allocation");
        int n = 0, checked = 0, stop_next = 0;
        /* The baseline's timed batches after the shape's first run on that
         * batch's inputs: the baseline is the task's own code and no other
         * process can reach its arena, so fresh inputs buy nothing against
         * cheating there (the candidate's are fresh every batch), and they
         * cost a generation of every set per batch (~1.5 ms of the H200's
         * bandwidth for a batch of 11 x 512 MB). The flush before each batch
         * leaves the caches as after a generation. Before the first reuse,
         * the first and last set are compared with the secret's values: a
         * baseline that writes its inputs is regenerated every batch. */
        int base_rep = INT_MIN, base_keep = 1;
        double floor_us = 0, gbs_peak = 0, gf_peak = 0, fl = 0, by = 0;
        char e2[128];
        /* the floor's FLOP ceiling is the device's fastest format, never the
         * output dtype's pipe (a bf16 gemm writing f32 runs on bf16 tensor
         * cores at ~15x the f32 pipe: honest variants were rejected) */
        j->be->peaks(j->dev, KF_JUDGE_PEAK_ANY, &gbs_peak, &gf_peak);
        if (t->bytes[0] && kf_task_eval_expr(t, t->bytes, sizes, &by, e2, sizeof(e2)) == 0 && gbs_peak > 0)
            floor_us = fmax(floor_us, by / (gbs_peak * 1e9) * 1e6);
        if (t->flops[0] && kf_task_eval_expr(t, t->flops, sizes, &fl, e2, sizeof(e2)) == 0 && gf_peak > 0)
            floor_us = fmax(floor_us, fl / (gf_peak * 1e9) * 1e6);

        if (kbb > 1 || kbc > 1)
            progress(j, "time (benchmark shape %s, %d batches per side of %d (baseline) and %d (candidate) calls)", sh,
                     reps, kbb, kbc);
        else
            progress(j, "time (benchmark shape %s, %d calls per side)", sh, reps);
        double shape_t0 = kf_util_now_s();
        for (int rep_i = 0; rep_i < reps; rep_i++) {
            if (kbc > 1)
                snprintf(where, sizeof(where), "(timed batch %d of %d, %d calls each, benchmark shape %s)", rep_i + 1,
                         reps, kbc, sh);
            else
                snprintf(where, sizeof(where), "(timed call %d of %d, benchmark shape %s)", rep_i + 1, reps, sh);
            /* the last call is always checked; stop early (checked) when the budget runs short */
            double elapsed = kf_util_now_s() - shape_t0;
            double left = j->deadline - kf_util_now_s();
            int last = rep_i == reps - 1;
            if (!last && rep_i > 0 && left < 8.0 * elapsed / rep_i + 0.05 * j->cfg->budget_s + 1.0) {
                last = 1;
                truncated = 1;
            }
            /* stopping rule: at every 5th pair from floor_reps on, when the
             * medians of both sides are known to within target_rse, the
             * next call is the last (and so checked) */
            if (!last && stop_next) last = 1;
            int check = last || kf_inputs_rng_uniform(&j->chkrng) < p_shape;
            int cand_first = rep_i & 1;
            double tb = 0, tc = 0;
            for (int side = 0; side < 2; side++) {
                int is_c = side == 0 ? cand_first : !cand_first;
                double q0 = kf_util_now_s(), q1;
                if (is_c) {
                    prep_inputs(j, C, &L, b, rep_i, kbc);
                    double qa = kf_util_now_s();
                    j->be->flush(j->dev, &C->arena, L.total * (uint64_t)kbc);
                    double qc = kf_util_now_s();
                    idle_check(j, where);
                    q1 = kf_util_now_s();
                    j->prep_gen_s += qa - q0;
                    j->prep_flush_s += qc - qa;
                    j->prep_idle_s += q1 - qc;
                    tc = call(j, C, &L, kbc, 0, where, &rep);
                    if (batch_parallel(j, kbc, tc)) { /* charged its CPU time, all threads */
                        tc = j->cand_call_cpu_s * 1e6;
                        parallel_batches++;
                    }
                } else {
                    if (base_rep != INT_MIN && base_keep && base_rep == rep_i - 1)
                        base_keep = base_inputs_intact(j, &L, b, base_rep, kbb);
                    if (base_rep != INT_MIN && base_keep) {
                        j->base_inputs_kept++;
                    } else {
                        prep_inputs(j, B, &L, b, rep_i, kbb);
                        base_rep = rep_i;
                    }
                    double qa = kf_util_now_s();
                    reset_runner(j, B, where);
                    double qb = kf_util_now_s();
                    j->be->flush(j->dev, &B->arena, L.total * (uint64_t)kbb);
                    double qc = kf_util_now_s();
                    idle_check(j, where);
                    q1 = kf_util_now_s();
                    j->prep_gen_s += qa - q0;
                    j->prep_reset_s += qb - qa;
                    j->prep_flush_s += qc - qb;
                    j->prep_idle_s += q1 - qc;
                    tb = call(j, B, &L, kbb, 0, where, &rep);
                    idle_check(j, where);
                }
                double q2 = kf_util_now_s();
                j->prep_s += q1 - q0;
                j->call_s += q2 - q1;
                if (is_c && check) {
                    checked += check_call(j, &L, b, rep_i, kbc, where);
                    j->check_s += kf_util_now_s() - q2;
                }
            }
            /* per call: the batch's time over its calls */
            sb[n] = tb / kbb;
            sc[n] = tc / kbc;
            n++;
            if (last) break;
            if (n >= floor_reps && n % 5 == 0) {
                double mb, mc, rb = rse_median(sb, n, &mb), rc = rse_median(sc, n, &mc);
                if (rb <= target_rse && rc <= target_rse) {
                    stop_next = 1;
                } else if (rc <= target_rse) {
                    /* a candidate slower than the baseline: its speedup s
                     * is known once its standard error, s*sqrt(rb^2+rc^2),
                     * is what the rule above allows at s = 1 (target_rse
                     * x sqrt 2), so a noisy short baseline (a 22 us gemm)
                     * does not hold a 6x slower candidate to the cap.
                     * Looking slow only ends the loop on a slow verdict:
                     * s from the medians as the verdict takes them, less
                     * each side's share of the doorbell overhead (below),
                     * since the two sides' batches may differ (red team
                     * g3_slow_stop_raw_ratio). */
                    double cb = mb - fmin(j->overhead_us / kbb, 0.5 * mb), cc = mc - fmin(j->overhead_us / kbc, 0.5 * mc);
                    double s = cc > 0 ? cb / cc : 0;
                    if (s < 1.0 && s * sqrt(rb * rb + rc * rc) <= target_rse * M_SQRT2) stop_next = 2;
                }
            }
        }
        double shape_t1 = kf_util_now_s();
        /* Cut short before the minimum number of calls: too few to time.
         * The candidate's own calls ate the budget (>= 40%: its verdict,
         * as in fail_wait), or the judge was too slow (the worker's). */
        if (truncated && n < floor_reps) {
            if (j->cand_used_s > 0.4 * cfg->budget_s)
                finish(j, KF_TIMEOUT, "candidate", "the candidate's load and calls used %.1f s of the %.1f s budget; %d "
                       "timed calls of at least %d fitted (benchmark shape %s)", j->cand_used_s, cfg->budget_s, n,
                       floor_reps, sh);
            finish(j, KF_INFRA_ERROR, "worker", "out of time after %d of at least %d timed calls (benchmark shape "
                   "%s; the candidate used %.1f s of the %.1f s budget)", n, floor_reps, sh, j->cand_used_s,
                   cfg->budget_s);
        }
        double raw_c_min = 1e300;
        for (int i = 0; i < n; i++) raw_c_min = fmin(raw_c_min, sc[i]);
        /* subtract the fixed doorbell overhead from each side (its share of
         * that side's batch), but never more than half of its median (a
         * probe taken on a loaded host must not turn a time into nothing) */
        kf_cuda_stats rb, rc;
        kf_cuda_stats_of(sb, n, &rb);
        kf_cuda_stats_of(sc, n, &rc);
        double ovb = fmin(j->overhead_us / kbb, 0.5 * rb.median), ovc = fmin(j->overhead_us / kbc, 0.5 * rc.median);
        for (int i = 0; i < n; i++) {
            sb[i] -= ovb;
            sc[i] -= ovc;
        }
        kf_cuda_stats bs, cs;
        kf_cuda_stats_of(sb, n, &bs);
        kf_cuda_stats_of(sc, n, &cs);
        double rse_b = rse_median(sb, n, NULL), rse_c = rse_median(sc, n, NULL);
        free(sb);
        free(sc);
        j->tsb = j->tsc = NULL;
        if (floor_us > 0 && raw_c_min < floor_us * 0.5)
            finish(j, KF_REJECTED_CHEAT, "candidate", "timed at %.3f µs on benchmark shape %s, below the physical "
                   "floor of %.3f µs (task bytes and FLOPs at the device's peak): the measurement was forged",
                   raw_c_min, sh, floor_us);
        int shape_floor = 0;
        if (cs.median < floor_us) {
            cs.median = floor_us;
            shape_floor = at_floor = 1;
        }
        if (cs.median <= 0) cs.median = 0.01;
        if (bs.median <= 0) bs.median = 0.01;
        double sp = bs.median / cs.median;
        json_t *so = json_object();
        json_object_set_new(so, "sizes", shape_json(t, sizes));
        json_object_set_new(so, "weight", json_real(t->benchmark[b].weight));
        json_object_set_new(so, "calls", json_integer((json_int_t)n * kbc));
        json_object_set_new(so, "batch", json_integer(kbc));
        json_object_set_new(so, "baseline_calls", json_integer((json_int_t)n * kbb));
        json_object_set_new(so, "baseline_batch", json_integer(kbb));
        if (parallel_batches)
            json_object_set_new(so, "parallel_batches", json_integer(parallel_batches));
        json_object_set_new(so, "batches", json_integer(n));
        json_object_set_new(so, "checked_calls", json_integer(checked));
        json_object_set_new(so, "check_probability", json_real(p_shape));
        json_object_set_new(so, "planned_calls", json_integer((json_int_t)reps * kbc));
        json_object_set_new(so, "stopped_by", json_string(stop_next == 2 ? "speedup_precision" : stop_next ? "precision" : n < reps ? "budget" : "cap"));
        json_object_set_new(so, "overhead_us", json_real(ovc));
        json_object_set_new(so, "baseline_overhead_us", json_real(ovb));
        json_t *bj = stats_json(&bs, ovb), *cj = stats_json(&cs, ovc);
        if (isfinite(rse_b)) json_object_set_new(bj, "rse_median", json_real(rse_b));
        if (isfinite(rse_c)) json_object_set_new(cj, "rse_median", json_real(rse_c));
        json_object_set_new(so, "baseline", bj);
        json_object_set_new(so, "candidate", cj);
        json_object_set_new(so, "speedup", json_real(sp));
        json_object_set_new(so, "floor_us", json_real(floor_us));
        /* the shape's judge wall time: warm-up and batch planning, the timed loop */
        json_object_set_new(so, "warmup_s", json_real(shape_t0 - warm_t0));
        json_object_set_new(so, "loop_s", json_real(shape_t1 - shape_t0));
        if (shape_floor) json_object_set_new(so, "at_floor", json_true());
        if (fl > 0) {
            json_object_set_new(so, "flops", json_real(fl));
            json_object_set_new(so, "gflops", json_real(fl / cs.median * 1e-3));
            json_object_set_new(so, "baseline_gflops", json_real(fl / bs.median * 1e-3));
        }
        if (by > 0) {
            json_object_set_new(so, "bytes", json_real(by));
            json_object_set_new(so, "gbs", json_real(by / cs.median * 1e-3));
            json_object_set_new(so, "baseline_gbs", json_real(by / bs.median * 1e-3));
        }
        int shape_noisy = bs.cv > 0.10 || cs.cv > 0.10;
        json_object_set_new(so, "noisy", json_boolean(shape_noisy));
        noisy |= shape_noisy;
        json_array_append_new(shapes, so);
        double w = t->benchmark[b].weight;
        wsum += w;
        lsp += w * log(sp);
        lc += w * log(cs.median);
        lb += w * log(bs.median);
    }
    /* where the timed loops' wall time went (warm-up excluded) */
    json_object_set_new(tj, "loop_prep_s", json_real(j->prep_s));
    json_object_set_new(tj, "loop_calls_s", json_real(j->call_s));
    json_object_set_new(tj, "loop_checks_s", json_real(j->check_s));
    json_object_set_new(tj, "baseline_resets_skipped", json_integer(j->resets_skipped));
    json_object_set_new(tj, "baseline_inputs_kept", json_integer(j->base_inputs_kept));
    if (j->base_inputs_inplace)
        json_object_set_new(tj, "baseline_writes_inputs", json_integer(j->base_inputs_inplace));
    json_object_set_new(tj, "loop_prep_steps_s",
                        json_pack("{s:f,s:f,s:f,s:f}", "gen", j->prep_gen_s, "reset", j->prep_reset_s, "flush",
                                  j->prep_flush_s, "idle_check", j->prep_idle_s));
    if (noisy) json_array_append_new(flags, json_string("noisy"));
    if (truncated) json_array_append_new(flags, json_string("timing_truncated"));
    if (at_floor) json_array_append_new(flags, json_string("at_roofline_floor"));
    if (wsum > 0) {
        json_object_set_new(tj, "speedup", json_real(exp(lsp / wsum)));
        json_object_set_new(tj, "candidate_us", json_real(exp(lc / wsum)));
        json_object_set_new(tj, "baseline_us", json_real(exp(lb / wsum)));
    }
}

/* ---------------- entry ---------------- */

static json_t *facts_json(const runner *r)
{
    json_t *o = json_object();
    json_object_set_new(o, "landlock_abi", json_integer(r->facts.landlock_abi));
    json_object_set_new(o, "landlock_fs", json_boolean(r->facts.landlock_fs));
    json_object_set_new(o, "landlock_scoped", json_boolean(r->facts.landlock_scoped));
    json_object_set_new(o, "seccomp", json_boolean(r->facts.seccomp));
    json_object_set_new(o, "no_new_privs", json_boolean(r->facts.no_new_privs));
    json_object_set_new(o, "uid", json_integer(r->facts.uid));
    json_object_set_new(o, "uid_dropped", json_boolean(r->facts.uid_dropped));
    json_object_set_new(o, "rlimits", json_boolean(r->facts.rlimits));
    json_object_set_new(o, "process_creation", json_string(r->facts.seccomp ? "denied" : "allowed"));
    json_object_set_new(o, "sockets", json_string(r->facts.seccomp ? "denied" : "allowed"));
    json_object_set_new(o, "writable_paths", json_string(r->facts.landlock_fs ? "none (device nodes only)" : "unconfined"));
    return o;
}

/* Wait for a spawned runner's READY answer (device and arena set up, no
 * code of its shared object run yet); ends the judge when it does not come. */
static void ready_wait(judge *j, int role)
{
    runner *r = &j->r[role];
    kf_rp_reply rep;
    /* READY comes before any of the shared object's code ran: only it
     * may report a setup failure that is not the shared object's */
    int w = runner_wait(j, r, 0, KF_RP_READY, &rep);
    if (w != WT_OK)
        finish(j, KF_INFRA_ERROR, "worker", "the %s runner did not start (%s)", role_name[role],
               w == WT_TIMEOUT ? "timeout" : w == WT_DIED ? "died" : "bad answer");
    if (rep.status != KF_RP_ST_OK)
        finish(j, KF_INFRA_ERROR, "worker", "%s runner setup: %s", role_name[role], rep.msg);
}

/* Tell a ready runner to load its shared object. */
static void load_send(judge *j, int role)
{
    kf_rp_cmd c;
    memset(&c, 0, sizeof(c));
    c.op = KF_RP_LOAD;
    if (runner_send(j, &j->r[role], &c) != 0) /* none of its shared object's code ran yet */
        finish(j, KF_INFRA_ERROR, "worker", "the %s runner died before loading", role_name[role]);
}

/* Wait for the LOADED answer (its constructors ran); ends the judge with the
 * right verdict when it does not come. */
static void loaded_wait(judge *j, int role)
{
    runner *r = &j->r[role];
    kf_rp_reply rep;
    char where[64];
    snprintf(where, sizeof(where), "while loading the %s", role_name[role]);
    int w = runner_wait(j, r, 0, KF_RP_LOADED, &rep);
    if (w == WT_OK && rep.status != KF_RP_ST_OK) {
        if (role == R_CAND) finish(j, KF_LOAD_ERROR, "candidate", "candidate: %s", rep.msg);
        finish(j, KF_INFRA_ERROR, "task", "%s: %s", role_name[role], rep.msg);
    }
    if (w != WT_OK) {
        if (role != R_CAND) fail_wait(j, r, w, where);
        char d[256];
        int sig;
        if (w == WT_TIMEOUT) finish(j, KF_TIMEOUT, "candidate", "loading the candidate exceeded the %.0f s limit "
                                   "(a shared-object constructor hangs)", j->cfg->budget_s);
        if (w == WT_PROTO) finish(j, KF_REJECTED_CHEAT, "candidate", "the candidate wrote on the runner's reply "
                                 "channel while being loaded (forged answer)");
        death_text(r, d, sizeof(d), &sig);
        finish(j, KF_LOAD_ERROR, "candidate", "the candidate %s while being loaded (shared-object constructor)", d);
    }
    kf_confine_facts seen;
    if (kf_confine_observe(r->pid, &seen) == 0) {
        /* the kernel's view wins over the pre-exec child's */
        r->facts.seccomp = r->facts.seccomp && seen.seccomp;
        r->facts.no_new_privs = seen.no_new_privs;
        r->facts.uid = seen.uid;
    }
}

static void judge_init(judge *j, const kf_judge_cfg *cfg, int report_fd)
{
    memset(j, 0, sizeof(*j));
    for (int i = 0; i < 3; i++) runner_clear(&j->r[i]);
    j->cfg = cfg;
    j->t = cfg->task;
    j->be = cfg->backend;
    j->fd = report_fd;
    j->t_start = kf_util_now_s();
    j->deadline = j->t_start + (cfg->budget_s > 0 ? cfg->budget_s : 60);
    j->metrics = json_object();
    j->validation = json_array();
    json_object_set_new(j->metrics, "validation", j->validation);
    json_object_set_new(j->metrics, "backend", json_string(j->be->name));
    kf_inputs_rng_seed(&j->seqrng, kf_inputs_derive_seed(cfg->secret, 7001, (uint64_t)getpid(), 0) ^
                                       (uint64_t)(kf_util_now_s() * 1e9));
    kf_inputs_rng_seed(&j->chkrng, kf_inputs_derive_seed(cfg->secret, 7002, 0, 0));
    prctl(PR_SET_DUMPABLE, 0);
    signal(SIGPIPE, SIG_IGN);
}

/* The identity of the task's runners: sha256 over both shared objects, the
 * runner binary and the arena size. 0, or -1 when a file is unreadable. */
static int task_key(judge *j, char out[65], char runner_hash[65])
{
    char hex[4][65];
    const char *paths[3] = {j->cfg->so[R_REF], j->cfg->so[R_BASE], j->cfg->runner_path};
    for (int i = 0; i < 3; i++) {
        size_t len = 0;
        char *b = kf_util_read_file(paths[i], &len, (size_t)1 << 30);
        if (!b) return -1;
        kf_util_sha256_hex(b, len, hex[i]);
        free(b);
    }
    char all[4 * 65 + 64];
    snprintf(all, sizeof(all), "%s %s %s %llu %s", hex[0], hex[1], hex[2], (unsigned long long)j->arena_bytes,
             j->be->name);
    kf_util_sha256_hex(all, strlen(all), out);
    memcpy(runner_hash, hex[2], 65);
    return 0;
}

/* Whether a kept runner may serve another evaluation: alive, owing nothing,
 * and far from its RLIMIT_CPU (its CPU time accumulates over evaluations). */
static int warm_ok(runner *r)
{
    if (!runner_reusable(r)) return 0;
    int64_t ns = cpu_ns(r);
    return ns >= 0 && (double)ns * 1e-9 < 0.5 * r->cpu_limit_s;
}

static void keeper_drop_warm(keeper *k)
{
    for (int i = 0; i < 2; i++) keeper_drop_runner(k, &k->warm[i]);
    k->key[0] = 0;
}

/* One evaluation, from the device to the report; ends in finish(). */
__attribute__((noreturn)) static void judge_body(judge *j)
{
    const kf_judge_cfg *cfg = j->cfg;
    keeper *k = j->keep;
    char err[512];
    progress(j, "open device");
    if (k && k->dev) {
        j->dev = k->dev; /* a serving judge's context, still open */
    } else {
        if (j->be->open(&j->dev, cfg->gpu, cfg->llc_bytes, err, sizeof(err)) != 0)
            finish(j, KF_INFRA_ERROR, "worker", "judge: %s", err);
        if (k) {
            k->dev = j->dev;
            k->be = j->be;
            k->gpu = cfg->gpu;
        }
    }
    json_t *dj = j->be->describe(j->dev);
    if (dj) json_object_set_new(j->metrics, "device", dj);

    /* one arena size for every runner: the largest shape */
    j->arena_bytes = 4096;
    for (int pass = 0; pass < 2; pass++) {
        int n = pass ? j->t->n_benchmark : j->t->n_validation;
        const kf_shape *sh = pass ? j->t->benchmark : j->t->validation;
        for (int s = 0; s < n; s++) {
            layout L;
            if (make_layout(j, sh[s].sizes, &L, err, sizeof(err))) finish(j, KF_INFRA_ERROR, "task", "%s", err);
            if (L.total > j->arena_bytes) j->arena_bytes = L.total;
        }
    }
    /* room for batches of short calls (timing(): several input sets per arena) */
    if (!cfg->validate_only && j->be->batch_bytes) {
        uint64_t bb = j->be->batch_bytes(j->dev);
        if (bb > j->arena_bytes) j->arena_bytes = bb;
    }

    /* the master copy of timed inputs: allocated before any runner starts
     * (a candidate that grabs the device's memory cannot starve it) */
    if (k && k->master.bytes && k->master_asked == j->arena_bytes) {
        j->master = k->master;
    } else {
        reap_last(j); /* what it held is free first */
        if (k && k->master.bytes) {
            j->be->arena_free(j->dev, &k->master);
            memset(&k->master, 0, sizeof(k->master));
        }
        if (j->be->arena_new(j->dev, j->arena_bytes, 0, &j->master, err, sizeof(err)) != 0)
            finish(j, KF_INFRA_ERROR, "worker", "judge: %s", err);
        if (k) {
            k->master = j->master;
            k->master_asked = j->arena_bytes;
        }
    }

    /* a serving judge reuses the task's runners of the last evaluation when
     * they run the same code with the same arena */
    int warm = 0;
    char key[65] = "", rhash[65] = "";
    if (k) {
        if (task_key(j, key, rhash) != 0)
            finish(j, KF_INFRA_ERROR, "worker", "judge: cannot read the shared objects: %s", strerror(errno));
        warm = k->key[0] && !strcmp(k->key, key) && warm_ok(&k->warm[0]) && warm_ok(&k->warm[1]);
        if (warm) {
            j->r[R_REF] = k->warm[0];
            j->r[R_BASE] = k->warm[1];
            for (int i = 0; i < 2; i++) { /* now this evaluation's */
                memset(&k->warm[i], 0, sizeof(k->warm[i]));
                j->r[i].out_len = 0;
                j->r[i].out_dropped = 0;
            }
        } else {
            keeper_drop_warm(k);
        }
    }

    /* All three runners start together (process, confinement, device
     * context, arena: the judge's code, not the shared objects'). The
     * reference and the baseline (the task's own code) are then loaded, and
     * the candidate only once both are, so nothing it does while loading (a
     * device-memory grab, I14) can starve the task's runners. */
    json_t *sj = json_object();
    json_object_set_new(sj, "open_s", json_real(kf_util_now_s() - j->t_start));
    json_object_set_new(sj, "warm_task_runners", json_boolean(warm));
    if (k) json_object_set_new(sj, "judge_evaluation", json_integer(k->evals + 1));
    double ts = kf_util_now_s();
    static const int order[3] = {R_REF, R_BASE, R_CAND};
    int cand_ready = warm && take_next(j, rhash); /* started after the last report */
    if (k) keep_runner_copy(j, rhash); /* for the next one's pre-start */
    if (k && !cand_ready) drop_next(k);
    json_object_set_new(sj, "candidate_prestarted", json_boolean(cand_ready));
    if (k && warm && !cand_ready) json_object_set_new(sj, "candidate_not_prestarted", json_string(k->next_why));
    if (!warm || !cand_ready) reap_last(j); /* a new runner: the device's memory free first */
    for (int q = warm ? 2 : 0; q < (cand_ready ? 2 : 3); q++) {
        progress(j, "start %s", role_name[order[q]]);
        if (runner_spawn(j, order[q], err, sizeof(err)) != 0) finish(j, KF_INFRA_ERROR, "worker", "judge: %s", err);
    }
    for (int q = warm ? 2 : 0; q < 3; q++) ready_wait(j, order[q]);
    json_object_set_new(sj, "runners_ready_s", json_real(kf_util_now_s() - ts));
    ts = kf_util_now_s();
    if (!warm) {
        for (int q = 0; q < 2; q++) load_send(j, order[q]);
        for (int q = 0; q < 2; q++) loaded_wait(j, order[q]);
        if (k) snprintf(k->key, sizeof(k->key), "%s", key);
    }
    json_object_set_new(sj, "task_loaded_s", json_real(kf_util_now_s() - ts));
    ts = kf_util_now_s();
    load_send(j, R_CAND);
    loaded_wait(j, R_CAND);
    /* the candidate's constructors ran on its own clock: a load that eats
     * the budget is the candidate's time, like its calls (a 14 s sleep in a
     * constructor was the worker's infra_error, and a worker quarantined) */
    double cload = kf_util_now_s() - ts;
    j->cand_used_s += cload;
    json_object_set_new(sj, "candidate_loaded_s", json_real(cload));
    if (k && k->next.pid <= 0) {
        double tp = kf_util_now_s();
        prespawn(j); /* the next evaluation's candidate runner */
        json_object_set_new(sj, "next_prestart_s", json_real(kf_util_now_s() - tp));
    }
    json_object_set_new(j->metrics, "setup", sj);
    runner *C = &j->r[R_CAND];
    if (j->be->freeze_runners) {
        /* the two timed runners alike, so the wake-up costs both sides the same */
        j->r[R_BASE].freeze = C->freeze = 1;
        freeze_runner(&j->r[R_BASE]);
        freeze_runner(C);
    }
    j->cand_mark = cpu_ns(C);
    j->cand_mark_wall = kf_util_now_s();
    json_t *conf = facts_json(C);
    json_object_set_new(j->metrics, "confinement", conf);
    json_t *missing = json_array();
    if (!C->facts.seccomp) json_array_append_new(missing, json_string("seccomp"));
    if (!C->facts.landlock_fs) json_array_append_new(missing, json_string("landlock"));
    if (!C->facts.no_new_privs) json_array_append_new(missing, json_string("no_new_privs"));
    json_object_set_new(conf, "missing", missing);
    if (json_array_size(missing) && !cfg->allow_unconfined)
        finish(j, KF_INFRA_ERROR, "worker", "this worker cannot confine candidates (missing: %s%s%s); refusing to "
               "run hostile code (KFARM_ALLOW_UNCONFINED=1 overrides)", C->facts.seccomp ? "" : "seccomp ",
               C->facts.landlock_fs ? "" : "landlock ", C->facts.no_new_privs ? "" : "no_new_privs");

    double tv = kf_util_now_s();
    json_object_set_new(j->metrics, "setup_s", json_real(tv - j->t_start));
    validate(j);
    json_object_set_new(j->metrics, "validation_s", json_real(kf_util_now_s() - tv));
    if (!cfg->validate_only) {
        double t0 = kf_util_now_s();
        timing(j);
        json_object_set_new(j->metrics, "timing_s", json_real(kf_util_now_s() - t0));
    }
    /* nothing may be left on the candidate's reply channel */
    char extra;
    fcntl(C->rep_r, F_SETFL, O_NONBLOCK);
    if (read(C->rep_r, &extra, 1) == 1)
        finish(j, KF_REJECTED_CHEAT, "candidate", "the candidate wrote extra data on the runner's reply channel");
    progress(j, "report");
    finish(j, KF_OK, "none", "validated on %d shapes x %d trials%s", j->t->n_validation, j->t->trials,
           cfg->validate_only ? " (not timed)" : "");
}

int kf_judge_child(void *arg, int report_fd)
{
    judge *j = malloc(sizeof(judge));
    if (!j) return 1;
    judge_init(j, arg, report_fd);
    judge_body(j);
}

void kf_judge_new_nonce(char nonce[33])
{
    unsigned char b[16];
    if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
        uint64_t x = (uint64_t)(kf_util_now_s() * 1e9) ^ ((uint64_t)getpid() << 32);
        for (int i = 0; i < 16; i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            b[i] = (unsigned char)(x >> 56);
        }
    }
    for (int i = 0; i < 16; i++) snprintf(nonce + 2 * i, 3, "%02x", b[i]);
}

char *kf_judge_parse_report(const char *report, const char *nonce, char *phase, size_t phase_cap)
{
    char *result = NULL;
    if (phase_cap) phase[0] = 0;
    size_t nl_len = strlen(nonce);
    for (const char *line = report; line && *line;) {
        const char *nl = strchr(line, '\n');
        if (!nl) break; /* an incomplete last line is not a record */
        size_t l = (size_t)(nl - line);
        if (l >= 2 && line[0] == 'P' && line[1] == ' ') {
            size_t pl = l - 2 < phase_cap - 1 ? l - 2 : phase_cap - 1;
            memcpy(phase, line + 2, pl);
            phase[pl] = 0;
        } else if (l > 3 + nl_len && line[0] == 'R' && line[1] == ' ' && !strncmp(line + 2, nonce, nl_len) &&
                   line[2 + nl_len] == ' ' && !result) {
            result = strndup(line + 3 + nl_len, l - 3 - nl_len);
        }
        line = nl + 1;
    }
    return result;
}

/* ---------------- the serving judge ---------------- */

#define SERVE_MAX_EVALS 500 /* a serving judge retires after this many (bounds slow leaks) */

/* One served evaluation: finish() comes back here through the keeper. */
static void serve_one(keeper *k, const kf_judge_cfg *cfg, int report_fd)
{
    judge *j = malloc(sizeof(judge));
    if (!j) {
        k->broken = 1;
        close(report_fd);
        return;
    }
    judge_init(j, cfg, report_fd);
    j->keep = k;
    if (setjmp(k->jb) == 0) judge_body(j);
    free(j);
}

/* Parse a request (see kf_judge_srv_eval) into cfg and load its task.
 * 0, or -1 with err. */
static int serve_parse(const char *msg, kf_judge_cfg *cfg, kf_task *task, char *paths[5], char *err, size_t cap)
{
    json_error_t je;
    json_t *o = json_loads(msg, 0, &je);
    if (!o) {
        snprintf(err, cap, "malformed request: %s", je.text);
        return -1;
    }
    const char *be = json_string_value(json_object_get(o, "backend"));
    const char *td = json_string_value(json_object_get(o, "task_dir"));
    const char *sec = json_string_value(json_object_get(o, "secret"));
    const char *nonce = json_string_value(json_object_get(o, "nonce"));
    json_t *so = json_object_get(o, "so");
    const char *rp = json_string_value(json_object_get(o, "runner"));
    int rc = -1;
    if (!be || !td || !sec || !nonce || strlen(nonce) != 32 || !rp || !json_is_array(so) || json_array_size(so) != 3) {
        snprintf(err, cap, "malformed request: a field is missing");
        goto out;
    }
    memset(cfg, 0, sizeof(*cfg));
    cfg->backend = !strcmp(be, "cpu") ? &kf_judge_backend_cpu : !strcmp(be, "cuda") ? kf_judge_backend_cuda() : NULL;
    if (!cfg->backend) {
        snprintf(err, cap, "backend %s is not served here", be);
        goto out;
    }
    for (int i = 0; i < 3; i++) {
        const char *p = json_string_value(json_array_get(so, (size_t)i));
        if (!p || !(paths[i] = strdup(p))) {
            snprintf(err, cap, "malformed request: so[%d]", i);
            goto out;
        }
        cfg->so[i] = paths[i];
    }
    if (!(paths[3] = strdup(rp))) goto out;
    cfg->runner_path = paths[3];
    cfg->secret = strtoull(sec, NULL, 16);
    cfg->gpu = (int)json_integer_value(json_object_get(o, "gpu"));
    cfg->quick = json_is_true(json_object_get(o, "quick"));
    cfg->validate_only = json_is_true(json_object_get(o, "validate_only"));
    cfg->allow_unconfined = json_is_true(json_object_get(o, "allow_unconfined"));
    cfg->budget_s = json_number_value(json_object_get(o, "budget_s"));
    cfg->llc_bytes = (uint64_t)json_integer_value(json_object_get(o, "llc_bytes"));
    snprintf(cfg->nonce, sizeof(cfg->nonce), "%s", nonce);
    if (kf_task_load(td, task, err, cap) != 0) goto out;
    cfg->task = task;
    rc = 0;
out:
    json_decref(o);
    return rc;
}

int kf_judge_serve(void *arg, int ctl_fd)
{
    (void)arg;
    prctl(PR_SET_DUMPABLE, 0);
    signal(SIGPIPE, SIG_IGN);
    fcntl(ctl_fd, F_SETFD, FD_CLOEXEC); /* never a runner's */
    keeper *k = calloc(1, sizeof(keeper));
    char *msg = malloc(KF_SANDBOX_SRV_MSG + 1);
    if (!k || !msg) return 1;
    for (int i = 0; i < 2; i++) runner_clear(&k->warm[i]);
    runner_clear(&k->next);
    for (;;) {
        size_t len;
        int rfd;
        int got = kf_sandbox_srv_next(ctl_fd, msg, KF_SANDBOX_SRV_MSG + 1, &len, &rfd);
        if (got <= 0) break;
        kf_judge_cfg cfg;
        kf_task task;
        memset(&cfg, 0, sizeof(cfg));
        memset(&task, 0, sizeof(task));
        char *paths[5] = {0};
        char err[512];
        if (serve_parse(msg, &cfg, &task, paths, err, sizeof(err)) != 0 ||
            (k->be && (k->be != cfg.backend || k->gpu != cfg.gpu))) {
            /* no nonce to answer with: the worker reads "no verdict" */
            dprintf(rfd, "P judge server: %s\n", k->be && cfg.task ? "another device or backend" : err);
            close(rfd);
            if (cfg.task) kf_task_free(&task);
            for (int i = 0; i < 5; i++) free(paths[i]);
            break;
        }
        serve_one(k, &cfg, rfd);
        kf_task_free(&task);
        for (int i = 0; i < 5; i++) free(paths[i]);
        k->evals++;
        if (k->broken || k->evals >= SERVE_MAX_EVALS) break;
    }
    keeper_drop_warm(k);
    drop_next(k);
    if (k->reap > 0) waitpid(k->reap, NULL, 0);
    if (k->rdir[0]) kf_util_rmtree(k->rdir);
    if (k->master.bytes && k->be) k->be->arena_free(k->dev, &k->master);
    if (k->dev) k->be->close(k->dev);
    free(k);
    free(msg);
    return 0;
}

/* ---- worker side ---- */

struct kf_judge_srv {
    kf_sandbox_srv proc;
    char dir[PATH_MAX];          /* the serving judge's scratch folder */
    const kf_judge_backend *be;  /* what the running one serves */
    int gpu;
    unsigned starts;
};

kf_judge_srv *kf_judge_srv_new(const char *work_dir, char *err, size_t cap)
{
    kf_judge_srv *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    s->proc.ctl = s->proc.out = -1;
    const char *root = work_dir && *work_dir ? work_dir : getenv("TMPDIR");
    if (!root || !*root) root = "/tmp";
    if (snprintf(s->dir, sizeof(s->dir), "%s/kfarm-judge-XXXXXX", root) >= (int)sizeof(s->dir) || !mkdtemp(s->dir)) {
        snprintf(err, cap, "cannot create a judge folder under %s: %s", root, strerror(errno));
        free(s);
        return NULL;
    }
    char abs[PATH_MAX];
    if (realpath(s->dir, abs) && strlen(abs) < sizeof(s->dir)) snprintf(s->dir, sizeof(s->dir), "%s", abs);
    return s;
}

void kf_judge_srv_free(kf_judge_srv *s)
{
    if (!s) return;
    kf_sandbox_srv_stop(&s->proc);
    kf_util_rmtree(s->dir);
    free(s);
}

int kf_judge_srv_eval(kf_judge_srv *s, const kf_judge_cfg *cfg, const char *task_dir, const kf_sandbox_req *sr,
                      kf_sandbox_res *res)
{
    char secret[32];
    snprintf(secret, sizeof(secret), "%llx", (unsigned long long)cfg->secret);
    /* the server's working folder is its own: every path absolute */
    char abs[5][PATH_MAX];
    const char *in[5] = {task_dir, cfg->so[0], cfg->so[1], cfg->so[2], cfg->runner_path};
    for (int i = 0; i < 5; i++)
        if (!realpath(in[i], abs[i])) snprintf(abs[i], sizeof(abs[i]), "%s", in[i]);
    json_t *o = json_pack("{s:s,s:s,s:[s,s,s],s:s,s:s,s:i,s:b,s:b,s:b,s:f,s:I,s:s}", "backend", cfg->backend->name,
                          "task_dir", abs[0], "so", abs[1], abs[2], abs[3], "runner", abs[4],
                          "secret", secret, "gpu", cfg->gpu, "quick", cfg->quick, "validate_only", cfg->validate_only,
                          "allow_unconfined", cfg->allow_unconfined, "budget_s", cfg->budget_s, "llc_bytes",
                          (json_int_t)cfg->llc_bytes, "nonce", cfg->nonce);
    char *msg = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!msg) {
        memset(res, 0, sizeof(*res));
        res->how = KF_SANDBOX_FAILED;
        snprintf(res->err, sizeof(res->err), "judge server: cannot encode the request");
        return -1;
    }
    int rc = -1;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (s->proc.pid > 0 && (s->be != cfg->backend || s->gpu != cfg->gpu)) kf_sandbox_srv_stop(&s->proc);
        if (s->proc.pid <= 0) {
            kf_sandbox_req q = *sr;
            q.scratch_dir = s->dir;
            q.fn = kf_judge_serve;
            q.arg = NULL;
            q.timeout_s = 30;
            char err[256];
            if (kf_sandbox_srv_start(&q, &s->proc, err, sizeof(err)) != 0) {
                memset(res, 0, sizeof(*res));
                res->how = KF_SANDBOX_FAILED;
                snprintf(res->err, sizeof(res->err), "judge server: %.230s", err);
                break;
            }
            s->be = cfg->backend;
            s->gpu = cfg->gpu;
            s->starts++;
        }
        rc = kf_sandbox_srv_call(&s->proc, msg, strlen(msg), sr, res);
        if (rc == 0 || !res->not_served) break;
        kf_sandbox_res_free(res); /* it never ran: a fresh server takes it */
    }
    free(msg);
    return rc;
}
