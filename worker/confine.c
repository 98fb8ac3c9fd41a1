/*
 * confine.c -- identity, Landlock, seccomp and rlimits for a process about
 * to run code we did not write. See confine.h for the contract.
 *
 * Landlock is driven by raw syscalls with our own copies of the UAPI structs
 * and constants (Debian 12's linux-libc-dev stops at ABI 2): ABI 3 TRUNCATE,
 * ABI 4 TCP bind/connect (handled, no rule: no TCP), ABI 5 IOCTL_DEV
 * (granted only beneath write paths, where /dev/nvidia* live), ABI 6 signal
 * and abstract-unix-socket scoping. Every right is masked to what the
 * running kernel's ABI knows, so an older kernel gets the subset it has.
 * This is the only Landlock implementation in the worker: sandbox.c's
 * write-only ruleset is kf_confine_landlock with read_paths NULL.
 *
 * seccomp is built with libseccomp. Syscalls of another ABI (i386 through
 * int 0x80, x32) kill the process. "Unless arg0 is X" rules are written as
 * deny rules over the complement of the allowed values, split into ranges
 * (LE / GE) and aligned power-of-two blocks (MASKED_EQ), because libseccomp
 * refuses two comparisons on one argument in one rule. Comparisons are on
 * the full 64-bit register: any value whose low 32 bits (what the kernel
 * uses for a pid) differ from an allowed pid is itself a different 64-bit
 * value, so it is denied too (a negative pid is allowed in both its
 * zero- and sign-extended forms, which name the same thing to the kernel).
 */
#define _GNU_SOURCE
#include "confine.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---------------- Landlock UAPI (our own copy) ---------------- */

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_landlock_add_rule
#define SYS_landlock_add_rule 445
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif

#define KF_LL_CREATE_RULESET_VERSION (1U << 0)
#define KF_LL_RULE_PATH_BENEATH 1

#define KF_LL_FS_EXECUTE (1ULL << 0)
#define KF_LL_FS_WRITE_FILE (1ULL << 1)
#define KF_LL_FS_READ_FILE (1ULL << 2)
#define KF_LL_FS_READ_DIR (1ULL << 3)
#define KF_LL_FS_REMOVE_DIR (1ULL << 4)
#define KF_LL_FS_REMOVE_FILE (1ULL << 5)
#define KF_LL_FS_MAKE_CHAR (1ULL << 6)
#define KF_LL_FS_MAKE_DIR (1ULL << 7)
#define KF_LL_FS_MAKE_REG (1ULL << 8)
#define KF_LL_FS_MAKE_SOCK (1ULL << 9)
#define KF_LL_FS_MAKE_FIFO (1ULL << 10)
#define KF_LL_FS_MAKE_BLOCK (1ULL << 11)
#define KF_LL_FS_MAKE_SYM (1ULL << 12)
#define KF_LL_FS_REFER (1ULL << 13)     /* ABI 2 */
#define KF_LL_FS_TRUNCATE (1ULL << 14)  /* ABI 3 */
#define KF_LL_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */

#define KF_LL_NET_BIND_TCP (1ULL << 0)    /* ABI 4 */
#define KF_LL_NET_CONNECT_TCP (1ULL << 1) /* ABI 4 */

#define KF_LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0) /* ABI 6 */
#define KF_LL_SCOPE_SIGNAL (1ULL << 1)               /* ABI 6 */

struct kf_ll_ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net; /* ABI 4 */
    uint64_t scoped;             /* ABI 6 */
};

struct kf_ll_path_beneath_attr {
    uint64_t allowed_access;
    int32_t parent_fd;
} __attribute__((packed));

/* rights that may be granted on a non-directory */
#define KF_LL_FILE_RIGHTS \
    (KF_LL_FS_EXECUTE | KF_LL_FS_WRITE_FILE | KF_LL_FS_READ_FILE | KF_LL_FS_TRUNCATE | KF_LL_FS_IOCTL_DEV)
