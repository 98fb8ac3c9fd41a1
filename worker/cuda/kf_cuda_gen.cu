/*
 * kf_cuda_gen.cu -- the judge's own kernels (prefix kf_cuda_gen_): in-place
 * input generation and byte comparison of two device ranges. Built only with
 * KFARM_HAVE_CUDA, for every architecture the worker supports (SASS for
 * sm_75..sm_90 and PTX for newer ones, CMakeLists.txt), and launched on the
 * judge's own stream in the judge's own context, never in a runner.
 *
 * Generation: element i of a tensor is gen.h's kf_gen_value(g, i), the same
 * bits as the host's kf_inputs_gen_fill (grid-stride loop, one element per
 * thread per step). 64 MiB of f32 takes ~30 µs on an H200 (memory-bound,
 * 4.8 TB/s) against ~0.3 s for a host fill plus a pageable upload.
 *
 * Comparison: 32-bit words where both ranges are 4-byte aligned (bytes
 * otherwise); the smallest differing word index is kept with atomicMin, so
 * the reported first difference is the true first one.
 */
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "gen.h"

#define KF_CUDA_I32_POISON 0x80000001u /* inputs.h KF_INPUTS_I32_POISON */

__global__ void kf_cuda_gen_kernel(void *buf, int64_t n, kf_gen_spec g)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        kf_gen_store(buf, g.dtype, (uint64_t)i, kf_gen_value(&g, (uint64_t)i));
}

__global__ void kf_cuda_same_kernel(const unsigned char *a, const unsigned char *b, uint64_t n, int words,
                                    unsigned long long *first)
{
    uint64_t step = (uint64_t)gridDim.x * blockDim.x;
    uint64_t count = words ? n / 4 : n;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step) {
        int diff = words ? ((const uint32_t *)a)[i] != ((const uint32_t *)b)[i] : a[i] != b[i];
        if (diff) {
            atomicMin(first, (unsigned long long)(words ? i * 4 : i));
            return;
        }
    }
    if (words && threadIdx.x == 0 && blockIdx.x == 0)
        for (uint64_t k = count * 4; k < n; k++)
            if (a[k] != b[k]) atomicMin(first, (unsigned long long)k);
}

static unsigned grid_for(uint64_t n)
{
    uint64_t g = (n + 255) / 256;
    return (unsigned)(g < 1 ? 1 : g > 8192 ? 8192 : g);
}

/* Queue the fill of n elements of g's dtype at dptr on stream s. 0 or a cudaError_t. */
extern "C" int kf_cuda_gen_launch(uint64_t dptr, int64_t n, const kf_gen_spec *g, cudaStream_t s)
{
    if (n <= 0) return 0;
    kf_cuda_gen_kernel<<<grid_for((uint64_t)n), 256, 0, s>>>((void *)(uintptr_t)dptr, n, *g);
    return (int)cudaGetLastError();
}

/* Sets: blockIdx.y is the set, at base + set x stride, with its own seed
 * (seeds[set], in device memory); otherwise kf_cuda_gen_kernel's loop, so
 * set k holds the same bits as a kf_cuda_gen_launch of seed seeds[k]. */
__global__ void kf_cuda_gen_sets_kernel(unsigned char *base, uint64_t stride, int64_t n, kf_gen_spec g,
                                        const uint64_t *seeds)
{
    g.seed = seeds[blockIdx.y];
    void *buf = base + (uint64_t)blockIdx.y * stride;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        kf_gen_store(buf, g.dtype, (uint64_t)i, kf_gen_value(&g, (uint64_t)i));
}

__global__ void kf_cuda_fill_sets_kernel(unsigned char *base, uint64_t stride, uint64_t words, uint32_t pat)
{
    uint32_t *p = (uint32_t *)(base + (uint64_t)blockIdx.y * stride);
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += (uint64_t)gridDim.x * blockDim.x)
        p[i] = pat;
}

/* blocks per set: grid_for(n), at most 2^18 blocks in all */
static unsigned sets_grid(uint64_t n, int nsets)
{
    unsigned x = grid_for(n);
    unsigned cap = (unsigned)(262144 / (unsigned)nsets);
    return x > cap ? (cap ? cap : 1) : x;
}

/* Queue the fill of nsets sets of n elements of g's dtype, set k at dptr +
 * k x stride with seed seeds[k] (host array, copied to dev_seeds: device
 * memory of nsets x 8 bytes), in one kernel on stream s: the same bits as
 * nsets kf_cuda_gen_launch calls (issue 8: a batch of 149 sets cost ~450
 * launches, ~3 ms of GPU time, before each timed batch). nsets <= 65535.
 * 0 or a cudaError_t. */
