/*
 * eval.c -- one evaluation, start to verdict (implements worker/kf_eval.h),
 * for every backend.
 *
 *   1. load the task; check the backend is served here and the defines
 *      (kf_tune_valid_name/value)
 *   2. private work folder <work_dir>/kfarm-eval-XXXXXX with one folder per
 *      shared object (build/, reference/, baseline/, candidate/): a runner's
 *      read allow-list holds only its own folder
 *   3. builds (cpu: compile.c; cuda: kf_cuda_build for the device's exact
 *      sm_XY), through the compile cache and the confined compiler (cuda:
 *      the reference and baseline are built in two children while this
 *      process builds the candidate, see warm_task_builds); the
 *      task's own code failing to build is the task's infra_error, the
 *      candidate's compile_error (unsupported when only the architecture is
 *      wrong), a broken toolchain the worker's infra_error
 *   4. static integrity: forbidden symbols (ELF .dynsym + source scan)
 *   5. the judge (judge.c) in a sandboxed child with the wall-clock limit;
 *      a statically rejected candidate is still validated (not timed), so a
 *      crash or hang outranks the rejection as the precedence requires
 *   6. the judge's verdict and blame, or how the judge itself ended (always
 *      the worker's fault: the judge runs no candidate code), combined with
 *      step 4 by precedence:
 *        compile_error/infra_error/unsupported > load_error >
 *        runtime_error/timeout > rejected_cheat > incorrect > ok
 *      except that a forbidden symbol outranks load_error, runtime_error and
 *      timeout: under confinement the forbidden call itself is what fails (C9)
 *
 * metrics_json follows docs/metrics.md for both backends.
 */
#define _GNU_SOURCE
#include "kf_eval.h"
#include "compile.h"
#include "device.h"
#include "judge.h"
#include "sandbox.h"
#include "kf_task.h"
#include "kf_tune.h"
#include "kf_util.h"
#include "kf_cuda.h"

#include <ctype.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

static int rank(kf_verdict v)
{
    switch (v) {
    case KF_COMPILE_ERROR: case KF_INFRA_ERROR: case KF_UNSUPPORTED: return 0;
    case KF_LOAD_ERROR: return 1;
    case KF_RUNTIME_ERROR: case KF_TIMEOUT: return 2;
    case KF_REJECTED_CHEAT: return 3;
    case KF_INCORRECT: return 4;
    case KF_OK: return 5;
    default: return 0;
    }
}

static void set_verdict(kf_eval_res *res, kf_verdict v, const char *fmt, ...)
{
    res->verdict = v;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->detail, sizeof(res->detail), fmt, ap);
    va_end(ap);
    kf_util_utf8_sanitize(res->detail, strlen(res->detail)); /* may quote a compiler or a candidate */
}

static const char *const role_dir[3] = {"reference", "baseline", "candidate"};

typedef struct {
    const kf_eval_req *req;
    kf_eval_res *res;
    kf_task task;
    int task_loaded;
    int cuda;
    char dir[PATH_MAX];
    char rdir[PATH_MAX];      /* what runners may read: their binary and one folder each */
    char build[PATH_MAX + 8];
    char so[3][PATH_MAX + 48];
    char arch[16];
    json_t *metrics;
    const char *blame;
} ev;

static json_t *compile_json(const kf_compile_res *c)
{
    json_t *o = json_object();
    json_object_set_new(o, "status", json_string(c->status == KF_COMPILE_OK       ? "ok"
                                                 : c->status == KF_COMPILE_FAILED ? "failed"
                                                                                  : "infra"));
    json_object_set_new(o, "cached", json_boolean(c->cached));
    json_object_set_new(o, "seconds", json_real(c->seconds));
    json_object_set_new(o, "key", json_string(c->key));
    json_object_set_new(o, "detail", json_string(c->detail));
    return o;
}

