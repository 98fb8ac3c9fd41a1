/*
 * compile.h -- build kernels into shared objects, with a cache (prefix kf_compile_).
 *
 * cpu backend: the system C compiler (cc, or $KFARM_CC) builds one source
 * file into a shared object:
 *
 *     cc -O3 -march=native -fopenmp -shared -fPIC -std=gnu11 -I<abi dir>
 *        [-DNAME=VALUE ...] -o out.so source.c
 *
 * The compiler runs in a sandboxed child (worker/sandbox.c) confined by
 * worker/confine.h's KF_CONFINE_COMPILER profile: it reads only the
 * toolchain (the default read list, which covers /usr and the CUDA root,
 * plus the compiler's own folder), the ABI header's folder and a private
 * build folder <scratch>/build-XXXXXX holding a copy of the source; it
 * writes only that folder (the output is built there and moved to
 * out_path by the worker); no network, no signals outside its process
 * group, 4 GiB of address space, 256 MiB files, with a time limit. So
 * `#include "/etc/kfarm/fleet.key"` or `.incbin` of any file outside those
 * folders fails with "Permission denied", and the log never quotes it.
 * Its output, capped, is the compile log.
 *
 * Who is at fault matters (cases B2, I9). The log is the candidate's to
 * write (`#line 1 "No space left on device"` then `#error`), so no phrase in
 * it ever blames the worker. KF_COMPILE_INFRA (retried elsewhere, never
 * cached) only for what the worker proves itself: the compiler is missing
 * or could not be executed (the failed exec reports itself on a channel
 * the compiler cannot write), confinement could not be applied, the
 * compiler was killed by a signal it does not bring on itself (SIGTERM,
 * SIGHUP, ... -- not SIGSEGV/SIGKILL/SIGXCPU/SIGXFSZ, which limits and
 * crashes on the source cause), a write of the worker's own failed
 * (staging, moving the output: ENOSPC), statvfs shows the scratch or cache
 * folder nearly full (less than 256 MiB or 1000 inodes free, checked after
 * the build's own files are removed), or the same compiler with the same
 * flags fails on a trivial source too (a canary build, run only after a
 * failure, remembered for 10 minutes when it passes). Everything else --
 * a non-zero exit, running out of the address space, the wall-clock limit
 * ("compile exceeded N s") -- is the candidate's compile_error.
 *
 * Cache: <cache_dir>/<key>.so, key = sha256 over the source bytes, every
 * flag and define, the compiler's resolved path and `--version` text, the
 * ABI header, and the CPU model and SIMD flags (-march=native depends on
 * the machine, so a cache copied elsewhere misses). Only successful builds are stored (written to a temporary
 * name and renamed, so a crash never leaves a half file under the key).
 *
 * The forbidden-symbol check also lives here because it inspects build
 * products: kf_compile_undefined_symbols lists a shared object's undefined
 * dynamic symbols by reading its ELF .dynsym with glibc's <elf.h> (no libelf
 * needed), and kf_compile_find_forbidden combines that list with a scan of
 * the source's identifiers and string literals.
 */
#ifndef KF_COMPILE_H
#define KF_COMPILE_H

#include <stddef.h>
#include <stdint.h>
#include "confine.h"
#include "kf_task.h"
#include "sandbox.h"

typedef enum {
    KF_COMPILE_OK = 0,
    KF_COMPILE_FAILED,      /* the source does not build: compile_error */
    KF_COMPILE_INFRA        /* the worker could not build it: infra_error */
} kf_compile_status;

typedef struct {
    const char *source_path;   /* C source file */
    const char *out_path;      /* where the shared object goes */
    const char *scratch_dir;   /* existing dir for the compiler's cwd/TMPDIR */
    const char *cache_dir;     /* NULL = no cache */
    const char *opt;           /* "-O3" (default) or "-O2" (reference) */
    int n_defines;
    const char *const *define_names;
    const char *const *define_values;
    double timeout_s;          /* 0 = 120 s */
    int (*tick)(void *arg);    /* forwarded to the sandbox */
    void *tick_arg;
} kf_compile_req;

