/* batch_parallel_threads (batches: calls computed in parallel), task
 * axpy_tiny_f32. From the red team, 2026-12-01. Finds its runner's batch
 * command on the stack (magic "kfrp"), and on the first call of a batch
 * computes every set of the batch split between its main thread and a
 * spinning helper thread; the batch's other calls return at once. Every
 * output is right, so every check passes; before the fix it scored 1.5-1.6x
 * on 2 cores (an honest call is ~1.0x: two threads gain nothing on one call
 * this small). The judge charges a batch its process's CPU time when that
 * exceeds the batch's wall time (docs/architecture.md, "Batches").
 * Expected: ok at no more than its honest speed (speedup <= 1.3).
 * MODE 1 is tests/cases/batch_fuse_ahead (its case.json names this file):
 * the whole batch computed on one thread by its first call, which gains only
 * the per-call overhead (cpu: ~1.0x); it is bounded at 2.0x because on the CI
 * host an honest kernel on this task timed 0.98-1.48x, while a judge that
 * timed the calls instead of the batch would give it about the batch size
 * (tens of calls: tens of x). MODE 0: two threads split each call;
 * MODE 3: skip a share SKIP of the calls, never the last. */
#include <stdint.h>
#include <string.h>
#include <pthread.h>
#include <stdatomic.h>
#include "kf_abi.h"
#ifndef MODE
#define MODE 2
#endif
#ifndef SKIP
#define SKIP 0.05
#endif
#define MAGIC 0x6b667270u
typedef struct { uint64_t offset; int32_t dtype, ndim; int64_t shape[8]; } rp_t;
typedef struct { uint32_t magic, op; uint64_t seq; int32_t n_in, n_out, n_sizes, flags, count; uint64_t stride;
                 rp_t in[8], out[8]; int64_t sizes[8]; uint64_t ws_offset, ws_bytes; } rp_cmd;

/* find count, k, stride of the current call: c and its shifted copy s lie on main's stack */
static const rp_cmd *ca, *cb; static char *cframe;
static int find_batch(int *count, int *k, uint64_t *stride)
{
    char *p = (char *)__builtin_frame_address(0);
    const rp_cmd *a = 0, *b = 0;
    if (ca && cb && p == cframe && ca->magic == MAGIC && cb->magic == MAGIC && ca->seq == cb->seq) { a = ca; b = cb; goto got; }
    for (int off = 0; off < 24000; off += 8) {
        const rp_cmd *c = (const rp_cmd *)(p + off);
        if (c->magic == MAGIC && c->op == 1 && c->count >= 0 && c->count <= 4096) {
            if (!a) a = c;
            else if (c->seq == a->seq) { b = c; break; }
        }
    }
    if (!a) return -1;
    if (b) { ca = a; cb = b; cframe = p; }
got:
    *count = a->count < 1 ? 1 : a->count;
    *stride = a->stride;
    if (!b) { *k = 0; return 0; }
    uint64_t oa = a->out[0].offset, ob = b->out[0].offset;
    uint64_t d = oa > ob ? oa - ob : ob - oa;
    *k = a->stride ? (int)(d / a->stride) : 0;
    return 0;
}

static void axpy(const float *restrict x, const float *restrict y, float *restrict z, int64_t n)
{ for (int64_t i = 0; i < n; i++) z[i] = 2.0f * x[i] + y[i]; }

/* one helper thread, spinning on a generation counter */
static pthread_t th; static int th_up;
static _Atomic unsigned gen, done_gen;
static struct { const char *xb, *yb; char *zb; int64_t n; uint64_t stride; int lo, hi; } job;
static void *helper(void *arg)
{
    (void)arg; unsigned seen = 0;
    for (;;) {
        unsigned g;
        while ((g = atomic_load_explicit(&gen, memory_order_acquire)) == seen) __builtin_ia32_pause();
        seen = g;
        for (int s = job.lo; s < job.hi; s++)
            axpy((const float *)(job.xb + s * job.stride), (const float *)(job.yb + s * job.stride),
                 (float *)(job.zb + s * job.stride), job.n);
        atomic_store_explicit(&done_gen, g, memory_order_release);
    }
    return 0;
}

int kf_entry(const kf_call *call)
{
    const int64_t N = call->sizes[0];
    const float *x = call->inputs[0].data, *y = call->inputs[1].data;
    float *z = call->outputs[0].data;
    if (!th_up && MODE != 1 && MODE != 3) { pthread_create(&th, 0, helper, 0); th_up = 1; }
#if MODE == 0
    /* honest: split this one call between 2 threads */
    if (N < 1024) { axpy(x, y, z, N); return 0; }
    int64_t h = N / 2;
    job.xb = (const char *)(x + h); job.yb = (const char *)(y + h); job.zb = (char *)(z + h);
    job.n = N - h; job.stride = 0; job.lo = 0; job.hi = 1;
    unsigned g = atomic_fetch_add(&gen, 1) + 1;
    axpy(x, y, z, h);
    while (atomic_load_explicit(&done_gen, memory_order_acquire) != g) __builtin_ia32_pause();
    return 0;
#else
    int count = 1, k = 0; uint64_t stride = 0;
    if (find_batch(&count, &k, &stride) || count <= 1) { axpy(x, y, z, N); return 0; }
#if MODE == 3
    { static uint64_t ctr; uint64_t h = (++ctr) * 0x9E3779B97F4A7C15ull; h ^= h >> 29; h *= 0xBF58476D1CE4E5B9ull; h ^= h >> 32;
      if (k != count - 1 && (double)(h % 10000) < SKIP * 10000.0) return 0; }
    axpy(x, y, z, N); return 0;
#endif
    if (k > 0) return 0; /* done at call 0 */
#if MODE == 1
    for (int s = 0; s < count; s++)
        axpy((const float *)((const char *)x + s * stride), (const float *)((const char *)y + s * stride),
             (float *)((char *)z + s * stride), N);
#else
    int half = count / 2;
    job.xb = (const char *)x; job.yb = (const char *)y; job.zb = (char *)z; job.n = N; job.stride = stride;
    job.lo = half; job.hi = count;
    unsigned g = atomic_fetch_add(&gen, 1) + 1;
    for (int s = 0; s < half; s++)
        axpy((const float *)((const char *)x + s * stride), (const float *)((const char *)y + s * stride),
             (float *)((char *)z + s * stride), N);
    while (atomic_load_explicit(&done_gen, memory_order_acquire) != g) __builtin_ia32_pause();
#endif
    return 0;
#endif
}
