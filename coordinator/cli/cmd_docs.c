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

#define CHUNK_TARGET 1500
#define CHUNK_MAX 3000

static void usage(FILE *f)
{
    fprintf(f,
        "usage: kfarm docs add CAMPAIGN FILE...\n"
        "       kfarm docs list CAMPAIGN\n"
        "\n"
        "Load hardware/compiler manuals (text) for retrieval into prompts.\n"
        "  --db CONNINFO  (default $KFARM_DB)\n");
}

/* Insert the chunks of text as document doc. Returns the chunk count or -1. */
static int add_doc(kf_db *db, const char *cid, const char *doc, char *text, char *err, size_t errlen)
{
    const char *pd[2] = { cid, doc };
    if (kf_db_cmd(db, "DELETE FROM doc_chunks WHERE campaign_id = $1::bigint AND document = $2",
                  2, pd, err, errlen) < 0)
        return -1;
    int n = 0;
    size_t len = strlen(text), pos = 0;
    while (pos < len) {
        size_t end = pos + CHUNK_MAX < len ? pos + CHUNK_MAX : len;
        if (end < len) {
            /* prefer a paragraph break after CHUNK_TARGET/2, else a line break */
            size_t cut = 0;
            for (size_t i = pos + CHUNK_TARGET / 2; i + 1 < end; i++)
                if (text[i] == '\n' && text[i + 1] == '\n') {
                    cut = i + 2;
                    if (i >= pos + CHUNK_TARGET) break;
                }
            if (!cut)
                for (size_t i = end - 1; i > pos + CHUNK_TARGET / 2; i--)
                    if (text[i] == '\n') {
                        cut = i + 1;
                        break;
                    }
            if (cut) end = cut;
        }
        /* never split a UTF-8 sequence */
        while (end < len && ((unsigned char)text[end] & 0xc0) == 0x80) end++;
        char save = text[end];
        text[end] = 0;
        const char *s = text + pos;
        while (*s == '\n' || *s == ' ') s++;
        if (*s) {
            char no[16];
            snprintf(no, sizeof(no), "%d", n);
            const char *p[4] = { cid, doc, no, s };
            if (kf_db_cmd(db, "INSERT INTO doc_chunks (campaign_id, document, chunk, content) "
                              "VALUES ($1::bigint, $2, $3::int, $4)", 4, p, err, errlen) < 0) {
                text[end] = save;
                return -1;
            }
            n++;
        }
        text[end] = save;
        pos = end;
    }
    return n;
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
        if (kf_db_begin(db, err, sizeof(err)) < 0) {
            free(text);
            rc = kf_cli_fail("%s", err);
            break;
        }
        int n = add_doc(db, cid, base, text, err, sizeof(err));
        free(text);
        if (n < 0 || kf_db_commit(db, err, sizeof(err)) < 0) {
            kf_db_rollback(db);
            rc = kf_cli_fail("%s: %s", argv[i], err);
            break;
        }
        printf("%s: %d chunks\n", base, n);
    }
    kf_db_close(db);
    return rc;
}