static json_t *cuda_build_json(const kf_cuda_build_res *b)
{
    json_t *fns = json_array();
    for (int i = 0; i < b->n_fn; i++)
        json_array_append_new(fns, json_pack("{s:s,s:i,s:i,s:i,s:i,s:i}", "name", b->fn[i].name, "registers",
                                             b->fn[i].registers, "smem_bytes", b->fn[i].smem_bytes, "stack_bytes",
                                             b->fn[i].stack_bytes, "spill_stores", b->fn[i].spill_stores,
                                             "spill_loads", b->fn[i].spill_loads));
    return json_pack("{s:s,s:b,s:f,s:s,s:s,s:o}", "status",
                     b->status == KF_CUDA_BUILD_OK ? "ok" : b->status == KF_CUDA_BUILD_FAILED ? "failed"
                                                        : b->status == KF_CUDA_BUILD_ARCH ? "arch" : "infra",
                     "cached", b->cached, "seconds", b->seconds, "key", b->key, "detail", b->detail, "ptxas", fns);
}

/* Build one of reference (0), baseline (1), candidate (2). 0 if built, else
 * the verdict is set and -1 returned. */
static int build_one(ev *e, int which)
{
    const kf_eval_req *req = e->req;
    char src[PATH_MAX * 2];
    if (which == 2)
        snprintf(src, sizeof(src), "%s", req->source_path);
    else
        snprintf(src, sizeof(src), "%s/%s", req->task_dir, which == 0 ? e->task.reference : e->task.baseline);
    const char *who = role_dir[which];
    json_t *cj = json_object_get(e->metrics, "compile");
    if (e->cuda) {
        const char *libs[4];
        for (int i = 0; i < e->task.n_link && i < 4; i++) libs[i] = e->task.link[i];
        kf_cuda_build_req br = {.source_path = src, .out_path = e->so[which], .scratch_dir = e->build,
                                .cache_dir = req->cache_dir, .arch = e->arch,
                                .n_libs = which == 2 ? 0 : e->task.n_link, .libs = libs,
                                .n_defines = which == 2 ? req->n_defines : 0,
                                .define_names = req->define_names, .define_values = req->define_values,
                                .tick = req->tick, .tick_arg = req->tick_arg};
        kf_cuda_build_res b;
        kf_cuda_build(&br, &b);
        kf_util_utf8_sanitize(b.detail, strlen(b.detail));
        if (b.log) kf_util_utf8_sanitize(b.log, strlen(b.log));
        json_object_set_new(cj, who, cuda_build_json(&b));
        if (which == 2 || b.status != KF_CUDA_BUILD_OK) {
            free(e->res->compile_log);
            e->res->compile_log = strdup(b.log ? b.log : "");
        }
        int rc = 0;
        if (b.status != KF_CUDA_BUILD_OK) {
            rc = -1;
            if (which == 2)
                set_verdict(e->res, b.status == KF_CUDA_BUILD_FAILED ? KF_COMPILE_ERROR
                                    : b.status == KF_CUDA_BUILD_ARCH ? KF_UNSUPPORTED : KF_INFRA_ERROR,
                            "%s", b.detail);
            else if (b.status == KF_CUDA_BUILD_ARCH)
                set_verdict(e->res, KF_UNSUPPORTED, "the task's %s does not build for %s: %s", who, e->arch, b.detail);
            else
                set_verdict(e->res, KF_INFRA_ERROR, "the task's %s does not build: %s", who, b.detail);
            e->blame = which == 2 && b.status != KF_CUDA_BUILD_INFRA ? "candidate"
                       : b.status == KF_CUDA_BUILD_INFRA ? "worker" : "task";
        }
        kf_cuda_build_res_free(&b);
        return rc;
    }
    kf_compile_req cr = {.source_path = src, .out_path = e->so[which], .scratch_dir = e->build,
                         .cache_dir = req->cache_dir, .opt = which == 0 ? "-O2" : "-O3",
                         .n_defines = which == 2 ? req->n_defines : 0, .define_names = req->define_names,
                         .define_values = req->define_values, .tick = req->tick, .tick_arg = req->tick_arg};
    kf_compile_res c;
    if (kf_compile_run(&cr, &c) != 0) {
        set_verdict(e->res, KF_INFRA_ERROR, "%s: invalid compile request", who);
        e->blame = "worker";
        return -1;
    }
    /* the compiler quotes the candidate's text: keep it valid UTF-8 for JSON */
    kf_util_utf8_sanitize(c.detail, strlen(c.detail));
    if (c.log) kf_util_utf8_sanitize(c.log, strlen(c.log));
    json_object_set_new(cj, who, compile_json(&c));
    if (which == 2 || c.status != KF_COMPILE_OK) {
        free(e->res->compile_log);
        e->res->compile_log = c.log;
        c.log = NULL;
    }
    int rc = 0;
    if (c.status == KF_COMPILE_INFRA) {
        set_verdict(e->res, KF_INFRA_ERROR, "building the %s: %s", who, c.detail);
        e->blame = "worker";
        rc = -1;
    } else if (c.status == KF_COMPILE_FAILED) {
        if (which == 2) {
            /* an instruction set this worker's compiler target lacks (I15) */
            if (c.log && strstr(c.log, "target specific option mismatch"))
                set_verdict(e->res, KF_UNSUPPORTED, "uses an instruction set this worker's CPU lacks: %s", c.detail);
            else
                set_verdict(e->res, KF_COMPILE_ERROR, "%s", c.detail);
            e->blame = "candidate";
        } else {
            set_verdict(e->res, KF_INFRA_ERROR, "the task's %s does not build: %s", who, c.detail);
            e->blame = "task";
        }
        rc = -1;
    }
    kf_compile_res_free(&c);
    return rc;
}