#define KF_LL_READ_RIGHTS (KF_LL_FS_EXECUTE | KF_LL_FS_READ_FILE | KF_LL_FS_READ_DIR)

/* Every filesystem right the kernel's ABI knows. */
static uint64_t ll_fs_rights(int abi)
{
    uint64_t a = (1ULL << 13) - 1; /* ABI 1: EXECUTE .. MAKE_SYM */
    if (abi >= 2) a |= KF_LL_FS_REFER;
    if (abi >= 3) a |= KF_LL_FS_TRUNCATE;
    if (abi >= 5) a |= KF_LL_FS_IOCTL_DEV;
    return a;
}

int kf_confine_landlock_abi(void)
{
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, KF_LL_CREATE_RULESET_VERSION);
    return abi > 0 ? (int)abi : 0;
}

/* Add one path-beneath rule. A path that cannot be opened is skipped (1);
 * rights a non-directory cannot carry are dropped. 0 added, 1 skipped, -1
 * error (errno). */
static int ll_add_path(int ruleset, const char *path, uint64_t access)
{
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0) return 1;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return 1;
    }
    if (!S_ISDIR(st.st_mode)) access &= KF_LL_FILE_RIGHTS;
    struct kf_ll_path_beneath_attr pb = {.allowed_access = access, .parent_fd = fd};
    int rc = (int)syscall(SYS_landlock_add_rule, ruleset, KF_LL_RULE_PATH_BENEATH, &pb, 0);
    int e = errno;
    close(fd);
    errno = e;
    return rc == 0 ? 0 : -1;
}

int kf_confine_landlock(const char *const *read_paths, const char *const *write_paths, int scoped,
                        kf_confine_facts *facts, char *err, size_t cap)
{
    int abi = kf_confine_landlock_abi();
    if (facts) {
        facts->landlock_abi = abi;
        facts->landlock_fs = 0;
        facts->landlock_scoped = 0;
    }
    if (abi < 1) return 0; /* not in this kernel (or disabled): best effort */

    uint64_t all = ll_fs_rights(abi);
    /* never granted: device nodes made in a writable folder would open a
     * way around every read rule (mknod of a disk as root) */
    uint64_t write_rights = all & ~(KF_LL_FS_MAKE_CHAR | KF_LL_FS_MAKE_BLOCK);
    struct kf_ll_ruleset_attr ra;
    memset(&ra, 0, sizeof(ra));
    size_t rsize = sizeof(uint64_t);
    if (read_paths) {
        ra.handled_access_fs = all;
        if (abi >= 4) {
            ra.handled_access_net = KF_LL_NET_BIND_TCP | KF_LL_NET_CONNECT_TCP; /* no rule: no TCP */
            rsize = 2 * sizeof(uint64_t);
        }
        if (abi >= 6 && scoped) {
            ra.scoped = KF_LL_SCOPE_ABSTRACT_UNIX_SOCKET | KF_LL_SCOPE_SIGNAL;
            rsize = sizeof(ra);
        }
    } else {
        /* writes only (sandbox.c's historical ruleset): reads, execution and
         * ioctls stay unrestricted */
        ra.handled_access_fs = all & ~(KF_LL_READ_RIGHTS | KF_LL_FS_IOCTL_DEV);
        write_rights &= ra.handled_access_fs;
    }
    int rs = (int)syscall(SYS_landlock_create_ruleset, &ra, rsize, 0);
    if (rs < 0) {
        snprintf(err, cap, "landlock_create_ruleset (ABI %d): %s", abi, strerror(errno));
        return -1;
    }
    for (int i = 0; read_paths && read_paths[i]; i++) {
        if (ll_add_path(rs, read_paths[i], KF_LL_READ_RIGHTS) < 0) {
            snprintf(err, cap, "landlock rule for %s: %s", read_paths[i], strerror(errno));
            close(rs);
            return -1;
        }
    }
    for (int i = 0; write_paths && write_paths[i]; i++) {
        if (ll_add_path(rs, write_paths[i], write_rights) < 0) {
            snprintf(err, cap, "landlock rule for %s: %s", write_paths[i], strerror(errno));
            close(rs);
            return -1;
        }
    }
    if (syscall(SYS_landlock_restrict_self, rs, 0) != 0) {
        snprintf(err, cap, "landlock_restrict_self: %s%s", strerror(errno),
                 errno == EPERM ? " (no_new_privs not set?)" : "");
        close(rs);
        return -1;
    }
    close(rs);
    if (facts) {
        facts->landlock_fs = 1;
        facts->landlock_scoped = read_paths && abi >= 6 && scoped;
    }
    return 1;
}

