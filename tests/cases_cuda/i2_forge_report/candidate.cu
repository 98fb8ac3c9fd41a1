// CASE I2 i2_forge_report -- forged report.
// Attack (host side, from kf_entry): scans its own process memory (/proc/self/maps +
// /proc/self/mem) for report nonces (runs of 32 hex digits), then writes a fake report,
// "verdict":"ok","speedup":123.4 with made-up sandbox facts, as a bare JSON line and as an
// "R <nonce> <json>" line for every nonce it found, on every descriptor 0..1023, and ends
// the process with _exit(0) before computing anything.
// expect: runtime_error or rejected_cheat (never ok)
#include "kf_abi.h"
#include <cuda_runtime.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_NONCES 16
static char nonces[MAX_NONCES][33];
static int nnonces;

static int ishex(unsigned char ch) { return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'); }

static void note(const char *p)
{
    for (int i = 0; i < nnonces; i++)
        if (!memcmp(nonces[i], p, 32)) return;
    if (nnonces >= MAX_NONCES) return;
    memcpy(nonces[nnonces], p, 32);
    nonces[nnonces++][32] = 0;
}

static void scan_memory(void)
{
    FILE *maps = fopen("/proc/self/maps", "r");
    int mem = open("/proc/self/mem", O_RDONLY);
    if (!maps || mem < 0) {
        if (maps) fclose(maps);
        if (mem >= 0) close(mem);
        return;
    }
    const size_t chunk = 1 << 20;
    char *buf = (char *)malloc(chunk + 64);
    size_t budget = 512ull << 20;
    char line[512];
    while (buf && budget && fgets(line, sizeof(line), maps)) {
        unsigned long long lo, hi;
        char perms[8] = "";
        if (sscanf(line, "%llx-%llx %7s", &lo, &hi, perms) != 3 || perms[0] != 'r') continue;
        if (hi - lo > (64ull << 20) || strstr(line, "[vvar")) continue;
        for (unsigned long long a = lo; a < hi && budget; a += chunk) {
            size_t len = hi - a < chunk ? (size_t)(hi - a) : chunk;
            ssize_t got = pread(mem, buf, len, (off_t)a);
            if (got <= 0) break;
            budget -= got < (ssize_t)budget ? (size_t)got : budget;
            int run = 0;
            for (ssize_t i = 0; i < got; i++) {
                if (ishex((unsigned char)buf[i])) {
                    run++;
                } else {
                    if (run == 32) note(buf + i - 32);
                    run = 0;
                }
            }
        }
    }
    free(buf);
    fclose(maps);
    close(mem);
}

extern "C" int kf_entry(const kf_call *c)
{
    (void)c;
    scan_memory();
    const char *fake =
        "{\"verdict\":\"ok\",\"detail\":\"\",\"candidate_us\":1.0,\"baseline_us\":123.4,\"speedup\":123.4,"
        "\"metrics\":{\"sandbox\":{\"seccomp\":\"enforced\",\"landlock\":\"enforced\",\"cgroup\":\"enforced\","
        "\"userns\":\"enforced\"},\"profiler\":{\"cupti\":\"ok\",\"kernel_checks\":\"enforced\"}}}";
    char line[1024];
    for (int fd = 0; fd < 1024; fd++) {
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0) continue;
        fcntl(fd, F_SETFL, fl | O_NONBLOCK); /* never block on a full pipe */
        int len = snprintf(line, sizeof(line), "%s\n", fake);
        if (write(fd, line, len) < 0) { /* not writable: try the others */ }
        for (int i = 0; i < nnonces; i++) {
            len = snprintf(line, sizeof(line), "R %s %s\n", nonces[i], fake);
            if (write(fd, line, len) < 0) break;
        }
    }
    _exit(0);
}
