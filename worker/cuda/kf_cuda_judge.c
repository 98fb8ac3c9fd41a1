/*
 * kf_cuda_judge.c -- the cuda backend of the judge (see worker/judge.h), and
 * GPU discovery. Compiled only with KFARM_HAVE_CUDA.
 *
 * The judge holds its own CUDA context on the device (the primary context of
 * the judge process); runners hold theirs. Arenas are cuMemCreate
 * allocations on the device with a POSIX file descriptor as their shareable
 * handle: the descriptor is the capability -- a runner can map only the
 * arena whose descriptor it inherited, and no guessable handle exists for any
 * other allocation of the judge (unlike legacy cudaIpc handles). The judge
 * reads and writes every arena through its own mapping.
 *
 * Inputs of timed calls are generated in the arenas by the judge's own kernel
 * (kf_cuda_gen.cu, gen.h), and input-unchanged checks compare on the device.
 *
 * Flush: a memset of 2x L2 (at least 32 MiB) on the judge's stream before
 * every timed call. Fence: after a runner answers, a 4-byte memset on the
 * judge's stream and a synchronize; contexts of different processes
 * time-slice on the GPU, so the fence completes only when the GPU gets to
 * the judge's context -- after kernels a lying runner left queued, or at a
 * timeslice boundary, in which case the checked calls' poison and late-write
 * checks see the unfinished output.
 *
 * Peaks (roofline floor): bandwidth 2 x memory clock x bus width, FLOP from
 * the per-SM rate table in kf_cuda_model.c.
 */
#define _GNU_SOURCE
#include "kf_cuda.h"
#include "judge.h"
#include "confine.h"
#include "sandbox.h"
#include "inputs.h"
#include "rproto.h"
#include <math.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <jansson.h>

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

/* Discovery child (kf_sandbox_fn): one "R <nonce> {gpus:[...]}" line. */
int kf_cuda_discover_child(void *arg, int fd)
{
    const char *nonce = arg;
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
    char *s = json_dumps(o, JSON_COMPACT);
    if (s) dprintf(fd, "R %s %s\n", nonce, s);
    free(s);
    json_decref(o);
    return 0;
}

/* ---------------- judge backend ---------------- */

/* The driver API functions the judge needs, taken from the runtime
 * (cudaGetDriverEntryPointByVersion) so the worker binary does not link
 * libcuda.so.1 and still starts on machines without a driver. */
typedef struct {
    CUresult (*GetAllocationGranularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
    CUresult (*Create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
    CUresult (*AddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*Map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*SetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    CUresult (*Export)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType, unsigned long long);
    CUresult (*Unmap)(CUdeviceptr, size_t);
    CUresult (*AddressFree)(CUdeviceptr, size_t);
    CUresult (*Release)(CUmemGenericAllocationHandle);
    CUresult (*SetD32Async)(CUdeviceptr, unsigned int, size_t, CUstream);
    CUresult (*ErrorString)(CUresult, const char **);
} drv_t;

static int drv_load(drv_t *d, char *err, size_t cap)
{
    static const char *const names[] = {"cuMemGetAllocationGranularity", "cuMemCreate", "cuMemAddressReserve",
                                        "cuMemMap", "cuMemSetAccess", "cuMemExportToShareableHandle", "cuMemUnmap",
                                        "cuMemAddressFree", "cuMemRelease", "cuMemsetD32Async", "cuGetErrorString"};
    void **slots = (void **)d;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        enum cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion(names[i], &slots[i], 12000, cudaEnableDefault, &q) != cudaSuccess ||
            q != cudaDriverEntryPointSuccess || !slots[i]) {
            snprintf(err, cap, "CUDA driver entry point %s not available", names[i]);
            return -1;
        }
    }
    return 0;
}

struct kf_judge_dev {
    drv_t cu;
    int gpu;
    kf_cuda_gpu g;
    nvml_t nv;
    cudaStream_t s;
    void *flush;
    size_t flush_bytes;
    int salt;
    void *fence;
    void *cmp;               /* 256 bytes: the comparison's summary */
    void *seeds;             /* KF_RP_MAX_BATCH seeds: cuda_gen_sets' per-set seeds */
    size_t gran;
    char devid[32];
};

