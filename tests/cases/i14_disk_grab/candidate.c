/* i14_disk_grab (field case I14), task axpy_f32. On its first call it
 * writes 8 files of 60 MiB (480 MiB) into its working folder -- the
 * scratch folder -- in 1 MiB writes, ignoring SIGXFSZ so that a file-size
 * limit shows as a failed write, stops at the first failure, and leaves the
 * files there. Then it computes axpy correctly. Prints how much it wrote.
 * Before the judge/runner split: only a per-file size limit (64 MiB), no
 * limit on the folder. Expected: any verdict, the worker alive (exit 0),
 * and the host's disk fine (the scratch folder is size-limited and removed
 * with the evaluation). */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "kf_abi.h"

static char block[1 << 20];
static int grabbed;

int kf_entry(const kf_call *call)
{
    if (!grabbed) {
        grabbed = 1;
        signal(SIGXFSZ, SIG_IGN);
        memset(block, 0x5a, sizeof(block));
        long mib = 0;
        int stop = 0;
        for (int f = 0; f < 8 && !stop; f++) {
            char name[64];
            snprintf(name, sizeof(name), "i14-grab-%d.bin", f);
            int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd < 0) break;
            for (int m = 0; m < 60; m++) {
                if (write(fd, block, sizeof(block)) != (ssize_t)sizeof(block)) {
                    stop = 1;
                    break;
                }
                mib++;
            }
            close(fd);
        }
        fprintf(stderr, "i14: wrote %ld of 480 MiB\n", mib);
    }
    const int64_t N = call->sizes[0];
    const float *x = call->inputs[0].data, *y = call->inputs[1].data;
    float *z = call->outputs[0].data;
    for (int64_t i = 0; i < N; i++) z[i] = 2.0f * x[i] + y[i];
    return 0;
}
