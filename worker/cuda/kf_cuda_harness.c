/*
 * kf_cuda_harness.c -- the child side of a CUDA evaluation (and discovery).
 *
 * Runs only inside a sandboxed child (kf_sandbox_run), never in the worker
 * process: it creates the CUDA context, so a sticky error or hang dies with
 * the child. Report protocol = the cpu harness's (worker/harness.h):
 * "P <phase>" lines, then one "R <nonce> <json>" line.
 *
 * Order of work (each check names its field case, shared/cases/README.md):
 *  1. CUPTI first (before the context): activity kinds CONCURRENT_KERNEL and
 *     MEMSET, plus a callback subscriber on the runtime and driver API
 *     domains that tracks the latest correlation id. Kernels of one call are
 *     the records whose correlation id falls between the ids of the harness's
 *     own API calls just before and just after kf_entry. If CUPTI cannot start
 *     the evaluation goes on with "profiler unavailable" (P1) and the
 *     kernel/stream integrity checks are reported as skipped, never passed.
 *  2. Device, task stream (cudaStreamCreateWithFlags non-blocking), the
 *     stream's CUPTI id (from a memset record on it), NVML (dlopen, optional).
 *  3. dlopen reference, baseline, candidate (RTLD_NOW|RTLD_LOCAL).
 *  4. Validation: every validation shape x task trials. Inputs generated on
 *     the host (kf_inputs_fill, seeded per shape/trial/tensor) and copied to
 *     fresh device buffers for the reference and, separately, the candidate;
 *     outputs and workspace poisoned (0xFF) on the device; after each
 *     candidate call cudaDeviceSynchronize + error check (sticky error ->
 *     runtime_error naming it, R1; no kernel image -> unsupported, B1);
 *     outputs copied back: unwritten (poison) elements -> incorrect (C4);
 *     inputs copied back and compared with the host copy -> incorrect (C5);
 *     kf_compare against the reference (relative measure, NaN/Inf policy,
 *     trivial output: C1, C2); trial 2 has new inputs (C6). CUPTI: no kernel
 *     launched with require_kernel -> rejected_cheat listing what ran (C10);
 *     a kernel on another stream still running when kf_entry returned ->
 *     rejected_cheat "work on a side stream" (T2: we reject; a side stream
 *     joined before return is allowed and counted: in timing, a call with
 *     kernels off the task stream is timed by max(event time, CUPTI span of
 *     all its kernels)).
 *  5. Timing per benchmark shape: baseline and candidate interleaved
 *     (B C B C ...) on the task stream; before every timed call a few input
 *     elements are changed (so no two calls see the same inputs), the L2 is
 *     flushed (cudaMemsetAsync of a buffer of 2x L2) and persisting L2 reset;
 *     cudaEvents around the call on the task stream, then a device-wide
 *     cudaDeviceSynchronize before reading them (work hidden anywhere is
 *     waited for; T1 async launches are counted by the end event). Per call
 *     also: host wall time to the end of the synchronize, CUPTI summed kernel
 *     time, NVML SM clock and temperature. After the loop the candidate's
 *     last output is checked against the reference on the same (perturbed)
 *     inputs (a cached answer in the timed loop -> rejected_cheat, C6).
 *  6. Profile: kernels of one timed candidate call (names, grid, block,
 *     registers, shared memory, duration, stream), achieved GB/s and
 *     TFLOP/s from the task's formulas against the device peaks (a rate over
 *     the peak -> "measurement_invalid", not a win), bound classification,
 *     throttle flag (median SM clock < 85% of the max or NVML throttle
 *     reasons; T3). Hardware counters are not collected: metrics say
 *     "counters": "unavailable" (P1).
 *
 * Global state: CUPTI's activity-buffer callbacks take no user pointer, so
 * the record list they append to is reached through one file-static pointer
 * (g_records). It is set only in the child, before CUPTI is enabled, and the
 * child is a fresh process per evaluation; nothing in the worker process
 * touches it. Everything else lives in the child's stack context (struct ctx).
 */
#include "kf_cuda.h"
#include "kf_cuda_child.h"

#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <cupti.h>
#include <jansson.h>

#include "compare.h"
#include "inputs.h"
#include "sandbox.h"

/* ---- CUPTI activity buffers (see "Global state" above) ---- */
static kf_cuda_kernels *g_records;
static uint32_t g_memset_stream; /* stream id of the latest memset record */
static int g_memset_seen;

#define CUPTI_BUF (8u << 20)

static void CUPTIAPI buf_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
    *buf = aligned_alloc(64, CUPTI_BUF);
    *size = *buf ? CUPTI_BUF : 0;
    *max_records = 0;
}

static void CUPTIAPI buf_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
    (void)ctx; (void)stream; (void)size;
    CUpti_Activity *rec = NULL;
    while (valid && cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
            kf_cuda_kernel_rec r;
            memset(&r, 0, sizeof(r));
            snprintf(r.name, sizeof(r.name), "%s", k->name ? k->name : "?");
            r.correlation = k->correlationId;
            r.stream = k->streamId;
            r.start_ns = k->start;
            r.end_ns = k->end;
            r.grid[0] = k->gridX; r.grid[1] = k->gridY; r.grid[2] = k->gridZ;
            r.block[0] = k->blockX; r.block[1] = k->blockY; r.block[2] = k->blockZ;
            r.registers = k->registersPerThread;
            r.smem_static = k->staticSharedMemory;
            r.smem_dynamic = k->dynamicSharedMemory;
            if (g_records) kf_cuda_kernels_add(g_records, &r);
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
            const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)rec;
            g_memset_stream = m->streamId;
            g_memset_seen = 1;
        }
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped && g_records)
        g_records->dropped += (int)dropped;
    free(buf);
}

/* ---- NVML through dlopen ---- */
typedef int (*nvml_fn0)(void);
typedef struct {
    void *h;
    void *dev;
    int (*init)(void);
    int (*by_pci)(const char *, void **);
    int (*clock)(void *, int, unsigned *);
    int (*max_clock)(void *, int, unsigned *);
    int (*temp)(void *, int, unsigned *);
    int (*reasons)(void *, unsigned long long *);
    int (*driver)(char *, unsigned);
} nvml_t;

