/*
 * confine.h -- confine a process before it runs code we did not write
 * (prefix kf_confine_).
 *
 * Used in two places, always by trusted code *before* anything untrusted
 * runs in the process:
 *   - the judge's pre-exec child that becomes a runner (worker/judge.c):
 *     profile KF_CONFINE_RUNNER, then execve of kfarm-runner;
 *   - the compiler's sandboxed child (worker/sandbox.c): profile
 *     KF_CONFINE_COMPILER, then execve of cc / nvcc.
 *
 * Mechanisms, each best effort where the host lacks it (the facts say which
 * took effect; the caller records them, and a runner is never started when a
 * mechanism the caller marked required is missing):
 *   - identity: when running as root and spec->drop_uid, switch to an
 *     unprivileged uid/gid (KFARM_RUNNER_UID, default 65534 "nobody";
 *     KFARM_RUNNER_GID, default the same number) with no supplementary
 *     groups. In every case every capability is dropped (bounding set,
 *     ambient, effective, permitted) and root's exec-time privileges are
 *     locked away (securebits), so root that keeps uid 0 (drop_uid 0: a
 *     compiler that must reach the worker's own root-owned folders) is just
 *     the owner of its files. PR_SET_NO_NEW_PRIVS.
 *   - Landlock (Linux >= 5.13): file access by allow-list. Read+execute
 *     only beneath spec->read_paths, read+write only beneath
 *     spec->write_paths (device nodes such as /dev/nvidia* go there);
 *     everything else -- key files, /etc/shadow, other candidates' folders,
 *     other processes' /proc entries -- is refused by the kernel. Device
 *     nodes can never be created (MAKE_CHAR/MAKE_BLOCK are not granted even
 *     beneath write paths). ABI >= 4: no TCP bind/connect. ABI >= 5: device
 *     ioctls only on nodes beneath write paths (/dev/nvidia*). ABI >= 6:
 *     signal scoping (no signal to a process outside the domain) and
 *     abstract-unix-socket scoping.
 *   - seccomp (libseccomp): KF_CONFINE_RUNNER denies creating processes
 *     (fork, vfork, clone without CLONE_THREAD; clone3 answers ENOSYS so
 *     libc falls back to clone), every socket, ptrace, process_vm_*, signals
 *     to any process but itself (kill/tkill/tgkill/rt_*sigqueueinfo/pidfd_*),
 *     mount/unshare/setns/chroot/pivot_root, SysV IPC, io_uring, bpf,
 *     perf_event_open, keyctl, userfaultfd, module and reboot calls,
 *     personality, privileged clock/host/quota/port-I/O calls, and clone
 *     with any CLONE_NEW* flag. The runner may also not reschedule, renice,
 *     re-limit or migrate another process (sched_set*, setpriority,
 *     ioprio_set, prlimit64, migrate_pages, move_pages: pid 0 or its own
 *     pid only): runners share a uid, so this keeps a candidate off the
 *     baseline's runner. Calls of another ABI (i386 int 0x80, x32) kill.
 *     KF_CONFINE_COMPILER denies the same except process creation and exec
 *     (a compiler driver runs cc1, as and ld) and the other-process
 *     scheduling calls; it may signal positive pids but 1, pid 0 and its
 *     own process group (never -1 or another group).
 *   - rlimits: address space (RLIMIT_AS; skipped on cuda runners, whose
 *     driver reserves huge virtual ranges), open files, processes/threads
 *     (only effective for a non-root uid), file size, CPU seconds, no
 *     core dumps.
 */
#ifndef KF_CONFINE_H
#define KF_CONFINE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef enum {
    KF_CONFINE_RUNNER = 1,   /* loads one candidate shared object; no processes, no sockets */
    KF_CONFINE_COMPILER = 2, /* a compiler driver: may fork+exec its own tools; no sockets */
    KF_CONFINE_RUNNER_CUDA = 3 /* KF_CONFINE_RUNNER, but AF_UNIX sockets may be created, bound and
                                  served (the CUDA driver's init needs them); connect stays denied */
} kf_confine_profile;

#define KF_CONFINE_MAX_PATHS 48

typedef struct {
    kf_confine_profile profile;
    const char *read_paths[KF_CONFINE_MAX_PATHS];  /* NULL-terminated; read (+exec) beneath each */
    const char *write_paths[KF_CONFINE_MAX_PATHS]; /* NULL-terminated; read+write beneath each */
    uint64_t as_bytes;       /* RLIMIT_AS, bytes; 0 = leave as is */
    uint64_t fsize_bytes;    /* RLIMIT_FSIZE, bytes; 0 = 64 MiB */
    int nofile;              /* RLIMIT_NOFILE; 0 = 256 */
    int nproc;               /* RLIMIT_NPROC (threads count; per uid, not enforced for root); 0 = 1024 */
    double cpu_s;            /* RLIMIT_CPU, seconds; 0 = none */
    int drop_uid;            /* switch to the unprivileged uid when root (capabilities are always dropped) */
} kf_confine_spec;

