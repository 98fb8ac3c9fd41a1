/*
 * verify.c -- redundant verification of winners. See verify.h.
 */
#include "verify.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

int kf_verify_consider(kf_db *db, const char *campaign_id, const char *target, double new_speedup,
                       char *err, size_t errlen)
{
    const char *p[2] = { campaign_id, target };
    if (new_speedup > 0) {
        /* The common case costs one indexed probe, not a scan of the
         * campaign's results: after every full pass no unverified ok result
         * lies above the bar (the best confirmed or pending speedup), so a
         * new result at or below the bar changes nothing. */
        PGresult *b = kf_db_exec(db,
            "SELECT COALESCE(max(e.speedup), 0) FROM evaluations e"
            " WHERE e.confirmation IN ('confirmed', 'pending') AND e.job_campaign_id = $1::bigint"
            "   AND e.job_target = $2 AND e.job_purpose = 'eval' AND e.is_final AND e.verdict = 'ok'",
            2, p, err, errlen);
        if (!b) return -1;
        double bar = kf_db_f64(b, 0, 0, 0);
        PQclear(b);
        if (new_speedup <= bar) return 0;
    }
    /* The top unverified ok result beats every confirmed or pending one: it
     * turns pending and gets one verification job (unique per evaluation). */
    PGresult *r = kf_db_exec(db,
        /* from the top of the campaign's results on the target
         * (evaluations_ok_target) down to the bar (the bar from the few
         * confirmed or pending rows): a campaign of 1,000,000 results is
         * not read whole (schema/009_eval_target.sql) */
        "WITH bar AS (SELECT COALESCE(max(e.speedup), 0) AS m FROM evaluations e"
        "             WHERE e.confirmation IN ('confirmed', 'pending') AND e.job_campaign_id = $1::bigint"
        "               AND e.job_target = $2 AND e.job_purpose = 'eval' AND e.is_final AND e.verdict = 'ok'),"
        " cand AS (SELECT e.id, e.worker_id, e.speedup, e.candidate_id"
        "          FROM evaluations e"
        "          WHERE e.is_final AND e.verdict = 'ok' AND e.speedup > 0 AND e.confirmation = 'none'"
        "            AND e.speedup > (SELECT m FROM bar)"
        "            AND e.job_campaign_id = $1::bigint AND e.job_target = $2 AND e.job_purpose = 'eval'"
        "          ORDER BY e.speedup DESC, e.candidate_id LIMIT 1),"
        " mark AS (UPDATE evaluations e SET confirmation = 'pending' FROM cand"
        "          WHERE e.id = cand.id RETURNING e.id)"
        " INSERT INTO jobs (candidate_id, campaign_id, target, max_attempts, purpose, verifies,"
        "                   avoid_worker, not_before)"
        " SELECT cand.candidate_id, $1::bigint, $2, c.max_attempts, 'verify', cand.id,"
        "        cand.worker_id, now() + interval '2 seconds'"
        " FROM cand JOIN campaigns c ON c.id = $1::bigint"
        " ON CONFLICT DO NOTHING RETURNING id, verifies, avoid_worker",
        2, p, err, errlen);
    if (!r) return -1;
    for (int i = 0; i < PQntuples(r); i++)
        kf_log("evaluation %s would be the best on %s: verification job %s queued "
               "(another worker than %s when one serves %s)", PQgetvalue(r, i, 1), target,
               PQgetvalue(r, i, 0), PQgetvalue(r, i, 2), target);
    PQclear(r);
    return 0;
}

/* A metrics value V (jsonb) as a CV for the noise allowance: a number
 * clamped to [0, 1e6] (below 1e-300: 0; a float8 cast of 1e-330 fails
 * "out of range"), NULL for anything else ("abc", true, {}). The metrics are
 * the worker's: a cast that could fail would let a liar fail the
 * verification of its own result, and with it the result's storage. */
#define CV_OF(V)                                                                          \
    "(CASE WHEN jsonb_typeof(" V ") = 'number' THEN (CASE WHEN (" V ")::numeric < 1e-300"   \
    " THEN 0 ELSE LEAST((" V ")::numeric, 1e6) END)::float8 END)"

/* Largest CV of any benchmark shape on either side of an evaluation's
 * metrics, as SQL over evaluation alias A. */