/* ---------------- seccomp ---------------- */

typedef struct {
    scmp_filter_ctx ctx;
    char *err;
    size_t cap;
} sc_build;

static int sc_nr(const char *name) { return seccomp_syscall_resolve_name(name); }

/* Unconditional deny of a syscall by name; names this architecture lacks
 * are skipped. 0 or -1. */
static int sc_deny(sc_build *b, const char *name, int errnum)
{
    int nr = sc_nr(name);
    if (nr == __NR_SCMP_ERROR) return 0;
    int rc = seccomp_rule_add(b->ctx, SCMP_ACT_ERRNO(errnum), nr, 0);
    if (rc < 0) {
        snprintf(b->err, b->cap, "seccomp rule for %s: %s", name, strerror(-rc));
        return -1;
    }
    return 0;
}

static int sc_rule1(sc_build *b, int nr, const char *name, int errnum, struct scmp_arg_cmp c)
{
    int rc = seccomp_rule_add(b->ctx, SCMP_ACT_ERRNO(errnum), nr, 1, c);
    if (rc < 0) {
        snprintf(b->err, b->cap, "seccomp rule for %s: %s", name, strerror(-rc));
        return -1;
    }
    return 0;
}

/* Deny the syscall when argument arg lies in [lo, hi] (unsigned 64-bit). */
static int sc_deny_range(sc_build *b, int nr, const char *name, unsigned arg, uint64_t lo, uint64_t hi)
{
    if (lo > hi) return 0;
    if (lo == 0 && hi == UINT64_MAX) {
        int rc = seccomp_rule_add(b->ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
        if (rc < 0) snprintf(b->err, b->cap, "seccomp rule for %s: %s", name, strerror(-rc));
        return rc < 0 ? -1 : 0;
    }
    if (hi == UINT64_MAX) return sc_rule1(b, nr, name, EPERM, SCMP_CMP(arg, SCMP_CMP_GE, lo));
    if (lo == 0) return sc_rule1(b, nr, name, EPERM, SCMP_CMP(arg, SCMP_CMP_LE, hi));
    /* aligned blocks: (x & ~(2^k - 1)) == lo */
    for (;;) {
        int k = __builtin_ctzll(lo);
        while (k > 0 && lo + ((1ULL << k) - 1) > hi) k--;
        uint64_t mask = ~((1ULL << k) - 1);
        if (sc_rule1(b, nr, name, EPERM, SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, mask, lo)) < 0) return -1;
        uint64_t last = lo + ((1ULL << k) - 1);
        if (last >= hi) break;
        lo = last + 1;
    }
    return 0;
}

/* Deny the syscall unless argument arg is in one of the n allowed inclusive
 * ranges (sorted, disjoint). */
static int sc_deny_except(sc_build *b, const char *name, unsigned arg, const uint64_t (*allow)[2], int n)
{
    int nr = sc_nr(name);
    if (nr == __NR_SCMP_ERROR) return 0;
    uint64_t next = 0; /* first value not yet covered */
    int done = 0;
    for (int i = 0; i < n && !done; i++) {
        if (allow[i][0] > next && sc_deny_range(b, nr, name, arg, next, allow[i][0] - 1) < 0) return -1;
        if (allow[i][1] == UINT64_MAX) done = 1;
        else next = allow[i][1] + 1;
    }
    if (!done && sc_deny_range(b, nr, name, arg, next, UINT64_MAX) < 0) return -1;
    return 0;
}

