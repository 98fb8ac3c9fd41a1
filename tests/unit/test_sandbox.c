/*
 * test_sandbox.c -- worker/sandbox.c: every way a child can end (report,
 * exit status, signal, timeout, cancel), what it can see (environment,
 * inherited descriptors, limits), what it can do (flood output, fork helpers
 * that outlive it, write outside scratch when Landlock is on).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kf_test.h"
#include "kf_util.h"
#include "sandbox.h"

static char scratch[200];

static void run(kf_sandbox_fn fn, void *arg, double timeout, kf_sandbox_res *res)
{
    kf_sandbox_req r = {.scratch_dir = scratch, .timeout_s = timeout, .fn = fn, .arg = arg};
    kf_sandbox_run(&r, res);
}

static int fn_report(void *arg, int fd)
{
    dprintf(fd, "hello %s\n", (const char *)arg);
    printf("to stdout\n");
    fflush(stdout);
    return 5;
}

static int fn_segv(void *arg, int fd)
{
    volatile int *p = NULL;
    *p = 1;
    return 0;
}

static int fn_spin(void *arg, int fd)
{
    volatile int forever = 1;
    while (forever) {
    }
    return 0;
}

static int fn_flood(void *arg, int fd)
{
    static char buf[65536];
    memset(buf, 'x', sizeof(buf));
    for (int i = 0; i < 160; i++) /* 10 MiB */
        if (write(1, buf, sizeof(buf)) < 0) return 3;
    dprintf(fd, "done\n");
    return 0;
}

static int fn_env(void *arg, int fd)
{
    const char *s = getenv("KF_TEST_SECRET"), *home = getenv("HOME"), *tmp = getenv("TMPDIR");
    char cwd[512] = "";
    if (!getcwd(cwd, sizeof(cwd))) cwd[0] = 0;
    struct rlimit rl;
    getrlimit(RLIMIT_CORE, &rl);
    int inherited = *(int *)arg;
    int fd_open = fcntl(inherited, F_GETFD) != -1;
    dprintf(fd, "secret=%s home=%s tmp=%s cwd=%s core=%llu fd_open=%d wait=%s\n", s ? s : "(none)",
            home ? home : "", tmp ? tmp : "", cwd, (unsigned long long)rl.rlim_cur, fd_open,
            getenv("OMP_WAIT_POLICY") ? getenv("OMP_WAIT_POLICY") : "");
    return 0;
}

static int fn_fork_helper(void *arg, int fd)
{
    pid_t p = fork();
    if (p == 0) {
        for (;;) pause();
    }
    dprintf(fd, "helper=%d\n", (int)p);
    return 0;
}

static int fn_write_outside(void *arg, int fd)
{
    const char *path = arg;
    int f = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dprintf(fd, "outside=%s\n", f >= 0 ? "written" : strerror(errno));
    if (f >= 0) close(f);
    f = open("inside.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dprintf(fd, "inside=%s\n", f >= 0 ? "written" : strerror(errno));
    if (f >= 0) close(f);
    return 0;
}

static int tick_cancel(void *arg)
{
    int *n = arg;
    return ++*n >= 1;
}

int main(void)
{
    kf_test_state st = {0, 0};
    snprintf(scratch, sizeof(scratch), "%s/kf-test-sandbox-%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    kf_util_mkdirs(scratch);
    kf_sandbox_res res;

    run(fn_report, "world", 10, &res);
    CHECK(&st, res.how == KF_SANDBOX_EXITED && res.exit_status == 5, "how %d status %d", res.how, res.exit_status);
    CHECK(&st, res.report && !strcmp(res.report, "hello world\n"), "report '%s'", res.report);
    CHECK(&st, res.output && strstr(res.output, "to stdout"), "output '%s'", res.output);
    kf_sandbox_res_free(&res);

    run(fn_segv, NULL, 10, &res);
    CHECK(&st, res.how == KF_SANDBOX_SIGNALED && res.signal == SIGSEGV, "how %d signal %d", res.how, res.signal);
    kf_sandbox_res_free(&res);

    double t0 = kf_util_now_s();
    run(fn_spin, NULL, 0.5, &res);
    double dt = kf_util_now_s() - t0;
    CHECK(&st, res.how == KF_SANDBOX_TIMEOUT, "how %d", res.how);
    CHECK(&st, dt >= 0.45 && dt < 2.0, "timeout took %.2f s", dt);
    kf_sandbox_res_free(&res);

    run(fn_flood, NULL, 20, &res);
    CHECK(&st, res.how == KF_SANDBOX_EXITED && res.exit_status == 0, "flood: how %d status %d", res.how,
          res.exit_status);
    CHECK(&st, res.output_truncated && res.output_len == 64u << 10, "flood output kept %zu", res.output_len);
    CHECK(&st, res.report && !strcmp(res.report, "done\n"), "flood report '%s'", res.report);
    kf_sandbox_res_free(&res);

    setenv("KF_TEST_SECRET", "hunter2", 1);
    /* not CLOEXEC: the sandbox must still close it (fd >= 50, away from the report fd 3) */
    int dn = open("/dev/null", O_RDONLY);
    int keep = fcntl(dn, F_DUPFD, 50);
    close(dn);
    run(fn_env, &keep, 10, &res);
    CHECK(&st, res.report && strstr(res.report, "secret=(none)"), "secret leaked: %s", res.report);
    char want[1024];
    snprintf(want, sizeof(want), "home=%s tmp=%s cwd=%s core=0 fd_open=0 wait=passive", scratch, scratch, scratch);
    CHECK(&st, res.report && strstr(res.report, want), "env: %s (want %s)", res.report, want);
    close(keep);
    kf_sandbox_res_free(&res);

    run(fn_fork_helper, NULL, 10, &res);
    int helper = 0;
    if (res.report) sscanf(res.report, "helper=%d", &helper);
    CHECK(&st, helper > 0, "helper pid from '%s'", res.report);
    int gone = 0;
    for (int i = 0; i < 100 && helper > 0; i++) {
        if (kill(helper, 0) != 0 && errno == ESRCH) {
            gone = 1;
            break;
        }
        usleep(20000);
    }
    CHECK(&st, gone, "the child's helper process %d outlived it", helper);
    kf_sandbox_res_free(&res);

    int ticks = 0;
    kf_sandbox_req rc = {.scratch_dir = scratch, .timeout_s = 30, .fn = fn_spin, .tick = tick_cancel,
                         .tick_arg = &ticks};
    t0 = kf_util_now_s();
    kf_sandbox_run(&rc, &res);
    CHECK(&st, res.how == KF_SANDBOX_CANCELLED, "cancel: how %d", res.how);
    CHECK(&st, kf_util_now_s() - t0 < 3, "cancel took %.1f s", kf_util_now_s() - t0);
    kf_sandbox_res_free(&res);

    char outside[512];
    snprintf(outside, sizeof(outside), "%s-outside.txt", scratch);
    run(fn_write_outside, outside, 10, &res);
    CHECK(&st, res.report && strstr(res.report, "inside=written"), "scratch must be writable: %s", res.report);
    if (res.landlocked)
        CHECK(&st, res.report && !strstr(res.report, "outside=written"), "Landlock on, yet wrote outside: %s",
              res.report);
    else
        printf("note: Landlock unavailable on this host; write confinement not tested\n");
    unlink(outside);
    kf_sandbox_res_free(&res);

    kf_util_rmtree(scratch);
    return kf_test_done(&st);
}
