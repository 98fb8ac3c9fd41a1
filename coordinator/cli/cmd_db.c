/*
 * cmd_db.c -- `kfarm db migrate` and `kfarm db version`.
 * Migrations are embedded in the binary (coordinator/embed.c); see db.h.
 */
#include <getopt.h>
#include <string.h>

#include "kfarm_cli.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: kfarm db migrate [--db CONNINFO]\n"
               "       kfarm db version [--db CONNINFO]\n\n"
               "migrate applies every schema migration not applied yet (each in its own\n"
               "transaction, serialized by an advisory lock; safe to run any time).\n"
               "version prints the applied schema version.\n");
}

int kf_cli_cmd_db(int argc, char **argv)
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
    if (optind >= argc) return kf_cli_usage_error("db", "missing subcommand (migrate, version)");
    const char *sub = argv[optind];
    if (optind + 1 < argc) return kf_cli_usage_error("db", "unexpected argument '%s'", argv[optind + 1]);
    if (strcmp(sub, "migrate") != 0 && strcmp(sub, "version") != 0)
        return kf_cli_usage_error("db", "unknown subcommand '%s'", sub);
    kf_db *db = kf_cli_connect(conninfo);
    if (!db) return 1;
    char err[1024];
    int applied = 0, rc = 0;
    if (strcmp(sub, "migrate") == 0 && kf_db_migrate(db, &applied, err, sizeof(err)) < 0) {
        rc = kf_cli_fail("%s", err);
    } else {
        int v = kf_db_schema_version(db, err, sizeof(err));
        if (v < 0) rc = kf_cli_fail("%s", err);
        else if (strcmp(sub, "migrate") == 0)
            printf("schema at version %d (%d migration%s applied)\n", v, applied,
                   applied == 1 ? "" : "s");
        else printf("%d\n", v);
        char drift[2048];
        int nd = v >= 0 ? kf_db_schema_drift(db, drift, sizeof(drift), err, sizeof(err)) : 0;
        fflush(stdout);
        if (nd > 0)
            fprintf(stderr, "kfarm: warning: %d applied migration%s differ%s from this build's: %s\n", nd,
                    nd == 1 ? "" : "s", nd == 1 ? "s" : "", drift);
        else if (nd < 0)
            fprintf(stderr, "kfarm: warning: cannot compare the applied migrations: %s\n", err);
    }
    kf_db_close(db);
    return rc;
}
