/*
 * kf_cuda_eval.c -- the parent side of a CUDA evaluation, and discovery
 * (prefix kf_cuda_). Compiled only with KFARM_HAVE_CUDA.
 *
 *   1. private work folder <work_dir>/kfarm-cuda-XXXXXX (removed afterwards);
 *   2. discovery in a sandboxed child (the worker never creates a CUDA
 *      context itself: CUDA does not survive fork) -> device, arch;
 *   3. nvcc builds of reference and baseline (with the task's `link`
 *      libraries) and of the candidate (defines, never link libraries) for
 *      the exact arch (req->arch, e.g. "sm_90a", or the device's sm_XY);
 *      reference/baseline failures are infra_error (the task's or worker's
 *      problem), candidate failures compile_error, arch-only failures
 *      unsupported (B1), nvcc problems infra_error (B2);
 *   4. forbid check on the candidate's undefined dynamic symbols and source
 *      (W's kf_compile_find_forbidden) -> rejected_cheat (C9);
 *   5. the sandboxed child (kf_cuda_harness.c) with the task's time limit;
 *      Landlock must let it open /dev/nvidia* read-write and write its own
 *      /proc/self/task/<tid>/comm (cuInit), so those are its writable paths;
 *   6. its report (or how it died) -> verdict: a timeout is the candidate's
 *      `timeout` (R2), a crash after the candidate was loaded its
 *      runtime_error, before that infra_error.
 */
#include "kf_cuda.h"
#include "kf_cuda_child.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "compile.h"
#include "harness.h"
#include "kf_util.h"
#include "sandbox.h"

