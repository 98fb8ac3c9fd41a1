/*
 * cmd_review.c -- `kfarm review list|show|approve|reject CAMPAIGN [ID]`.
 *
 * With "review": true in a campaign's config, every code-bearing reply of
 * the model waits in state review: nothing is compiled or run until a
 * person approves it. approve materializes the proposal at once (its
 * candidates -- tunable variants included -- and jobs, under the campaign's
 * row lock, in one transaction); reject records the reviewer's reason,
 * which later prompts show among the recent failures.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "kfarm_cli.h"
#include "strategy_llm.h"

static void usage(FILE *f)
{
    fprintf(f,
        "usage: kfarm review list CAMPAIGN\n"
        "       kfarm review show CAMPAIGN ID [--prompt]\n"
        "       kfarm review approve CAMPAIGN ID [--note TEXT]\n"
        "       kfarm review reject CAMPAIGN ID [--note TEXT]\n"
        "\n"
        "Proposals of a campaign with \"review\": true wait here until approved.\n"
        "  --prompt     show: also print the prompt the model was given\n"
        "  --note TEXT  approve/reject: the reviewer's note (reject: the reason)\n"
        "  --db CONNINFO  (default $KFARM_DB)\n");
}

static int do_list(kf_db *db, const char *cid)
{
    const char *p[1] = { cid };
    char err[1024];
    PGresult *r = kf_db_exec(db,
        "SELECT p.id::text AS id, p.kind, COALESCE(p.round::text, '-') AS round,"
        " p.parent_id::text AS parent, p.model,"
        " (COALESCE(p.prompt_tokens, 0) + COALESCE(p.completion_tokens, 0))::text AS tokens,"
        " length(p.code)::text AS code_chars, to_char(p.answered_at, 'MM-DD HH24:MI:SS') AS answered,"
        " left(regexp_replace(split_part(COALESCE(p.reply, ''), '```', 1), '\\s+', ' ', 'g'), 60) AS idea"
        " FROM proposals p WHERE p.campaign_id = $1::bigint AND p.state = 'review' ORDER BY p.id",
        1, p, err, sizeof(err));
    if (!r) return kf_cli_fail("%s", err);
    if (kf_cli_json) {
        kf_cli_print_json(r, stdout);
        PQclear(r);
        return 0;
    }
    if (PQntuples(r) == 0) {
        printf("nothing waiting for review\n");
        PQclear(r);
        return 0;
    }
    static const char *const hdr[] = { "ID", "KIND", "ROUND", "PARENT", "MODEL", "TOKENS",
                                       "CODE CHARS", "ANSWERED", "IDEA" };
    kf_cli_table t;
    kf_cli_table_init(&t, 9, hdr);
    t.right[0] = t.right[5] = t.right[6] = 1;
    for (int i = 0; i < PQntuples(r); i++) {
        const char *row[9];
        for (int c = 0; c < 9; c++) row[c] = kf_db_str(r, i, c);
        kf_cli_table_row(&t, row);
    }
    kf_cli_table_print(&t, stdout, 60);
    PQclear(r);
    return 0;
}

static int do_show(kf_db *db, const char *cid, const char *id, int with_prompt)
{
    const char *p[2] = { cid, id };
    char err[1024];
    PGresult *r = kf_db_exec(db,
        "SELECT state, kind, round, slot, parent_id, model, temperature, prompt_tokens,"
        " completion_tokens, finish_reason, reason, reply, code, system_prompt, prompt,"
        " candidate_id, reviewer_note, (SELECT source FROM candidates k WHERE k.id = q.parent_id)"
        " FROM proposals q WHERE campaign_id = $1::bigint AND id = $2::bigint",
        2, p, err, sizeof(err));
    if (!r) return kf_cli_fail("%s", err);
    if (PQntuples(r) == 0) {
        PQclear(r);
        return kf_cli_fail("no proposal %s in this campaign", id);
    }
#define S(c) (kf_db_str(r, 0, c) ? kf_db_str(r, 0, c) : "-")
    printf("proposal:   %s (%s, %s)\n", id, S(1), S(0));
    printf("round/slot: %s/%s, parent candidate %s\n", S(2), S(3), S(4));
    printf("model:      %s, temperature %s, tokens %s + %s, finish_reason %s\n", S(5), S(6), S(7),
           S(8), S(9));
    if (kf_db_str(r, 0, 10)) printf("reason:     %s\n", S(10));
    if (kf_db_str(r, 0, 15)) printf("candidate:  %s\n", S(15));
    if (kf_db_str(r, 0, 16)) printf("note:       %s\n", S(16));
    if (with_prompt) printf("\n----- system -----\n%s\n----- prompt -----\n%s\n", S(13), S(14));
    if (kf_db_str(r, 0, 11)) printf("\n----- reply -----\n%s\n", S(11));
    if (kf_db_str(r, 0, 12)) printf("\n----- code -----\n%s", S(12));
    if (kf_db_str(r, 0, 12) && kf_db_str(r, 0, 17)) {
        char from[64], to[64];
        snprintf(from, sizeof(from), "candidate %s (parent)", S(4));
        snprintf(to, sizeof(to), "proposal %s", id);
        printf("\n----- diff to the parent -----\n");
        fflush(stdout);
        kf_cli_diff(kf_db_str(r, 0, 17), kf_db_str(r, 0, 12), from, to, stdout);
    }
#undef S
    PQclear(r);
    return 0;
}

static int decide(kf_db *db, const char *cid, const char *id, int approve, const char *note)
{
    char err[1024];
    int n = kf_strategy_llm_review(db, strtoll(cid, NULL, 10), strtoll(id, NULL, 10), approve, note, err,
                                   sizeof(err));
    if (n < 0) return kf_cli_fail("%s", err);
    if (n == 0) return kf_cli_fail("proposal %s is not waiting for review (see kfarm review list)", id);
    const char *pi[1] = { id };
    PGresult *r = kf_db_exec(db, "SELECT state, candidate_id, reason, (SELECT count(*) FROM candidates k"
                                 " WHERE k.proposal_id = p.id) FROM proposals p WHERE id = $1::bigint",
                             1, pi, err, sizeof(err));
    if (!r) return kf_cli_fail("%s", err);
    if (!approve) printf("proposal %s rejected\n", id);
    else if (PQntuples(r) == 1 && !strcmp(PQgetvalue(r, 0, 0), "done"))
        printf("proposal %s approved: candidate %s queued (%s variants)\n", id,
               PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 3));
    else
        printf("proposal %s approved but not evaluated: %s\n", id, PQntuples(r) == 1 ? PQgetvalue(r, 0, 2) : "?");
    PQclear(r);
    return 0;
}

int kf_cli_cmd_review(int argc, char **argv)
{
    static const struct option opts[] = {
        { "db", required_argument, NULL, 'd' },
        { "note", required_argument, NULL, 'n' },
        { "prompt", no_argument, NULL, 'p' },
        { "help", no_argument, NULL, 'h' },
        { 0 },
    };
    const char *conninfo = NULL, *note = NULL;
    int with_prompt = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': conninfo = optarg; break;
        case 'n': note = optarg; break;
        case 'p': with_prompt = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind + 2 > argc) return kf_cli_usage_error("review", "expected SUBCOMMAND CAMPAIGN");
    const char *sub = argv[optind], *name = argv[optind + 1];
    const char *id = optind + 2 < argc ? argv[optind + 2] : NULL;
    int needs_id = strcmp(sub, "list") != 0;
    if (strcmp(sub, "list") && strcmp(sub, "show") && strcmp(sub, "approve") && strcmp(sub, "reject"))
        return kf_cli_usage_error("review", "unknown subcommand '%s'", sub);
    long v;
    if (needs_id && (!id || kf_cli_parse_long(id, &v) < 0))
        return kf_cli_usage_error("review", "%s: expected a proposal ID", sub);
    if (optind + 2 + needs_id < argc)
        return kf_cli_usage_error("review", "unexpected argument '%s'", argv[optind + 2 + needs_id]);
    kf_db *db = kf_cli_connect(conninfo);
    if (!db) return 1;
    long long cidv;
    int rc;
    if (kf_cli_campaign_id(db, name, &cidv) < 0) {
        kf_db_close(db);
        return 1;
    }
    char cid[24];
    snprintf(cid, sizeof(cid), "%lld", cidv);
    if (!strcmp(sub, "list")) rc = do_list(db, cid);
    else if (!strcmp(sub, "show")) rc = do_show(db, cid, id, with_prompt);
    else rc = decide(db, cid, id, !strcmp(sub, "approve"), note);
    kf_db_close(db);
    return rc;
}