static void nvml_open(nvml_t *n, const char *pci)
{
    memset(n, 0, sizeof(*n));
    n->h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!n->h) return;
    n->init = (int (*)(void))dlsym(n->h, "nvmlInit_v2");
    n->by_pci = (int (*)(const char *, void **))dlsym(n->h, "nvmlDeviceGetHandleByPciBusId_v2");
    n->clock = (int (*)(void *, int, unsigned *))dlsym(n->h, "nvmlDeviceGetClockInfo");
    n->max_clock = (int (*)(void *, int, unsigned *))dlsym(n->h, "nvmlDeviceGetMaxClockInfo");
    n->temp = (int (*)(void *, int, unsigned *))dlsym(n->h, "nvmlDeviceGetTemperature");
    n->reasons = (int (*)(void *, unsigned long long *))dlsym(n->h, "nvmlDeviceGetCurrentClocksEventReasons");
    if (!n->reasons)
        n->reasons = (int (*)(void *, unsigned long long *))dlsym(n->h, "nvmlDeviceGetCurrentClocksThrottleReasons");
    n->driver = (int (*)(char *, unsigned))dlsym(n->h, "nvmlSystemGetDriverVersion");
    if (!n->init || !n->by_pci || n->init() != 0 || n->by_pci(pci, &n->dev) != 0) n->dev = NULL;
}

#define NVML_CLOCK_SM 1
#define NVML_TEMP_GPU 0
/* Throttle reasons that mean the clock was held down by heat or power
 * (HW slowdown 0x8, SW power cap 0x4, SW thermal 0x20, HW thermal 0x40,
 * HW power brake 0x80), from nvml.h's nvmlClocksEventReason* constants. */
#define NVML_THROTTLE_MASK 0xECull

static void nvml_sample(const nvml_t *n, double *mhz, double *temp, unsigned long long *reasons)
{
    unsigned v = 0;
    *mhz = *temp = 0;
    *reasons = 0;
    if (!n->dev) return;
    if (n->clock && n->clock(n->dev, NVML_CLOCK_SM, &v) == 0) *mhz = v;
    if (n->temp && n->temp(n->dev, NVML_TEMP_GPU, &v) == 0) *temp = v;
    if (n->reasons) n->reasons(n->dev, reasons);
}

/* ---- child context ---- */
typedef struct {
    const kf_cuda_child_cfg *cfg;
    const kf_task *t;
    int fd;
    int cupti_ok;                 /* activity records available */
    uint32_t last_corr;           /* latest correlation id seen by the API callback */
    CUpti_SubscriberHandle sub;
    kf_cuda_kernels recs;
    cudaStream_t stream;
    uint32_t stream_id;           /* CUPTI id of the task stream */
    int stream_id_ok;
    nvml_t nvml;
    kf_cuda_gpu gpu;
    int (*ref)(const kf_call *), (*base)(const kf_call *), (*cand)(const kf_call *);
    void *flush;                  /* L2 flush buffer */
    size_t flush_bytes;
    char verdict[32];
    char detail[1024];
    json_t *metrics;
} ctx_t;

static void CUPTIAPI api_cb(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId id, const void *data)
{
    (void)dom; (void)id;
    ctx_t *c = ud;
    const CUpti_CallbackData *d = data;
    if (d && d->callbackSite == CUPTI_API_ENTER && d->correlationId > c->last_corr) c->last_corr = d->correlationId;
}

static void phase(ctx_t *c, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + 2, sizeof(buf) - 3, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (n > (int)sizeof(buf) - 4) n = (int)sizeof(buf) - 4;
    buf[0] = 'P';
    buf[1] = ' ';
    buf[n + 2] = '\n';
    kf_sandbox_write_all(c->fd, buf, (size_t)n + 3);
}

static int set_verdict(ctx_t *c, const char *v, const char *fmt, ...)
{
    snprintf(c->verdict, sizeof(c->verdict), "%s", v);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->detail, sizeof(c->detail), fmt, ap);
    va_end(ap);
    return -1;
}

/* Error after a call: the verdict it means. */
static int cuda_fail(ctx_t *c, cudaError_t e, const char *who)
{
    if (e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidDeviceFunction ||
        e == cudaErrorUnsupportedPtxVersion)
        return set_verdict(c, "unsupported", "%s: %s (%s): not built for this GPU (%s)", who, cudaGetErrorName(e),
                           cudaGetErrorString(e), c->gpu.arch);
    return set_verdict(c, "runtime_error", "%s: %s (%s)", who, cudaGetErrorName(e), cudaGetErrorString(e));
}

static uint64_t now_ns(void)
{
    uint64_t t = 0;
    if (cuptiGetTimestamp(&t) == CUPTI_SUCCESS) return t;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int flush_records(ctx_t *c)
{
    if (!c->cupti_ok) return 0;
    return cuptiActivityFlushAll(1) == CUPTI_SUCCESS ? 0 : -1;
}

/* ---- device info (discovery and the child's own peaks) ---- */
static int fill_gpu(int dev, kf_cuda_gpu *g, nvml_t *nv)
{
    struct cudaDeviceProp p;
    memset(g, 0, sizeof(*g));
    if (cudaGetDeviceProperties(&p, dev) != cudaSuccess) return -1;
    g->index = dev;
    snprintf(g->name, sizeof(g->name), "%.127s", p.name);
    g->cc_major = p.major;
    g->cc_minor = p.minor;
    snprintf(g->arch, sizeof(g->arch), "sm_%d%d", p.major, p.minor);
    g->sm_count = p.multiProcessorCount;
    g->memory_bytes = p.totalGlobalMem;
    g->l2_bytes = (uint64_t)p.l2CacheSize;
    int v = 0;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrGlobalMemoryBusWidth, dev) == cudaSuccess) g->bus_width_bits = v;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMemoryClockRate, dev) == cudaSuccess) g->mem_clock_khz = v;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, dev) == cudaSuccess) g->sm_clock_mhz = v / 1000.0;
    cudaDriverGetVersion(&g->driver_version);
    cudaRuntimeGetVersion(&g->runtime_version);
    cudaDeviceGetPCIBusId(g->pci, sizeof(g->pci), dev);
    nvml_open(nv, g->pci);
    if (nv->dev) {
        unsigned mhz = 0;
        if (nv->max_clock && nv->max_clock(nv->dev, NVML_CLOCK_SM, &mhz) == 0 && mhz) g->sm_clock_mhz = mhz;
        unsigned long long r;
        nvml_sample(nv, &g->cur_sm_mhz, &g->temp_c, &r);
        if (nv->driver) nv->driver(g->driver, sizeof(g->driver));
    }
    g->peak_gbs = kf_cuda_peak_bandwidth_gbs(g->mem_clock_khz, g->bus_width_bits);
    int cc = g->cc_major * 10 + g->cc_minor;
    g->peak_gflops_f32 = kf_cuda_peak_gflops(cc, KF_F32, g->sm_count, g->sm_clock_mhz);
    g->peak_gflops_bf16 = kf_cuda_peak_gflops(cc, KF_BF16, g->sm_count, g->sm_clock_mhz);
    g->peak_gflops_f16 = kf_cuda_peak_gflops(cc, KF_F16, g->sm_count, g->sm_clock_mhz);
    g->peak_gflops_f64 = kf_cuda_peak_gflops(cc, KF_F64, g->sm_count, g->sm_clock_mhz);
    return 0;
}

