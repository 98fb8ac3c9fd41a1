/*
 * test_confine.c -- worker/confine.c from inside confined children.
 *
 * KF_CONFINE_RUNNER (with and, when the test runs as root, without the uid
 * switch, so Landlock alone must stop what uid 0 could otherwise read): no
 * socket, no fork, no file outside the allow-list, no /proc/<parent>/environ,
 * no signal to the parent, no write in a read-only allowed folder; threads
 * and allowed reads still work; the parent sees seccomp, no_new_privs and the
 * uid in /proc. KF_CONFINE_COMPILER: fork+exec of /bin/true works, sockets
 * and kill(1)/kill(-1) do not. A check is skipped (printed SKIP) only where
 * the host lacks the mechanism it tests.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "confine.h"
#include "kf_test.h"
#include "kf_util.h"

static char tdir[256], allowed[300], rodir[300], secretdir[300], secret[320], okfile[320];

/* ---- child side: results go to fd as "PASS|FAIL|SKIP name detail" lines ---- */

static int g_fd;
static int g_landlock; /* Landlock fs rules in force in this child */

static void report(const char *verdict, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void report(const char *verdict, const char *name, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    dprintf(g_fd, "%s %s %s\n", verdict, name, buf);
}

/* expect a failing call: ok when rc < 0 */
static void expect_fail(const char *name, long rc, int needs_landlock)
{
    int e = errno;
    if (needs_landlock && !g_landlock) {
        report("SKIP", name, "Landlock unavailable on this host (rc %ld)", rc);
        return;
    }
    if (rc < 0) report("PASS", name, "refused: %s", strerror(e));
    else report("FAIL", name, "succeeded (rc %ld)", rc);
}

static void *thread_fn(void *arg)
{
    *(int *)arg = 42;
    return NULL;
}

static void runner_checks(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    expect_fail("socket_unix", fd, 0);
    if (fd >= 0) close(fd);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    expect_fail("socket_inet", fd, 0);
    if (fd >= 0) close(fd);

    pid_t p = fork();
    if (p == 0) _exit(0);
    if (p > 0) waitpid(p, NULL, 0);
    expect_fail("fork", p, 0);

    fd = open(secret, O_RDONLY);
    expect_fail("read_outside_allow_list", fd, 1);
    if (fd >= 0) close(fd);

    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/environ", (int)getppid());
    fd = open(path, O_RDONLY);
    expect_fail("parent_environ", fd, 1);
    if (fd >= 0) close(fd);

    fd = open("/etc/shadow", O_RDONLY);
    if (access("/etc/shadow", F_OK) == 0) expect_fail("etc_shadow", fd, 1);
    if (fd >= 0) close(fd);

    expect_fail("kill_parent", kill(getppid(), 0), 0);
    expect_fail("kill_init", kill(1, 0), 0);
    expect_fail("kill_all", kill(-1, 0), 0);
    /* high bits set, low 32 bits = 1 (init for the kernel): refused */
    expect_fail("kill_init_high_bits", syscall(SYS_kill, 0x100000001L, 0), 0);
    expect_fail("tgkill_parent", syscall(SYS_tgkill, (long)getppid(), (long)getppid(), 0), 0);
    expect_fail("setpriority_parent", setpriority(PRIO_PROCESS, (id_t)getppid(), 10), 0);

    char ro[400];
    snprintf(ro, sizeof(ro), "%s/new.txt", rodir);
    fd = open(ro, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    expect_fail("write_read_only_dir", fd, 1);
    if (fd >= 0) close(fd);

    /* what must keep working */
    if (kill(getpid(), 0) == 0) report("PASS", "kill_self", "ok");
    else report("FAIL", "kill_self", "%s", strerror(errno));
    pthread_t t;
    int v = 0, rc = pthread_create(&t, NULL, thread_fn, &v);
    if (rc == 0) pthread_join(t, NULL);
    if (rc == 0 && v == 42) report("PASS", "pthread_create", "ok");
    else report("FAIL", "pthread_create", "%s", strerror(rc));
    char buf[64] = "";
    fd = open(okfile, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    if (fd >= 0) close(fd);
    if (n > 0 && !strncmp(buf, "allowed", 7)) report("PASS", "read_allowed", "ok");
    else report("FAIL", "read_allowed", "%s", strerror(errno));
    fd = open("/proc/self/status", O_RDONLY);
    if (fd >= 0) report("PASS", "proc_self", "ok");
    else report("FAIL", "proc_self", "%s", strerror(errno));
    if (fd >= 0) close(fd);
    fd = open("/dev/null", O_WRONLY);
    if (fd >= 0 && write(fd, "x", 1) == 1) report("PASS", "dev_null", "ok");
    else report("FAIL", "dev_null", "%s", strerror(errno));
    if (fd >= 0) close(fd);
}

static void compiler_checks(void)
{
    pid_t p = fork();
    if (p == 0) {
        execl("/bin/true", "true", (char *)NULL);
        _exit(127);
    }
    int st = -1;
    if (p > 0) waitpid(p, &st, 0);
    if (p > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) report("PASS", "fork_exec_true", "ok");
    else report("FAIL", "fork_exec_true", "pid %d status %d: %s", (int)p, st, strerror(errno));
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    expect_fail("socket_unix", fd, 0);
    if (fd >= 0) close(fd);
    expect_fail("kill_init", kill(1, 0), 0);
    expect_fail("kill_all", kill(-1, 0), 0);
    expect_fail("kill_other_group", kill(-(int)getppid(), 0), 0);
    if (kill(-getpgrp(), 0) == 0) report("PASS", "kill_own_group", "ok");
    else report("FAIL", "kill_own_group", "%s", strerror(errno));
    fd = open(secret, O_RDONLY);
    expect_fail("read_outside_allow_list", fd, 1);
    if (fd >= 0) close(fd);
}

/* ---- parent side ---- */

typedef struct {
    int pass, fail, skip;
} tally;

/* Fork a child that applies spec, reports its facts and runs checks; the
 * parent observes it through /proc while it waits, then collects. */
static void run_child(kf_test_state *st, const char *label, kf_confine_spec *spec, void (*checks)(void),
                      int expect_uid)
{
    int res[2], go[2];
    if (pipe(res) != 0 || pipe(go) != 0) {
        CHECK(st, 0, "pipe");
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(res[0]);
        close(go[1]);
        g_fd = res[1];
        if (getpgrp() != getpid()) setpgid(0, 0);
        kf_confine_facts f;
        char err[256] = "";
        int rc = kf_confine_apply(spec, &f, err, sizeof(err));
        dprintf(g_fd, "FACTS %d %d %d %d %d %d %d %d %s\n", rc, f.landlock_abi, f.landlock_fs, f.landlock_scoped,
                f.seccomp, f.no_new_privs, f.uid_dropped, f.uid, err);
        if (rc != 0) _exit(2);
        g_landlock = f.landlock_fs;
        checks();
        dprintf(g_fd, "DONE\n");
        char c;
        while (read(go[0], &c, 1) < 0 && errno == EINTR) {
        }
        _exit(0);
    }
    close(res[1]);
    close(go[0]);
    FILE *in = fdopen(res[0], "r");
    char line[1024];
    int ll_fs = 0, got_done = 0;
    tally t = {0, 0, 0};
    while (in && fgets(line, sizeof(line), in)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "FACTS ", 6)) {
            int rc = -9, abi = 0, fs = 0, sc = 0, seccomp = 0, nnp = 0, dropped = 0, uid = -1, off = 0;
            sscanf(line + 6, "%d %d %d %d %d %d %d %d %n", &rc, &abi, &fs, &sc, &seccomp, &nnp, &dropped, &uid, &off);
            CHECK(st, rc == 0, "%s: kf_confine_apply failed: %s", label, line + 6 + off);
            CHECK(st, seccomp == 1 && nnp == 1, "%s: facts seccomp=%d nnp=%d", label, seccomp, nnp);
            printf("%s: landlock ABI %d, fs rules %d, scoped %d, uid %d (dropped %d)\n", label, abi, fs, sc, uid,
                   dropped);
            if (abi >= 1) CHECK(st, fs == 1, "%s: Landlock ABI %d but no file rules", label, abi);
            else printf("SKIP %s: Landlock unavailable on this host\n", label);
            if (abi >= 6) CHECK(st, sc == 1, "%s: Landlock ABI %d but no scoping", label, abi);
            if (expect_uid >= 0) CHECK(st, uid == expect_uid, "%s: uid %d, want %d", label, uid, expect_uid);
            ll_fs = fs;
            /* what the kernel says, from outside */
            kf_confine_facts o;
            CHECK(st, kf_confine_observe(pid, &o) == 0, "%s: observe", label);
            CHECK(st, o.seccomp == 1, "%s: /proc says Seccomp is not 2", label);
            CHECK(st, o.no_new_privs == 1, "%s: /proc says NoNewPrivs is not 1", label);
            CHECK(st, o.caps_dropped == 1, "%s: /proc says CapEff is not 0", label);
            if (expect_uid >= 0) CHECK(st, o.uid == expect_uid, "%s: /proc uid %d, want %d", label, o.uid, expect_uid);
        } else if (!strcmp(line, "DONE")) {
            got_done = 1;
            break;
        } else {
            char verdict[8] = "", name[64] = "";
            int off = 0;
            sscanf(line, "%7s %63s %n", verdict, name, &off);
            if (!strcmp(verdict, "PASS")) t.pass++;
            else if (!strcmp(verdict, "SKIP")) {
                t.skip++;
                printf("SKIP %s %s: %s\n", label, name, line + off);
            } else {
                t.fail++;
            }
            CHECK(st, strcmp(verdict, "FAIL") != 0, "%s %s: %s", label, name, line + off);
        }
    }
    (void)ll_fs;
    CHECK(st, got_done, "%s: the child did not finish its checks", label);
    close(go[1]);
    if (in) fclose(in);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(st, WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: child status 0x%x", label, status);
    printf("%s: %d checks passed, %d skipped, %d failed\n", label, t.pass, t.skip, t.fail);
}

static void base_spec(kf_confine_spec *s, kf_confine_profile prof, int drop)
{
    memset(s, 0, sizeof(*s));
    s->profile = prof;
    s->drop_uid = drop;
    s->nofile = 64;
    kf_confine_default_reads(s);
    kf_confine_add_path(s->read_paths, allowed);
    kf_confine_add_path(s->read_paths, rodir);
}

static int in_list(const char *const *l, const char *p)
{
    for (int i = 0; l[i]; i++)
        if (!strcmp(l[i], p)) return 1;
    return 0;
}

int main(void)
{
    kf_test_state st = {0, 0};
    snprintf(tdir, sizeof(tdir), "/tmp/kf-confine-XXXXXX");
    if (!mkdtemp(tdir)) {
        perror("mkdtemp");
        return 1;
    }
    chmod(tdir, 0755); /* a dropped uid must be able to reach the allowed folders */
    snprintf(allowed, sizeof(allowed), "%s/allowed", tdir);
    snprintf(rodir, sizeof(rodir), "%s/ro", tdir);
    snprintf(secretdir, sizeof(secretdir), "%s/secret", tdir);
    snprintf(secret, sizeof(secret), "%s/xyz", secretdir);
    snprintf(okfile, sizeof(okfile), "%s/ok.txt", allowed);
    mkdir(allowed, 0755);
    mkdir(rodir, 0777); /* writable by anyone: only Landlock keeps writes out */
    chmod(rodir, 0777);
    mkdir(secretdir, 0755);
    kf_util_write_file(okfile, "allowed\n", 8);
    kf_util_write_file(secret, "fleet-key-material\n", 19);
    chmod(secret, 0644); /* readable by every uid: only Landlock keeps it out */

    /* allow-lists */
    kf_confine_spec s;
    base_spec(&s, KF_CONFINE_RUNNER, 1);
    CHECK(&st, in_list(s.read_paths, "/usr") && in_list(s.read_paths, "/proc/self"), "default reads lack /usr or /proc/self");
    CHECK(&st, !in_list(s.read_paths, "/etc") && !in_list(s.read_paths, "/tmp"), "default reads include /etc or /tmp");
    CHECK(&st, in_list(s.write_paths, "/dev/null"), "default writes lack /dev/null");
    int n1 = kf_confine_default_reads(&s), n2 = kf_confine_default_reads(&s);
    CHECK(&st, n1 > 0 && n1 == n2, "default reads not idempotent: %d then %d", n1, n2);

    /* an unconfined process, observed */
    kf_confine_facts me;
    CHECK(&st, kf_confine_observe(getpid(), &me) == 0 && me.seccomp == 0, "observe self: seccomp %d", me.seccomp);
    CHECK(&st, kf_confine_observe(0x7ffffff0, &me) == -1, "observe of a missing pid succeeds");

    int root = geteuid() == 0;
    uid_t tu = 0;
    gid_t tg = 0;
    kf_confine_target_ids(&tu, &tg);
    run_child(&st, "runner", &s, runner_checks, root ? (int)tu : (int)geteuid());
    if (root) {
        /* uid 0 kept, capabilities dropped: root-owned files are readable by
         * owner bits, so Landlock alone must keep the secret out */
        chmod(secret, 0600);
        base_spec(&s, KF_CONFINE_RUNNER, 0);
        run_child(&st, "runner-as-root", &s, runner_checks, 0);
        chmod(secret, 0644);
    } else {
        printf("SKIP runner-as-root: not running as root (uid switch not exercised)\n");
    }
    base_spec(&s, KF_CONFINE_COMPILER, 0);
    run_child(&st, "compiler", &s, compiler_checks, -1);

    /* an invalid spec is refused before anything happens */
    kf_confine_spec bad;
    memset(&bad, 0, sizeof(bad));
    char err[128] = "";
    kf_confine_facts f;
    CHECK(&st, kf_confine_apply(&bad, &f, err, sizeof(err)) == -1 && err[0], "invalid profile accepted");

    kf_util_rmtree(tdir);
    return kf_test_done(&st);
}
