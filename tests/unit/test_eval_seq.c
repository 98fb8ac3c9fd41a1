/*
 * test_eval_seq.c -- the worker survives hostile candidates in ONE process.
 *
 * The networked worker evaluates job after job in one long-lived process, so
 * this runs several hostile cases from tests/cases through kf_eval_run in
 * sequence (crash, hang, exit(), late thread, exiting constructor, a
 * cancelled evaluation) with a correct candidate before and after: the last
 * good one must still be `ok`, and the process must not leak descriptors or
 * children. (R1: the error is blamed on the guilty candidate, never the next.)
 *
 * Env: KFARM_SRC (repo root; defaults to this file's tree).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kf_eval.h"
#include "kf_test.h"
#include "kf_util.h"
#include "kf_verdict.h"

static char src_root[1024];

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    if (d) closedir(d);
    return n;
}

static int cancel_after_one(void *arg)
{
    int *n = arg;
    return ++*n >= 1;
}

static kf_verdict eval_case(kf_test_state *st, const char *task, const char *cas, double timeout, int cancel,
                            char *detail, size_t cap)
{
    char tdir[1200], cand[1200];
    snprintf(tdir, sizeof(tdir), "%s/tests/tasks/%s", src_root, task);
    snprintf(cand, sizeof(cand), "%s/tests/cases/%s/candidate.c", src_root, cas);
    int ticks = 0;
    kf_eval_req req;
    memset(&req, 0, sizeof(req));
    req.task_dir = tdir;
    req.source_path = cand;
    req.seed = 11;
    req.timeout_s = timeout;
    req.quick = 1;
    if (cancel) {
        req.tick = cancel_after_one;
        req.tick_arg = &ticks;
    }
    kf_eval_res res;
    double t0 = kf_util_now_s();
    int rc = kf_eval_run(&req, &res);
    CHECK(st, rc == 0, "kf_eval_run(%s) returned %d", cas, rc);
    CHECK(st, res.metrics_json && res.metrics_json[0] == '{', "%s: metrics_json missing", cas);
    CHECK(st, res.compile_log != NULL, "%s: compile_log missing", cas);
    printf("%-16s %-15s %5.1fs  %.150s\n", cas, kf_verdict_name(res.verdict), kf_util_now_s() - t0, res.detail);
    snprintf(detail, cap, "%s", res.detail);
    kf_verdict v = res.verdict;
    kf_eval_res_free(&res);
    return v;
}

int main(void)
{
    kf_test_state st = {0, 0};
    const char *env = getenv("KFARM_SRC");
    if (env && *env) {
        snprintf(src_root, sizeof(src_root), "%s", env);
    } else {
        char f[1024];
        snprintf(f, sizeof(f), "%s", __FILE__);
        snprintf(src_root, sizeof(src_root), "%s/../..", dirname(f));
    }
    char d[1024];
    int fds0 = count_fds();

    CHECK(&st, eval_case(&st, "softmax_rows_f32", "good", 0, 0, d, sizeof(d)) == KF_OK, "good (first): %s", d);
    int fds1 = count_fds();
    CHECK(&st, eval_case(&st, "softmax_rows_f32", "segfault", 0, 0, d, sizeof(d)) == KF_RUNTIME_ERROR &&
                   strstr(d, "SIGSEGV"), "segfault: %s", d);
    CHECK(&st, eval_case(&st, "softmax_rows_f32", "hang", 2, 0, d, sizeof(d)) == KF_TIMEOUT, "hang: %s", d);
    CHECK(&st, eval_case(&st, "softmax_rows_f32", "exit_process", 0, 0, d, sizeof(d)) == KF_RUNTIME_ERROR,
          "exit_process: %s", d);
    kf_verdict lv = eval_case(&st, "softmax_rows_f32", "late_thread", 0, 0, d, sizeof(d));
    CHECK(&st, lv == KF_REJECTED_CHEAT || lv == KF_INCORRECT, "late_thread: %s", d);
    CHECK(&st, eval_case(&st, "softmax_rows_f32", "constructor_exit", 0, 0, d, sizeof(d)) == KF_LOAD_ERROR,
          "constructor_exit: %s", d);
    CHECK(&st, eval_case(&st, "softmax_rows_f32", "hang", 30, 1, d, sizeof(d)) == KF_INFRA_ERROR &&
                   strstr(d, "cancelled"), "cancelled hang: %s", d);
    CHECK(&st, eval_case(&st, "axpy_f32", "input_mutation", 0, 0, d, sizeof(d)) == KF_INCORRECT,
          "input_mutation: %s", d);
    CHECK(&st, eval_case(&st, "softmax_rows_f32", "good", 0, 0, d, sizeof(d)) == KF_OK, "good (last): %s", d);

    int fds2 = count_fds();
    CHECK(&st, fds2 == fds1, "descriptor leak: %d open after the first evaluation, %d at the end (%d at start)",
          fds1, fds2, fds0);
    errno = 0;
    pid_t z = waitpid(-1, NULL, WNOHANG);
    CHECK(&st, z == -1 && errno == ECHILD, "children left behind (waitpid -> %d)", (int)z);
    return kf_test_done(&st);
}
