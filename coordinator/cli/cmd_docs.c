/*
 * cmd_docs.c -- `kfarm docs add|list CAMPAIGN [FILE...]`: reference
 * documents for prompts.
 *
 * Hardware and compiler manuals (text or Markdown: PTX ISA excerpts, tuning
 * guides, compiler option lists) are cut into chunks of about 1500
 * characters on paragraph boundaries and stored in doc_chunks, whose
 * generated tsvector column is indexed for PostgreSQL full-text search.
 * Prompts then include the few chunks that best match the task and the
 * parent's errors (prompt.c). Adding a document again replaces it. Only
 * manuals belong here: the farm never shows a model example kernels.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "kf_util.h"
#include "kfarm_cli.h"
#include "prompt.h"

static void usage(FILE *f)
{
    fprintf(f,
        "usage: kfarm docs add CAMPAIGN FILE...\n"
        "       kfarm docs list CAMPAIGN\n"
        "\n"
        "Load hardware/compiler manuals (text) for retrieval into prompts.\n"
        "  --db CONNINFO  (default $KFARM_DB)\n");
}



int kf_cli_cmd_docs(int argc, char **argv)
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
    if (optind + 2 > argc) return kf_cli_usage_error("docs", "expected SUBCOMMAND CAMPAIGN");
    const char *sub = argv[optind], *name = argv[optind + 1];
    int add = !strcmp(sub, "add");
    if (!add && strcmp(sub, "list")) return kf_cli_usage_error("docs", "unknown subcommand '%s'", sub);
    if (add && optind + 3 > argc) return kf_cli_usage_error("docs", "add: expected CAMPAIGN FILE...");
    kf_db *db = kf_cli_connect(conninfo);
    if (!db) return 1;
    long long id;
    char cid[24], err[1024];
    int rc = 0;
    if (kf_cli_campaign_id(db, name, &id) < 0) {
        kf_db_close(db);
        return 1;
    }
    snprintf(cid, sizeof(cid), "%lld", id);
    if (!add) {
        const char *p[1] = { cid };
        PGresult *r = kf_db_exec(db, "SELECT document, count(*) AS chunks, sum(length(content)) AS characters "
                                     "FROM doc_chunks WHERE campaign_id = $1::bigint GROUP BY document "
                                     "ORDER BY document", 1, p, err, sizeof(err));
        if (!r) rc = kf_cli_fail("%s", err);
        else if (kf_cli_json) {
            kf_cli_print_json(r, stdout);
            PQclear(r);
        } else {
            if (PQntuples(r) == 0) printf("no documents yet\n");
            for (int i = 0; i < PQntuples(r); i++)
                printf("%s  %s chunks, %s characters\n", PQgetvalue(r, i, 0), PQgetvalue(r, i, 1),
                       PQgetvalue(r, i, 2));
            PQclear(r);
        }
        kf_db_close(db);
        return rc;
    }
    for (int i = optind + 2; i < argc && rc == 0; i++) {
        size_t len = 0;
        char *text = kf_util_read_file(argv[i], &len, 16u << 20);
        if (!text) {
            rc = kf_cli_fail("%s: cannot read it (or larger than 16 MiB)", argv[i]);
            break;
        }
        if (memchr(text, 0, len)) {
            free(text);
            rc = kf_cli_fail("%s: binary file (convert manuals to text first, e.g. pdftotext)", argv[i]);
            break;
        }
        kf_db_utf8_sanitize(text);
        const char *base = strrchr(argv[i], '/');
        base = base ? base + 1 : argv[i];
        int n = kf_prompt_doc_add(db, strtoll(cid, NULL, 10), base, text, err, sizeof(err));
        free(text);
        if (n < 0) {
            rc = kf_cli_fail("%s: %s", argv[i], err);
            break;
        }
        printf("%s: %d chunks\n", base, n);
    }
    kf_db_close(db);
    return rc;
}
