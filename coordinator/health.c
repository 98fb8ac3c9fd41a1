/*
 * health.c -- blockers and progress of a campaign. See health.h.
 *
 * Everything is read with plain SELECTs; the texts are meant for people and
 * name the command that lifts the blocker where there is one.
 */
#include "health.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "queue.h"

static void add(json_t *a, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void add(json_t *a, const char *kind, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    json_t *o = json_object();
    json_object_set_new(o, "kind", json_string(kind));
    json_object_set_new(o, "text", json_string(text));
    json_array_append_new(a, o);
}

json_t *kf_health_blockers(kf_db *db, int64_t campaign_id, const char *name, char *err,
                           size_t errlen)
{
    char cid[24], off[24];
    snprintf(cid, sizeof(cid), "%lld", (long long)campaign_id);
    snprintf(off, sizeof(off), "%d", KF_QUEUE_OFFLINE_S);
    const char *p[2] = { cid, off };
    PGresult *r = kf_db_exec(db,
        "SELECT state, pause_reason, strategy,"
        "  (strategy_state->>'resume_at')::float8 - extract(epoch FROM now()), name "
        "FROM campaigns WHERE id = $1::bigint AND $2::int IS NOT NULL", 2, p, err, errlen);
    if (!r) return NULL;
    if (PQntuples(r) == 0) {
        PQclear(r);
        snprintf(err, errlen, "no campaign %s", cid);
        return NULL;
    }
    char state[16], strategy[16], reason[1024];
    snprintf(state, sizeof(state), "%s", PQgetvalue(r, 0, 0));
    snprintf(strategy, sizeof(strategy), "%s", PQgetvalue(r, 0, 2));
    snprintf(reason, sizeof(reason), "%s", kf_db_str(r, 0, 1) ? kf_db_str(r, 0, 1) : "");
    double resume_in = PQgetisnull(r, 0, 3) ? 0 : kf_db_f64(r, 0, 3, 0);
    char own[256];
    snprintf(own, sizeof(own), "%s", PQgetvalue(r, 0, 4));
    if (!name) name = own;
    PQclear(r);
    json_t *a = json_array();
    int done = !strcmp(state, "done"); /* only warnings about its results remain */
    if (!strcmp(state, "created"))
        add(a, "state", "not started (kfarm campaign start %s)", name);
    else if (!strcmp(state, "paused") && reason[0])
        add(a, "task", "paused by the farm: %s (no worker was blamed; fix the task and create "
            "a new campaign, or resume with kfarm campaign start %s)", reason, name);
    else if (!strcmp(state, "paused"))
        add(a, "state", "paused by an operator (kfarm campaign start %s)", name);

    if (strcmp(strategy, "tune") != 0) {
        r = kf_db_exec(db,
            "SELECT state, reply IS NULL, reason, warning, http_status FROM proposals "
            "WHERE campaign_id = $1::bigint AND kind = 'llm' AND state <> 'requested' "
            "  AND $2::int IS NOT NULL "
            "ORDER BY COALESCE(answered_at, finished_at, created_at) DESC, id DESC LIMIT 1",
            2, p, err, errlen);
        if (!r) {
            json_decref(a);
            return NULL;
        }
        if (PQntuples(r) == 1) {
            const char *why = kf_db_str(r, 0, 2) ? kf_db_str(r, 0, 2) : "unknown reason";
            if (!done && !strcmp(PQgetvalue(r, 0, 0), "failed") && !strcmp(PQgetvalue(r, 0, 1), "t")) {
                char wait[64] = "";
                if (resume_in > 0) snprintf(wait, sizeof(wait), "; next round in %.0f s", resume_in);
                add(a, "llm", "the model gave no reply: %s%s", why, wait);
            } else if (kf_db_str(r, 0, 3)) {
                add(a, "llm", "%s", kf_db_str(r, 0, 3));
            }
        }
        PQclear(r);
        if (!done) {
            r = kf_db_exec(db, "SELECT count(*) FROM proposals WHERE campaign_id = $1::bigint "
                               "AND state = 'review' AND $2::int IS NOT NULL", 2, p, err, errlen);
            if (!r) {
                json_decref(a);
                return NULL;
            }
            long long n = kf_db_i64(r, 0, 0, 0);
            PQclear(r);
            if (n > 0)
                add(a, "review", "%lld proposal%s wait%s for a person's review (kfarm review list %s)",
                    n, n == 1 ? "" : "s", n == 1 ? "s" : "", name);
        }
    }

    if (strcmp(state, "running") == 0) {
        r = kf_db_exec(db,
            "SELECT t, (SELECT count(*) FROM jobs j WHERE j.campaign_id = c.id AND j.target = t"
            "           AND j.state = 'queued'),"
            "  (SELECT count(*) FROM workers w WHERE t = ANY(w.classes)),"
            "  (SELECT count(*) FROM workers w WHERE t = ANY(w.classes)"
            "           AND w.last_seen > now() - $2::int * interval '1 second'),"
            "  (SELECT count(*) FROM workers w WHERE t = ANY(w.classes) AND NOT w.quarantined"
            "           AND w.last_seen > now() - $2::int * interval '1 second'),"
            "  (SELECT string_agg(w.id, ', ' ORDER BY w.id) FROM workers w WHERE t = ANY(w.classes)"
            "           AND w.quarantined AND w.last_seen > now() - $2::int * interval '1 second') "
            "FROM campaigns c, unnest(c.targets) t WHERE c.id = $1::bigint ORDER BY t",
            2, p, err, errlen);
        if (!r) {
            json_decref(a);
            return NULL;
        }
        for (int i = 0; i < PQntuples(r); i++) {
            long long queued = kf_db_i64(r, i, 1, 0), reg = kf_db_i64(r, i, 2, 0);
            long long live = kf_db_i64(r, i, 3, 0), usable = kf_db_i64(r, i, 4, 0);
            const char *t = PQgetvalue(r, i, 0);
            if (queued == 0 || usable > 0) continue;
            if (live == 0)
                add(a, "workers", "no live worker serves target %s: %lld job%s no worker may take "
                    "(%lld registered for it, none heard from in %d s)", t, queued,
                    queued == 1 ? "" : "s", reg, KF_QUEUE_OFFLINE_S);
            else
                add(a, "workers", "all %lld live worker%s for target %s %s quarantined (%s): "
                    "%lld job%s no worker may take (see kfarm workers; kfarm worker release NAME)",
                    live, live == 1 ? "" : "s", t, live == 1 ? "is" : "are",
                    kf_db_str(r, i, 5) ? kf_db_str(r, i, 5) : "", queued, queued == 1 ? "" : "s");
        }
        PQclear(r);
    }
    return a;
}

json_t *kf_health_progress(kf_db *db, int64_t campaign_id, char *err, size_t errlen)
{
    char cid[24];
    snprintf(cid, sizeof(cid), "%lld", (long long)campaign_id);
    const char *p[1] = { cid };
    /* the campaign's own work: verification jobs (verify.h) are not
     * progress. Done jobs and candidates are summed from campaign_counts
     * (schema/006_counts.sql: a job is done exactly when it has its final
     * evaluation), queued and leased jobs counted from their indexes: no
     * statement here reads the campaign's history. */
    PGresult *r = kf_db_exec(db,
        "SELECT c.state, c.strategy,"
        "  (SELECT count(*) FROM jobs j WHERE j.campaign_id = c.id AND j.state = 'queued'"
        "     AND j.purpose <> 'verify'),"
        "  (SELECT count(*) FROM jobs j WHERE j.campaign_id = c.id AND j.state = 'leased'"
        "     AND j.purpose = 'eval'),"
        "  (SELECT COALESCE(sum(n), 0) FROM campaign_counts k WHERE k.campaign_id = c.id"
        "     AND k.what = 'evaluation' AND k.purpose = 'eval' AND k.is_final),"
        "  (SELECT COALESCE(sum(n), 0) FROM campaign_counts k WHERE k.campaign_id = c.id"
        "     AND k.what = 'candidate'),"
        "  COALESCE((c.strategy_state->>'round')::int, 0),"
        "  COALESCE((c.config->>'max_rounds')::numeric::bigint, 0),"
        "  extract(epoch FROM now() - c.started_at),"
        "  COALESCE((c.strategy_state->>'dead_rounds')::int, 0) "
        "FROM campaigns c WHERE c.id = $1::bigint", 1, p, err, errlen);
    if (!r) return NULL;
    if (PQntuples(r) == 0) {
        PQclear(r);
        snprintf(err, errlen, "no campaign %s", cid);
        return NULL;
    }
    long long q = kf_db_i64(r, 0, 2, 0), l = kf_db_i64(r, 0, 3, 0), d = kf_db_i64(r, 0, 4, 0);
    double since = PQgetisnull(r, 0, 8) ? 0 : kf_db_f64(r, 0, 8, 0);
    double rate = since > 1 && d > 0 ? (double)d / since : 0;
    json_t *o = json_object(), *jobs = json_object();
    json_object_set_new(o, "state", json_string(PQgetvalue(r, 0, 0)));
    json_object_set_new(o, "strategy", json_string(PQgetvalue(r, 0, 1)));
    json_object_set_new(jobs, "queued", json_integer(q));
    json_object_set_new(jobs, "leased", json_integer(l));
    json_object_set_new(jobs, "done", json_integer(d));
    json_object_set_new(jobs, "total", json_integer(q + l + d));
    json_object_set_new(o, "jobs", jobs);
    json_object_set_new(o, "candidates", json_integer(kf_db_i64(r, 0, 5, 0)));
    json_object_set_new(o, "round", json_integer(kf_db_i64(r, 0, 6, 0)));
    json_object_set_new(o, "rounds_without_reply", json_integer(kf_db_i64(r, 0, 9, 0)));
    json_object_set_new(o, "max_rounds", json_integer(kf_db_i64(r, 0, 7, 0)));
    json_object_set_new(o, "rate_jobs_per_s", json_real(rate));
    json_object_set_new(o, "eta_s", json_real(rate > 0 ? (double)(q + l) / rate : -1));
    PQclear(r);
    return o;
}