static void write_result(int fd, const char *nonce, json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT);
    if (!s) return;
    dprintf(fd, "R %s %s\n", nonce, s);
    free(s);
}

static int discover_child(const kf_cuda_child_cfg *cfg, int fd)
{
    json_t *o = json_object(), *arr = json_array();
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        json_object_set_new(o, "error", json_sprintf("%s: %s", cudaGetErrorName(e), cudaGetErrorString(e)));
        n = 0;
    }
    for (int i = 0; i < n; i++) {
        kf_cuda_gpu g;
        nvml_t nv;
        if (fill_gpu(i, &g, &nv) != 0) continue;
        char *js = kf_cuda_gpu_json(&g);
        json_t *gj = js ? json_loads(js, 0, NULL) : NULL;
        free(js);
        if (gj) json_array_append_new(arr, gj);
    }
    json_object_set_new(o, "gpus", arr);
    write_result(fd, cfg->nonce, o);
    json_decref(o);
    return 0;
}

/* ---- buffers of one call ---- */
typedef struct {
    int n_in, n_out;
    kf_tensor in[KF_MAX_TENSORS], out[KF_MAX_TENSORS];
    int64_t n_in_el[KF_MAX_TENSORS], n_out_el[KF_MAX_TENSORS];
    void *ws;
    size_t ws_bytes;
    kf_call call;
} dev_call;

static void dev_call_free(dev_call *d)
{
    for (int i = 0; i < d->n_in; i++) cudaFree(d->in[i].data);
    for (int i = 0; i < d->n_out; i++) cudaFree(d->out[i].data);
    if (d->ws) cudaFree(d->ws);
    memset(d, 0, sizeof(*d));
}

/* Allocate device tensors for `sizes`, copy host inputs in, poison outputs
 * and workspace. Returns 0, or -1 with the verdict set. */
static int dev_call_make(ctx_t *c, dev_call *d, const int64_t *sizes, void *const *host_in)
{
    const kf_task *t = c->t;
    memset(d, 0, sizeof(*d));
    cudaError_t e;
    for (int i = 0; i < t->n_inputs; i++) {
        int64_t n = kf_task_shape(t, &t->inputs[i], sizes, d->in[i].shape);
        size_t b = (size_t)n * kf_dtype_size(t->inputs[i].dtype);
        d->in[i].dtype = t->inputs[i].dtype;
        d->in[i].ndim = t->inputs[i].ndim;
        d->n_in_el[i] = n;
        if ((e = cudaMalloc(&d->in[i].data, b ? b : 1)) != cudaSuccess) goto fail;
        d->n_in = i + 1;
        if ((e = cudaMemcpy(d->in[i].data, host_in[i], b, cudaMemcpyHostToDevice)) != cudaSuccess) goto fail;
    }
    for (int i = 0; i < t->n_outputs; i++) {
        int64_t n = kf_task_shape(t, &t->outputs[i], sizes, d->out[i].shape);
        size_t b = (size_t)n * kf_dtype_size(t->outputs[i].dtype);
        d->out[i].dtype = t->outputs[i].dtype;
        d->out[i].ndim = t->outputs[i].ndim;
        d->n_out_el[i] = n;
        if ((e = cudaMalloc(&d->out[i].data, b ? b : 1)) != cudaSuccess) goto fail;
        d->n_out = i + 1;
        if (t->outputs[i].dtype == KF_I32) {
            /* i32 poison is not a byte pattern: build it on the host */
            void *h = malloc(b ? b : 1);
            if (!h) { e = cudaErrorMemoryAllocation; goto fail; }
            kf_inputs_poison(h, KF_I32, n);
            e = cudaMemcpy(d->out[i].data, h, b, cudaMemcpyHostToDevice);
            free(h);
            if (e != cudaSuccess) goto fail;
        } else if ((e = cudaMemset(d->out[i].data, 0xFF, b)) != cudaSuccess)
            goto fail;
    }
    double wsb = 0;
    char err[128];
    if (t->workspace[0] && kf_task_eval_expr(t, t->workspace, sizes, &wsb, err, sizeof(err)) == 0 && wsb > 0) {
        d->ws_bytes = (size_t)wsb;
        if ((e = cudaMalloc(&d->ws, d->ws_bytes)) != cudaSuccess) goto fail;
        if ((e = cudaMemset(d->ws, 0xFF, d->ws_bytes)) != cudaSuccess) goto fail;
    }
    d->call.inputs = d->in;
    d->call.n_inputs = t->n_inputs;
    d->call.outputs = d->out;
    d->call.n_outputs = t->n_outputs;
    d->call.sizes = sizes;
    d->call.n_sizes = t->n_sizes;
    d->call.stream = (void *)c->stream;
    d->call.workspace = d->ws;
    d->call.workspace_bytes = d->ws_bytes;
    return 0;
fail:
    dev_call_free(d);
    if (e == cudaErrorMemoryAllocation)
        return set_verdict(c, "infra_error", "device allocation failed (out of GPU memory)");
    return cuda_fail(c, e, "harness buffer setup");
}

