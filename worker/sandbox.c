/*
 * sandbox.c -- fork, confine, run a callback, and report how it went.
 * See sandbox.h for the contract.
 *
 * Parent side is a poll loop over two pipes (report, stdout+stderr) with a
 * 50 ms period: it drains both (capped; excess is read and dropped so the
 * child never blocks), reaps the child with waitpid(WNOHANG), enforces the
 * wall-clock limit and calls tick() about once a second. Whatever happens,
 * the child's process group is SIGKILLed before returning, so helpers the
 * candidate forked do not outlive the evaluation. Only descriptors the child
 * inherited on purpose survive in it: the pipes are created O_CLOEXEC and the
 * child closes everything above the report descriptor.
 *
 * Child side confinement is in confine(); the first line it writes on the
 * report descriptor ("#sandbox landlock=L net=N\n") tells the parent which of
 * the best-effort measures took effect.
 */
#define _GNU_SOURCE
#include "sandbox.h"
#include "kf_util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef __has_include
#if __has_include(<linux/landlock.h>)
#include <linux/landlock.h>
#define KF_HAVE_LANDLOCK 1
#endif
#endif

#define SANDBOX_HDR "#sandbox "

int kf_sandbox_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int kf_sandbox_exec(char *const argv[])
{
    execvp(argv[0], argv);
    int e = errno;
    dprintf(2, "exec %s failed: %s\n", argv[0], strerror(e));
    return e == ENOENT ? 127 : 126;
}

/* ---- child-side confinement ---- */

#ifdef KF_HAVE_LANDLOCK
static int ll_add_path(int ruleset, const char *path, uint64_t access)
{
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0) return -1;
    struct landlock_path_beneath_attr pb = {.allowed_access = access, .parent_fd = fd};
    int rc = (int)syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
    close(fd);
    return rc;
}
#endif

/* Allow writes only beneath scratch, write_dirs and /dev/null. Returns 1 if a
 * ruleset is enforced, 0 if the kernel lacks Landlock. */
static int landlock_writes(const char *scratch, const char *const *write_dirs)
{
#ifdef KF_HAVE_LANDLOCK
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    if (abi < 1) return 0;
    uint64_t wr = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
                  LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR |
                  LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
                  LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |
                  LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;
#ifdef LANDLOCK_ACCESS_FS_REFER
    if (abi >= 2) wr |= LANDLOCK_ACCESS_FS_REFER;
#endif
#ifdef LANDLOCK_ACCESS_FS_TRUNCATE
    if (abi >= 3) wr |= LANDLOCK_ACCESS_FS_TRUNCATE;
#endif
    struct landlock_ruleset_attr ra = {.handled_access_fs = wr};
    int rs = (int)syscall(SYS_landlock_create_ruleset, &ra, sizeof(ra), 0);
    if (rs < 0) return 0;
    int ok = ll_add_path(rs, scratch, wr) == 0;
    for (int i = 0; ok && write_dirs && write_dirs[i]; i++) ok = ll_add_path(rs, write_dirs[i], wr) == 0;
    /* file rules may carry only file rights */
    uint64_t fwr = LANDLOCK_ACCESS_FS_WRITE_FILE;
#ifdef LANDLOCK_ACCESS_FS_TRUNCATE
    if (abi >= 3) fwr |= LANDLOCK_ACCESS_FS_TRUNCATE;
#endif
    ll_add_path(rs, "/dev/null", fwr);
    if (ok && syscall(SYS_landlock_restrict_self, rs, 0) == 0) {
        close(rs);
        return 1;
    }
    close(rs);
#endif
    return 0;
}

/* New network namespace: only loopback (down) is visible. Root can unshare
 * directly; others need a user namespace, which some hosts forbid. */
static int isolate_network(void)
{
    if (unshare(CLONE_NEWNET) == 0) return 1;
    if (unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0) return 1;
    return 0;
}

static void scrub_env(const char *scratch)
{
    char path[4096] = "/usr/local/bin:/usr/bin:/bin", omp[64] = "";
    const char *p = getenv("PATH");
    if (p && strlen(p) < sizeof(path)) snprintf(path, sizeof(path), "%s", p);
    const char *o = getenv("OMP_NUM_THREADS");
    if (o && strlen(o) < sizeof(omp)) snprintf(omp, sizeof(omp), "%s", o);
    clearenv();
    setenv("PATH", path, 1);
    setenv("HOME", scratch, 1);
    setenv("TMPDIR", scratch, 1);
    setenv("LANG", "C", 1);
    setenv("LC_ALL", "C", 1);
    setenv("OMP_WAIT_POLICY", "passive", 1);
    if (omp[0]) setenv("OMP_NUM_THREADS", omp, 1);
}

