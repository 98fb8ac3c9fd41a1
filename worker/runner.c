/*
 * runner.c -- kfarm-runner and kfarm-runner-cuda: the untrusted side of an
 * evaluation (protocol in worker/rproto.h; threat model in docs/architecture.md).
 *
 * One runner process holds one shared object (the candidate, or the task's
 * reference or baseline) and nothing else: no reference output, no seed, no
 * key, no other candidate, no report descriptor. It is exec'ed by the judge
 * after the judge's pre-exec child confined it (worker/confine.h: Landlock
 * allow-list, seccomp with no process creation and no sockets, unprivileged
 * uid, rlimits); its environment is the few variables the judge passes.
 *
 * Life: map the arena (fd 5), [cuda: set the device, import the judge's
 * allocation, create the task stream, start CUPTI kernel records], reply
 * KF_RP_READY, wait for KF_RP_LOAD, dlopen the
 * shared object (its constructors run now), reply KF_RP_LOADED, then for
 * every KF_RP_CALL build a kf_call whose pointers lie in the arena, call
 * kf_entry, [cuda: synchronize the whole device, read the error state],
 * reply KF_RP_DONE. The judge owns the clock: the runner's own timing is
 * reported as evidence only.
 *
 * Built twice from this file: kfarm-runner (cpu) and, with CUDA,
 * kfarm-runner-cuda (-DKF_RUNNER_CUDA; links the CUDA driver, runtime and
 * CUPTI, which only this process and the judge load).
 *
 * State: CUPTI's buffer callbacks take no user pointer, so the kernel count
 * lives in one file-static variable; this is a program's top level, one per
 * process.
 */
#define _GNU_SOURCE
#include "rproto.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifdef KF_RUNNER_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>
#endif

typedef int (*entry_fn)(const kf_call *);

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int read_full(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static int write_full(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void reply(uint32_t kind, uint64_t seq, int status, int rc, int cuda_err, int n_kernels, double us,
                  const char *fmt, ...)
{
    kf_rp_reply r;
    memset(&r, 0, sizeof(r));
    r.magic = KF_RP_MAGIC;
    r.kind = kind;
    r.seq = seq;
    r.status = status;
    r.rc = rc;
    r.cuda_err = cuda_err;
    r.n_kernels = n_kernels;
    r.runner_us = us;
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r.msg, sizeof(r.msg), fmt, ap);
        va_end(ap);
    }
    if (write_full(KF_RP_FD_REPLY, &r, sizeof(r)) != 0) _exit(3);
}

static size_t dtype_size(int dt)
{
    switch (dt) {
    case KF_F16: case KF_BF16: return 2;
    case KF_F64: return 8;
    default: return 4;
    }
}

/* Bytes of one tensor, or 0 when its shape is unusable. */
static uint64_t tensor_bytes(const kf_rp_tensor *t)
{
    if (t->ndim < 0 || t->ndim > KF_MAX_DIMS) return 0;
    uint64_t n = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] <= 0 || (uint64_t)t->shape[d] > (UINT64_MAX / 16) / n) return 0;
        n *= (uint64_t)t->shape[d];
    }
    return n * dtype_size(t->dtype);
}

/* Turn a command into a kf_call over the arena; -1 when a tensor lies outside it. */
static int build_call(const kf_rp_cmd *c, char *base, uint64_t arena, kf_tensor *tin, kf_tensor *tout,
                      kf_call *call)
{
    if (c->n_in < 0 || c->n_in > KF_RP_MAX_T || c->n_out < 0 || c->n_out > KF_RP_MAX_T || c->n_sizes < 0 ||
        c->n_sizes > KF_RP_MAX_SIZES)
        return -1;
    for (int io = 0; io < 2; io++) {
        int n = io ? c->n_out : c->n_in;
        for (int i = 0; i < n; i++) {
            const kf_rp_tensor *t = io ? &c->out[i] : &c->in[i];
            uint64_t b = tensor_bytes(t);
            if (!b || t->offset > arena || b > arena - t->offset) return -1;
            kf_tensor *k = io ? &tout[i] : &tin[i];
            memset(k, 0, sizeof(*k));
            k->data = base + t->offset;
            k->dtype = t->dtype;
            k->ndim = t->ndim;
            memcpy(k->shape, t->shape, sizeof(k->shape));
        }
    }
    if (c->ws_bytes && (c->ws_offset > arena || c->ws_bytes > arena - c->ws_offset)) return -1;
    memset(call, 0, sizeof(*call));
    call->inputs = tin;
    call->n_inputs = c->n_in;
    call->outputs = tout;
    call->n_outputs = c->n_out;
    call->sizes = c->sizes;
    call->n_sizes = c->n_sizes;
    call->workspace = c->ws_bytes ? base + c->ws_offset : NULL;
    call->workspace_bytes = c->ws_bytes;
    return 0;
}