char *kf_cuda_gpu_json(const kf_cuda_gpu *g)
{
    json_t *o = json_pack("{s:i,s:s,s:s,s:i,s:i,s:I,s:i,s:f,s:f,s:f,s:I,s:f,s:f,s:f,s:f,s:i,s:i,s:s,s:f,s:f,s:s}",
                          "index", g->index, "name", g->name, "arch", g->arch, "cc_major", g->cc_major,
                          "cc_minor", g->cc_minor, "memory_bytes", (json_int_t)g->memory_bytes, "sm_count",
                          g->sm_count, "mem_clock_khz", g->mem_clock_khz, "sm_clock_mhz", g->sm_clock_mhz,
                          "peak_gbs", g->peak_gbs, "l2_bytes", (json_int_t)g->l2_bytes, "peak_gflops_f32",
                          g->peak_gflops_f32, "peak_gflops_bf16", g->peak_gflops_bf16, "peak_gflops_f16",
                          g->peak_gflops_f16, "peak_gflops_f64", g->peak_gflops_f64, "driver_version",
                          g->driver_version, "runtime_version", g->runtime_version, "driver", g->driver,
                          "cur_sm_mhz", g->cur_sm_mhz, "temp_c", g->temp_c, "pci", g->pci);
    if (!o) return NULL;
    json_object_set_new(o, "bus_width_bits", json_integer(g->bus_width_bits));
    json_object_set_new(o, "peak_source", json_string("bandwidth: 2 x memory clock x bus width; FLOP: per-SM rate table "
                                                       "(CUDA Programming Guide, NVIDIA whitepapers) x SMs x max SM clock"));
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

static void gpu_from_json(json_t *j, kf_cuda_gpu *g)
{
    memset(g, 0, sizeof(*g));
    g->index = (int)json_integer_value(json_object_get(j, "index"));
    snprintf(g->name, sizeof(g->name), "%s", json_string_value(json_object_get(j, "name")) ?: "");
    snprintf(g->arch, sizeof(g->arch), "%s", json_string_value(json_object_get(j, "arch")) ?: "");
    snprintf(g->driver, sizeof(g->driver), "%s", json_string_value(json_object_get(j, "driver")) ?: "");
    snprintf(g->pci, sizeof(g->pci), "%s", json_string_value(json_object_get(j, "pci")) ?: "");
    g->cc_major = (int)json_integer_value(json_object_get(j, "cc_major"));
    g->cc_minor = (int)json_integer_value(json_object_get(j, "cc_minor"));
    g->sm_count = (int)json_integer_value(json_object_get(j, "sm_count"));
    g->memory_bytes = (uint64_t)json_integer_value(json_object_get(j, "memory_bytes"));
    g->l2_bytes = (uint64_t)json_integer_value(json_object_get(j, "l2_bytes"));
    g->bus_width_bits = (int)json_integer_value(json_object_get(j, "bus_width_bits"));
    g->mem_clock_khz = json_number_value(json_object_get(j, "mem_clock_khz"));
    g->sm_clock_mhz = json_number_value(json_object_get(j, "sm_clock_mhz"));
    g->peak_gbs = json_number_value(json_object_get(j, "peak_gbs"));
    g->peak_gflops_f32 = json_number_value(json_object_get(j, "peak_gflops_f32"));
    g->peak_gflops_bf16 = json_number_value(json_object_get(j, "peak_gflops_bf16"));
    g->peak_gflops_f16 = json_number_value(json_object_get(j, "peak_gflops_f16"));
    g->peak_gflops_f64 = json_number_value(json_object_get(j, "peak_gflops_f64"));
    g->driver_version = (int)json_integer_value(json_object_get(j, "driver_version"));
    g->runtime_version = (int)json_integer_value(json_object_get(j, "runtime_version"));
    g->cur_sm_mhz = json_number_value(json_object_get(j, "cur_sm_mhz"));
    g->temp_c = json_number_value(json_object_get(j, "temp_c"));
}

/* CUDA's cuInit writes /proc/<pid>/task/<tid>/comm (thread names); without
 * it Landlock makes cuInit fail with cudaErrorOperatingSystem (seen on the
 * H200 host; also NVIDIA/OpenShell#1486). The rule is added in the child, so
 * /proc/self/task is the child's own task folder, not all of /proc. */
static const char *const DEV_WRITE_DEFAULT[] = {"/dev", "/proc/self/task", NULL};

/* Writable paths for the CUDA child under Landlock: /dev (the driver opens
 * /dev/nvidia* read-write), or $KFARM_CUDA_WRITE_DIRS (colon-separated;
 * diagnostics). buf holds the split copy. */
static const char *const *dev_write_dirs(char *buf, size_t cap, const char **arr, int n)
{
    const char *e = getenv("KFARM_CUDA_WRITE_DIRS");
    if (!e || !*e) return DEV_WRITE_DEFAULT;
    snprintf(buf, cap, "%s", e);
    int k = 0;
    for (char *sv = NULL, *p = strtok_r(buf, ":", &sv); p && k < n - 1; p = strtok_r(NULL, ":", &sv)) arr[k++] = p;
    arr[k] = NULL;
    return arr;
}

int kf_cuda_discover(kf_cuda_gpu *gpus, int cap, char *err, size_t errlen)
{
    char dir[] = "/tmp/kfarm-discover-XXXXXX";
    if (!mkdtemp(dir)) {
        snprintf(err, errlen, "mkdtemp: %s", strerror(errno));
        return -1;
    }
    kf_cuda_child_cfg cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.discover_only = 1;
    kf_harness_cfg hc;
    kf_harness_new_nonce(&hc);
    memcpy(cfg.nonce, hc.nonce, sizeof(cfg.nonce));
    char wbuf[1024];
    const char *warr[9];
    kf_sandbox_req sr = {.scratch_dir = dir, .timeout_s = 60, .write_dirs = dev_write_dirs(wbuf, sizeof(wbuf), warr, 9), .fn = kf_cuda_child, .arg = &cfg,
                         .no_isolation = getenv("KFARM_CUDA_NO_ISOLATION") != NULL};
    kf_sandbox_res sb;
    int n = -1;
    if (kf_sandbox_run(&sr, &sb) != 0) {
        snprintf(err, errlen, "discovery child: %s", sb.err);
        kf_util_rmtree(dir);
        return -1;
    }
    char ph[256];
    int loaded;
    char *r = kf_harness_parse_report(sb.report ? sb.report : "", cfg.nonce, ph, sizeof(ph), &loaded);
    json_t *j = r ? json_loads(r, 0, NULL) : NULL;
    if (!j) {
        snprintf(err, errlen, "discovery child gave no result (%s)",
                 sb.how == KF_SANDBOX_TIMEOUT ? "timed out" : sb.how == KF_SANDBOX_SIGNALED ? strsignal(sb.signal) : "exited");
    } else {
        n = 0;
        json_t *a = json_object_get(j, "gpus");
        for (size_t i = 0; i < json_array_size(a) && n < cap; i++) gpu_from_json(json_array_get(a, i), &gpus[n++]);
        const char *e = json_string_value(json_object_get(j, "error"));
        if (!n) snprintf(err, errlen, "no CUDA GPU: %s", e ? e : "none visible");
        json_decref(j);
    }
    free(r);
    kf_sandbox_res_free(&sb);
    kf_util_rmtree(dir);
    return n;
}

static void setv(kf_eval_res *res, kf_verdict v, const char *fmt, ...)
{
    res->verdict = v;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->detail, sizeof(res->detail), fmt, ap);
    va_end(ap);
}

