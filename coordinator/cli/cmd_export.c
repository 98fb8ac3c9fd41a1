/*
 * cmd_export.c -- `kfarm export --out DIR`: the static dashboard (export.h).
 */
#include <getopt.h>

#include "export.h"
#include "kfarm_cli.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: kfarm export --out DIR [--since TIME] [--db CONNINFO]\n\n"
               "Writes a self-contained static site (index.html, app.js, style.css,\n"
               "data.js) that opens from file:// or any static web server.\n"
               "--since TIME rewrites only what changed after TIME (a PostgreSQL\n"
               "timestamp) and what DIR lacks, as the coordinator's periodic export does.\n");
}

int kf_cli_cmd_export(int argc, char **argv)
{
    static const struct option opts[] = {
        { "db", required_argument, NULL, 'd' }, { "out", required_argument, NULL, 'o' },
        { "since", required_argument, NULL, 's' },
        { "help", no_argument, NULL, 'h' }, { 0 } };
    const char *conninfo = NULL, *out = NULL, *since = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        if (c == 'd') conninfo = optarg;
        else if (c == 'o') out = optarg;
        else if (c == 's') since = optarg;
        else if (c == 'h') return usage(stdout), 0;
        else return usage(stderr), 2;
    }
    if (optind < argc) return kf_cli_usage_error("export", "unexpected argument '%s'", argv[optind]);
    if (!out) return kf_cli_usage_error("export", "--out DIR is required");
    kf_db *db = kf_cli_connect(conninfo);
    if (!db) return 1;
    char err[1024];
    int rc = 0;
    if (kf_export_site_since(db, out, since, err, sizeof(err)) < 0) rc = kf_cli_fail("%s", err);
    else printf("dashboard written to %s/index.html\n", out);
    kf_db_close(db);
    return rc;
}
