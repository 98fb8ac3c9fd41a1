/*
 * cmd_best.c -- `kfarm best NAME [--out FILE]`: the fastest passing
 * candidate's source, with its tunable values as #define lines on top, so
 * the file compiles as is without -D flags. Results confirmed by a second
 * evaluation (evaluations.confirmation, coordinator/verify.h) rank first;
 * disputed ones are never named; an unconfirmed best says so.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "kf_util.h"
#include "kfarm_cli.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: kfarm best NAME [--target CLASS] [--out FILE] [--db CONNINFO]\n\n"
               "Writes the source of campaign NAME's fastest passing candidate (highest\n"
               "speedup; on CLASS if given) with its defines as #define lines at the top,\n"
               "to FILE or stdout.\n");
}

/* Header comment + #defines + source, malloc'ed. */
static char *compose(PGresult *r, const char *name)
{
    json_error_t je;
    json_t *defs = json_loads(PQgetvalue(r, 0, 1), 0, &je);
    size_t cap = (size_t)PQgetlength(r, 0, 0) + 4096;
    const char *k;
    json_t *v;
    json_object_foreach(defs, k, v) cap += strlen(k) + 64 +
        (json_is_string(v) ? strlen(json_string_value(v)) : 0);
    char *out = malloc(cap);
    if (!out) {
        json_decref(defs);
        return NULL;
    }
    size_t n = (size_t)snprintf(out, cap,
        "/* kfarm best of campaign %s: candidate %s on %s, speedup %.3fx\n"
        " * (%.2f us vs baseline %.2f us, measured by worker %s; %s%s%s). */\n",
        name, PQgetvalue(r, 0, 2), PQgetvalue(r, 0, 3), kf_db_f64(r, 0, 4, 0),
        kf_db_f64(r, 0, 5, 0), kf_db_f64(r, 0, 6, 0),
        kf_db_str(r, 0, 7) ? kf_db_str(r, 0, 7) : "?",
        !strcmp(PQgetvalue(r, 0, 8), "confirmed") ? "confirmed by worker " : "NOT CONFIRMED: ",
        !strcmp(PQgetvalue(r, 0, 8), "confirmed") ? PQgetvalue(r, 0, 9) : PQgetvalue(r, 0, 8),
        !strcmp(PQgetvalue(r, 0, 8), "confirmed") ? "" : " (no second evaluation agreed yet)");
    json_object_foreach(defs, k, v)
        n += (size_t)snprintf(out + n, cap - n, "#define %s %s\n", k,
                              json_is_string(v) ? json_string_value(v) : "");
    snprintf(out + n, cap - n, "%s", PQgetvalue(r, 0, 0));
    json_decref(defs);
    return out;
}

int kf_cli_cmd_best(int argc, char **argv)
{
    static const struct option opts[] = {
        { "db", required_argument, NULL, 'd' }, { "target", required_argument, NULL, 't' },
        { "out", required_argument, NULL, 'o' }, { "help", no_argument, NULL, 'h' }, { 0 } };
    const char *conninfo = NULL, *target = NULL, *out = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        if (c == 'd') conninfo = optarg;
        else if (c == 't') target = optarg;
        else if (c == 'o') out = optarg;
        else if (c == 'h') return usage(stdout), 0;
        else return usage(stderr), 2;
    }
    if (optind >= argc) return kf_cli_usage_error("best", "missing campaign NAME");
    if (optind + 1 < argc)
        return kf_cli_usage_error("best", "unexpected argument '%s'", argv[optind + 1]);
    const char *name = argv[optind];
    kf_db *db = kf_cli_connect(conninfo);
    if (!db) return 1;
    long long id;
    if (kf_cli_campaign_id(db, name, &id) < 0) {
        kf_db_close(db);
        return 1;
    }
    char ids[24], err[1024];
    snprintf(ids, sizeof(ids), "%lld", id);
    const char *p[2] = { ids, target };
    int rc = 0;
    PGresult *r = kf_db_exec(db,
        "SELECT k.source, k.defines::text, k.id, j.target, e.speedup, e.candidate_us,"
        " e.baseline_us, e.worker_id, e.confirmation, COALESCE(e.confirmed_by_worker, '')"
        " FROM evaluations e JOIN jobs j ON j.id = e.job_id"
        " JOIN candidates k ON k.id = e.candidate_id"
        " WHERE j.campaign_id = $1::bigint AND j.purpose = 'eval' AND e.is_final AND e.verdict = 'ok'"
        "   AND e.speedup IS NOT NULL AND e.confirmation <> 'disputed'"
        "   AND ($2::text IS NULL OR j.target = $2)"
        " ORDER BY e.confirmation = 'confirmed' DESC, e.speedup DESC, k.id LIMIT 1", 2, p, err,
        sizeof(err));
    if (!r) {
        rc = kf_cli_fail("%s", err);
    } else if (PQntuples(r) == 0) {
        rc = kf_cli_fail("campaign %s has no passing candidate%s%s yet (see kfarm candidates %s)",
                         name, target ? " on " : "", target ? target : "", name);
    } else {
        char *text = compose(r, name);
        if (!text) rc = kf_cli_fail("out of memory");
        else if (out) {
            if (kf_util_write_file(out, text, strlen(text)) < 0)
                rc = kf_cli_fail("cannot write %s", out);
            else
                fprintf(stderr, "kfarm: candidate %s (%.3fx on %s, %s%s) written to %s\n",
                        PQgetvalue(r, 0, 2), kf_db_f64(r, 0, 4, 0), PQgetvalue(r, 0, 3),
                        PQgetvalue(r, 0, 8),
                        !strcmp(PQgetvalue(r, 0, 8), "confirmed") ? " by another evaluation" : "", out);
        } else {
            fputs(text, stdout);
        }
        free(text);
    }
    if (r) PQclear(r);
    kf_db_close(db);
    return rc;
}
