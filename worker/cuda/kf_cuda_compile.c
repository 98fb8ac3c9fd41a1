/*
 * kf_cuda_compile.c -- nvcc to a shared object for one exact arch, with a
 * compile cache (prefix kf_cuda_).
 *
 *   nvcc -O3 -std=c++17 -shared -Xcompiler -fPIC
 *        -gencode arch=compute_XY,code=sm_XY -Xptxas -v -cudart shared
 *        -Xlinker -rpath=<toolkit lib dir> -I<abi dir> [-DNAME=V ...]
 *        -o out.so src.cu [-l<link> ... for reference/baseline only]
 *
 * nvcc runs in a sandboxed, confined child (kf_compile_exec: scrubbed
 * environment, time limit, KF_CONFINE_COMPILER: reads only the toolchain --
 * the CUDA root, /usr for the host compiler -- the ABI header's folder and a
 * private build folder <scratch>/build-XXXXXX holding a copy of the source;
 * writes only that folder; 8 GiB of address space, 512 MiB files). The
 * output is built in the private folder and moved to out_path by the
 * worker. The log (with ptxas -v: registers, shared memory, stack, spills
 * per kernel) is parsed by kf_cuda_parse_ptxas.
 *
 * Verdict mapping (cases B1, B2, I9; the log is the candidate's to write, so
 * no phrase in it blames the worker -- see compile.h):
 *   - nvcc not found / exec failed (proven) / confinement failed / killed
 *     by a signal it does not cause / own write ENOSPC / statvfs shows the
 *     scratch or cache folder nearly full / a trivial .cu fails too
 *                                                              -> INFRA (never cached)
 *   - failure whose errors are all about the target arch
 *     ("not supported on .target", "requires .target sm_90a") -> ARCH (unsupported)
 *   - any other non-zero exit, the wall-clock limit, a crash or
 *     resource limit of nvcc's tools                           -> FAILED (compile_error)
 * Only successful builds are stored, under <cache_dir>/cuda/<key>.so with the
 * log beside it (<key>.log), written to a temporary name and renamed.
 * The key is sha256 over: source bytes, every flag (including -gencode and
 * defines and libraries), the nvcc path and its full `--version` text, and
 * the ABI header text.
 */
#include "kf_cuda.h"

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

#include "compile.h"
#include "kf_tune.h"
#include "kf_util.h"
#include "sandbox.h"

#define SOURCE_CAP (4u << 20)
#define LOG_CAP (256u << 10)
#define NV_AS ((uint64_t)8 << 30)  /* RLIMIT_AS for nvcc and its tools */
#define NV_FSIZE (512u << 20)      /* RLIMIT_FSIZE */
#define NV_OUT "kf_out.so"         /* built in the private folder, then moved */

static const char k_nv_canary[] =
    "#include \"kf_abi.h\"\n__global__ void kf_canary_kernel(float *p) { if (p) p[threadIdx.x] = 1.0f; }\n";

static int is_exec(const char *p) { return p && *p && access(p, X_OK) == 0; }

int kf_cuda_find_nvcc(char *out, size_t cap)
{
    const char *env = getenv("KFARM_NVCC");
    if (env && *env) {
        if (is_exec(env)) return snprintf(out, cap, "%s", env) < (int)cap ? 0 : -1;
        return -1; /* an explicit setting that does not work is not silently replaced */
    }
#ifdef KFARM_NVCC
    if (is_exec(KFARM_NVCC)) return snprintf(out, cap, "%s", KFARM_NVCC) < (int)cap ? 0 : -1;
#endif
    const char *path = getenv("PATH");
    if (path) {
        const char *p = path;
        while (*p) {
            const char *c = strchr(p, ':');
            size_t l = c ? (size_t)(c - p) : strlen(p);
            char cand[PATH_MAX];
            if (l && snprintf(cand, sizeof(cand), "%.*s/nvcc", (int)l, p) < (int)sizeof(cand) &&
                is_exec(cand))
                return snprintf(out, cap, "%s", cand) < (int)cap ? 0 : -1;
            if (!c) break;
            p = c + 1;
        }
    }
    if (is_exec("/usr/local/cuda/bin/nvcc")) return snprintf(out, cap, "/usr/local/cuda/bin/nvcc") < (int)cap ? 0 : -1;
    return -1;
}