static int cu_ok_(kf_judge_dev *d, CUresult r, const char *what, char *err, size_t cap)
{
    if (r == CUDA_SUCCESS) return 0;
    const char *es = NULL;
    d->cu.ErrorString(r, &es);
    if (err) snprintf(err, cap, "%s: %s", what, es ? es : "CUDA driver error");
    return -1;
}

static int cuda_open(kf_judge_dev **out, int gpu, uint64_t llc, char *err, size_t cap)
{
    (void)llc;
    kf_judge_dev *d = calloc(1, sizeof(*d));
    if (!d) {
        snprintf(err, cap, "out of memory");
        return -1;
    }
    d->gpu = gpu;
    cudaError_t e = cudaSetDevice(gpu);
    if (e == cudaSuccess) e = cudaFree(0);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&d->s, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        snprintf(err, cap, "GPU %d: %s (%s)", gpu, cudaGetErrorName(e), cudaGetErrorString(e));
        free(d);
        return -1;
    }
    if (drv_load(&d->cu, err, cap) != 0) {
        free(d);
        return -1;
    }
    if (fill_gpu(gpu, &d->g, &d->nv) != 0) {
        snprintf(err, cap, "GPU %d: cannot read device properties", gpu);
        free(d);
        return -1;
    }
    snprintf(d->devid, sizeof(d->devid), "%s", d->g.pci);
    d->flush_bytes = d->g.l2_bytes ? 2 * d->g.l2_bytes : (64u << 20);
    if (d->flush_bytes < (32u << 20)) d->flush_bytes = 32u << 20;
    if ((e = cudaMalloc(&d->flush, d->flush_bytes)) != cudaSuccess || (e = cudaMalloc(&d->fence, 256)) != cudaSuccess ||
        (e = cudaMalloc(&d->cmp, 256)) != cudaSuccess ||
        (e = cudaMalloc(&d->seeds, KF_RP_MAX_BATCH * sizeof(uint64_t))) != cudaSuccess) {
        snprintf(err, cap, "flush buffer: %s", cudaGetErrorName(e));
        free(d);
        return -1;
    }
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = gpu;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    if (cu_ok_(d, d->cu.GetAllocationGranularity(&d->gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "granularity", err,
              cap)) {
        free(d);
        return -1;
    }
    *out = d;
    return 0;
}

static void cuda_close(kf_judge_dev *d)
{
    /* the process exit releases the context; after a fault tearing it down can hang */
    free(d);
}

static int cuda_arena_new(kf_judge_dev *d, uint64_t bytes, int shared, kf_jarena *a, char *err, size_t cap)
{
    memset(a, 0, sizeof(*a));
    a->fd = -1;
    uint64_t g = d->gran ? d->gran : (2u << 20);
    bytes = (bytes + g - 1) / g * g;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = d->gpu;
    prop.requestedHandleTypes = shared ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
    CUmemGenericAllocationHandle h;
    CUdeviceptr p = 0;
    char what[64];
    snprintf(what, sizeof(what), "arena of %llu bytes", (unsigned long long)bytes);
    if (cu_ok_(d, d->cu.Create(&h, bytes, &prop, 0), what, err, cap)) return -1;
    if (cu_ok_(d, d->cu.AddressReserve(&p, bytes, 0, 0, 0), "arena address", err, cap)) {
        d->cu.Release(h);
        return -1;
    }
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof(acc));
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = d->gpu;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (cu_ok_(d, d->cu.Map(p, bytes, 0, h, 0), "arena map", err, cap) ||
        cu_ok_(d, d->cu.SetAccess(p, bytes, &acc, 1), "arena access", err, cap)) {
        d->cu.AddressFree(p, bytes);
        d->cu.Release(h);
        return -1;
    }
    if (shared) {
        int fd = -1;
        if (cu_ok_(d, d->cu.Export(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), "arena export",
                  err, cap)) {
            d->cu.Unmap(p, bytes);
            d->cu.AddressFree(p, bytes);
            d->cu.Release(h);
            return -1;
        }
        fcntl(fd, F_SETFD, FD_CLOEXEC);
        a->fd = fd;
    }
    a->bytes = bytes;
    a->dptr = (uint64_t)p;
    a->handle = (uint64_t)h;
    return 0;
}

