/*
 * sandbox.h -- run a function in a sandboxed child process (prefix kf_sandbox_).
 *
 * Everything that executes code we did not write -- the compiler on
 * candidate source, the candidate's shared object -- runs through
 * kf_sandbox_run: fork a child, confine it, call a callback there, and come
 * back with what the callback reported or how the child died. The worker
 * never dies because of a candidate: a crash, exit(), hang or flood of output
 * in the child is just a field of kf_sandbox_res.
 *
 * The child: own process group (the whole group is killed on expiry), dies
 * with the parent (PR_SET_PDEATHSIG), no core dumps, RLIMIT_FSIZE cap,
 * default signal dispositions, stdin from /dev/null, stdout+stderr into a
 * pipe the parent reads and caps, every other inherited descriptor closed,
 * environment scrubbed to an allow-list (PATH, HOME and TMPDIR = scratch,
 * LANG=C, OMP_WAIT_POLICY=passive, OMP_NUM_THREADS if set: no tokens or keys
 * reach candidate code), cwd = the scratch directory. Best effort where the
 * host allows it: a fresh network namespace (no network). Then one of:
 *   - req->confine set: kf_confine_apply (worker/confine.h) with that spec,
 *     scratch_dir and write_dirs appended to its write_paths and, when its
 *     fsize_bytes is 0, fsize_limit as RLIMIT_FSIZE: file allow-list,
 *     seccomp, capabilities dropped, rlimits. If that fails the child exits
 *     (125) before fn runs and res->confine_failed says so. Applied even
 *     with no_isolation.
 *   - otherwise, unless no_isolation: no_new_privs and a Landlock ruleset
 *     that allows writing only under the scratch directory (plus
 *     `write_dirs` and /dev/null), so a candidate cannot tamper with the
 *     compile cache or the worker's files (reads are not restricted).
 * The child reports what took effect on the first line of the report
 * stream, before fn runs; the parent strips that line and returns the
 * flags, and also reads the child's /proc status once it has seen the
 * line (res->observed: what the kernel says, not what the child claims).
 *
 * The report stream is descriptor KF_SANDBOX_REPORT_FD in the child: the
 * callback writes whatever protocol its caller wants there (the harness
 * writes progress lines and one final JSON record). The parent keeps reading
 * it while the child runs, so large reports never block the child.
 *
 * Written for reuse: the CUDA backend runs its harness through the same call.
 */
#ifndef KF_SANDBOX_H
#define KF_SANDBOX_H

#include <stddef.h>
#include <stdint.h>

#include "confine.h"

#define KF_SANDBOX_REPORT_FD 3

typedef enum {
    KF_SANDBOX_EXITED = 0,  /* the child exited by itself: see exit_status */
    KF_SANDBOX_SIGNALED,    /* killed by a signal it caused (SIGSEGV, SIGABRT, ...) */
    KF_SANDBOX_TIMEOUT,     /* wall-clock limit reached; the process group was killed */
    KF_SANDBOX_CANCELLED,   /* tick() asked to stop; the process group was killed */
    KF_SANDBOX_FAILED       /* could not run the child at all (pipe/fork): the worker's fault */
} kf_sandbox_how;

/* The child's body. report_fd is where to write the report; the return value
 * becomes the child's exit status (0..255). Runs after confinement. */
typedef int (*kf_sandbox_fn)(void *arg, int report_fd);

typedef struct {
    const char *scratch_dir;        /* existing directory: cwd, HOME, TMPDIR of the child */
    double timeout_s;               /* wall-clock limit (> 0) */
    uint64_t fsize_limit;           /* RLIMIT_FSIZE in bytes; 0 = 64 MiB */
    size_t output_cap;              /* stdout+stderr bytes kept; 0 = 64 KiB */
    size_t report_cap;              /* report bytes kept; 0 = 8 MiB */
    const char *const *write_dirs;  /* NULL-terminated extra writable dirs, or NULL */
    int no_isolation;               /* 1: skip network namespace and the default Landlock (tests) */
    const kf_confine_spec *confine; /* NULL, or full confinement of the child (see above); the
                                     * spec is copied in the child, never modified. With
                                     * drop_uid under a root worker the parent chowns
                                     * scratch_dir to KFARM_RUNNER_UID first */
    int (*tick)(void *arg);         /* called ~once a second; non-zero = cancel */
    void *tick_arg;
    kf_sandbox_fn fn;
    void *arg;
    /* 1: the child closing its report descriptor ends the run: the parent
     * kills the process group and returns at once with *detached_pid set,
     * leaving the child's exit (a CUDA context torn down, ~0.15 s) to
     * overlap with what the caller does next; the caller must reap it with
     * kf_sandbox_reap. For callbacks whose report is complete when they
     * close it (the judge's final record); how = EXITED, exit_status 0. */
    int detach_on_report_eof;
} kf_sandbox_req;

typedef struct {
    kf_sandbox_how how;
    int exit_status;                /* EXITED: the status */
    int signal;                     /* SIGNALED: the signal number */
    char *report;                   /* what fn wrote to report_fd (malloc'ed, NUL-terminated) */
    size_t report_len;
    int report_truncated;           /* report exceeded report_cap */
    char *output;                   /* captured stdout+stderr (malloc'ed, NUL-terminated) */
    size_t output_len;
    int output_truncated;
    double wall_s;                  /* seconds from fork to reaping */
    int landlocked;                 /* writes confined to scratch (Landlock active) */
    int net_isolated;               /* in its own network namespace */
    int confined;                   /* req->confine was applied: facts below */
    kf_confine_facts confine;       /* what kf_confine_apply reported in the child */
    int confine_failed;             /* kf_confine_apply failed; err says why; fn never ran */
    int observed;                   /* 1: observed_facts were read from /proc/<child>/status */
    kf_confine_facts observed_facts;/* kf_confine_observe of the child after its header line */
    char err[256];                  /* FAILED: why; or why confinement failed */
    int detached_pid;               /* detach_on_report_eof: the killed child still to be
                                     * reaped with kf_sandbox_reap (0: none) */
    int not_served;                 /* kf_sandbox_srv_call: the request never ran */
} kf_sandbox_res;

