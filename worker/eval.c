/*
 * eval.c -- one evaluation, start to verdict (implements worker/kf_eval.h).
 *
 *   1. load the task; check the defines (kf_tune_valid_name/value)
 *   2. make a private work folder: <work_dir>/kfarm-eval-XXXXXX/{build,run}
 *   3. build reference (-O2), baseline and candidate (-O3 + defines) through
 *      compile.c (cache, sandboxed compiler); a reference/baseline that does
 *      not build is the task's problem (infra_error), the candidate's is
 *      compile_error, a broken toolchain is infra_error
 *   4. static integrity: forbidden symbols (ELF .dynsym + source scan)
 *   5. run harness.c in a sandboxed child with the wall-clock limit; a
 *      statically rejected candidate is still run (validation only), so that
 *      a crash or hang outranks the rejection as the precedence requires
 *   6. turn the child's report, or how it died, into a verdict, and combine
 *      with step 4 by precedence:
 *        compile_error/infra_error > load_error > runtime_error/timeout >
 *        rejected_cheat > incorrect > ok
 *
 * Who is blamed when the child dies without reporting (see harness.h): the
 * candidate when it had been loaded (load_error if it died inside dlopen,
 * i.e. in a constructor, else runtime_error or timeout), the task otherwise.
 *
 * Everything the verdict rests on goes into metrics_json: compile info,
 * static checks, sandbox facts (Landlock, network namespace, wall time),
 * the child's validation/timing tables, and a capped tail of what the
 * candidate printed.
 */
#define _GNU_SOURCE
#include "kf_eval.h"
#include "compile.h"
#include "device.h"
#include "harness.h"
#include "sandbox.h"
#include "kf_task.h"
#include "kf_tune.h"
#include "kf_util.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#ifdef KFARM_HAVE_CUDA
#include "kf_cuda.h"
#endif

#define CHILD_OUTPUT_KEEP 4096

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
}

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGXFSZ: return "SIGXFSZ";
    case SIGXCPU: return "SIGXCPU";
    case SIGPIPE: return "SIGPIPE";
    case SIGTRAP: return "SIGTRAP";
    case SIGSYS: return "SIGSYS";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGALRM: return "SIGALRM";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    }
    return "signal";
}

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

typedef struct {
    const kf_eval_req *req;
    kf_eval_res *res;
    kf_task task;
    int task_loaded;
    char dir[PATH_MAX];      /* private work folder */
    char build[PATH_MAX + 8], rundir[PATH_MAX + 8];
    char so[3][PATH_MAX + 32];
    json_t *metrics;
} ev;

/* Build one of reference (0), baseline (1), candidate (2). Returns 0 if it
 * built, else sets the verdict and returns -1. */
static int build_one(ev *e, int which)
{
    static const char *const names[3] = {"reference", "baseline", "candidate"};
    const kf_eval_req *req = e->req;
    char src[PATH_MAX * 2];
    if (which == 2)
        snprintf(src, sizeof(src), "%s", req->source_path);
    else
        snprintf(src, sizeof(src), "%s/%s", req->task_dir, which == 0 ? e->task.reference : e->task.baseline);
    snprintf(e->so[which], sizeof(e->so[which]), "%s/%s.so", e->dir, names[which]);
    kf_compile_req cr = {.source_path = src,
                         .out_path = e->so[which],
                         .scratch_dir = e->build,
                         .cache_dir = req->cache_dir,
                         .opt = which == 0 ? "-O2" : "-O3",
                         .n_defines = which == 2 ? req->n_defines : 0,
                         .define_names = req->define_names,
                         .define_values = req->define_values,
                         .tick = req->tick,
                         .tick_arg = req->tick_arg};
    kf_compile_res c;
    if (kf_compile_run(&cr, &c) != 0) {
        set_verdict(e->res, KF_INFRA_ERROR, "%s: invalid compile request", names[which]);
        return -1;
    }
    json_object_set_new(json_object_get(e->metrics, "compile"), names[which], compile_json(&c));
    if (which == 2 || c.status != KF_COMPILE_OK) {
        /* keep the candidate's log, or whichever build failed */
        free(e->res->compile_log);
        e->res->compile_log = c.log;
        c.log = NULL;
    }
    int rc = 0;
    if (c.status == KF_COMPILE_INFRA) {
        set_verdict(e->res, KF_INFRA_ERROR, "building the %s: %s", names[which], c.detail);
        rc = -1;
    } else if (c.status == KF_COMPILE_FAILED) {
        if (which == 2)
            set_verdict(e->res, KF_COMPILE_ERROR, "%s", c.detail);
        else
            set_verdict(e->res, KF_INFRA_ERROR, "the task's %s does not build: %s", names[which], c.detail);
        rc = -1;
    }
    kf_compile_res_free(&c);
    return rc;
}

