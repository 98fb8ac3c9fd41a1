/*
 * compile.c -- cpu-backend builds, the compile cache and the forbidden-symbol
 * check. See compile.h for the rules (who is at fault, what is cached).
 *
 * A build is: resolve the compiler on PATH (not found = infra), ask it for
 * its version (part of the cache key), look the key up, otherwise run it in
 * a sandboxed child and classify the outcome from the exit status and a few
 * well-known log phrases of worker-side trouble. The cache is a flat
 * directory of <sha256>.so files; entries are only ever created by rename of
 * a complete file, and only for builds that succeeded.
 */
#define _GNU_SOURCE
#include "compile.h"
#include "device.h"
#include "sandbox.h"
#include "kf_tune.h"
#include "kf_util.h"

#include <ctype.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


#define LOG_CAP (64u << 10)
#define SOURCE_CAP (4u << 20)

static int has_abi(const char *dir)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof(p), "%s/kf_abi.h", dir) >= (int)sizeof(p)) return 0;
    return access(p, R_OK) == 0;
}

int kf_compile_abi_dir(char *buf, size_t cap)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = 0;
        char *d = dirname(exe);
        char cand[PATH_MAX];
        if (snprintf(cand, sizeof(cand), "%s/include", d) < (int)sizeof(cand) && has_abi(cand)) {
            snprintf(buf, cap, "%s", cand);
            return 0;
        }
        /* test binaries live one level below the build dir (build/tests) */
        if (snprintf(cand, sizeof(cand), "%s/../include", d) < (int)sizeof(cand) && has_abi(cand)) {
            snprintf(buf, cap, "%s", cand);
            return 0;
        }
    }
    const char *env = getenv("KFARM_ABI_DIR");
    if (env && *env && has_abi(env)) {
        snprintf(buf, cap, "%s", env);
        return 0;
    }
    /* the source tree this file was compiled from: <dir of __FILE__>/abi */
    char src[PATH_MAX];
    snprintf(src, sizeof(src), "%s", __FILE__);
    char *sd = dirname(src);
    char cand[PATH_MAX];
    if (sd[0] == '/' && snprintf(cand, sizeof(cand), "%s/abi", sd) < (int)sizeof(cand) && has_abi(cand)) {
        snprintf(buf, cap, "%s", cand);
        return 0;
    }
    return -1;
}

/* Resolve a program name on PATH (or check an explicit path). */
static int resolve_program(const char *name, char *out, size_t cap)
{
    if (strchr(name, '/')) {
        if (access(name, X_OK) != 0) return -1;
        snprintf(out, cap, "%s", name);
        return 0;
    }
    const char *path = getenv("PATH");
    if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
    const char *p = path;
    while (*p) {
        const char *c = strchr(p, ':');
        size_t l = c ? (size_t)(c - p) : strlen(p);
        char cand[PATH_MAX];
        if (l > 0 && l + strlen(name) + 2 < sizeof(cand)) {
            snprintf(cand, sizeof(cand), "%.*s/%s", (int)l, p, name);
            struct stat st;
            if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0) {
                return snprintf(out, cap, "%s", cand) < (int)cap ? 0 : -1;
            }
        }
        if (!c) break;
        p = c + 1;
    }
    errno = ENOENT;
    return -1;
}

typedef struct {
    char *const *argv;
} exec_arg;

static int exec_fn(void *arg, int report_fd)
{
    (void)report_fd;
    return kf_sandbox_exec(((exec_arg *)arg)->argv);
}

/* Phrases in a compiler log that mean the worker, not the source, is broken.
 * Only lines the toolchain wrote about itself count: diagnostics attributed
 * to the source (they start with its path) and code excerpts (they start
 * with a space) are skipped, so `#error No space left on device` in a
 * candidate cannot make a worker look broken. */
static const char *infra_phrase(const char *log, const char *source_path)
{
    static const char *const phrases[] = {
        "No space left on device", "Disk quota exceeded", "cannot execute '",
        "virtual memory exhausted", "Cannot allocate memory", "cannot find -lgomp",
        "Read-only file system",
    };
    size_t spl = strlen(source_path);
    for (const char *line = log; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t l = nl ? (size_t)(nl - line) : strlen(line);
        if (!(l >= spl && !strncmp(line, source_path, spl)) && line[0] != ' ' &&
            strncmp(line, "In file included", 16) != 0) {
            char tmp[1024];
            snprintf(tmp, sizeof(tmp), "%.*s", (int)(l < sizeof(tmp) ? l : sizeof(tmp) - 1), line);
            for (size_t i = 0; i < sizeof(phrases) / sizeof(phrases[0]); i++)
                if (strstr(tmp, phrases[i])) return phrases[i];
        }
        line = nl ? nl + 1 : NULL;
    }
    return NULL;
}