/* Parallel builds (cuda). nvcc builds one file on one core, and the first
 * job of a task on a worker needs three builds (reference, baseline,
 * candidate): ~5 s one after another on the H200 host, as long as a whole
 * evaluation, which left the GPU idle (issue 12). So two children build the
 * reference and the baseline into the compile cache while this process
 * builds the candidate; build_one() then finds them in the cache and
 * reports them as usual. A child's failed build is never cached: the
 * parent's build_one() builds it again and reports the failure. The
 * children never call the heartbeat tick (they hold no socket); the parent
 * ticks while it waits for them (kf_sandbox_reap). Without a compile
 * cache there is nothing to share, and nothing is started; nor on a host
 * of fewer than 4 cores. */
static void warm_task_builds(ev *e, pid_t kids[2])
{
    kids[0] = kids[1] = 0;
    if (!e->cuda || !e->req->cache_dir || !*e->req->cache_dir) return;
    /* on a small host three compilers would crowd out a judge timing on
     * another GPU of the same host: there they build one after another */
    if (sysconf(_SC_NPROCESSORS_ONLN) < 4) return;
    for (int which = 0; which < 2; which++) {
        pid_t pid = fork();
        if (pid < 0) return; /* the parent builds it itself */
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            kf_eval_req r = *e->req;
            r.tick = NULL;
            r.tick_arg = NULL;
            e->req = &r;
            /* this process's own copy: its out path is its own file */
            snprintf(e->so[which], sizeof(e->so[which]), "%.4000s/warm-%s.so", e->build, role_dir[which]);
            build_one(e, which);
            _exit(0);
        }
        kids[which] = pid;
    }
}

/* Absolute path of a program beside this binary (kfarm-runner[-cuda]). */
static int runner_path(const char *name, char *out, size_t cap)
{
    const char *env = getenv("KFARM_RUNNER_DIR");
    char exe[PATH_MAX];
    if (env && *env) {
        snprintf(exe, sizeof(exe), "%s/x", env);
    } else {
        ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (n <= 0) return -1;
        exe[n] = 0;
    }
    char *d = dirname(exe);
    if (snprintf(out, cap, "%s/%s", d, name) >= (int)cap) return -1;
    if (access(out, X_OK) == 0) return 0;
    /* test binaries live one level below the build dir */
    if (snprintf(out, cap, "%s/../%s", d, name) >= (int)cap) return -1;
    char rp[PATH_MAX];
    if (access(out, X_OK) == 0 && realpath(out, rp)) {
        snprintf(out, cap, "%s", rp);
        return 0;
    }
    return -1;
}

/* Does the candidate's source ask for an instruction set this CPU lacks?
 * Every ISA-like word in it (avx512*, amx_*, avx2, avxvnni*, fma, f16c,
 * bmi2, sha_ni, vaes, gfni) is looked up in the flags of /proc/cpuinfo; used
 * only to tell a SIGILL on this worker from a crash (I15). */
