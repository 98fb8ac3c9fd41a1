/*
 * cmd_best.c -- `kfarm best NAME [--target CLASS] [--out FILE] [--json]`:
 * the winning candidate's source, with its tunable values as #define lines
 * on top, so the file compiles as is without -D flags.
 *
 * Without --target the winner must be ok on every target of the campaign
 * (ranked by the geometric mean of its speedups); with --target it is the
 * fastest ok candidate there. The header comment gives each speedup with
 * its noise interval and CV, the candidates tied with it within the noise,
 * and faster candidates that are not ok everywhere (bests.h). --json prints
 * the per-target and overall bests instead of a source.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "bests.h"
#include "kf_util.h"
#include "kfarm_cli.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: kfarm best NAME [--target CLASS] [--out FILE] [--json] [--db CONNINFO]\n\n"
               "Writes the source of campaign NAME's best candidate with its defines as\n"
               "#define lines at the top, to FILE or stdout. Without --target the best is\n"
               "the fastest candidate that is ok on every target (geometric mean of its\n"
               "speedups); with --target, the fastest ok candidate on CLASS. Speedups come\n"
               "with a 95%% noise interval and the CV; overlapping intervals are ties.\n"
               "--json prints the bests per target and overall.\n");
}

static double jd(json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }

/* "1.234x [1.10x, 1.38x] CV 0.05" */
static void speed_text(json_t *r, char *buf, size_t cap)
{
    json_t *cv = json_object_get(r, "cv");
    if (json_is_number(cv))
        snprintf(buf, cap, "%.3fx [%.2fx, %.2fx] CV %.2f", jd(r, "speedup"), jd(r, "lo"), jd(r, "hi"),
                 json_number_value(cv));
    else
        snprintf(buf, cap, "%.3fx (no noise recorded)", jd(r, "speedup"));
}

static void result_line(kf_strbuf *b, const char *target, json_t *r)
{
    char sp[128];
    speed_text(r, sp, sizeof(sp));
    const char *w = json_string_value(json_object_get(r, "worker"));
    const char *conf = json_string_value(json_object_get(r, "confirmation"));
    const char *by = json_string_value(json_object_get(r, "confirmed_by"));
    int ok = conf && !strcmp(conf, "confirmed");
    /* fleet trust: say whether a second evaluation agreed (coordinator/verify.h) */
    kf_strbuf_printf(b, " *   %s: %s (%.2f us vs baseline %.2f us, measured by worker %s; %s%s%s)\n", target, sp,
                     jd(r, "candidate_us"), jd(r, "baseline_us"), w ? w : "?",
                     ok ? "confirmed by worker " : "NOT CONFIRMED: ", ok ? (by ? by : "?") : (conf ? conf : "none"),
                     ok ? "" : ", no second evaluation agreed yet");
}

static void ties_line(kf_strbuf *b, json_t *ties, int ids)
{
    if (json_array_size(ties) == 0) return;
    kf_strbuf_add(b, " * tied within the noise with candidate");
    kf_strbuf_add(b, json_array_size(ties) > 1 ? "s" : "");
    size_t i;
    json_t *t;
    json_array_foreach(ties, i, t) {
        if (i == 8) {
            kf_strbuf_printf(b, " and %zu more", json_array_size(ties) - 8);
            break;
        }
        kf_strbuf_printf(b, "%s %lld", i ? "," : "",
                         (long long)json_integer_value(ids ? t : json_object_get(t, "candidate")));
    }
    kf_strbuf_add(b, "\n");
}

