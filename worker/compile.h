/*
 * compile.h -- build kernels into shared objects, with a cache (prefix kf_compile_).
 *
 * cpu backend: the system C compiler (cc, or $KFARM_CC) builds one source
 * file into a shared object:
 *
 *     cc -O3 -march=native -fopenmp -shared -fPIC -std=gnu11 -I<abi dir>
 *        [-DNAME=VALUE ...] -o out.so source.c
 *
 * The compiler runs in a sandboxed child (worker/sandbox.c) with a time
 * limit; its output, capped, is the compile log.
 *
 * Who is at fault matters (case B2): a compiler that exits non-zero on the
 * source is the candidate's compile_error; a compiler that cannot be run at
 * all (not found: exec fails or status 127), a full disk (ENOSPC anywhere,
 * "No space left on device" in the log), a killed compiler, or a timeout
 * is the worker's problem, reported as KF_COMPILE_INFRA so the job is
 * retried elsewhere -- and never cached.
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
} kf_compile_res;

/* Directory holding kf_abi.h: <dir of /proc/self/exe>/include, else
 * $KFARM_ABI_DIR, else the source tree's worker/abi. Writes it into buf;
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

/* Run argv (argv[0] looked up on PATH) in a sandboxed child: cwd/TMPDIR
 * scratch_dir, wall-clock limit timeout_s seconds (> 0), RLIMIT_FSIZE
 * fsize_limit bytes, at most output_cap bytes of stdout+stderr kept, writes
 * allowed also in dirname(out_path); tick/tick_arg are forwarded. Removes
 * out_path first so a stale file is never taken for output. Returns
 * kf_sandbox_run's result: 0 with *sb filled for every outcome of the child,
 * -1 (sb->err says why) when it could not be started. Free sb with
 * kf_sandbox_res_free. */
int kf_compile_exec(char *const argv[], const char *scratch_dir, const char *out_path, double timeout_s,
                    uint64_t fsize_limit, size_t output_cap, int (*tick)(void *arg), void *tick_arg,
                    kf_sandbox_res *sb);

/* Copy the file from to to (whole file, at most 1 GiB, to replaced).
 * 0, or -1 with errno (ENOENT, ENOSPC, EDQUOT, EFBIG, ...). */
int kf_compile_copy_file(const char *from, const char *to);

/* Store the file from as cache entry entry: copy to "<entry>.tmp.<pid>" and
 * rename, so the entry is never half written (entry's directory must exist).
 * 0, or -1 (the temporary is removed; the entry is left as it was). */
int kf_compile_cache_put(const char *entry, const char *from);

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