/* Call one kernel entry and synchronize; fills what CUPTI saw. */
static int do_call(ctx_t *c, int (*fn)(const kf_call *), dev_call *d, const char *who, kf_cuda_call_kernels *ck)
{
    cudaGetLastError();
    if (c->cupti_ok) flush_records(c), kf_cuda_kernels_clear(&c->recs);
    cudaStreamQuery(c->stream); /* an API call: its correlation id is the lower bound */
    uint32_t lo = c->last_corr;
    int rc = fn(&d->call);
    uint64_t ret_ns = now_ns();
    cudaStreamQuery(c->stream);
    uint32_t hi = c->last_corr;
    cudaError_t e = cudaDeviceSynchronize();
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess) return cuda_fail(c, e, who);
    if (rc != 0) return set_verdict(c, "runtime_error", "%s: kf_entry returned %d", who, rc);
    if (ck) {
        memset(ck, 0, sizeof(*ck));
        if (c->cupti_ok) {
            flush_records(c);
            kf_cuda_kernels_for_call(&c->recs, lo, hi, c->stream_id, ret_ns, ck);
        }
    }
    return 0;
}

static int copy_back(ctx_t *c, void *host, const void *dev, size_t b)
{
    cudaError_t e = cudaMemcpy(host, dev, b, cudaMemcpyDeviceToHost);
    return e == cudaSuccess ? 0 : cuda_fail(c, e, "copy back");
}

static void sizes_str(const kf_task *t, const int64_t *s, char *buf, size_t cap)
{
    size_t u = 0;
    buf[0] = 0;
    for (int i = 0; i < t->n_sizes && u < cap; i++)
        u += (size_t)snprintf(buf + u, cap - u, "%s%s=%lld", i ? "," : "", t->size_names[i], (long long)s[i]);
}

/* host inputs for (shape, trial) */
static int host_inputs(ctx_t *c, const int64_t *sizes, int shape_idx, int trial, void **h)
{
    const kf_task *t = c->t;
    for (int i = 0; i < t->n_inputs; i++) {
        int64_t shp[KF_MAX_DIMS];
        int64_t n = kf_task_shape(t, &t->inputs[i], sizes, shp);
        if (n < 0) return set_verdict(c, "infra_error", "task: bad shape for input %s", t->inputs[i].name);
        size_t b = (size_t)n * kf_dtype_size(t->inputs[i].dtype);
        h[i] = malloc(b ? b : 1);
        if (!h[i]) return set_verdict(c, "infra_error", "out of host memory for inputs");
        kf_inputs_fill(h[i], t->inputs[i].dtype, n, &t->inputs[i],
                       kf_inputs_derive_seed(c->cfg->seed, (uint64_t)shape_idx, (uint64_t)trial, (uint64_t)i));
    }
    return 0;
}

static void free_list(void **h, int n)
{
    for (int i = 0; i < n; i++) free(h[i]), h[i] = NULL;
}

/* Compare candidate outputs (device, d) against reference outputs (host).
 * Returns 0 if all match, -1 with verdict set. what = "validation" or "timed". */
static int check_outputs(ctx_t *c, dev_call *d, void **ref_host, const char *where, json_t *jerr)
{
    const kf_task *t = c->t;
    for (int o = 0; o < t->n_outputs; o++) {
        int dt = t->outputs[o].dtype;
        int64_t n = d->n_out_el[o];
        size_t b = (size_t)n * kf_dtype_size(dt);
        void *h = malloc(b ? b : 1);
        if (!h) return set_verdict(c, "infra_error", "out of host memory");
        if (copy_back(c, h, d->out[o].data, b) != 0) { free(h); return -1; }
        for (int64_t i = 0; i < n; i++)
            if (kf_inputs_is_poison(h, dt, i)) {
                int64_t cnt = 0;
                for (int64_t j = i; j < n; j++) cnt += kf_inputs_is_poison(h, dt, j);
                free(h);
                return set_verdict(c, "incorrect", "%s: output %s element %lld not written (%lld of %lld unwritten)",
                                   where, t->outputs[o].name, (long long)i, (long long)cnt, (long long)n);
            }
        kf_compare_res cr;
        kf_compare(h, ref_host[o], dt, n, &t->tol[dt], t->allow_nonfinite, &cr);
        free(h);
        if (jerr) {
            json_t *e = json_object();
            json_object_set_new(e, "output", json_string(t->outputs[o].name));
            json_object_set_new(e, "max_abs_err", json_real(cr.max_abs_err));
            json_object_set_new(e, "max_rel_err", json_real(cr.max_rel_err));
            json_array_append_new(jerr, e);
        }
        if (cr.ref_nonfinite && !t->allow_nonfinite)
            return set_verdict(c, "infra_error", "%s: the reference produced %lld non-finite values (task problem)",
                               where, (long long)cr.ref_nonfinite);
        if (!cr.ok)
            return set_verdict(c, "incorrect", "%s: output %s: %s", where, t->outputs[o].name, cr.reason);
    }
    return 0;
}

static json_t *kernels_json(const kf_cuda_kernels *k, uint32_t lo, uint32_t hi)
{
    json_t *a = json_array();
    for (int i = 0; i < k->n && json_array_size(a) < 16; i++) {
        const kf_cuda_kernel_rec *r = &k->v[i];
        if (r->correlation <= lo || r->correlation > hi) continue;
        json_array_append_new(a, json_pack("{s:s,s:[i,i,i],s:[i,i,i],s:i,s:i,s:i,s:f,s:i}", "name", r->name,
                                           "grid", r->grid[0], r->grid[1], r->grid[2], "block", r->block[0],
                                           r->block[1], r->block[2], "registers", r->registers, "smem_static",
                                           r->smem_static, "smem_dynamic", r->smem_dynamic, "us",
                                           (double)(r->end_ns - r->start_ns) / 1e3, "stream", (int)r->stream));
    }
    return a;
}

