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
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
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
    /* the source tree this file was compiled from: <dir of __FILE__>/../abi */
    char src[PATH_MAX];
    snprintf(src, sizeof(src), "%s", __FILE__);
    char *sd = dirname(src);
    char cand[PATH_MAX];
    if (sd[0] == '/' && snprintf(cand, sizeof(cand), "%s/../abi", sd) < (int)sizeof(cand) && has_abi(cand)) {
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

/* ---- confined compiler runs ---- */

int kf_compile_confine_spec(const kf_compile_job *job, kf_confine_spec *spec)
{
    memset(spec, 0, sizeof(*spec));
    spec->profile = KF_CONFINE_COMPILER;
    spec->as_bytes = job->as_bytes;
    spec->fsize_bytes = job->fsize_limit;
    /* keep uid 0 under a root worker (capabilities are dropped all the
     * same): the build folder lies in the worker's own private folders */
    spec->drop_uid = 0;
    if (kf_confine_default_reads(spec) < 0) return -1;
    if (kf_confine_add_path(spec->read_paths, job->dir) < 0) return -1;
    for (int i = 0; job->read_paths && job->read_paths[i]; i++)
        if (kf_confine_add_path(spec->read_paths, job->read_paths[i]) < 0) return -1;
    return 0;
}

int kf_compile_exec(const kf_compile_job *job, kf_sandbox_res *sb)
{
    memset(sb, 0, sizeof(*sb));
    if (!job || !job->argv || !job->argv[0] || !job->dir || job->timeout_s <= 0) {
        sb->how = KF_SANDBOX_FAILED;
        snprintf(sb->err, sizeof(sb->err), "compile: invalid job");
        return -1;
    }
    kf_confine_spec spec;
    if (kf_compile_confine_spec(job, &spec) != 0) {
        sb->how = KF_SANDBOX_FAILED;
        snprintf(sb->err, sizeof(sb->err), "compile: allow-list too long");
        return -1;
    }
    exec_arg ea = {job->argv};
    kf_sandbox_req sr = {.scratch_dir = job->dir,
                         .timeout_s = job->timeout_s,
                         .fsize_limit = job->fsize_limit,
                         .output_cap = job->output_cap,
                         .confine = &spec,
                         .tick = job->tick,
                         .tick_arg = job->tick_arg,
                         .fn = exec_fn,
                         .arg = &ea};
    return kf_sandbox_run(&sr, sb);
}

/* A file name the compiler can take: the source's own name when it is
 * plain ([A-Za-z0-9._-], not starting with '.' or '-'), with ext appended
 * unless it already ends so; else "source" + ext. */
static void stage_name(const char *source_path, const char *ext, char *name, size_t cap)
{
    const char *b = strrchr(source_path, '/');
    b = b ? b + 1 : source_path;
    size_t l = strlen(b), el = strlen(ext);
    int ok = l > 0 && l < 128 && b[0] != '.' && b[0] != '-';
    for (size_t i = 0; ok && i < l; i++)
        ok = isalnum((unsigned char)b[i]) || b[i] == '.' || b[i] == '_' || b[i] == '-';
    if (!ok) b = "source", l = 6;
    if (l >= el && !strcmp(b + l - el, ext)) snprintf(name, cap, "%s", b);
    else snprintf(name, cap, "%.*s%s", (int)l, b, ext);
}

int kf_compile_stage(const char *scratch_dir, const char *source_path, const char *ext, char *dir, size_t dcap,
                     char *name, size_t ncap)
{
    if (snprintf(dir, dcap, "%s/build-XXXXXX", scratch_dir) >= (int)dcap) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (!mkdtemp(dir)) return -1;
    stage_name(source_path, ext, name, ncap);
    char dst[PATH_MAX + 256];
    snprintf(dst, sizeof(dst), "%s/%s", dir, name);
    if (kf_compile_copy_file(source_path, dst) != 0) {
        int e = errno;
        kf_util_rmtree(dir);
        errno = e;
        return -1;
    }
    return 0;
}

int kf_compile_collect(const char *dir, const char *name, const char *out_path)
{
    char from[PATH_MAX + 256];
    snprintf(from, sizeof(from), "%s/%s", dir, name);
    struct stat st;
    if (lstat(from, &st) != 0) return -1;
    if (!S_ISREG(st.st_mode)) { /* a link the compiler left would point anywhere */
        errno = EINVAL;
        return -1;
    }
    if (rename(from, out_path) == 0) return 0;
    if (errno != EXDEV) return -1;
    return kf_compile_copy_file(from, out_path);
}

int kf_compile_disk_low(const char *path, uint64_t need_bytes, char *why, size_t cap)
{
    struct statvfs v;
    if (!path || statvfs(path, &v) != 0) return 0;
    uint64_t avail = (uint64_t)v.f_bavail * (uint64_t)(v.f_frsize ? v.f_frsize : v.f_bsize);
    if (avail < need_bytes) {
        snprintf(why, cap, "disk nearly full: %.1f MiB free on %s (a build needs up to %.0f MiB)",
                 (double)avail / (1 << 20), path, (double)need_bytes / (1 << 20));
        return 1;
    }
    if (v.f_files > 0 && v.f_favail < 1000) {
        snprintf(why, cap, "disk nearly full: %llu inodes free on %s", (unsigned long long)v.f_favail, path);
        return 1;
    }
    return 0;
}

int kf_compile_signal_is_compilers(int sig)
{
    switch (sig) {
    case SIGSEGV: /* also what RLIMIT_AS often ends in */
    case SIGBUS:
    case SIGABRT:
    case SIGILL:
    case SIGFPE:
    case SIGTRAP:
    case SIGKILL: /* RLIMIT_CPU's hard limit, or memory exhausted */
    case SIGXCPU:
    case SIGXFSZ: return 1;
    default: return 0; /* SIGTERM, SIGHUP, SIGINT, SIGSYS (our filter), ...: not the source's doing */
    }
}

/* Toolchains proven to work recently (argv hash -> time), so a run of
 * failing candidates costs one trivial build per 10 minutes, not one each. */
#define CANARY_TTL_S 600.0
static pthread_mutex_t g_canary_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char key[65];
    double at;
} g_canary[16];