extern "C" int kf_cuda_gen_launch_sets(uint64_t dptr, uint64_t stride, int nsets, int64_t n, const kf_gen_spec *g,
                                       const uint64_t *seeds, void *dev_seeds, cudaStream_t s)
{
    if (n <= 0 || nsets <= 0) return 0;
    if (nsets > 65535) return (int)cudaErrorInvalidValue;
    cudaError_t e = cudaMemcpyAsync(dev_seeds, seeds, (size_t)nsets * sizeof(uint64_t), cudaMemcpyHostToDevice, s);
    if (e != cudaSuccess) return (int)e;
    dim3 grid(sets_grid((uint64_t)n, nsets), (unsigned)nsets);
    kf_cuda_gen_sets_kernel<<<grid, 256, 0, s>>>((unsigned char *)(uintptr_t)dptr, stride, n, *g,
                                                 (const uint64_t *)dev_seeds);
    return (int)cudaGetLastError();
}

/* Queue the fill of words 32-bit words with pat in nsets sets at dptr + k x
 * stride (dptr and stride 4-byte aligned), one kernel on stream s. 0 or a
 * cudaError_t. */
extern "C" int kf_cuda_fill_sets(uint64_t dptr, uint64_t stride, int nsets, uint64_t words, uint32_t pat,
                                 cudaStream_t s)
{
    if (!words || nsets <= 0) return 0;
    if (nsets > 65535 || (dptr | stride) & 3) return (int)cudaErrorInvalidValue;
    dim3 grid(sets_grid(words, nsets), (unsigned)nsets);
    kf_cuda_fill_sets_kernel<<<grid, 256, 0, s>>>((unsigned char *)(uintptr_t)dptr, stride, words, pat);
    return (int)cudaGetLastError();
}

/* Compare n bytes at a and b on stream s (scratch: 8 bytes of device memory)
 * and wait: 1 equal, 0 different (*first = first differing byte), -1 error. */
extern "C" int kf_cuda_gen_same(uint64_t a, uint64_t b, uint64_t n, void *scratch, uint64_t *first, cudaStream_t s)
{
    if (!n) return 1;
    unsigned long long init = ~0ULL, got = ~0ULL;
    int words = (a % 4 == 0) && (b % 4 == 0);
    if (cudaMemcpyAsync(scratch, &init, sizeof(init), cudaMemcpyHostToDevice, s) != cudaSuccess) return -1;
    kf_cuda_same_kernel<<<grid_for(words ? n / 4 + 1 : n), 256, 0, s>>>(
        (const unsigned char *)(uintptr_t)a, (const unsigned char *)(uintptr_t)b, n, words,
        (unsigned long long *)scratch);
    if (cudaGetLastError() != cudaSuccess) return -1;
    if (cudaMemcpyAsync(&got, scratch, sizeof(got), cudaMemcpyDeviceToHost, s) != cudaSuccess) return -1;
    if (cudaStreamSynchronize(s) != cudaSuccess) return -1;
    if (got == ~0ULL) return 1;
    *first = got;
    return 0;
}

/* ---- output comparison on the device (compare.h's rule) ----
 *
 * Two grid-stride passes; each thread accumulates in registers, a warp
 * reduces with shuffles, lane 0 of every warp does one atomic per
 * quantity. Pass 1: scale = max |r| over finite r, the range of finite r,
 * non-finite r, whether every c equals c[0], poison (unwritten) counts and
 * first indices on both sides. Pass 2 reads the scale from pass 1's summary
 * on the device (no host round trip) and applies the rule in double with
 * explicitly rounded operations (no FMA contraction), so every element is
 * judged exactly as kf_compare judges it on the host. Only the summary
 * (kf_cuda_cmp_sum, 128 bytes) is copied back. */
typedef struct {
    unsigned long long scale_bits, rmin_key, rmax_key, ref_nonfinite, notconst;
    unsigned long long cand_poison, cand_poison_first, ref_poison, ref_poison_first;
    unsigned long long n_bad, first_bad, maxabs_bits, maxrel_bits, n_nonfinite;
    double c0;                   /* the candidate's element 0, as compared */
} kf_cuda_cmp_sum;

/* order-preserving key of a double (min/max of keys = min/max of values) */
__device__ static unsigned long long dkey(double x)
{
    unsigned long long b = (unsigned long long)__double_as_longlong(x);
    return b >> 63 ? ~b : b | 0x8000000000000000ull;
}

