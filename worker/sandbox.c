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
 * Child side: the network namespace here, everything else through
 * worker/confine.c (kf_confine_apply for req->confine, else the write-only
 * kf_confine_landlock). The first line the child writes on the report
 * descriptor ("#sandbox landlock=L net=N confine=C ...\n", or "#sandbox
 * confine-failed WHY\n") tells the parent which measures took effect.
 */
#define _GNU_SOURCE
#include "sandbox.h"
#include "confine.h"
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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
    /* the program never sees the report descriptor: only this function can
     * write the exec-failed line there */
    fcntl(KF_SANDBOX_REPORT_FD, F_SETFD, FD_CLOEXEC);
    execvp(argv[0], argv);
    int e = errno;
    dprintf(2, "exec %s failed: %s\n", argv[0], strerror(e));
    dprintf(KF_SANDBOX_REPORT_FD, KF_SANDBOX_EXEC_FAILED "%d\n", e ? e : EIO);
    return e == ENOENT ? 127 : 126;
}

int kf_sandbox_exec_failed(const kf_sandbox_res *res)
{
    size_t l = strlen(KF_SANDBOX_EXEC_FAILED);
    if (!res || !res->report || res->report_len < l || memcmp(res->report, KF_SANDBOX_EXEC_FAILED, l) != 0)
        return 0;
    int e = atoi(res->report + l);
    return e > 0 ? e : EIO;
}

/* ---- child-side confinement ---- */

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

void kf_sandbox_close_from(int lowfd)
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
    kf_sandbox_close_from(KF_SANDBOX_REPORT_FD + 1);

    struct rlimit rl = {0, 0};
    setrlimit(RLIMIT_CORE, &rl);
    rl.rlim_cur = rl.rlim_max = req->fsize_limit ? req->fsize_limit : (64u << 20);
    setrlimit(RLIMIT_FSIZE, &rl);

    if (chdir(req->scratch_dir) != 0) {
        dprintf(2, "sandbox: chdir %s: %s\n", req->scratch_dir, strerror(errno));
        _exit(125);
    }
    int net = 0, ll = 0;
    if (!req->no_isolation) net = isolate_network();
    if (req->confine) {
        /* the caller's spec plus scratch and write_dirs as write paths; the
         * strings belong to req, alive as long as this child */
        kf_confine_spec spec = *req->confine;
        spec.read_paths[KF_CONFINE_MAX_PATHS - 1] = NULL;
        spec.write_paths[KF_CONFINE_MAX_PATHS - 1] = NULL;
        int nw = 0;
        while (spec.write_paths[nw]) nw++;
        int overflow = 0;
        const char *extra[KF_CONFINE_MAX_PATHS + 1];
        int ne = 0;
        extra[ne++] = req->scratch_dir;
        for (int i = 0; req->write_dirs && req->write_dirs[i] && ne < KF_CONFINE_MAX_PATHS; i++)
            extra[ne++] = req->write_dirs[i];
        for (int i = 0; i < ne; i++) {
            if (nw >= KF_CONFINE_MAX_PATHS - 1) {
                overflow = 1;
                break;
            }
            spec.write_paths[nw++] = extra[i];
            spec.write_paths[nw] = NULL;
        }
        if (!spec.fsize_bytes) spec.fsize_bytes = req->fsize_limit ? req->fsize_limit : (64u << 20);
        kf_confine_facts f;
        char err[200] = "";
        if (overflow) snprintf(err, sizeof(err), "too many write paths");
        if (overflow || kf_confine_apply(&spec, &f, err, sizeof(err)) != 0) {
            for (char *c = err; *c; c++)
                if (*c == '\n') *c = ' ';
            dprintf(KF_SANDBOX_REPORT_FD, SANDBOX_HDR "confine-failed %s\n", err);
            _exit(125);
        }
        ll = f.landlock_fs;
        dprintf(KF_SANDBOX_REPORT_FD,
                SANDBOX_HDR "landlock=%d net=%d confine=1 ll_abi=%d ll_fs=%d ll_scoped=%d seccomp=%d nnp=%d "
                            "uid_dropped=%d uid=%d rlimits=%d caps_dropped=%d\n",
                ll, net, f.landlock_abi, f.landlock_fs, f.landlock_scoped, f.seccomp, f.no_new_privs,
                f.uid_dropped, f.uid, f.rlimits, f.caps_dropped);
    } else {
        if (!req->no_isolation) {
            prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
            const char *w[KF_CONFINE_MAX_PATHS + 2];
            int n = 0;
            w[n++] = req->scratch_dir;
            for (int i = 0; req->write_dirs && req->write_dirs[i] && n < KF_CONFINE_MAX_PATHS; i++)
                w[n++] = req->write_dirs[i];
            w[n++] = "/dev/null";
            w[n] = NULL;
            char err[200];
            ll = kf_confine_landlock(NULL, w, 0, NULL, err, sizeof(err)) == 1;
        }
        dprintf(KF_SANDBOX_REPORT_FD, SANDBOX_HDR "landlock=%d net=%d confine=0\n", ll, net);
    }
    scrub_env(req->scratch_dir);
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

