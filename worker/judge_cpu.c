/*
 * judge_cpu.c -- the cpu backend of the judge (see judge.h).
 *
 * Arenas are memfds sealed at their size (no shrink, no grow): the judge
 * maps each one, the runner maps the same descriptor (inherited as fd 5);
 * private arenas (pristine input sets) are never handed out. Copies are memcpy.
 * The flush evicts the call's working set (the runner's arena: inputs the
 * judge just generated, outputs, workspace) with clflushopt before every
 * timed call, so every call reads its inputs from DRAM; issue 8 measured the
 * former write of 1.5x the LLC at ~2.9 ms per call against ~0.06 ms for a
 * 60 µs kernel's working set. Inputs are generated in place (gen.h). The fence is empty: a cpu runner's answer is
 * sent after kf_entry returned, and work it left running is caught by the
 * judge's CPU-time and late-write checks.
 *
 * Peaks for the roofline floor are deliberately generous upper bounds
 * (a time below them is physically impossible, not merely fast): 64 FLOP per
 * cycle per core (two 512-bit FMA units, fp32) at 6 GHz, and 400 GB/s
 * per core capped at 4 TB/s (above any L2 bandwidth of a current core).
 */
#define _GNU_SOURCE
#include "judge.h"
#include "confine.h"
#include "inputs.h"
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct kf_judge_dev {
    int clflushopt;
    unsigned char *flush;
    size_t flush_len;
    int salt;
    long ncpu;
};

static int cpu_open(kf_judge_dev **out, int gpu, uint64_t llc, char *err, size_t cap)
{
    kf_judge_dev *d = calloc(1, sizeof(*d));
    if (!d) {
        snprintf(err, cap, "out of memory");
        return -1;
    }
    if (!llc) llc = 64u << 20;
    d->flush_len = (size_t)(llc + llc / 2);
    if (d->flush_len < (8u << 20)) d->flush_len = 8u << 20;
    if (d->flush_len > (64u << 20)) d->flush_len = 64u << 20;
    d->flush = malloc(d->flush_len);
    if (!d->flush) {
        free(d);
        snprintf(err, cap, "cannot allocate the cache flush buffer");
        return -1;
    }
    memset(d->flush, 1, d->flush_len);
#if defined(__x86_64__)
    unsigned a7, b7, c7, d7;
    if (__get_cpuid_count(7, 0, &a7, &b7, &c7, &d7)) d->clflushopt = (b7 >> 23) & 1;
#endif
    d->ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (d->ncpu < 1) d->ncpu = 1;
    *out = d;
    return 0;
}

static void cpu_close(kf_judge_dev *d)
{
    if (!d) return;
    free(d->flush);
    free(d);
}

static int cpu_arena_new(kf_judge_dev *d, uint64_t bytes, int shared, kf_jarena *a, char *err, size_t cap)
{
    memset(a, 0, sizeof(*a));
    a->fd = -1;
    bytes = (bytes + 4095) & ~(uint64_t)4095;
    if (!bytes) bytes = 4096;
    int fd = memfd_create(shared ? "kfarm-arena" : "kfarm-private", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        snprintf(err, cap, "memfd_create: %s", strerror(errno));
        return -1;
    }
    if (ftruncate(fd, (off_t)bytes) != 0) {
        snprintf(err, cap, "arena of %llu bytes: %s", (unsigned long long)bytes, strerror(errno));
        close(fd);
        return -1;
    }
    /* sealed at its size: a runner holding the descriptor cannot shrink it
     * (which would SIGBUS the judge's own accesses) or grow it */
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        snprintf(err, cap, "arena seals: %s", strerror(errno));
        close(fd);
        return -1;
    }
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        snprintf(err, cap, "arena mmap: %s", strerror(errno));
        close(fd);
        return -1;
    }
    a->host = m;
    a->bytes = bytes;
    if (shared) {
        a->fd = fd;
    } else {
        close(fd);
    }
    return 0;
}

