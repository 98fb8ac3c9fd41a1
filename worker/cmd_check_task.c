/*
 * cmd_check_task.c -- `kfarm-worker check-task TASK_DIR [--seed FILE] [--arch sm_XY]`
 *
 * Decides whether a task can be served before any campaign spends time on it
 * (issue 7, "tasks checked on load"): the spec loads; the largest shape fits
 * this machine's memory (three runner arenas of it plus the judge's own
 * copies); and, through the same judge as every evaluation,
 * the task's own baseline and its seed candidate each pass validation against
 * the reference -- which also proves the reference runs here and that its
 * output depends on its inputs (a degenerate reference is refused).
 *
 * A cuda task on a machine without a GPU is checked as far as the machine
 * allows: reference, baseline and seed must build for --arch (default sm_80)
 * with nvcc; without nvcc the build check is skipped and said so.
 *
 * Exit status: 0 and "task ok: ..." on stdout; 2 and one line "task refused:
 * <reason>" on stderr; 2 on bad usage. `kfarm campaign create` runs this.
 */
#include "kf_eval.h"
#include "kf_task.h"
#include "kf_util.h"
#include "kf_verdict.h"
#include "kf_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

int kf_worker_cmd_check_task(int argc, char **argv);

/* Bytes an evaluation needs for the largest shape, roughly: three runner
 * arenas (shared with the judge), the judge's host copies of inputs and
 * outputs, and headroom. */
static double task_bytes(const kf_task *t)
{
    double best = 0;
    for (int pass = 0; pass < 2; pass++) {
        int n = pass ? t->n_benchmark : t->n_validation;
        const kf_shape *sh = pass ? t->benchmark : t->validation;
        for (int s = 0; s < n; s++) {
            double b = 0;
            for (int io = 0; io < 2; io++)
                for (int i = 0; i < (io ? t->n_outputs : t->n_inputs); i++) {
                    const kf_tensor_spec *ts = io ? &t->outputs[i] : &t->inputs[i];
                    int64_t shape[KF_MAX_DIMS];
                    int64_t cnt = kf_task_shape(t, ts, sh[s].sizes, shape);
                    if (cnt > 0) b += (double)cnt * (double)kf_dtype_size(ts->dtype);
                }
            if (b > best) best = b;
        }
    }
    return best * 6;
}

/* MemAvailable from /proc/meminfo, bytes; 0 if unknown. */
static double mem_available(void)
{
    char *m = kf_util_read_file("/proc/meminfo", NULL, 1 << 16);
    double v = 0;
    const char *p = m ? strstr(m, "MemAvailable:") : NULL;
    if (p) v = strtod(p + 13, NULL) * 1024.0;
    free(m);
    return v;
}

static int refuse(const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "task refused: ");
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    return 2;
}

/* Evaluate src as a candidate of the task (quick); 0 when ok, else 2 with the reason. */
static int check_one(const char *task_dir, const char *src, const char *what, const char *arch, int compile_only)
{
    kf_eval_req req;
    memset(&req, 0, sizeof(req));
    req.task_dir = task_dir;
    req.source_path = src;
    req.quick = 1;
    req.compile_only = compile_only;
    req.arch = arch;
    req.cache_dir = getenv("KFARM_CACHE_DIR");
    kf_eval_res res;
    kf_eval_run(&req, &res);
    int rc = 0;
    if (res.verdict != KF_OK) {
        char line[1400];
        snprintf(line, sizeof(line), "%s: %s", kf_verdict_name(res.verdict), res.detail);
        rc = refuse("the %s does not pass: %s", what, line);
    } else {
        printf("  %s: %s\n", what, res.detail);
    }
    kf_eval_res_free(&res);
    return rc;
}

int kf_worker_cmd_check_task(int argc, char **argv)
{
    const char *dir = NULL, *seed = NULL, *arch = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = argv[++i];
        else if (!strcmp(argv[i], "--arch") && i + 1 < argc) arch = argv[++i];
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: kfarm-worker check-task TASK_DIR [--seed FILE] [--arch sm_XY]\n"
                   "Refuses a task whose largest shape does not fit this machine, or whose baseline or seed\n"
                   "does not pass validation against its reference (exit 2, one line on stderr).\n");
            return 0;
        } else if (argv[i][0] == '-' || dir) {
            fprintf(stderr, "kfarm-worker check-task: unexpected argument '%s'\n", argv[i]);
            return 2;
        } else {
            dir = argv[i];
        }
    }
    if (!dir) {
        fprintf(stderr, "kfarm-worker check-task: missing TASK_DIR\n");
        return 2;
    }
    kf_task t;
    char err[512];
    if (kf_task_load(dir, &t, err, sizeof(err)) != 0) return refuse("%s%s", err, "");
    char base[4096], sd[4096];
    snprintf(base, sizeof(base), "%s/%s", dir, t.baseline);
    snprintf(sd, sizeof(sd), "%s/%s", dir, seed ? "" : t.seed);
    if (seed) snprintf(sd, sizeof(sd), "%s", seed);
    int cuda = !strcmp(t.backend, "cuda");
    double need = task_bytes(&t), have = mem_available();
    int rc = 0;
    if (!cuda && have > 0 && need > have) {
        char a[64], b[64];
        snprintf(a, sizeof(a), "%.1f GiB", need / (1u << 30));
        snprintf(b, sizeof(b), "%.1f GiB", have / (1u << 30));
        rc = refuse("its largest shape needs about %s and this machine has %s available", a, b);
    }
    int compile_only = 0;
#ifdef KFARM_HAVE_CUDA
    if (cuda && !rc) {
        kf_cuda_gpu g[KF_CUDA_MAX_GPUS];
        if (kf_cuda_discover(g, KF_CUDA_MAX_GPUS, err, sizeof(err)) <= 0) {
            compile_only = 1;
            if (!arch) arch = "sm_80";
        } else if (need > (double)g[0].memory_bytes) {
            rc = refuse("its largest shape needs more than the %s's %s of memory", g[0].name, "device");
        }
    }
#else
    if (cuda && !rc) {
        printf("task %s: cuda backend not built here; not checked\n", t.name);
        kf_task_free(&t);
        return 0;
    }
#endif
    if (!rc) {
        printf("task %s (%s)%s:\n", t.name, t.backend, compile_only ? ", no GPU here: builds only" : "");
        rc = check_one(dir, base, "baseline", arch, compile_only);
        if (!rc && (seed || t.seed[0])) rc = check_one(dir, sd, "seed", arch, compile_only);
    }
    if (!rc) printf("task ok: %s\n", t.name);
    kf_task_free(&t);
    return rc;
}
