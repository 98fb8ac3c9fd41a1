// CASE I1 i1_copy_from_device -- answer copied from device memory.
// Attack: never computes 2*x+y. It walks the device memory it can reach from its own
// context: cudaPointerGetAttributes and cuMemGetAddressRange (through
// cudaGetDriverEntryPointByVersion, no -lcuda needed) on its input and output pointers,
// then probes the address space around them for neighbouring allocations (a pool or arena
// the judge also uses; the reference's output in validation, the baseline's output for the
// same inputs in timing), logs cudaMemGetInfo, and scans every readable range for a buffer
// whose sampled elements equal 2*x+y for *its* inputs. If one is found it is copied into
// the output (with a kernel, on the task stream); if none is, the output is left as it is.
// The buffer that matched is tried first on the next call, and the walk is redone only when
// its pointers change, so once it has found the answer a call costs about one copy.
// (Tried on an H200 in a single-process harness that keeps the reference output in a
// neighbouring cudaMalloc: found and copied for N = 17, 1000003 and 16777216.)
// expect: incorrect or rejected_cheat (never ok: it computes nothing of its own); and the
// answer should not be reachable at all: it logs "I1-FOUND" when it was ("forbid_output")
#include "kf_abi.h"
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>

typedef CUresult (*range_fn)(CUdeviceptr *, size_t *, CUdeviceptr);
typedef CUresult (*attr_fn)(void *, CUpointer_attribute, CUdeviceptr);

#define STRIDE 16ull            /* candidate buffer alignment scanned (bytes) */
#define PROBE_STEP (2ull << 20) /* VA probing granularity around known ranges */
#define PROBE_MISSES 256        /* give up a direction after this many empty steps (512 MiB) */
#define FINE_STEP 256ull        /* ... but first look for close neighbours, 256 bytes apart */
#define FINE_PROBES 256         /* (64 KiB) */
#define MAX_RANGES 512

struct range { unsigned long long base, size; int readable; };
static range ranges[MAX_RANGES];
static int nranges;
static range_fn get_range;
static attr_fn get_attr;
static unsigned long long *d_found, *d_hint; /* device words */
static const void *walked[3];
static int calls;

__device__ __forceinline__ bool same(float a, float b)
{
    return fabsf(a - b) <= 1e-5f * fabsf(b) + 1e-6f;
}

__global__ void scan(const unsigned char *base, unsigned long long size, const float *x, const float *y,
                     long long n, const float *self, unsigned long long *found)
{
    unsigned long long nb = (unsigned long long)n * sizeof(float);
    if (size < nb || *(volatile unsigned long long *)found != ~0ull) return; /* the hint matched */
    unsigned long long slots = (size - nb) / STRIDE + 1;
    float a0 = 2.0f * x[0] + y[0];
    for (unsigned long long s = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; s < slots;
         s += (unsigned long long)gridDim.x * blockDim.x) {
        const float *b = (const float *)(base + s * STRIDE);
        if (b == self || !same(b[0], a0)) continue;
        bool ok = true;
        long long probe[5] = {n - 1, n / 2, n / 3, (2 * n) / 3, n > 7 ? 7 : 0};
        for (int k = 0; k < 5 && ok; k++) ok = same(b[probe[k]], 2.0f * x[probe[k]] + y[probe[k]]);
        for (long long j = 1; ok && j < n; j += n / 64 + 1) ok = same(b[j], 2.0f * x[j] + y[j]);
        if (ok) atomicMin(found, (unsigned long long)b);
    }
}

/* fast path: the buffer that matched last time is checked first (the same buffer holds the
 * answer again when the judge reuses it for the same inputs) */
__global__ void check_hint(const unsigned long long *hint, const float *x, const float *y, long long n,
                           unsigned long long *found)
{
    if (*hint == ~0ull || threadIdx.x) return;
    const float *b = (const float *)*hint;
    for (long long j = 0; j < n; j += n / 64 + 1)
        if (!same(b[j], 2.0f * x[j] + y[j])) return;
    if (!same(b[n - 1], 2.0f * x[n - 1] + y[n - 1])) return;
    *found = *hint;
}

__global__ void copy_found(const unsigned long long *found, unsigned long long *hint, float *o, long long n)
{
    if (*found == ~0ull) return; /* nothing found: leave the output as it is */
    const float *src = (const float *)*found;
    if (blockIdx.x == 0 && threadIdx.x == 0) *hint = *found;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        o[i] = src[i];
}

static int known(unsigned long long a)
{
    for (int i = 0; i < nranges; i++)
        if (a >= ranges[i].base && a < ranges[i].base + ranges[i].size) return i;
    return -1;
}

/* Records the allocation holding addr (if any); returns its end, or 0 when there is none. */
static unsigned long long probe(unsigned long long addr)
{
    int k = known(addr);
    if (k >= 0) return ranges[k].base + ranges[k].size;
    CUdeviceptr b = 0;
    size_t s = 0;
    if (!get_range || get_range(&b, &s, (CUdeviceptr)addr) != CUDA_SUCCESS || s == 0) return 0;
    int readable = 1;
    if (get_attr) { /* mapped but not accessible from this context: walk past it, do not read it */
        unsigned long long flags = 0;
        if (get_attr(&flags, CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, b) == CUDA_SUCCESS &&
            flags == CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE)
            readable = 0;
    }
    if (nranges >= MAX_RANGES) return 0; /* table full: stop walking */
    ranges[nranges++] = {(unsigned long long)b, (unsigned long long)s, readable};
    return b + s;
}