/* The wall-clock limit and the tick, checked once per wait-loop turn: 1 (and
 * res->how set) when the wait must end, else 0. */
static int limit_reached(const kf_sandbox_req *req, double deadline, double *next_tick, kf_sandbox_res *res)
{
    double now = kf_util_now_s();
    if (now >= deadline) {
        res->how = KF_SANDBOX_TIMEOUT;
        return 1;
    }
    if (req->tick && now >= *next_tick) {
        *next_tick = now + 1.0;
        if (req->tick(req->tick_arg)) {
            res->how = KF_SANDBOX_CANCELLED;
            return 1;
        }
    }
    return 0;
}

/* Hand the report and output sinks over to res; -1 (how = FAILED, both
 * freed) when out of memory. */
static int take_sinks(sink *srep, sink *sout, kf_sandbox_res *res)
{
    res->report_truncated = srep->truncated;
    res->output_truncated = sout->truncated;
    res->report = sink_take(srep, &res->report_len);
    res->output = sink_take(sout, &res->output_len);
    if (res->report && res->output) return 0;
    free(res->report);
    free(res->output);
    res->report = res->output = NULL;
    res->how = KF_SANDBOX_FAILED;
    snprintf(res->err, sizeof(res->err), "sandbox: out of memory");
    return -1;
}

/* A child that exited by itself (how still EXITED): SIGNALED with its
 * signal, or its exit status, from waitpid's status. */