static void canary_key(const kf_compile_job *job, const char *text, char key[65])
{
    kf_strbuf b = {0};
    for (int i = 0; job->argv[i]; i++) {
        kf_strbuf_add(&b, job->argv[i]);
        kf_strbuf_addn(&b, "\0", 1);
    }
    kf_strbuf_printf(&b, "%llu|%llu|%s", (unsigned long long)job->as_bytes, (unsigned long long)job->fsize_limit,
                     text);
    kf_util_sha256_hex(b.s ? b.s : "", b.len, key);
    free(b.s);
}

int kf_compile_canary(const kf_compile_job *job, const char *scratch_dir, const char *name, const char *text,
                      char *why, size_t cap)
{
    char key[65];
    canary_key(job, text, key);
    double now = kf_util_now_s();
    pthread_mutex_lock(&g_canary_mu);
    for (size_t i = 0; i < sizeof(g_canary) / sizeof(g_canary[0]); i++)
        if (!strcmp(g_canary[i].key, key) && now - g_canary[i].at < CANARY_TTL_S) {
            pthread_mutex_unlock(&g_canary_mu);
            return 1;
        }
    pthread_mutex_unlock(&g_canary_mu);

    char dir[PATH_MAX];
    if (snprintf(dir, sizeof(dir), "%s/canary-XXXXXX", scratch_dir) >= (int)sizeof(dir) || !mkdtemp(dir)) {
        snprintf(why, cap, "cannot make a folder for a trivial build in %s: %s", scratch_dir, strerror(errno));
        return 0;
    }
    char src[PATH_MAX + 256];
    snprintf(src, sizeof(src), "%s/%s", dir, name);
    if (kf_util_write_file(src, text, strlen(text)) != 0) {
        snprintf(why, cap, "cannot write a trivial source in %s: %s", dir, strerror(errno));
        kf_util_rmtree(dir);
        return 0;
    }
    kf_compile_job c = *job;
    c.dir = dir;
    c.tick = NULL;
    kf_sandbox_res sb;
    int rc = kf_compile_exec(&c, &sb);
    int ok = rc == 0 && sb.how == KF_SANDBOX_EXITED && sb.exit_status == 0;
    if (!ok) {
        char line[300] = "";
        if (sb.output) kf_compile_first_error(sb.output, 1, line, sizeof(line));
        if (rc != 0) snprintf(why, cap, "could not start the compiler: %s", sb.err);
        else if (sb.confine_failed) snprintf(why, cap, "could not confine the compiler: %s", sb.err);
        else if (sb.how == KF_SANDBOX_EXITED)
            snprintf(why, cap, "the compiler fails on a trivial source too (status %d): %s", sb.exit_status, line);
        else if (sb.how == KF_SANDBOX_SIGNALED)
            snprintf(why, cap, "the compiler dies on a trivial source too (signal %s)", strsignal(sb.signal));
        else
            snprintf(why, cap, "a trivial build did not finish within %.0f s", c.timeout_s);
    } else {
        pthread_mutex_lock(&g_canary_mu);
        size_t oldest = 0;
        for (size_t i = 0; i < sizeof(g_canary) / sizeof(g_canary[0]); i++) {
            if (!strcmp(g_canary[i].key, key) || !g_canary[i].key[0]) {
                oldest = i;
                break;
            }
            if (g_canary[i].at < g_canary[oldest].at) oldest = i;
        }
        memcpy(g_canary[oldest].key, key, 65);
        g_canary[oldest].at = now;
        pthread_mutex_unlock(&g_canary_mu);
    }
    kf_sandbox_res_free(&sb);
    kf_util_rmtree(dir);
    return ok;
}

