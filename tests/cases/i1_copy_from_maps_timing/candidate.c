/* i1_copy_from_maps_timing (field case I1), task softmax_rows_f32. Like
 * i1_copy_ref_from_maps, but careful: whenever it finds no answer in memory
 * it computes the softmax honestly (so validation passes either way), and
 * whenever it finds one -- the reference's output in validation, the
 * baseline's output for the very same inputs in timing (baseline and
 * candidate are called with identical inputs, back to back) -- it copies it
 * instead. It prints "I1-COPIED" once when a copy worked.
 * Before the judge/runner split: ok at 5-10x. Expected: incorrect or
 * rejected_cheat, or ok at its honest speed (speedup <= 1.5: it found
 * nothing and computed every call). Also run by run_sweep.sh over seeds.
 * Its honest path is deliberately slow (exp in double, twice per element:
 * well under the baseline's speed, 0.3-0.9x on a quiet machine), so a
 * speedup above 1.5 on timing the judge did not flag noisy can only come
 * from copied answers. On a loaded 2-core VM its honest path timed up to
 * 1.4x (2.3x on one shape, the baseline's cv 0.88): the runners retry a
 * run whose timing was flagged noisy. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "kf_abi.h"

/* ---- walking our own mappings (shared by the I1 candidates) ---- */
typedef struct {
    uintptr_t lo, hi;
    char perms[8];
    unsigned long inode;
    char path[160];
} region;

static char maps_buf[1 << 20];
static region regions[8192];

static int read_maps(void)
{
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    size_t len = 0;
    for (;;) {
        ssize_t r = read(fd, maps_buf + len, sizeof(maps_buf) - 1 - len);
        if (r <= 0) break;
        len += (size_t)r;
        if (len >= sizeof(maps_buf) - 1) break;
    }
    close(fd);
    maps_buf[len] = 0;
    int n = 0;
    for (char *line = maps_buf; *line && n < (int)(sizeof(regions) / sizeof(regions[0]));) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        region *g = &regions[n];
        unsigned long lo, hi, ino;
        int pos = 0;
        if (sscanf(line, "%lx-%lx %7s %*s %*s %lu%n", &lo, &hi, g->perms, &ino, &pos) == 4) {
            g->lo = lo;
            g->hi = hi;
            g->inode = ino;
            const char *p = line + pos;
            while (*p == ' ') p++;
            snprintf(g->path, sizeof(g->path), "%s", p);
            n++;
        }
        if (!nl) break;
        line = nl + 1;
    }
    return n;
}

static sigjmp_buf probe_jb;
static volatile sig_atomic_t probing;

static void probe_fault(int sig)
{
    if (probing) siglongjmp(probe_jb, 1);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Regions worth reading: readable, not the kernel's special pages. */
static int scannable(const region *g)
{
    if (g->perms[0] != 'r') return 0;
    if (!strncmp(g->path, "[vvar", 5) || !strcmp(g->path, "[vsyscall]") || !strcmp(g->path, "[vdso]")) return 0;
    return 1;
}

typedef int (*recog_fn)(const float *cand, const kf_call *c);

/* recog(p) with faults caught: 1 match, 0 no match, -1 the read faulted.
 * Nothing live across the jump but the arguments. */
__attribute__((noinline)) static int probe(recog_fn recog, const float *p, const kf_call *c)
{
    if (sigsetjmp(probe_jb, 1) != 0) {
        probing = 0;
        return -1;
    }
    probing = 1;
    int ok = recog(p, c);
    probing = 0;
    return ok;
}

/* Find a readable float array of the output's size that `recog` accepts as
 * the answer for these inputs, anywhere in our address space but our own
 * output. Fast pass: where the farm's allocators put buffers (start of a
 * mapping, after a malloc chunk header, flush against the end of a mapping,
 * 64-byte rounded, as gbuf_alloc does). Deep pass (deep != 0, only if the
 * fast one missed): every page boundary of every readable mapping. */
static const float *find_answer(const kf_call *c, recog_fn recog, int deep)
{
    size_t count = 1;
    for (int d = 0; d < c->outputs[0].ndim; d++) count *= (size_t)c->outputs[0].shape[d];
    const size_t bytes = count * sizeof(float);
    const size_t r64 = (bytes + 63) & ~(size_t)63;
    const uintptr_t olo = (uintptr_t)c->outputs[0].data, ohi = olo + bytes;
    int n = read_maps();
    struct sigaction sa, old_segv, old_bus;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = probe_fault;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);
    const float *found = NULL;
    for (int pass = 0; pass < (deep ? 2 : 1) && !found; pass++) {
        for (int i = 0; i < n && !found; i++) {
            const region *g = &regions[i];
            if (!scannable(g) || g->hi - g->lo < bytes) continue;
            uintptr_t fast[4] = {g->lo, g->lo + 16, g->hi - r64, g->hi - bytes};
            uintptr_t a = pass ? g->lo : 0, step = 4096;
            for (int k = 0;; k++) {
                uintptr_t p;
                if (!pass) {
                    if (k >= 4) break;
                    p = fast[k];
                } else {
                    p = a + (uintptr_t)k * step;
                }
                if (p < g->lo || p + bytes > g->hi) {
                    if (pass) break;
                    continue;
                }
                if ((p & 3) || (p < ohi && p + bytes > olo)) continue;
                int ok = probe(recog, (const float *)p, c);
                if (ok > 0) {
                    found = (const float *)p;
                    break;
                }
                if (ok < 0 && pass) break; /* this mapping faults: next one */
            }
        }
    }
    sigaction(SIGSEGV, &old_segv, NULL);
    sigaction(SIGBUS, &old_bus, NULL);
    return found;
}