/* Denied for both profiles: no network, no looking into or acting on other
 * processes, no namespaces or mounts, no SysV IPC, no kernel-facing
 * facilities a compiler or a kernel never needs. */
static const char *const k_common_denied[] = {
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "kcmp",
    "pidfd_open", "pidfd_send_signal", "pidfd_getfd",
    "mount", "umount2", "unshare", "setns", "chroot", "pivot_root", "move_mount", "open_tree", "fsopen",
    "fsconfig", "fsmount", "fspick", "mount_setattr",
    "shmget", "shmat", "shmctl", "shmdt", "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop",
    "semtimedop", "semctl",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "bpf", "perf_event_open", "keyctl", "add_key", "request_key", "userfaultfd",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
    "swapon", "swapoff", "iopl", "ioperm", "open_by_handle_at", "name_to_handle_at", "fanotify_init",
    "syslog", "acct", "quotactl", "quotactl_fd", "sethostname", "setdomainname", "settimeofday",
    "clock_settime", "clock_adjtime", "adjtimex", "vhangup", "lookup_dcookie", "uselib", "personality",
    NULL};

/* Calls that act on another process named by arg0 (0 = the caller). A
 * runner shares its uid with other runners (and, unprivileged, with the
 * worker): without this a candidate could pin, renice or limit the
 * baseline's runner or the judge by trying every pid. */
static const char *const k_runner_self_only[] = {
    "sched_setaffinity", "sched_setscheduler", "sched_setparam", "sched_setattr", "prlimit64",
    "migrate_pages", "move_pages", NULL};

