/*
 * cmd_workers.c -- `kfarm workers`: the fleet, and lifting or setting a
 * worker's quarantine (`kfarm workers release ID`, `kfarm workers quarantine ID`).
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "kfarm_cli.h"
#include "queue.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: kfarm workers [--db CONNINFO]\n"
               "       kfarm workers release ID      lift a quarantine\n"
               "       kfarm workers quarantine ID   stop handing jobs to a worker\n\n"
               "Lists registered workers: devices, routing classes, last contact, jobs\n"
               "done, consecutive infra_errors and quarantine.\n");
}

int kf_cli_cmd_workers(int argc, char **argv)
{
    static const struct option opts[] = {
        { "db", required_argument, NULL, 'd' }, { "help", no_argument, NULL, 'h' }, { 0 } };
    const char *conninfo = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'd') conninfo = optarg;
        else if (c == 'h') return usage(stdout), 0;
        else return usage(stderr), 2;
    }
    const char *sub = optind < argc ? argv[optind] : NULL;
    if (sub && strcmp(sub, "release") && strcmp(sub, "quarantine"))
        return kf_cli_usage_error("workers", "unknown subcommand '%s'", sub);
    if (sub && optind + 2 != argc) return kf_cli_usage_error("workers", "%s: expected one worker ID", sub);
    kf_db *db = kf_cli_connect(conninfo);
    if (!db) return 1;
    char err[1024];
    int rc = 0;
    if (sub) {
        int q = strcmp(sub, "quarantine") == 0;
        if (kf_queue_set_quarantine(db, argv[optind + 1], q, err, sizeof(err)) < 0)
            rc = kf_cli_fail("%s", err);
        else printf("worker %s %s\n", argv[optind + 1], q ? "quarantined" : "released");
        kf_db_close(db);
        return rc;
    }
    PGresult *r = kf_db_exec(db,
        "SELECT w.id, w.hostname, w.backend, array_to_string(w.classes, ','),"
        " (SELECT string_agg(d->>'name', ', ') FROM jsonb_array_elements(w.devices) d),"
        " CASE WHEN w.last_seen > now() - interval '2 minutes' THEN"
        "   (extract(epoch FROM now() - w.last_seen)::int) || ' s ago'"
        "   ELSE to_char(w.last_seen, 'YYYY-MM-DD HH24:MI') END,"
        " CASE WHEN w.quarantined THEN 'QUARANTINED' ELSE 'ok' END,"
        " w.jobs_done::text, w.infra_errors::text,"
        " (SELECT count(*) FROM jobs j WHERE j.worker_id = w.id AND j.state = 'leased')::text"
        " FROM workers w ORDER BY w.id", 0, NULL, err, sizeof(err));
    if (!r) {
        rc = kf_cli_fail("%s", err);
    } else if (PQntuples(r) == 0) {
        printf("no workers have registered yet\n");
    } else {
        static const char *const hdr[] = { "ID", "HOST", "BACKEND", "CLASSES", "DEVICES",
                                           "LAST SEEN", "STATE", "JOBS", "INFRA_ERR", "LEASED" };
        kf_cli_table t;
        kf_cli_table_init(&t, 10, hdr);
        t.right[7] = t.right[8] = t.right[9] = 1;
        for (int i = 0; i < PQntuples(r); i++) {
            const char *row[10];
            for (int k = 0; k < 10; k++) row[k] = kf_db_str(r, i, k);
            kf_cli_table_row(&t, row);
        }
        kf_cli_table_print(&t, stdout, 48);
    }
    if (r) PQclear(r);
    kf_db_close(db);
    return rc;
}