/* Call k of a batch: every offset of c moved by k x stride. */
static void shift_cmd(const kf_rp_cmd *c, int k, kf_rp_cmd *s)
{
    uint64_t sh = (uint64_t)k * c->stride;
    *s = *c;
    for (int i = 0; i < KF_RP_MAX_T; i++) {
        s->in[i].offset += sh;
        s->out[i].offset += sh;
    }
    s->ws_offset += sh;
}

#ifndef KF_RUNNER_CUDA
/* cpu: the judge lays every tensor out so that it ends (64-byte rounded)
 * right before a page it never uses; make those pages PROT_NONE so an
 * overrun faults at once, inside the call that made it (case R1). Redone
 * only when the layout changes (a new shape). */
static void guard_pages(const kf_rp_cmd *c, int count, char *base, uint64_t arena, uint64_t *last_key)
{
    uint64_t key = 1469598103934665603ull;
    key = (key ^ (uint64_t)count) * 1099511628211ull;
    key = (key ^ c->stride) * 1099511628211ull;
    for (int io = 0; io < 2; io++)
        for (int i = 0; i < (io ? c->n_out : c->n_in); i++) {
            const kf_rp_tensor *t = io ? &c->out[i] : &c->in[i];
            key = (key ^ (t->offset + tensor_bytes(t))) * 1099511628211ull;
        }
    key = (key ^ (c->ws_offset + c->ws_bytes)) * 1099511628211ull;
    if (key == *last_key) return;
    *last_key = key;
    mprotect(base, arena, PROT_READ | PROT_WRITE);
    for (int io = 0; io < 3; io++) {
        int n = io == 2 ? (c->ws_bytes ? 1 : 0) : io ? c->n_out : c->n_in;
        for (int i = 0; i < n; i++) {
            uint64_t end = io == 2 ? c->ws_offset + c->ws_bytes
                                   : (io ? c->out[i].offset + tensor_bytes(&c->out[i])
                                         : c->in[i].offset + tensor_bytes(&c->in[i]));
            uint64_t g = (((end + 63) & ~63ull) + 4095) & ~4095ull;
            for (int k = 0; k < count; k++) {
                uint64_t gk = g + (uint64_t)k * c->stride;
                if (gk + 4096 <= arena) mprotect(base + gk, 4096, PROT_NONE);
            }
        }
    }
}
#endif

#ifdef KF_RUNNER_CUDA
static int g_kernels; /* CUPTI kernel records seen since the last reset */

static void CUPTIAPI buf_requested(uint8_t **buf, size_t *size, size_t *max)
{
    *size = 1 << 20;
    *buf = aligned_alloc(8, *size);
    *max = 0;
}

static void CUPTIAPI buf_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
    CUpti_Activity *rec = NULL;
    while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS)
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL)
            g_kernels++;
    free(buf);
}
#endif

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "kfarm-runner: started by the judge only (ROLE BACKEND SO ARENA_BYTES GPU)\n");
        return 2;
    }
    const char *so = argv[3];
    uint64_t arena = strtoull(argv[4], NULL, 10);
    const char *devid = argv[5]; /* cuda: the device's PCI bus id (the judge's view) */
    (void)devid;
    char *base = NULL;

