/*
 * cmd_ship.c -- `kfarm ship CAMPAIGN... --out DIR [--verify]`: the confirmed
 * winners as a dispatch library (coordinator/ship.h has the rules and the
 * files), and with --verify the library judged by the farm itself.
 *
 * --verify creates one campaign per class, named
 * "<first campaign>-ship-<class>-<time>", whose only candidate is that
 * class's file (a valid candidate: one source, the kf_entry ABI), on that
 * class only. Running workers evaluate it like any candidate; it must come
 * back `ok`, and at every benchmark shape its speedup interval must reach the
 * shipped entry's interval (for a shape served by the baseline: reach 0.9,
 * the drift two timings of one kernel show on a shared machine).
 */
#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "campaign.h"
#include "kf_build_id.h"
#include "kf_util.h"
#include "kfarm_cli.h"
#include "noise.h"
#include "ship.h"


static void usage(FILE *f)
{
    fprintf(f,
        "usage: kfarm ship CAMPAIGN... --out DIR [--verify [--verify-timeout S]] [--db CONNINFO]\n\n"
        "From the campaigns' confirmed ok results (one task; several campaigns may\n"
        "cover different targets), write a dispatch library to DIR: per target class\n"
        "and benchmark shape the fastest confirmed result that beats the baseline\n"
        "beyond its measured noise, else the baseline; sources, classes/ (each one a\n"
        "valid candidate), dispatch.c|.cu, CMakeLists.txt and MANIFEST.json.\n"
        "  --verify            have the farm judge each class file as a candidate (running\n"
        "                      workers needed); fails unless every class is ok and no\n"
        "                      shape is slower than its shipped entry's interval\n"
        "  --verify-timeout S  give up waiting for the verdicts after S seconds (default 1800)\n"
        "  --cc CC, --nvcc NVCC  compilers used to check the generated files\n");
}

/* Write the task stored in the database to dir (task.json + files), so a
 * verification campaign can be created from it. */
