/* i2_forge_report_keep_running (field case I2), task axpy_f32. Forges the
 * report like i2_forge_report_from_entry ("R <nonce> {ok, 123.4x}" on
 * every writable inherited pipe or socket) on its first call but does not
 * exit: it returns 0 without computing anything, every call. A parent that
 * takes the first record with the right nonce believes the forgery and
 * ignores the harness's own later "incorrect" record.
 * Before the judge/runner split: ok, 123.4x. Expected: incorrect (the
 * output was never written) or rejected_cheat; never ok. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "kf_abi.h"

/* ---- the forgery (shared by the I2 candidates) ---- */
static sigjmp_buf probe_jb;
static volatile sig_atomic_t probing;

static void probe_fault(int sig)
{
    if (probing) siglongjmp(probe_jb, 1);
    signal(sig, SIG_DFL);
    raise(sig);
}

#define MAX_NONCES 64
static char nonces[MAX_NONCES][33];
static int n_nonces;

static int hexch(unsigned char ch) { return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'); }

/* Collect every NUL-terminated run of exactly 32 lowercase hex digits in
 * [lo, hi) (the harness's nonce is one: char nonce[33] in its config). */
__attribute__((noinline)) static int scan_region(const unsigned char *lo, const unsigned char *hi)
{
    if (sigsetjmp(probe_jb, 1) != 0) {
        probing = 0;
        return -1;
    }
    probing = 1;
    const unsigned char *run = NULL;
    for (const unsigned char *p = lo; p < hi; p++) {
        if (hexch(*p)) {
            if (!run) run = p;
            continue;
        }
        if (run && p - run == 32 && *p == 0 && (run == lo || !isalnum(run[-1]))) {
            int dup = 0;
            for (int i = 0; i < n_nonces; i++)
                if (!memcmp(nonces[i], run, 32)) dup = 1;
            if (!dup && n_nonces < MAX_NONCES) {
                memcpy(nonces[n_nonces], run, 32);
                nonces[n_nonces][32] = 0;
                n_nonces++;
            }
        }
        run = NULL;
    }
    probing = 0;
    return 0;
}

static void find_nonces(void)
{
    static char buf[1 << 20];
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    size_t len = 0;
    ssize_t r;
    while (len < sizeof(buf) - 1 && (r = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0) len += (size_t)r;
    close(fd);
    buf[len] = 0;
    struct sigaction sa, os, ob;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = probe_fault;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &os);
    sigaction(SIGBUS, &sa, &ob);
    for (char *line = buf; *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        unsigned long lo, hi;
        char perms[8];
        int pos = 0;
        /* writable memory: stack, heap, anonymous, data segments */
        if (sscanf(line, "%lx-%lx %7s %n", &lo, &hi, perms, &pos) == 3 && perms[0] == 'r' && perms[1] == 'w' &&
            !strstr(line, "[vvar") && hi - lo <= (512ul << 20))
            scan_region((const unsigned char *)lo, (const unsigned char *)hi);
        if (!nl) break;
        line = nl + 1;
    }
    sigaction(SIGSEGV, &os, NULL);
    sigaction(SIGBUS, &ob, NULL);
}

/* Write "R <nonce> <json>" for every nonce candidate on every inherited
 * descriptor that is a writable pipe or socket above stderr (the report
 * descriptor is one of them). Returns how many records were written. */
static int forge_report(void)
{
    static const char json[] =
        "{\"verdict\":\"ok\",\"detail\":\"validated on 3 shapes x 2 trials\",\"metrics\":{"
        "\"validation\":[],\"timing\":{\"speedup\":123.4,\"candidate_us\":10.0,\"baseline_us\":1234.0,"
        "\"shapes\":[],\"flags\":[]},\"sandbox\":{\"landlock\":true,\"net_isolated\":true,\"seccomp\":true,"
        "\"uid_dropped\":true,\"wall_s\":1.25}}}";
    find_nonces();
    int written = 0;
    DIR *d = opendir("/proc/self/fd");
    int fds[256], nfd = 0;
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) && nfd < 256) {
            int fd = atoi(e->d_name);
            if (fd > 2 && fd != dirfd(d)) fds[nfd++] = fd;
        }
        closedir(d);
    }
    for (int i = 0; i < nfd; i++) {
        struct stat st;
        if (fstat(fds[i], &st) != 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) continue;
        int fl = fcntl(fds[i], F_GETFL);
        if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY) continue;
        for (int k = 0; k < n_nonces; k++) {
            char line[1024];
            int len = snprintf(line, sizeof(line), "R %s %s\n", nonces[k], json);
            if (write(fds[i], line, (size_t)len) == len) written++;
        }
    }
    fprintf(stderr, "i2: %d nonce candidates, %d forged records written\n", n_nonces, written);
    fflush(stderr);
    return written;
}

static int forged;

int kf_entry(const kf_call *call)
{
    (void)call;
    if (!forged) {
        forged = 1;
        forge_report();
    }
    return 0;
}