typedef struct {
    kf_compile_status status;
    int cached;                /* 1 if out_path came from the cache */
    double seconds;            /* wall time of the build (0 on a hit) */
    char key[65];              /* cache key */
    char compiler[512];        /* resolved compiler path */
    char *log;                 /* compiler output, capped (malloc'ed, never NULL after run) */
    char detail[512];          /* one line: first error, or what went wrong */
    int confined;              /* the compiler ran confined: facts below (0 on a cache hit) */
    kf_confine_facts confine;  /* what took effect in the compiler's process */
} kf_compile_res;

/* Directory holding kf_abi.h: <dir of /proc/self/exe>/include, else
 * $KFARM_ABI_DIR, else the source tree's abi. Writes it into buf;
 * returns 0, or -1 if none contains kf_abi.h. */
int kf_compile_abi_dir(char *buf, size_t cap);

/* Build req->source_path into req->out_path (see the header comment).
 * Returns 0 and fills *res for every outcome (status says which); -1 only
 * for invalid arguments. Free res with kf_compile_res_free. */
int kf_compile_run(const kf_compile_req *req, kf_compile_res *res);

void kf_compile_res_free(kf_compile_res *res);

/* ---- toolchain helpers shared by the cpu and cuda backends ---- */

/* Run `tool --version` in a sandbox (cwd scratch_dir, no isolation, limit
 * timeout_s seconds, 4 KiB of output kept). Succeeds when it exits 0 and, if
 * must_contain is not NULL, its output contains that text; writes the output
 * (only its first line when first_line) into ver, truncated to cap. Returns 0,
 * or -1 (could not run, failed, or must_contain missing; ver untouched). */
int kf_compile_tool_version(const char *tool, const char *scratch_dir, double timeout_s,
                            const char *must_contain, int first_line, char *ver, size_t cap);

/* One confined compiler run (see the header comment). */
typedef struct {
    char *const *argv;               /* argv[0]: a path, or a name looked up on PATH; file
                                      * arguments relative to dir */
    const char *dir;                 /* private build folder (kf_compile_stage): cwd, HOME,
                                      * TMPDIR, and the only folder the compiler may write */
    const char *const *read_paths;   /* readable besides kf_confine_default_reads and dir:
                                      * toolchain folders, the ABI dir; NULL-terminated or NULL */
    uint64_t as_bytes;               /* RLIMIT_AS in bytes; 0 = none */
    uint64_t fsize_limit;            /* RLIMIT_FSIZE in bytes; 0 = 64 MiB */
    size_t output_cap;               /* stdout+stderr bytes kept; 0 = 64 KiB */
    double timeout_s;                /* wall-clock limit, seconds (> 0) */
    int (*tick)(void *arg);          /* forwarded to the sandbox */
    void *tick_arg;
} kf_compile_job;

/* The confinement kf_compile_exec applies for job: KF_CONFINE_COMPILER,
 * default reads + dir + job->read_paths, job's limits, uid kept
 * (capabilities dropped). 0, or -1 when the allow-list overflows. */
int kf_compile_confine_spec(const kf_compile_job *job, kf_confine_spec *spec);

/* Run job->argv in a sandboxed, confined child (kf_sandbox_run with
 * kf_compile_confine_spec): returns kf_sandbox_run's result, 0 with *sb
 * filled for every outcome of the child (sb->confine_failed, sb->confine,
 * kf_sandbox_exec_failed(sb) tell what happened before the compiler ran),
 * -1 (sb->err says why) when it could not be started. Free sb with
 * kf_sandbox_res_free. */
int kf_compile_exec(const kf_compile_job *job, kf_sandbox_res *sb);

/* Make a private build folder <scratch_dir>/build-XXXXXX (mode 0700) and copy
 * source_path into it as `name`: the source's file name when it is plain
 * ([A-Za-z0-9._-]), else "source", with ext (".c", ".cu") appended unless
 * it already ends so. Writes the folder into dir and the name into name.
 * 0, or -1 with errno (ENOSPC, EDQUOT, ENOENT, ...; nothing is left behind). */
int kf_compile_stage(const char *scratch_dir, const char *source_path, const char *ext, char *dir, size_t dcap,
                     char *name, size_t ncap);

/* Move dir/name (a regular file the compiler wrote) to out_path: rename, or
 * copy across file systems. 0, or -1 with errno (ENOENT: not written;
 * EINVAL: not a regular file; ENOSPC ...). */
int kf_compile_collect(const char *dir, const char *name, const char *out_path);

