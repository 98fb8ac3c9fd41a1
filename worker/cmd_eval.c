/*
 * cmd_eval.c -- `kfarm-worker eval`: one local evaluation, no coordinator.
 *
 *   kfarm-worker eval TASK_DIR CANDIDATE [--define NAME=V]... [--seed N]
 *                     [--timeout S] [--quick] [--json] [--work-dir DIR]
 *                     [--cache-dir DIR]
 *
 * Runs kf_eval_run (the same code path as the networked worker) and prints
 * the result. With --json: one JSON object {"verdict", "detail",
 * "candidate_us", "baseline_us", "speedup", "metrics", "compile_log"} on
 * stdout. Without: a `verdict: detail` line, the speedup line when timed,
 * then the metrics JSON, indented.
 *
 *   kfarm-worker eval --each FILE [options]
 *
 * evaluates every line of FILE ("-": standard input, read as lines come):
 * "TASK_DIR CANDIDATE [NAME=VALUE]... [--seed=N] [--timeout=S]" (blank
 * lines and "#" comments skipped; the options apply to that line only), in one process with one serving judge (judge.h: the device
 * context and the task's reference and baseline runners are kept between
 * evaluations of a task; --judge-per-eval starts a judge per evaluation
 * instead). Prints one line per evaluation as it ends: with --json the
 * object above on one line plus "task", "candidate", "defines"; without, "TASK
 * CANDIDATE: verdict: detail". A line that cannot be evaluated (bad path,
 * refused task) prints a verdict of "usage" / "task_refused" and the run
 * goes on. Exit status 0, or 2 for bad usage or an unreadable FILE.
 *
 * Exit status: 0 whenever a verdict was produced (whatever it is: a failing
 * candidate is a successful evaluation); 2 with a one-line reason on stderr
 * for bad usage (also: a task directory that does not load, a candidate that
 * is not a readable file, and a task the judge proved broken -- blame "task":
 * a reference whose output does not depend on its inputs, that fails, or that
 * is too slow for this machine: no verdict is printed, it is not the
 * candidate's).
 */
#include "device.h"
#include "judge.h"
#include "kf_eval.h"
#include "kf_task.h"
#include "kf_tune.h"
#include "kf_verdict.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

int kf_worker_cmd_eval(int argc, char **argv);

/* The result as one JSON object (see above). New reference. */
static json_t *result_json(const kf_eval_res *res, json_t *metrics)
{
    json_t *o = json_object();
    json_object_set_new(o, "verdict", json_string(kf_verdict_name(res->verdict)));
    json_object_set_new(o, "detail", json_string(res->detail));
    json_object_set_new(o, "candidate_us", json_real(res->candidate_us));
    json_object_set_new(o, "baseline_us", json_real(res->baseline_us));
    json_object_set_new(o, "speedup", json_real(res->speedup));
    json_object_set(o, "metrics", metrics);
    json_object_set_new(o, "compile_log", json_string(res->compile_log ? res->compile_log : ""));
    return o;
}