int kf_compile_cache_put(const char *entry, const char *from)
{
    char tmp[PATH_MAX + 128];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", entry, (long)getpid());
    if (kf_compile_copy_file(from, tmp) != 0) {
        unlink(tmp);
        return -1;
    }
    int rc = link(tmp, entry);
    int e = errno;
    unlink(tmp);
    if (rc == 0) return 0;
    if (e != EEXIST) return -1;
    /* the first build stays the entry; this build takes its bytes */
    snprintf(tmp, sizeof(tmp), "%s.take.%ld", from, (long)getpid());
    if (kf_compile_copy_file(entry, tmp) == 0 && rename(tmp, from) == 0) return 0;
    unlink(tmp);
    return -1;
}

int kf_compile_key_lock(const char *entry, double timeout_s, int (*tick)(void *), void *tick_arg)
{
    char path[PATH_MAX + 128];
    if (snprintf(path, sizeof(path), "%s.lock", entry) >= (int)sizeof(path)) return -1;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    double t0 = kf_util_now_s(), next_tick = t0 + 1.0;
    for (;;) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
        if (errno != EWOULDBLOCK && errno != EINTR) break;
        double now = kf_util_now_s();
        if (now - t0 > timeout_s) break;
        if (tick && now >= next_tick) {
            next_tick = now + 1.0;
            if (tick(tick_arg)) break;
        }
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    close(fd);
    return -1;
}