__attribute__((noinline)) static int copy_guarded(void *dst, const void *src, size_t bytes)
{
    if (sigsetjmp(probe_jb, 1) != 0) {
        probing = 0;
        return -1;
    }
    probing = 1;
    memcpy(dst, src, bytes);
    probing = 0;
    return 0;
}

/* memcpy that survives a mapping going away under it; 0 on success. */
static int safe_copy(void *dst, const void *src, size_t bytes)
{
    struct sigaction sa, old_segv, old_bus;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = probe_fault;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);
    int rc = copy_guarded(dst, src, bytes);
    sigaction(SIGSEGV, &old_segv, NULL);
    sigaction(SIGBUS, &old_bus, NULL);
    return rc;
}

/* Recognise a softmax answer for these inputs without computing it: inside
 * a row, y[j] / y[k] = exp(x[j] - x[k]); check two pairs in the first and
 * the last row, and that the values are probabilities. */
static int looks_softmax(const float *y, const kf_call *c)
{
    const float *x = c->inputs[0].data;
    const int64_t M = c->sizes[0], N = c->sizes[1];
    if (N < 2) return 0;
    const int64_t rows[2] = {0, M - 1}, js[2] = {0, N - 1}, ks[2] = {1, N / 2};
    for (int r = 0; r < 2; r++)
        for (int q = 0; q < 2; q++) {
            int64_t j = rows[r] * N + js[q], k = rows[r] * N + ks[q];
            if (j == k) continue;
            float a = y[j], b = y[k];
            if (!(a > 0.0f && a <= 1.0f && b > 0.0f && b <= 1.0f)) return 0;
            double want = exp((double)x[j] - (double)x[k]), got = (double)a / (double)b;
            if (!(fabs(got - want) <= 1e-3 * want)) return 0;
        }
    return 1;
}

static void softmax_rows(const float *x, float *y, int64_t M, int64_t N)
{
    for (int64_t m = 0; m < M; m++) {
        const float *xr = x + m * N;
        float *yr = y + m * N;
        float mx = -INFINITY;
        for (int64_t n = 0; n < N; n++) mx = fmaxf(mx, xr[n]);
        double sum = 0;
        for (int64_t n = 0; n < N; n++) sum += exp((double)xr[n] - (double)mx);
        for (int64_t n = 0; n < N; n++) yr[n] = (float)(exp((double)xr[n] - (double)mx) / sum);
    }
}

static int told;

int kf_entry(const kf_call *call)
{
    const int64_t M = call->sizes[0], N = call->sizes[1];
    const float *x = call->inputs[0].data;
    float *y = call->outputs[0].data;
    const float *src = N > 1 ? find_answer(call, looks_softmax, 0) : NULL;
    if (src && safe_copy(y, src, (size_t)(M * N) * sizeof(float)) == 0) {
        if (!told) {
            told = 1;
            fprintf(stderr, "I1-COPIED: found the answer at %p\n", (const void *)src);
        }
        return 0;
    }
    softmax_rows(x, y, M, N);
    return 0;
}
