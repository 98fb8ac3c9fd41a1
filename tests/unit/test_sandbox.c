/*
 * test_sandbox.c -- worker/sandbox.c: every way a child can end (report,
 * exit status, signal, timeout, cancel), what it can see (environment,
 * inherited descriptors, limits), what it can do (flood output, fork helpers
 * that outlive it, write outside scratch when Landlock is on), a confined
 * child (req.confine: facts reported and observed, a failure to confine is
 * reported and the callback never runs), a serving child (kf_sandbox_srv_*:
 * state kept between requests, a crash, a hang, a child gone between
 * requests), and confined compiles: a source
 * that #includes or .incbin's a key file (or /etc/shadow) is a compile_error
 * whose log does not hold the file's content; `#line 1 "No space left on
 * device"` + #error is the candidate's compile_error, a compiler that fails
 * on every source is the worker's infra_error, a slow compile is the
 * candidate's.
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
#include <time.h>
#include <unistd.h>

#include <sys/socket.h>

#include "compile.h"
#include "confine.h"
#include "kf_test.h"
#include <sys/wait.h>
#include <errno.h>

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

/* A complete report, then a long exit (the judge tearing down a CUDA context). */
static int fn_report_then_linger(void *arg, int fd)
{
    dprintf(fd, "final record\n");
    close(fd);
    for (;;) pause();
    return 0;
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

static int fn_confined(void *arg, int fd)
{
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    dprintf(fd, "socket=%s\n", s >= 0 ? "made" : strerror(errno));
    return 0;
}

static int fn_must_not_run(void *arg, int fd)
{
    dprintf(fd, "ran\n");
    return 0;
}

/* Build text as <scratch>/name with kf_compile_run (no cache). */
static void compile_text(const char *name, const char *text, double timeout_s, kf_compile_res *r)
{
    char src[512], out[512], bdir[512];
    snprintf(src, sizeof(src), "%s/%s", scratch, name);
    snprintf(out, sizeof(out), "%s/out.so", scratch);
    snprintf(bdir, sizeof(bdir), "%s/b", scratch);
    kf_util_mkdirs(bdir);
    kf_util_write_file(src, text, strlen(text));
    kf_compile_req q = {.source_path = src, .out_path = out, .scratch_dir = bdir, .timeout_s = timeout_s};
    kf_compile_run(&q, r);
}

/* The compile cache keeps the first build of a key, and a later build of the
 * same key takes its bytes (nvcc's output differs between two builds of one
 * source; a serving judge keeps its task runners only while the shared
 * objects hash the same). */
static void cache_put_tests(kf_test_state *st)
{
    char d[] = "/tmp/kf-test-cache-XXXXXX";
    if (!mkdtemp(d)) {
        CHECK(st, 0, "mkdtemp");
        return;
    }
    char entry[128], a[128], b[128];
    snprintf(entry, sizeof(entry), "%s/key.so", d);
    snprintf(a, sizeof(a), "%s/a.so", d);
    snprintf(b, sizeof(b), "%s/b.so", d);
    kf_util_write_file(a, "first build", 11);
    kf_util_write_file(b, "second build!", 13);
    CHECK(st, kf_compile_cache_put(entry, a) == 0, "first put");
    CHECK(st, kf_compile_cache_put(entry, b) == 0, "second put of the same key");
    size_t n = 0;
    char *e = kf_util_read_file(entry, &n, 1024), *x = kf_util_read_file(b, &n, 1024);
    CHECK(st, e && !strcmp(e, "first build"), "the entry is the first build: %s", e ? e : "(none)");
    CHECK(st, x && !strcmp(x, "first build"), "the second builder holds the entry's bytes: %s", x ? x : "(none)");
    free(e);
    free(x);
    /* one build of a key at a time: a second locker waits, then gives up */
    int l1 = kf_compile_key_lock(entry, 1.0, NULL, NULL);
    CHECK(st, l1 >= 0, "the key's lock is taken");
    double t0 = kf_util_now_s();
    int l2 = kf_compile_key_lock(entry, 0.2, NULL, NULL);
    double waited = kf_util_now_s() - t0;
    CHECK(st, l2 < 0 && waited >= 0.19, "a second locker of the held key waits and gives up (%d after %.2f s)", l2,
          waited);
    kf_compile_key_unlock(l2);
    kf_compile_key_unlock(l1);
    int l3 = kf_compile_key_lock(entry, 0.2, NULL, NULL);
    CHECK(st, l3 >= 0, "the key's lock is free again once released");
    kf_compile_key_unlock(l3);
    unlink(entry);
    char lockp[160];
    snprintf(lockp, sizeof(lockp), "%s.lock", entry);
    unlink(lockp);
    kf_util_write_file(entry, "first build", 11);
    /* no temporaries left beside the entry */
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "test $(ls %s | wc -l) -eq 3", d);
    CHECK(st, system(cmd) == 0, "only the entry and the two builds remain in %s", d);
    kf_util_rmtree(d);
}

