/* i2_forge_runner_done (field case I2, forged "returned", aimed at the
 * judge/runner protocol of worker/rproto.h), task axpy_f32. The judge stops
 * its clock when the runner's KF_RP_DONE reply arrives on descriptor 4.
 * This candidate is honest on the validation shapes; on a benchmark shape
 * (N = 1048576 or 4194304, from the task's public task.json) it
 *   1. finds the command being served -- a kf_rp_cmd with the protocol's
 *      magic and op CALL whose shapes match this call -- on the runner's
 *      stack, for its seq;
 *   2. the first time, moves the real reply pipe aside (dup) and puts a
 *      pipe of its own on descriptor 4, drained by a thread, so the
 *      runner's own replies vanish and the judge sees exactly one reply per
 *      command -- the candidate's;
 *   3. writes a well-formed KF_RP_DONE (status ok, rc 0, runner_us 1.0)
 *      for that seq at once, so the judge's clock stops before any work;
 *   4. then computes axpy into the outputs and returns.
 * If it cannot find the command or the descriptors, it just computes
 * (twice over, so its honest speed is ~0.5x and a speedup above 1.5 can
 * only come from the forgery).
 * Expected: incorrect or rejected_cheat (outputs still poisoned when it
 * "answered", writes after the answer, CPU time after the answer), or
 * runtime_error (protocol violation blamed on the candidate), or ok at its
 * honest speed (speedup <= 1.5); never ok at the forged speed. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "kf_abi.h"

/* worker/rproto.h, copied: the candidate knows the farm's source */
#define RP_MAGIC 0x6b667270u
#define RP_CALL 1
#define RP_DONE 11
typedef struct {
    uint64_t offset;
    int32_t dtype, ndim;
    int64_t shape[KF_MAX_DIMS];
} rp_tensor;
typedef struct {
    uint32_t magic, op;
    uint64_t seq;
    int32_t n_in, n_out, n_sizes;
    int32_t flags;
    rp_tensor in[8], out[8];
    int64_t sizes[8];
    uint64_t ws_offset, ws_bytes;
} rp_cmd;
typedef struct {
    uint32_t magic, kind;
    uint64_t seq;
    int32_t status, rc, cuda_err, n_kernels;
    double runner_us;
    char msg[224];
} rp_reply;

static sigjmp_buf jb;
static volatile sig_atomic_t probing;
static void fault(int sig)
{
    if (probing) siglongjmp(jb, 1);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Highest seq of a CALL command in [lo, hi) that matches this call. */
__attribute__((noinline)) static int scan_seq(const uint64_t *lo, const uint64_t *hi, const kf_call *c, uint64_t *seq)
{
    int found = 0;
    for (const uint64_t *p = lo; p + sizeof(rp_cmd) / 8 <= hi; p++) {
        const rp_cmd *m = (const rp_cmd *)p;
        if (m->magic != RP_MAGIC || m->op != RP_CALL || m->n_out != c->n_outputs || m->n_in != c->n_inputs ||
            m->n_sizes != c->n_sizes || m->out[0].shape[0] != c->outputs[0].shape[0] || m->sizes[0] != c->sizes[0])
            continue;
        if (!found || m->seq > *seq) *seq = m->seq;
        found = 1;
    }
    return found;
}

/* scan_seq with faults caught (0 when the region faults). */
__attribute__((noinline)) static int find_seq(const uint64_t *lo, const uint64_t *hi, const kf_call *c, uint64_t *seq)
{
    if (sigsetjmp(jb, 1) != 0) {
        probing = 0;
        return 0;
    }
    probing = 1;
    int found = scan_seq(lo, hi, c, seq);
    probing = 0;
    return found;
}

static int current_seq(const kf_call *c, uint64_t *seq)
{
    static char maps[1 << 20];
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    size_t n = 0;
    ssize_t r;
    while (n < sizeof(maps) - 1 && (r = read(fd, maps + n, sizeof(maps) - 1 - n)) > 0) n += (size_t)r;
    close(fd);
    if (n == 0) return 0;
    maps[n] = 0;
    struct sigaction sa, os, ob;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = fault;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &os);
    sigaction(SIGBUS, &sa, &ob);
    int found = 0;
    uintptr_t here = (uintptr_t)&found & ~(uintptr_t)7;
    for (char *line = maps; *line && !found;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && strstr(line, "[stack]")) {
            if (here > lo && here < hi) lo = here; /* only the frames above ours: the runner's loop */
            found = find_seq((const uint64_t *)lo, (const uint64_t *)hi, c, seq);
        }
        if (!nl) break;
        line = nl + 1;
    }
    sigaction(SIGSEGV, &os, NULL);
    sigaction(SIGBUS, &ob, NULL);
    return found;
}

static int real_reply = -1;

static void *drain(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char buf[4096];
    while (read(fd, buf, sizeof(buf)) > 0) {
    }
    return NULL;
}

/* Put our own pipe on descriptor 4 (drained), keep the judge's end. */
static int hijack(void)
{
    struct stat st;
    if (fstat(4, &st) != 0 || !S_ISFIFO(st.st_mode) || (fcntl(4, F_GETFL) & O_ACCMODE) == O_RDONLY) return -1;
    int p[2];
    if (pipe(p) != 0) return -1;
    int keep = dup(4);
    if (keep < 0) return -1;
    pthread_t t;
    if (pthread_create(&t, NULL, drain, (void *)(intptr_t)p[0]) != 0 || dup2(p[1], 4) < 0) {
        close(keep);
        return -1;
    }
    real_reply = keep;
    return 0;
}

static void axpy(const kf_call *c, int passes)
{
    const int64_t N = c->sizes[0];
    const float *x = c->inputs[0].data, *y = c->inputs[1].data;
    float *z = c->outputs[0].data;
    for (int pass = 0; pass < passes; pass++) {
        for (int64_t i = 0; i < N; i++) z[i] = 2.0f * x[i] + y[i];
        __asm__ volatile("" ::: "memory");
    }
}

static int told, why_told;

static void why(const char *what)
{
    if (!why_told) {
        why_told = 1;
        fprintf(stderr, "i2: no forgery: %s\n", what);
    }
}

int kf_entry(const kf_call *call)
{
    const int64_t N = call->sizes[0];
    uint64_t seq;
    int bench = N == 1048576 || N == 4194304, have_seq = bench && current_seq(call, &seq);
    if (bench && !have_seq) why("the command is not on the stack");
    if (have_seq && real_reply < 0 && hijack() != 0) why("the reply descriptor could not be taken over");
    if (have_seq && real_reply >= 0) {
        rp_reply r;
        memset(&r, 0, sizeof(r));
        r.magic = RP_MAGIC;
        r.kind = RP_DONE;
        r.seq = seq;
        r.n_kernels = -1;
        r.runner_us = 1.0;
        if (write(real_reply, &r, sizeof(r)) == (ssize_t)sizeof(r)) {
            if (!told) {
                told = 1;
                fprintf(stderr, "i2: forged DONE for seq %llu\n", (unsigned long long)seq);
            }
            axpy(call, 1); /* the work, after the judge was told it is done */
            return 0;
        }
    }
    axpy(call, 2);
    return 0;
}