/* ---- validation ---- */
static int validate(ctx_t *c)
{
    const kf_task *t = c->t;
    json_t *jv = json_array();
    json_object_set_new(c->metrics, "validation", jv);
    for (int s = 0; s < t->n_validation; s++) {
        const int64_t *sizes = t->validation[s].sizes;
        char sz[160];
        sizes_str(t, sizes, sz, sizeof(sz));
        for (int tr = 0; tr < (t->trials > 0 ? t->trials : 2); tr++) {
            phase(c, "validate %s trial %d", sz, tr);
            void *hin[KF_MAX_TENSORS] = {0}, *href[KF_MAX_TENSORS] = {0};
            dev_call dr, dc;
            int rc = -1;
            if (host_inputs(c, sizes, s, tr, hin) != 0) goto out0;
            /* reference on its own buffers */
            if (dev_call_make(c, &dr, sizes, hin) != 0) goto out0;
            if (do_call(c, c->ref, &dr, "reference", NULL) != 0) {
                snprintf(c->verdict, sizeof(c->verdict), "infra_error");
                dev_call_free(&dr);
                goto out0;
            }
            for (int o = 0; o < t->n_outputs; o++) {
                size_t b = (size_t)dr.n_out_el[o] * kf_dtype_size(t->outputs[o].dtype);
                href[o] = malloc(b ? b : 1);
                if (!href[o] || copy_back(c, href[o], dr.out[o].data, b) != 0) {
                    dev_call_free(&dr);
                    set_verdict(c, "infra_error", "copying reference output");
                    goto out0;
                }
            }
            dev_call_free(&dr);
            /* candidate on fresh, poisoned buffers */
            if (dev_call_make(c, &dc, sizes, hin) != 0) goto out0;
            phase(c, "candidate %s trial %d", sz, tr);
            kf_cuda_call_kernels ck;
            char who[200];
            snprintf(who, sizeof(who), "candidate (%s, trial %d)", sz, tr);
            if (do_call(c, c->cand, &dc, who, &ck) != 0) goto out1;
            if (c->cupti_ok) {
                if (t->require_kernel && ck.n == 0) {
                    set_verdict(c, "rejected_cheat", "%s launched no kernel of its own (require_kernel); kernels that ran: none", who);
                    goto out1;
                }
                if (c->stream_id_ok && ck.n_side_late > 0) {
                    set_verdict(c, "rejected_cheat", "%s: work on a side stream still running after kf_entry returned "
                                "(%d kernel(s) off the task stream): %s", who, ck.n_side_late, ck.names);
                    goto out1;
                }
                if (t->require_kernel && c->stream_id_ok && ck.n_task_stream == 0 && ck.n_side == ck.n) {
                    /* all work on other streams but joined before return: allowed, counted */
                }
            }
            /* inputs unchanged */
            for (int i = 0; i < t->n_inputs; i++) {
                size_t b = (size_t)dc.n_in_el[i] * kf_dtype_size(t->inputs[i].dtype);
                void *h = malloc(b ? b : 1);
                if (!h || copy_back(c, h, dc.in[i].data, b) != 0) { free(h); goto out1; }
                int changed = memcmp(h, hin[i], b) != 0;
                free(h);
                if (changed) {
                    set_verdict(c, "incorrect", "%s modified its input %s", who, t->inputs[i].name);
                    goto out1;
                }
            }
            json_t *jerr = json_array();
            int bad = check_outputs(c, &dc, href, who, jerr);
            json_array_append_new(jv, json_pack("{s:s,s:i,s:o,s:i}", "sizes", sz, "trial", tr, "errors", jerr,
                                                "kernels", c->cupti_ok ? ck.n : -1));
            if (bad) goto out1;
            rc = 0;
        out1:
            dev_call_free(&dc);
        out0:
            free_list(hin, t->n_inputs);
            free_list(href, t->n_outputs);
            if (rc != 0) return -1;
        }
    }
    return 0;
}

/* ---- timing ---- */
static void perturb(ctx_t *c, dev_call *d, void **hin, uint64_t seed)
{
    const kf_task *t = c->t;
    for (int i = 0; i < t->n_inputs; i++) {
        int64_t n = d->n_in_el[i];
        if (n <= 0) continue;
        size_t es = kf_dtype_size(t->inputs[i].dtype);
        kf_rng r;
        kf_inputs_rng_seed(&r, seed * 31 + (uint64_t)i);
        for (int k = 0; k < 8; k++) {
            int64_t idx = k == 0 ? 0 : k == 1 ? n - 1 : (int64_t)(kf_inputs_rng_next(&r) % (uint64_t)n);
            char *hp = (char *)hin[i] + (size_t)idx * es;
            kf_inputs_fill(hp, t->inputs[i].dtype, 1, &t->inputs[i], kf_inputs_rng_next(&r));
            cudaMemcpyAsync((char *)d->in[i].data + (size_t)idx * es, hp, es, cudaMemcpyHostToDevice, c->stream);
        }
    }
}

typedef struct {
    double *ev, *wall, *kern, *clk, *temp;
    int n;
    unsigned long long reasons;
} samples;

static int timed_call(ctx_t *c, int (*fn)(const kf_call *), dev_call *d, void **hin, uint64_t pseed,
                      cudaEvent_t e0, cudaEvent_t e1, samples *sm, const char *who, uint32_t *lo, uint32_t *hi)
{
    perturb(c, d, hin, pseed);
    cudaMemsetAsync(c->flush, (int)(pseed & 0xFF), c->flush_bytes, c->stream);
    cudaCtxResetPersistingL2Cache();
    cudaGetLastError();
    cudaEventRecord(e0, c->stream);
    *lo = c->last_corr;
    double w0 = (double)now_ns();
    int rc = fn(&d->call);
    cudaEventRecord(e1, c->stream);
    *hi = c->last_corr;
    cudaError_t e = cudaDeviceSynchronize();
    double w1 = (double)now_ns();
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess) return cuda_fail(c, e, who);
    if (rc != 0) return set_verdict(c, "runtime_error", "%s: kf_entry returned %d", who, rc);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    sm->ev[sm->n] = ms * 1e3;
    sm->wall[sm->n] = (w1 - w0) / 1e3;
    unsigned long long r = 0;
    nvml_sample(&c->nvml, &sm->clk[sm->n], &sm->temp[sm->n], &r);
    sm->reasons |= r;
    sm->n++;
    return 0;
}