static void compile_tests(kf_test_state *st)
{
    /* a key file the candidate knows the path of (I6) */
    char kdir[] = "/tmp/kf-test-key-XXXXXX";
    if (!mkdtemp(kdir)) {
        CHECK(st, 0, "mkdtemp");
        return;
    }
    char key[600], secret[64];
    snprintf(key, sizeof(key), "%s/fleet.key", kdir);
    snprintf(secret, sizeof(secret), "kfsecret_%08x_zz", (unsigned)getpid() * 2654435761u);
    char keytext[128];
    snprintf(keytext, sizeof(keytext), "%s here\n", secret); /* unquoted: a compiler would quote it back */
    kf_util_write_file(key, keytext, strlen(keytext));
    chmod(key, 0644);
    char src[2048];
    kf_compile_res r;

    snprintf(src, sizeof(src), "#include \"%s\"\nint f(void) { return 0; }\n", key);
    compile_text("inc.c", src, 60, &r);
    printf("#include of a key file -> %s\n", r.detail);
    CHECK(st, r.status == KF_COMPILE_FAILED, "#include of the key: status %d (%s)", r.status, r.detail);
    CHECK(st, r.log && !strstr(r.log, secret) && !strstr(r.detail, secret), "#include: the key leaked: %s", r.log);
    CHECK(st, r.log && (strstr(r.log, "Permission denied") || strstr(r.log, "cannot open")),
          "#include: log does not say why: %s", r.log);
    CHECK(st, r.confined && r.confine.seccomp && r.confine.no_new_privs, "compiler not confined (seccomp %d)",
          r.confine.seccomp);
    if (kf_confine_landlock_abi() == 0) printf("SKIP: Landlock unavailable: the include/incbin checks pass only by luck\n");
    kf_compile_res_free(&r);

    snprintf(src, sizeof(src),
             "__asm__(\".section .rodata\\n.globl kf_leak\\nkf_leak:\\n.incbin \\\"%s\\\"\\n.byte 0\\n.previous\\n\");\n"
             "int f(void) { return 0; }\n", key);
    compile_text("incbin.c", src, 60, &r);
    printf(".incbin of a key file -> %s\n", r.detail);
    CHECK(st, r.status == KF_COMPILE_FAILED, ".incbin of the key: status %d (%s)", r.status, r.detail);
    CHECK(st, r.log && !strstr(r.log, secret), ".incbin: the key leaked: %s", r.log);
    kf_compile_res_free(&r);

    compile_text("shadow.c", "#include \"/etc/shadow\"\nint f(void) { return 0; }\n", 60, &r);
    CHECK(st, r.status == KF_COMPILE_FAILED, "#include /etc/shadow: status %d (%s)", r.status, r.detail);
    CHECK(st, r.log && !strstr(r.log, "root:"), "/etc/shadow leaked: %s", r.log);
    kf_compile_res_free(&r);

    /* I9: the worker's words in the candidate's mouth */
    compile_text("line.c", "#line 1 \"No space left on device\"\n#error x\n", 60, &r);
    printf("#line \"No space left on device\" + #error -> %s\n", r.detail);
    CHECK(st, r.status == KF_COMPILE_FAILED, "#line ENOSPC: status %d (%s)", r.status, r.detail);
    CHECK(st, strstr(r.detail, "No space left on device") != NULL, "#line ENOSPC detail: %s", r.detail);
    kf_compile_res_free(&r);
    compile_text("err.c", "#error No space left on device\n", 60, &r);
    CHECK(st, r.status == KF_COMPILE_FAILED, "#error ENOSPC: status %d (%s)", r.status, r.detail);
    kf_compile_res_free(&r);

    /* a good source still builds, confined */
    compile_text("good.c", "#include \"kf_abi.h\"\n#include <math.h>\n#include <omp.h>\n"
                           "double g(double x) { return sqrt(x) + omp_get_max_threads(); }\n", 60, &r);
    CHECK(st, r.status == KF_COMPILE_OK, "good source: %s\n%s", r.detail, r.log);
    CHECK(st, r.confined && r.confine.seccomp && r.confine.caps_dropped, "good build not confined");
    kf_compile_res_free(&r);

    /* slow to compile: the candidate's compile_error, never the worker's */
    compile_text("slow.c",
                 "#define A(x) x x x x x x x x x x\n#define B(x) A(A(A(A(x))))\n"
                 "int v = B(A(A(A(1+)))) 0;\n", 1, &r);
    CHECK(st, r.status == KF_COMPILE_FAILED && strstr(r.detail, "exceeded"), "slow compile: status %d (%s)",
          r.status, r.detail);
    kf_compile_res_free(&r);

    /* a compiler that fails on every source: the worker's */
    char fake[700];
    snprintf(fake, sizeof(fake), "%s/cc-enospc", kdir);
    const char *script = "#!/bin/sh\n[ \"$1\" = \"--version\" ] && { echo \"fakecc 1.0\"; exit 0; }\n"
                         "echo \"/usr/bin/ld: final link failed: No space left on device\" >&2\nexit 1\n";
    kf_util_write_file(fake, script, strlen(script));
    chmod(fake, 0755);
    setenv("KFARM_CC", fake, 1);
    compile_text("good2.c", "int h(void) { return 1; }\n", 60, &r);
    printf("compiler failing on every source -> %s\n", r.detail);
    CHECK(st, r.status == KF_COMPILE_INFRA && strstr(r.detail, "trivial source"), "broken compiler: status %d (%s)",
          r.status, r.detail);
    kf_compile_res_free(&r);
    setenv("KFARM_CC", "/nonexistent/bin/cc", 1);
    compile_text("good2.c", "int h(void) { return 1; }\n", 60, &r);
    CHECK(st, r.status == KF_COMPILE_INFRA && strstr(r.detail, "not found"), "missing compiler: status %d (%s)",
          r.status, r.detail);
    kf_compile_res_free(&r);
    unsetenv("KFARM_CC");
    kf_util_rmtree(kdir);
}