/* Run req->fn in a confined child and wait for it (see above). Returns 0 and
 * fills *res for every outcome of the child, or -1 (res->how = FAILED, res->err
 * says why) when the child could not be started. Free with kf_sandbox_res_free. */
int kf_sandbox_run(const kf_sandbox_req *req, kf_sandbox_res *res);

/* Wait for child pid to exit and reap it: a child kf_sandbox_run left
 * behind (res->detached_pid), or any other child of the caller. With tick,
 * polls every 20 ms and calls tick meanwhile (its answer is ignored: the
 * child is waited for all the same). No-op for pid <= 0. */
void kf_sandbox_reap(int pid, int (*tick)(void *arg), void *tick_arg);

/* Free what kf_sandbox_run allocated in res (report, output); res may be
 * freed twice. */
void kf_sandbox_res_free(kf_sandbox_res *res);

/* Write all of buf to fd, retrying on EINTR/short writes. 0 or -1. For use
 * by callbacks writing their report. */
int kf_sandbox_write_all(int fd, const void *buf, size_t len);

/* Close every descriptor from lowfd up (close_range, else a loop to 64 Ki).
 * For a child between fork and exec. */
void kf_sandbox_close_from(int lowfd);

/* Child-side helper for callbacks that exec a program (the compiler):
 * execvp(argv[0], argv) and, if that fails, write "exec failed: <errno text>"
 * to stderr and KF_SANDBOX_EXEC_FAILED "<errno>\n" to the report descriptor,
 * and return 127 (ENOENT) or 126 (other) for the child to exit with. The
 * report descriptor is close-on-exec for the program, so only a failed exec
 * can write that line: kf_sandbox_exec_failed() on the result proves it.
 * Never returns on success. */
int kf_sandbox_exec(char *const argv[]);

#define KF_SANDBOX_EXEC_FAILED "#exec-failed "

/* For a run whose fn was kf_sandbox_exec: the errno of the failed exec when
 * the program could not be executed at all, else 0. */
int kf_sandbox_exec_failed(const kf_sandbox_res *res);

/* ---- a long-lived child that serves one request at a time ----
 *
 * The judge keeps its CUDA context and the task's warm runners between
 * evaluations (issue 8) in one such child per GPU. kf_sandbox_srv_start
 * forks a child set up exactly as kf_sandbox_run's (scratch_dir,
 * fsize_limit, no_isolation, confine, write_dirs; fn and arg), except that
 * its descriptor KF_SANDBOX_REPORT_FD is a SOCK_SEQPACKET control socket.
 * fn serves: kf_sandbox_srv_next hands it each request (one message of up
 * to KF_SANDBOX_SRV_MSG bytes) with a report descriptor of its own; what fn
 * writes there is that request's report, complete when fn hands the
 * descriptor to kf_sandbox_srv_done. fn returns when kf_sandbox_srv_next
 * says the parent stopped. */
#define KF_SANDBOX_SRV_MSG 65536

typedef struct {
    int pid;            /* the serving child (0: none) */
    int ctl;            /* control socket, parent end */
    int out;            /* the child's stdout+stderr */
    int landlocked, net_isolated; /* what its header line said */
    unsigned served;    /* requests answered */
} kf_sandbox_srv;

/* Start a serving child (see above). req->timeout_s bounds the wait for its
 * header line. 0, or -1 with err (nothing left running). */
int kf_sandbox_srv_start(const kf_sandbox_req *req, kf_sandbox_srv *s, char *err, size_t cap);

/* Send one request (msg, len <= KF_SANDBOX_SRV_MSG) and collect its report
 * as kf_sandbox_run would (req: timeout_s, tick, report_cap, output_cap;
 * output is what the child printed during this request). Returns 0 and
 * res->how:
 *   EXITED (exit_status 0): the report is done (kf_sandbox_srv_done); the
 *     child keeps serving;
 *   TIMEOUT / CANCELLED: the child's group was killed, s is stopped;
 *   SIGNALED / EXITED (status): the child died during the request, s stopped.
 * Returns -1 (how = FAILED, s stopped) when the child did not take the
 * request (dead, or it ended before accepting): nothing of the request ran
 * and the caller may start a new child and send it again (res->not_served). */
int kf_sandbox_srv_call(kf_sandbox_srv *s, const void *msg, size_t len, const kf_sandbox_req *req,
                        kf_sandbox_res *res);

/* Child side: wait for the next request. Returns 1 with the message in buf
 * (NUL-terminated, *len bytes) and *report_fd (close-on-exec; close it when
 * the report is complete), 0 when the parent closed the control socket, -1
 * on a malformed request (none accepted). */
int kf_sandbox_srv_next(int ctl_fd, char *buf, size_t cap, size_t *len, int *report_fd);

/* Child side: the request's report is complete: write the done line and
 * close report_fd. A report closed without it (the child died, or closed
 * the descriptor itself) ends the child: the parent kills and reaps it. */
void kf_sandbox_srv_done(int report_fd);

/* Stop the serving child: close the control socket, give it 2 s to leave,
 * then kill its group; reap it. No-op when none runs. */
void kf_sandbox_srv_stop(kf_sandbox_srv *s);

#endif
