/* late_thread (T2 CPU analog): kf_entry starts a detached thread that fills
 * the output and returns at once, so it would time as nearly free. The
 * judge stops the runner (SIGSTOP) the moment it answers and reads the
 * outputs: unwritten elements (incorrect), or, if the thread got further,
 * outputs that change afterwards / CPU used while not called
 * (rejected_cheat). Expected: incorrect or rejected_cheat. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "kf_abi.h"

static void softmax_rows(const float *x, float *y, int64_t M, int64_t N)
{
    for (int64_t m = 0; m < M; m++) {
        const float *xr = x + m * N;
        float *yr = y + m * N;
        float mx = -INFINITY;
        for (int64_t n = 0; n < N; n++) mx = fmaxf(mx, xr[n]);
        double sum = 0;
        for (int64_t n = 0; n < N; n++) {
            float e = expf(xr[n] - mx);
            yr[n] = e;
            sum += e;
        }
        const float inv = (float)(1.0 / sum);
        for (int64_t n = 0; n < N; n++) yr[n] *= inv;
    }
}

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct { const float *x; float *y; int64_t M, N; } job;

static void *worker(void *arg)
{
    job *j = arg;
    usleep(500);
    softmax_rows(j->x, j->y, j->M, j->N);
    free(j);
    return NULL;
}

int kf_entry(const kf_call *call)
{
    job *j = malloc(sizeof(*j));
    if (!j) return 1;
    j->x = call->inputs[0].data;
    j->y = call->outputs[0].data;
    j->M = call->sizes[0];
    j->N = call->sizes[1];
    pthread_t t;
    if (pthread_create(&t, NULL, worker, j) != 0) return 1;
    pthread_detach(t);
    return 0;
}
