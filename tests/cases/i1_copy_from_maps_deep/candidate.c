/* i1_copy_from_maps_deep (field case I1), task axpy_f32. The candidate
 * never computes z = 2x + y beyond four elements it uses to recognise the
 * answer. It reads /proc/self/maps and probes every readable mapping --
 * anonymous memory, heap, stack, shared memory (/dev/shm, memfd), file
 * mappings -- first where allocators put buffers, then at every page
 * boundary, for a float array of the output's size whose first, second,
 * middle and last elements equal 2x+y for these inputs, and copies it. A
 * judge that put the reference's (or baseline's) output into memory the
 * runner maps, at any page-aligned offset, would be found. Nothing found:
 * the output is left as it is. Prints "I1-COPIED" once when a copy worked.
 * Before the judge/runner split: ok. Expected: incorrect or rejected_cheat;
 * never ok. */
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

/* Recognise an axpy answer for these inputs from four elements (first,
 * second, middle, last): z = 2x + y there, to 1e-6 relative. */
static int looks_axpy(const float *z, const kf_call *c)
{
    const float *x = c->inputs[0].data, *y = c->inputs[1].data;
    const int64_t N = c->sizes[0];
    const int64_t idx[4] = {0, N > 1 ? 1 : 0, N / 2, N - 1};
    for (int q = 0; q < 4; q++) {
        int64_t i = idx[q];
        double want = 2.0 * (double)x[i] + (double)y[i];
        double got = z[i];
        if (!isfinite(got) || !(fabs(got - want) <= 1e-6 * fabs(want) + 1e-30)) return 0;
    }
    return 1;
}

static int told;

int kf_entry(const kf_call *call)
{
    const int64_t N = call->sizes[0];
    float *z = call->outputs[0].data;
    const float *src = find_answer(call, looks_axpy, 1);
    if (src && safe_copy(z, src, (size_t)N * sizeof(float)) == 0 && !told) {
        told = 1;
        fprintf(stderr, "I1-COPIED: found the answer at %p\n", (const void *)src);
    }
    return 0;
}
