/*
 * main.c -- kfarm-worker entry point (git-style subcommands).
 *
 *     kfarm-worker run --coordinator ADDR [options]    the networked daemon (daemon.c)
 *     kfarm-worker eval TASK_DIR CANDIDATE [options]   one local evaluation, no
 *                                                      coordinator or database (cmd_eval.c)
 *     kfarm-worker devices [--gpu N | --cpu]           what this worker would register
 *     kfarm-worker check-task TASK_DIR [--seed FILE]   whether a task can be served (cmd_check_task.c)
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <jansson.h>

#include "daemon.h"
#include "device.h"

int kf_worker_cmd_eval(int argc, char **argv);
int kf_worker_cmd_check_task(int argc, char **argv);
int kf_daemon_read_env(void); /* daemon.c: reads the worker credential before the environment is scrubbed */

/* Whether an environment variable name looks like a secret: it contains
 * KEY, TOKEN, SECRET, PASSWORD, PASSWD or CREDENTIAL (any case), starts
 * with KFARM_FLEET, AWS_ or PG (libpq), or is KFARM_DB, DATABASE_URL or
 * SSH_AUTH_SOCK. */
static int secret_name(const char *name, size_t len)
{
    static const char *const parts[] = {"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"};
    static const char *const prefixes[] = {"KFARM_FLEET", "KFARM_WORKER_CRED", "AWS_", "PG"};
    static const char *const exact[] = {"KFARM_DB", "DATABASE_URL", "SSH_AUTH_SOCK"};
    char up[256];
    if (len >= sizeof(up)) return 1; /* absurdly long: drop it */
    for (size_t i = 0; i < len; i++) up[i] = (char)toupper((unsigned char)name[i]);
    up[len] = 0;
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
        if (strstr(up, parts[i])) return 1;
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
        if (!strncmp(name, prefixes[i], strlen(prefixes[i]))) return 1;
    for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++)
        if (!strcmp(up, exact[i])) return 1;
    return 0;
}

/* Remove secret-looking variables (secret_name) from this process's
 * environment, after whatever needs them has read them. The bytes are
 * zeroed in place first: /proc/<pid>/environ shows the original block,
 * which unsetenv alone leaves intact. */
static void scrub_secrets(void)
{
    for (;;) {
        char *hit = NULL;
        size_t nlen = 0;
        for (char **e = environ; e && *e; e++) {
            const char *eq = strchr(*e, '=');
            size_t l = eq ? (size_t)(eq - *e) : strlen(*e);
            if (l > 0 && secret_name(*e, l)) {
                hit = *e;
                nlen = l;
                break;
            }
        }
        if (!hit) return;
        char name[256];
        size_t total = strlen(hit);
        snprintf(name, sizeof(name), "%.*s", (int)(nlen < sizeof(name) ? nlen : sizeof(name) - 1), hit);
        if (total > nlen) memset(hit + nlen + 1, 0, total - nlen - 1); /* the value */
        if (nlen >= sizeof(name) || unsetenv(name) != 0) {
            /* cannot name it to unsetenv: drop the entry by hand */
            char **e = environ;
            while (*e && *e != hit) e++;
            for (; *e; e++) e[0] = e[1];
        }
        memset(hit, 0, total); /* the name too: no longer referenced */
    }
}

/* `kfarm-worker devices [--gpu N | --cpu]`: print the device and routing
 * classes this worker would register, as JSON. */
static int cmd_devices(int argc, char **argv)
{
    int gpu = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--gpu") && i + 1 < argc) gpu = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cpu")) gpu = -1;
        else {
            fprintf(stderr, "usage: kfarm-worker devices [--gpu N | --cpu]\n");
            return strcmp(argv[i], "--help") ? 2 : 0;
        }
    }
    kf_device d;
    char classes[8][128], err[256];
    int n = 0;
    if (kf_device_discover(&d, gpu, classes, 8, &n, err, sizeof(err)) < 0) {
        fprintf(stderr, "kfarm-worker: device discovery failed: %s\n", err);
        return 1;
    }
    json_t *cl = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(cl, json_string(classes[i]));
    json_t *o = json_pack("{s:s,s:s,s:s,s:I,s:I,s:f,s:f,s:I,s:s,s:f,s:f,s:o}", "backend", d.backend, "name",
                          d.name, "arch", d.arch, "sm_count", (json_int_t)d.sm_count, "memory_bytes",
                          (json_int_t)d.memory_bytes, "bandwidth_gbs", d.bandwidth_gbs, "clock_mhz",
                          d.clock_mhz, "l2_bytes", (json_int_t)d.l2_bytes, "features", d.features,
                          "peak_gflops_f32", d.peak_gflops_f32, "peak_gflops_bf16", d.peak_gflops_bf16,
                          "classes", cl);
    if (!o) {
        fprintf(stderr, "kfarm-worker: cannot encode device (invalid UTF-8 in a name?)\n");
        return 1;
    }
    char *s = json_dumps(o, JSON_INDENT(2));
    puts(s);
    free(s);
    json_decref(o);
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: kfarm-worker <command> [options]\n"
               "  run   --coordinator ADDR ...       serve jobs from a coordinator\n"
               "  eval  TASK_DIR CANDIDATE [...]     evaluate one candidate locally, print JSON\n"
               "  devices [--gpu N | --cpu]         show the device and routing classes to register\n"
               "  check-task TASK_DIR [--seed FILE]  refuse a task whose baseline or seed fails, or that\n"
               "                                     does not fit this machine (exit 2 with the reason)\n"
               "Run 'kfarm-worker <command> --help' for the options of a command.\n");
}

int main(int argc, char **argv)
{
    /* Secrets: read what the worker needs from the environment, then remove
     * every secret-looking variable, and make this process non-dumpable so
     * that a same-uid process (a candidate) cannot read /proc/<worker>/environ
     * or /proc/<worker>/mem, nor ptrace it. */
    if (argc >= 2 && !strcmp(argv[1], "run")) kf_daemon_read_env();
    scrub_secrets();
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);

    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "eval")) return kf_worker_cmd_eval(argc - 1, argv + 1);
    if (!strcmp(argv[1], "run")) return kf_daemon_main(argc - 1, argv + 1);
    if (!strcmp(argv[1], "devices")) return cmd_devices(argc - 1, argv + 1);
    if (!strcmp(argv[1], "check-task")) return kf_worker_cmd_check_task(argc - 1, argv + 1);
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "kfarm-worker: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