static json_t *build_json(const kf_cuda_build_res *b)
{
    json_t *fns = json_array();
    for (int i = 0; i < b->n_fn; i++)
        json_array_append_new(fns, json_pack("{s:s,s:i,s:i,s:i,s:i,s:i}", "name", b->fn[i].name, "registers",
                                             b->fn[i].registers, "smem_bytes", b->fn[i].smem_bytes, "stack_bytes",
                                             b->fn[i].stack_bytes, "spill_stores", b->fn[i].spill_stores,
                                             "spill_loads", b->fn[i].spill_loads));
    return json_pack("{s:b,s:f,s:s,s:s,s:o}", "cached", b->cached, "seconds", b->seconds, "key", b->key, "detail",
                     b->detail, "ptxas", fns);
}

int kf_cuda_eval_run(const kf_eval_req *req, const kf_task *t, kf_eval_res *res)
{
    memset(res, 0, sizeof(*res));
    json_t *m = json_object();
    json_object_set_new(m, "backend", json_string("cuda"));
    json_object_set_new(m, "task", json_string(t->name));
    char dir[PATH_MAX] = "";
    kf_cuda_build_res bref, bbase, bcand;
    memset(&bref, 0, sizeof(bref));
    memset(&bbase, 0, sizeof(bbase));
    memset(&bcand, 0, sizeof(bcand));
    const char *root = req->work_dir && *req->work_dir ? req->work_dir : getenv("TMPDIR");
    if (!root || !*root) root = "/tmp";
    char root_abs[PATH_MAX];
    if (kf_util_mkdirs(root) == 0 && realpath(root, root_abs)) root = root_abs;
    if (kf_util_mkdirs(root) != 0 || snprintf(dir, sizeof(dir), "%s/kfarm-cuda-XXXXXX", root) >= (int)sizeof(dir) ||
        !mkdtemp(dir)) {
        setv(res, KF_INFRA_ERROR, "cannot create work folder under %s: %s", root, strerror(errno));
        dir[0] = 0;
        goto done;
    }

    /* device */
    kf_cuda_gpu gpus[KF_CUDA_MAX_GPUS];
    char err[512] = "";
    int ng = kf_cuda_discover(gpus, KF_CUDA_MAX_GPUS, err, sizeof(err));
    int gi = req->gpu_index;
    kf_cuda_gpu *g = NULL;
    if (ng > 0) {
        for (int i = 0; i < ng; i++)
            if (gpus[i].index == gi) g = &gpus[i];
    }
    const char *arch = req->arch && *req->arch ? req->arch : (g ? g->arch : NULL);
    if (!arch) {
        setv(res, KF_INFRA_ERROR, "no CUDA device %d on this worker: %s", gi, ng < 0 || !err[0] ? "discovery failed" : err);
        goto done;
    }
    json_object_set_new(m, "arch", json_string(arch));
    if (g) {
        char *gj = kf_cuda_gpu_json(g);
        json_t *gjs = gj ? json_loads(gj, 0, NULL) : NULL;
        free(gj);
        if (gjs) json_object_set_new(m, "device", gjs);
    }

    /* builds */
    char src_ref[PATH_MAX], src_base[PATH_MAX], so_ref[PATH_MAX], so_base[PATH_MAX], so_cand[PATH_MAX];
    snprintf(src_ref, sizeof(src_ref), "%s/%s", req->task_dir, t->reference);
    snprintf(src_base, sizeof(src_base), "%s/%s", req->task_dir, t->baseline);
    snprintf(so_ref, sizeof(so_ref), "%s/reference.so", dir);
    snprintf(so_base, sizeof(so_base), "%s/baseline.so", dir);
    snprintf(so_cand, sizeof(so_cand), "%s/candidate.so", dir);
    const char *libs[4];
    for (int i = 0; i < t->n_link && i < 4; i++) libs[i] = t->link[i];
    kf_cuda_build_req br = {.scratch_dir = dir, .cache_dir = req->cache_dir, .arch = arch, .n_libs = t->n_link,
                            .libs = libs, .tick = req->tick, .tick_arg = req->tick_arg};
    br.source_path = src_ref;
    br.out_path = so_ref;
    kf_cuda_build(&br, &bref);
    if (bref.status != KF_CUDA_BUILD_OK) {
        setv(res, bref.status == KF_CUDA_BUILD_ARCH ? KF_UNSUPPORTED : KF_INFRA_ERROR, "reference does not build for %s: %s", arch, bref.detail);
        goto done;
    }
    br.source_path = src_base;
    br.out_path = so_base;
    kf_cuda_build(&br, &bbase);
    if (bbase.status != KF_CUDA_BUILD_OK) {
        setv(res, bbase.status == KF_CUDA_BUILD_ARCH ? KF_UNSUPPORTED : KF_INFRA_ERROR, "baseline does not build for %s: %s", arch, bbase.detail);
        goto done;
    }
    br.source_path = req->source_path;
    br.out_path = so_cand;
    br.n_libs = 0;
    br.libs = NULL;
    br.n_defines = req->n_defines;
    br.define_names = req->define_names;
    br.define_values = req->define_values;
    kf_cuda_build(&br, &bcand);
    res->compile_log = strdup(bcand.log ? bcand.log : "");
    {
        json_t *bj = json_object();
        json_object_set_new(bj, "candidate", build_json(&bcand));
        json_object_set_new(bj, "reference", build_json(&bref));
        json_object_set_new(bj, "baseline", build_json(&bbase));
        json_object_set_new(m, "build", bj);
    }
    switch (bcand.status) {
    case KF_CUDA_BUILD_OK: break;
    case KF_CUDA_BUILD_FAILED: setv(res, KF_COMPILE_ERROR, "%s", bcand.detail); goto done;
    case KF_CUDA_BUILD_ARCH: setv(res, KF_UNSUPPORTED, "%s", bcand.detail); goto done;
    case KF_CUDA_BUILD_INFRA: setv(res, KF_INFRA_ERROR, "%s", bcand.detail); goto done;
    }
    if (req->compile_only) {
        setv(res, KF_OK, "compiled (compile only)");
        goto done;
    }

    /* forbidden symbols */
    if (t->n_forbid > 0) {
        char *src = kf_util_read_file(req->source_path, NULL, 4u << 20);
        char fd[512] = "";
        int f = kf_compile_find_forbidden(t, src ? src : "", so_cand, fd, sizeof(fd));
        free(src);
        if (f == 1) {
            setv(res, KF_REJECTED_CHEAT, "%s", fd);
            goto done;
        }
        if (f < 0) {
            setv(res, KF_INFRA_ERROR, "forbid check: %s", fd);
            goto done;
        }
    }

    /* the child */
    {
        kf_cuda_child_cfg cfg;
        memset(&cfg, 0, sizeof(cfg));
        cfg.task = t;
        cfg.reference_so = so_ref;
        cfg.baseline_so = so_base;
        cfg.candidate_so = so_cand;
        cfg.seed = req->seed;
        cfg.gpu = gi;
        cfg.quick = req->quick;
        double limit = req->timeout_s > 0 ? req->timeout_s : (t->timeout_s > 0 ? t->timeout_s : 120);
        cfg.budget_s = limit * 0.5;
        kf_harness_cfg hc;
        kf_harness_new_nonce(&hc);
        memcpy(cfg.nonce, hc.nonce, sizeof(cfg.nonce));
        char wbuf[1024];
        const char *warr[9];
        kf_sandbox_req sr = {.scratch_dir = dir, .timeout_s = limit, .write_dirs = dev_write_dirs(wbuf, sizeof(wbuf), warr, 9), .tick = req->tick,
                             .tick_arg = req->tick_arg, .fn = kf_cuda_child, .arg = &cfg,
                             .no_isolation = getenv("KFARM_CUDA_NO_ISOLATION") != NULL};
        kf_sandbox_res sb;
        if (kf_sandbox_run(&sr, &sb) != 0) {
            setv(res, KF_INFRA_ERROR, "could not start the evaluation child: %s", sb.err);
            goto done;
        }
        char ph[256] = "";
        int loaded = 0;
        char *r = kf_harness_parse_report(sb.report ? sb.report : "", cfg.nonce, ph, sizeof(ph), &loaded);
        json_t *j = r ? json_loads(r, 0, NULL) : NULL;
        free(r);
        if (sb.how == KF_SANDBOX_CANCELLED) {
            setv(res, KF_INFRA_ERROR, "cancelled");
        } else if (j) {
            const char *v = json_string_value(json_object_get(j, "verdict"));
            int vi = v ? kf_verdict_parse(v) : -1;
            res->verdict = vi >= 0 ? (kf_verdict)vi : KF_INFRA_ERROR;
            snprintf(res->detail, sizeof(res->detail), "%s", json_string_value(json_object_get(j, "detail")) ?: "");
            json_t *cm = json_object_get(j, "metrics");
            if (cm) json_object_update(m, cm);
            if (res->verdict == KF_OK) {
                res->candidate_us = json_number_value(json_object_get(j, "candidate_us"));
                res->baseline_us = json_number_value(json_object_get(j, "baseline_us"));
                res->speedup = json_number_value(json_object_get(j, "speedup"));
                json_t *tf = json_object_get(m, "timing_flags");
                if (json_is_true(json_object_get(tf, "measurement_invalid"))) {
                    res->speedup = 0;
                    snprintf(res->detail, sizeof(res->detail), "correct; measurement invalid (rate above the device peak): not counted as a speedup");
                } else if (!res->detail[0]) {
                    snprintf(res->detail, sizeof(res->detail), "correct; %.2fx vs baseline (%.1f us vs %.1f us)%s%s",
                             res->speedup, res->candidate_us, res->baseline_us,
                             json_is_true(json_object_get(tf, "throttled")) ? "; throttled" : "",
                             json_is_true(json_object_get(tf, "noisy")) ? "; noisy" : "");
                }
            }
            json_decref(j);
        } else if (sb.how == KF_SANDBOX_TIMEOUT) {
            if (loaded) setv(res, KF_TIMEOUT, "exceeded the %.0f s limit during: %s", limit, ph);
            else setv(res, KF_INFRA_ERROR, "evaluation child timed out before the candidate was loaded (%s)", ph);
        } else {
            char how[128];
            if (sb.how == KF_SANDBOX_SIGNALED) snprintf(how, sizeof(how), "killed by %s", strsignal(sb.signal));
            else snprintf(how, sizeof(how), "exited with status %d", sb.exit_status);
            if (loaded) setv(res, !strncmp(ph, "load candidate", 14) ? KF_LOAD_ERROR : KF_RUNTIME_ERROR,
                             "evaluation child %s during: %s", how, ph);
            else setv(res, KF_INFRA_ERROR, "evaluation child %s before the candidate was loaded (%s)", how, ph);
        }
        json_object_set_new(m, "sandbox", json_pack("{s:b,s:b,s:f}", "landlock", sb.landlocked, "net_isolated",
                                                    sb.net_isolated, "wall_s", sb.wall_s));
        if (sb.output && sb.output_len) {
            size_t keep = sb.output_len > 4096 ? 4096 : sb.output_len;
            json_object_set_new(m, "child_output", json_stringn(sb.output + sb.output_len - keep, keep));
        }
        kf_sandbox_res_free(&sb);
    }
done:
    if (!res->compile_log) res->compile_log = strdup("");
    res->metrics_json = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    kf_cuda_build_res_free(&bref);
    kf_cuda_build_res_free(&bbase);
    kf_cuda_build_res_free(&bcand);
    if (dir[0]) kf_util_rmtree(dir);
    return 0;
}
