/*
 * cmd_leaderboard.c -- `kfarm leaderboard NAME`: verdict counts, then the
 * candidates that passed, fastest first (speedup over the baseline measured
 * in the same process on the same device).
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "kfarm_cli.h"

/* Confirmed results first (a second evaluation agreed), then pending and
 * unverified ones, disputed last; fastest first within each. */
#define LB_ORDER                                                                         \
    "CASE e.confirmation WHEN 'confirmed' THEN 0 WHEN 'pending' THEN 1 WHEN 'disputed' THEN 3" \
    " ELSE 2 END, e.speedup DESC, k.id"

static void usage(FILE *f)
{
    fprintf(f, "usage: kfarm leaderboard NAME [--target CLASS] [--limit N] [--db CONNINFO]\n\n"
               "Verdict counts of campaign NAME, then its passing candidates ranked by\n"
               "speedup over the baseline (per target), results confirmed by a second\n"
               "evaluation first (CONFIRMED: by which worker), disputed ones last.\n"
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
        " (SELECT e.verdict, count(*) n FROM evaluations e JOIN jobs j ON j.id = e.job_id"
        "  WHERE j.campaign_id = $1::bigint AND j.purpose = 'eval' AND e.is_final"
        "  AND ($2::text IS NULL OR j.target = $2)"
        "  AND $3::bigint IS NOT DISTINCT FROM $3::bigint GROUP BY e.verdict) v",
        3, p, err, sizeof(err));
    if (!r) {
        rc = kf_cli_fail("%s", err);
        goto out;
    }
    printf("campaign %s: %s final verdicts: %s\n\n", name,
           kf_db_str(r, 0, 1) ? kf_db_str(r, 0, 1) : "0",
           kf_db_str(r, 0, 0) ? kf_db_str(r, 0, 0) : "none yet");
    PQclear(r);
    r = kf_db_exec(db,
        "SELECT row_number() OVER (ORDER BY " LB_ORDER "), k.id, j.target, e.speedup,"
        " e.candidate_us, e.baseline_us, k.defines::text, k.proposer, e.worker_id,"
        " CASE e.confirmation WHEN 'confirmed' THEN 'yes: ' || e.confirmed_by_worker"
        "   WHEN 'disputed' THEN 'DISPUTED by ' || e.confirmed_by_worker"
        "   WHEN 'none' THEN '-' ELSE e.confirmation END"
        " FROM evaluations e JOIN jobs j ON j.id = e.job_id JOIN candidates k ON k.id = e.candidate_id"
        " WHERE j.campaign_id = $1::bigint AND j.purpose = 'eval' AND e.is_final AND e.verdict = 'ok'"
        "   AND e.speedup IS NOT NULL AND ($2::text IS NULL OR j.target = $2)"
        " ORDER BY " LB_ORDER " LIMIT $3::bigint", 3, p, err, sizeof(err));
    if (!r) {
        rc = kf_cli_fail("%s", err);
        goto out;
    }
    if (PQntuples(r) == 0) {
        printf("no candidate has passed yet (see kfarm candidates %s)\n", name);
        goto out;
    }
    static const char *const hdr[] = { "RANK", "CANDIDATE", "TARGET", "SPEEDUP", "CAND_US",
                                       "BASE_US", "DEFINES", "PROPOSER", "WORKER", "CONFIRMED" };
    kf_cli_table t;
    kf_cli_table_init(&t, 10, hdr);
    t.right[0] = t.right[1] = t.right[3] = t.right[4] = t.right[5] = 1;
    for (int i = 0; i < PQntuples(r); i++) {
        char defs[1024], sp[32], cu[32], bu[32];
        snprintf(sp, sizeof(sp), "%.3fx", kf_db_f64(r, i, 3, 0));
        const char *row[10] = {
            PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), PQgetvalue(r, i, 2), sp,
            kf_cli_num(kf_db_str(r, i, 4), 2, cu, sizeof(cu)),
            kf_cli_num(kf_db_str(r, i, 5), 2, bu, sizeof(bu)),
            kf_cli_defines(kf_db_str(r, i, 6), defs, sizeof(defs)), PQgetvalue(r, i, 7),
            kf_db_str(r, i, 8), kf_db_str(r, i, 9),
        };
        kf_cli_table_row(&t, row);
    }
    kf_cli_table_print(&t, stdout, 60);
out:
    if (r) PQclear(r);
    kf_db_close(db);
    return rc;
}