static int source_wants_missing_isa(const char *path, char *which, size_t cap)
{
    char *src = kf_util_read_file(path, NULL, 4u << 20);
    char *cpu = kf_util_read_file("/proc/cpuinfo", NULL, 8u << 20);
    int missing = 0;
    static const char *const pre[] = {"avx512", "amx_", "avx2", "avxvnni", "fma", "f16c", "bmi2", "sha_ni",
                                      "vaes", "gfni"};
    char *flags = cpu ? strstr(cpu, "\nflags") : NULL;
    char *eol = flags ? strchr(flags + 1, '\n') : NULL;
    if (eol) *eol = 0;
    for (const char *p = src; src && flags && *p && !missing; p++) {
        for (size_t k = 0; k < sizeof(pre) / sizeof(pre[0]); k++) {
            size_t l = strlen(pre[k]);
            if (strncasecmp(p, pre[k], l) || (p > src && (isalnum((unsigned char)p[-1]) || p[-1] == '_'))) continue;
            char w[48];
            size_t n = 0;
            while (n < sizeof(w) - 1 && (isalnum((unsigned char)p[n]) || p[n] == '_')) {
                w[n] = (char)tolower((unsigned char)p[n]);
                n++;
            }
            w[n] = 0;
            if (!strcmp(w, "avx512") || !strcmp(w, "amx_")) break; /* a family, not a flag */
            /* the flag as a whole word of the flags line */
            char pat[64];
            snprintf(pat, sizeof(pat), " %s", w);
            const char *f = strstr(flags, pat);
            int found = 0;
            while (f && !found) {
                char c = f[strlen(pat)];
                found = c == ' ' || c == 0 || c == '\n';
                f = strstr(f + 1, pat);
            }
            if (!found) {
                snprintf(which, cap, "%s", w);
                missing = 1;
            }
            break;
        }
    }
    free(cpu);
    free(src);
    return missing;
}

static void finish_metrics(ev *e)
{
    kf_eval_res *res = e->res;
    json_object_set_new(e->metrics, "verdict", json_string(kf_verdict_name(res->verdict)));
    if (!e->blame) e->blame = res->verdict == KF_OK ? "none" : res->verdict == KF_INFRA_ERROR ? "worker" : "candidate";
    json_object_set_new(e->metrics, "blame", json_string(e->blame));
    json_t *tj = json_object_get(e->metrics, "timing");
    if (res->verdict == KF_OK && tj) {
        json_t *s = json_object_get(tj, "speedup");
        if (json_is_number(s)) {
            res->speedup = json_number_value(s);
            res->candidate_us = json_number_value(json_object_get(tj, "candidate_us"));
            res->baseline_us = json_number_value(json_object_get(tj, "baseline_us"));
        }
    }
    free(res->metrics_json);
    res->metrics_json = json_dumps(e->metrics, JSON_COMPACT | JSON_REAL_PRECISION(9));
    if (!res->compile_log) res->compile_log = strdup("");
}

/* The judge's report -> verdict. */
static void take_report(ev *e, const kf_judge_cfg *jc, const kf_sandbox_res *sb, double limit)
{
    kf_eval_res *res = e->res;
    char phase[512] = "";
    char *result = kf_judge_parse_report(sb->report, jc->nonce, phase, sizeof(phase));
    json_object_set_new(e->metrics, "judge", json_pack("{s:f,s:s,s:b}", "wall_s", sb->wall_s, "last_phase", phase,
                                                         "net_isolated", sb->net_isolated));
    e->blame = "worker";
    if (sb->how == KF_SANDBOX_CANCELLED) {
        set_verdict(res, KF_INFRA_ERROR, "cancelled");
    } else if (result) {
        json_error_t je;
        json_t *o = json_loads(result, 0, &je);
        const char *vn = o ? json_string_value(json_object_get(o, "verdict")) : NULL;
        int v = vn ? kf_verdict_parse(vn) : -1;
        if (v < 0) {
            set_verdict(res, KF_INFRA_ERROR, "unreadable judge report: %s", o ? "no verdict" : je.text);
        } else {
            const char *d = json_string_value(json_object_get(o, "detail"));
            const char *bl = json_string_value(json_object_get(o, "blame"));
            set_verdict(res, (kf_verdict)v, "%s", d ? d : "");
            e->blame = bl && !strcmp(bl, "task") ? "task" : bl && !strcmp(bl, "candidate") ? "candidate"
                       : bl && !strcmp(bl, "none") ? "none" : "worker";
            json_t *m = json_object_get(o, "metrics");
            if (json_is_object(m)) json_object_update(e->metrics, m);
        }
        json_decref(o);
    } else if (sb->how == KF_SANDBOX_TIMEOUT) {
        set_verdict(res, KF_INFRA_ERROR, "the judge exceeded the %.0f s limit (%s)", limit, phase);
    } else if (sb->how == KF_SANDBOX_SIGNALED) {
        set_verdict(res, KF_INFRA_ERROR, "the judge died with signal %d (%s) during: %s", sb->signal,
                    strsignal(sb->signal), phase);
    } else {
        set_verdict(res, KF_INFRA_ERROR, "the judge gave no verdict (%s; %s)",
                    sb->how == KF_SANDBOX_FAILED ? sb->err : "exited", phase);
    }
    free(result);
}