int kf_cuda_arch_valid(const char *arch)
{
    if (!arch || strncmp(arch, "sm_", 3) != 0) return 0;
    const char *p = arch + 3;
    int d = 0;
    while (p[d] >= '0' && p[d] <= '9') d++;
    if (d < 2 || d > 3) return 0;
    p += d;
    if (*p == 'a' || *p == 'f') p++;
    return *p == 0;
}

int kf_cuda_define_valid(const char *name, const char *value)
{
    return name && value && strlen(value) <= 64 && kf_tune_valid_name(name) && kf_tune_valid_value(value);
}

int kf_cuda_log_is_arch_error(const char *log, char *line, size_t cap)
{
    static const char *const pats[] = {
        "not supported on .target", "requires .target sm_", "is not supported on target",
        "requires sm_90a", "Feature '", "not supported for .target", "unsupported gpu architecture",
        "Unsupported gpu architecture",
    };
    for (const char *l = log; l && *l;) {
        const char *nl = strchr(l, '\n');
        size_t n = nl ? (size_t)(nl - l) : strlen(l);
        char tmp[1024];
        snprintf(tmp, sizeof(tmp), "%.*s", (int)(n < sizeof(tmp) ? n : sizeof(tmp) - 1), l);
        for (size_t i = 0; i < sizeof(pats) / sizeof(pats[0]); i++) {
            if (strstr(tmp, pats[i]) && (i != 4 || strstr(tmp, "requires"))) {
                if (line && cap) snprintf(line, cap, "%s", tmp);
                return 1;
            }
        }
        l = nl ? nl + 1 : NULL;
    }
    return 0;
}

void kf_cuda_build_res_free(kf_cuda_build_res *res)
{
    if (!res) return;
    free(res->log);
    res->log = NULL;
}

#define DETAIL(st, ...)                                               \
    do {                                                              \
        res->status = (st);                                           \
        snprintf(res->detail, sizeof(res->detail), __VA_ARGS__);      \
    } while (0)