void kf_compile_first_error(const char *log, int fatal_too, char *out, size_t cap)
{
    const char *line = log, *best = NULL;
    while (line && *line) {
        const char *nl = strchr(line, '\n');
        size_t l = nl ? (size_t)(nl - line) : strlen(line);
        char tmp[1024];
        snprintf(tmp, sizeof(tmp), "%.*s", (int)(l < sizeof(tmp) ? l : sizeof(tmp) - 1), line);
        if (strstr(tmp, "error") || (fatal_too && strstr(tmp, "fatal"))) {
            best = line;
            break;
        }
        line = nl ? nl + 1 : NULL;
    }
    if (!best) best = log ? log : "";
    const char *nl = strchr(best, '\n');
    size_t l = nl ? (size_t)(nl - best) : strlen(best);
    if (l >= cap) l = cap - 1;
    snprintf(out, cap, "%.*s", (int)l, best);
}

int kf_compile_tool_version(const char *tool, const char *scratch_dir, double timeout_s,
                            const char *must_contain, int first_line, char *ver, size_t cap)
{
    char *argv[] = {(char *)tool, "--version", NULL};
    exec_arg ea = {argv};
    kf_sandbox_req sr = {.scratch_dir = scratch_dir, .timeout_s = timeout_s, .fn = exec_fn, .arg = &ea,
                         .no_isolation = 1, .output_cap = 4096};
    kf_sandbox_res res;
    if (kf_sandbox_run(&sr, &res) != 0) return -1;
    int ok = res.how == KF_SANDBOX_EXITED && res.exit_status == 0 &&
             (!must_contain || strstr(res.output, must_contain));
    if (ok) {
        if (first_line) {
            char *nl = strchr(res.output, '\n');
            if (nl) *nl = 0;
        }
        snprintf(ver, cap, "%s", res.output);
    }
    kf_sandbox_res_free(&res);
    return ok ? 0 : -1;
}

int kf_compile_exec(char *const argv[], const char *scratch_dir, const char *out_path, double timeout_s,
                    uint64_t fsize_limit, size_t output_cap, int (*tick)(void *arg), void *tick_arg,
                    kf_sandbox_res *sb)
{
    /* the output directory must be writable in the sandbox */
    char outdir[PATH_MAX];
    snprintf(outdir, sizeof(outdir), "%s", out_path);
    const char *wdirs[] = {dirname(outdir), NULL};
    unlink(out_path);
    exec_arg ea = {argv};
    kf_sandbox_req sr = {.scratch_dir = scratch_dir,
                         .timeout_s = timeout_s,
                         .fsize_limit = fsize_limit,
                         .output_cap = output_cap,
                         .write_dirs = wdirs,
                         .tick = tick,
                         .tick_arg = tick_arg,
                         .fn = exec_fn,
                         .arg = &ea};
    return kf_sandbox_run(&sr, sb);
}

int kf_compile_cache_put(const char *entry, const char *from)
{
    char tmp[PATH_MAX + 128];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", entry, (long)getpid());
    if (kf_compile_copy_file(from, tmp) == 0 && rename(tmp, entry) == 0) return 0;
    unlink(tmp);
    return -1;
}

int kf_compile_copy_file(const char *from, const char *to)
{
    size_t len;
    char *data = kf_util_read_file(from, &len, (size_t)1 << 30);
    if (!data) return -1;
    int rc = kf_util_write_file(to, data, len);
    int e = errno;
    free(data);
    errno = e;
    return rc;
}

static int is_elf_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    unsigned char m[4];
    ssize_t r = read(fd, m, 4);
    close(fd);
    return r == 4 && !memcmp(m, ELFMAG, SELFMAG);
}

static void set_detail(kf_compile_res *res, kf_compile_status st, const char *fmt, const char *a,
                       const char *b)
{
    res->status = st;
    snprintf(res->detail, sizeof(res->detail), fmt, a, b);
}

