/*
 * cmd_candidates.c -- `kfarm candidates NAME`: one row per candidate and
 * target with its final verdict, speedup, timings and detail.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "kf_verdict.h"
#include "kfarm_cli.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: kfarm candidates NAME [--target CLASS] [--verdict V] [--wide] [--json]\n"
               "                       [--db CONNINFO]\n\n"
               "Every candidate of campaign NAME with, per target, its final verdict,\n"
               "speedup over the baseline, median times (us), attempts and detail.\n"
               "  --target CLASS   only this routing class\n"
               "  --verdict V      only this verdict (ok, compile_error, ..., or queued/leased)\n"
               "  --wide           every column, cells not shortened (default: 80 columns)\n"
               "  --json           one JSON object per candidate and target\n"
               "CV and the 95%% interval of the speedup show the timing noise of ok results.\n");
}

int kf_cli_cmd_candidates(int argc, char **argv)
{
    static const struct option opts[] = {
        { "db", required_argument, NULL, 'd' }, { "target", required_argument, NULL, 't' },
        { "verdict", required_argument, NULL, 'v' },
        { "help", no_argument, NULL, 'h' }, { 0 } };
    const char *conninfo = NULL, *target = NULL, *verdict = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'd') conninfo = optarg;
        else if (c == 't') target = optarg;
        else if (c == 'v') verdict = optarg;
        else if (c == 'h') return usage(stdout), 0;
        else return usage(stderr), 2;
    }
    if (verdict && kf_verdict_parse(verdict) < 0 && strcmp(verdict, "queued") && strcmp(verdict, "leased"))
        return kf_cli_usage_error("candidates", "unknown verdict '%s' (ok, compile_error, load_error, "
                                  "runtime_error, timeout, incorrect, rejected_cheat, unsupported, "
                                  "infra_error, queued, leased)", verdict);
    if (optind >= argc) return kf_cli_usage_error("candidates", "missing campaign NAME");
    if (optind + 1 < argc)
        return kf_cli_usage_error("candidates", "unexpected argument '%s'", argv[optind + 1]);
    kf_db *db = kf_cli_connect(conninfo);
    if (!db) return 1;
    long long id;
    int rc = 0;
    if (kf_cli_campaign_id(db, argv[optind], &id) < 0) {
        kf_db_close(db);
        return 1;
    }
    char ids[24], err[1024];
    snprintf(ids, sizeof(ids), "%lld", id);
    const char *p[3] = { ids, target, verdict };
    PGresult *r = kf_db_exec(db,
        "SELECT k.id, k.parent_id AS parent, k.proposer, k.defines, j.target,"
        " COALESCE(f.verdict, j.state, 'seed') AS verdict, f.speedup, f.speedup_lo, f.speedup_hi,"
        " f.cv, f.candidate_us, f.baseline_us, j.attempts AS tries, f.detail"
        /* a candidate's evaluation jobs by job_keys_candidate (schema 015) */
        " FROM candidates k LEFT JOIN (job_keys jk JOIN jobs j ON j.id = jk.job_id)"
        "   ON jk.candidate_id = k.id AND jk.verifies IS NULL"
        " LEFT JOIN evaluations f ON f.job_id = j.id AND f.is_final"
        " WHERE k.campaign_id = $1::bigint AND ($2::text IS NULL OR j.target = $2)"
        "   AND ($3::text IS NULL OR COALESCE(f.verdict, j.state) = $3)"
        " ORDER BY k.id, j.target", 3, p, err, sizeof(err));
    if (!r) {
        rc = kf_cli_fail("%s", err);
        goto out;
    }
    if (kf_cli_json) {
        kf_cli_print_json(r, stdout);
        PQclear(r);
        goto out;
    }
    /* narrow set first; --wide appends the rest */
    static const char *const hdr[] = { "ID", "TARGET", "VERDICT", "SPEEDUP", "CV", "DEFINES",
                                       "DETAIL", "PARENT", "PROPOSER", "95% INTERVAL", "CAND_US",
                                       "BASE_US", "TRIES" };
    int nc = kf_cli_wide ? 13 : 7;
    kf_cli_table t;
    kf_cli_table_init(&t, nc, hdr);
    t.right[0] = t.right[3] = t.right[4] = t.right[7] = t.right[10] = t.right[11] = t.right[12] = 1;
    for (int i = 0; i < PQntuples(r); i++) {
        char defs[1024], sp[32], cu[32], bu[32], spx[40], cv[24], iv[48] = "-";
        const char *s = kf_cli_num(kf_db_str(r, i, 6), 3, sp, sizeof(sp));
        snprintf(spx, sizeof(spx), "%s%s", s, s == sp ? "x" : "");
        if (kf_db_str(r, i, 7) && kf_db_str(r, i, 8))
            snprintf(iv, sizeof(iv), "%.2f-%.2fx", kf_db_f64(r, i, 7, 0), kf_db_f64(r, i, 8, 0));
        const char *row[13] = {
            PQgetvalue(r, i, 0), kf_db_str(r, i, 4), PQgetvalue(r, i, 5), spx,
            kf_cli_num(kf_db_str(r, i, 9), 2, cv, sizeof(cv)),
            kf_status_defines(kf_db_str(r, i, 3), defs, sizeof(defs)), kf_db_str(r, i, 13),
            kf_db_str(r, i, 1), PQgetvalue(r, i, 2), iv,
            kf_cli_num(kf_db_str(r, i, 10), 2, cu, sizeof(cu)),
            kf_cli_num(kf_db_str(r, i, 11), 2, bu, sizeof(bu)), kf_db_str(r, i, 12),
        };
        kf_cli_table_row(&t, row);
    }
    kf_cli_table_print(&t, stdout, kf_cli_wide ? 0 : 60);
    printf("%d row%s\n", PQntuples(r), PQntuples(r) == 1 ? "" : "s");
    PQclear(r);
out:
    kf_db_close(db);
    return rc;
}