/* Map the child's outcome to a verdict in e->res; merge its metrics. */
static void judge_child(ev *e, const kf_harness_cfg *hc, const kf_sandbox_res *sb, double limit)
{
    kf_eval_res *res = e->res;
    char phase[512];
    int loaded = 0;
    char *result = kf_harness_parse_report(sb->report, hc->nonce, phase, sizeof(phase), &loaded);

    json_t *sj = json_object();
    json_object_set_new(sj, "wall_s", json_real(sb->wall_s));
    json_object_set_new(sj, "landlock", json_boolean(sb->landlocked));
    json_object_set_new(sj, "net_isolated", json_boolean(sb->net_isolated));
    json_object_set_new(sj, "last_phase", json_string(phase));
    if (sb->how == KF_SANDBOX_EXITED) json_object_set_new(sj, "exit_status", json_integer(sb->exit_status));
    if (sb->how == KF_SANDBOX_SIGNALED) json_object_set_new(sj, "signal", json_string(signal_name(sb->signal)));
    json_object_set_new(e->metrics, "sandbox", sj);
    if (sb->output_len) {
        size_t keep = sb->output_len > CHILD_OUTPUT_KEEP ? CHILD_OUTPUT_KEEP : sb->output_len;
        json_object_set_new(e->metrics, "child_output",
                            json_stringn_nocheck(sb->output + sb->output_len - keep, keep));
    }

    int in_load = !strncmp(phase, "load candidate", 14);
    switch (sb->how) {
    case KF_SANDBOX_FAILED:
        set_verdict(res, KF_INFRA_ERROR, "could not start the evaluation child: %s", sb->err);
        break;
    case KF_SANDBOX_CANCELLED:
        set_verdict(res, KF_INFRA_ERROR, "cancelled");
        break;
    case KF_SANDBOX_TIMEOUT:
        if (!loaded)
            set_verdict(res, KF_INFRA_ERROR, "the task's code exceeded the %.0f s limit (%s)", limit, phase);
        else if (in_load)
            set_verdict(res, KF_LOAD_ERROR, "loading the candidate exceeded the %.0f s limit (a constructor hangs)",
                        limit);
        else
            set_verdict(res, KF_TIMEOUT, "exceeded the %.0f s wall-clock limit during: %s", limit, phase);
        break;
    case KF_SANDBOX_SIGNALED:
        if (!loaded)
            set_verdict(res, KF_INFRA_ERROR, "the task's code crashed with %s (%s) during: %s",
                        signal_name(sb->signal), strsignal(sb->signal), phase);
        else if (in_load)
            set_verdict(res, KF_LOAD_ERROR, "the candidate crashed with %s (%s) while being loaded "
                        "(shared-object constructor)", signal_name(sb->signal), strsignal(sb->signal));
        else if (strstr(phase, "candidate"))
            set_verdict(res, KF_RUNTIME_ERROR, "candidate crashed with %s (%s) during: %s", signal_name(sb->signal),
                        strsignal(sb->signal), phase);
        else /* the task's code ran, but the candidate was loaded and may have corrupted the process */
            set_verdict(res, KF_RUNTIME_ERROR, "crashed with %s (%s) during: %s -- blamed on the candidate, which "
                        "was loaded in the process", signal_name(sb->signal), strsignal(sb->signal), phase);
        break;
    case KF_SANDBOX_EXITED:
        if (result) {
            json_error_t je;
            json_t *o = json_loads(result, 0, &je);
            const char *vn = o ? json_string_value(json_object_get(o, "verdict")) : NULL;
            int v = vn ? kf_verdict_parse(vn) : -1;
            if (v < 0) {
                set_verdict(res, KF_INFRA_ERROR, "unreadable harness report: %s", o ? "no verdict" : je.text);
            } else {
                const char *d = json_string_value(json_object_get(o, "detail"));
                set_verdict(res, (kf_verdict)v, "%s", d ? d : "");
                json_t *m = json_object_get(o, "metrics");
                if (json_is_object(m)) json_object_update(e->metrics, m);
            }
            json_decref(o);
        } else if (sb->report_truncated) {
            set_verdict(res, KF_INFRA_ERROR, "harness report exceeded its size limit");
        } else if (!loaded) {
            set_verdict(res, KF_INFRA_ERROR, "evaluation child exited (status %d) before loading the candidate "
                        "(%s)", sb->exit_status, phase);
        } else if (in_load) {
            set_verdict(res, KF_LOAD_ERROR, "candidate exited the process (status %d) while being loaded "
                        "(shared-object constructor)", sb->exit_status);
        } else {
            set_verdict(res, KF_RUNTIME_ERROR, "candidate exited the process (status %d) before the harness "
                        "reported (during: %s)", sb->exit_status, phase);
        }
        break;
    }
    free(result);
}

