/* cuda_confine_probe -- which confinement step stops cuInit on this host?
 * Diagnostic only (tools/dev): forks one child per variant, confines it with
 * kf_confine_apply, then calls cudaSetDevice + cudaFree(0) and prints the
 * result. With argv[1] = "stop N", variant N stops itself after confinement
 * (SIGSTOP) so that strace can attach before it continues. */
#define _GNU_SOURCE
#include "confine.h"
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int variant(int v, int stop)
{
    kf_confine_spec s;
    memset(&s, 0, sizeof(s));
    s.profile = KF_CONFINE_RUNNER_CUDA;
    s.nofile = 256;
    s.nproc = 4096;
    if (v == 3 || v == 4) {
        s.read_paths[0] = "/";
        s.write_paths[0] = "/";
    } else {
        s.read_paths[0] = NULL;
        kf_confine_default_reads(&s);
        int n = 0;
        while (s.write_paths[n]) n++;
        s.write_paths[n++] = "/proc/self/task";
        s.write_paths[n] = NULL;
    }
    s.drop_uid = (v == 1 || v == 3);
    kf_confine_facts f;
    char err[256] = "";
    if (v != 5 && kf_confine_apply(&s, &f, err, sizeof(err)) != 0) {
        printf("variant %d: confine failed: %s\n", v, err);
        return 2;
    }
    if (v == 5 && (setgid(65534) || setuid(65534))) printf("variant 5: setuid failed\n");
    if (stop) raise(SIGSTOP);
    cudaError_t e = cudaSetDevice(0);
    if (e == cudaSuccess) e = cudaFree(0);
    printf("variant %d (uid %d): %s %s\n", v, (int)geteuid(), cudaGetErrorName(e), cudaGetErrorString(e));
    fflush(stdout);
    return e == cudaSuccess ? 0 : 1;
}

int main(int argc, char **argv)
{
    int stopv = argc > 2 && !strcmp(argv[1], "stop") ? atoi(argv[2]) : 0;
    int only = argc > 2 && !strcmp(argv[1], "only") ? atoi(argv[2]) : 0;
    for (int v = 1; v <= 5; v++) {
        if (stopv && v != stopv) continue;
        if (only && v != only) continue;
        fflush(stdout);
        pid_t p = fork();
        if (p == 0) {
            if (stopv) freopen(argc > 3 ? argv[3] : "/dev/null", "w", stdout);
            _exit(variant(v, stopv == v));
        }
        if (stopv) {
            printf("%d\n", (int)p);
            fflush(stdout);
            return 0;
        }
        int st;
        waitpid(p, &st, 0);
    }
    return 0;
}
