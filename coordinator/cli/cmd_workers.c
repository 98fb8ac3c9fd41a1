/*
 * cmd_workers.c -- `kfarm workers`: the fleet, and lifting or setting a
 * worker's quarantine (`kfarm workers release ID`, `kfarm workers quarantine ID`).
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "kfarm_cli.h"
#include "queue.h"
#include "verify.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: kfarm workers [--wide] [--json] [--db CONNINFO]\n"
               "       kfarm worker release NAME      lift a quarantine\n"
               "       kfarm worker quarantine NAME   stop handing jobs to a worker\n"
               "       (kfarm workers release|quarantine NAME work too)\n\n"
               "Lists registered workers: routing classes, state (ok, offline: not heard\n"
               "from in %d s, quarantined with the reason), last contact, clock skew,\n"
               "jobs done, consecutive infra_errors; a worker disputed by other workers more\n"
               "often than they agreed is named below the table. --wide adds verifications\n"
               "agreed / disputed, host, backend, devices.\n",
            KF_QUEUE_OFFLINE_S);
}

int kf_cli_cmd_workers(int argc, char **argv)
{
    static const struct option opts[] = {
        { "db", required_argument, NULL, 'd' }, { "help", no_argument, NULL, 'h' }, { 0 } };
    const char *conninfo = NULL;
    const char *cmd = argv[0];
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'd') conninfo = optarg;
        else if (c == 'h') return usage(stdout), 0;
        else return usage(stderr), 2;
    }
    const char *sub = optind < argc ? argv[optind] : NULL;
    if (!strcmp(cmd, "worker") && !sub)
        return kf_cli_usage_error(cmd, "expected: release NAME or quarantine NAME");
    if (sub && strcmp(sub, "release") && strcmp(sub, "quarantine"))
        return kf_cli_usage_error(cmd, "unknown subcommand '%s'", sub);
    if (sub && optind + 2 != argc) return kf_cli_usage_error(cmd, "%s: expected one worker NAME", sub);
    kf_db *db = kf_cli_connect(conninfo);
    if (!db) return 1;
    char err[1024], off[24];
    int rc = 0;
    if (sub) {
        int q = strcmp(sub, "quarantine") == 0;
        if (kf_queue_set_quarantine(db, argv[optind + 1], q, err, sizeof(err)) < 0)
            rc = kf_cli_fail("%s", err);
        else printf("worker %s %s\n", argv[optind + 1], q ? "quarantined" : "released");
        kf_db_close(db);
        return rc;
    }
    snprintf(off, sizeof(off), "%d", KF_QUEUE_OFFLINE_S);
    const char *p[1] = { off };
    /* last_seen is the database's clock (never the worker's): a worker with
     * a skewed clock is still seen, and its skew is shown beside it */
    PGresult *r = kf_db_exec(db,
        "SELECT w.id AS name, array_to_string(w.classes, ',') AS classes,"
        " CASE WHEN w.quarantined THEN 'quarantined'"
        "      WHEN w.last_seen < now() - $1::int * interval '1 second' THEN 'offline'"
        "      ELSE 'ok' END AS state,"
        " extract(epoch FROM now() - w.last_seen)::bigint AS seen_s_ago,"
        " w.clock_skew_ms, w.jobs_done, w.infra_errors,"
        " (SELECT count(*) FROM jobs j WHERE j.worker_id = w.id AND j.state = 'leased') AS leased,"
        " w.quarantine_reason, w.hostname AS host, w.backend,"
        " (SELECT string_agg(d->>'name', ', ') FROM jsonb_array_elements(w.devices) d) AS devices,"
        " to_char(w.last_seen, 'YYYY-MM-DD HH24:MI:SS') AS last_seen,"
        " w.agreements, w.disputes,"
        " (SELECT string_agg(k || ' x' || v, ', ' ORDER BY v::int DESC, k)"
        "  FROM jsonb_each_text(w.dispute_counts) e(k, v)) AS disputed_by"
        " FROM workers w ORDER BY w.id", 1, p, err, sizeof(err));
    if (!r) {
        rc = kf_cli_fail("%s", err);
    } else if (kf_cli_json) {
        kf_cli_print_json(r, stdout);
    } else if (PQntuples(r) == 0) {
        printf("no workers have registered yet\n");
    } else {
        static const char *const hdr[] = { "NAME", "CLASSES", "STATE", "SEEN", "SKEW", "JOBS",
                                           "INFRA", "LEASED", "AGREE/DISPUTE", "HOST", "BACKEND",
                                           "DEVICES" };
        int nc = kf_cli_wide ? 12 : 8;
        kf_cli_table t;
        kf_cli_table_init(&t, nc, hdr);
        t.right[3] = t.right[4] = t.right[5] = t.right[6] = t.right[7] = t.right[8] = 1;
        for (int i = 0; i < PQntuples(r); i++) {
            char seen[48], skew[32], verif[48];
            long long ago = kf_db_i64(r, i, 3, 0);
            if (ago < 120) snprintf(seen, sizeof(seen), "%llds ago", ago);
            else if (ago < 7200) snprintf(seen, sizeof(seen), "%lldm ago", ago / 60);
            else snprintf(seen, sizeof(seen), "%s", PQgetvalue(r, i, 12));
            if (PQgetisnull(r, i, 4)) snprintf(skew, sizeof(skew), "-");
            else snprintf(skew, sizeof(skew), "%+.1fs", (double)kf_db_i64(r, i, 4, 0) / 1000.0);
            snprintf(verif, sizeof(verif), "%s/%s", PQgetvalue(r, i, 13), PQgetvalue(r, i, 14));
            const char *row[12] = { PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), PQgetvalue(r, i, 2),
                                    seen, skew, PQgetvalue(r, i, 5), PQgetvalue(r, i, 6),
                                    PQgetvalue(r, i, 7), verif, kf_db_str(r, i, 9), kf_db_str(r, i, 10),
                                    kf_db_str(r, i, 11) };
            kf_cli_table_row(&t, row);
        }
        kf_cli_table_print(&t, stdout, 48);
        for (int i = 0; i < PQntuples(r); i++)
            if (!strcmp(PQgetvalue(r, i, 2), "quarantined"))
                printf("%s: quarantined: %s (lift with: kfarm worker release %s)\n",
                       PQgetvalue(r, i, 0),
                       kf_db_str(r, i, 8) ? kf_db_str(r, i, 8) : "no reason recorded",
                       PQgetvalue(r, i, 0));
            else if (kf_db_i64(r, i, 14, 0) > kf_db_i64(r, i, 13, 0))
                /* disputed more than agreed, not (yet) quarantined: which
                 * side is wrong needs other workers' disputes (verify.h) */
                printf("%s: %s verification disputes, %s agreements (disputed by %s): results"
                       " disagree beyond the noise; quarantined once %d of them come from others than"
                       " its most frequent accuser\n",
                       PQgetvalue(r, i, 0), PQgetvalue(r, i, 14), PQgetvalue(r, i, 13),
                       kf_db_str(r, i, 15) ? kf_db_str(r, i, 15) : "-", KF_VERIFY_QUARANTINE_OTHERS);
    }
    if (r) PQclear(r);
    kf_db_close(db);
    return rc;
}