#ifdef KF_RUNNER_CUDA
    cudaStream_t stream = NULL;
    void *noop_buf = NULL;
    int cupti_ok = 0;
    if (cuptiActivityRegisterCallbacks(buf_requested, buf_completed) == CUPTI_SUCCESS &&
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS)
        cupti_ok = 1;
    int gpu = 0;
    cudaError_t ce = cudaDeviceGetByPCIBusId(&gpu, devid);
    if (ce == cudaSuccess) ce = cudaSetDevice(gpu);
    if (ce == cudaSuccess) ce = cudaFree(0);
    if (ce == cudaSuccess) ce = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (ce == cudaSuccess) ce = cudaMalloc(&noop_buf, 256);
    if (ce != cudaSuccess) {
        reply(KF_RP_READY, 0, KF_RP_ST_SETUP_FAILED, 0, (int)ce, -1, 0, "cuda device %s: %s", devid,
              cudaGetErrorString(ce));
        return 1;
    }
    if (arena) {
        CUmemGenericAllocationHandle h;
        CUdeviceptr p = 0;
        CUdevice dev;
        const char *what = "import";
        CUresult r = cuMemImportFromShareableHandle(&h, (void *)(uintptr_t)KF_RP_FD_ARENA,
                                                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        if (r == CUDA_SUCCESS) { what = "reserve"; r = cuMemAddressReserve(&p, arena, 0, 0, 0); }
        if (r == CUDA_SUCCESS) { what = "map"; r = cuMemMap(p, arena, 0, h, 0); }
        if (r == CUDA_SUCCESS) { what = "device"; r = cuCtxGetDevice(&dev); }
        if (r == CUDA_SUCCESS) {
            CUmemAccessDesc acc;
            memset(&acc, 0, sizeof(acc));
            acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
            acc.location.id = dev;
            acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
            what = "access";
            r = cuMemSetAccess(p, arena, &acc, 1);
        }
        if (r != CUDA_SUCCESS) {
            const char *es = NULL;
            cuGetErrorString(r, &es);
            reply(KF_RP_READY, 0, KF_RP_ST_SETUP_FAILED, 0, (int)r, -1, 0, "arena %s: %s", what, es ? es : "?");
            return 1;
        }
        base = (char *)(uintptr_t)p;
    }
    close(KF_RP_FD_ARENA);
#else
    if (arena) {
        void *m = mmap(NULL, arena, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, KF_RP_FD_ARENA, 0);
        if (m == MAP_FAILED) {
            reply(KF_RP_READY, 0, KF_RP_ST_SETUP_FAILED, 0, 0, -1, 0, "arena mmap: %s", strerror(errno));
            return 1;
        }
        base = m;
    }
    close(KF_RP_FD_ARENA);
#endif

    reply(KF_RP_READY, 0, KF_RP_ST_OK, 0, 0, -1, 0, NULL);
    {
        kf_rp_cmd c;
        if (read_full(KF_RP_FD_CMD, &c, sizeof(c)) != 0) return 0; /* judge gone: done */
        if (c.magic != KF_RP_MAGIC || c.op != KF_RP_LOAD) return 0;
    }
    dlerror();
    void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        reply(KF_RP_LOADED, 0, KF_RP_ST_LOAD_FAILED, 0, 0, -1, 0, "dlopen failed: %s", e ? e : "unknown error");
        return 1;
    }
    void *sym = dlsym(h, "kf_entry");
    if (!sym) {
        reply(KF_RP_LOADED, 0, KF_RP_ST_LOAD_FAILED, 0, 0, -1, 0, "kf_entry not found in the shared object");
        return 1;
    }
    entry_fn fn;
    memcpy(&fn, &sym, sizeof(sym));
    reply(KF_RP_LOADED, 0, KF_RP_ST_OK, 0, 0, -1, 0, NULL);

#ifndef KF_RUNNER_CUDA
    uint64_t guard_key = 0;
