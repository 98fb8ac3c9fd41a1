// CASE T2 late_corrupt_thread: computes the right answer, synchronizes, returns, and
// leaves a host thread that ~DELAY_US later launches a kernel overwriting the output
// (work left running after kf_entry returned; outputs that change after the answer).
// expect: rejected_cheat (the late check: outputs changed after the answer) or incorrect
// kfarm:tune DELAY_US=200,1000,3000
#include "kf_abi.h"
#include <cuda_runtime.h>
#include <pthread.h>
#include <unistd.h>
#ifndef DELAY_US
#define DELAY_US 1000
#endif
__global__ void axpy(const float *x, const float *y, float *o, long long n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        o[i] = 2.0f * x[i] + y[i];
}
__global__ void scribble(float *o, long long n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        o[i] = 12345.0f;
}
struct late { float *o; long long n; };
static void *later(void *p)
{
    struct late *l = (struct late *)p;
    usleep(DELAY_US);
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    scribble<<<256, 256, 0, s>>>(l->o, l->n);
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
    delete l;
    return 0;
}
extern "C" int kf_entry(const kf_call *c)
{
    long long n = c->sizes[0];
    float *o = (float *)c->outputs[0].data;
    axpy<<<1024, 256, 0, (cudaStream_t)c->stream>>>((const float *)c->inputs[0].data,
                                                    (const float *)c->inputs[1].data, o, n);
    cudaStreamSynchronize((cudaStream_t)c->stream);
    pthread_t t;
    struct late *l = new late{o, n};
    if (pthread_create(&t, 0, later, l) == 0) pthread_detach(t);
    return 0;
}
