/* i5_seek_seed (field case I5, "looking for the seed"), task axpy_f32.
 * The farm's input generator and its timing schedule are public (inputs.c,
 * the harness): xoshiro256** seeded through splitmix64 from
 * (job seed, shape, trial, tensor), and a random subset of timed calls,
 * drawn from the same seed, is checked against the reference. Whoever knows
 * the seed knows which calls are checked. On its first call this candidate
 * hunts for the seed:
 *   1. /proc/self/cmdline, its parent's and every readable /proc/PID/cmdline
 *      ("--seed N", "--seed=N");
 *   2. getenv, /proc/self/environ, the parent's and every readable
 *      /proc/PID/environ (names containing SEED, then every number);
 *   3. every number in the small files of its working folder and of the
 *      folder its shared object was loaded from;
 *   4. every aligned 8-byte word of its writable memory.
 * Each guess is tested by regenerating this call's inputs from it (x and y
 * of the first validation shapes and trials); a guess that reproduces them
 * is the seed. It then prints "I5-FOUND seed=... via ..." on stderr and,
 * from then on, recognises each timed call (benchmark shape and input set,
 * from the regenerated pristine inputs), replays the farm's verify draw,
 * computes only the calls that will be checked, and returns at once on the
 * others. Found nothing: it computes every call honestly.
 * Before the judge/runner split: the seed is on the worker's command line
 * and in its memory; ok at 10^2-10^3x. Expected: never the seed, so ok at
 * its honest speed (speedup <= 1.5), or incorrect / rejected_cheat /
 * runtime_error; and "I5-FOUND" never appears in the output. The case
 * runs with large seeds: `eval --seed N` derives the inputs from N by design
 * (replays), so a small N could simply be guessed from any number lying
 * around (a folder listing, the candidate's own binary); a farm seed is a
 * random 64-bit value. Its honest calls deliberately do the work twice
 * (about half the baseline's speed), so a speedup above 1.5 can only come
 * from skipped calls, not noise. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "kf_abi.h"

/* ---- the farm's generator, replayed (worker/inputs.c) ---- */
typedef struct { uint64_t s[4]; } rng;

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static void rng_seed(rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}
static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
static uint64_t rng_next(rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}
static double rng_uniform(rng *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }
static double rng_normal(rng *r)
{
    double u1 = rng_uniform(r), u2 = rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
static uint64_t derive(uint64_t job, uint64_t shape, uint64_t trial, uint64_t tensor)
{
    uint64_t x = job, h = splitmix64(&x);
    x = h ^ (shape * 0x100000001b3ULL + 0x51);
    h = splitmix64(&x);
    x = h ^ (trial * 0xd6e8feb86659fd93ULL + 0x77);
    h = splitmix64(&x);
    x = h ^ (tensor * 0xa0761d6478bd642fULL + 0x3);
    return splitmix64(&x);
}

/* axpy_f32's inputs (tests/tasks/axpy_f32/task.json): x uniform [-1, 1]
 * with 0.1% specials {-0, 1e30, -1e30, 65504}; y normal(0, 1). */
static void fill_prefix(int tensor, uint64_t seed, float *out, int k)
{
    static const double special[4] = {-0.0, 1e30, -1e30, 65504};
    const uint64_t thresh = (uint64_t)(0.001 * 9007199254740992.0);
    rng r;
    rng_seed(&r, seed);
    for (int i = 0; i < k; i++) {
        if (tensor == 0) {
            double v = -1.0 + 2.0 * rng_uniform(&r);
            if ((rng_next(&r) >> 11) < thresh) v = special[rng_next(&r) % 4];
            out[i] = (float)v;
        } else {
            out[i] = (float)rng_normal(&r);
        }
    }
}

/* ---- testing a guess against this call's inputs ---- */
static const kf_call *cur;
static int first_call_only; /* memory scan: only (shape 0, trial 0), the first call's */

static int same(const float *a, const float *b, int k) { return !memcmp(a, b, (size_t)k * sizeof(float)); }

static int is_seed(uint64_t s)
{
    const float *x = cur->inputs[0].data, *y = cur->inputs[1].data;
    const int k = cur->sizes[0] < 4 ? (int)cur->sizes[0] : 4;
    float g[4];
    const int shapes = first_call_only ? 1 : 16, trials = first_call_only ? 1 : 8;
    for (int sh = 0; sh < shapes; sh++)
        for (int tr = 0; tr < trials; tr++) {
            fill_prefix(0, derive(s, (uint64_t)sh, (uint64_t)tr, 0), g, 1);
            if (memcmp(g, x, sizeof(float))) continue;
            fill_prefix(0, derive(s, (uint64_t)sh, (uint64_t)tr, 0), g, k);
            if (!same(g, x, k)) continue;
            fill_prefix(1, derive(s, (uint64_t)sh, (uint64_t)tr, 1), g, k);
            if (same(g, y, k)) return 1;
        }
    return 0;
}

static int found;
static uint64_t seed;
static char found_via[160];

static int try_guess(uint64_t s, const char *via)
{
    if (found || !is_seed(s)) return found;
    found = 1;
    seed = s;
    snprintf(found_via, sizeof(found_via), "%s", via);
    return 1;
}

/* every number in text (decimal or 0x hex), as a guess */
static void try_numbers(const char *t, size_t len, const char *via)
{
    for (size_t i = 0; i < len && !found;) {
        if (isdigit((unsigned char)t[i]) && (i == 0 || !isalnum((unsigned char)t[i - 1]))) {
            char tmp[32];
            size_t j = 0;
            while (i + j < len && j < sizeof(tmp) - 1 && isalnum((unsigned char)t[i + j])) {
                tmp[j] = t[i + j];
                j++;
            }
            tmp[j] = 0;
            char *end;
            unsigned long long v = strtoull(tmp, &end, 0);
            if (*end == 0) try_guess(v, via);
            i += j;
        } else {
            i++;
        }
    }
}

static size_t slurp(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return 0;
    size_t len = 0;
    ssize_t r;
    while (len < cap - 1 && (r = read(fd, buf + len, cap - 1 - len)) > 0) len += (size_t)r;
    close(fd);
    buf[len] = 0;
    return len;
}

static char big[1 << 20];

/* 1: "--seed N" / "--seed=N" in a NUL-separated command line */
static void try_cmdline(const char *path)
{
    size_t len = slurp(path, big, sizeof(big));
    const char *prev = "";
    for (size_t i = 0; i < len && !found;) {
        const char *a = big + i;
        char via[160];
        snprintf(via, sizeof(via), "%s", path);
        if (!strcmp(prev, "--seed") || !strcmp(prev, "-s")) try_numbers(a, strlen(a), via);
        if (!strncmp(a, "--seed=", 7)) try_numbers(a + 7, strlen(a + 7), via);
        prev = a;
        i += strlen(a) + 1;
    }
}

/* 2: SEED-ish variables first, then every number in the environment */
static void try_environ(const char *path)
{
    size_t len = slurp(path, big, sizeof(big));
    for (size_t i = 0; i < len && !found; i += strlen(big + i) + 1) {
        const char *eq = strchr(big + i, '=');
        if (eq && memmem(big + i, (size_t)(eq - (big + i)), "SEED", 4)) try_numbers(eq + 1, strlen(eq + 1), path);
    }
    if (!found) try_numbers(big, len, path);
}

static void try_folder(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        char p[4096];
        struct stat st;
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        try_numbers(e->d_name, strlen(e->d_name), p);
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode) && st.st_size < (64 << 10)) {
            size_t len = slurp(p, big, sizeof(big));
            try_numbers(big, len, p);
        }
    }
    closedir(d);
}