static void set_exit(kf_sandbox_res *res, int status)
{
    if (res->how != KF_SANDBOX_EXITED) return;
    if (WIFSIGNALED(status)) {
        res->how = KF_SANDBOX_SIGNALED;
        res->signal = WTERMSIG(status);
    } else {
        res->exit_status = WEXITSTATUS(status);
    }
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
    if (req->confine && req->confine->drop_uid && geteuid() == 0) {
        /* the child will run as KFARM_RUNNER_UID: its scratch must be its own */
        uid_t u;
        gid_t g;
        if (kf_confine_target_ids(&u, &g) != 0 || chown(req->scratch_dir, u, g) != 0) {
            res->how = KF_SANDBOX_FAILED;
            snprintf(res->err, sizeof(res->err), "sandbox: cannot hand %s to the runner uid: %s", req->scratch_dir,
                     strerror(errno));
            close(rep[0]); close(rep[1]); close(out[0]); close(out[1]);
            return -1;
        }
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
    int status = 0, reaped = 0, observe_tried = 0;
    res->how = KF_SANDBOX_EXITED;
    /* readable when the child exits: once both pipes are at EOF the loop
     * wakes for the exit itself, not 50 ms later (a `cc --version` took
     * 50 ms more than it runs, three times per evaluation) */
    int pidfd = -1;
#ifdef SYS_pidfd_open
    pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
#endif

    while (!reaped) {
        struct pollfd pf[3] = {{.fd = srep.eof ? -1 : rep[0], .events = POLLIN},
                               {.fd = sout.eof ? -1 : out[0], .events = POLLIN},
                               {.fd = pidfd, .events = POLLIN}};
        poll(pf, 3, srep.eof && sout.eof && pidfd < 0 ? 2 : 50);
        if (!srep.eof) drain(rep[0], &srep);
        if (!sout.eof) drain(out[0], &sout);
        if (req->confine && !observe_tried && srep.len > 0 && memchr(srep.buf, '\n', srep.len)) {
            /* the header is out: the child is confined (or failed to be).
             * Ask the kernel, not the child; it may already be gone. */
            observe_tried = 1;
            res->observed = kf_confine_observe(pid, &res->observed_facts) == 0;
        }
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) {
            reaped = 1;
            break;
        }
        if (req->detach_on_report_eof && srep.eof) {
            /* the report is complete: the child's exit is left to overlap */
            res->detached_pid = pid;
            break;
        }
        if (limit_reached(req, deadline, &next_tick, res)) break;
    }
    if (pidfd >= 0) close(pidfd);
    /* Kill whatever is left of the group (helpers the candidate forked, or
     * the child itself on timeout/cancel), then reap. */
    kill_group(pid);
    if (!reaped && !res->detached_pid) {
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

    set_exit(res, status);
    if (take_sinks(&srep, &sout, res) != 0) return -1;
    /* Strip the confinement header line. */
    size_t hl = strlen(SANDBOX_HDR);
    if (res->report_len >= hl && !memcmp(res->report, SANDBOX_HDR, hl)) {
        char *nl = memchr(res->report, '\n', res->report_len);
        if (nl) {
            int ll = 0, net = 0, conf = 0;
            const char *h = res->report + hl;
            static const char failed[] = "confine-failed ";
            if (!strncmp(h, failed, sizeof(failed) - 1)) {
                res->confine_failed = 1;
                size_t l = (size_t)(nl - h) - (sizeof(failed) - 1);
                if (l >= sizeof(res->err)) l = sizeof(res->err) - 1;
                snprintf(res->err, sizeof(res->err), "%.*s", (int)l, h + sizeof(failed) - 1);
            } else if (sscanf(h, "landlock=%d net=%d confine=%d", &ll, &net, &conf) >= 2) {
                res->landlocked = ll;
                res->net_isolated = net;
                kf_confine_facts *f = &res->confine;
                if (conf == 1 &&
                    sscanf(h, "landlock=%*d net=%*d confine=1 ll_abi=%d ll_fs=%d ll_scoped=%d seccomp=%d nnp=%d "
                              "uid_dropped=%d uid=%d rlimits=%d caps_dropped=%d",
                           &f->landlock_abi, &f->landlock_fs, &f->landlock_scoped, &f->seccomp, &f->no_new_privs,
                           &f->uid_dropped, &f->uid, &f->rlimits, &f->caps_dropped) == 9)
                    res->confined = 1;
                else
                    memset(f, 0, sizeof(*f));
            }
            size_t cut = (size_t)(nl + 1 - res->report);
            memmove(res->report, nl + 1, res->report_len - cut + 1);
            res->report_len -= cut;
        }
    }
    return 0;
}

void kf_sandbox_reap(int pid, int (*tick)(void *arg), void *tick_arg)
{
    if (pid <= 0) return;
    if (!tick) {
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
        }
        return;
    }
    for (;;) {
        pid_t w = waitpid(pid, NULL, WNOHANG);
        if (w == pid || (w < 0 && errno != EINTR)) return;
        tick(tick_arg);
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

void kf_sandbox_res_free(kf_sandbox_res *res)
{
    if (!res) return;
    free(res->report);
    free(res->output);
    res->report = res->output = NULL;
}

/* ---- serving child (kf_sandbox_srv_*) ---- */

#define SRV_ACCEPTED SANDBOX_HDR "accepted\n"
#define SRV_DONE SANDBOX_HDR "done\n"

void kf_sandbox_srv_done(int report_fd)
{
    kf_sandbox_write_all(report_fd, SRV_DONE, strlen(SRV_DONE));
    close(report_fd);
}

int kf_sandbox_srv_start(const kf_sandbox_req *req, kf_sandbox_srv *s, char *err, size_t cap)
{
    memset(s, 0, sizeof(*s));
    s->ctl = s->out = -1;
    if (!req || !req->fn || !req->scratch_dir || req->timeout_s <= 0) {
        snprintf(err, cap, "sandbox: invalid request");
        return -1;
    }
    int sp[2], out[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
        snprintf(err, cap, "sandbox: socketpair: %s", strerror(errno));
        return -1;
    }
    if (pipe2(out, O_CLOEXEC) < 0) {
        snprintf(err, cap, "sandbox: pipe: %s", strerror(errno));
        close(sp[0]);
        close(sp[1]);
        return -1;
    }
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, cap, "sandbox: fork: %s", strerror(errno));
        close(sp[0]); close(sp[1]); close(out[0]); close(out[1]);
        return -1;
    }
    if (pid == 0) child_main(req, parent, sp[1], out[1]); /* never returns */
    setpgid(pid, pid);
    close(sp[1]);
    close(out[1]);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    s->pid = pid;
    s->ctl = sp[0];
    s->out = out[0];
    /* the header line: which isolation took effect */
    struct pollfd pf = {.fd = s->ctl, .events = POLLIN};
    char line[512];
    ssize_t n = -1;
    if (poll(&pf, 1, (int)(req->timeout_s * 1000)) == 1) n = recv(s->ctl, line, sizeof(line) - 1, 0);
    if (n <= 0) {
        snprintf(err, cap, "sandbox: the serving child did not start (%s)", n == 0 ? "it ended" : "no header");
        kf_sandbox_srv_stop(s);
        return -1;
    }
    line[n] = 0;
    size_t hl = strlen(SANDBOX_HDR);
    if (strncmp(line, SANDBOX_HDR, hl) != 0 || !strncmp(line + hl, "confine-failed ", 15)) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        snprintf(err, cap, "sandbox: the serving child failed to start: %s", line);
        kf_sandbox_srv_stop(s);
        return -1;
    }
    sscanf(line + hl, "landlock=%d net=%d", &s->landlocked, &s->net_isolated);
    return 0;
}

