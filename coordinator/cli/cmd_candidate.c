/*
 * cmd_candidate.c -- `kfarm candidate submit CAMPAIGN FILE [--parent N]`.
 *
 * A person's own kernel joins the campaign like an approved proposal (kind
 * human): the same deduplication (normalized source), the same tunable
 * expansion (`// kfarm:tune` lines become variants), one job per target,
 * all in one transaction under the campaign's row lock. LLM strategies then
 * treat it like any other candidate: if it is the fastest, the next round
 * builds on it.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "kf_util.h"
#include "kfarm_cli.h"
#include "strategy_llm.h"

static void usage(FILE *f)
{
    fprintf(f,
        "usage: kfarm candidate submit CAMPAIGN FILE [--parent N]\n"
        "\n"
        "Queue your own kernel for evaluation (every target of the campaign).\n"
        "  --parent N     the candidate it derives from (lineage; default: none)\n"
        "  --db CONNINFO  (default $KFARM_DB)\n");
}

int kf_cli_cmd_candidate(int argc, char **argv)
{
    static const struct option opts[] = {
        { "db", required_argument, NULL, 'd' },
        { "parent", required_argument, NULL, 'p' },
        { "help", no_argument, NULL, 'h' },
        { 0 },
    };
    const char *conninfo = NULL, *parent = NULL;
    long v;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': conninfo = optarg; break;
        case 'p':
            if (kf_cli_parse_long(optarg, &v) < 0 || v < 1)
                return kf_cli_usage_error("candidate", "--parent: expected a candidate id");
            parent = optarg;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind + 3 != argc || strcmp(argv[optind], "submit"))
        return kf_cli_usage_error("candidate", "expected: submit CAMPAIGN FILE");
    const char *name = argv[optind + 1], *path = argv[optind + 2];
    size_t len = 0;
    char *src = kf_util_read_file(path, &len, 1u << 20);
    if (!src)
        return kf_cli_fail("%s: %s", path, errno == EFBIG ? "larger than 1 MiB (a candidate is one source file)"
                                                          : strerror(errno));
    if (!kf_db_utf8_valid(src, len)) {
        free(src);
        return kf_cli_fail("%s: not UTF-8 text", path);
    }
    size_t k = 0;
    while (k < len && (src[k] == ' ' || src[k] == '\t' || src[k] == '\n' || src[k] == '\r')) k++;
    if (k == len) {
        free(src);
        return kf_cli_fail("%s: empty file (a candidate must define kf_entry)", path);
    }
    kf_db *db = kf_cli_connect(conninfo);
    if (!db) {
        free(src);
        return 1;
    }
    long long id;
    char cid[24], err[1024];
    int rc = 1;
    if (kf_cli_campaign_id(db, name, &id) < 0) goto out;
    snprintf(cid, sizeof(cid), "%lld", id);
    if (kf_db_begin(db, err, sizeof(err)) < 0) goto dberr;
    const char *pl[1] = { cid };
    PGresult *rs = kf_db_exec(db, "SELECT state FROM campaigns WHERE id = $1::bigint FOR UPDATE",
                              1, pl, err, sizeof(err));
    if (!rs) goto dberr;
    int finished = PQntuples(rs) == 1 && !strcmp(PQgetvalue(rs, 0, 0), "done");
    PQclear(rs);
    if (finished) {
        /* its jobs would never be handed out: say so instead of queueing */
        kf_db_rollback(db);
        rc = kf_cli_fail("campaign %s is done: it evaluates nothing more (create a new campaign "
                         "with this file as --seed)", name);
        goto out;
    }
    if (parent) {
        const char *pp[2] = { cid, parent };
        PGresult *r = kf_db_exec(db, "SELECT 1 FROM candidates WHERE campaign_id = $1::bigint "
                                     "AND id = $2::bigint", 2, pp, err, sizeof(err));
        if (!r) goto dberr;
        int ok = PQntuples(r) == 1;
        PQclear(r);
        if (!ok) {
            kf_db_rollback(db);
            rc = kf_cli_fail("--parent %s: no such candidate in campaign %s", parent, name);
            goto out;
        }
    }
    const char *pi[3] = { cid, parent, src };
    PGresult *r = kf_db_exec(db,
        "INSERT INTO proposals (campaign_id, kind, state, parent_id, code, model, answered_at) "
        "VALUES ($1::bigint, 'human', 'approved', $2::bigint, $3, 'human', now()) RETURNING id",
        3, pi, err, sizeof(err));
    if (!r) goto dberr;
    char pid[24];
    snprintf(pid, sizeof(pid), "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    if (kf_strategy_llm_materialize(db, strtoll(pid, NULL, 10), err, sizeof(err)) < 0) goto dberr;
    const char *pq[1] = { pid };
    r = kf_db_exec(db, "SELECT state, candidate_id, reason, (SELECT count(*) FROM candidates k "
                       "WHERE k.proposal_id = p.id) FROM proposals p WHERE id = $1::bigint",
                   1, pq, err, sizeof(err));
    if (!r) goto dberr;
    if (kf_db_commit(db, err, sizeof(err)) < 0) {
        PQclear(r);
        goto dberr;
    }
    if (!strcmp(PQgetvalue(r, 0, 0), "done")) {
        printf("candidate %s queued (%s variants, proposal %s)\n", PQgetvalue(r, 0, 1),
               PQgetvalue(r, 0, 3), pid);
        rc = 0;
    } else {
        rc = kf_cli_fail("not queued: %s", PQgetvalue(r, 0, 2));
    }
    PQclear(r);
    goto out;
dberr:
    kf_db_rollback(db);
    rc = kf_cli_fail("%s", err);
out:
    kf_db_close(db);
    free(src);
    return rc;
}