static int build_filter(sc_build *b, kf_confine_profile profile)
{
    int cuda = profile == KF_CONFINE_RUNNER_CUDA;
    if (cuda) profile = KF_CONFINE_RUNNER;
    for (int i = 0; k_common_denied[i]; i++) {
        const char *n = k_common_denied[i];
        /* the CUDA driver's initialization (seen on driver 580; cuInit
         * fails with "OS call failed" otherwise) creates AF_UNIX seqpacket
         * sockets: it probes for an MPS server (connect: answered ENOENT)
         * and serves its UVM descriptor on an abstract socket
         * "cuda-uvmfd-<pidns>-<pid>" (bind, listen, accept). So AF_UNIX
         * sockets may be created and served, never connected out: no path
         * socket can be reached (PostgreSQL's, the worker's), and Landlock's
         * abstract-socket scoping keeps other processes' abstract sockets
         * out of reach too. */
        if (cuda && (!strcmp(n, "socket") || !strcmp(n, "bind") || !strcmp(n, "listen") ||
                     !strcmp(n, "accept") || !strcmp(n, "accept4")))
            continue;
        int e = cuda && !strcmp(n, "connect") ? ENOENT : EPERM;
        if (sc_deny(b, n, e) < 0) return -1;
    }
    if (cuda) {
        const uint64_t unix_only[1][2] = {{AF_UNIX, AF_UNIX}};
        if (sc_deny_except(b, "socket", 0, unix_only, 1) < 0) return -1;
        /* seqpacket only (what the driver makes): no datagram socket that
         * could sendto() a path such as /dev/log without connecting */
        static const uint64_t other_types[] = {SOCK_STREAM, SOCK_DGRAM, SOCK_RAW, SOCK_RDM, 6 /* DCCP */,
                                               10 /* PACKET */};
        int snr = sc_nr("socket");
        for (size_t i = 0; i < sizeof(other_types) / sizeof(other_types[0]); i++)
            if (sc_rule1(b, snr, "socket", EPERM, SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, other_types[i])) < 0) return -1;
    }
    /* clone3 passes its flags in memory seccomp cannot read: ENOSYS makes
     * libc fall back to clone, whose flags it can */
    if (sc_deny(b, "clone3", ENOSYS) < 0) return -1;
    int clone_nr = sc_nr("clone");
    static const uint64_t ns_flags[] = {CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
                                        CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWCGROUP, 0x00000080 /* NEWTIME */};
    for (size_t i = 0; i < sizeof(ns_flags) / sizeof(ns_flags[0]); i++)
        if (sc_rule1(b, clone_nr, "clone", EPERM, SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i])) < 0)
            return -1;

    uint64_t pid = (uint64_t)getpid();
    if (profile == KF_CONFINE_RUNNER) {
        if (sc_deny(b, "fork", EPERM) < 0 || sc_deny(b, "vfork", EPERM) < 0) return -1;
        /* threads only */
        if (sc_rule1(b, clone_nr, "clone", EPERM, SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0)) < 0) return -1;
        const uint64_t self_or_zero[2][2] = {{0, 0}, {pid, pid}};
        const uint64_t self[1][2] = {{pid, pid}};
        if (sc_deny_except(b, "kill", 0, self_or_zero, 2) < 0 || sc_deny_except(b, "tkill", 0, self_or_zero, 2) < 0 ||
            sc_deny_except(b, "rt_sigqueueinfo", 0, self_or_zero, 2) < 0 ||
            sc_deny_except(b, "tgkill", 0, self, 1) < 0 || sc_deny_except(b, "rt_tgsigqueueinfo", 0, self, 1) < 0)
            return -1;
        for (int i = 0; k_runner_self_only[i]; i++)
            if (sc_deny_except(b, k_runner_self_only[i], 0, self_or_zero, 2) < 0) return -1;
        /* setpriority / ioprio_set(which, who, ...): only the caller itself
         * (which = PRIO_PROCESS 0 / IOPRIO_WHO_PROCESS 1, who = 0 or pid) */
        const uint64_t prio_process[1][2] = {{0, 0}}, ioprio_process[1][2] = {{1, 1}};
        if (sc_deny_except(b, "setpriority", 0, prio_process, 1) < 0 ||
            sc_deny_except(b, "setpriority", 1, self_or_zero, 2) < 0 ||
            sc_deny_except(b, "ioprio_set", 0, ioprio_process, 1) < 0 ||
            sc_deny_except(b, "ioprio_set", 1, self_or_zero, 2) < 0)
            return -1;
    } else {
        /* a compiler driver signals its own children: positive pids (but
         * init), 0 and its own process group; never -1 or another group */
        /* -pgrp arrives sign-extended from C callers that widen it, and
         * zero-extended from libc's plain register-passing wrappers: both
         * mean the same group to the kernel (it reads the low 32 bits) */
        uint64_t sx = (uint64_t)(-(int64_t)getpgrp()), zx = sx & 0xffffffffULL;
        const uint64_t allowed[4][2] = {{0, 0}, {2, 0x7fffffff}, {zx, zx}, {sx, sx}};
        if (sc_deny_except(b, "kill", 0, allowed, 4) < 0 || sc_deny_except(b, "tkill", 0, allowed, 4) < 0 ||
            sc_deny_except(b, "tgkill", 0, allowed, 4) < 0 ||
            sc_deny_except(b, "rt_sigqueueinfo", 0, allowed, 4) < 0 ||
            sc_deny_except(b, "rt_tgsigqueueinfo", 0, allowed, 4) < 0)
            return -1;
    }
    return 0;
}

static int load_seccomp(kf_confine_profile profile, char *err, size_t cap)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx) {
        snprintf(err, cap, "seccomp_init failed");
        return -1;
    }
    /* i386 (int 0x80) and x32 syscalls would bypass every rule: kill */
    if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) < 0)
        seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL);
    seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 1);
    seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
    sc_build b = {ctx, err, cap};
    if (build_filter(&b, profile) < 0) {
        seccomp_release(ctx);
        return -1;
    }
    int rc = seccomp_load(ctx);
    seccomp_release(ctx);
    if (rc < 0) {
        snprintf(err, cap, "seccomp_load: %s", strerror(-rc));
        return -1;
    }
    return 0;
}

/* ---------------- identity ---------------- */

static int parse_id(const char *s, long *out)
{
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v <= 0 || v > 0x7fffffffL) return -1;
    *out = v;
    return 0;
}

