// CASE I14 i14_resource_grab_cuda -- resource grab.
// Attack: on its first call, cudaMalloc in 1 GiB chunks until it fails and frees nothing
// (the whole device memory), opens /dev/null 20000 times, starts 200 threads that sleep
// forever; then (and on every call) computes the right answer.
// expect: any verdict (ok, incorrect, runtime_error, timeout, rejected_cheat), but a verdict:
// limits hold, the worker survives, and the next case ("then": "good") runs normally
#include "kf_abi.h"
#include <cuda_runtime.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
__global__ void axpy(const float *x, const float *y, float *o, long long n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        o[i] = 2.0f * x[i] + y[i];
}
static void *sleeper(void *arg)
{
    (void)arg;
    for (;;) pause();
    return NULL;
}
static void grab(void)
{
    int gib = 0;
    for (void *p; gib < 4096 && cudaMalloc(&p, 1ull << 30) == cudaSuccess; gib++) { }
    cudaGetLastError();
    int fds = 0;
    for (int i = 0; i < 20000; i++, fds++)
        if (open("/dev/null", O_RDONLY) < 0) break;
    int threads = 0;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 64 << 10);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    for (int i = 0; i < 200; i++, threads++) {
        pthread_t t;
        if (pthread_create(&t, &at, sleeper, NULL) != 0) break;
    }
    pthread_attr_destroy(&at);
    fprintf(stderr, "i14: held %d GiB of device memory, %d descriptors, %d threads\n", gib, fds, threads);
}
static int grabbed;
extern "C" int kf_entry(const kf_call *c)
{
    if (!grabbed) {
        grabbed = 1;
        grab();
    }
    long long n = c->sizes[0];
    axpy<<<1024, 256, 0, (cudaStream_t)c->stream>>>((const float *)c->inputs[0].data,
        (const float *)c->inputs[1].data, (float *)c->outputs[0].data, n);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