static int time_all(ctx_t *c, double *cand_us, double *base_us)
{
    const kf_task *t = c->t;
    json_t *jt = json_array();
    json_object_set_new(c->metrics, "timing", jt);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    double wsum = 0, csum = 0, bsum = 0;
    double t_start = (double)now_ns() / 1e9;
    int dt = t->n_inputs ? t->inputs[0].dtype : KF_F32;
    int cc = c->gpu.cc_major * 10 + c->gpu.cc_minor;
    double peak_gf = kf_cuda_peak_gflops(cc, dt, c->gpu.sm_count, c->gpu.sm_clock_mhz);
    int any_invalid = 0, any_throttled = 0, any_noisy = 0, any_gap = 0;
    for (int s = 0; s < t->n_benchmark; s++) {
        const int64_t *sizes = t->benchmark[s].sizes;
        char sz[160];
        sizes_str(t, sizes, sz, sizeof(sz));
        phase(c, "time %s", sz);
        void *hin_b[KF_MAX_TENSORS] = {0}, *hin_c[KF_MAX_TENSORS] = {0}, *href[KF_MAX_TENSORS] = {0};
        dev_call db, dc, dr;
        memset(&db, 0, sizeof(db)); memset(&dc, 0, sizeof(dc)); memset(&dr, 0, sizeof(dr));
        int rc = -1;
        samples B = {0}, C = {0};
        int maxreps = c->cfg->quick ? 15 : 200;
        double *buf = calloc((size_t)maxreps * 10, sizeof(double));
        uint32_t *clo = calloc((size_t)maxreps, sizeof(uint32_t)), *chi = calloc((size_t)maxreps, sizeof(uint32_t));
        uint32_t *blo = calloc((size_t)maxreps, sizeof(uint32_t)), *bhi = calloc((size_t)maxreps, sizeof(uint32_t));
        if (!buf || !clo || !chi || !blo || !bhi) { set_verdict(c, "infra_error", "out of memory"); goto out; }
        B.ev = buf; B.wall = buf + maxreps; B.kern = buf + 2 * maxreps; B.clk = buf + 3 * maxreps; B.temp = buf + 4 * maxreps;
        C.ev = buf + 5 * maxreps; C.wall = buf + 6 * maxreps; C.kern = buf + 7 * maxreps; C.clk = buf + 8 * maxreps; C.temp = buf + 9 * maxreps;
        if (host_inputs(c, sizes, 1000 + s, 0, hin_b) != 0) goto out;
        if (host_inputs(c, sizes, 1000 + s, 0, hin_c) != 0) goto out;
        if (dev_call_make(c, &db, sizes, hin_b) != 0) goto out;
        if (dev_call_make(c, &dc, sizes, hin_c) != 0) goto out;
        /* warm-up: 3 calls each, also measures the pair cost */
        double w0 = (double)now_ns();
        for (int i = 0; i < 3; i++) {
            if (do_call(c, c->base, &db, "baseline (warm-up)", NULL) != 0) { snprintf(c->verdict, sizeof(c->verdict), "infra_error"); goto out; }
            if (do_call(c, c->cand, &dc, "candidate (warm-up)", NULL) != 0) goto out;
        }
        double pair_s = ((double)now_ns() - w0) / 1e9 / 3 + 2 * c->flush_bytes / 2e12;
        double left = c->cfg->budget_s - ((double)now_ns() / 1e9 - t_start);
        double per_shape = left / (t->n_benchmark - s) * 0.6;
        if (per_shape > 4) per_shape = 4;
        int reps = pair_s > 0 ? (int)(per_shape / pair_s) : maxreps;
        if (reps > maxreps) reps = maxreps;
        if (reps < 5) reps = 5;
        if (c->cupti_ok) flush_records(c), kf_cuda_kernels_clear(&c->recs);
        for (int r = 0; r < reps; r++) {
            uint64_t ps = c->cfg->seed ^ ((uint64_t)(s + 1) << 40) ^ (uint64_t)r;
            if (timed_call(c, c->base, &db, hin_b, ps * 2, e0, e1, &B, "baseline (timed)", &blo[r], &bhi[r]) != 0) {
                snprintf(c->verdict, sizeof(c->verdict), "infra_error");
                goto out;
            }
            if (timed_call(c, c->cand, &dc, hin_c, ps * 2 + 1, e0, e1, &C, "candidate (timed)", &clo[r], &chi[r]) != 0)
                goto out;
        }
        /* CUPTI kernel time per call */
        int cupti_seen = 0, side_counted = 0;
        json_t *jk = NULL;
        if (c->cupti_ok) {
            flush_records(c);
            for (int r = 0; r < reps; r++) {
                /* work on other streams (joined before return, else validation
                 * rejected it) is outside the task-stream events: count it by
                 * taking the CUPTI span of all the call's kernels when longer */
                kf_cuda_call_kernels ck;
                kf_cuda_kernels_for_call(&c->recs, blo[r], bhi[r], c->stream_id, 0, &ck);
                B.kern[r] = ck.sum_us;
                double span = ck.n ? (double)(ck.last_end_ns - ck.first_start_ns) / 1e3 : 0;
                if (ck.n_side && span > B.ev[r]) B.ev[r] = span;
                kf_cuda_kernels_for_call(&c->recs, clo[r], chi[r], c->stream_id, 0, &ck);
                C.kern[r] = ck.sum_us;
                span = ck.n ? (double)(ck.last_end_ns - ck.first_start_ns) / 1e3 : 0;
                if (ck.n_side && span > C.ev[r]) C.ev[r] = span, side_counted++;
                cupti_seen += ck.n > 0;
            }
            jk = kernels_json(&c->recs, clo[reps - 1], chi[reps - 1]);
        }
        /* timed-output check: the last candidate output must match the
         * reference on the same (perturbed) inputs */
        if (dev_call_make(c, &dr, sizes, hin_c) != 0) goto out;
        if (do_call(c, c->ref, &dr, "reference (timed check)", NULL) != 0) { snprintf(c->verdict, sizeof(c->verdict), "infra_error"); goto out; }
        for (int o = 0; o < t->n_outputs; o++) {
            size_t b = (size_t)dr.n_out_el[o] * kf_dtype_size(t->outputs[o].dtype);
            href[o] = malloc(b ? b : 1);
            if (!href[o] || copy_back(c, href[o], dr.out[o].data, b) != 0) goto out;
        }
        if (check_outputs(c, &dc, href, "last timed call", NULL) != 0) {
            if (!strcmp(c->verdict, "incorrect")) {
                char d2[1024];
                snprintf(d2, sizeof(d2), "%s", c->detail);
                set_verdict(c, "rejected_cheat", "output of the timed calls does not match their inputs (cached "
                            "result?): %s", d2);
            }
            goto out;
        }
        kf_cuda_stats sb, sc, sbw, scw, sbk, sck, sclk, stemp;
        double tmp[4096];
        int n = reps;
        kf_cuda_stats_of(B.ev, n, &sb);
        kf_cuda_stats_of(C.ev, n, &sc);
        kf_cuda_stats_of(B.wall, n, &sbw);
        kf_cuda_stats_of(C.wall, n, &scw);
        kf_cuda_stats_of(B.kern, n, &sbk);
        kf_cuda_stats_of(C.kern, n, &sck);
        memcpy(tmp, C.clk, sizeof(double) * (size_t)n);
        kf_cuda_stats_of(tmp, n, &sclk);
        memcpy(tmp, C.temp, sizeof(double) * (size_t)n);
        kf_cuda_stats_of(tmp, n, &stemp);
        double flops = 0, bytes = 0;
        char err[128];
        if (t->flops[0]) kf_task_eval_expr(t, t->flops, sizes, &flops, err, sizeof(err));
        if (t->bytes[0]) kf_task_eval_expr(t, t->bytes, sizes, &bytes, err, sizeof(err));
        double gbs = sc.median > 0 ? bytes / (sc.median * 1e3) : 0;
        double tfs = sc.median > 0 ? flops / (sc.median * 1e6) : 0;
        json_t *flags = json_array();
        int invalid = 0;
        if (c->gpu.peak_gbs > 0 && gbs > 1.10 * c->gpu.peak_gbs) {
            invalid = 1;
            json_array_append_new(flags, json_sprintf("measurement_invalid: %.0f GB/s above peak %.0f GB/s", gbs, c->gpu.peak_gbs));
        }
        if (peak_gf > 0 && tfs * 1e3 > 1.10 * peak_gf) {
            invalid = 1;
            json_array_append_new(flags, json_sprintf("measurement_invalid: %.1f TFLOP/s above peak %.1f", tfs, peak_gf / 1e3));
        }
        int throttled = 0;
        if (sclk.median > 0 && c->gpu.sm_clock_mhz > 0 && sclk.median < 0.85 * c->gpu.sm_clock_mhz) throttled = 1;
        if (B.reasons & C.reasons & NVML_THROTTLE_MASK) throttled = 1;
        if (throttled)
            json_array_append_new(flags, json_sprintf("throttled: SM clock median %.0f MHz of max %.0f, reasons 0x%llx",
                                                      sclk.median, c->gpu.sm_clock_mhz, B.reasons | C.reasons));
        if (side_counted)
            json_array_append_new(flags, json_sprintf("side-stream work counted: %d call(s) timed by their CUPTI kernel span", side_counted));
        if (sc.cv > 0.10 || sb.cv > 0.10) { any_noisy = 1; json_array_append_new(flags, json_string("noisy: CV > 10%")); }
        if (c->cupti_ok && cupti_seen == 0)
            json_array_append_new(flags, json_string("profiler unavailable: CUPTI saw no kernel for the timed calls"));
        else if (c->cupti_ok && sck.median > 0 && (sc.median < 0.7 * sck.median || (sc.median > 50 && sck.median < 0.3 * sc.median))) {
            any_gap = 1;
            json_array_append_new(flags, json_sprintf("event/kernel gap: event %.1f us vs CUPTI kernel sum %.1f us", sc.median, sck.median));
        }
        if (scw.median > 0 && sc.median < 0.5 * (scw.median - sbw.median + sb.median) && scw.median > 2 * sc.median + 50) {
            any_gap = 1;
            json_array_append_new(flags, json_sprintf("event/wall gap: event %.1f us vs synchronized wall %.1f us", sc.median, scw.median));
        }
        any_invalid |= invalid;
        any_throttled |= throttled;
        double roof = 0;
        kf_cuda_bound bound = kf_cuda_classify(sc.median, flops, bytes, peak_gf, c->gpu.peak_gbs, &roof);
        json_t *js = json_pack("{s:s,s:f,s:i,s:{s:f,s:f,s:f,s:f,s:f},s:{s:f,s:f,s:f,s:f,s:f},s:f,s:f,s:f,s:s,s:f,"
                               "s:f,s:f,s:o}",
                               "sizes", sz, "weight", t->benchmark[s].weight, "reps", n,
                               "baseline", "median_us", sb.median, "min_us", sb.min, "cv", sb.cv, "kernel_us", sbk.median, "wall_us", sbw.median,
                               "candidate", "median_us", sc.median, "min_us", sc.min, "cv", sc.cv, "kernel_us", sck.median, "wall_us", scw.median,
                               "speedup", sc.median > 0 ? sb.median / sc.median : 0.0, "gbs", gbs, "tflops", tfs,
                               "bound", kf_cuda_bound_name(bound), "roofline_fraction", roof,
                               "sm_clock_mhz", sclk.median, "temp_c", stemp.median, "flags", flags);
        if (jk) json_object_set_new(js, "kernels", jk), jk = NULL;
        json_array_append_new(jt, js);
        if (jk) json_decref(jk);
        double w = t->benchmark[s].weight > 0 ? t->benchmark[s].weight : 1;
        wsum += w;
        csum += w * log(sc.median);
        bsum += w * log(sb.median);
        rc = 0;
    out:
        dev_call_free(&db);
        dev_call_free(&dc);
        dev_call_free(&dr);
        free_list(hin_b, t->n_inputs);
        free_list(hin_c, t->n_inputs);
        free_list(href, t->n_outputs);
        free(buf); free(clo); free(chi); free(blo); free(bhi);
        if (rc != 0) return -1;
    }
    *cand_us = wsum > 0 ? exp(csum / wsum) : 0;
    *base_us = wsum > 0 ? exp(bsum / wsum) : 0;
    json_t *f = json_object();
    json_object_set_new(f, "measurement_invalid", json_boolean(any_invalid));
    json_object_set_new(f, "throttled", json_boolean(any_throttled));
    json_object_set_new(f, "noisy", json_boolean(any_noisy));
    json_object_set_new(f, "timing_gap", json_boolean(any_gap));
    json_object_set_new(c->metrics, "timing_flags", f);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return 0;
}