/* A serving child: "echo X" answers "X #n" (n counts requests in this
 * child: state kept between requests), "die" crashes mid-request, "hang"
 * never answers, "quit" returns without taking the next one. */
static int fn_serve(void *arg, int ctl)
{
    (void)arg;
    char msg[KF_SANDBOX_SRV_MSG + 1];
    size_t len;
    int rfd, n = 0;
    while (kf_sandbox_srv_next(ctl, msg, sizeof(msg), &len, &rfd) == 1) {
        n++;
        if (!strcmp(msg, "die")) raise(SIGSEGV);
        if (!strcmp(msg, "hang")) for (;;) pause();
        if (!strcmp(msg, "quit")) {
            kf_sandbox_srv_done(rfd);
            return 0;
        }
        printf("served %d\n", n);
        fflush(stdout);
        dprintf(rfd, "%s #%d\n", msg, n);
        kf_sandbox_srv_done(rfd);
    }
    return 0;
}

static void serve_tests(kf_test_state *st)
{
    kf_sandbox_srv s;
    kf_sandbox_res res;
    char err[256];
    kf_sandbox_req q = {.scratch_dir = scratch, .timeout_s = 10, .fn = fn_serve};
    CHECK(st, kf_sandbox_srv_start(&q, &s, err, sizeof(err)) == 0, "srv start: %s", err);
    int pid = s.pid;
    for (int i = 1; i <= 3; i++) {
        int rc = kf_sandbox_srv_call(&s, "echo", 4, &q, &res);
        char want[32];
        snprintf(want, sizeof(want), "echo #%d\n", i);
        CHECK(st, rc == 0 && res.how == KF_SANDBOX_EXITED && res.report && !strcmp(res.report, want),
              "srv call %d: rc %d how %d report '%s'", i, rc, res.how, res.report);
        CHECK(st, res.output && strstr(res.output, "served"), "srv call %d output '%s'", i, res.output);
        kf_sandbox_res_free(&res);
    }
    CHECK(st, s.pid == pid && s.served == 3, "srv: one child served all (%d vs %d, %u)", s.pid, pid, s.served);
    /* a crash during a request: SIGNALED, the child reaped, s stopped */
    int rc = kf_sandbox_srv_call(&s, "die", 3, &q, &res);
    CHECK(st, rc == 0 && res.how == KF_SANDBOX_SIGNALED && res.signal == SIGSEGV && s.pid == 0,
          "srv die: rc %d how %d sig %d pid %d", rc, res.how, res.signal, s.pid);
    CHECK(st, waitpid(pid, NULL, WNOHANG) < 0 && errno == ECHILD, "srv die: child not reaped");
    kf_sandbox_res_free(&res);
    /* nothing running: not served, and said so */
    rc = kf_sandbox_srv_call(&s, "echo", 4, &q, &res);
    CHECK(st, rc == -1 && res.not_served && res.how == KF_SANDBOX_FAILED, "srv dead: rc %d not_served %d", rc,
          res.not_served);
    kf_sandbox_res_free(&res);
    /* a hang: the timeout kills the child */
    CHECK(st, kf_sandbox_srv_start(&q, &s, err, sizeof(err)) == 0, "srv restart: %s", err);
    kf_sandbox_req qt = q;
    qt.timeout_s = 0.5;
    double t0 = kf_util_now_s();
    rc = kf_sandbox_srv_call(&s, "hang", 4, &qt, &res);
    double dt = kf_util_now_s() - t0;
    CHECK(st, rc == 0 && res.how == KF_SANDBOX_TIMEOUT && s.pid == 0 && dt < 3, "srv hang: rc %d how %d %.2f s", rc,
          res.how, dt);
    kf_sandbox_res_free(&res);
    /* a child that ended between requests: the next one is not served (the
     * caller starts another and sends it again) */
    CHECK(st, kf_sandbox_srv_start(&q, &s, err, sizeof(err)) == 0, "srv restart 2: %s", err);
    rc = kf_sandbox_srv_call(&s, "quit", 4, &q, &res);
    CHECK(st, rc == 0 && res.how == KF_SANDBOX_EXITED, "srv quit: rc %d how %d", rc, res.how);
    kf_sandbox_res_free(&res);
    struct timespec ts = {0, 100 * 1000000L};
    nanosleep(&ts, NULL);
    rc = kf_sandbox_srv_call(&s, "echo", 4, &q, &res);
    CHECK(st, rc == -1 && res.not_served, "srv after quit: rc %d not_served %d how %d", rc, res.not_served, res.how);
    kf_sandbox_res_free(&res);
    kf_sandbox_srv_stop(&s);
    /* stop ends a live child */
    CHECK(st, kf_sandbox_srv_start(&q, &s, err, sizeof(err)) == 0, "srv restart 3: %s", err);
    pid = s.pid;
    kf_sandbox_srv_stop(&s);
    CHECK(st, s.pid == 0 && waitpid(pid, NULL, WNOHANG) < 0 && errno == ECHILD, "srv stop: child left");
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

    /* detach_on_report_eof: back once the report is closed, the child left
     * to be reaped (it would otherwise run into the timeout) */
    {
        kf_sandbox_req r = {.scratch_dir = scratch, .timeout_s = 30, .fn = fn_report_then_linger,
                            .detach_on_report_eof = 1};
        kf_sandbox_run(&r, &res);
        CHECK(&st, res.how == KF_SANDBOX_EXITED && res.detached_pid > 0, "detach: how %d pid %d", res.how,
              res.detached_pid);
        CHECK(&st, res.report && !strcmp(res.report, "final record\n"), "detach: report '%s'", res.report);
        kf_sandbox_reap(res.detached_pid, NULL, NULL);
        CHECK(&st, waitpid(res.detached_pid, NULL, WNOHANG) < 0 && errno == ECHILD, "detach: child not reaped");
        kf_sandbox_res_free(&res);
        /* without the flag the same child is waited for: the timeout ends it */
        kf_sandbox_req w = {.scratch_dir = scratch, .timeout_s = 0.5, .fn = fn_report_then_linger};
        kf_sandbox_run(&w, &res);
        CHECK(&st, res.how == KF_SANDBOX_TIMEOUT && res.detached_pid == 0, "no detach: how %d pid %d", res.how,
              res.detached_pid);
        kf_sandbox_res_free(&res);
    }

    serve_tests(&st);
    cache_put_tests(&st);

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

    /* confined child: facts from the child and from /proc */
    kf_confine_spec spec;
    memset(&spec, 0, sizeof(spec));
    spec.profile = KF_CONFINE_COMPILER;
    kf_confine_default_reads(&spec);
    kf_sandbox_req cr = {.scratch_dir = scratch, .timeout_s = 10, .fn = fn_confined, .confine = &spec};
    kf_sandbox_run(&cr, &res);
    CHECK(&st, res.how == KF_SANDBOX_EXITED && res.exit_status == 0, "confined: how %d status %d", res.how,
          res.exit_status);
    CHECK(&st, res.confined && res.confine.seccomp && res.confine.no_new_privs && res.confine.rlimits,
          "confined: facts %d seccomp %d nnp %d", res.confined, res.confine.seccomp, res.confine.no_new_privs);
    CHECK(&st, res.report && strstr(res.report, "socket=Operation not permitted"), "confined: %s", res.report);
    if (res.observed)
        CHECK(&st, res.observed_facts.seccomp && res.observed_facts.no_new_privs, "observed: seccomp %d nnp %d",
              res.observed_facts.seccomp, res.observed_facts.no_new_privs);
    else
        printf("note: the confined child was gone before the parent looked at /proc\n");
    if (kf_confine_landlock_abi() > 0) CHECK(&st, res.landlocked && res.confine.landlock_fs, "confined: no Landlock");
    kf_sandbox_res_free(&res);

    spec.profile = (kf_confine_profile)99; /* cannot be applied */
    cr.fn = fn_must_not_run;
    kf_sandbox_run(&cr, &res);
    CHECK(&st, res.confine_failed && res.err[0], "confine failure not reported (how %d, err '%s')", res.how, res.err);
    CHECK(&st, res.report && !strstr(res.report, "ran"), "fn ran although confinement failed: %s", res.report);
    kf_sandbox_res_free(&res);

    compile_tests(&st);

    kf_util_rmtree(scratch);
    return kf_test_done(&st);
}