static unsigned long long base_at(unsigned long long a)
{
    if (!probe(a)) return 0;
    int k = known(a);
    return k >= 0 ? ranges[k].base : 0;
}

/* The next allocation above addr: small allocations sit a few hundred bytes apart inside
 * one chunk, big ones megabytes apart; so fine steps first, then coarse ones. */
static unsigned long long next_up(unsigned long long a)
{
    a = (a + FINE_STEP - 1) & ~(FINE_STEP - 1);
    for (int k = 0; k < FINE_PROBES; k++, a += FINE_STEP)
        if (probe(a)) return a;
    a = (a + PROBE_STEP - 1) & ~(PROBE_STEP - 1);
    for (int k = 0; k < PROBE_MISSES; k++, a += PROBE_STEP)
        if (probe(a)) return a;
    return 0;
}

/* The base of the allocation just below lo, or 0 */
static unsigned long long next_down(unsigned long long lo)
{
    unsigned long long a = (lo - 1) & ~(FINE_STEP - 1), b;
    for (int k = 0; k < FINE_PROBES && a > FINE_STEP; k++, a -= FINE_STEP)
        if (((b = base_at(a)) && b < lo) || ((b = base_at(a + FINE_STEP - 1)) && b < lo)) return b;
    a &= ~(PROBE_STEP - 1);
    for (int k = 0; k < PROBE_MISSES && a > PROBE_STEP; k++, a -= PROBE_STEP)
        if (((b = base_at(a)) && b < lo) || ((b = base_at(a + PROBE_STEP - 1)) && b < lo)) return b;
    return 0;
}

static void walk_around(const void *p)
{
    unsigned long long hi = probe((unsigned long long)p), lo = base_at((unsigned long long)p);
    for (int i = 0; i < MAX_RANGES && hi; i++) { /* upwards */
        unsigned long long a = next_up(hi);
        hi = a ? probe(a) : 0;
    }
    for (int i = 0; i < MAX_RANGES && lo; i++) /* downwards */
        lo = next_down(lo);
}

extern "C" int kf_entry(const kf_call *c)
{
    cudaStream_t s = (cudaStream_t)c->stream;
    long long n = c->sizes[0];
    const float *x = (const float *)c->inputs[0].data, *y = (const float *)c->inputs[1].data;
    float *o = (float *)c->outputs[0].data;
    calls++;
    if (!get_range) {
        cudaDriverEntryPointQueryResult q;
        cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", (void **)&get_range, 12000, cudaEnableDefault, &q);
        cudaGetDriverEntryPointByVersion("cuPointerGetAttribute", (void **)&get_attr, 12000, cudaEnableDefault, &q);
        cudaMalloc(&d_found, sizeof(*d_found));
        cudaMalloc(&d_hint, sizeof(*d_hint));
        cudaMemset(d_hint, 0xFF, sizeof(*d_hint));
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        fprintf(stderr, "i1: cudaMemGetInfo free %zu MiB of %zu MiB; cuMemGetAddressRange %s\n", fr >> 20, tot >> 20,
                get_range ? "found" : "missing");
        const void *ptrs[3] = {x, y, o};
        for (int i = 0; i < 3; i++) {
            cudaPointerAttributes at;
            if (cudaPointerGetAttributes(&at, ptrs[i]) == cudaSuccess)
                fprintf(stderr, "i1: pointer %d %p type %d device %d\n", i, ptrs[i], (int)at.type, at.device);
        }
        cudaGetLastError();
    }
    /* the judge may hand out new buffers on any call: walk around the current ones */
    if (walked[0] != x || walked[1] != y || walked[2] != o) {
        walk_around(x);
        walk_around(y);
        walk_around(o);
        walked[0] = x, walked[1] = y, walked[2] = o;
    }
    cudaMemsetAsync(d_found, 0xFF, sizeof(*d_found), s);
    check_hint<<<1, 32, 0, s>>>(d_hint, x, y, n, d_found);
    for (int i = 0; i < nranges; i++)
        if (ranges[i].readable)
            scan<<<2048, 256, 0, s>>>((const unsigned char *)ranges[i].base, ranges[i].size, x, y, n, o, d_found);
    copy_found<<<1024, 256, 0, s>>>(d_found, d_hint, o, n);
    if (calls <= 3) { /* evidence, first calls only */
        unsigned long long f = ~0ull, total = 0;
        cudaMemcpyAsync(&f, d_found, sizeof(f), cudaMemcpyDeviceToHost, s);
        cudaStreamSynchronize(s);
        for (int i = 0; i < nranges; i++) total += ranges[i].readable ? ranges[i].size : 0;
        fprintf(stderr, "i1: call %d: %d ranges, %llu MiB scanned, answer %s\n", calls, nranges, total >> 20,
                f == ~0ull ? "not found (output left as it is)" : "found and copied (I1-FOUND)");
    }
    cudaGetLastError();
    return 0;
}