static int load_entry(ctx_t *c, const char *path, const char *who, int (**fn)(const kf_call *))
{
    phase(c, "load %s", who);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) return set_verdict(c, !strcmp(who, "candidate") ? "load_error" : "infra_error", "%s: dlopen: %s", who, dlerror());
    *(void **)fn = dlsym(h, "kf_entry");
    if (!*fn) return set_verdict(c, !strcmp(who, "candidate") ? "load_error" : "infra_error", "%s: no kf_entry symbol", who);
    return 0;
}

static int setup_cupti(ctx_t *c)
{
    g_records = &c->recs;
    if (cuptiActivityRegisterCallbacks(buf_requested, buf_completed) != CUPTI_SUCCESS) return -1;
    if (cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) return -1;
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);
    if (cuptiSubscribe(&c->sub, (CUpti_CallbackFunc)api_cb, c) != CUPTI_SUCCESS) return -1;
    if (cuptiEnableDomain(1, c->sub, CUPTI_CB_DOMAIN_RUNTIME_API) != CUPTI_SUCCESS) return -1;
    if (cuptiEnableDomain(1, c->sub, CUPTI_CB_DOMAIN_DRIVER_API) != CUPTI_SUCCESS) return -1;
    return 0;
}

int kf_cuda_child(void *arg, int fd)
{
    const kf_cuda_child_cfg *cfg = arg;
    if (cfg->discover_only) return discover_child(cfg, fd);
    ctx_t *c = calloc(1, sizeof(*c));
    if (!c) return 3;
    c->cfg = cfg;
    c->t = cfg->task;
    c->fd = fd;
    c->metrics = json_object();
    snprintf(c->verdict, sizeof(c->verdict), "ok");
    double cand_us = 0, base_us = 0;
    phase(c, "cupti");
    const char *cupti_why = "";
    c->cupti_ok = setup_cupti(c) == 0;
    if (!c->cupti_ok) cupti_why = "CUPTI activity API could not start";
    phase(c, "device %d", cfg->gpu);
    cudaError_t e = cudaSetDevice(cfg->gpu);
    if (e == cudaSuccess) e = cudaFree(0);
    if (e != cudaSuccess) {
        set_verdict(c, "infra_error", "no usable GPU %d: %s (%s)", cfg->gpu, cudaGetErrorName(e), cudaGetErrorString(e));
        goto done;
    }
    if (fill_gpu(cfg->gpu, &c->gpu, &c->nvml) != 0) { set_verdict(c, "infra_error", "cannot read device properties"); goto done; }
    {
        char *gj = kf_cuda_gpu_json(&c->gpu);
        json_t *g = gj ? json_loads(gj, 0, NULL) : NULL;
        free(gj);
        if (g) json_object_set_new(c->metrics, "device", g);
    }
    if ((e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess) {
        set_verdict(c, "infra_error", "cudaStreamCreate: %s", cudaGetErrorName(e));
        goto done;
    }
    c->flush_bytes = c->gpu.l2_bytes ? 2 * c->gpu.l2_bytes : (64u << 20);
    if (c->flush_bytes < (32u << 20)) c->flush_bytes = 32u << 20;
    if ((e = cudaMalloc(&c->flush, c->flush_bytes)) != cudaSuccess) { set_verdict(c, "infra_error", "flush buffer: %s", cudaGetErrorName(e)); goto done; }
    /* the task stream's CUPTI id, from a memset record on it */
    if (c->cupti_ok) {
        g_memset_seen = 0;
        cudaMemsetAsync(c->flush, 0, 4096, c->stream);
        cudaStreamSynchronize(c->stream);
        flush_records(c);
        if (g_memset_seen) c->stream_id = g_memset_stream, c->stream_id_ok = 1;
    }
    if (load_entry(c, cfg->reference_so, "reference", &c->ref) != 0) goto done;
    if (load_entry(c, cfg->baseline_so, "baseline", &c->base) != 0) goto done;
    if (load_entry(c, cfg->candidate_so, "candidate", &c->cand) != 0) goto done;
    if (validate(c) != 0) goto done;
    if (!cfg->validate_only && time_all(c, &cand_us, &base_us) != 0) goto done;
done:;
    json_t *prof = json_object();
    json_object_set_new(prof, "cupti", json_string(c->cupti_ok ? (c->stream_id_ok ? "ok" : "ok (task stream id unknown: stream check skipped)") : cupti_why));
    json_object_set_new(prof, "kernel_checks", json_string(c->cupti_ok ? "enforced" : "skipped: profiler unavailable"));
    json_object_set_new(prof, "counters", json_string("unavailable: hardware counters not collected by this worker"));
    json_object_set_new(prof, "dropped_records", json_integer(c->recs.dropped));
    json_object_set_new(c->metrics, "profiler", prof);
    json_object_set_new(c->metrics, "side_stream_policy", json_string("reject work left running on other streams; joined side streams are counted"));
    json_t *o = json_pack("{s:s,s:s,s:o,s:f,s:f,s:f}", "verdict", c->verdict, "detail", c->detail, "metrics", c->metrics,
                          "candidate_us", cand_us, "baseline_us", base_us, "speedup", cand_us > 0 ? base_us / cand_us : 0.0);
    write_result(fd, cfg->nonce, o);
    json_decref(o);
    /* do not tear down CUDA/CUPTI: after a sticky error that can hang; the
     * process exit releases the context */
    _exit(0);
}