static void cuda_arena_free(kf_judge_dev *d, kf_jarena *a)
{
    if (a->dptr) {
        d->cu.Unmap((CUdeviceptr)a->dptr, a->bytes);
        d->cu.AddressFree((CUdeviceptr)a->dptr, a->bytes);
        d->cu.Release((CUmemGenericAllocationHandle)a->handle);
    }
    if (a->fd >= 0) close(a->fd);
    memset(a, 0, sizeof(*a));
    a->fd = -1;
}

static int in_range(const kf_jarena *a, uint64_t off, uint64_t n) { return off <= a->bytes && n <= a->bytes - off; }

static int sync_ok(kf_judge_dev *d, cudaError_t e)
{
    if (e == cudaSuccess) e = cudaStreamSynchronize(d->s);
    return e == cudaSuccess ? 0 : -1;
}

/* put, copy and fill32 are queued on the judge's stream without waiting
 * (a pageable-memory upload has consumed its source when the call returns);
 * cuda_sync waits before a runner is rung, get waits by itself. */
static int async_ok(cudaError_t e) { return e == cudaSuccess ? 0 : -1; }

static int cuda_put(kf_judge_dev *d, kf_jarena *a, uint64_t off, const void *src, uint64_t n)
{
    if (!in_range(a, off, n)) return -1;
    if (!n) return 0;
    return async_ok(cudaMemcpyAsync((void *)(uintptr_t)(a->dptr + off), src, n, cudaMemcpyHostToDevice, d->s));
}

static int cuda_sync(kf_judge_dev *d) { return sync_ok(d, cudaSuccess); }

static int cuda_get(kf_judge_dev *d, const kf_jarena *a, uint64_t off, void *dst, uint64_t n)
{
    if (!in_range(a, off, n)) return -1;
    if (!n) return 0;
    return sync_ok(d, cudaMemcpyAsync(dst, (const void *)(uintptr_t)(a->dptr + off), n, cudaMemcpyDeviceToHost, d->s));
}

static int cuda_copy(kf_judge_dev *d, kf_jarena *dst, uint64_t doff, const kf_jarena *src, uint64_t soff, uint64_t n)
{
    if (!in_range(dst, doff, n) || !in_range(src, soff, n)) return -1;
    if (!n) return 0;
    return async_ok(cudaMemcpyAsync((void *)(uintptr_t)(dst->dptr + doff), (const void *)(uintptr_t)(src->dptr + soff),
                                    n, cudaMemcpyDeviceToDevice, d->s));
}

static int cuda_fill32(kf_judge_dev *d, kf_jarena *a, uint64_t off, uint32_t pat, uint64_t n)
{
    if (!in_range(a, off, n) || (n & 3)) return -1;
    if (!n) return 0;
    CUresult r = d->cu.SetD32Async((CUdeviceptr)(a->dptr + off), pat, n / 4, (CUstream)d->s);
    return r == CUDA_SUCCESS ? 0 : -1;
}

/* kf_cuda_gen.cu */
int kf_cuda_gen_launch(uint64_t dptr, int64_t n, const kf_gen_spec *g, cudaStream_t s);
int kf_cuda_gen_same(uint64_t a, uint64_t b, uint64_t n, void *scratch, uint64_t *first, cudaStream_t s);

static int cuda_gen(kf_judge_dev *d, kf_jarena *a, uint64_t off, const kf_gen_spec *g, int64_t n)
{
    uint64_t bytes = (uint64_t)n * kf_dtype_size(g->dtype);
    if (n < 0 || !in_range(a, off, bytes)) return -1;
    return kf_cuda_gen_launch(a->dptr + off, n, g, d->s) == 0 ? 0 : -1;
}

int kf_cuda_gen_launch_sets(uint64_t dptr, uint64_t stride, int nsets, int64_t n, const kf_gen_spec *g,
                            const uint64_t *seeds, void *dev_seeds, cudaStream_t s);
int kf_cuda_fill_sets(uint64_t dptr, uint64_t stride, int nsets, uint64_t words, uint32_t pat, cudaStream_t s);

static int sets_in_range(const kf_jarena *a, uint64_t off, uint64_t stride, int nsets, uint64_t n)
{
    return nsets > 0 && nsets <= KF_RP_MAX_BATCH && in_range(a, off, n) &&
           (nsets == 1 || (stride <= a->bytes / (uint64_t)(nsets - 1) && in_range(a, off + stride * (uint64_t)(nsets - 1), n)));
}