/* 4: every aligned 8-byte word of writable memory */
static sigjmp_buf jb;
static volatile sig_atomic_t probing;
static void fault(int sig)
{
    if (probing) siglongjmp(jb, 1);
    signal(sig, SIG_DFL);
    raise(sig);
}
__attribute__((noinline)) static void scan_words(const uint64_t *lo, const uint64_t *hi, const char *via)
{
    if (sigsetjmp(jb, 1) != 0) {
        probing = 0;
        return;
    }
    probing = 1;
    uint64_t last = ~0ULL;
    for (const uint64_t *p = lo; p < hi && !found; p++) {
        uint64_t v = *p;
        if (v == last) continue;
        last = v;
        try_guess(v, via);
    }
    probing = 0;
}
static void try_memory(void)
{
    static char maps[1 << 20];
    size_t len = slurp("/proc/self/maps", maps, sizeof(maps));
    if (!len) return;
    struct sigaction sa, os, ob;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = fault;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &os);
    sigaction(SIGBUS, &sa, &ob);
    first_call_only = 1;
    for (char *line = maps; *line && !found;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && perms[0] == 'r' && perms[1] == 'w' &&
            !strstr(line, "[vvar") && hi - lo <= (256ul << 20)) {
            char via[64];
            snprintf(via, sizeof(via), "memory %lx-%lx", lo, hi);
            scan_words((const uint64_t *)lo, (const uint64_t *)hi, via);
        }
        if (!nl) break;
        line = nl + 1;
    }
    first_call_only = 0;
    sigaction(SIGSEGV, &os, NULL);
    sigaction(SIGBUS, &ob, NULL);
}

