/*
 * cmd_leaderboard.c -- `kfarm leaderboard NAME`: verdict counts, then the
 * candidates that passed, fastest first (speedup over the baseline measured
 * in the same process on the same device).
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "kfarm_cli.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: kfarm leaderboard NAME [--target CLASS] [--limit N] [--db CONNINFO]\n\n"
               "Verdict counts of campaign NAME, then its passing candidates ranked by\n"
               "speedup over the baseline, per target, with the 95%% noise interval and\n"
               "CV; candidates whose intervals overlap share a rank (\"=N\": ties).\n"
               "  --limit applies per target; --json and --wide as everywhere.\n"
               "  --target CLASS   only this routing class\n"
               "  --limit N        rows to show (default 20, 0 = all)\n");
}

int kf_cli_cmd_leaderboard(int argc, char **argv)
{
    static const struct option opts[] = {
        { "db", required_argument, NULL, 'd' }, { "target", required_argument, NULL, 't' },
        { "limit", required_argument, NULL, 'n' }, { "help", no_argument, NULL, 'h' }, { 0 } };
    const char *conninfo = NULL, *target = NULL;
    long limit = 20;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'd') conninfo = optarg;
        else if (c == 't') target = optarg;
        else if (c == 'n') {
            if (kf_cli_parse_long(optarg, &limit) < 0)
                return kf_cli_usage_error("leaderboard", "--limit: expected a number");
        } else if (c == 'h') return usage(stdout), 0;
        else return usage(stderr), 2;
    }
    if (optind >= argc) return kf_cli_usage_error("leaderboard", "missing campaign NAME");
    if (optind + 1 < argc)
        return kf_cli_usage_error("leaderboard", "unexpected argument '%s'", argv[optind + 1]);
    const char *name = argv[optind];
    kf_db *db = kf_cli_connect(conninfo);
    if (!db) return 1;
    long long id;
    int rc = 0;
    PGresult *r = NULL;
    if (kf_cli_campaign_id(db, name, &id) < 0) {
        kf_db_close(db);
        return 1;
    }
    char ids[24], lim[24], err[1024];
    snprintf(ids, sizeof(ids), "%lld", id);
    snprintf(lim, sizeof(lim), "%ld", limit);
    const char *p[3] = { ids, target, limit > 0 ? lim : NULL };
    r = kf_db_exec(db,
        "SELECT string_agg(verdict || ' ' || n, ', ' ORDER BY n DESC, verdict), sum(n) FROM"
        /* the campaign's candidates' evaluations, the job's target and
         * purpose from the evaluation's own columns (schema 009) */
        " (SELECT e.verdict, count(*) n FROM candidates k JOIN evaluations e ON e.candidate_id = k.id"
        "  WHERE k.campaign_id = $1::bigint AND e.job_purpose = 'eval' AND e.is_final"
        "  AND ($2::text IS NULL OR e.job_target = $2)"
        "  AND $3::bigint IS NOT DISTINCT FROM $3::bigint GROUP BY e.verdict) v",
        3, p, err, sizeof(err));
    if (!r) {
        rc = kf_cli_fail("%s", err);
        goto out;
    }
    if (!kf_cli_json) printf("campaign %s: %s final verdicts: %s\n\n", name,
           kf_db_str(r, 0, 1) ? kf_db_str(r, 0, 1) : "0",
           kf_db_str(r, 0, 0) ? kf_db_str(r, 0, 0) : "none yet");
    PQclear(r);
    /* Per target, fastest first. RANK = 1 + the results on the same target
     * that are faster beyond the noise (their interval lies wholly above
     * this one's): results whose intervals overlap share a rank (ties). */
    r = kf_db_exec(db,
        "WITH res AS (SELECT e.job_target AS target, k.id AS candidate, e.speedup,"
        "   COALESCE(e.speedup_lo, e.speedup) AS lo, COALESCE(e.speedup_hi, e.speedup) AS hi, e.cv,"
        "   e.candidate_us, e.baseline_us, k.defines, k.proposer, e.worker_id AS worker,"
        "   array_position(c.targets, e.job_target) AS tpos, e.confirmation, e.confirmed_by_worker AS confirmed_by,"
        "   (e.confirmation = 'disputed')::int AS g"
        /* evaluations_ok_campaign: the campaign's final ok results */
        "  FROM evaluations e JOIN candidates k ON k.id = e.candidate_id"
        "  JOIN campaigns c ON c.id = e.job_campaign_id"
        "  WHERE e.job_campaign_id = $1::bigint AND e.job_purpose = 'eval' AND e.is_final AND e.verdict = 'ok'"
        "    AND e.speedup > 0 AND ($2::text IS NULL OR e.job_target = $2)),"
        /* disputed results (g = 1) rank after all others; otherwise by speed beyond the noise */
        " ranked AS (SELECT 1 + (SELECT count(*) FROM res b WHERE b.target = a.target AND"
        "   (b.g < a.g OR (b.g = a.g AND b.lo > a.hi)))"
        "   AS rank, row_number() OVER (PARTITION BY a.target ORDER BY a.g, a.speedup DESC, a.candidate) AS n,"
        "   a.* FROM res a)"
        " SELECT rank, (count(*) OVER (PARTITION BY target, rank) > 1) AS tie, target, candidate,"
        "   speedup, lo, hi, cv, candidate_us, baseline_us, defines, proposer, worker, confirmation,"
        "   confirmed_by"
        /* disputed results last: a second worker disagreed (coordinator/verify.h) */
        " FROM ranked WHERE $3::bigint IS NULL OR n <= $3::bigint"
        /* within a rank (ties), results a second evaluation confirmed first */
        " ORDER BY tpos, rank, confirmation = 'confirmed' DESC, speedup DESC, candidate",
        3, p, err, sizeof(err));
    if (!r) {
        rc = kf_cli_fail("%s", err);
        goto out;
    }
    if (kf_cli_json) {
        kf_cli_print_json(r, stdout);
        goto out;
    }
    if (PQntuples(r) == 0) {
        printf("no candidate has passed yet (see kfarm candidates %s)\n", name);
        goto out;
    }
    static const char *const hdr[] = { "RANK", "TARGET", "CAND", "SPEEDUP", "95% INTERVAL", "CV",
                                       "DEFINES", "CAND_US", "BASE_US", "PROPOSER", "WORKER", "CONFIRMED" };
    kf_cli_table t;
    int nc = kf_cli_wide ? 12 : 7;
    kf_cli_table_init(&t, nc, hdr);
    t.right[0] = t.right[2] = t.right[3] = t.right[5] = t.right[7] = t.right[8] = 1;
    for (int i = 0; i < PQntuples(r); i++) {
        char rank[24], defs[1024], sp[32], iv[48], cv[24], cu[32], bu[32], cand[40], conf[200];
        const char *cs = PQgetvalue(r, i, 13), *by = PQgetvalue(r, i, 14);
        /* "12c": confirmed by a second evaluation; "12!": disputed */
        snprintf(cand, sizeof(cand), "%s%s", PQgetvalue(r, i, 3),
                 !strcmp(cs, "confirmed") ? "c" : !strcmp(cs, "disputed") ? "!" : "");
        snprintf(conf, sizeof(conf), "%s%s%s", cs, *by ? " by " : "", by);
        snprintf(rank, sizeof(rank), "%s%s", strcmp(PQgetvalue(r, i, 1), "t") ? "" : "=",
                 PQgetvalue(r, i, 0));
        snprintf(sp, sizeof(sp), "%.3fx", kf_db_f64(r, i, 4, 0));
        snprintf(iv, sizeof(iv), "%.2f-%.2fx", kf_db_f64(r, i, 5, 0), kf_db_f64(r, i, 6, 0));
        const char *row[12] = {
            rank, PQgetvalue(r, i, 2), cand, sp, iv,
            kf_cli_num(kf_db_str(r, i, 7), 2, cv, sizeof(cv)),
            kf_status_defines(kf_db_str(r, i, 10), defs, sizeof(defs)),
            kf_cli_num(kf_db_str(r, i, 8), 2, cu, sizeof(cu)),
            kf_cli_num(kf_db_str(r, i, 9), 2, bu, sizeof(bu)), PQgetvalue(r, i, 11),
            kf_db_str(r, i, 12), conf,
        };
        kf_cli_table_row(&t, row);
    }
    kf_cli_table_print(&t, stdout, 60);
    printf("\nRANK: per target; \"=N\" marks ties (95%% intervals overlap: not faster beyond\n"
           "the noise); among ties, confirmed results first. CAND \"12c\": confirmed by a\n"
           "second evaluation, \"12!\": disputed (never best); --wide says by whom.\n"
           "kfarm best %s names the best ok on every target.\n", name);
out:
    if (r) PQclear(r);
    kf_db_close(db);
    return rc;
}