int kf_sandbox_srv_next(int ctl_fd, char *buf, size_t cap, size_t *len, int *report_fd)
{
    *report_fd = -1;
    *len = 0;
    for (;;) {
        char cbuf[CMSG_SPACE(sizeof(int))];
        struct iovec iov = {.iov_base = buf, .iov_len = cap - 1};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
        ssize_t n = recvmsg(ctl_fd, &mh, MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR) continue;
        if (n == 0) return 0;
        if (n < 0) return -1;
        int fd = -1;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
                memcpy(&fd, CMSG_DATA(c), sizeof(int));
        if (fd < 0 || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
            if (fd >= 0) close(fd);
            return -1;
        }
        buf[n] = 0;
        *len = (size_t)n;
        *report_fd = fd;
        kf_sandbox_write_all(fd, SRV_ACCEPTED, strlen(SRV_ACCEPTED));
        return 1;
    }
}

void kf_sandbox_srv_stop(kf_sandbox_srv *s)
{
    if (!s) return;
    if (s->ctl >= 0) close(s->ctl);
    s->ctl = -1;
    if (s->pid > 0) {
        int st;
        pid_t w = 0;
        for (int i = 0; i < 200 && (w = waitpid(s->pid, &st, WNOHANG)) == 0; i++) {
            struct timespec ts = {0, 10 * 1000000L};
            nanosleep(&ts, NULL);
        }
        kill_group(s->pid);
        if (w == 0)
            while (waitpid(s->pid, &st, 0) < 0 && errno == EINTR) {
            }
    }
    s->pid = 0;
    if (s->out >= 0) close(s->out);
    s->out = -1;
}

/* The child is gone or must go: kill its group and reap; fill how/status. */
static void srv_end(kf_sandbox_srv *s, kf_sandbox_res *res, int reaped, int status)
{
    kill_group(s->pid);
    if (!reaped)
        while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR) {
        }
    set_exit(res, status);
    s->pid = 0;
    kf_sandbox_srv_stop(s);
}