int kf_compile_run(const kf_compile_req *req, kf_compile_res *res)
{
    memset(res, 0, sizeof(*res));
    if (!req || !req->source_path || !req->out_path || !req->scratch_dir || req->n_defines < 0 ||
        req->n_defines > 64)
        return -1;
    res->log = calloc(1, 1);
    if (!res->log) return -1;

    for (int i = 0; i < req->n_defines; i++) {
        if (!kf_tune_valid_name(req->define_names[i]) || !kf_tune_valid_value(req->define_values[i])) {
            set_detail(res, KF_COMPILE_FAILED, "invalid define %s=%s (names: C identifiers; values: "
                       "letters, digits, _ . - +)", req->define_names[i], req->define_values[i]);
            return 0;
        }
    }

    char abi[PATH_MAX];
    if (kf_compile_abi_dir(abi, sizeof(abi)) != 0) {
        set_detail(res, KF_COMPILE_INFRA, "kf_abi.h not found (beside the worker, $KFARM_ABI_DIR or the "
                   "source tree)%s%s", "", "");
        return 0;
    }
    const char *ccname = getenv("KFARM_CC");
    if (!ccname || !*ccname) ccname = "cc";
    if (resolve_program(ccname, res->compiler, sizeof(res->compiler)) != 0) {
        set_detail(res, KF_COMPILE_INFRA, "C compiler '%s' not found%s (install gcc or set KFARM_CC)",
                   ccname, strchr(ccname, '/') ? "" : " on PATH");
        return 0;
    }
    char version[256] = "";
    if (kf_compile_tool_version(res->compiler, req->scratch_dir, 20, NULL, 1, version, sizeof(version)) != 0) {
        set_detail(res, KF_COMPILE_INFRA, "C compiler %.400s does not run (%s--version failed)", res->compiler, " ");
        return 0;
    }

    /* the compiler runs in the scratch dir: give it absolute paths */
    char srcabs[PATH_MAX];
    if (!realpath(req->source_path, srcabs)) {
        set_detail(res, KF_COMPILE_INFRA, "cannot resolve source %s: %s", req->source_path, strerror(errno));
        return 0;
    }
    size_t srclen;
    char *src = kf_util_read_file(srcabs, &srclen, SOURCE_CAP);
    if (!src) {
        /* unreadable source: the worker lost its own file (or it is huge) */
        set_detail(res, errno == EFBIG ? KF_COMPILE_FAILED : KF_COMPILE_INFRA, "cannot read source %s: %s",
                   req->source_path, errno == EFBIG ? "larger than 4 MiB" : strerror(errno));
        return 0;
    }
    size_t abilen = 0;
    char abipath[PATH_MAX + 16];
    snprintf(abipath, sizeof(abipath), "%s/kf_abi.h", abi);
    char *abitext = kf_util_read_file(abipath, &abilen, 1 << 20);

    /* argv: flags first (they go into the key), then -o OUT SRC */
    char iflag[PATH_MAX + 3];
    snprintf(iflag, sizeof(iflag), "-I%s", abi);
    char *argv[96];
    char defs[64][160];
    int ac = 0;
    argv[ac++] = res->compiler;
    argv[ac++] = (char *)(req->opt ? req->opt : "-O3");
    argv[ac++] = "-march=native";
    argv[ac++] = "-fopenmp";
    argv[ac++] = "-shared";
    argv[ac++] = "-fPIC";
    argv[ac++] = "-std=gnu11";
    argv[ac++] = iflag;
    for (int i = 0; i < req->n_defines; i++) {
        snprintf(defs[i], sizeof(defs[i]), "-D%s=%s", req->define_names[i], req->define_values[i]);
        argv[ac++] = defs[i];
    }
    int nflags = ac;
    argv[ac++] = "-o";
    argv[ac++] = (char *)req->out_path;
    argv[ac++] = srcabs;
    argv[ac] = NULL;

    /* cache key: source, flags (without the -I path: the header text instead),
     * compiler path and version */
    size_t klen = srclen + abilen + 4096;
    char *kbuf = malloc(klen + 1024 * (size_t)nflags);
    if (!kbuf) {
        free(src);
        free(abitext);
        set_detail(res, KF_COMPILE_INFRA, "out of memory%s%s", "", "");
        return 0;
    }
    size_t kp = 0;
    memcpy(kbuf + kp, src, srclen);
    kp += srclen;
    kbuf[kp++] = 0;
    for (int i = 1; i < nflags; i++) {
        if (argv[i] == iflag) continue;
        size_t l = strlen(argv[i]);
        memcpy(kbuf + kp, argv[i], l + 1);
        kp += l + 1;
    }
    /* -march=native means "this CPU": a cache copied to another machine must miss */
    kf_device dev;
    memset(&dev, 0, sizeof(dev));
    char *ci = kf_util_read_file("/proc/cpuinfo", NULL, 16u << 20);
    if (ci) {
        kf_device_parse_cpuinfo(ci, &dev);
        free(ci);
    }
    kp += (size_t)snprintf(kbuf + kp, 4096, "%s%c%s%c%s%c%s%c", res->compiler, 0, version, 0, dev.name, 0,
                           dev.features, 0);
    if (abitext) {
        memcpy(kbuf + kp, abitext, abilen);
        kp += abilen;
    }
    kf_util_sha256_hex(kbuf, kp, res->key);
    free(kbuf);
    free(src);
    free(abitext);

    char cpath[PATH_MAX];
    int use_cache = req->cache_dir && *req->cache_dir &&
                    snprintf(cpath, sizeof(cpath), "%s/%s.so", req->cache_dir, res->key) < (int)sizeof(cpath);
    if (use_cache && is_elf_file(cpath)) {
        if (kf_compile_copy_file(cpath, req->out_path) == 0) {
            res->cached = 1;
            res->status = KF_COMPILE_OK;
            snprintf(res->detail, sizeof(res->detail), "cache hit %s", res->key);
            return 0;
        }
        if (errno == ENOSPC || errno == EDQUOT) {
            set_detail(res, KF_COMPILE_INFRA, "copying cached build to %s: %s", req->out_path,
                       strerror(errno));
            return 0;
        }
        /* unreadable entry: rebuild */
    }

    /* build in a sandbox; the output directory must be writable there */
    double timeout_s = req->timeout_s > 0 ? req->timeout_s : 120;
    kf_sandbox_res sb;
    int rc = kf_compile_exec(argv, req->scratch_dir, req->out_path, timeout_s, 256u << 20, LOG_CAP, req->tick,
                             req->tick_arg, &sb);
    res->seconds = sb.wall_s;
    if (rc != 0) {
        set_detail(res, KF_COMPILE_INFRA, "could not start the compiler: %s%s", sb.err, "");
        return 0;
    }
    free(res->log);
    res->log = sb.output;
    sb.output = NULL;
    const char *phrase = infra_phrase(res->log, srcabs);
    char line[400];
    switch (sb.how) {
    case KF_SANDBOX_TIMEOUT: {
        char secs[32];
        snprintf(secs, sizeof(secs), "%.0f", timeout_s);
        set_detail(res, KF_COMPILE_FAILED, "compilation exceeded the %s s limit%s", secs, "");
        break;
    }
    case KF_SANDBOX_CANCELLED: set_detail(res, KF_COMPILE_INFRA, "cancelled%s%s", "", ""); break;
    case KF_SANDBOX_SIGNALED:
        if (sb.signal == SIGXFSZ)
            set_detail(res, KF_COMPILE_FAILED, "build output exceeds the %s file size limit%s", "256 MiB", "");
        else
            set_detail(res, KF_COMPILE_INFRA, "compiler killed by signal %s%s", strsignal(sb.signal), "");
        break;
    case KF_SANDBOX_EXITED:
        if (sb.exit_status == 0) {
            struct stat st;
            if (stat(req->out_path, &st) != 0 || st.st_size == 0 || !is_elf_file(req->out_path)) {
                set_detail(res, KF_COMPILE_INFRA, "compiler reported success but wrote no shared object %s%s",
                           req->out_path, "");
                break;
            }
            res->status = KF_COMPILE_OK;
            snprintf(res->detail, sizeof(res->detail), "built in %.2f s", sb.wall_s);
            /* caching is an optimisation: a failure here is not the build's */
            if (use_cache && kf_util_mkdirs(req->cache_dir) == 0) kf_compile_cache_put(cpath, req->out_path);
            break;
        }
        if (phrase || sb.exit_status == 127 || sb.exit_status == 126) {
            kf_compile_first_error(res->log, 0, line, sizeof(line));
            set_detail(res, KF_COMPILE_INFRA, "compiler could not run properly (status %s): %s",
                       sb.exit_status == 127 ? "127" : sb.exit_status == 126 ? "126" : "non-zero", line);
        } else {
            kf_compile_first_error(res->log, 0, line, sizeof(line));
            set_detail(res, KF_COMPILE_FAILED, "%s%s", line[0] ? line : "compiler failed with no output", "");
        }
        break;
    case KF_SANDBOX_FAILED: set_detail(res, KF_COMPILE_INFRA, "%s%s", sb.err, ""); break;
    }
    if (res->status != KF_COMPILE_OK) unlink(req->out_path); /* never leave a failed build around */
    kf_sandbox_res_free(&sb);
    return 0;
}

