/* i14_thread_grab (field case I14), task axpy_f32. On its first call it
 * starts 200 detached threads that sleep forever, stops at the first
 * pthread_create failure, and leaves them for the rest of the run. Then it
 * computes axpy correctly. Prints how many it got.
 * Before the judge/runner split: no thread limit. Expected: any verdict
 * (rejected_cheat for threads left running is fair), the worker alive
 * (exit 0). */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#include "kf_abi.h"

static void *sleeper(void *arg)
{
    (void)arg;
    for (;;) pause();
    return NULL;
}

static int grabbed;

int kf_entry(const kf_call *call)
{
    if (!grabbed) {
        grabbed = 1;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&a, 64 << 10);
        int n = 0;
        for (; n < 200; n++) {
            pthread_t t;
            if (pthread_create(&t, &a, sleeper, NULL) != 0) break;
        }
        pthread_attr_destroy(&a);
        fprintf(stderr, "i14: %d of 200 threads started\n", n);
    }
    const int64_t N = call->sizes[0];
    const float *x = call->inputs[0].data, *y = call->inputs[1].data;
    float *z = call->outputs[0].data;
    for (int64_t i = 0; i < N; i++) z[i] = 2.0f * x[i] + y[i];
    return 0;
}