static void finish_metrics(ev *e)
{
    kf_eval_res *res = e->res;
    json_object_set_new(e->metrics, "verdict", json_string(kf_verdict_name(res->verdict)));
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
    json_object_set_new(e->metrics, "backend", json_string("cpu"));
    json_object_set_new(e->metrics, "seed", json_integer((json_int_t)req->seed));
    json_object_set_new(e->metrics, "compile", json_object());
    double t_start = kf_util_now_s();

    char err[512];
    if (kf_task_load(req->task_dir, &e->task, err, sizeof(err)) != 0) {
        set_verdict(res, KF_INFRA_ERROR, "task %s: %s", req->task_dir, err);
        goto done;
    }
    e->task_loaded = 1;
    json_object_set_new(e->metrics, "task", json_string(e->task.name));
#ifdef KFARM_HAVE_CUDA
    if (!strcmp(e->task.backend, "cuda")) {
        json_decref(e->metrics);
        int rc = kf_cuda_eval_run(req, &e->task, res);
        kf_task_free(&e->task);
        return rc;
    }
#endif
    if (strcmp(e->task.backend, "cpu") != 0) {
        set_verdict(res, KF_UNSUPPORTED, "task backend '%s' is not available on this worker (cpu)", e->task.backend);
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

    /* private work folder (absolute: children run elsewhere) */
    const char *root = req->work_dir && *req->work_dir ? req->work_dir : getenv("TMPDIR");
    if (!root || !*root) root = "/tmp";
    char rootabs[PATH_MAX];
    if (kf_util_mkdirs(root) != 0 || !realpath(root, rootabs) ||
        snprintf(e->dir, sizeof(e->dir), "%s/kfarm-eval-XXXXXX", rootabs) >= (int)sizeof(e->dir) ||
        !mkdtemp(e->dir)) {
        set_verdict(res, KF_INFRA_ERROR, "cannot create a work folder under %s: %s", root, strerror(errno));
        e->dir[0] = 0;
        goto done;
    }
    if (snprintf(e->build, sizeof(e->build), "%s/build", e->dir) >= (int)sizeof(e->build) ||
        snprintf(e->rundir, sizeof(e->rundir), "%s/run", e->dir) >= (int)sizeof(e->rundir) ||
        kf_util_mkdirs(e->build) != 0 || kf_util_mkdirs(e->rundir) != 0) {
        set_verdict(res, KF_INFRA_ERROR, "cannot create %s: %s", e->build, strerror(errno));
        goto done;
    }

    /* candidate first: a compile_error is the common case and needs no other build */
    if (build_one(e, 2) || build_one(e, 0) || build_one(e, 1)) goto done;
    if (req->compile_only) {
        set_verdict(res, KF_OK, "compiled (compile only)");
        goto done;
    }

    /* static integrity */
    kf_verdict static_v = KF_OK;
    char static_detail[1024] = "";
    size_t srclen;
    char *src = kf_util_read_file(req->source_path, &srclen, 4u << 20);
    int fb = kf_compile_find_forbidden(&e->task, src, e->so[2], static_detail, sizeof(static_detail));
    free(src);
    if (fb < 0) {
        set_verdict(res, KF_INFRA_ERROR, "%s", static_detail);
        goto done;
    }
    if (fb > 0) {
        static_v = KF_REJECTED_CHEAT;
        json_object_set_new(e->metrics, "forbidden", json_string(static_detail));
    }

    /* run the harness */
    double limit = req->timeout_s > 0 ? req->timeout_s : e->task.timeout_s;
    kf_harness_cfg hc;
    memset(&hc, 0, sizeof(hc));
    hc.task = &e->task;
    hc.reference_so = e->so[0];
    hc.baseline_so = e->so[1];
    hc.candidate_so = e->so[2];
    hc.seed = req->seed;
    hc.quick = req->quick;
    hc.validate_only = static_v != KF_OK;
    hc.budget_s = limit * 0.75;
    hc.llc_bytes = kf_device_llc_bytes();
    kf_harness_new_nonce(&hc);
    kf_sandbox_req sr = {.scratch_dir = e->rundir,
                         .timeout_s = limit,
                         .tick = req->tick,
                         .tick_arg = req->tick_arg,
                         .fn = kf_harness_child,
                         .arg = &hc};
    kf_sandbox_res sb;
    kf_sandbox_run(&sr, &sb);
    judge_child(e, &hc, &sb, limit);
    kf_sandbox_res_free(&sb);

    if (static_v != KF_OK && rank(static_v) < rank(res->verdict)) {
        json_object_set_new(e->metrics, "harness_verdict", json_string(kf_verdict_name(res->verdict)));
        set_verdict(res, static_v, "%s", static_detail);
    }

done:
    json_object_set_new(e->metrics, "eval_s", json_real(kf_util_now_s() - t_start));
    finish_metrics(e);
    json_decref(e->metrics);
    if (e->task_loaded) kf_task_free(&e->task);
    if (e->dir[0] && !getenv("KFARM_KEEP_WORK")) kf_util_rmtree(e->dir);
    return 0;
}

void kf_eval_res_free(kf_eval_res *res)
{
    if (!res) return;
    free(res->metrics_json);
    free(res->compile_log);
    res->metrics_json = res->compile_log = NULL;
}