static int cuda_gen_sets(kf_judge_dev *d, kf_jarena *a, uint64_t off, uint64_t stride, int nsets, const kf_gen_spec *g,
                         const uint64_t *seeds, int64_t n)
{
    uint64_t bytes = (uint64_t)n * kf_dtype_size(g->dtype);
    if (n < 0 || !sets_in_range(a, off, stride, nsets, bytes)) return -1;
    return kf_cuda_gen_launch_sets(a->dptr + off, stride, nsets, n, g, seeds, d->seeds, d->s) == 0 ? 0 : -1;
}

static int cuda_fill32_sets(kf_judge_dev *d, kf_jarena *a, uint64_t off, uint64_t stride, int nsets, uint32_t pat,
                            uint64_t n)
{
    if ((n & 3) || !sets_in_range(a, off, stride, nsets, n)) return -1;
    if ((a->dptr + off) % 4 || stride % 4) { /* never for a layout (aligned), but keep the contract */
        for (int k = 0; k < nsets; k++)
            if (cuda_fill32(d, a, off + (uint64_t)k * stride, pat, n)) return -1;
        return 0;
    }
    return kf_cuda_fill_sets(a->dptr + off, stride, nsets, n / 4, pat, d->s) == 0 ? 0 : -1;
}

static int cuda_same(kf_judge_dev *d, const kf_jarena *a, uint64_t aoff, const kf_jarena *b, uint64_t boff, uint64_t n,
                     uint64_t *first)
{
    if (!in_range(a, aoff, n) || !in_range(b, boff, n)) return -1;
    return kf_cuda_gen_same(a->dptr + aoff, b->dptr + boff, n, d->fence, first, d->s);
}

typedef struct {
    double scale, rmin, rmax, max_abs_err, max_rel_err, c0;
    int64_t ref_nonfinite, n_bad, first_bad, n_nonfinite;
    int cand_const;
    int64_t cand_poison, cand_poison_first, ref_poison, ref_poison_first;
} kf_cuda_cmp_out; /* kf_cuda_gen.cu */
int kf_cuda_gen_compare(uint64_t c, uint64_t r, int dtype, int64_t n, double rtol, double atol, int allow_nonfinite,
                        void *scratch, kf_cuda_cmp_out *out, cudaStream_t s);

static double elem_at(kf_judge_dev *d, const kf_jarena *a, uint64_t off, int dtype, int64_t i)
{
    unsigned char b[8] = {0};
    size_t es = kf_dtype_size(dtype);
    if (cuda_get(d, a, off + (uint64_t)i * es, b, es)) return NAN;
    return kf_inputs_get(b, dtype, 0);
}

static int cuda_compare(kf_judge_dev *d, const kf_jarena *c, uint64_t coff, const kf_jarena *r, uint64_t roff,
                        int dtype, int64_t n, const kf_tol *tol, int allow_nonfinite, kf_compare_res *res,
                        kf_judge_poison *p)
{
    uint64_t bytes = (uint64_t)n * kf_dtype_size(dtype);
    if (n < 0 || !in_range(c, coff, bytes) || !in_range(r, roff, bytes)) return -1;
    double rtol, atol;
    kf_compare_tol(dtype, tol, &rtol, &atol);
    kf_cuda_cmp_out o;
    if (kf_cuda_gen_compare(c->dptr + coff, r->dptr + roff, dtype, n, rtol, atol, allow_nonfinite, d->cmp, &o, d->s))
        return -1;
    memset(res, 0, sizeof(*res));
    res->n = n;
    res->n_bad = o.n_bad;
    res->first_bad = o.first_bad;
    res->max_abs_err = o.max_abs_err;
    res->max_abs_idx = -1; /* not reduced on the device */
    res->max_rel_err = o.max_rel_err;
    res->scale = o.scale;
    res->n_nonfinite = o.n_nonfinite;
    res->ref_nonfinite = o.ref_nonfinite;
    res->rmin = o.rmin;
    res->rmax = o.rmax;
    res->cand_const = o.cand_const;
    res->c0 = o.c0;
    if (res->first_bad >= 0) {
        res->first_cand = elem_at(d, c, coff, dtype, res->first_bad);
        res->first_ref = elem_at(d, r, roff, dtype, res->first_bad);
    }
    p->cand = o.cand_poison;
    p->cand_first = o.cand_poison_first;
    p->ref = o.ref_poison;
    p->ref_first = o.ref_poison_first;
    kf_compare_conclude(res, dtype, tol, allow_nonfinite);
    return 0;
}