static void close_from(int lowfd)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)lowfd, ~0U, 0) == 0) return;
#endif
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 65536) max = 65536;
    for (int fd = lowfd; fd < max; fd++) close(fd);
}

static void child_main(const kf_sandbox_req *req, pid_t parent, int rep_w, int out_w)
{
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126); /* the parent already died */

    /* Default dispositions, nothing blocked: the worker may ignore SIGPIPE or
     * block signals for its own threads. */
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP) signal(s, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);

    int devnull = open("/dev/null", O_RDONLY);
    if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(out_w, 1) < 0 || dup2(out_w, 2) < 0 ||
        dup2(rep_w, KF_SANDBOX_REPORT_FD) < 0)
        _exit(125);
    close_from(KF_SANDBOX_REPORT_FD + 1);

    struct rlimit rl = {0, 0};
    setrlimit(RLIMIT_CORE, &rl);
    rl.rlim_cur = rl.rlim_max = req->fsize_limit ? req->fsize_limit : (64u << 20);
    setrlimit(RLIMIT_FSIZE, &rl);

    scrub_env(req->scratch_dir);
    if (chdir(req->scratch_dir) != 0) {
        dprintf(2, "sandbox: chdir %s: %s\n", req->scratch_dir, strerror(errno));
        _exit(125);
    }
    int net = 0, ll = 0;
    if (!req->no_isolation) {
        net = isolate_network();
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        ll = landlock_writes(req->scratch_dir, req->write_dirs);
    }
    dprintf(KF_SANDBOX_REPORT_FD, SANDBOX_HDR "landlock=%d net=%d\n", ll, net);
    int rc = req->fn(req->arg, KF_SANDBOX_REPORT_FD);
    _exit(rc & 0xff);
}

/* ---- parent side ---- */

typedef struct {
    char *buf;
    size_t len, cap, limit;
    int truncated, eof;
} sink;

/* Read what is available from fd into s (keeping at most s->limit bytes). */
static void drain(int fd, sink *s)
{
    char tmp[65536];
    for (;;) {
        ssize_t r = read(fd, tmp, sizeof(tmp));
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) {
            s->eof = 1;
            return;
        }
        if (r < 0) {
            if (errno != EAGAIN) s->eof = 1;
            return;
        }
        size_t keep = (size_t)r;
        if (s->len + keep > s->limit) {
            keep = s->limit > s->len ? s->limit - s->len : 0;
            s->truncated = 1;
        }
        if (keep) {
            if (s->len + keep + 1 > s->cap) {
                size_t nc = s->cap ? s->cap : 4096;
                while (nc < s->len + keep + 1) nc *= 2;
                char *nb = realloc(s->buf, nc);
                if (!nb) {
                    s->truncated = 1;
                    continue;
                }
                s->buf = nb;
                s->cap = nc;
            }
            memcpy(s->buf + s->len, tmp, keep);
            s->len += keep;
        }
    }
}

static char *sink_take(sink *s, size_t *len)
{
    if (!s->buf) s->buf = calloc(1, 1);
    if (s->buf) s->buf[s->len] = 0;
    if (len) *len = s->len;
    char *b = s->buf;
    s->buf = NULL;
    return b;
}

static void kill_group(pid_t pid)
{
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
}