int kf_eval_run(const kf_eval_req *req, kf_eval_res *res)
{
    if (!res) return -1;
    memset(res, 0, sizeof(*res));
    if (!req || !req->task_dir || !req->source_path || req->n_defines < 0 ||
        req->n_defines > KF_EVAL_MAX_DEFINES) {
        set_verdict(res, KF_INFRA_ERROR, "invalid evaluation request");
        res->metrics_json = strdup("{}");
        res->compile_log = strdup("");
        return -1;
    }
    ev E;
    memset(&E, 0, sizeof(E));
    ev *e = &E;
    e->req = req;
    e->res = res;
    e->metrics = json_object();
    json_object_set_new(e->metrics, "compile", json_object());
    double t_start = kf_util_now_s();

    char err[512];
    if (kf_task_load(req->task_dir, &e->task, err, sizeof(err)) != 0) {
        set_verdict(res, KF_INFRA_ERROR, "task %s: %s", req->task_dir, err);
        e->blame = "task";
        goto done;
    }
    e->task_loaded = 1;
    json_object_set_new(e->metrics, "task", json_string(e->task.name));
    json_object_set_new(e->metrics, "backend", json_string(e->task.backend));
    const kf_judge_backend *be = NULL;
    if (!strcmp(e->task.backend, "cpu")) {
        be = &kf_judge_backend_cpu;
    } else if (!strcmp(e->task.backend, "cuda") && kf_judge_backend_cuda()) {
        be = kf_judge_backend_cuda();
        e->cuda = 1;
    } else {
        set_verdict(res, KF_UNSUPPORTED, "task backend '%s' is not available on this worker", e->task.backend);
        e->blame = "none";
        goto done;
    }
    for (int i = 0; i < req->n_defines; i++) {
        if (!req->define_names[i] || !req->define_values[i] || !kf_tune_valid_name(req->define_names[i]) ||
            !kf_tune_valid_value(req->define_values[i])) {
            set_verdict(res, KF_COMPILE_ERROR, "invalid tunable define %s=%s",
                        req->define_names[i] ? req->define_names[i] : "(null)",
                        req->define_values[i] ? req->define_values[i] : "(null)");
            goto done;
        }
    }
    if (e->cuda) {
        if (req->arch && *req->arch) {
            snprintf(e->arch, sizeof(e->arch), "%s", req->arch);
        } else {
#ifdef KFARM_HAVE_CUDA
            kf_cuda_gpu gpus[KF_CUDA_MAX_GPUS];
            int ng = kf_cuda_discover(gpus, KF_CUDA_MAX_GPUS, err, sizeof(err));
            for (int i = 0; i < ng; i++)
                if (gpus[i].index == req->gpu_index) snprintf(e->arch, sizeof(e->arch), "%s", gpus[i].arch);
#else
            int ng = -1;
#endif
            if (!e->arch[0]) {
                set_verdict(res, KF_INFRA_ERROR, "no CUDA device %d on this worker: %s", req->gpu_index,
                            ng < 0 || !err[0] ? "discovery failed" : err);
                e->blame = "worker";
                goto done;
            }
        }
        json_object_set_new(e->metrics, "arch", json_string(e->arch));
    }

    /* private work folder (absolute: children run elsewhere); 0711 so an
     * unprivileged runner can reach its own folder but list nothing */
    const char *root = req->work_dir && *req->work_dir ? req->work_dir : getenv("TMPDIR");
    if (!root || !*root) root = "/tmp";
    char rootabs[PATH_MAX];
    if (kf_util_mkdirs(root) != 0 || !realpath(root, rootabs) ||
        snprintf(e->dir, sizeof(e->dir), "%s/kfarm-eval-XXXXXX", rootabs) >= (int)sizeof(e->dir) ||
        !mkdtemp(e->dir)) {
        set_verdict(res, KF_INFRA_ERROR, "cannot create a work folder under %s: %s", root, strerror(errno));
        e->blame = "worker";
        e->dir[0] = 0;
        goto done;
    }
    chmod(e->dir, 0711);
    snprintf(e->build, sizeof(e->build), "%.4000s/build", e->dir);
    if (kf_util_mkdirs(e->build) != 0) {
        set_verdict(res, KF_INFRA_ERROR, "cannot create %s: %s", e->build, strerror(errno));
        e->blame = "worker";
        goto done;
    }
    /* Runners run as an unprivileged uid: what they read lives in a folder
     * of its own under /tmp (or $KFARM_RUNNER_TMP), mode 0711, so no parent
     * folder of the caller's work dir needs to be open to them. */
    const char *rroot = getenv("KFARM_RUNNER_TMP");
    if (!rroot || !*rroot) rroot = "/tmp";
    if (snprintf(e->rdir, sizeof(e->rdir), "%s/kfarm-run-XXXXXX", rroot) >= (int)sizeof(e->rdir) || !mkdtemp(e->rdir)) {
        set_verdict(res, KF_INFRA_ERROR, "cannot create a runner folder under %s: %s", rroot, strerror(errno));
        e->blame = "worker";
        e->rdir[0] = 0;
        goto done;
    }
    chmod(e->rdir, 0711);
    for (int i = 0; i < 3; i++) {
        char d[PATH_MAX + 16];
        snprintf(d, sizeof(d), "%.4000s/%s", e->rdir, role_dir[i]);
        if (kf_util_mkdirs(d) != 0) {
            set_verdict(res, KF_INFRA_ERROR, "cannot create %s: %s", d, strerror(errno));
            e->blame = "worker";
            goto done;
        }
        chmod(d, 0755);
        snprintf(e->so[i], sizeof(e->so[i]), "%s/%s.so", d, role_dir[i]);
    }

    /* candidate first: a compile_error is the common case and needs no other
     * build (the children still fill the cache for the task's next job) */
    double t_builds = kf_util_now_s();
    pid_t kids[2];
    warm_task_builds(e, kids);
    int built = build_one(e, 2) == 0;
    for (int i = 0; i < 2; i++) kf_sandbox_reap(kids[i], req->tick, req->tick_arg);
    if (!built || build_one(e, 0) || build_one(e, 1)) goto done;
    json_object_set_new(e->metrics, "builds_s", json_real(kf_util_now_s() - t_builds));
    for (int i = 0; i < 3; i++) chmod(e->so[i], 0644);
    if (req->compile_only) {
        set_verdict(res, KF_OK, "compiled (compile only)");
        e->blame = "none";
        goto done;
    }

    /* static integrity */
    kf_verdict static_v = KF_OK;
    char static_detail[1024] = "";
    char *src = kf_util_read_file(req->source_path, NULL, 4u << 20);
    int fb = kf_compile_find_forbidden(&e->task, src ? src : "", e->so[2], static_detail, sizeof(static_detail));
    free(src);
    if (fb < 0) {
        set_verdict(res, KF_INFRA_ERROR, "%s", static_detail);
        e->blame = "worker";
        goto done;
    }
    if (fb > 0) {
        static_v = KF_REJECTED_CHEAT;
        json_object_set_new(e->metrics, "forbidden", json_string(static_detail));
    }

    /* the judge */
    double limit = req->timeout_s > 0 ? req->timeout_s : e->task.timeout_s;
    if (limit <= 0) limit = 120;
    char rsrc[PATH_MAX], rpath[PATH_MAX + 32];
    if (runner_path(be->runner_name, rsrc, sizeof(rsrc)) != 0) {
        set_verdict(res, KF_INFRA_ERROR, "%s not found beside the worker binary", be->runner_name);
        e->blame = "worker";
        goto done;
    }
    snprintf(rpath, sizeof(rpath), "%.4000s/%s", e->rdir, be->runner_name);
    if (kf_compile_copy_file(rsrc, rpath) != 0 || chmod(rpath, 0755) != 0) {
        set_verdict(res, KF_INFRA_ERROR, "cannot copy %s into %s: %s", be->runner_name, e->rdir, strerror(errno));
        e->blame = "worker";
        goto done;
    }
    kf_judge_cfg jc;
    memset(&jc, 0, sizeof(jc));
    jc.task = &e->task;
    jc.backend = be;
    for (int i = 0; i < 3; i++) jc.so[i] = e->so[i];
    jc.runner_path = rpath;
    jc.secret = req->seed;
    if (!jc.secret && getrandom(&jc.secret, sizeof(jc.secret), 0) != (ssize_t)sizeof(jc.secret))
        jc.secret = (uint64_t)(kf_util_now_s() * 1e9) ^ ((uint64_t)getpid() << 40);
    jc.gpu = req->gpu_index;
    jc.quick = req->quick;
    jc.validate_only = static_v != KF_OK;
    jc.allow_unconfined = getenv("KFARM_ALLOW_UNCONFINED") && !strcmp(getenv("KFARM_ALLOW_UNCONFINED"), "1");
    jc.budget_s = limit * 0.85;
    jc.llc_bytes = kf_device_llc_bytes();
    kf_judge_new_nonce(jc.nonce);
    kf_sandbox_req sr = {.scratch_dir = e->build,
                         .timeout_s = limit,
                         .tick = req->tick,
                         .tick_arg = req->tick_arg,
                         .fsize_limit = UINT64_MAX, /* memfd arenas count against RLIMIT_FSIZE */
                         .fn = kf_judge_child,
                         .arg = &jc,
                         .no_isolation = 1};
    kf_sandbox_res sb;
    /* the previous evaluation's judge is gone before this one starts */
    kf_eval_reap(req->pending_judge);
    sr.detach_on_report_eof = e->cuda && req->pending_judge;
    json_object_set_new(e->metrics, "pre_judge_s", json_real(kf_util_now_s() - t_start));
    if (req->judge_srv)
        kf_judge_srv_eval(req->judge_srv, &jc, req->task_dir, &sr, &sb);
    else
        kf_sandbox_run(&sr, &sb);
    if (sb.detached_pid) {
        if (req->pending_judge) *req->pending_judge = sb.detached_pid;
        else kf_sandbox_reap(sb.detached_pid, NULL, NULL);
    }
    take_report(e, &jc, &sb, limit);
    kf_sandbox_res_free(&sb);
    char isa[48];
    if (res->verdict == KF_RUNTIME_ERROR && strstr(res->detail, "SIGILL") &&
        source_wants_missing_isa(req->source_path, isa, sizeof(isa))) {
        char was[sizeof(res->detail)];
        snprintf(was, sizeof(was), "%s", res->detail);
        set_verdict(res, KF_UNSUPPORTED, "died with SIGILL: it uses %s, which this worker's CPU lacks (%.900s)", isa,
                    was);
        e->blame = "none";
    }

    /* A forbidden symbol outranks what its use caused at run time (the
     * confined runner refuses the dlopen or the library the symbol needs, so
     * the candidate fails to load, crashes, errs or hangs): the detail names
     * the symbol (C9). Only the build-level verdicts stay above it. */
    if (static_v != KF_OK && (rank(static_v) < rank(res->verdict) || res->verdict == KF_RUNTIME_ERROR ||
                              res->verdict == KF_TIMEOUT || res->verdict == KF_LOAD_ERROR)) {
        json_object_set_new(e->metrics, "judge_verdict", json_string(kf_verdict_name(res->verdict)));
        set_verdict(res, static_v, "%s", static_detail);
        e->blame = "candidate";
    }

done:
    json_object_set_new(e->metrics, "eval_s", json_real(kf_util_now_s() - t_start));
    finish_metrics(e);
    json_decref(e->metrics);
    if (e->task_loaded) kf_task_free(&e->task);
    if (e->dir[0] && !getenv("KFARM_KEEP_WORK")) kf_util_rmtree(e->dir);
    if (e->rdir[0] && !getenv("KFARM_KEEP_WORK")) kf_util_rmtree(e->rdir);
    return 0;
}

void kf_eval_res_free(kf_eval_res *res)
{
    if (!res) return;
    free(res->metrics_json);
    free(res->compile_log);
    res->metrics_json = res->compile_log = NULL;
}

void kf_eval_reap(int *pending_judge)
{
    if (!pending_judge || *pending_judge <= 0) return;
    kf_sandbox_reap(*pending_judge, NULL, NULL);
    *pending_judge = 0;
}