void kf_compile_key_unlock(int fd)
{
    if (fd >= 0) close(fd); /* closing the only descriptor releases the flock */
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

#define CC_FSIZE (256u << 20)
#define CC_AS ((uint64_t)4 << 30)
#define CC_OUT "kf_out.so"

static const char k_cc_canary[] = "#include \"kf_abi.h\"\nint kf_canary_value(void) { return 42; }\n";

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

    /* argv: flags first (they go into the key), then -o OUT SRC, both
     * relative to the private build folder the compiler runs in */
    char iflag[PATH_MAX + 3];
    snprintf(iflag, sizeof(iflag), "-I%s", abi);
    char *argv[96];
    char defs[64][160];
    char sname[256] = "source.c";
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
    argv[ac++] = CC_OUT;
    argv[ac++] = sname;
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

    /* The compiler reads only the toolchain, the ABI header and a private
     * build folder holding a copy of the source; it writes only there. */
    unlink(req->out_path); /* a stale file is never taken for output */
    char bdir[PATH_MAX];
    if (kf_compile_stage(req->scratch_dir, srcabs, ".c", bdir, sizeof(bdir), sname, sizeof(sname)) != 0) {
        int e = errno;
        set_detail(res, KF_COMPILE_INFRA, "cannot stage the source for the compiler in %s: %s", req->scratch_dir,
                   strerror(e));
        return 0;
    }
    char ccreal[PATH_MAX], ccdir[PATH_MAX] = "";
    if (realpath(res->compiler, ccreal)) snprintf(ccdir, sizeof(ccdir), "%s", dirname(ccreal));
    const char *reads[] = {abi, ccdir[0] ? ccdir : NULL, NULL};
    double timeout_s = req->timeout_s > 0 ? req->timeout_s : 120;
    kf_compile_job job = {.argv = argv,
                          .dir = bdir,
                          .read_paths = reads,
                          .as_bytes = CC_AS,
                          .fsize_limit = CC_FSIZE,
                          .output_cap = LOG_CAP,
                          .timeout_s = timeout_s,
                          .tick = req->tick,
                          .tick_arg = req->tick_arg};
    kf_sandbox_res sb;
    int rc = kf_compile_exec(&job, &sb);
    res->seconds = sb.wall_s;
    res->confined = sb.confined;
    res->confine = sb.confine;
    if (rc != 0) {
        set_detail(res, KF_COMPILE_INFRA, "could not start the compiler: %s%s", sb.err, "");
        kf_util_rmtree(bdir);
        return 0;
    }
    free(res->log);
    res->log = sb.output;
    sb.output = NULL;
    char line[400], why[400];
    if (sb.confine_failed) {
        set_detail(res, KF_COMPILE_INFRA, "could not confine the compiler: %s%s", sb.err, "");
    } else switch (sb.how) {
    case KF_SANDBOX_TIMEOUT: {
        char secs[32];
        snprintf(secs, sizeof(secs), "%.0f", timeout_s);
        set_detail(res, KF_COMPILE_FAILED, "compile exceeded %s s (the compile time limit)%s", secs, "");
        break;
    }
    case KF_SANDBOX_CANCELLED: set_detail(res, KF_COMPILE_INFRA, "cancelled%s%s", "", ""); break;
    case KF_SANDBOX_SIGNALED:
        if (sb.signal == SIGXFSZ)
            set_detail(res, KF_COMPILE_FAILED, "build output exceeds the %s file size limit%s", "256 MiB", "");
        else if (kf_compile_signal_is_compilers(sb.signal))
            set_detail(res, KF_COMPILE_FAILED, "compiler died of signal %s (limits: 4 GiB address space, 256 MiB "
                       "files)%s", strsignal(sb.signal), "");
        else
            set_detail(res, KF_COMPILE_INFRA, "compiler killed by signal %s%s", strsignal(sb.signal), "");
        break;
    case KF_SANDBOX_EXITED:
        if (sb.exit_status == 0) {
            if (kf_compile_collect(bdir, CC_OUT, req->out_path) != 0) {
                int e = errno;
                set_detail(res, KF_COMPILE_INFRA, "compiler reported success but its shared object could not be "
                           "taken: %s%s", strerror(e), "");
                break;
            }
            if (!is_elf_file(req->out_path)) {
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
        /* The log is the candidate's to write (#line, #error, file names):
         * blame the worker only for what it proves itself. */
        kf_util_rmtree(bdir); /* what the build wrote no longer counts against the disk */
        bdir[0] = 0;
        int e = kf_sandbox_exec_failed(&sb);
        if (e) {
            kf_compile_first_error(res->log, 0, line, sizeof(line));
            set_detail(res, KF_COMPILE_INFRA, "compiler could not be executed (status %s): %s",
                       sb.exit_status == 127 ? "127" : "126", strerror(e));
        } else if (kf_compile_disk_low(req->scratch_dir, CC_FSIZE, why, sizeof(why)) ||
                   (use_cache && kf_compile_disk_low(req->cache_dir, CC_FSIZE, why, sizeof(why)))) {
            set_detail(res, KF_COMPILE_INFRA, "%s%s", why, "");
        } else if (!kf_compile_canary(&job, req->scratch_dir, sname, k_cc_canary, why, sizeof(why))) {
            set_detail(res, KF_COMPILE_INFRA, "%s%s", why, "");
        } else {
            kf_compile_first_error(res->log, 0, line, sizeof(line));
            set_detail(res, KF_COMPILE_FAILED, "%s%s", line[0] ? line : "compiler failed with no output", "");
        }
        break;
    case KF_SANDBOX_FAILED: set_detail(res, KF_COMPILE_INFRA, "%s%s", sb.err, ""); break;
    }
    if (bdir[0]) kf_util_rmtree(bdir);
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