#endif
    for (;;) {
        kf_rp_cmd c;
        if (read_full(KF_RP_FD_CMD, &c, sizeof(c)) != 0) return 0; /* judge gone: done */
        if (c.magic != KF_RP_MAGIC || c.op == KF_RP_QUIT) return 0;
        if (c.op == KF_RP_RESET) {
#ifdef KF_RUNNER_CUDA
            /* trusted runners, before a timed call (the judge sends it
             * untimed): whatever a candidate set lives in its own context,
             * but reset what is per-context here anyway (I13) */
            cudaCtxResetPersistingL2Cache();
            cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0);
            cudaStreamAttrValue v;
            memset(&v, 0, sizeof(v));
            cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &v);
            cudaDeviceSynchronize();
#endif
            reply(KF_RP_DONE, c.seq, KF_RP_ST_OK, 0, 0, -1, 0, NULL);
            continue;
        }
        if (c.op == KF_RP_NOOP) {
#ifdef KF_RUNNER_CUDA
            /* the smallest real call: one operation on the task stream, so
             * the GPU switches to this context and back as for a kernel */
            cudaMemsetAsync(noop_buf, 0, 4, stream);
            cudaDeviceSynchronize();
#endif
            reply(KF_RP_DONE, c.seq, KF_RP_ST_OK, 0, 0, -1, 0, NULL);
            continue;
        }
        /* a batch: count calls, call i on the sets shifted by i x stride,
         * each finished (device synchronized) before the next; one answer */
        int count = c.count < 1 ? 1 : c.count;
        if (count > KF_RP_MAX_BATCH || (count > 1 && (!c.stride || c.stride > arena))) {
            reply(KF_RP_DONE, c.seq, KF_RP_ST_SETUP_FAILED, 0, 0, -1, 0, "bad batch");
            continue;
        }
        kf_tensor tin[KF_RP_MAX_T], tout[KF_RP_MAX_T];
        kf_call call;
        int bad = 0;
        for (int k = 0; k < count && !bad; k++) {
            kf_rp_cmd s;
            shift_cmd(&c, k, &s);
            if (build_call(&s, base, arena, tin, tout, &call) != 0) bad = 1;
        }
        if (bad) {
            reply(KF_RP_DONE, c.seq, KF_RP_ST_SETUP_FAILED, 0, 0, -1, 0, "bad call layout");
            continue;
        }
#ifdef KF_RUNNER_CUDA
        if ((c.flags & KF_RP_F_KERNELS) && cupti_ok) {
            cuptiActivityFlushAll(1);
            g_kernels = 0;
        }
        double t0 = now_us();
        int rc = 0;
        cudaError_t e = cudaSuccess;
        for (int k = 0; k < count && !rc && e == cudaSuccess; k++) {
            kf_rp_cmd s;
            shift_cmd(&c, k, &s);
            build_call(&s, base, arena, tin, tout, &call);
            call.stream = stream;
            rc = fn(&call);
            e = cudaDeviceSynchronize();
            if (e == cudaSuccess) e = cudaGetLastError();
        }
        double t1 = now_us();
        int nk = -1;
        if ((c.flags & KF_RP_F_KERNELS) && cupti_ok) {
            cuptiActivityFlushAll(1);
            nk = g_kernels;
        }
        if (e != cudaSuccess) {
            int st = (e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidPtx ||
                      e == cudaErrorUnsupportedPtxVersion)
                         ? KF_RP_ST_ARCH
                         : KF_RP_ST_CUDA_ERROR;
            reply(KF_RP_DONE, c.seq, st, rc, (int)e, nk, t1 - t0, "%s: %s", cudaGetErrorName(e),
                  cudaGetErrorString(e));
            continue;
        }
        reply(KF_RP_DONE, c.seq, KF_RP_ST_OK, rc, 0, nk, t1 - t0, NULL);
#else
        guard_pages(&c, count, base, arena, &guard_key);
        double t0 = now_us();
        int rc = 0;
        for (int k = 0; k < count && !rc; k++) {
            kf_rp_cmd s;
            shift_cmd(&c, k, &s);
            build_call(&s, base, arena, tin, tout, &call);
            rc = fn(&call);
        }
        double t1 = now_us();
        reply(KF_RP_DONE, c.seq, KF_RP_ST_OK, rc, 0, -1, t1 - t0, NULL);
#endif
    }
}