__device__ static double load_d(const void *p, int dtype, int64_t i, int *poison)
{
    switch (dtype) {
    case 0: { unsigned u = ((const unsigned *)p)[i]; *poison = u == 0xffffffffu; return (double)__uint_as_float(u); }
    case 1: { unsigned short u = ((const unsigned short *)p)[i]; *poison = u == 0xffffu;
              return (double)__half2float(__ushort_as_half(u)); }
    case 2: { unsigned short u = ((const unsigned short *)p)[i]; *poison = u == 0xffffu;
              return (double)__uint_as_float((unsigned)u << 16); }
    case 3: { int v = ((const int *)p)[i]; *poison = (unsigned)v == KF_CUDA_I32_POISON; return (double)v; }
    default: { unsigned long long u = ((const unsigned long long *)p)[i]; *poison = u == ~0ull;
               return __longlong_as_double((long long)u); }
    }
}

__device__ static unsigned long long wmax(unsigned long long v)
{
    for (int o = 16; o; o >>= 1) { unsigned long long w = __shfl_down_sync(0xffffffffu, v, o); v = w > v ? w : v; }
    return v;
}
__device__ static unsigned long long wmin(unsigned long long v)
{
    for (int o = 16; o; o >>= 1) { unsigned long long w = __shfl_down_sync(0xffffffffu, v, o); v = w < v ? w : v; }
    return v;
}
__device__ static unsigned long long wsum(unsigned long long v)
{
    for (int o = 16; o; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

__global__ void kf_cuda_cmp1(const void *c, const void *r, int dtype, int64_t n, kf_cuda_cmp_sum *s)
{
    unsigned long long scale = 0, kmin = ~0ull, kmax = 0, rnf = 0, notc = 0, cp = 0, cpf = ~0ull, rp = 0, rpf = ~0ull;
    int pz;
    double c0 = n > 0 ? load_d(c, dtype, 0, &pz) : 0;
    if (blockIdx.x == 0 && threadIdx.x == 0) s->c0 = c0;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int pc, pr;
        double cv = load_d(c, dtype, i, &pc), rv = load_d(r, dtype, i, &pr);
        if (isfinite(rv)) {
            unsigned long long a = (unsigned long long)__double_as_longlong(fabs(rv)), k = dkey(rv);
            scale = a > scale ? a : scale;
            kmin = k < kmin ? k : kmin;
            kmax = k > kmax ? k : kmax;
        } else {
            rnf++;
        }
        if (cv != c0) notc = 1;
        if (pc) { cp++; cpf = (unsigned long long)i < cpf ? (unsigned long long)i : cpf; }
        if (pr) { rp++; rpf = (unsigned long long)i < rpf ? (unsigned long long)i : rpf; }
    }
    scale = wmax(scale); kmin = wmin(kmin); kmax = wmax(kmax); rnf = wsum(rnf); notc = wmax(notc);
    cp = wsum(cp); cpf = wmin(cpf); rp = wsum(rp); rpf = wmin(rpf);
    if ((threadIdx.x & 31) == 0) {
        if (scale) atomicMax(&s->scale_bits, scale);
        if (kmin != ~0ull) atomicMin(&s->rmin_key, kmin);
        if (kmax) atomicMax(&s->rmax_key, kmax);
        if (rnf) atomicAdd(&s->ref_nonfinite, rnf);
        if (notc) s->notconst = 1;
        if (cp) { atomicAdd(&s->cand_poison, cp); atomicMin(&s->cand_poison_first, cpf); }
        if (rp) { atomicAdd(&s->ref_poison, rp); atomicMin(&s->ref_poison_first, rpf); }
    }
}

__global__ void kf_cuda_cmp2(const void *c, const void *r, int dtype, int64_t n, double rtol, double atol,
                             int allow_nonfinite, kf_cuda_cmp_sum *s)
{
    double scale = __longlong_as_double((long long)s->scale_bits);
    if (scale == 0) scale = 1;
    double ascale = __dmul_rn(atol, scale);
    unsigned long long nbad = 0, fbad = ~0ull, mabs = 0, mrel = 0, nnf = 0;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int pc, pr;
        double cv = load_d(c, dtype, i, &pc), rv = load_d(r, dtype, i, &pr);
        int bad = 0;
        if (!isfinite(rv)) {
            if (!allow_nonfinite) continue;
            bad = !(isnan(rv) ? isnan(cv) : cv == rv);
        } else if (!isfinite(cv)) {
            nnf++;
            bad = 1;
        } else {
            double e = fabs(__dsub_rn(cv, rv));
            unsigned long long eb = (unsigned long long)__double_as_longlong(e);
            mabs = eb > mabs ? eb : mabs;
            if (rv != 0) {
                unsigned long long rb = (unsigned long long)__double_as_longlong(__ddiv_rn(e, fabs(rv)));
                mrel = rb > mrel ? rb : mrel;
            }
            bad = !(e <= __dadd_rn(ascale, __dmul_rn(rtol, fabs(rv))));
        }
        if (bad) { nbad++; fbad = (unsigned long long)i < fbad ? (unsigned long long)i : fbad; }
    }
    nbad = wsum(nbad); fbad = wmin(fbad); mabs = wmax(mabs); mrel = wmax(mrel); nnf = wsum(nnf);
    if ((threadIdx.x & 31) == 0) {
        if (nbad) { atomicAdd(&s->n_bad, nbad); atomicMin(&s->first_bad, fbad); }
        if (mabs) atomicMax(&s->maxabs_bits, mabs);
        if (mrel) atomicMax(&s->maxrel_bits, mrel);
        if (nnf) atomicAdd(&s->n_nonfinite, nnf);
    }
}