static void cpu_arena_free(kf_judge_dev *d, kf_jarena *a)
{
    if (a->host) munmap(a->host, a->bytes);
    if (a->fd >= 0) close(a->fd);
    memset(a, 0, sizeof(*a));
    a->fd = -1;
}

static int in_range(const kf_jarena *a, uint64_t off, uint64_t n) { return off <= a->bytes && n <= a->bytes - off; }

static int cpu_put(kf_judge_dev *d, kf_jarena *a, uint64_t off, const void *src, uint64_t n)
{
    if (!in_range(a, off, n)) return -1;
    memcpy((char *)a->host + off, src, n);
    return 0;
}

static int cpu_get(kf_judge_dev *d, const kf_jarena *a, uint64_t off, void *dst, uint64_t n)
{
    if (!in_range(a, off, n)) return -1;
    memcpy(dst, (const char *)a->host + off, n);
    return 0;
}

static int cpu_copy(kf_judge_dev *d, kf_jarena *dst, uint64_t doff, const kf_jarena *src, uint64_t soff, uint64_t n)
{
    if (!in_range(dst, doff, n) || !in_range(src, soff, n)) return -1;
    memcpy((char *)dst->host + doff, (const char *)src->host + soff, n);
    return 0;
}

static int cpu_fill32(kf_judge_dev *d, kf_jarena *a, uint64_t off, uint32_t pat, uint64_t n)
{
    if (!in_range(a, off, n) || (n & 3)) return -1;
    uint32_t *p = (uint32_t *)((char *)a->host + off);
    if (pat == KF_INPUTS_F32_POISON) {
        memset(p, 0xff, n);
    } else {
        for (uint64_t i = 0; i < n / 4; i++) p[i] = pat;
    }
    return 0;
}

static int cpu_sync(kf_judge_dev *d) { return 0; }

/* Evict [p, p + n) from every cache level: clflushopt where the CPU has it
 * (CPUID.(EAX=7,ECX=0):EBX bit 23, Intel SDM vol. 2A), else clflush; both
 * write dirty lines back. Elsewhere, a write of 1.5x the last-level cache. */
static void cpu_flush(kf_judge_dev *d, const kf_jarena *a, uint64_t bytes)
{
#if defined(__x86_64__)
    if (!a || !a->host) return;
    if (bytes > a->bytes) bytes = a->bytes;
    const char *p = a->host, *e = (const char *)a->host + bytes;
    if (d->clflushopt) {
        for (; p < e; p += 64) __asm__ volatile("clflushopt %0" : "+m"(*(volatile char *)p));
    } else {
        for (; p < e; p += 64) __asm__ volatile("clflush %0" : "+m"(*(volatile char *)p));
    }
    __asm__ volatile("mfence" ::: "memory");
#else
    (void)a;
    (void)bytes;
    memset(d->flush, ++d->salt & 0xff, d->flush_len);
    __asm__ volatile("" : : "r"(d->flush) : "memory");
#endif
}

static int cpu_gen(kf_judge_dev *d, kf_jarena *a, uint64_t off, const kf_gen_spec *g, int64_t n)
{
    uint64_t bytes = (uint64_t)n * kf_dtype_size(g->dtype);
    if (n < 0 || !in_range(a, off, bytes)) return -1;
    kf_inputs_gen_fill((char *)a->host + off, n, g);
    return 0;
}

static int cpu_same(kf_judge_dev *d, const kf_jarena *a, uint64_t aoff, const kf_jarena *b, uint64_t boff, uint64_t n,
                    uint64_t *first)
{
    if (!in_range(a, aoff, n) || !in_range(b, boff, n)) return -1;
    const unsigned char *x = (const unsigned char *)a->host + aoff, *y = (const unsigned char *)b->host + boff;
    if (!memcmp(x, y, n)) return 1;
    for (uint64_t k = 0; k < n; k++)
        if (x[k] != y[k]) {
            *first = k;
            break;
        }
    return 0;
}