int kf_sandbox_srv_call(kf_sandbox_srv *s, const void *msg, size_t len, const kf_sandbox_req *req,
                        kf_sandbox_res *res)
{
    memset(res, 0, sizeof(*res));
    res->how = KF_SANDBOX_FAILED;
    res->not_served = 1;
    if (!s || s->pid <= 0 || s->ctl < 0 || !req || req->timeout_s <= 0 || len > KF_SANDBOX_SRV_MSG) {
        snprintf(res->err, sizeof(res->err), "sandbox: no serving child");
        return -1;
    }
    int rep[2];
    if (pipe2(rep, O_CLOEXEC) < 0) {
        snprintf(res->err, sizeof(res->err), "sandbox: pipe: %s", strerror(errno));
        return -1;
    }
    char cbuf[CMSG_SPACE(sizeof(int))];
    memset(cbuf, 0, sizeof(cbuf));
    struct iovec iov = {.iov_base = (void *)msg, .iov_len = len};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &rep[1], sizeof(int));
    ssize_t sent;
    while ((sent = sendmsg(s->ctl, &mh, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
    }
    close(rep[1]); /* the child holds the only write end now */
    double t0 = kf_util_now_s();
    if (sent != (ssize_t)len) {
        snprintf(res->err, sizeof(res->err), "sandbox: the serving child is gone (%s)", strerror(errno));
        close(rep[0]);
        kf_sandbox_srv_stop(s);
        return -1;
    }
    fcntl(rep[0], F_SETFL, O_NONBLOCK);
    sink srep = {.limit = req->report_cap ? req->report_cap : (8u << 20)};
    sink sout = {.limit = req->output_cap ? req->output_cap : (64u << 10)};
    double deadline = t0 + req->timeout_s, next_tick = t0 + 1.0;
    int status = 0, reaped = 0;
    res->how = KF_SANDBOX_EXITED;
    for (;;) {
        struct pollfd pf[2] = {{.fd = rep[0], .events = POLLIN}, {.fd = s->out, .events = POLLIN}};
        poll(pf, 2, 50);
        drain(rep[0], &srep);
        sout.eof = 0; /* the output pipe outlives this request */
        drain(s->out, &sout);
        if (srep.eof) break; /* report closed: served, or the child died */
        pid_t w = waitpid(s->pid, &status, WNOHANG);
        if (w == s->pid) {
            reaped = 1;
            break;
        }
        if (limit_reached(req, deadline, &next_tick, res)) break;
    }
    size_t al = strlen(SRV_ACCEPTED), dl = strlen(SRV_DONE);
    int accepted = srep.len >= al && !memcmp(srep.buf, SRV_ACCEPTED, al);
    int done = srep.len >= al + dl && !memcmp(srep.buf + srep.len - dl, SRV_DONE, dl);
    int alive = !reaped && res->how == KF_SANDBOX_EXITED && done;
    if (!reaped && res->how == KF_SANDBOX_EXITED && !done) {
        /* EOF without the done line: the child died (its descriptors close
         * before it can be reaped: give it a second), or it closed the
         * report without finishing it -- either way it serves no more */
        for (int i = 0; i < 100 && !reaped; i++) {
            if (waitpid(s->pid, &status, WNOHANG) == s->pid) reaped = 1;
            else {
                struct timespec ts = {0, 10 * 1000000L};
                nanosleep(&ts, NULL);
            }
        }
    }
    if (!alive) {
        drain(rep[0], &srep);
        srv_end(s, res, reaped, status);
    } else {
        s->served++;
    }
    close(rep[0]);
    res->wall_s = kf_util_now_s() - t0;
    if (take_sinks(&srep, &sout, res) != 0) return -1;
    if (!accepted) {
        res->how = KF_SANDBOX_FAILED;
        snprintf(res->err, sizeof(res->err), "sandbox: the serving child ended before taking the request");
        if (s->pid > 0) kf_sandbox_srv_stop(s);
        return -1;
    }
    res->not_served = 0;
    if (done) res->report_len -= dl;
    res->report[res->report_len] = 0;
    memmove(res->report, res->report + al, res->report_len - al + 1);
    res->report_len -= al;
    res->landlocked = s->landlocked;
    res->net_isolated = s->net_isolated;
    return 0;
}