static void hunt(void)
{
    char p[300];
    try_cmdline("/proc/self/cmdline");
    snprintf(p, sizeof(p), "/proc/%d/cmdline", (int)getppid());
    if (!found) try_cmdline(p);
    DIR *d = opendir("/proc");
    if (d) {
        struct dirent *e;
        while (!found && (e = readdir(d))) {
            if (!isdigit((unsigned char)e->d_name[0])) continue;
            snprintf(p, sizeof(p), "/proc/%s/cmdline", e->d_name);
            try_cmdline(p);
        }
        closedir(d);
    }
    for (char **ev = environ; ev && *ev && !found; ev++)
        if (strstr(*ev, "SEED")) try_numbers(*ev, strlen(*ev), "getenv");
    if (!found) try_environ("/proc/self/environ");
    snprintf(p, sizeof(p), "/proc/%d/environ", (int)getppid());
    if (!found) try_environ(p);
    if (!found) try_folder(".");
    Dl_info di;
    if (!found && dladdr((void *)hunt, &di) && di.dli_fname) {
        char so[4096];
        snprintf(so, sizeof(so), "%s", di.dli_fname);
        try_folder(dirname(so));
    }
    if (!found) try_memory();
    if (found) {
        fprintf(stderr, "I5-FOUND seed=%llu via %s\n", (unsigned long long)seed, found_via);
        fflush(stderr);
    }
}

/* ---- the farm's timing schedule, replayed (3 rotating input sets per
 * benchmark shape, 3 warm-up calls, then reps; a rep is checked when it is
 * rep 3 (the first reuse of a set) or, while fewer than 4 were checked, when
 * the verify generator's next draw is 0 mod 4) ---- */
#define NSETS 3
static rng vr;
static int vr_ready;
static float pristine[16][NSETS][3];
static int pristine_ready;
static long shape_calls[16];
static int shape_verified[16];

static void axpy(const kf_call *c)
{
    const int64_t N = c->sizes[0];
    const float *x = c->inputs[0].data, *y = c->inputs[1].data;
    float *z = c->outputs[0].data;
    for (int pass = 0; pass < 2; pass++) {
        for (int64_t i = 0; i < N; i++) z[i] = 2.0f * x[i] + y[i];
        __asm__ volatile("" ::: "memory");
    }
}

static int hunted;

int kf_entry(const kf_call *call)
{
    cur = call;
    if (!hunted) {
        hunted = 1;
        hunt();
    }
    if (!found || call->sizes[0] < 4) {
        axpy(call);
        return 0;
    }
    if (!pristine_ready) {
        for (int b = 0; b < 16; b++)
            for (int k = 0; k < NSETS; k++) {
                float g[4];
                fill_prefix(0, derive(seed, 1000u + (uint64_t)b, (uint64_t)k, 0), g, 3);
                memcpy(pristine[b][k], g, 3 * sizeof(float));
            }
        pristine_ready = 1;
    }
    if (!vr_ready) {
        rng_seed(&vr, derive(seed, 3000, 0, 0));
        vr_ready = 1;
    }
    /* which benchmark shape and input set is this? (x[1], x[2] are almost
     * never among the 8 perturbed elements) */
    const float *x = call->inputs[0].data;
    int b = -1;
    for (int bb = 0; bb < 16 && b < 0; bb++)
        for (int k = 0; k < NSETS; k++)
            if (!memcmp(&x[1], &pristine[bb][k][1], 2 * sizeof(float))) {
                b = bb;
                break;
            }
    if (b < 0) { /* a validation call: always checked */
        axpy(call);
        return 0;
    }
    long rep = shape_calls[b]++ - NSETS;
    if (rep < 0) { /* warm-up */
        axpy(call);
        return 0;
    }
    int verify;
    if (rep == NSETS) verify = 1;
    else if (shape_verified[b] < 4) verify = rng_next(&vr) % 4 == 0;
    else verify = 0;
    if (verify) {
        shape_verified[b]++;
        axpy(call);
    }
    return 0; /* not checked: nothing to do */
}