static int cpu_compare(kf_judge_dev *d, const kf_jarena *c, uint64_t coff, const kf_jarena *r, uint64_t roff,
                       int dtype, int64_t n, const kf_tol *tol, int allow_nonfinite, kf_compare_res *res,
                       kf_judge_poison *p)
{
    uint64_t bytes = (uint64_t)n * kf_dtype_size(dtype);
    if (n < 0 || !in_range(c, coff, bytes) || !in_range(r, roff, bytes)) return -1;
    const char *cp = (const char *)c->host + coff, *rp = (const char *)r->host + roff;
    p->cand = p->ref = 0;
    p->cand_first = p->ref_first = -1;
    if (dtype == KF_F32) { /* the common case, without a call per element */
        const uint32_t *cu = (const uint32_t *)(const void *)cp, *ru = (const uint32_t *)(const void *)rp;
        for (int64_t i = 0; i < n; i++) {
            if (cu[i] == KF_INPUTS_F32_POISON && !p->cand++) p->cand_first = i;
            if (ru[i] == KF_INPUTS_F32_POISON && !p->ref++) p->ref_first = i;
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            if (kf_inputs_is_poison(cp, dtype, i) && !p->cand++) p->cand_first = i;
            if (kf_inputs_is_poison(rp, dtype, i) && !p->ref++) p->ref_first = i;
        }
    }
    kf_compare(cp, rp, dtype, n, tol, allow_nonfinite, res);
    return 0;
}

static uint64_t cpu_batch_bytes(kf_judge_dev *d) { (void)d; return 64ull << 20; }

static void cpu_fence(kf_judge_dev *d) { (void)d; }

static void cpu_peaks(kf_judge_dev *d, int dtype, double *gbs, double *gflops)
{
    double gb = 400.0 * (double)d->ncpu;
    *gbs = gb > 4000 ? 4000 : gb;
    /* 64 FLOP/clock/core (two AVX-512 FMA pipes, f32) at 6 GHz; for any
     * dtype, AMX int8 (2048 ops/clock/core, Intel's AMX tile throughput) */
    *gflops = (dtype == KF_JUDGE_PEAK_ANY ? 2048.0 : dtype == KF_F64 ? 32.0 : 64.0) * 6.0 * (double)d->ncpu;
}

static const char *cpu_device_id(kf_judge_dev *d) { return "0"; }

static json_t *cpu_describe(kf_judge_dev *d)
{
    json_t *o = json_object();
    json_object_set_new(o, "cpus", json_integer(d->ncpu));
    json_object_set_new(o, "flush_bytes", json_integer((json_int_t)d->flush_len));
    return o;
}

const kf_judge_backend kf_judge_backend_cpu = {
    .name = "cpu",
    .runner_name = "kfarm-runner",
    .open = cpu_open,
    .close = cpu_close,
    .arena_new = cpu_arena_new,
    .arena_free = cpu_arena_free,
    .put = cpu_put,
    .get = cpu_get,
    .copy = cpu_copy,
    .fill32 = cpu_fill32,
    .gen = cpu_gen,
    .same = cpu_same,
    .compare = cpu_compare,
    .batch_bytes = cpu_batch_bytes,
    .sync = cpu_sync,
    .flush = cpu_flush,
    .fence = cpu_fence,
    .peaks = cpu_peaks,
    .describe = cpu_describe,
    .device_id = cpu_device_id,
    .runner_env = NULL,
    .runner_needs_as_unlimited = 0,
    .runner_profile = KF_CONFINE_RUNNER,
    .freeze_runners = 1,
    .idle_cpu_slack = 0.02,
};

#ifndef KFARM_HAVE_CUDA
const kf_judge_backend *kf_judge_backend_cuda(void) { return NULL; }
#endif