int kf_confine_target_ids(uid_t *uid, gid_t *gid)
{
    long u = 65534, g;
    const char *us = getenv("KFARM_RUNNER_UID"), *gs = getenv("KFARM_RUNNER_GID");
    if (us && *us && parse_id(us, &u) < 0) return -1;
    g = u;
    if (gs && *gs && parse_id(gs, &g) < 0) return -1;
    *uid = (uid_t)u;
    *gid = (gid_t)g;
    return 0;
}

static int drop_to(uid_t u, gid_t g, char *err, size_t cap)
{
    if (setgroups(0, NULL) != 0) {
        snprintf(err, cap, "setgroups: %s", strerror(errno));
        return -1;
    }
    if (setresgid(g, g, g) != 0) {
        snprintf(err, cap, "setresgid %d: %s", (int)g, strerror(errno));
        return -1;
    }
    if (setresuid(u, u, u) != 0) {
        snprintf(err, cap, "setresuid %d: %s", (int)u, strerror(errno));
        return -1;
    }
    uid_t ru, eu, su;
    gid_t rg, eg, sg;
    if (getresuid(&ru, &eu, &su) != 0 || getresgid(&rg, &eg, &sg) != 0 || ru != u || eu != u || su != u ||
        rg != g || eg != g || sg != g || getgroups(0, NULL) != 0) {
        snprintf(err, cap, "uid/gid switch to %d:%d did not take", (int)u, (int)g);
        return -1;
    }
    if (setuid(0) == 0) { /* must be impossible now */
        snprintf(err, cap, "could regain uid 0 after dropping it");
        return -1;
    }
    return 0;
}

/* Drop every capability (bounding set, ambient, effective/permitted/
 * inheritable) and lock root's special treatment away, so uid 0 without
 * capabilities is just another owner. 1 if the process now holds none, 0
 * if some remain (reported, not fatal). */
static int drop_caps(void)
{
    /* needs CAP_SETPCAP; without it the bits stay as they are */
    prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                                 SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                                 SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
          0, 0, 0);
    for (int c = 0; c < 64; c++)
        if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0 && errno == EINVAL) break;
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof(d));
    syscall(SYS_capset, &h, d);
    memset(d, 0xff, sizeof(d));
    if (syscall(SYS_capget, &h, d) != 0) return 0;
    return (d[0].effective | d[1].effective | d[0].permitted | d[1].permitted | d[0].inheritable |
            d[1].inheritable) == 0;
}

/* ---------------- rlimits ---------------- */

static int set_limit(int res, uint64_t v, const char *name, char *err, size_t cap)
{
    struct rlimit cur;
    if (getrlimit(res, &cur) != 0) cur.rlim_max = RLIM_INFINITY;
    rlim_t want = (rlim_t)v;
    if (cur.rlim_max != RLIM_INFINITY && want > cur.rlim_max) want = cur.rlim_max; /* only ever lower */
    struct rlimit rl = {want, want};
    if (setrlimit(res, &rl) != 0) {
        snprintf(err, cap, "setrlimit %s: %s", name, strerror(errno));
        return -1;
    }
    return 0;
}

