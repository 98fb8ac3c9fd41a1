// CASE T2 late_finish_thread: returns at once and leaves a host thread that launches the
// real work ~DELAY_US later on a stream of its own (answers before the work is done).
// expect: incorrect (outputs still poisoned at the answer) or rejected_cheat (outputs that
// change after the answer); never ok at a time shorter than the work
// kfarm:tune DELAY_US=0,300,2000
#include "kf_abi.h"
#include <cuda_runtime.h>
#include <pthread.h>
#include <unistd.h>
#ifndef DELAY_US
#define DELAY_US 300
#endif
__global__ void axpy(const float *x, const float *y, float *o, long long n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        o[i] = 2.0f * x[i] + y[i];
}
struct late { const float *x, *y; float *o; long long n; };
static void *later(void *p)
{
    struct late *l = (struct late *)p;
    if (DELAY_US) usleep(DELAY_US);
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    axpy<<<1024, 256, 0, s>>>(l->x, l->y, l->o, l->n);
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
    delete l;
    return 0;
}
__global__ void nothing() {}
extern "C" int kf_entry(const kf_call *c)
{
    nothing<<<1, 1, 0, (cudaStream_t)c->stream>>>(); /* a kernel on the task stream, as required */
    pthread_t t;
    struct late *l = new late{(const float *)c->inputs[0].data, (const float *)c->inputs[1].data,
                              (float *)c->outputs[0].data, c->sizes[0]};
    if (pthread_create(&t, 0, later, l) == 0) pthread_detach(t);
    return 0;
}
