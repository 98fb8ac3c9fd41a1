/*
 * kf_cuda_discover.c -- GPU discovery for the worker (prefix kf_cuda_).
 * Compiled only with KFARM_HAVE_CUDA.
 *
 * The worker process itself never creates a CUDA context (CUDA does not
 * survive fork, and the worker forks a judge per evaluation): discovery runs
 * kf_cuda_discover_child (kf_cuda_judge.c) in a sandboxed child and reads its
 * one JSON line back.
 */
#include "kf_cuda.h"

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
#include "judge.h"
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
    char nonce[33];
    kf_judge_new_nonce(nonce);
    char wbuf[1024];
    const char *warr[9];
    kf_sandbox_req sr = {.scratch_dir = dir, .timeout_s = 60, .write_dirs = dev_write_dirs(wbuf, sizeof(wbuf), warr, 9), .fn = kf_cuda_discover_child, .arg = nonce,
                         .no_isolation = getenv("KFARM_CUDA_NO_ISOLATION") != NULL};
    kf_sandbox_res sb;
    int n = -1;
    if (kf_sandbox_run(&sr, &sb) != 0) {
        snprintf(err, errlen, "discovery child: %s", sb.err);
        kf_util_rmtree(dir);
        return -1;
    }
    char ph[256];
    char *r = kf_judge_parse_report(sb.report ? sb.report : "", nonce, ph, sizeof(ph));
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