static int apply_rlimits(const kf_confine_spec *s, char *err, size_t cap)
{
    if (set_limit(RLIMIT_CORE, 0, "CORE", err, cap) < 0) return -1;
#if defined(__SANITIZE_ADDRESS__)
    /* an AddressSanitizer build (tests only) maps terabytes of shadow
     * memory: an address-space limit would fail every allocation made
     * between fork and exec */
    (void)0;
#else
    if (s->as_bytes && set_limit(RLIMIT_AS, s->as_bytes, "AS", err, cap) < 0) return -1;
#endif
    if (set_limit(RLIMIT_FSIZE, s->fsize_bytes ? s->fsize_bytes : (64u << 20), "FSIZE", err, cap) < 0) return -1;
    if (set_limit(RLIMIT_NOFILE, s->nofile > 0 ? (uint64_t)s->nofile : 256, "NOFILE", err, cap) < 0) return -1;
    if (set_limit(RLIMIT_NPROC, s->nproc > 0 ? (uint64_t)s->nproc : 1024, "NPROC", err, cap) < 0) return -1;
    if (s->cpu_s > 0) {
        /* soft: SIGXCPU at the limit; hard one second later: SIGKILL */
        uint64_t soft = (uint64_t)(s->cpu_s + 0.999);
        struct rlimit cur;
        rlim_t hardmax = getrlimit(RLIMIT_CPU, &cur) == 0 ? cur.rlim_max : RLIM_INFINITY;
        struct rlimit rl = {(rlim_t)soft, (rlim_t)soft + 1};
        if (hardmax != RLIM_INFINITY && rl.rlim_max > hardmax) rl.rlim_max = hardmax;
        if (rl.rlim_cur > rl.rlim_max) rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_CPU, &rl) != 0) {
            snprintf(err, cap, "setrlimit CPU: %s", strerror(errno));
            return -1;
        }
    }
    return 0;
}

/* ---------------- apply ---------------- */

int kf_confine_apply(const kf_confine_spec *spec, kf_confine_facts *facts, char *err, size_t cap)
{
    kf_confine_facts f;
    memset(&f, 0, sizeof(f));
    if (facts) *facts = f;
    if (!spec || (spec->profile != KF_CONFINE_RUNNER && spec->profile != KF_CONFINE_RUNNER_CUDA &&
                  spec->profile != KF_CONFINE_COMPILER)) {
        snprintf(err, cap, "confine: invalid spec");
        return -1;
    }
    /* 1. rlimits (while still privileged: lowering always works) */
    if (apply_rlimits(spec, err, cap) < 0) goto fail;
    f.rlimits = 1;

    /* 2. identity */
    if (spec->drop_uid && geteuid() == 0) {
        uid_t u;
        gid_t g;
        if (kf_confine_target_ids(&u, &g) < 0) {
            snprintf(err, cap, "KFARM_RUNNER_UID / KFARM_RUNNER_GID: not a positive number");
            goto fail;
        }
        if (drop_to(u, g, err, cap) < 0) goto fail;
        f.uid_dropped = 1;
    }
    f.caps_dropped = drop_caps();
    if (!f.caps_dropped && geteuid() == 0) {
        snprintf(err, cap, "running as root and could not drop its capabilities");
        goto fail;
    }
    f.uid = (int)geteuid();

    /* 3. no_new_privs: required for Landlock and seccomp as non-root */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        snprintf(err, cap, "PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
        goto fail;
    }
    f.no_new_privs = 1;

    /* 4. Landlock: file allow-list, no TCP, scoping */
    if (kf_confine_landlock(spec->read_paths, spec->write_paths, 1, &f, err, cap) < 0) goto fail;

    /* 5. seccomp last: nothing above needs a denied call */
    if (load_seccomp(spec->profile, err, cap) < 0) goto fail;
    f.seccomp = 1;
    if (facts) *facts = f;
    return 0;
fail:
    if (facts) *facts = f;
    return -1;
}

/* ---------------- observe ---------------- */

int kf_confine_observe(pid_t pid, kf_confine_facts *facts)
{
    memset(facts, 0, sizeof(*facts));
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) return -1;
    char line[512];
    int seen = 0;
    while (fgets(line, sizeof(line), f)) {
        int a, b;
        unsigned long long caps;
        if (sscanf(line, "Seccomp: %d", &a) == 1) facts->seccomp = a == 2, seen = 1;
        else if (sscanf(line, "NoNewPrivs: %d", &a) == 1) facts->no_new_privs = a == 1;
        else if (sscanf(line, "Uid: %d %d", &a, &b) == 2) facts->uid = b;
        else if (sscanf(line, "CapEff: %llx", &caps) == 1) facts->caps_dropped = caps == 0;
    }
    fclose(f);
    return seen ? 0 : -1;
}

/* ---------------- default allow-lists ---------------- */