static int task_to_dir(kf_db *db, int64_t task_id, const char *dir)
{
    char id[24], err[512];
    snprintf(id, sizeof(id), "%lld", (long long)task_id);
    const char *p[1] = { id };
    PGresult *r = kf_db_exec(db, "SELECT spec_text, files::text FROM tasks WHERE id = $1::bigint", 1, p, err, sizeof(err));
    if (!r || PQntuples(r) != 1) {
        if (r) PQclear(r);
        return kf_cli_fail("task %s: %s", id, r ? "not found" : err);
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/task.json", dir);
    int rc = kf_util_write_file(path, PQgetvalue(r, 0, 0), (size_t)PQgetlength(r, 0, 0));
    json_error_t je;
    json_t *files = json_loads(PQgetvalue(r, 0, 1), 0, &je);
    const char *k;
    json_t *v;
    json_object_foreach(files, k, v) {
        if (strchr(k, '/') || !strcmp(k, "..") || !json_is_string(v)) continue;
        snprintf(path, sizeof(path), "%s/%s", dir, k);
        rc |= kf_util_write_file(path, json_string_value(v), strlen(json_string_value(v)));
    }
    json_decref(files);
    PQclear(r);
    return rc < 0 ? kf_cli_fail("cannot write the task to %s", dir) : 0;
}

/* Verify one class: create and start its campaign, wait for the verdict,
 * compare per shape. 0 when it passed, 1 otherwise (reason printed). */
static int verify_class(kf_db *db, const kf_ship_plan *p, const kf_ship_class *cl, const char *out, const char *taskdir,
                        double timeout_s)
{
    char slug[128], name[300], seed[4096], err[1024], stamp[32];
    kf_ship_slug(cl->name, slug, sizeof(slug));
    time_t now = time(NULL);
    strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", gmtime(&now));
    snprintf(name, sizeof(name), "%s-ship-%s-%s", p->campaigns[0], slug, stamp);
    snprintf(seed, sizeof(seed), "%s/classes/%s.%s", out, slug, p->cuda ? "cu" : "c");
    kf_campaign_spec spec;
    memset(&spec, 0, sizeof(spec));
    spec.name = name;
    spec.task_dir = taskdir;
    spec.strategy = "tune";
    spec.targets[0] = cl->name;
    spec.n_targets = 1;
    spec.max_candidates = 1;
    spec.seed_path = seed;
    int64_t cid;
    if (kf_campaign_create(db, &spec, &cid, err, sizeof(err)) < 0 || kf_campaign_start(db, name, err, sizeof(err)) < 0)
        return kf_cli_fail("verify %s: %s", cl->name, err);
    fprintf(stderr, "kfarm: verifying class %s as campaign %s\n", cl->name, name);
    char ids[24];
    snprintf(ids, sizeof(ids), "%lld", (long long)cid);
    const char *pr[1] = { ids };
    double t0 = kf_util_now_s();
    PGresult *r = NULL;
    for (;;) {
        r = kf_db_exec(db,
            "SELECT e.verdict, coalesce(e.detail, ''), coalesce((e.metrics->'timing'->'shapes')::text, '[]')"
            " FROM candidates k JOIN evaluations e ON e.candidate_id = k.id"
            " WHERE k.campaign_id = $1::bigint AND e.job_purpose = 'eval' AND e.is_final LIMIT 1",
            1, pr, err, sizeof(err));
        if (!r) return kf_cli_fail("verify %s: %s", cl->name, err);
        if (PQntuples(r) == 1) break;
        PQclear(r);
        if (kf_util_now_s() - t0 > timeout_s)
            return kf_cli_fail("verify %s: no verdict after %.0f s (is a worker of class %s running?)", cl->name,
                               timeout_s, cl->name);
        usleep(500000);
    }
    int bad = 0;
    if (strcmp(PQgetvalue(r, 0, 0), "ok") != 0) {
        fprintf(stderr, "kfarm: verify %s: the shipped file is %s: %s\n", cl->name, PQgetvalue(r, 0, 0),
                PQgetvalue(r, 0, 1));
        bad = 1;
    }
    json_error_t je;
    json_t *shapes = json_loads(PQgetvalue(r, 0, 2), 0, &je);
    for (int s = 0; s < p->n_shapes && !bad; s++) {
        const kf_ship_shape *sh = &cl->s[s];
        double v = 0, lo = 0, hi = 0;
        size_t i;
        json_t *o;
        int found = 0;
        json_array_foreach(shapes, i, o) {
            json_t *sz = json_object_get(o, "sizes");
            int m = 1;
            for (int k = 0; k < p->n_sizes; k++) m &= json_integer_value(json_object_get(sz, p->size_names[k])) == sh->sizes[k];
            if (!m) continue;
            json_t *c = json_object_get(o, "candidate"), *b = json_object_get(o, "baseline");
            v = json_number_value(json_object_get(o, "speedup"));
            kf_noise_shape(v, json_number_value(json_object_get(b, "cv")), json_number_value(json_object_get(c, "cv")), &lo,
                           &hi);
            found = 1;
        }
        double need = sh->entry >= 0 ? sh->lo : 0.9;
        printf("verify %-12s shape %d: %.3fx [%.3f, %.3f], shipped %s %.3fx [%.3f, %.3f]: %s\n", cl->name, s, v, lo, hi,
               sh->entry >= 0 ? "winner" : "baseline", sh->speedup, sh->lo, sh->hi,
               !found ? "NOT MEASURED" : hi >= need ? "ok" : "SLOWER");
        if (!found || hi < need) bad = 1;
    }
    json_decref(shapes);
    PQclear(r);
    return bad;
}

int kf_cli_cmd_ship(int argc, char **argv)
{
    static const struct option opts[] = {
        { "db", required_argument, NULL, 'd' }, { "out", required_argument, NULL, 'o' },
        { "verify", no_argument, NULL, 'v' }, { "verify-timeout", required_argument, NULL, 'T' },
        { "cc", required_argument, NULL, 'c' }, { "nvcc", required_argument, NULL, 'n' },
        { "help", no_argument, NULL, 'h' }, { 0 } };
    const char *conninfo = NULL, *out = NULL, *cc = getenv("CC"), *nvcc = NULL;
    int verify = 0, c;
    double timeout_s = 1800;
    optind = 1;
    while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        if (c == 'd') conninfo = optarg;
        else if (c == 'o') out = optarg;
        else if (c == 'v') verify = 1;
        else if (c == 'T') {
            if (kf_cli_parse_double(optarg, &timeout_s) < 0 || timeout_s <= 0)
                return kf_cli_usage_error("ship", "--verify-timeout: expected seconds > 0");
        } else if (c == 'c') cc = optarg;
        else if (c == 'n') nvcc = optarg;
        else if (c == 'h') return usage(stdout), 0;
        else return usage(stderr), 2;
    }
    if (optind >= argc) return kf_cli_usage_error("ship", "missing CAMPAIGN");
    if (!out) return kf_cli_usage_error("ship", "missing --out DIR");
    if (cc && !*cc) cc = NULL;
    kf_db *db = kf_cli_connect(conninfo);
    if (!db) return 1;
    char err[1024];
    int rc = 0;
    kf_ship_plan *p = kf_ship_plan_make(db, (const char *const *)argv + optind, argc - optind, err, sizeof(err));
    if (!p) {
        kf_db_close(db);
        return kf_cli_fail("%s", err);
    }
    char abi[4096];
    const char *env = getenv("KFARM_ABI_DIR");
    snprintf(abi, sizeof(abi), "%s", env && *env ? env : KFARM_SOURCE_DIR "/abi");
    if (kf_ship_write(p, out, cc, nvcc, abi, KF_BUILD_ID, err, sizeof(err)) < 0) {
        rc = kf_cli_fail("%s", err);
        goto done;
    }
    static const char *const hdr[] = { "class", "shape", "serves", "speedup", "95% interval", "confirmed by" };
    kf_cli_table t;
    kf_cli_table_init(&t, 6, hdr);
    t.right[3] = 1;
    int unconfirmed = 0;
    kf_strbuf noise = { 0 }; /* shapes the baseline serves although a confirmed result measured faster */
    for (int k = 0; k < p->n_cls; k++) {
        const kf_ship_class *cl = &p->cls[k];
        for (int s = 0; s < p->n_shapes; s++) {
            const kf_ship_shape *sh = &cl->s[s];
            char shape[256] = "", serves[64], sp[32], iv[64];
            size_t n = 0;
            for (int q = 0; q < p->n_sizes; q++)
                n += (size_t)snprintf(shape + n, sizeof(shape) - n, "%s%s=%lld", q ? "," : "", p->size_names[q],
                                      (long long)sh->sizes[q]);
            unconfirmed += sh->unconfirmed_better;
            if (sh->entry < 0 && sh->noise_candidate)
                kf_strbuf_printf(&noise,
                                 "note: %s %s: candidate %lld measured %.3fx [%.3f, %.3f], not faster beyond the "
                                 "noise: the baseline serves it (re-measure it on a quieter device to ship it)\n",
                                 cl->name, shape, (long long)sh->noise_candidate, sh->noise_speedup, sh->noise_lo,
                                 sh->noise_hi);
            if (sh->entry < 0) {
                snprintf(serves, sizeof(serves), "baseline");
                snprintf(sp, sizeof(sp), "1");
                snprintf(iv, sizeof(iv), "-");
            } else {
                snprintf(serves, sizeof(serves), "candidate %lld", (long long)cl->e[sh->entry].candidate_id);
                snprintf(sp, sizeof(sp), "%.3fx", sh->speedup);
                snprintf(iv, sizeof(iv), "[%.3f, %.3f]", sh->lo, sh->hi);
            }
            const char *row[6] = { cl->name, shape, serves, sp, iv, sh->entry < 0 ? NULL : cl->e[sh->entry].confirmed_by };
            kf_cli_table_row(&t, row);
        }
    }
    kf_cli_table_print(&t, stdout, 40);
    printf("shipped to %s (MANIFEST.json; build: cmake -S %s -B %s/build && cmake --build %s/build)\n", out, out, out, out);
    if (unconfirmed)
        printf("note: %d unconfirmed result(s) would have won a shape; they are not shipped until confirmed\n",
               unconfirmed);
    if (noise.len && !noise.oom) fputs(noise.s, stdout);
    free(noise.s);
    if (verify) {
        char tdir[] = "/tmp/kfarm-ship-task.XXXXXX";
        if (!mkdtemp(tdir)) {
            rc = kf_cli_fail("mkdtemp failed");
            goto done;
        }
        rc = task_to_dir(db, p->task_id, tdir);
        if (rc == 0)
            for (int k = 0; k < p->n_cls; k++) rc |= verify_class(db, p, &p->cls[k], out, tdir, timeout_s);
        kf_util_rmtree(tdir);
        printf("verify: %s\n", rc ? "FAILED" : "every class ok, no shape slower than shipped");
    }
done:
    kf_ship_plan_free(p);
    kf_db_close(db);
    return rc;
}