/* 1/24 of the device's memory per arena (reference, baseline, candidate and
 * the judge's master copy: 1/6 in all), at most 6 GiB */
static uint64_t cuda_batch_bytes(kf_judge_dev *d)
{
    uint64_t b = d->g.memory_bytes / 24;
    return b > (6ull << 30) ? (6ull << 30) : b;
}

static void cuda_flush(kf_judge_dev *d, const kf_jarena *a, uint64_t bytes)
{
    (void)a;
    (void)bytes;
    cudaMemsetAsync(d->flush, ++d->salt & 0xff, d->flush_bytes, d->s);
    cudaStreamSynchronize(d->s);
}

static void cuda_fence(kf_judge_dev *d)
{
    cudaMemsetAsync((char *)d->fence + 64, d->salt & 0xff, 4, d->s);
    cudaStreamSynchronize(d->s);
}

static void cuda_peaks(kf_judge_dev *d, int dtype, double *gbs, double *gflops)
{
    *gbs = d->g.peak_gbs;
    if (dtype == KF_JUDGE_PEAK_ANY) {
        *gflops = kf_cuda_peak_ceiling_gflops(d->g.cc_major * 10 + d->g.cc_minor, d->g.sm_count, d->g.sm_clock_mhz);
        return;
    }
    *gflops = dtype == KF_BF16 ? d->g.peak_gflops_bf16 : dtype == KF_F16 ? d->g.peak_gflops_f16
              : dtype == KF_F64 ? d->g.peak_gflops_f64 : d->g.peak_gflops_f32;
}

static json_t *cuda_describe(kf_judge_dev *d)
{
    char *gj = kf_cuda_gpu_json(&d->g);
    json_t *o = gj ? json_loads(gj, 0, NULL) : NULL;
    free(gj);
    if (!o) o = json_object();
    double mhz = 0, temp = 0;
    unsigned long long reasons = 0;
    nvml_sample(&d->nv, &mhz, &temp, &reasons);
    json_object_set_new(o, "sample_sm_mhz", json_real(mhz));
    json_object_set_new(o, "sample_temp_c", json_real(temp));
    json_object_set_new(o, "throttled", json_boolean((reasons & NVML_THROTTLE_MASK) != 0));
    json_object_set_new(o, "flush_bytes", json_integer((json_int_t)d->flush_bytes));
    return o;
}

static const char *cuda_device_id(kf_judge_dev *d) { return d->devid; }

static const char *const cuda_runner_env[] = {"CUDA_CACHE_DISABLE=1", "CUDA_MODULE_LOADING=EAGER", NULL};
static const char *const cuda_runner_writes[] = {"/proc/self/task", NULL};

static const kf_judge_backend cuda_backend = {
    .name = "cuda",
    .runner_name = "kfarm-runner-cuda",
    .open = cuda_open,
    .close = cuda_close,
    .arena_new = cuda_arena_new,
    .arena_free = cuda_arena_free,
    .put = cuda_put,
    .get = cuda_get,
    .copy = cuda_copy,
    .fill32 = cuda_fill32,
    .gen = cuda_gen,
    .gen_sets = cuda_gen_sets,
    .fill32_sets = cuda_fill32_sets,
    .same = cuda_same,
    .compare = cuda_compare,
    .batch_bytes = cuda_batch_bytes,
    .sync = cuda_sync,
    .flush = cuda_flush,
    .fence = cuda_fence,
    .peaks = cuda_peaks,
    .describe = cuda_describe,
    .device_id = cuda_device_id,
    .runner_env = cuda_runner_env,
    .runner_writes = cuda_runner_writes,
    .runner_needs_as_unlimited = 1,
    .runner_profile = KF_CONFINE_RUNNER_CUDA,
    .reset_before_timed_call = 1,
    .gen_in_place = 1,
    .idle_cpu_slack = 0.05, /* the driver's and CUPTI's own threads */
};

const kf_judge_backend *kf_judge_backend_cuda(void) { return &cuda_backend; }
