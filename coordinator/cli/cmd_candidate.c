/*
 * cmd_candidate.c -- `kfarm candidate submit CAMPAIGN FILE [--parent N]` and
 * `kfarm candidate show ID [--json]`.
 *
 * show: one candidate in full: campaign, lineage, defines, per target its
 * final verdict, speedup with the noise interval and CV, times, worker and
 * detail, then the source (with its defines as #define lines on top).
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
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "kf_util.h"
#include "kfarm_cli.h"
#include "strategy_llm.h"

static void usage(FILE *f)
{
    fprintf(f,
        "usage: kfarm candidate submit CAMPAIGN FILE [--parent N]\n"
        "       kfarm candidate show ID [--json]\n"
        "\n"
        "submit: queue your own kernel for evaluation (every target of the campaign;\n"
        "refused when the campaign is done).\n"
        "show: one candidate with its results per target and its source.\n"
        "  --parent N     the candidate it derives from (lineage; default: none)\n"
        "  --db CONNINFO  (default $KFARM_DB)\n");
}

static int do_show(const char *conninfo, const char *ids)
{
    long v;
    if (kf_cli_parse_long(ids, &v) < 0 || v < 1)
        return kf_cli_usage_error("candidate", "show: expected a candidate id, not '%s'", ids);
    kf_db *db = kf_cli_connect(conninfo);
    if (!db) return 1;
    char err[1024];
    int rc = 0;
    const char *p[1] = { ids };
    PGresult *r = kf_db_exec(db,
        "SELECT k.id, c.name AS campaign, k.parent_id AS parent, k.proposer, k.defines, k.note,"
        "  to_char(k.created_at, 'YYYY-MM-DD HH24:MI:SS') AS created, k.source,"
        "  (SELECT json_agg(json_build_object('target', j.target, 'state', j.state,"
        "     'verdict', e.verdict, 'speedup', e.speedup, 'speedup_lo', e.speedup_lo,"
        "     'speedup_hi', e.speedup_hi, 'cv', e.cv, 'candidate_us', e.candidate_us,"
        "     'baseline_us', e.baseline_us, 'worker', e.worker_id, 'attempts', j.attempts,"
        "     'detail', e.detail, 'confirmation', e.confirmation, 'confirmed_by', e.confirmed_by_worker) ORDER BY array_position(c.targets, j.target))"
        "   FROM job_keys jk JOIN jobs j ON j.id = jk.job_id"
        "   LEFT JOIN evaluations e ON e.job_id = j.id AND e.is_final"
        "   WHERE jk.candidate_id = k.id AND jk.verifies IS NULL) AS results "
        "FROM candidates k JOIN campaigns c ON c.id = k.campaign_id WHERE k.id = $1::bigint",
        1, p, err, sizeof(err));
    if (!r) {
        rc = kf_cli_fail("%s", err);
    } else if (PQntuples(r) == 0) {
        rc = kf_cli_fail("no candidate %s (see kfarm candidates CAMPAIGN)", ids);
    } else if (kf_cli_json) {
        kf_cli_print_json(r, stdout);
    } else {
        char defs[1024];
        printf("candidate:  %s of campaign %s (%s, %s)\n", PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1),
               PQgetvalue(r, 0, 3), PQgetvalue(r, 0, 6));
        printf("parent:     %s\n", kf_db_str(r, 0, 2) ? kf_db_str(r, 0, 2) : "-");
        printf("defines:    %s\n", kf_status_defines(kf_db_str(r, 0, 4), defs, sizeof(defs)));
        if (kf_db_str(r, 0, 5)) printf("note:       %s\n", kf_db_str(r, 0, 5));
        json_t *res = json_loads(kf_db_str(r, 0, 8) ? kf_db_str(r, 0, 8) : "[]", 0, NULL);
        size_t i;
        json_t *o;
        json_array_foreach(res, i, o) {
            const char *verdict = json_string_value(json_object_get(o, "verdict"));
            printf("%-11s %s", i ? "" : "results:", json_string_value(json_object_get(o, "target")));
            if (!verdict) {
                printf(": %s\n", json_string_value(json_object_get(o, "state")));
                continue;
            }
            printf(": %s", verdict);
            if (json_is_number(json_object_get(o, "speedup"))) {
                printf(" %.3fx", json_number_value(json_object_get(o, "speedup")));
                if (json_is_number(json_object_get(o, "speedup_lo")))
                    printf(" [%.2f-%.2fx] CV %.2f", json_number_value(json_object_get(o, "speedup_lo")),
                           json_number_value(json_object_get(o, "speedup_hi")),
                           json_number_value(json_object_get(o, "cv")));
                printf(" (%.2f us vs baseline %.2f us)",
                       json_number_value(json_object_get(o, "candidate_us")),
                       json_number_value(json_object_get(o, "baseline_us")));
            }
            const char *w = json_string_value(json_object_get(o, "worker"));
            const char *d = json_string_value(json_object_get(o, "detail"));
            printf("%s%s\n", w ? ", worker " : "", w ? w : "");
            if (d) printf("%-11s   %.*s\n", "", (int)strcspn(d, "\n"), d);
        }
        json_decref(res);
        printf("source:\n");
        json_t *dj = json_loads(kf_db_str(r, 0, 4) ? kf_db_str(r, 0, 4) : "{}", 0, NULL);
        const char *k;
        json_t *v;
        json_object_foreach(dj, k, v)
            printf("#define %s %s\n", k, json_is_string(v) ? json_string_value(v) : "");
        json_decref(dj);
        fputs(PQgetvalue(r, 0, 7), stdout);
    }
    if (r) PQclear(r);
    kf_db_close(db);
    return rc;
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
    if (optind + 2 == argc && !strcmp(argv[optind], "show")) return do_show(conninfo, argv[optind + 1]);
    if (optind + 3 != argc || strcmp(argv[optind], "submit"))
        return kf_cli_usage_error("candidate", "expected: submit CAMPAIGN FILE, or show ID");
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
    char err[1024];
    int rc = 1;
    if (kf_cli_campaign_id(db, name, &id) < 0) goto out;
    int64_t pid = 0;
    int s = kf_strategy_llm_submit(db, (int64_t)id, parent, src, &pid, err, sizeof(err));
    if (s == -2) {
        rc = kf_cli_fail("campaign %s %s", name, err);
        goto out;
    }
    if (s < 0) goto dberr;
    char pids[24];
    snprintf(pids, sizeof(pids), "%lld", (long long)pid);
    const char *pq[1] = { pids };
    PGresult *r = kf_db_exec(db, "SELECT state, candidate_id, reason, (SELECT count(*) FROM candidates k "
                                 "WHERE k.proposal_id = p.id) FROM proposals p WHERE id = $1::bigint",
                             1, pq, err, sizeof(err));
    if (!r) goto dberr;
    if (PQntuples(r) == 1 && !strcmp(PQgetvalue(r, 0, 0), "done")) {
        printf("candidate %s queued (%s variants, proposal %s)\n", PQgetvalue(r, 0, 1),
               PQgetvalue(r, 0, 3), pids);
        rc = 0;
    } else {
        rc = kf_cli_fail("not queued: %s", PQntuples(r) == 1 ? PQgetvalue(r, 0, 2) : "proposal vanished");
    }
    PQclear(r);
    goto out;
dberr:
    rc = kf_cli_fail("%s", err);
out:
    kf_db_close(db);
    free(src);
    return rc;
}
