/*
 * status.c -- a campaign's status (status.h): the report `kfarm campaign
 * status` prints, written to any FILE so the CLI and the coordinator's
 * operator socket (operator.c) share it.
 *
 * Order of the text report: the campaign row and its counts, one "best:"
 * line per target (with its ties counted, at most 100 read), the overall
 * best, the candidates fastest somewhere but not ok everywhere, the
 * blockers, then for LLM strategies the search's progress. Errors return
 * their reason in err; what was written before stays written.
 */
#include "status.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bests.h"
#include "campaign.h"
#include "health.h"

#define KF_STATUS_MAX_TIES 100 /* ties read per target: counted, not listed */

/* printf into err; returns rc, for `return fail(...)` */
static int fail(int rc, char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(int rc, char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return rc;
}

/* The campaign's id (kf_campaign_lookup): 0, 1 when there is none (err
 * with the CLI's hint), -1 on a database error. */
static int campaign_id(kf_db *db, const char *name, long long *id, char *err, size_t errlen)
{
    int64_t v = 0;
    int rc = kf_campaign_lookup(db, name, &v, NULL, err, errlen);
    if (rc == 1) return fail(1, err, errlen, "no campaign '%s' (see kfarm campaign list)", name);
    *id = v;
    return rc;
}

/* status --json: {"name", "id", "progress", "blockers", "bests"} for scripts. */
static int status_json(kf_db *db, const char *name, long long id, FILE *out, char *err, size_t errlen)
{
    json_t *pg = kf_health_progress(db, (int64_t)id, err, errlen);
    json_t *bl = pg ? kf_health_blockers(db, (int64_t)id, name, err, errlen) : NULL;
    /* the first 100 ties per target, as the text counts them ("ties_more"
     * says there are more; `kfarm best NAME --json` lists them all): a
     * best tied with 15,543 results made a 5.9 MB status of 0.5 s */
    json_t *be = bl ? kf_bests_top(db, (int64_t)id, KF_STATUS_MAX_TIES, err, errlen) : NULL;
    if (!be) {
        json_decref(pg);
        json_decref(bl);
        return -1;
    }
    json_t *o = json_pack("{s:s, s:I, s:o, s:o, s:o}", "name", name, "id", (json_int_t)id,
                          "progress", pg, "blockers", bl, "bests", be);
    json_dumpf(o, out, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    fputc('\n', out);
    json_decref(o);
    return 0;
}

static int progress(kf_db *db, const char *name, int tty, FILE *out, char *err, size_t errlen);

int kf_status_write(kf_db *db, const char *name, int json, int tty, FILE *out, char *err, size_t errlen)
{
    long long id = 0;
    int rc = campaign_id(db, name, &id, err, errlen);
    if (rc) return rc;
    if (json) return status_json(db, name, id, out, err, errlen);
    char ids[24];
    snprintf(ids, sizeof(ids), "%lld", id);
    const char *p[1] = { ids };
    PGresult *r = kf_db_exec(db,
        /* counts of the history from campaign_counts (schema/006_counts.sql:
         * a job is done exactly when it has its final evaluation), queued
         * and leased jobs from their indexes: nothing here reads every
         * result of a long campaign */
        "SELECT c.state, c.strategy, t.name, array_to_string(c.targets, ','), c.max_candidates,"
        " (SELECT COALESCE(sum(n), 0) FROM campaign_counts k WHERE k.campaign_id = c.id AND k.what = 'candidate'),"
        " (SELECT count(*) FROM jobs j WHERE j.campaign_id = c.id AND j.state = 'queued' AND j.purpose <> 'verify'),"
        " (SELECT count(*) FROM jobs j WHERE j.campaign_id = c.id AND j.purpose = 'eval' AND j.state = 'leased'),"
        " (SELECT COALESCE(sum(n), 0) FROM campaign_counts k WHERE k.campaign_id = c.id"
        "    AND k.what = 'evaluation' AND k.purpose = 'eval' AND k.is_final),"
        " (SELECT string_agg(verdict || ' ' || n, ', ' ORDER BY n DESC, verdict) FROM"
        "   (SELECT k.verdict, sum(n) n FROM campaign_counts k WHERE k.campaign_id = c.id"
        "    AND k.what = 'evaluation' AND k.purpose = 'eval' AND k.is_final GROUP BY k.verdict) v),"
        " (SELECT COALESCE(sum(n), 0) FROM campaign_counts k WHERE k.campaign_id = c.id"
        "    AND k.what = 'evaluation' AND NOT k.is_final),"
        " to_char(c.created_at, 'YYYY-MM-DD HH24:MI:SS'), to_char(c.finished_at, 'YYYY-MM-DD HH24:MI:SS')"
        " FROM campaigns c JOIN tasks t ON t.id = c.task_id WHERE c.id = $1::bigint",
        1, p, err, errlen);
    if (!r) return -1;
    const char *maxc = kf_db_str(r, 0, 4);
    long long q = kf_db_i64(r, 0, 6, 0), l = kf_db_i64(r, 0, 7, 0), d = kf_db_i64(r, 0, 8, 0);
    fprintf(out, "campaign:   %s (id %lld)\n", name, id);
    fprintf(out, "state:      %s\n", PQgetvalue(r, 0, 0));
    fprintf(out, "task:       %s\n", PQgetvalue(r, 0, 2));
    fprintf(out, "strategy:   %s, targets %s, budget %s candidates\n", PQgetvalue(r, 0, 1),
           PQgetvalue(r, 0, 3), maxc ? maxc : "unlimited");
    fprintf(out, "candidates: %s\n", PQgetvalue(r, 0, 5));
    fprintf(out, "jobs:       %lld total: %lld queued, %lld leased, %lld done\n", q + l + d, q, l, d);
    fprintf(out, "verdicts:   %s\n", kf_db_str(r, 0, 9) ? kf_db_str(r, 0, 9) : "none yet");
    fprintf(out, "retries:    %s failed attempts (infra_error / lost leases)\n", PQgetvalue(r, 0, 10));
    fprintf(out, "created:    %s%s%s\n", PQgetvalue(r, 0, 11), kf_db_str(r, 0, 12) ? ", finished " : "",
           kf_db_str(r, 0, 12) ? kf_db_str(r, 0, 12) : "");
    int is_done = !strcmp(PQgetvalue(r, 0, 0), "done");
    PQclear(r);
    /* the number of ties is shown, not the list: at most 100 are read */
    json_t *bests = kf_bests_top(db, (int64_t)id, KF_STATUS_MAX_TIES, err, errlen);
    if (!bests) return -1;
    size_t ti;
    json_t *tv;
    json_array_foreach(json_object_get(bests, "targets"), ti, tv) {
        json_t *b0 = json_object_get(tv, "best");
        const char *tn = json_string_value(json_object_get(tv, "target"));
        if (json_is_null(b0)) {
            fprintf(out, "best:       %s: none yet\n", tn);
            continue;
        }
        char defs[512], cvs[32] = "";
        char *dj = json_dumps(json_object_get(b0, "defines"), JSON_COMPACT);
        if (json_is_number(json_object_get(b0, "cv")))
            snprintf(cvs, sizeof(cvs), " CV %.2f", json_number_value(json_object_get(b0, "cv")));
        size_t nt = json_array_size(json_object_get(tv, "ties"));
        fprintf(out, "best:       %s: %.3fx [%.2f-%.2fx]%s (candidate %lld, %s)",
               tn, json_number_value(json_object_get(b0, "speedup")),
               json_number_value(json_object_get(b0, "lo")), json_number_value(json_object_get(b0, "hi")),
               cvs, (long long)json_integer_value(json_object_get(b0, "candidate")),
               kf_status_defines(dj, defs, sizeof(defs)));
        free(dj);
        const char *conf = json_string_value(json_object_get(b0, "confirmation"));
        const char *by = json_string_value(json_object_get(b0, "confirmed_by"));
        if (conf && !strcmp(conf, "confirmed")) fprintf(out, ", confirmed by %s", by ? by : "?");
        else fprintf(out, ", not confirmed yet (%s)", conf ? conf : "none");
        if (json_is_true(json_object_get(tv, "ties_more"))) fprintf(out, "; tied with more than %zu others", nt);
        else if (nt) fprintf(out, "; tied with %zu other%s", nt, nt == 1 ? "" : "s");
        fprintf(out, "\n");
    }
    json_t *ov = json_object_get(bests, "overall");
    if (json_is_null(ov)) {
        fprintf(out, "overall:    no candidate is ok on every target yet\n");
    } else {
        size_t nt = json_array_size(json_object_get(ov, "ties"));
        fprintf(out, "overall:    candidate %lld, ok on every target, %.3fx [%.2f-%.2fx]%s%s (kfarm best %s)\n",
               (long long)json_integer_value(json_object_get(ov, "candidate")),
               json_number_value(json_object_get(ov, "speedup")),
               json_number_value(json_object_get(ov, "lo")), json_number_value(json_object_get(ov, "hi")),
               nt ? ", tied with " : "", nt ? (nt == 1 ? "1 other" : "others") : "", name);
    }
    size_t ni;
    json_t *no;
    json_array_foreach(json_object_get(bests, "not_everywhere"), ni, no) {
        fprintf(out, "not ok:     candidate %lld (fastest on %s) is not ok on",
               (long long)json_integer_value(json_object_get(no, "candidate")),
               json_string_value(json_object_get(no, "fast_on")));
        size_t k;
        json_t *x;
        json_array_foreach(json_object_get(no, "not_ok"), k, x)
            fprintf(out, "%s %s (%s)", k ? "," : "", json_string_value(json_object_get(x, "target")),
                   json_string_value(json_object_get(x, "verdict")));
        fprintf(out, "\n");
    }
    json_decref(bests);
    json_t *bl = kf_health_blockers(db, (int64_t)id, name, err, errlen);
    if (!bl) return -1;
    size_t i;
    json_t *b;
    json_array_foreach(bl, i, b)
        fprintf(out, "%s [%s] %s\n", !is_done ? "blocked:   " : "warning:   ",
               json_string_value(json_object_get(b, "kind")),
               json_string_value(json_object_get(b, "text")));
    json_decref(bl);
    return progress(db, name, tty, out, err, errlen);
}

/* The search's progress (LLM strategies; nothing for tune): proposals by
 * state, tokens, review queue, context, and the budget closest to running
 * out, as a bar when tty. 0, 1 (campaign gone meanwhile) or -1. */
static int progress(kf_db *db, const char *name, int tty, FILE *out, char *err, size_t errlen)
{
    const char *p[1] = { name };
    PGresult *r = kf_db_exec(db,
        "SELECT c.strategy, c.strategy_state::text, c.max_candidates,"
        " (SELECT COALESCE(sum(n), 0) FROM campaign_counts k WHERE k.campaign_id = c.id"
        "    AND k.what = 'candidate' AND k.proposer <> 'seed'),"
        " pr.states, COALESCE(pr.pt, 0), COALESCE(pr.ct, 0),"
        " c.config->>'max_tokens', c.config->>'max_rounds', c.config->'llm'->>'model',"
        " (c.config->>'review')::boolean, COALESCE(pr.review, 0),"
        " (SELECT count(*) FROM hints WHERE campaign_id = c.id),"
        " (SELECT count(DISTINCT document) FROM doc_chunks WHERE campaign_id = c.id)"
        /* the proposals by state and their tokens from campaign_counts
         * (schema 011): summing 18,200 proposals took 16 ms */
        " FROM campaigns c LEFT JOIN LATERAL (SELECT string_agg(state || ' ' || n, ', ' ORDER BY state)"
        "   FILTER (WHERE n <> 0) states, sum(pt) pt, sum(ct) ct, sum(n) FILTER (WHERE state = 'review') review"
        "   FROM (SELECT proposal_state state, sum(n) n, sum(proposal_prompt_tokens) pt,"
        "    sum(proposal_completion_tokens) ct FROM campaign_counts"
        "    WHERE campaign_id = c.id AND what = 'proposal' GROUP BY 1) s) pr ON true"
        " WHERE c.name = $1", 1, p, err, errlen);
    if (!r) return -1;
    if (PQntuples(r) == 0) {
        PQclear(r);
        return fail(1, err, errlen, "no campaign '%s' (see kfarm campaign list)", name);
    }
    const char *strategy = PQgetvalue(r, 0, 0);
    if (!strcmp(strategy, "tune")) {
        PQclear(r);
        return 0;
    }
    json_t *st = json_loads(PQgetvalue(r, 0, 1), 0, NULL);
    long long ncand = kf_db_i64(r, 0, 3, 0), pt = kf_db_i64(r, 0, 5, 0), ct = kf_db_i64(r, 0, 6, 0);
    long long maxc = kf_db_i64(r, 0, 2, 0), maxt = kf_db_i64(r, 0, 7, 0), maxr = kf_db_i64(r, 0, 8, 0);
    long long round = json_integer_value(json_object_get(st, "round"));
    /* rounds in which the model never answered do not count toward max_rounds */
    long long dead = json_integer_value(json_object_get(st, "dead_rounds"));
    json_t *bs = json_object_get(st, "best_score");
    fprintf(out, "search:     %s with %s, round %lld%s%s", strategy, PQgetvalue(r, 0, 9), round,
           maxr ? " of " : "", maxr ? PQgetvalue(r, 0, 8) : "");
    if (dead) fprintf(out, " (%lld without a reply, not counted)", dead);
    if (json_is_number(bs))
        fprintf(out, ", best %.3fx (candidate %lld), plateau %lld", json_number_value(bs),
               (long long)json_integer_value(json_object_get(st, "best")),
               (long long)json_integer_value(json_object_get(st, "plateau")));
    fprintf(out, "\n");
    fprintf(out, "proposals:  %s\n", kf_db_str(r, 0, 4) ? kf_db_str(r, 0, 4) : "none yet");
    fprintf(out, "tokens:     %lld (prompt %lld, completion %lld)%s%s\n", pt + ct, pt, ct,
           maxt ? " of " : "", maxt ? PQgetvalue(r, 0, 7) : "");
    if (!strcmp(PQgetvalue(r, 0, 10), "t"))
        fprintf(out, "review:     on, %s waiting (kfarm review list %s)\n", PQgetvalue(r, 0, 11), name);
    if (kf_db_i64(r, 0, 12, 0) || kf_db_i64(r, 0, 13, 0))
        fprintf(out, "context:    %s hints, %s reference documents\n", PQgetvalue(r, 0, 12),
               PQgetvalue(r, 0, 13));
    /* progress: the budget closest to running out */
    double frac = -1;
    char what[128] = "";
    if (maxc > 0) {
        frac = (double)ncand / (double)maxc;
        snprintf(what, sizeof(what), "%lld/%lld candidates", ncand, maxc);
    }
    if (maxr > 0 && (double)(round - dead) / (double)maxr > frac) {
        frac = (double)(round - dead) / (double)maxr;
        snprintf(what, sizeof(what), "round %lld/%lld", round - dead, maxr);
    }
    if (maxt > 0 && (double)(pt + ct) / (double)maxt > frac) {
        frac = (double)(pt + ct) / (double)maxt;
        snprintf(what, sizeof(what), "%lld/%lld tokens", pt + ct, maxt);
    }
    json_t *stopped = json_object_get(st, "stopped");
    if (frac >= 0) {
        if (frac > 1) frac = 1;
        if (tty) {
            char bar[41];
            int fill = (int)(frac * 40 + 0.5);
            for (int i = 0; i < 40; i++) bar[i] = i < fill ? '#' : '.';
            bar[40] = 0;
            fprintf(out, "progress:   [%s] %3.0f%% %s\n", bar, frac * 100, what);
        } else {
            fprintf(out, "progress:   %.0f%% %s\n", frac * 100, what);
        }
    }
    if (json_is_string(stopped)) fprintf(out, "stopped:    %s\n", json_string_value(stopped));
    json_decref(st);
    PQclear(r);
    return 0;
}

const char *kf_status_defines(const char *json, char *buf, size_t cap)
{
    snprintf(buf, cap, "-");
    if (!json) return buf;
    json_error_t je;
    json_t *o = json_loads(json, 0, &je);
    if (!json_is_object(o) || json_object_size(o) == 0) {
        json_decref(o);
        return buf;
    }
    buf[0] = 0;
    const char *k;
    json_t *v;
    size_t len = 0;
    json_object_foreach(o, k, v) {
        const char *s = json_is_string(v) ? json_string_value(v) : "?";
        int n = snprintf(buf + len, cap - len, "%s%s=%s", len ? " " : "", k, s);
        if (n < 0 || (size_t)n >= cap - len) break;
        len += (size_t)n;
    }
    json_decref(o);
    return buf;
}