/* Whether the file system holding path is (nearly) full: fewer than
 * need_bytes available to unprivileged users, or fewer than 1000 free
 * inodes. 1 (why says what was found), or 0 (also when statvfs fails). */
int kf_compile_disk_low(const char *path, uint64_t need_bytes, char *why, size_t cap);

/* Whether a compiler killed by signal sig brought it on itself (a crash,
 * or a resource limit its input drove it into: SIGSEGV, SIGBUS, SIGABRT,
 * SIGILL, SIGFPE, SIGTRAP, SIGKILL, SIGXCPU, SIGXFSZ): the source's fault.
 * 0 for signals only someone else sends (SIGTERM, SIGHUP, SIGINT, ...). */
int kf_compile_signal_is_compilers(int sig);

/* Canary: run job (same argv, limits and confinement) in a fresh folder
 * under scratch_dir holding `text` as file `name` (the job's source file
 * name). 1 when it builds (remembered for 10 minutes per argv+text, so
 * repeated failures cost one canary), 0 when the toolchain fails on it too
 * (why says how: the worker's fault). */
int kf_compile_canary(const kf_compile_job *job, const char *scratch_dir, const char *name, const char *text,
                      char *why, size_t cap);

/* Copy the file from to to (whole file, at most 1 GiB, to replaced).
 * 0, or -1 with errno (ENOENT, ENOSPC, EDQUOT, EFBIG, ...). */
int kf_compile_copy_file(const char *from, const char *to);

/* Store the build `from` as cache entry `entry`, first writer wins: copy to
 * "<entry>.tmp.<pid>" and link() it to the entry, so the entry is never half
 * written and never replaced (entry's directory must exist). When an entry
 * already exists (a concurrent build of the same key finished first), `from`
 * is replaced by the entry's bytes: nvcc's output differs byte for byte
 * between two builds of one source (module ids), and everyone who built or
 * looked up one key must hold the same shared object -- a serving judge keeps
 * the task's runners only while the reference's and baseline's bytes hash the
 * same (judge.c task_key). 0, or -1 (the temporary is removed; the entry and
 * `from` are left as they were). */
int kf_compile_cache_put(const char *entry, const char *from);

/* Serialize builds of one cache key across threads and processes: an
 * exclusive flock on "<entry>.lock", polled every 20 ms up to timeout_s
 * (tick, when set, is called about once a second; non-zero gives up). A
 * worker compiling ahead builds several candidates of a new task at once,
 * and each needs the task's reference and baseline: without the lock every
 * one ran nvcc on them (14 builds of one file on 16 cores, and the first
 * candidate waited for all of them). Returns the descriptor to pass to
 * kf_compile_key_unlock, or -1 (no lock: the caller builds anyway). */
int kf_compile_key_lock(const char *entry, double timeout_s, int (*tick)(void *), void *tick_arg);

/* Release a lock from kf_compile_key_lock (-1: nothing). The lock file
 * stays (removing it would race a waiter that opened it). */
void kf_compile_key_unlock(int fd);

/* Into out (cap bytes, truncated): the first line of log that contains
 * "error" (or "fatal", when fatal_too), else the log's first line; "" for a
 * NULL or empty log. */
void kf_compile_first_error(const char *log, int fatal_too, char *out, size_t cap);

/* List the undefined dynamic symbols of an ELF shared object (64- or 32-bit,
 * either byte order... native only) into a malloc'ed array of malloc'ed names.
 * Returns the count, or -1 with err (not ELF, truncated, unreadable). */
int kf_compile_undefined_symbols(const char *so_path, char ***names, char *err, size_t errlen);

void kf_compile_free_names(char **names, int n);

/* Whether sym matches a forbid pattern ("name" exactly, or "prefix*"). */
int kf_compile_forbid_match(const char *pattern, const char *sym);

/* Check a candidate against the task's forbid list: its undefined dynamic
 * symbols (so_path) and the identifiers / string literals in its source
 * (comments ignored). Returns 1 and writes "forbidden symbol 'X' (...)" into
 * detail when something matches, 0 when clean, -1 with detail when the
 * shared object cannot be read. */
int kf_compile_find_forbidden(const kf_task *t, const char *source, const char *so_path,
                              char *detail, size_t cap);

#endif