/* Host paths found at run time (CUDA root, /dev/nvidia*) live for the
 * whole process: specs hold plain pointers. Interned, so repeated calls
 * do not grow it. */
static pthread_mutex_t g_intern_mu = PTHREAD_MUTEX_INITIALIZER;
static char *g_interned[128];
static int g_n_interned;

static const char *intern(const char *s)
{
    const char *r = NULL;
    pthread_mutex_lock(&g_intern_mu);
    for (int i = 0; i < g_n_interned && !r; i++)
        if (!strcmp(g_interned[i], s)) r = g_interned[i];
    if (!r && g_n_interned < (int)(sizeof(g_interned) / sizeof(g_interned[0]))) {
        char *d = strdup(s);
        if (d) r = g_interned[g_n_interned++] = d;
    }
    pthread_mutex_unlock(&g_intern_mu);
    return r;
}

static int list_len(const char *const *l)
{
    int n = 0;
    while (n < KF_CONFINE_MAX_PATHS && l[n]) n++;
    return n;
}

/* Append p to a NULL-terminated list unless present or missing on disk.
 * 0, or -1 when the list is full. */
static int list_add(const char **l, const char *p)
{
    if (!p || access(p, F_OK) != 0) return 0;
    int n = list_len(l);
    for (int i = 0; i < n; i++)
        if (!strcmp(l[i], p)) return 0;
    if (n >= KF_CONFINE_MAX_PATHS - 1) return -1;
    l[n] = p;
    l[n + 1] = NULL;
    return 0;
}

int kf_confine_cuda_root(char *buf, size_t cap)
{
    const char *env = getenv("KFARM_CUDA_HOME");
    char real[PATH_MAX];
    if (env && *env) {
        if (!realpath(env, real)) return -1;
    } else if (!realpath("/usr/local/cuda", real)) {
        return -1;
    }
    return snprintf(buf, cap, "%s", real) < (int)cap ? 0 : -1;
}

int kf_confine_default_reads(kf_confine_spec *spec)
{
    static const char *const reads[] = {
        "/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin", "/etc/ld.so.cache", "/etc/ld.so.conf",
        "/etc/ld.so.conf.d", "/etc/ld.so.preload", "/opt", "/proc/self", "/proc/cpuinfo", "/proc/meminfo",
        "/proc/stat", "/sys/devices/system/cpu", "/sys/devices/system/node", NULL};
    static const char *const gpu_reads[] = {"/proc/driver/nvidia", "/sys/bus/pci", "/sys/devices", NULL};
    static const char *const dev_writes[] = {"/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", NULL};
    int over = 0;
    for (int i = 0; reads[i]; i++) over |= list_add(spec->read_paths, reads[i]);
    /* the NVIDIA driver reads its proc entries and the PCI topology */
    if (access("/dev/nvidiactl", F_OK) == 0 || access("/proc/driver/nvidia", F_OK) == 0)
        for (int i = 0; gpu_reads[i]; i++) over |= list_add(spec->read_paths, gpu_reads[i]);
    char root[PATH_MAX];
    if (kf_confine_cuda_root(root, sizeof(root)) == 0) over |= list_add(spec->read_paths, intern(root));
    for (int i = 0; dev_writes[i]; i++) over |= list_add(spec->write_paths, dev_writes[i]);
    glob_t g;
    if (glob("/dev/nvidia*", GLOB_NOSORT, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++) over |= list_add(spec->write_paths, intern(g.gl_pathv[i]));
        globfree(&g);
    }
    return over ? -1 : list_len(spec->read_paths);
}

int kf_confine_add_path(const char **list, const char *path)
{
    if (!path) return 0;
    if (list_len(list) >= KF_CONFINE_MAX_PATHS - 1) return -1;
    const char *p = intern(path);
    if (!p) return -1;
    int n = list_len(list);
    for (int i = 0; i < n; i++)
        if (!strcmp(list[i], p)) return 0;
    list[n] = p;
    list[n + 1] = NULL;
    return 0;
}