static double __longlong_as_double_host(unsigned long long b)
{
    double x;
    memcpy(&x, &b, sizeof(x));
    return x;
}

static double from_key(unsigned long long k)
{
    unsigned long long b = k >> 63 ? k & 0x7fffffffffffffffull : ~k;
    return __longlong_as_double_host(b);
}

/* Host side of the comparison: what the two passes found. */
typedef struct {
    double scale, rmin, rmax, max_abs_err, max_rel_err, c0;
    int64_t ref_nonfinite, n_bad, first_bad, n_nonfinite;
    int cand_const;
    int64_t cand_poison, cand_poison_first, ref_poison, ref_poison_first;
} kf_cuda_cmp_out;

/* Compare n elements of dtype at c and r (device addresses) on stream s,
 * with scratch (>= 128 bytes of device memory), and wait. 0 or -1. */
extern "C" int kf_cuda_gen_compare(uint64_t c, uint64_t r, int dtype, int64_t n, double rtol, double atol,
                                   int allow_nonfinite, void *scratch, kf_cuda_cmp_out *out, cudaStream_t s)
{
    kf_cuda_cmp_sum h;
    memset(&h, 0, sizeof(h));
    h.rmin_key = h.cand_poison_first = h.ref_poison_first = h.first_bad = ~0ull;
    kf_cuda_cmp_sum *d = (kf_cuda_cmp_sum *)scratch;
    if (cudaMemcpyAsync(d, &h, sizeof(h), cudaMemcpyHostToDevice, s) != cudaSuccess) return -1;
    if (n > 0) {
        unsigned g = grid_for((uint64_t)n);
        if (g > 2048) g = 2048;
        kf_cuda_cmp1<<<g, 256, 0, s>>>((const void *)(uintptr_t)c, (const void *)(uintptr_t)r, dtype, n, d);
        kf_cuda_cmp2<<<g, 256, 0, s>>>((const void *)(uintptr_t)c, (const void *)(uintptr_t)r, dtype, n, rtol, atol,
                                      allow_nonfinite, d);
        if (cudaGetLastError() != cudaSuccess) return -1;
    }
    if (cudaMemcpyAsync(&h, d, sizeof(h), cudaMemcpyDeviceToHost, s) != cudaSuccess) return -1;
    if (cudaStreamSynchronize(s) != cudaSuccess) return -1;
    int64_t finite = n - (int64_t)h.ref_nonfinite;
    double scale = __longlong_as_double_host(h.scale_bits);
    out->scale = scale == 0 ? 1 : scale;
    out->rmin = finite > 0 ? from_key(h.rmin_key) : INFINITY;
    out->rmax = finite > 0 ? from_key(h.rmax_key) : -INFINITY;
    out->max_abs_err = __longlong_as_double_host(h.maxabs_bits);
    out->max_rel_err = __longlong_as_double_host(h.maxrel_bits);
    out->ref_nonfinite = (int64_t)h.ref_nonfinite;
    out->n_bad = (int64_t)h.n_bad;
    out->first_bad = h.n_bad ? (int64_t)h.first_bad : -1;
    out->n_nonfinite = (int64_t)h.n_nonfinite;
    out->cand_const = !h.notconst;
    out->c0 = h.c0;
    out->cand_poison = (int64_t)h.cand_poison;
    out->cand_poison_first = h.cand_poison ? (int64_t)h.cand_poison_first : -1;
    out->ref_poison = (int64_t)h.ref_poison;
    out->ref_poison_first = h.ref_poison ? (int64_t)h.ref_poison_first : -1;
    return 0;
}