int kf_cuda_build(const kf_cuda_build_req *req, kf_cuda_build_res *res)
{
    memset(res, 0, sizeof(*res));
    if (!req || !req->source_path || !req->out_path || !req->scratch_dir || req->n_defines < 0 ||
        req->n_defines > 32 || req->n_libs < 0 || req->n_libs > 4)
        return -1;
    res->log = calloc(1, 1);
    if (!res->log) return -1;

    if (!kf_cuda_arch_valid(req->arch)) {
        DETAIL(KF_CUDA_BUILD_INFRA, "invalid target arch '%s' (want sm_XY, sm_XYa)", req->arch ? req->arch : "");
        return 0;
    }
    for (int i = 0; i < req->n_defines; i++)
        if (!kf_cuda_define_valid(req->define_names[i], req->define_values[i])) {
            DETAIL(KF_CUDA_BUILD_FAILED, "invalid define %s=%s (names: C identifiers; values: letters, digits, _ . - +)",
                   req->define_names[i], req->define_values[i]);
            return 0;
        }
    for (int i = 0; i < req->n_libs; i++)
        if (!kf_tune_valid_name(req->libs[i])) {
            DETAIL(KF_CUDA_BUILD_INFRA, "invalid link library name '%s' in the task", req->libs[i]);
            return 0;
        }
    char abi[PATH_MAX];
    if (kf_compile_abi_dir(abi, sizeof(abi)) != 0) {
        DETAIL(KF_CUDA_BUILD_INFRA, "kf_abi.h not found (beside the worker, $KFARM_ABI_DIR or the source tree)");
        return 0;
    }
    if (kf_cuda_find_nvcc(res->nvcc, sizeof(res->nvcc)) != 0) {
        DETAIL(KF_CUDA_BUILD_INFRA, "nvcc not found (KFARM_NVCC, $KFARM_NVCC, PATH, /usr/local/cuda/bin)");
        return 0;
    }
    char version[4096] = "";
    if (kf_compile_tool_version(res->nvcc, req->scratch_dir, 30, "release", 0, version, sizeof(version)) != 0) {
        DETAIL(KF_CUDA_BUILD_INFRA, "nvcc %.400s does not run (--version failed)", res->nvcc);
        return 0;
    }
    /* the source is copied into a private build folder below (kf_compile_stage) */
    char src_abs[PATH_MAX];
    if (!realpath(req->source_path, src_abs)) snprintf(src_abs, sizeof(src_abs), "%s", req->source_path);
    size_t srclen;
    char *src = kf_util_read_file(req->source_path, &srclen, SOURCE_CAP);
    if (!src) {
        DETAIL(errno == EFBIG ? KF_CUDA_BUILD_FAILED : KF_CUDA_BUILD_INFRA, "cannot read source %s: %s",
               req->source_path, errno == EFBIG ? "larger than 4 MiB" : strerror(errno));
        return 0;
    }
    char abipath[PATH_MAX + 16];
    snprintf(abipath, sizeof(abipath), "%s/kf_abi.h", abi);
    size_t abilen = 0;
    char *abitext = kf_util_read_file(abipath, &abilen, 1 << 20);

    /* toolkit lib dir for the candidate's rpath (cudart shared) */
    char nvdir[PATH_MAX], libdir[PATH_MAX + 64], rpath[PATH_MAX + 80];
    snprintf(nvdir, sizeof(nvdir), "%s", res->nvcc);
    char *bindir = dirname(nvdir);
    char real[PATH_MAX];
    snprintf(libdir, sizeof(libdir), "%s/../lib64", bindir);
    if (realpath(libdir, real)) snprintf(libdir, sizeof(libdir), "%s", real);
    snprintf(rpath, sizeof(rpath), "-rpath=%s", libdir);

    const char *a = req->arch + 3; /* "90a" */
    char gencode[64], iflag[PATH_MAX + 3];
    snprintf(gencode, sizeof(gencode), "arch=compute_%s,code=sm_%s", a, a);
    snprintf(iflag, sizeof(iflag), "-I%s", abi);
    char *argv[96];
    char defs[32][160], libs[4][48];
    char sname[256] = "source.cu", outname[] = NV_OUT;
    int ac = 0;
    argv[ac++] = res->nvcc;
    argv[ac++] = "-O3";
    argv[ac++] = "-std=c++17";
    argv[ac++] = "-shared";
    argv[ac++] = "-Xcompiler";
    argv[ac++] = "-fPIC";
    argv[ac++] = "-gencode";
    argv[ac++] = gencode;
    argv[ac++] = "-Xptxas";
    argv[ac++] = "-v";
    argv[ac++] = "-cudart";
    argv[ac++] = "shared";
    argv[ac++] = "-Xlinker";
    argv[ac++] = rpath;
    argv[ac++] = iflag;
    for (int i = 0; i < req->n_defines; i++) {
        snprintf(defs[i], sizeof(defs[i]), "-D%s=%s", req->define_names[i], req->define_values[i]);
        argv[ac++] = defs[i];
    }
    argv[ac++] = "-o";
    argv[ac++] = outname;
    argv[ac++] = sname;
    for (int i = 0; i < req->n_libs; i++) {
        snprintf(libs[i], sizeof(libs[i]), "-l%s", req->libs[i]);
        argv[ac++] = libs[i];
    }
    argv[ac] = NULL;

    /* key: source, all flags except paths (-I, -o, source: their content is
     * keyed instead), nvcc path + version, ABI header */
    size_t kcap = srclen + abilen + sizeof(version) + 16384;
    char *kbuf = malloc(kcap);
    if (!kbuf) {
        free(src);
        free(abitext);
        DETAIL(KF_CUDA_BUILD_INFRA, "out of memory");
        return 0;
    }
    size_t kp = 0;
    memcpy(kbuf, src, srclen);
    kp = srclen;
    kbuf[kp++] = 0;
    for (int i = 1; i < ac; i++) {
        if (argv[i] == iflag || argv[i] == outname || argv[i] == sname) continue;
        size_t l = strlen(argv[i]);
        memcpy(kbuf + kp, argv[i], l + 1);
        kp += l + 1;
    }
    kp += (size_t)snprintf(kbuf + kp, kcap - kp, "%s%c%s%c", res->nvcc, 0, version, 0);
    if (abitext) {
        memcpy(kbuf + kp, abitext, abilen);
        kp += abilen;
    }
    kf_util_sha256_hex(kbuf, kp, res->key);
    free(kbuf);
    free(src);
    free(abitext);

    char cdir[PATH_MAX], cso[PATH_MAX + 80], clog[PATH_MAX + 80];
    int keylock = -1; /* kf_compile_key_lock on this key's entry while building */
    int use_cache = req->cache_dir && *req->cache_dir;
    if (use_cache) {
        snprintf(cdir, sizeof(cdir), "%s/cuda", req->cache_dir);
        snprintf(cso, sizeof(cso), "%s/%s.so", cdir, res->key);
        snprintf(clog, sizeof(clog), "%s/%s.log", cdir, res->key);
        /* a hit; else wait while another build of this key runs (its
         * entry is then a hit), else build holding the key's lock */
        for (int pass = 0; pass < 2; pass++) {
            struct stat st;
            if (stat(cso, &st) == 0 && st.st_size > 0 && kf_compile_copy_file(cso, req->out_path) == 0) {
                char *l = kf_util_read_file(clog, NULL, LOG_CAP);
                if (l) {
                    free(res->log);
                    res->log = l;
                }
                res->cached = 1;
                res->status = KF_CUDA_BUILD_OK;
                res->n_fn = kf_cuda_parse_ptxas(res->log, res->fn, KF_CUDA_MAX_PTXAS);
                snprintf(res->detail, sizeof(res->detail), "cache hit %s", res->key);
                kf_compile_key_unlock(keylock);
                return 0;
            }
            if (pass == 0 && kf_util_mkdirs(cdir) == 0)
                keylock = kf_compile_key_lock(cso, req->timeout_s > 0 ? req->timeout_s : 300, req->tick,
                                              req->tick_arg);
        }
    }

    /* nvcc reads only the toolkit, the host compiler (/usr), the ABI header
     * and a private folder with a copy of the source; it writes only there */
    unlink(req->out_path); /* a stale file is never taken for output */
    char bdir[PATH_MAX];
    if (kf_compile_stage(req->scratch_dir, src_abs, ".cu", bdir, sizeof(bdir), sname, sizeof(sname)) != 0) {
        int e = errno;
        DETAIL(KF_CUDA_BUILD_INFRA, "cannot stage the source for nvcc in %.300s: %s", req->scratch_dir, strerror(e));
        kf_compile_key_unlock(keylock);
        return 0;
    }
    char nvreal[PATH_MAX], nvbin[PATH_MAX] = "", nvroot[PATH_MAX] = "";
    if (realpath(res->nvcc, nvreal)) {
        snprintf(nvbin, sizeof(nvbin), "%s", dirname(nvreal)); /* <root>/bin */
        snprintf(nvroot, sizeof(nvroot), "%s", nvbin);
        snprintf(nvroot, sizeof(nvroot), "%s", dirname(nvroot)); /* <root> */
    }
    const char *reads[] = {abi, nvroot[0] ? nvroot : NULL, libdir, NULL};
    double timeout_s = req->timeout_s > 0 ? req->timeout_s : 300;
    kf_compile_job job = {.argv = argv,
                          .dir = bdir,
                          .read_paths = reads,
                          .as_bytes = NV_AS,
                          .fsize_limit = NV_FSIZE,
                          .output_cap = LOG_CAP,
                          .timeout_s = timeout_s,
                          .tick = req->tick,
                          .tick_arg = req->tick_arg};
    kf_sandbox_res sb;
    int rc = kf_compile_exec(&job, &sb);
    res->seconds = sb.wall_s;
    if (rc != 0) {
        DETAIL(KF_CUDA_BUILD_INFRA, "could not start nvcc: %s", sb.err);
        kf_sandbox_res_free(&sb);
        kf_util_rmtree(bdir);
        kf_compile_key_unlock(keylock);
        return 0;
    }
    free(res->log);
    res->log = sb.output ? sb.output : calloc(1, 1);
    sb.output = NULL;
    char line[400], why[400];
    if (sb.confine_failed) {
        DETAIL(KF_CUDA_BUILD_INFRA, "could not confine nvcc: %s", sb.err);
    } else switch (sb.how) {
    case KF_SANDBOX_TIMEOUT: DETAIL(KF_CUDA_BUILD_FAILED, "compile exceeded %.0f s (the compile time limit)", timeout_s); break;
    case KF_SANDBOX_CANCELLED: DETAIL(KF_CUDA_BUILD_INFRA, "cancelled"); break;
    case KF_SANDBOX_SIGNALED:
        if (sb.signal == SIGXFSZ) DETAIL(KF_CUDA_BUILD_FAILED, "build output exceeds the 512 MiB file size limit");
        else if (kf_compile_signal_is_compilers(sb.signal))
            DETAIL(KF_CUDA_BUILD_FAILED, "nvcc died of signal %s (limits: 8 GiB address space, 512 MiB files)",
                   strsignal(sb.signal));
        else DETAIL(KF_CUDA_BUILD_INFRA, "nvcc killed by signal %s", strsignal(sb.signal));
        break;
    case KF_SANDBOX_FAILED: DETAIL(KF_CUDA_BUILD_INFRA, "%s", sb.err); break;
    case KF_SANDBOX_EXITED:
        if (sb.exit_status == 0) {
            struct stat st;
            if (kf_compile_collect(bdir, NV_OUT, req->out_path) != 0) {
                int e = errno;
                DETAIL(KF_CUDA_BUILD_INFRA, "nvcc reported success but its shared object could not be taken: %s",
                       strerror(e));
                break;
            }
            if (stat(req->out_path, &st) != 0 || st.st_size == 0) {
                DETAIL(KF_CUDA_BUILD_INFRA, "nvcc reported success but wrote no shared object");
                break;
            }
            res->status = KF_CUDA_BUILD_OK;
            snprintf(res->detail, sizeof(res->detail), "built for %s in %.2f s", req->arch, sb.wall_s);
            if (use_cache && kf_util_mkdirs(cdir) == 0) {
                char tmp[PATH_MAX + 128];
                snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", clog, (long)getpid());
                if (kf_util_write_file(tmp, res->log, strlen(res->log)) == 0) rename(tmp, clog);
                kf_compile_cache_put(cso, req->out_path);
            }
            break;
        }
        /* blame the worker only for what it proves itself */
        kf_util_rmtree(bdir); /* what the build wrote no longer counts against the disk */
        bdir[0] = 0;
        int e = kf_sandbox_exec_failed(&sb);
        if (e) {
            DETAIL(KF_CUDA_BUILD_INFRA, "nvcc could not be executed (status %d): %s", sb.exit_status, strerror(e));
        } else if (kf_compile_disk_low(req->scratch_dir, NV_FSIZE, why, sizeof(why)) ||
                   (use_cache && kf_compile_disk_low(req->cache_dir, NV_FSIZE, why, sizeof(why)))) {
            DETAIL(KF_CUDA_BUILD_INFRA, "%s", why);
        } else if (kf_cuda_log_is_arch_error(res->log, line, sizeof(line))) {
            DETAIL(KF_CUDA_BUILD_ARCH, "not buildable for %s: %s", req->arch, line);
        } else if (!kf_compile_canary(&job, req->scratch_dir, sname, k_nv_canary, why, sizeof(why))) {
            DETAIL(KF_CUDA_BUILD_INFRA, "%s", why);
        } else {
            kf_compile_first_error(res->log, 1, line, sizeof(line));
            DETAIL(KF_CUDA_BUILD_FAILED, "%s", line[0] ? line : "nvcc failed with no output");
        }
        break;
    }
    if (bdir[0]) kf_util_rmtree(bdir);
    if (res->status != KF_CUDA_BUILD_OK) unlink(req->out_path);
    res->n_fn = kf_cuda_parse_ptxas(res->log, res->fn, KF_CUDA_MAX_PTXAS);
    kf_sandbox_res_free(&sb);
    kf_compile_key_unlock(keylock); /* after the entry was stored: a waiter finds it */
    return 0;
}