/* Check one (task, candidate) pair before evaluating it: 0, or -1 with why. */
static int check_paths(const char *task_dir, const char *cand, char *why, size_t cap)
{
    kf_task task;
    char terr[512];
    if (kf_task_load(task_dir, &task, terr, sizeof(terr)) != 0) {
        snprintf(why, cap, "task %s: %s", task_dir, terr);
        return -1;
    }
    kf_task_free(&task);
    struct stat st;
    if (stat(cand, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(why, cap, "candidate %s: %s", cand, stat(cand, &st) != 0 ? strerror(errno) : "not a regular file");
        return -1;
    }
    return 0;
}

/* Parse "NAME=VALUE" into the request's defines (text is kept). 0 or -1 with why. */
static int add_define(kf_eval_req *req, char *text, const char **why)
{
    if (req->n_defines >= KF_EVAL_MAX_DEFINES) return *why = "too many --define", -1;
    char *eq = strchr(text, '=');
    if (!eq) return *why = "--define needs NAME=VALUE", -1;
    *eq = 0;
    if (!kf_tune_valid_name(text)) return *why = "--define: NAME must be a C identifier", -1;
    if (!kf_tune_valid_value(eq + 1)) return *why = "--define: VALUE may hold only letters, digits, _ . - +", -1;
    req->define_names[req->n_defines] = text;
    req->define_values[req->n_defines] = eq + 1;
    req->n_defines++;
    return 0;
}

/* --each: one evaluation per line of f, one serving judge for all. */
static int run_each(FILE *f, const kf_eval_req *base, int json_out, int per_eval)
{
    kf_judge_srv *srv = NULL;
    char err[512];
    if (!per_eval && !(srv = kf_judge_srv_new(base->work_dir, err, sizeof(err))))
        fprintf(stderr, "kfarm-worker eval: no serving judge (%s): one judge per evaluation\n", err);
    /* the GPU's sm_XY once, not per evaluation (as kfarm-worker run does) */
    kf_device dev;
    char classes[8][128];
    int ncls = 0;
    const char *arch = base->arch;
    if (!arch && kf_device_discover(&dev, base->gpu_index, classes, 8, &ncls, err, sizeof(err)) == 0 &&
        !strcmp(dev.backend, "cuda") && dev.arch[0])
        arch = dev.arch;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) >= 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        char *tok[2 + KF_EVAL_MAX_DEFINES + 1];
        int nt = 0;
        for (char *p = strtok(line, " \t"); p && nt < (int)(sizeof(tok) / sizeof(tok[0])); p = strtok(NULL, " \t"))
            tok[nt++] = p;
        if (nt == 0 || tok[0][0] == '#') continue;
        kf_eval_req req = *base;
        req.judge_srv = srv;
        req.arch = arch;
        const char *why = NULL;
        char pwhy[1024] = "";
        json_t *defs = json_object();
        for (int i = 2; i < nt && !why; i++) {
            char *end = NULL;
            if (!strncmp(tok[i], "--seed=", 7)) {
                errno = 0;
                req.seed = strtoull(tok[i] + 7, &end, 0);
                if (errno || *end || end == tok[i] + 7) why = "--seed=N: not a number";
                continue;
            }
            if (!strncmp(tok[i], "--timeout=", 10)) {
                req.timeout_s = strtod(tok[i] + 10, &end);
                if (*end || end == tok[i] + 10 || !(req.timeout_s > 0)) why = "--timeout=S: positive seconds";
                continue;
            }
            if (tok[i][0] == '-') {
                why = "unknown option on the line (--seed=N and --timeout=S are allowed)";
                continue;
            }
            char *eq = strchr(tok[i], '=');
            if (eq) json_object_set_new(defs, tok[i], json_string(eq + 1)); /* before the split */
            add_define(&req, tok[i], &why);
        }
        if (!why && nt < 2) why = "need TASK_DIR CANDIDATE [NAME=VALUE]...";
        if (!why && check_paths(tok[0], tok[1], pwhy, sizeof(pwhy)) != 0) why = pwhy;
        json_t *o;
        if (why) {
            o = json_pack("{s:s,s:s}", "verdict", "usage", "detail", why);
        } else {
            req.task_dir = tok[0];
            req.source_path = tok[1];
            kf_eval_res res;
            kf_eval_run(&req, &res);
            json_t *metrics = json_loads(res.metrics_json ? res.metrics_json : "{}", 0, NULL);
            if (!metrics) metrics = json_object();
            o = result_json(&res, metrics);
            const char *blame = json_string_value(json_object_get(metrics, "blame"));
            if (res.verdict == KF_INFRA_ERROR && blame && !strcmp(blame, "task"))
                json_object_set_new(o, "verdict", json_string("task_refused"));
            json_decref(metrics);
            kf_eval_res_free(&res);
        }
        json_object_set_new(o, "task", json_string(nt > 0 ? tok[0] : ""));
        json_object_set_new(o, "candidate", json_string(nt > 1 ? tok[1] : ""));
        json_object_set_new(o, "defines", defs);
        if (json_out) {
            char *txt = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6));
            if (txt) puts(txt);
            free(txt);
        } else {
            printf("%s %s: %s: %s\n", nt > 0 ? tok[0] : "", nt > 1 ? tok[1] : "",
                   json_string_value(json_object_get(o, "verdict")), json_string_value(json_object_get(o, "detail")));
        }
        fflush(stdout);
        json_decref(o);
    }
    free(line);
    kf_judge_srv_free(srv);
    return 0;
}