#define CV_SQL(A)                                                                              \
    "COALESCE((SELECT max(GREATEST(" CV_OF("s->'candidate'->'cv'") ","                        \
    "                              " CV_OF("s->'baseline'->'cv'") "))"                         \
    "          FROM jsonb_array_elements(CASE WHEN jsonb_typeof(" A ".metrics->'timing'->'shapes')" \
    "            = 'array' THEN " A ".metrics->'timing'->'shapes' ELSE '[]' END) s), 0)"

int kf_verify_conclude(kf_db *db, const kf_queue_config *cfg, const char *orig_eval_id,
                       const char *verify_job_id, char *err, size_t errlen)
{
    (void)cfg;
    const char *p[2] = { orig_eval_id, verify_job_id };
    PGresult *r = kf_db_exec(db,
        "SELECT o.speedup, " CV_SQL("o") ", o.worker_id, v.id, v.verdict, v.speedup, " CV_SQL("v")
        ", v.worker_id FROM evaluations o, evaluations v"
        " WHERE o.id = $1::bigint AND v.job_id = $2::bigint AND v.is_final",
        2, p, err, errlen);
    if (!r) return -1;
    if (PQntuples(r) != 1) {
        PQclear(r);
        snprintf(err, errlen, "verification job %s: no final evaluation or evaluation %s gone",
                 verify_job_id, orig_eval_id);
        return -1;
    }
    double s1 = kf_db_f64(r, 0, 0, 0), cv1 = kf_db_f64(r, 0, 1, 0);
    double s2 = kf_db_f64(r, 0, 5, 0), cv2 = kf_db_f64(r, 0, 6, 0);
    char w1[160], w2[160], vid[24], verdict[32];
    snprintf(w1, sizeof(w1), "%s", PQgetvalue(r, 0, 2));
    snprintf(vid, sizeof(vid), "%s", PQgetvalue(r, 0, 3));
    snprintf(verdict, sizeof(verdict), "%s", PQgetvalue(r, 0, 4));
    snprintf(w2, sizeof(w2), "%s", PQgetvalue(r, 0, 7));
    /* an evaluation without a worker (not the coordinator's: it always
     * names one) is no one's reputation */
    int anon = PQgetisnull(r, 0, 2) || PQgetisnull(r, 0, 7);
    PQclear(r);

    const char *state;
    char detail[512];
    int same = strcmp(w1, w2) == 0;
    if (!strcmp(verdict, "ok") && s1 > 0 && s2 > 0) {
        /* Two workers: the noise both measured (the smaller CV), so that
         * neither side can widen the allowance by claiming a noisy run. One
         * worker re-timed: its own noise (the larger CV). */
        double cv = same ? fmax(cv1, cv2) : fmin(cv1, cv2);
        if (!(cv >= 0)) cv = 0;
        double tol = fmax(log(1.5), 4.0 * M_SQRT2 * cv);
        double d = fabs(log(s1 / s2));
        state = d <= tol ? "confirmed" : "disputed";
        snprintf(detail, sizeof(detail),
                 "%s: %.3fx by %s vs %.3fx by %s (ratio %.2f, noise allows %.2f; CV %.1f%% / %.1f%%)",
                 state, s1, w1, s2, w2, exp(d), exp(tol), 100 * cv1, 100 * cv2);
    } else if (!strcmp(verdict, "infra_error") || !strcmp(verdict, "unsupported")) {
        state = "inconclusive";
        snprintf(detail, sizeof(detail), "inconclusive: the verification on %s ended %s", w2, verdict);
    } else {
        state = "disputed";
        snprintf(detail, sizeof(detail), "disputed: %.3fx by %s, but %s by %s", s1, w1, verdict, w2);
    }
    /* A confirmed result's interval covers both runs' intervals: two runs
     * of one candidate that differ by more than their within-run CVs show
     * run-to-run drift that the interval must admit (CI, issue 10's ties:
     * an identical variant timed 0.958x at CV 3.6%, then 1.562x at CV 9.2%;
     * the first run's interval alone called it slower than its twin). */
    const char *pu[5] = { orig_eval_id, state, vid, w2, detail };
    if (kf_db_cmd(db,
            "UPDATE evaluations o SET confirmation = $2, confirmed_by = $3::bigint,"
            " confirmed_by_worker = $4, confirmation_detail = $5, confirmed_at = now(),"
            " speedup_lo = CASE WHEN $2 = 'confirmed' THEN LEAST(o.speedup_lo, v.speedup_lo)"
            "   ELSE o.speedup_lo END,"
            " speedup_hi = CASE WHEN $2 = 'confirmed' THEN GREATEST(o.speedup_hi, v.speedup_hi)"
            "   ELSE o.speedup_hi END"
            " FROM evaluations v WHERE o.id = $1::bigint AND v.id = $3::bigint", 5, pu, err, errlen) < 0)
        return -1;
    kf_log("evaluation %s %s", orig_eval_id, detail);
    /* a worker re-timed alone says nothing about its honesty */
    if (state[0] == 'i' || same || anon) return 0; /* inconclusive */
    int agree = state[0] == 'c';
    char qd[16], qo[16];
    snprintf(qd, sizeof(qd), "%d", KF_VERIFY_QUARANTINE_DISPUTES);
    snprintf(qo, sizeof(qo), "%d", KF_VERIFY_QUARANTINE_OTHERS);
    const char *pw[3] = { w1, w2, agree ? "true" : "false" };
    /* both rows locked in id order first: two verifications of each other's
     * results concluding at once would otherwise lock them in opposite
     * orders and deadlock (one aborted after deadlock_timeout) */
    r = kf_db_exec(db, "SELECT 1 FROM workers WHERE id IN ($1, $2) ORDER BY id FOR UPDATE", 2, pw, err,
                   errlen);
    if (!r) return -1;
    PQclear(r);
    /* Both rows at once, each with the other as its peer: the counts, and
     * per peer how often it disputed this worker (schema/013_dispute_peers.sql;
     * a 33rd peer is not added) */
    if (kf_db_cmd(db,
            "UPDATE workers w SET agreements = w.agreements + CASE WHEN $3::boolean THEN 1 ELSE 0 END,"
            "  disputes = w.disputes + CASE WHEN $3::boolean THEN 0 ELSE 1 END,"
            "  dispute_counts = CASE WHEN NOT $3::boolean AND (w.dispute_counts ? p.peer"
            "      OR (SELECT count(*) FROM jsonb_object_keys(w.dispute_counts)) < 32)"
            "    THEN jsonb_set(w.dispute_counts, ARRAY[p.peer],"
            "                   to_jsonb(COALESCE((w.dispute_counts->>p.peer)::int, 0) + 1))"
            "    ELSE w.dispute_counts END"
            " FROM (VALUES ($1, $2), ($2, $1)) AS p(me, peer) WHERE w.id = p.me",
            3, pw, err, errlen) < 0)
        return -1;
    if (agree) return 0;
    /* The quarantine (verify.h): enough disputes, more than agreements, and
     * at least KF_VERIFY_QUARANTINE_OTHERS of them from others than its most
     * frequent accuser */
    const char *pq[4] = { w1, w2, qd, qo };
    r = kf_db_exec(db,
        "UPDATE workers w SET quarantined = true,"
        "  quarantine_reason = format('%s verification disputes with %s other workers (%s agreements):"
        " its results disagree with theirs beyond the noise', w.disputes, c.np, w.agreements)"
        " FROM (SELECT x.id, n.np, n.others FROM workers x CROSS JOIN LATERAL"
        "         (SELECT count(*) AS np, COALESCE(sum(v::int) - max(v::int), 0) AS others"
        "          FROM jsonb_each_text(x.dispute_counts) e(k, v)) n"
        "       WHERE x.id IN ($1, $2)) c"
        " WHERE w.id = c.id AND NOT w.quarantined AND w.disputes >= $3::int AND w.disputes > w.agreements"
        "   AND c.others >= $4::int"
        " RETURNING w.id, w.disputes, c.np",
        4, pq, err, errlen);
    if (!r) return -1;
    for (int i = 0; i < PQntuples(r); i++)
        kf_log("worker %s quarantined: %s verification disputes with %s other workers",
               PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), PQgetvalue(r, i, 2));
    PQclear(r);
    return 0;
}