/* What took effect. Written by kf_confine_apply in the confined process
 * (trusted code, before any untrusted code runs) and checked from outside
 * by kf_confine_observe. */
typedef struct {
    int landlock_abi;        /* 0 = Landlock unavailable */
    int landlock_fs;         /* file allow-list in force */
    int landlock_scoped;     /* signal + abstract-socket scoping in force */
    int seccomp;             /* seccomp filter loaded */
    int no_new_privs;
    int uid_dropped;         /* switched from root to uid */
    int uid;                 /* effective uid after confinement */
    int rlimits;             /* rlimits set */
    int caps_dropped;        /* holds no capability at all */
} kf_confine_facts;

/* Confine the calling process (see the header comment). Call in a child
 * between fork and exec, single-threaded; order: rlimits, uid switch and
 * capability drop, no_new_privs, Landlock, seccomp (last). read_paths and
 * write_paths are opened in the calling process at this moment ("/proc/self"
 * becomes /proc/<this pid>, which stays right across exec); paths that
 * cannot be opened are skipped (less access, never more). An empty read
 * list means nothing is readable. Reads KFARM_RUNNER_UID/GID from the
 * environment. Fills *facts with what took effect; returns 0, or -1 with
 * err when a step failed that the host offers (setuid, setrlimit, a
 * Landlock rule on a kernel that has Landlock, seccomp load): the caller
 * must not go on to run untrusted code. A kernel without Landlock is not an
 * error: facts->landlock_abi is 0. */
int kf_confine_apply(const kf_confine_spec *spec, kf_confine_facts *facts, char *err, size_t cap);

/* Facts about a live process, read by its parent from /proc/PID/status
 * (Seccomp, NoNewPrivs, Uid, CapEff): seccomp, no_new_privs, uid (the
 * effective uid, as seen from the reader's namespace) and caps_dropped are
 * what the kernel says is in force, whatever the process itself claims;
 * the other fields are 0 (Landlock is not visible there). 0, or -1 when the
 * process is gone. */
int kf_confine_observe(pid_t pid, kf_confine_facts *facts);

/* Append the usual allow-lists for dynamically linked programs on this host
 * to the spec, after the entries already there, skipping paths that do not
 * exist and duplicates. read_paths: /usr, /lib*, /bin, /sbin,
 * /etc/ld.so.{cache,conf,conf.d,preload}, /opt, /proc/self, /proc/cpuinfo,
 * /proc/meminfo, /proc/stat, /sys/devices/system/{cpu,node}, on NVIDIA hosts
 * /proc/driver/nvidia, /sys/bus/pci and /sys/devices, and the CUDA toolkit
 * (kf_confine_cuda_root). write_paths: /dev/null, /dev/zero, /dev/urandom,
 * /dev/random and every /dev/nvidia*. /etc as a whole is not readable. Call
 * in the parent (it allocates and globs); the strings live for the whole
 * process. Returns the number of entries now in read_paths, or -1 when a
 * list is full (KF_CONFINE_MAX_PATHS - 1 entries; what fitted is kept). */
int kf_confine_default_reads(kf_confine_spec *spec);

/* Append a copy of path to the NULL-terminated list (one of a spec's
 * read_paths / write_paths) unless already there; the copy lives for the
 * whole process. 0, or -1 when the list is full or out of memory. */
int kf_confine_add_path(const char **list, const char *path);

/* The CUDA toolkit root: realpath of $KFARM_CUDA_HOME when set, else of
 * /usr/local/cuda. 0, or -1 when it does not exist (or does not fit). */
int kf_confine_cuda_root(char *buf, size_t cap);

/* The uid and gid kf_confine_apply switches root to: $KFARM_RUNNER_UID
 * (default 65534) and $KFARM_RUNNER_GID (default: the uid's number).
 * 0, or -1 when a setting is not a positive number. */
int kf_confine_target_ids(uid_t *uid, gid_t *gid);

/* The Landlock ABI version of the running kernel, 0 when it has none. */
int kf_confine_landlock_abi(void);

/* Landlock alone, for callers that confine in steps (sandbox.c). Always
 * handles every write right: writes only beneath write_paths (never device
 * node creation). read_paths non-NULL: also reads and execution only
 * beneath read_paths, no TCP (ABI >= 4), device ioctls only beneath
 * write_paths (ABI >= 5), and with scoped, signal + abstract-socket scoping
 * (ABI >= 6). read_paths NULL: reads, execution and ioctls unrestricted.
 * Needs no_new_privs (or CAP_SYS_ADMIN). Fills the landlock_* facts when
 * facts is not NULL. Returns 1 when a ruleset is in force, 0 when the
 * kernel has no Landlock, -1 with err when it has but a step failed. */
int kf_confine_landlock(const char *const *read_paths, const char *const *write_paths, int scoped,
                        kf_confine_facts *facts, char *err, size_t cap);

#endif