static int usage(const char *why)
{
    fprintf(stderr, "kfarm-worker eval: %s (usage: kfarm-worker eval TASK_DIR CANDIDATE [--define NAME=V]... "
                    "[--seed N] [--timeout S] [--quick] [--json] [--work-dir DIR] [--cache-dir DIR])\n", why);
    return 2;
}

int kf_worker_cmd_eval(int argc, char **argv)
{
    kf_eval_req req;
    memset(&req, 0, sizeof(req));
    req.seed = 0; /* a random secret unless --seed is given */
    req.cache_dir = getenv("KFARM_CACHE_DIR");
    int json_out = 0, npos = 0, per_eval = 0;
    const char *each = NULL;
    const char *pos[2] = {NULL, NULL};
    /* argv[0] is "eval" */
    char defbuf[KF_EVAL_MAX_DEFINES][160];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: kfarm-worker eval TASK_DIR CANDIDATE [options]\n"
                   "  --define NAME=V   tunable value, compiled as -DNAME=V (repeatable)\n"
                   "  --seed N          secret input seed, for a reproducible run (default: random)\n"
                   "  --timeout S       wall-clock limit of the evaluation child (default: the task's)\n"
                   "  --quick           fewer timing repetitions\n"
                   "  --compile-only    build reference, baseline and candidate into the cache and stop\n"
                   "  --json            print one JSON object (verdict, detail, timings, metrics, compile log)\n"
                   "  --work-dir DIR    scratch root (default $TMPDIR or /tmp)\n"
                   "  --cache-dir DIR   compile cache (default $KFARM_CACHE_DIR; none if unset)\n"
                   "  --each FILE       evaluate every line \"TASK_DIR CANDIDATE [NAME=V]...\" of FILE\n"
                   "                    (- = standard input) with one serving judge; one result line each\n"
                   "  --judge-per-eval  with --each: a new judge process per evaluation\n"
                   "Exit status: 0 when a verdict was produced, 2 on bad usage, a bad task/candidate path,\n"
                   "or a task the judge refused (degenerate, failing or too slow reference).\n");
            return 0;
        } else if (!strcmp(a, "--each")) {
            if (++i >= argc) return usage("--each needs a file (- for standard input)");
            each = argv[i];
        } else if (!strcmp(a, "--judge-per-eval")) {
            per_eval = 1;
        } else if (!strcmp(a, "--json")) {
            json_out = 1;
        } else if (!strcmp(a, "--quick")) {
            req.quick = 1;
        } else if (!strcmp(a, "--compile-only")) {
            req.compile_only = 1;
        } else if (!strcmp(a, "--define") || !strcmp(a, "-D")) {
            if (++i >= argc) return usage("--define needs NAME=VALUE");
            if (req.n_defines >= KF_EVAL_MAX_DEFINES) return usage("too many --define");
            if (strlen(argv[i]) >= sizeof(defbuf[0])) return usage("--define too long");
            char *d = defbuf[req.n_defines];
            snprintf(d, sizeof(defbuf[0]), "%s", argv[i]);
            const char *why;
            if (add_define(&req, d, &why) != 0) return usage(why);
        } else if (!strcmp(a, "--seed")) {
            if (++i >= argc) return usage("--seed needs a number");
            char *end;
            errno = 0;
            unsigned long long v = strtoull(argv[i], &end, 0);
            if (errno || *end || end == argv[i]) return usage("--seed: not a number");
            req.seed = v;
        } else if (!strcmp(a, "--timeout")) {
            if (++i >= argc) return usage("--timeout needs seconds");
            char *end;
            double v = strtod(argv[i], &end);
            if (*end || end == argv[i] || !(v > 0)) return usage("--timeout: positive number of seconds");
            req.timeout_s = v;
        } else if (!strcmp(a, "--work-dir")) {
            if (++i >= argc) return usage("--work-dir needs a folder");
            req.work_dir = argv[i];
        } else if (!strcmp(a, "--cache-dir")) {
            if (++i >= argc) return usage("--cache-dir needs a folder");
            req.cache_dir = argv[i];
        } else if (!strcmp(a, "--arch")) { /* cuda: build for this arch (sm_90a) instead of the device's */
            if (++i >= argc) return usage("--arch needs sm_XY");
            req.arch = argv[i];
        } else if (!strcmp(a, "--gpu")) { /* cuda: device index */
            if (++i >= argc) return usage("--gpu needs an index");
            req.gpu_index = atoi(argv[i]);
        } else if (a[0] == '-' && a[1]) {
            char why[256];
            snprintf(why, sizeof(why), "unknown option %s", a);
            return usage(why);
        } else {
            if (npos >= 2) return usage("too many arguments");
            pos[npos++] = a;
        }
    }
    if (each) {
        if (npos || req.n_defines) return usage("--each takes no TASK_DIR, CANDIDATE or --define (they are its lines)");
        FILE *f = strcmp(each, "-") ? fopen(each, "r") : stdin;
        if (!f) {
            fprintf(stderr, "kfarm-worker eval: --each %s: %s\n", each, strerror(errno));
            return 2;
        }
        int rc = run_each(f, &req, json_out, per_eval);
        if (f != stdin) fclose(f);
        return rc;
    }
    if (npos != 2) return usage("need TASK_DIR and CANDIDATE");
    /* A wrong path is the caller's mistake, not a verdict of the candidate. */
    char why[1024];
    if (check_paths(pos[0], pos[1], why, sizeof(why)) != 0) {
        fprintf(stderr, "kfarm-worker eval: %s\n", why);
        return 2;
    }
    req.task_dir = pos[0];
    req.source_path = pos[1];

    kf_eval_res res;
    if (kf_eval_run(&req, &res) != 0) {
        fprintf(stderr, "kfarm-worker eval: %s\n", res.detail);
        kf_eval_res_free(&res);
        return 2;
    }
    json_t *metrics = json_loads(res.metrics_json ? res.metrics_json : "{}", 0, NULL);
    if (!metrics) metrics = json_object();
    /* a task the judge proved broken (degenerate or failing reference, too
     * slow for this machine) is refused like a task that does not load */
    const char *blame = json_string_value(json_object_get(metrics, "blame"));
    int task_refused = res.verdict == KF_INFRA_ERROR && blame && !strcmp(blame, "task");
    if (task_refused) {
        fprintf(stderr, "kfarm-worker eval: task %s refused: %s\n", req.task_dir, res.detail);
        json_decref(metrics);
        kf_eval_res_free(&res);
        return 2;
    }
    if (json_out) {
        json_t *o = result_json(&res, metrics);
        char *txt = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
        if (txt) puts(txt);
        free(txt);
        json_decref(o);
    } else {
        printf("%s: %s\n", kf_verdict_name(res.verdict), res.detail);
        if (res.speedup > 0)
            printf("speedup %.3fx (candidate %.2f us, baseline %.2f us; weighted geometric means)\n", res.speedup,
                   res.candidate_us, res.baseline_us);
        if (res.verdict == KF_COMPILE_ERROR && res.compile_log && *res.compile_log)
            printf("--- compile log ---\n%s", res.compile_log);
        char *txt = json_dumps(metrics, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
        if (txt) printf("%s\n", txt);
        free(txt);
    }
    json_decref(metrics);
    kf_eval_res_free(&res);
    return 0;
}