static void not_everywhere_lines(kf_strbuf *b, json_t *ne, const char *prefix, const char *end)
{
    size_t i;
    json_t *o;
    json_array_foreach(ne, i, o) {
        kf_strbuf_printf(b, "%scandidate %lld is fastest on %s (%.3fx) but not ok on", prefix,
                         (long long)json_integer_value(json_object_get(o, "candidate")),
                         json_string_value(json_object_get(o, "fast_on")), jd(o, "speedup"));
        size_t k;
        json_t *x;
        json_array_foreach(json_object_get(o, "not_ok"), k, x)
            kf_strbuf_printf(b, "%s %s (%s)", k ? "," : "", json_string_value(json_object_get(x, "target")),
                             json_string_value(json_object_get(x, "verdict")));
        kf_strbuf_add(b, end);
    }
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
    char err[1024];
    int rc = 0;
    json_t *bests = kf_bests(db, (int64_t)id, err, sizeof(err));
    PGresult *r = NULL;
    kf_strbuf b = { 0 };
    if (!bests) {
        rc = kf_cli_fail("%s", err);
        goto done;
    }
    if (kf_cli_json) {
        json_dumpf(bests, stdout, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
        fputc('\n', stdout);
        goto done;
    }
    json_t *win = NULL, *tgt = NULL;
    if (target) {
        size_t i;
        json_t *t;
        json_array_foreach(json_object_get(bests, "targets"), i, t)
            if (!strcmp(json_string_value(json_object_get(t, "target")), target)) tgt = t;
        if (!tgt) {
            rc = kf_cli_fail("campaign %s has no target %s", name, target);
            goto done;
        }
        win = json_object_get(tgt, "best");
        if (json_is_null(win)) {
            rc = kf_cli_fail("campaign %s has no passing candidate on %s yet (see kfarm candidates %s)",
                             name, target, name);
            goto done;
        }
    } else {
        win = json_object_get(bests, "overall");
        if (json_is_null(win)) {
            kf_strbuf why = { 0 };
            not_everywhere_lines(&why, json_object_get(bests, "not_everywhere"), "; ", "");
            rc = kf_cli_fail("campaign %s has no candidate that is ok on every target yet%s "
                             "(per target: kfarm best %s --target CLASS)", name,
                             why.s ? why.s : "", name);
            free(why.s);
            goto done;
        }
    }
    char cs[24];
    snprintf(cs, sizeof(cs), "%lld", (long long)json_integer_value(json_object_get(win, "candidate")));
    const char *p[1] = { cs };
    r = kf_db_exec(db, "SELECT source FROM candidates WHERE id = $1::bigint", 1, p, err, sizeof(err));
    if (!r || PQntuples(r) != 1) {
        rc = kf_cli_fail("%s", r ? "candidate vanished" : err);
        goto done;
    }
    if (target) {
        kf_strbuf_printf(&b, "/* kfarm best of campaign %s on %s: candidate %s\n", name, target, cs);
        result_line(&b, target, win);
        ties_line(&b, json_object_get(tgt, "ties"), 0);
    } else {
        kf_strbuf_printf(&b, "/* kfarm best of campaign %s: candidate %s, ok on every target, "
                         "%.3fx (geometric mean)\n", name, cs, jd(win, "speedup"));
        size_t i;
        json_t *row;
        json_array_foreach(json_object_get(win, "per_target"), i, row)
            result_line(&b, json_string_value(json_object_get(row, "target")), row);
        ties_line(&b, json_object_get(win, "ties"), 1);
        not_everywhere_lines(&b, json_object_get(bests, "not_everywhere"), " * ", "\n");
    }
    kf_strbuf_add(&b, " */\n");
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(win, "defines"), k, v)
        kf_strbuf_printf(&b, "#define %s %s\n", k, json_is_string(v) ? json_string_value(v) : "");
    kf_strbuf_add(&b, PQgetvalue(r, 0, 0));
    if (!b.s || b.oom) {
        rc = kf_cli_fail("out of memory");
    } else if (out) {
        if (kf_util_write_file(out, b.s, strlen(b.s)) < 0)
            rc = kf_cli_fail("cannot write %s", out);
        else
            fprintf(stderr, "kfarm: candidate %s (%.3fx%s%s) written to %s\n", cs, jd(win, "speedup"),
                    target ? " on " : ", ok on every target", target ? target : "", out);
    } else {
        fputs(b.s, stdout);
    }
done:
    if (r) PQclear(r);
    free(b.s);
    json_decref(bests);
    kf_db_close(db);
    return rc;
}
