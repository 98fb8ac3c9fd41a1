/*
 * cmd_hint.c -- `kfarm hint add|list CAMPAIGN [TEXT]`: advice for the model.
 *
 * Hints are free text from the engineers running a campaign ("the rows are
 * short: parallelize across rows, not within"); every later prompt of the
 * campaign lists them all, oldest first.
 */
#include <getopt.h>
#include <string.h>

#include "kfarm_cli.h"
#include "prompt.h"

static void usage(FILE *f)
{
    fprintf(f,
        "usage: kfarm hint add CAMPAIGN \"TEXT\"\n"
        "       kfarm hint list CAMPAIGN\n"
        "\n"
        "Hints appear in every later prompt of the campaign (LLM strategies).\n"
        "  --db CONNINFO  (default $KFARM_DB)\n");
}

int kf_cli_cmd_hint(int argc, char **argv)
{
    static const struct option opts[] = {
        { "db", required_argument, NULL, 'd' },
        { "help", no_argument, NULL, 'h' },
        { 0 },
    };
    const char *conninfo = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': conninfo = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind + 2 > argc) return kf_cli_usage_error("hint", "expected SUBCOMMAND CAMPAIGN");
    const char *sub = argv[optind], *name = argv[optind + 1];
    int add = !strcmp(sub, "add");
    if (!add && strcmp(sub, "list")) return kf_cli_usage_error("hint", "unknown subcommand '%s'", sub);
    if (add && optind + 3 != argc) return kf_cli_usage_error("hint", "add: expected CAMPAIGN \"TEXT\"");
    if (!add && optind + 2 != argc) return kf_cli_usage_error("hint", "list: expected CAMPAIGN");
    const char *text = add ? argv[optind + 2] : NULL;
    if (add && (!*text || strlen(text) > 4000 || !kf_db_utf8_valid(text, strlen(text))))
        return kf_cli_usage_error("hint", "the hint must be 1..4000 characters of UTF-8 text");
    kf_db *db = kf_cli_connect(conninfo);
    if (!db) return 1;
    long long id;
    int rc = 0;
    char cid[24], err[1024];
    if (kf_cli_campaign_id(db, name, &id) < 0) {
        kf_db_close(db);
        return 1;
    }
    snprintf(cid, sizeof(cid), "%lld", id);
    if (add) {
        int64_t hid;
        if (kf_prompt_hint_add(db, (int64_t)id, text, &hid, err, sizeof(err)) < 0) rc = kf_cli_fail("%s", err);
        else printf("hint %lld added to %s (used by the next prompts)\n", (long long)hid, name);
    } else {
        const char *p[1] = { cid };
        PGresult *r = kf_db_exec(db, "SELECT id, to_char(created_at, 'YYYY-MM-DD HH24:MI') AS created, text "
                                     "FROM hints WHERE campaign_id = $1::bigint ORDER BY id",
                                 1, p, err, sizeof(err));
        if (!r) rc = kf_cli_fail("%s", err);
        else if (kf_cli_json) {
            kf_cli_print_json(r, stdout);
            PQclear(r);
        } else {
            if (PQntuples(r) == 0) printf("no hints yet\n");
            for (int i = 0; i < PQntuples(r); i++)
                printf("%s  %s  %s\n", PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), PQgetvalue(r, i, 2));
            PQclear(r);
        }
    }
    kf_db_close(db);
    return rc;
}