void kf_compile_res_free(kf_compile_res *res)
{
    if (!res) return;
    free(res->log);
    res->log = NULL;
}

/* ---- ELF .dynsym ---- */

#define DEFINE_DYNSYM_READER(BITS)                                                                    \
    static int undef_syms_##BITS(const unsigned char *d, size_t len, char ***out, char *err,          \
                                 size_t errlen)                                                        \
    {                                                                                                 \
        const Elf##BITS##_Ehdr *eh = (const void *)d;                                                 \
        if (len < sizeof(*eh) || eh->e_shoff == 0 || eh->e_shentsize != sizeof(Elf##BITS##_Shdr) ||  \
            eh->e_shoff > len || (size_t)eh->e_shnum * sizeof(Elf##BITS##_Shdr) > len - eh->e_shoff) { \
            snprintf(err, errlen, "bad ELF section header table");                                    \
            return -1;                                                                                \
        }                                                                                             \
        const Elf##BITS##_Shdr *sh = (const void *)(d + eh->e_shoff);                                 \
        int n = 0, cap = 0;                                                                           \
        char **names = NULL;                                                                          \
        for (int s = 0; s < eh->e_shnum; s++) {                                                       \
            if (sh[s].sh_type != SHT_DYNSYM) continue;                                                \
            if (sh[s].sh_link >= eh->e_shnum || sh[s].sh_entsize != sizeof(Elf##BITS##_Sym) ||       \
                sh[s].sh_offset > len || sh[s].sh_size > len - sh[s].sh_offset) {                     \
                snprintf(err, errlen, "bad .dynsym section");                                         \
                goto fail;                                                                            \
            }                                                                                         \
            const Elf##BITS##_Shdr *st = &sh[sh[s].sh_link];                                          \
            if (st->sh_offset > len || st->sh_size > len - st->sh_offset) {                           \
                snprintf(err, errlen, "bad .dynstr section");                                         \
                goto fail;                                                                            \
            }                                                                                         \
            const char *strtab = (const char *)d + st->sh_offset;                                     \
            size_t strsz = st->sh_size;                                                               \
            const Elf##BITS##_Sym *sym = (const void *)(d + sh[s].sh_offset);                         \
            size_t count = sh[s].sh_size / sizeof(Elf##BITS##_Sym);                                   \
            for (size_t i = 1; i < count; i++) {                                                      \
                if (sym[i].st_shndx != SHN_UNDEF || sym[i].st_name == 0 || sym[i].st_name >= strsz) \
                    continue;                                                                         \
                const char *nm = strtab + sym[i].st_name;                                             \
                size_t l = strnlen(nm, strsz - sym[i].st_name);                                       \
                if (l == strsz - sym[i].st_name) continue; /* unterminated */                         \
                if (n == cap) {                                                                       \
                    cap = cap ? cap * 2 : 64;                                                         \
                    char **nn = realloc(names, (size_t)cap * sizeof(*nn));                            \
                    if (!nn) {                                                                        \
                        snprintf(err, errlen, "out of memory");                                       \
                        goto fail;                                                                    \
                    }                                                                                 \
                    names = nn;                                                                       \
                }                                                                                     \
                if (!(names[n] = strndup(nm, l))) {                                                   \
                    snprintf(err, errlen, "out of memory");                                           \
                    goto fail;                                                                        \
                }                                                                                     \
                n++;                                                                                  \
            }                                                                                         \
        }                                                                                             \
        *out = names;                                                                                 \
        return n;                                                                                     \
    fail:                                                                                             \
        kf_compile_free_names(names, n);                                                              \
        return -1;                                                                                    \
    }

DEFINE_DYNSYM_READER(64)
DEFINE_DYNSYM_READER(32)

int kf_compile_undefined_symbols(const char *so_path, char ***names, char *err, size_t errlen)
{
    *names = NULL;
    size_t len;
    unsigned char *d = (unsigned char *)kf_util_read_file(so_path, &len, (size_t)512 << 20);
    if (!d) {
        snprintf(err, errlen, "cannot read %s: %s", so_path, strerror(errno));
        return -1;
    }
    int n = -1;
    if (len < EI_NIDENT || memcmp(d, ELFMAG, SELFMAG) != 0) {
        snprintf(err, errlen, "%s is not an ELF file", so_path);
    } else if (d[EI_DATA] != (((union { uint16_t u; uint8_t b[2]; }){.u = 1}).b[0] ? ELFDATA2LSB : ELFDATA2MSB)) {
        snprintf(err, errlen, "%s: foreign byte order", so_path);
    } else if (d[EI_CLASS] == ELFCLASS64) {
        n = undef_syms_64(d, len, names, err, errlen);
    } else if (d[EI_CLASS] == ELFCLASS32) {
        n = undef_syms_32(d, len, names, err, errlen);
    } else {
        snprintf(err, errlen, "%s: unknown ELF class", so_path);
    }
    free(d);
    return n;
}

void kf_compile_free_names(char **names, int n)
{
    if (!names) return;
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

int kf_compile_forbid_match(const char *pattern, const char *sym)
{
    size_t pl = strlen(pattern);
    if (pl == 0) return 0;
    if (pattern[pl - 1] == '*') return strncmp(pattern, sym, pl - 1) == 0;
    /* versioned names from some tools look like "sym@GLIBC_2.2.5" */
    size_t sl = strlen(sym);
    const char *at = strchr(sym, '@');
    if (at) sl = (size_t)(at - sym);
    return sl == pl && strncmp(pattern, sym, pl) == 0;
}

static const char *match_any(const kf_task *t, const char *sym)
{
    for (int i = 0; i < t->n_forbid; i++)
        if (kf_compile_forbid_match(t->forbid[i], sym)) return t->forbid[i];
    return NULL;
}

/* Scan identifiers in code and inside string literals, skipping comments. */
static const char *scan_source(const kf_task *t, const char *s, char *found, size_t cap, int *line_out)
{
    int line = 1;
    int in_str = 0;
    const char *p = s;
    while (*p) {
        if (!in_str && p[0] == '/' && p[1] == '/') {
            while (*p && *p != '\n') p++;
            continue;
        }
        if (!in_str && p[0] == '/' && p[1] == '*') {
            p += 2;
            while (*p && !(p[0] == '*' && p[1] == '/')) {
                if (*p == '\n') line++;
                p++;
            }
            if (*p) p += 2;
            continue;
        }
        if (!in_str && *p == '\'') { /* char literal */
            p++;
            while (*p && *p != '\'' && *p != '\n') p += (*p == '\\' && p[1]) ? 2 : 1;
            if (*p == '\'') p++;
            continue;
        }
        if (*p == '"') {
            in_str = !in_str;
            p++;
            continue;
        }
        if (in_str && *p == '\\' && p[1]) {
            p += 2;
            continue;
        }
        if (*p == '\n') {
            line++;
            in_str = 0; /* unterminated string ends at the line */
            p++;
            continue;
        }
        if (isalpha((unsigned char)*p) || *p == '_') {
            const char *b = p;
            while (isalnum((unsigned char)*p) || *p == '_') p++;
            size_t l = (size_t)(p - b);
            char id[128];
            if (l < sizeof(id)) {
                memcpy(id, b, l);
                id[l] = 0;
                const char *pat = match_any(t, id);
                if (pat) {
                    snprintf(found, cap, "%s", id);
                    *line_out = line;
                    return pat;
                }
            }
            continue;
        }
        p++;
    }
    return NULL;
}

int kf_compile_find_forbidden(const kf_task *t, const char *source, const char *so_path, char *detail,
                              size_t cap)
{
    if (t->n_forbid == 0) return 0;
    char err[256];
    char **names = NULL;
    int n = kf_compile_undefined_symbols(so_path, &names, err, sizeof(err));
    if (n < 0) {
        snprintf(detail, cap, "cannot inspect the candidate's symbols: %s", err);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        const char *pat = match_any(t, names[i]);
        if (pat) {
            snprintf(detail, cap, "forbidden symbol '%s' (task forbids '%s'): the candidate's shared object "
                     "imports it", names[i], pat);
            kf_compile_free_names(names, n);
            return 1;
        }
    }
    kf_compile_free_names(names, n);
    if (source) {
        char id[128];
        int line = 0;
        const char *pat = scan_source(t, source, id, sizeof(id), &line);
        if (pat) {
            snprintf(detail, cap, "forbidden symbol '%s' (task forbids '%s') named in the source at line %d",
                     id, pat, line);
            return 1;
        }
    }
    return 0;
}