int kf_sandbox_run(const kf_sandbox_req *req, kf_sandbox_res *res)
{
    memset(res, 0, sizeof(*res));
    if (!req || !req->fn || !req->scratch_dir || req->timeout_s <= 0) {
        res->how = KF_SANDBOX_FAILED;
        snprintf(res->err, sizeof(res->err), "sandbox: invalid request");
        return -1;
    }
    int rep[2], out[2];
    if (pipe2(rep, O_CLOEXEC) < 0) {
        res->how = KF_SANDBOX_FAILED;
        snprintf(res->err, sizeof(res->err), "sandbox: pipe: %s", strerror(errno));
        return -1;
    }
    if (pipe2(out, O_CLOEXEC) < 0) {
        res->how = KF_SANDBOX_FAILED;
        snprintf(res->err, sizeof(res->err), "sandbox: pipe: %s", strerror(errno));
        close(rep[0]);
        close(rep[1]);
        return -1;
    }
    fflush(NULL); /* don't let the child re-flush our stdio buffers */
    pid_t parent = getpid();
    double t0 = kf_util_now_s();
    pid_t pid = fork();
    if (pid < 0) {
        res->how = KF_SANDBOX_FAILED;
        snprintf(res->err, sizeof(res->err), "sandbox: fork: %s", strerror(errno));
        close(rep[0]); close(rep[1]); close(out[0]); close(out[1]);
        return -1;
    }
    if (pid == 0) child_main(req, parent, rep[1], out[1]); /* never returns */

    setpgid(pid, pid); /* also done by the child; whichever runs first wins */
    close(rep[1]);
    close(out[1]);
    fcntl(rep[0], F_SETFL, O_NONBLOCK);
    fcntl(out[0], F_SETFL, O_NONBLOCK);

    sink srep = {.limit = req->report_cap ? req->report_cap : (8u << 20)};
    sink sout = {.limit = req->output_cap ? req->output_cap : (64u << 10)};
    double deadline = t0 + req->timeout_s, next_tick = t0 + 1.0;
    int status = 0, reaped = 0;
    res->how = KF_SANDBOX_EXITED;

    while (!reaped) {
        struct pollfd pf[2] = {{.fd = srep.eof ? -1 : rep[0], .events = POLLIN},
                               {.fd = sout.eof ? -1 : out[0], .events = POLLIN}};
        poll(pf, 2, 50);
        if (!srep.eof) drain(rep[0], &srep);
        if (!sout.eof) drain(out[0], &sout);
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) {
            reaped = 1;
            break;
        }
        double now = kf_util_now_s();
        if (now >= deadline) {
            res->how = KF_SANDBOX_TIMEOUT;
            break;
        }
        if (req->tick && now >= next_tick) {
            next_tick = now + 1.0;
            if (req->tick(req->tick_arg)) {
                res->how = KF_SANDBOX_CANCELLED;
                break;
            }
        }
    }
    /* Kill whatever is left of the group (helpers the candidate forked, or
     * the child itself on timeout/cancel), then reap. */
    kill_group(pid);
    if (!reaped) {
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
    }
    /* Final drain: the child is gone; a grandchild that escaped the group
     * could still hold the pipes, so stop at EAGAIN rather than wait for EOF. */
    drain(rep[0], &srep);
    drain(out[0], &sout);
    close(rep[0]);
    close(out[0]);
    res->wall_s = kf_util_now_s() - t0;

    if (res->how == KF_SANDBOX_EXITED) {
        if (WIFSIGNALED(status)) {
            res->how = KF_SANDBOX_SIGNALED;
            res->signal = WTERMSIG(status);
        } else {
            res->exit_status = WEXITSTATUS(status);
        }
    }
    res->report_truncated = srep.truncated;
    res->output_truncated = sout.truncated;
    res->report = sink_take(&srep, &res->report_len);
    res->output = sink_take(&sout, &res->output_len);
    if (!res->report || !res->output) {
        free(res->report);
        free(res->output);
        res->report = res->output = NULL;
        res->how = KF_SANDBOX_FAILED;
        snprintf(res->err, sizeof(res->err), "sandbox: out of memory");
        return -1;
    }
    /* Strip the confinement header line. */
    size_t hl = strlen(SANDBOX_HDR);
    if (res->report_len >= hl && !memcmp(res->report, SANDBOX_HDR, hl)) {
        char *nl = memchr(res->report, '\n', res->report_len);
        if (nl) {
            int ll = 0, net = 0;
            if (sscanf(res->report + hl, "landlock=%d net=%d", &ll, &net) == 2) {
                res->landlocked = ll;
                res->net_isolated = net;
            }
            size_t cut = (size_t)(nl + 1 - res->report);
            memmove(res->report, nl + 1, res->report_len - cut + 1);
            res->report_len -= cut;
        }
    }
    return 0;
}

void kf_sandbox_res_free(kf_sandbox_res *res)
{
    if (!res) return;
    free(res->report);
    free(res->output);
    res->report = res->output = NULL;
}
