/*
 * test_queue.c -- job queue and campaign semantics against a real PostgreSQL.
 *
 * Needs the ctest `db` fixture (tools/devdb start with $KFARM_DEVDB_DIR) and
 * creates its own database with `tools/devdb createdb kft_queue`. Covers:
 * migrations re-runnable; tune expansion (budget sample, idempotent, re-run
 * after a simulated crash between insert and bookkeeping); SKIP LOCKED gives
 * distinct jobs to two connections without blocking; heartbeats with stale
 * tokens refused; a result stored exactly once (resend = DUPLICATE); stale
 * result after re-lease refused; expired lease re-queued and recorded;
 * exhausted attempts end as a runtime_error verdict; infra_error requeues and
 * quarantines; hostile inputs (bad verdict, invalid JSON, invalid UTF-8);
 * campaign done once every job is.
 * Prints "N passed, M failed"; exit status 1 on any failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "campaign.h"
#include "db.h"
#include "queue.h"
#include "strategy.h"
#include "verify.h"

#include "db_test.h"

static kf_result res_ok(void)
{
    kf_result r = { .verdict = "ok", .detail = "passed", .metrics_json = "{\"cv\": 0.01}",
                    .compile_log = "", .candidate_us = 10, .baseline_us = 20, .speedup = 2 };
    return r;
}

/* Make every leased job's lease expire now: its row's deadline and its
 * heartbeats' (schema 018). */
static void expire_all(kf_db *db)
{
    exec_ok(db, "UPDATE jobs SET lease_deadline = now() - interval '1 second' WHERE state = 'leased'");
    exec_ok(db, "UPDATE lease_beats SET deadline = now() - interval '1 second' WHERE job_id <> 0");
}

/* One verification concluded between worker `orig` (its result: speedup
 * so) and worker `ver` (its verdict and speedup sv), stored as two final
 * evaluations of made-up jobs (evaluations have no foreign keys, schema 012)
 * and judged by kf_verify_conclude. metrics: both evaluations' (SQL text,
 * no quotes inside) or NULL. n numbers the pair. 1 on success. */
static int verify_pair(kf_db *db, const kf_queue_config *qc, int n, const char *orig, double so,
                       const char *ver, const char *verdict, double sv, const char *metrics)
{
    char sql[1024], err[512], oid[32], vjob[32];
    snprintf(sql, sizeof(sql),
             "INSERT INTO evaluations (job_id, candidate_id, attempt, worker_id, verdict, speedup,"
             " is_final, metrics) VALUES (%d, 1, 1, '%s', 'ok', %g, true, %s%s%s) RETURNING id",
             800000 + 2 * n, orig, so, metrics ? "'" : "", metrics ? metrics : "NULL", metrics ? "'" : "");
    snprintf(oid, sizeof(oid), "%lld", q1(db, sql));
    snprintf(sql, sizeof(sql),
             "INSERT INTO evaluations (job_id, candidate_id, attempt, worker_id, verdict, speedup,"
             " is_final, metrics) VALUES (%d, 1, 1, '%s', '%s', %g, true, %s%s%s) RETURNING id",
             800001 + 2 * n, ver, verdict, sv, metrics ? "'" : "", metrics ? metrics : "NULL",
             metrics ? "'" : "");
    q1(db, sql);
    snprintf(vjob, sizeof(vjob), "%d", 800001 + 2 * n);
    if (kf_db_begin(db, err, sizeof(err)) < 0 || kf_verify_conclude(db, qc, oid, vjob, err, sizeof(err)) < 0 ||
        kf_db_commit(db, err, sizeof(err)) < 0) {
        fprintf(stderr, "verify_pair %d: %s\n", n, err);
        kf_db_rollback(db);
        return 0;
    }
    return 1;
}

int main(void)
{
    char conninfo[1024], err[1024];
    if (!fresh_db("kft_queue", conninfo, sizeof(conninfo))) {
        fprintf(stderr, "cannot create a database: is the devdb cluster running "
                        "(KFARM_DEVDB_DIR=%s)?\n", getenv("KFARM_DEVDB_DIR") ? getenv("KFARM_DEVDB_DIR") : "");
        printf("0 passed, 1 failed\n");
        return 1;
    }
    kf_db *db = kf_db_open(conninfo, err, sizeof(err));
    kf_db *db2 = kf_db_open(conninfo, err, sizeof(err));
    if (!db || !db2) {
        fprintf(stderr, "%s\n", err);
        printf("0 passed, 1 failed\n");
        return 1;
    }

    /* ---- migrations ---- */
    int applied = -1;
    CHECK(kf_db_migrate(db, &applied, err, sizeof(err)) == 0, "%s", err);
    CHECK(applied >= 1, "first migrate applied %d", applied);
    int v1 = kf_db_schema_version(db, err, sizeof(err));
    CHECK(kf_db_migrate(db2, &applied, err, sizeof(err)) == 0, "%s", err);
    CHECK(applied == 0, "second migrate applied %d", applied);
    CHECK(kf_db_schema_version(db, err, sizeof(err)) == v1, "version changed");
    CHECK(q1(db, "SELECT count(*) FROM schema_version") == v1, "one row per migration");

    kf_queue_config qc;
    kf_queue_config_default(&qc);
    qc.quarantine_after = 3;

    /* ---- campaign creation and tune expansion ---- */
    char task[4096];
    snprintf(task, sizeof(task), "%s/tests/tasks/farm_axpy_f32", src_dir());
    kf_campaign_spec spec;
    memset(&spec, 0, sizeof(spec));
    spec.name = "q1";
    spec.task_dir = task;
    int64_t cid = 0;
    CHECK(kf_campaign_create(db, &spec, &cid, err, sizeof(err)) == 0, "%s", err);
    CHECK(kf_campaign_create(db, &spec, NULL, err, sizeof(err)) < 0 && strstr(err, "exists"),
          "duplicate name: %s", err);
    spec.name = "q-bad";
    spec.task_dir = "/nonexistent/task";
    CHECK(kf_campaign_create(db, &spec, NULL, err, sizeof(err)) < 0, "bad task accepted");
    spec.task_dir = task;
    spec.strategy = "annealing";
    CHECK(kf_campaign_create(db, &spec, NULL, err, sizeof(err)) < 0, "unknown strategy accepted");
    spec.strategy = NULL;
    spec.targets[0] = spec.targets[1] = "cpu";
    spec.n_targets = 2;
    CHECK(kf_campaign_create(db, &spec, NULL, err, sizeof(err)) < 0 && strstr(err, "named twice"),
          "a target named twice accepted: %s", err);
    spec.n_targets = 0;

    int done = 0;
    CHECK(kf_campaign_step(db, cid, &done, err, sizeof(err)) == 0, "%s", err);
    CHECK(q1(db, "SELECT count(*) FROM jobs") == 0, "created campaign must not expand");
    CHECK(kf_campaign_start(db, "q1", err, sizeof(err)) == 0, "%s", err);
    /* a campaign whose targets name a class twice (written before creation
     * refused it) expands once per class */
    exec_ok(db, "UPDATE campaigns SET targets = ARRAY['cpu', 'cpu'] WHERE name = 'q1'");
    CHECK(kf_campaign_step(db, cid, &done, err, sizeof(err)) == 0, "%s", err);
    exec_ok(db, "UPDATE campaigns SET targets = ARRAY['cpu'] WHERE name = 'q1'");
    CHECK(q1(db, "SELECT count(*) FROM candidates WHERE proposer = 'tune'") == 8, "8 variants");
    CHECK(q1(db, "SELECT count(*) FROM jobs") == 8, "8 jobs");
    CHECK(q1(db, "SELECT count(DISTINCT defines) FROM candidates WHERE proposer = 'tune'") == 8,
          "distinct defines");
    CHECK(q1(db, "SELECT count(*) FROM candidates k JOIN candidates s ON s.id = k.parent_id "
                 "WHERE k.proposer = 'tune' AND s.proposer = 'seed'") == 8, "parent = seed");
    CHECK(!done, "campaign not done with queued jobs");
    /* Idempotent: step again, and again after "crashing" before the
     * bookkeeping (strategy_state reset). */
    CHECK(kf_campaign_step(db, cid, &done, err, sizeof(err)) == 0, "%s", err);
    exec_ok(db, "UPDATE campaigns SET strategy_state = '{}'");
    CHECK(kf_strategy_tune.step(db, cid, &done, err, sizeof(err)) == 0, "%s", err);
    CHECK(q1(db, "SELECT count(*) FROM candidates WHERE proposer = 'tune'") == 8,
          "re-expansion made duplicates");
    CHECK(q1(db, "SELECT count(*) FROM jobs") == 8, "re-expansion made duplicate jobs");
    {
        /* the schema itself refuses a second evaluation job of a candidate
         * on a target (schema/015: job_keys_candidate, NULLS NOT DISTINCT
         * on verifies, which an evaluation job never has) and a
         * verification job that names no evaluation */
        char e2[512];
        CHECK(kf_db_cmd(db, "INSERT INTO jobs (candidate_id, campaign_id, target)"
                            " SELECT candidate_id, campaign_id, target FROM jobs ORDER BY id LIMIT 1",
                        0, NULL, e2, sizeof(e2)) < 0 && strstr(e2, "job_keys_candidate"),
              "duplicate evaluation job accepted: %s", e2);
        CHECK(kf_db_cmd(db, "INSERT INTO jobs (candidate_id, campaign_id, target, purpose)"
                            " SELECT candidate_id, campaign_id, target, 'verify' FROM jobs ORDER BY id LIMIT 1",
                        0, NULL, e2, sizeof(e2)) < 0 && strstr(e2, "jobs_verifies_iff_verify"),
              "verification job without its evaluation accepted: %s", e2);
        CHECK(kf_db_cmd(db, "INSERT INTO jobs (candidate_id, campaign_id, target)"
                            " SELECT candidate_id, campaign_id, target || '-other' FROM jobs ORDER BY id LIMIT 1",
                        0, NULL, e2, sizeof(e2)) == 0, "a job on another target refused: %s", e2);
        exec_ok(db, "DELETE FROM jobs WHERE target LIKE '%-other'");
        CHECK(q1(db, "SELECT count(*) FROM jobs") == 8, "jobs after the schema checks");
    }

    /* Budget: an even sample of the variants. */
    spec.name = "q-budget";
    spec.max_candidates = 3;
    int64_t bid = 0;
    CHECK(kf_campaign_create(db, &spec, &bid, err, sizeof(err)) == 0, "%s", err);
    CHECK(kf_campaign_start(db, "q-budget", err, sizeof(err)) == 0, "%s", err);
    CHECK(kf_campaign_step(db, bid, &done, err, sizeof(err)) == 0, "%s", err);
    char sql[1024];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM candidates WHERE campaign_id = %lld "
             "AND proposer = 'tune'", (long long)bid);
    CHECK(q1(db, sql) == 3, "budget of 3 gave %lld", q1(db, sql));
    snprintf(sql, sizeof(sql), "SELECT count(DISTINCT defines->>'DELAY_MS') FROM candidates "
             "WHERE campaign_id = %lld AND proposer = 'tune'", (long long)bid);
    CHECK(q1(db, sql) >= 2, "sample should vary the slow-varying tunable too");
    CHECK(kf_campaign_pause(db, "q-budget", err, sizeof(err)) == 0, "%s", err);

    /* ---- leases: SKIP LOCKED, distinct jobs to two connections ---- */
    const char *cls[1] = { "cpu" };
    kf_lease la, lb, lc;
    CHECK(kf_db_begin(db, err, sizeof(err)) == 0, "%s", err);
    CHECK(kf_queue_lease(db, &qc, "wA", cls, 1, &la, err, sizeof(err)) == KF_Q_OK, "%s", err);
    /* db holds job la locked in an open transaction: db2 must skip it. */
    CHECK(kf_queue_lease(db2, &qc, "wB", cls, 1, &lb, err, sizeof(err)) == KF_Q_OK, "%s", err);
    CHECK(kf_db_commit(db, err, sizeof(err)) == 0, "%s", err);
    CHECK(la.job_id != lb.job_id, "same job %lld leased twice", (long long)la.job_id);
    CHECK(la.fencing_token != lb.fencing_token, "tokens must differ");
    CHECK(la.attempt == 1 && lb.attempt == 1, "first attempts");
    CHECK(la.seed == la.job_id, "seed = job id");
    const char *gpu[1] = { "sm_90" };
    CHECK(kf_queue_lease(db, &qc, "wG", gpu, 1, &lc, err, sizeof(err)) == KF_Q_NO_JOB,
          "a gpu worker must not get cpu jobs");
    /* Paused campaign jobs are not handed out: q-budget has 3 queued. */
    CHECK(q1(db, "SELECT count(*) FROM jobs WHERE state = 'queued'") == 6 + 3, "queued count");

    /* ---- heartbeat ---- */
    CHECK(kf_queue_heartbeat(db, &qc, "wA", la.job_id, la.fencing_token, la.lease_token, 16, err, sizeof(err)) == KF_Q_OK,
          "%s", err);
    CHECK(kf_queue_heartbeat(db, &qc, "wA", la.job_id, lb.fencing_token, lb.lease_token, 16, err, sizeof(err)) == KF_Q_STALE,
          "wrong token heartbeat");

    /* ---- result exactly once ---- */
    kf_result ok = res_ok();
    CHECK(kf_queue_result(db, &qc, "wA", la.job_id, la.fencing_token, la.lease_token, 16, &ok, NULL, err, sizeof(err)) == KF_Q_OK,
          "%s", err);
    CHECK(kf_queue_result(db, &qc, "wA", la.job_id, la.fencing_token, la.lease_token, 16, &ok, NULL, err, sizeof(err)) ==
          KF_Q_DUPLICATE, "resend must be DUPLICATE: %s", err);
    CHECK(kf_queue_result(db2, &qc, "wA", la.job_id, la.fencing_token, la.lease_token, 16, &ok, NULL, err, sizeof(err)) ==
          KF_Q_DUPLICATE, "resend on another connection: %s", err);
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM evaluations WHERE job_id = %lld",
             (long long)la.job_id);
    CHECK(q1(db, sql) == 1, "stored once");
    snprintf(sql, sizeof(sql), "SELECT (state = 'done')::int FROM jobs WHERE id = %lld",
             (long long)la.job_id);
    CHECK(q1(db, sql) == 1, "job done");
    CHECK(kf_queue_heartbeat(db, &qc, "wA", la.job_id, la.fencing_token, la.lease_token, 16, err, sizeof(err)) == KF_Q_STALE,
          "heartbeat after done must be STALE");
    CHECK(q1(db, "SELECT jobs_done FROM workers WHERE id = 'wA'") == 1, "jobs_done counted");

    /* ---- expiry: requeue, stale result after re-lease ---- */
    CHECK(kf_queue_heartbeat(db2, &qc, "wB", lb.job_id, lb.fencing_token, lb.lease_token, 16, err, sizeof(err)) ==
          KF_Q_OK, "wB acknowledges its lease: %s", err);
    expire_all(db); /* lb expires */
    int rq = 0, ex = 0;
    CHECK(kf_queue_reap(db, &qc, &rq, &ex, err, sizeof(err)) == 0, "%s", err);
    CHECK(rq == 1 && ex == 0, "reap requeued %d exhausted %d", rq, ex);
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM evaluations WHERE job_id = %lld AND "
             "NOT is_final AND verdict = 'infra_error' AND NOT reported", (long long)lb.job_id);
    CHECK(q1(db, sql) == 1, "lost lease recorded as an attempt");
    kf_lease lb2;
    CHECK(kf_queue_lease(db2, &qc, "wC", cls, 1, &lb2, err, sizeof(err)) == KF_Q_OK, "%s", err);
    CHECK(lb2.job_id == lb.job_id && lb2.attempt == 2, "requeued job re-leased (job %lld attempt %d)",
          (long long)lb2.job_id, lb2.attempt);
    CHECK(kf_queue_result(db, &qc, "wB", lb.job_id, lb.fencing_token, lb.lease_token, 16, &ok, NULL, err, sizeof(err)) ==
          KF_Q_STALE, "late result with the expired token must be STALE");
    CHECK(kf_queue_heartbeat(db, &qc, "wB", lb.job_id, lb.fencing_token, lb.lease_token, 16, err, sizeof(err)) == KF_Q_STALE,
          "heartbeat with expired token");
    CHECK(kf_queue_result(db, &qc, "wC", lb2.job_id, lb2.fencing_token, lb2.lease_token, 16, &ok, NULL, err, sizeof(err)) ==
          KF_Q_OK, "%s", err);
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM evaluations WHERE job_id = %lld AND is_final",
             (long long)lb.job_id);
    CHECK(q1(db, sql) == 1, "one final evaluation");

    /* ---- exhausted attempts end as a verdict ---- */
    kf_lease lx;
    int64_t xjob = 0;
    for (int i = 0; i < 3; i++) {
        CHECK(kf_queue_lease(db, &qc, "wDie", cls, 1, &lx, err, sizeof(err)) == KF_Q_OK, "%s", err);
        if (i == 0) xjob = lx.job_id;
        CHECK(lx.job_id == xjob, "same job re-leased (%lld vs %lld)", (long long)lx.job_id,
              (long long)xjob);
        CHECK(kf_queue_heartbeat(db, &qc, "wDie", lx.job_id, lx.fencing_token, lx.lease_token, 16, err,
                                 sizeof(err)) == KF_Q_OK, "acknowledged: %s", err);
        expire_all(db);
        CHECK(kf_queue_reap(db, &qc, &rq, &ex, err, sizeof(err)) == 0, "%s", err);
    }
    CHECK(ex == 1, "third expiry exhausts (exhausted %d)", ex);
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM evaluations WHERE job_id = %lld AND is_final "
             "AND verdict = 'runtime_error' AND detail LIKE 'lost 3 workers while evaluating%%'",
             (long long)xjob);
    CHECK(q1(db, sql) == 1, "final runtime_error 'lost 3 workers'");
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM evaluations WHERE job_id = %lld", (long long)xjob);
    CHECK(q1(db, sql) == 3, "every attempt kept (%lld)", q1(db, sql));
    CHECK(kf_queue_lease(db, &qc, "wDie", cls, 1, &lx, err, sizeof(err)) == KF_Q_OK &&
          lx.job_id != xjob, "exhausted job not leased again");

    /* ---- leases never acknowledged (replies lost): no attempt consumed,
     *      never the candidate's runtime_error; the fifth ends as infra_error ---- */
    {
        kf_lease lu;
        int64_t ujob = 0;
        for (int i = 0; i < 5; i++) {
            CHECK(kf_queue_lease(db, &qc, "wLost", cls, 1, &lu, err, sizeof(err)) == KF_Q_OK, "%s", err);
            if (i == 0) ujob = lu.job_id;
            CHECK(lu.job_id == ujob && lu.attempt == 1, "unacknowledged expiry %d: job %lld attempt %d (expected "
                  "job %lld, attempt 1 every time)", i, (long long)lu.job_id, lu.attempt, (long long)ujob);
            snprintf(sql, sizeof(sql), "UPDATE jobs SET lease_deadline = now() - interval '1 second' WHERE id = %lld",
                     (long long)lu.job_id);
            exec_ok(db, sql);
            CHECK(kf_queue_reap(db, &qc, &rq, &ex, err, sizeof(err)) == 0, "%s", err);
        }
        CHECK(ex == 1, "the fifth unacknowledged expiry ends the job (exhausted %d)", ex);
        snprintf(sql, sizeof(sql), "SELECT count(*) FROM evaluations WHERE job_id = %lld AND is_final "
                 "AND verdict = 'infra_error' AND detail LIKE '%%unacknowledged 5 times%%'", (long long)ujob);
        CHECK(q1(db, sql) == 1, "final infra_error after 5 unacknowledged expiries");
        snprintf(sql, sizeof(sql), "SELECT count(*) FROM evaluations WHERE job_id = %lld AND verdict = "
                 "'runtime_error'", (long long)ujob);
        CHECK(q1(db, sql) == 0, "never a runtime_error for lost replies");
    }

    /* ---- heartbeats in lease_beats (schema 018): only a lease's first
     *      heartbeat writes the job's row (acknowledged, durable); a lease
     *      lives while its row's or its beat's deadline is ahead; a database
     *      crash (the table emptied) gives every lease one lease length of
     *      grace, and an acknowledged lease lost in it is still an attempt;
     *      expired stale beats are swept. Only this block's leases are
     *      expired (others are used below). ---- */
    {
        kf_lease lh, lg;
        char ids[64];
        CHECK(kf_queue_lease(db, &qc, "wBeat", cls, 1, &lh, err, sizeof(err)) == KF_Q_OK, "%s", err);
        CHECK(kf_queue_lease(db, &qc, "wBeat2", cls, 1, &lg, err, sizeof(err)) == KF_Q_OK, "%s", err);
        CHECK(kf_queue_heartbeat(db, &qc, "wBeat", lh.job_id, lh.fencing_token, lh.lease_token, 16, err,
                                 sizeof(err)) == KF_Q_OK, "first heartbeat: %s", err);
        snprintf(sql, sizeof(sql), "SELECT count(*) FROM jobs WHERE id = %lld AND acked", (long long)lh.job_id);
        CHECK(q1(db, sql) == 1, "the first heartbeat acknowledged the lease in the job's row");
        snprintf(sql, sizeof(sql), "SELECT xmin::text::bigint FROM jobs WHERE id = %lld", (long long)lh.job_id);
        long long xmin0 = q1(db, sql);
        CHECK(kf_queue_heartbeat(db, &qc, "wBeat", lh.job_id, lh.fencing_token, lh.lease_token, 16, err,
                                 sizeof(err)) == KF_Q_OK, "second heartbeat: %s", err);
        CHECK(q1(db, sql) == xmin0, "the second heartbeat left the job's row as it was (no new row version)");
        snprintf(sql, sizeof(sql), "SELECT count(*) FROM lease_beats WHERE job_id = %lld AND fencing_token = %lld"
                 " AND deadline > now() + interval '20 seconds'", (long long)lh.job_id, (long long)lh.fencing_token);
        CHECK(q1(db, sql) == 1, "the beat: alive for a lease length");
        /* both rows' deadlines pass; only lh's beat is ahead: lg is
         * reaped, lh lives */
        snprintf(ids, sizeof(ids), "(%lld, %lld)", (long long)lh.job_id, (long long)lg.job_id);
        snprintf(sql, sizeof(sql), "UPDATE jobs SET lease_deadline = now() - interval '30 seconds' WHERE id IN %s", ids);
        exec_ok(db, sql);
        CHECK(kf_queue_reap(db, &qc, &rq, &ex, err, sizeof(err)) == 0 && rq == 1 && ex == 0,
              "the lease never heartbeat expires (requeued %d, exhausted %d: %s)", rq, ex, err);
        snprintf(sql, sizeof(sql), "SELECT count(*) FROM jobs WHERE id = %lld AND state = 'leased'",
                 (long long)lh.job_id);
        CHECK(q1(db, sql) == 1, "the heartbeat lease is the one still leased");
        /* a crash empties the table (TRUNCATE stands for crash recovery),
         * after outages the pulse added to the row's deadline (two hours):
         * the grace is one lease length all the same */
        snprintf(sql, sizeof(sql), "UPDATE jobs SET leased_at = now() - interval '2 hours',"
                 " lease_deadline = now() - interval '1 second' WHERE id = %lld", (long long)lh.job_id);
        exec_ok(db, sql);
        exec_ok(db, "TRUNCATE lease_beats");
        CHECK(kf_queue_reap(db, &qc, &rq, &ex, err, sizeof(err)) == 0 && rq == 0 && ex == 0,
              "no lease reaped while the beats are rebuilt (requeued %d: %s)", rq, err);
        snprintf(sql, sizeof(sql), "SELECT count(*) FROM lease_beats WHERE job_id = %lld"
                 " AND deadline > now() + interval '25 seconds' AND deadline < now() + interval '35 seconds'",
                 (long long)lh.job_id);
        CHECK(q1(db, sql) == 1, "rebuilt: one lease length (30 s) of grace");
        CHECK(q1(db, "SELECT count(*) FROM lease_beats WHERE job_id = 0") == 1, "the marker is back");
        /* the worker died with the database (one host, out of memory): the
         * grace passes; its lease was acknowledged, so it is an attempt */
        snprintf(sql, sizeof(sql), "UPDATE lease_beats SET deadline = now() - interval '1 second' WHERE job_id = %lld",
                 (long long)lh.job_id);
        exec_ok(db, sql);
        CHECK(kf_queue_reap(db, &qc, &rq, &ex, err, sizeof(err)) == 0 && rq == 1 && ex == 0, "%s", err);
        snprintf(sql, sizeof(sql), "SELECT count(*) FROM evaluations WHERE job_id = %lld AND fencing_token = %lld"
                 " AND NOT is_final AND detail LIKE '%%worker wBeat stopped answering%%'", (long long)lh.job_id,
                 (long long)lh.fencing_token);
        CHECK(q1(db, sql) == 1, "an acknowledged lease lost in a database crash is an attempt");
        snprintf(sql, sizeof(sql), "SELECT count(*) FROM lease_beats WHERE job_id IN %s", ids);
        CHECK(q1(db, sql) == 0, "the reaped leases' beats gone");
        /* a lease never heartbeat, lost in a crash: not an attempt */
        CHECK(kf_queue_lease(db, &qc, "wBeat", cls, 1, &lh, err, sizeof(err)) == KF_Q_OK, "%s", err);
        exec_ok(db, "TRUNCATE lease_beats");
        CHECK(kf_queue_reap(db, &qc, &rq, &ex, err, sizeof(err)) == 0 && rq == 0, "%s", err);
        snprintf(sql, sizeof(sql), "UPDATE jobs SET lease_deadline = now() - interval '1 second' WHERE id = %lld",
                 (long long)lh.job_id);
        exec_ok(db, sql);
        snprintf(sql, sizeof(sql), "UPDATE lease_beats SET deadline = now() - interval '1 second' WHERE job_id = %lld",
                 (long long)lh.job_id);
        exec_ok(db, sql);
        CHECK(kf_queue_reap(db, &qc, &rq, &ex, err, sizeof(err)) == 0 && rq == 1, "%s", err);
        snprintf(sql, sizeof(sql), "SELECT count(*) FROM evaluations WHERE job_id = %lld AND fencing_token = %lld"
                 " AND detail LIKE '%%before worker wBeat acknowledged%%'", (long long)lh.job_id,
                 (long long)lh.fencing_token);
        CHECK(q1(db, sql) == 1, "an unacknowledged lease lost in a crash is not an attempt");
        /* stale beats (their leases ended elsewhere) go at the next sweep
         * once expired; a live-looking one stays until it expires */
        exec_ok(db, "INSERT INTO lease_beats (job_id, fencing_token, deadline) VALUES"
                    " (987654321, 5, now() - interval '1 second'), (987654322, 5, now() + interval '1 hour')");
        CHECK(kf_queue_reap(db, &qc, &rq, &ex, err, sizeof(err)) == 0, "%s", err);
        CHECK(q1(db, "SELECT count(*) FROM lease_beats WHERE job_id = 987654321") == 1, "no sweep within 30 s");
        exec_ok(db, "UPDATE lease_beats SET deadline = now() - interval '31 seconds' WHERE job_id = 0");
        CHECK(kf_queue_reap(db, &qc, &rq, &ex, err, sizeof(err)) == 0, "%s", err);
        CHECK(q1(db, "SELECT count(*) FROM lease_beats WHERE job_id = 987654321") == 0, "the expired stale beat swept");
        CHECK(q1(db, "SELECT count(*) FROM lease_beats WHERE job_id = 987654322") == 1,
              "a beat not yet expired is not swept");
        CHECK(q1(db, "SELECT count(*) FROM lease_beats WHERE job_id = 0 AND deadline > now() - interval '5 s'") == 1,
              "the marker holds the sweep's time");
        exec_ok(db, "DELETE FROM lease_beats WHERE job_id = 987654322");
    }

    /* ---- infra_error: requeue, quarantine ---- */
    kf_result infra = { .verdict = "infra_error", .detail = "nvcc missing" };
    int requeued = 0;
    CHECK(kf_queue_result(db, &qc, "wDie", lx.job_id, lx.fencing_token, lx.lease_token, 16, &infra, &requeued, err,
                          sizeof(err)) == KF_Q_OK, "%s", err);
    CHECK(requeued, "infra_error requeues");
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM evaluations WHERE job_id = %lld AND NOT is_final "
             "AND verdict = 'infra_error'", (long long)lx.job_id);
    CHECK(q1(db, sql) == 1, "infra_error kept as a non-final attempt");
    CHECK(kf_queue_result(db, &qc, "wDie", lx.job_id, lx.fencing_token, lx.lease_token, 16, &infra, &requeued, err,
                          sizeof(err)) == KF_Q_DUPLICATE, "infra_error resend is DUPLICATE");
    for (int i = 0; i < 2; i++) {
        kf_lease li;
        CHECK(kf_queue_lease(db, &qc, "wBad", cls, 1, &li, err, sizeof(err)) == KF_Q_OK, "%s", err);
        CHECK(kf_queue_result(db, &qc, "wBad", li.job_id, li.fencing_token, li.lease_token, 16, &infra, NULL, err,
                              sizeof(err)) == KF_Q_OK, "%s", err);
    }
    kf_lease li;
    CHECK(kf_queue_lease(db, &qc, "wBad", cls, 1, &li, err, sizeof(err)) == KF_Q_OK, "%s", err);
    CHECK(kf_queue_result(db, &qc, "wBad", li.job_id, li.fencing_token, li.lease_token, 16, &infra, NULL, err,
                          sizeof(err)) == KF_Q_OK, "%s", err);
    CHECK(q1(db, "SELECT quarantined::int FROM workers WHERE id = 'wBad'") == 1,
          "3 consecutive infra_errors quarantine");
    CHECK(kf_queue_lease(db, &qc, "wBad", cls, 1, &li, err, sizeof(err)) == KF_Q_NO_JOB &&
          strstr(err, "quarantined"), "quarantined worker gets no job: %s", err);
    CHECK(kf_queue_set_quarantine(db, "wBad", 0, err, sizeof(err)) == 0, "%s", err);
    CHECK(kf_queue_set_quarantine(db, "nobody", 0, err, sizeof(err)) < 0, "unknown worker");

    /* ---- infra_error is retried elsewhere while another worker is live ---- */
    kf_lease lr, lr2;
    exec_ok(db, "UPDATE jobs SET max_attempts = 100"); /* room for retries */
    CHECK(kf_queue_lease(db, &qc, "wR", cls, 1, &lr, err, sizeof(err)) == KF_Q_OK, "%s", err);
    CHECK(kf_queue_result(db, &qc, "wR", lr.job_id, lr.fencing_token, lr.lease_token, 16, &infra, &requeued, err,
                          sizeof(err)) == KF_Q_OK && requeued, "%s", err);
    CHECK(kf_queue_lease(db, &qc, "wR", cls, 1, &lr2, err, sizeof(err)) == KF_Q_OK, "%s", err);
    CHECK(lr2.job_id != lr.job_id, "job %lld re-leased to the worker that failed it with infra_error "
          "while others are live", (long long)lr.job_id);
    CHECK(kf_queue_release(db, lr2.job_id, lr2.fencing_token, err, sizeof(err)) == 0, "%s", err);
    exec_ok(db, "UPDATE workers SET last_seen = now() - interval '1 hour' WHERE id <> 'wR'");
    CHECK(kf_queue_lease(db, &qc, "wR", cls, 1, &lr2, err, sizeof(err)) == KF_Q_OK &&
          lr2.job_id == lr.job_id, "alone, the worker retries its own infra_error job: %s", err);
    CHECK(kf_queue_result(db, &qc, "wR", lr2.job_id, lr2.fencing_token, lr2.lease_token, 16, &ok, NULL, err, sizeof(err)) ==
          KF_Q_OK, "%s", err);

    /* ---- a job every live worker failed with infra_error is not stranded ---- */
    kf_lease ls1, ls2, ls3;
    CHECK(kf_queue_lease(db, &qc, "wS1", cls, 1, &ls1, err, sizeof(err)) == KF_Q_OK, "%s", err);
    CHECK(kf_queue_result(db, &qc, "wS1", ls1.job_id, ls1.fencing_token, ls1.lease_token, 16, &infra, NULL, err,
                          sizeof(err)) == KF_Q_OK, "%s", err);
    exec_ok(db, "UPDATE workers SET last_seen = now() - interval '1 hour' WHERE id NOT IN ('wS1', 'wS2')");
    CHECK(kf_queue_lease(db, &qc, "wS2", cls, 1, &ls2, err, sizeof(err)) == KF_Q_OK &&
          ls2.job_id == ls1.job_id, "another worker takes the failed job: %s", err);
    CHECK(kf_queue_result(db, &qc, "wS2", ls2.job_id, ls2.fencing_token, ls2.lease_token, 16, &infra, NULL, err,
                          sizeof(err)) == KF_Q_OK, "%s", err);
    CHECK(kf_queue_lease(db, &qc, "wS1", cls, 1, &ls3, err, sizeof(err)) == KF_Q_OK &&
          ls3.job_id == ls1.job_id, "when every live worker has failed a job, it is retried "
          "(not stranded): got job %lld, want %lld", (long long)ls3.job_id, (long long)ls1.job_id);
    CHECK(kf_queue_result(db, &qc, "wS1", ls3.job_id, ls3.fencing_token, ls3.lease_token, 16, &ok, NULL, err, sizeof(err)) ==
          KF_Q_OK, "%s", err);

    /* ---- hostile results ---- */
    kf_lease lh;
    CHECK(kf_queue_lease(db, &qc, "wH", cls, 1, &lh, err, sizeof(err)) == KF_Q_OK, "%s", err);
    kf_result bad = res_ok();
    bad.verdict = "excellent";
    CHECK(kf_queue_result(db, &qc, "wH", lh.job_id, lh.fencing_token, lh.lease_token, 16, &bad, NULL, err, sizeof(err)) ==
          KF_Q_REJECTED, "unknown verdict");
    CHECK(kf_queue_result(db, &qc, "wH", 999999, 1, NULL, 0, &bad, NULL, err, sizeof(err)) == KF_Q_REJECTED,
          "unknown job");
    bad = res_ok();
    bad.verdict = "incorrect";
    bad.metrics_json = "{not json";
    bad.detail = "bad byte \xff\xfe here";
    bad.compile_log = "\xc3\x28 log";
    bad.speedup = 0.0 / 0.0;
    CHECK(kf_queue_result(db, &qc, "wH", lh.job_id, lh.fencing_token, lh.lease_token, 16, &bad, NULL, err, sizeof(err)) ==
          KF_Q_OK, "hostile strings must be stored sanitized: %s", err);
    snprintf(sql, sizeof(sql), "SELECT (metrics IS NULL AND speedup IS NULL AND detail LIKE "
             "'bad byte%%')::int FROM evaluations WHERE job_id = %lld AND is_final", (long long)lh.job_id);
    CHECK(q1(db, sql) == 1, "sanitized row");

    /* ---- verification disputes: only a worker that several peers
     * contradict is quarantined (schema/013_dispute_peers.sql, verify.h) ---- */
    exec_ok(db, "INSERT INTO workers (id) VALUES ('vA'), ('vB'), ('vL'), ('vP'), ('vQ'), ('vM'), ('vR'), ('vS'),"
                " ('vX'), ('vY'), ('vH'), ('vN'), ('vK')");
    int vn = 0;
    /* two workers that only contradict each other, by timing or by verdict:
     * neither can be told the liar, both stay in service */
    for (int i = 0; i < 5; i++)
        CHECK(verify_pair(db, &qc, vn++, i % 2 ? "vA" : "vB", 3.0, i % 2 ? "vB" : "vA",
                          i < 3 ? "ok" : "incorrect", 1.0, NULL), "pair %d", i);
    CHECK(q1(db, "SELECT count(*) FROM workers WHERE id IN ('vA', 'vB') AND NOT quarantined AND disputes = 5 "
                 "AND dispute_counts = jsonb_build_object(CASE id WHEN 'vA' THEN 'vB' ELSE 'vA' END, 5)") == 2,
          "two workers disputing only each other were quarantined or miscounted");
    CHECK(q1(db, "SELECT count(*) FROM evaluations WHERE worker_id IN ('vA', 'vB') AND confirmation = 'disputed'") == 5,
          "their results are disputed all the same");
    /* a liar among three: disputes from one honest peer keep it in service,
     * and so does a single one from the second; two from the second
     * quarantine it, and neither honest worker is */
    for (int i = 0; i < 3; i++)
        CHECK(verify_pair(db, &qc, vn++, "vL", 50.0, "vP", "ok", 1.1, NULL), "liar pair %d", i);
    CHECK(verify_pair(db, &qc, vn++, "vQ", 1.2, "vL", "rejected_cheat", 0, NULL), "liar verifies");
    CHECK(q1(db, "SELECT count(*) FROM workers WHERE id = 'vL' AND NOT quarantined AND disputes = 4") == 1,
          "3 disputes from one peer and 1 from another quarantined the liar");
    CHECK(verify_pair(db, &qc, vn++, "vL", 40.0, "vQ", "ok", 1.2, NULL), "liar pair 4");
    CHECK(q1(db, "SELECT count(*) FROM workers WHERE id = 'vL' AND quarantined AND disputes = 5 AND "
                 "quarantine_reason LIKE '5 verification disputes with 2 other workers (0 agreements)%'") == 1,
          "the liar disputed twice by a second peer is quarantined with the reason");
    CHECK(q1(db, "SELECT count(*) FROM workers WHERE id IN ('vP', 'vQ') AND quarantined") == 0,
          "an honest worker was quarantined");
    /* one liar accusing an honest worker again and again, plus one dispute
     * from timing noise with another honest worker: the honest one stays */
    CHECK(verify_pair(db, &qc, vn++, "vH", 2.0, "vN", "ok", 3.5, NULL), "noise");
    for (int i = 0; i < 4; i++)
        CHECK(verify_pair(db, &qc, vn++, "vH", 2.0, "vK", "incorrect", 0, NULL), "accusation %d", i);
    CHECK(q1(db, "SELECT count(*) FROM workers WHERE id = 'vH' AND NOT quarantined AND disputes = 5") == 1,
          "one accuser and one noisy peer quarantined an honest worker");
    /* agreements that outnumber the disputes still protect a worker */
    for (int i = 0; i < 4; i++)
        CHECK(verify_pair(db, &qc, vn++, "vM", 2.0, i % 2 ? "vR" : "vS", "ok", 2.1, NULL), "agree %d", i);
    for (int i = 0; i < 4; i++)
        CHECK(verify_pair(db, &qc, vn++, "vM", 2.0, i % 2 ? "vR" : "vS", "ok", 9.0, NULL), "dispute %d", i);
    CHECK(q1(db, "SELECT count(*) FROM workers WHERE id = 'vM' AND NOT quarantined AND agreements = 4 "
                 "AND disputes = 4 AND dispute_counts = '{\"vR\": 2, \"vS\": 2}'") == 1,
          "a worker with as many agreements as disputes was quarantined");
    CHECK(verify_pair(db, &qc, vn++, "vM", 2.0, "vS", "ok", 9.0, NULL), "dispute 5");
    CHECK(q1(db, "SELECT count(*) FROM workers WHERE id = 'vM' AND quarantined") == 1,
          "disputes from two peers outnumbering agreements did not quarantine");
    /* an evaluation without a worker is no one's reputation */
    exec_ok(db, "INSERT INTO evaluations (job_id, candidate_id, attempt, worker_id, verdict, speedup, is_final)"
                " VALUES (899990, 1, 1, NULL, 'ok', 9, true), (899991, 1, 1, 'vX', 'incorrect', NULL, true)");
    {
        char oid[32];
        snprintf(oid, sizeof(oid), "%lld", q1(db, "SELECT id FROM evaluations WHERE job_id = 899990"));
        CHECK(kf_db_begin(db, err, sizeof(err)) == 0 && kf_verify_conclude(db, &qc, oid, "899991", err, sizeof(err)) == 0 &&
              kf_db_commit(db, err, sizeof(err)) == 0, "%s", err);
        CHECK(q1(db, "SELECT disputes FROM workers WHERE id = 'vX'") == 0 &&
              q1(db, "SELECT count(*) FROM evaluations WHERE job_id = 899990 AND confirmation = 'disputed'") == 1,
              "a result without a worker: disputed, no reputation changed");
    }
    /* a CV in the metrics that is not a number, or one a float8 cannot
     * hold: the verification still concludes (a cast that failed let a liar
     * fail every verification of its own result, and the result's storage) */
    static const char *const bad_cv[] = {
        "{\"timing\": {\"shapes\": [{\"candidate\": {\"cv\": \"abc\"}, \"baseline\": {\"cv\": true}}]}}",
        "{\"timing\": {\"shapes\": [{\"candidate\": {\"cv\": {}}, \"baseline\": {\"cv\": [1]}}]}}",
        "{\"timing\": {\"shapes\": [{\"candidate\": {\"cv\": 0.0000000000000000000000001e-300}}]}}",
        "{\"timing\": {\"shapes\": [{\"candidate\": {\"cv\": 1e300}, \"baseline\": {\"cv\": -5}}]}}",
        "{\"timing\": {\"shapes\": [1, null, \"x\"]}}",
        "{\"timing\": {\"shapes\": \"x\"}}",
    };
    for (size_t i = 0; i < sizeof(bad_cv) / sizeof(bad_cv[0]); i++)
        CHECK(verify_pair(db, &qc, vn++, "vX", 2.0, "vY", "ok", 2.1, bad_cv[i]), "hostile CV %zu", i);
    CHECK(q1(db, "SELECT count(*) FROM evaluations WHERE worker_id = 'vX' AND confirmation = 'confirmed'") == 6,
          "verifications of results with hostile CVs did not conclude");
    exec_ok(db, "DELETE FROM evaluations WHERE job_id >= 800000");
    exec_ok(db, "DELETE FROM workers WHERE id LIKE 'v_'");

    /* ---- finish the campaign (verification jobs of would-be bests
     * included: they wait a moment before they are leased, skipped here) ---- */
    for (;;) {
        kf_lease l;
        kf_db_cmd(db, "UPDATE jobs SET not_before = NULL", 0, NULL, err, sizeof(err));
        kf_queue_status st = kf_queue_lease(db, &qc, "wZ", cls, 1, &l, err, sizeof(err));
        if (st != KF_Q_OK) break;
        CHECK(kf_queue_result(db, &qc, "wZ", l.job_id, l.fencing_token, l.lease_token, 16, &ok, NULL, err, sizeof(err)) ==
              KF_Q_OK, "%s", err);
    }
    CHECK(kf_campaign_tick(db, err, sizeof(err)) == 0, "%s", err);
    CHECK(q1(db, "SELECT count(*) FROM campaigns WHERE name = 'q1' AND state = 'done'") == 1,
          "campaign done when every job is");
    CHECK(q1(db, "SELECT count(*) FROM jobs j WHERE j.campaign_id = 1 AND (SELECT count(*) FROM "
                 "evaluations e WHERE e.job_id = j.id AND e.is_final) <> 1") == 0,
          "one final evaluation per job");
    CHECK(kf_campaign_start(db, "q1", err, sizeof(err)) < 0, "a done campaign cannot restart");

    /* ---- fair share: leases in proportion to campaigns.share ---- */
    int64_t sa = 0, sb = 0;
    spec.max_candidates = 0;
    spec.name = "share-1";
    spec.share = 1;
    CHECK(kf_campaign_create(db, &spec, &sa, err, sizeof(err)) == 0, "%s", err);
    spec.name = "share-3";
    spec.share = 3;
    CHECK(kf_campaign_create(db, &spec, &sb, err, sizeof(err)) == 0, "%s", err);
    CHECK(kf_campaign_start(db, "share-1", err, sizeof(err)) == 0 &&
          kf_campaign_start(db, "share-3", err, sizeof(err)) == 0, "%s", err);
    CHECK(kf_campaign_step(db, sa, &done, err, sizeof(err)) == 0 &&
          kf_campaign_step(db, sb, &done, err, sizeof(err)) == 0, "%s", err);
    char seq[16] = "";
    for (int i = 0; i < 8; i++) {
        kf_lease l;
        CHECK(kf_queue_lease(db, &qc, "wF", cls, 1, &l, err, sizeof(err)) == KF_Q_OK, "%s", err);
        seq[i] = l.campaign_id == sa ? 'A' : l.campaign_id == sb ? 'B' : '?';
    }
    /* fewest leased per share first, ties to the older campaign:
     * A(0) B(0) -> A; A 1, B 0 -> B; B 1/3, 2/3 -> B, B; A 1 = B 1 -> A; ... */
    CHECK(!strcmp(seq, "ABBBABBB"), "leases by share 1:3 went %s", seq);
    CHECK(kf_campaign_pause(db, "share-1", err, sizeof(err)) == 0 &&
          kf_campaign_pause(db, "share-3", err, sizeof(err)) == 0, "%s", err);

    /* ---- the database enforces one final evaluation per job ---- */
    snprintf(sql, sizeof(sql), "INSERT INTO evaluations (job_id, candidate_id, attempt, verdict, "
             "is_final) SELECT id, candidate_id, 9, 'ok', true FROM jobs WHERE id = %lld",
             (long long)la.job_id);
    CHECK(kf_db_cmd(db, sql, 0, NULL, err, sizeof(err)) < 0, "second final evaluation accepted");

    /* ---- reconnect: a killed backend is survived by the next statement ---- */
    exec_ok(db2, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
                 "AND datname = current_database()");
    CHECK(q1(db, "SELECT 1") == 1, "statement after the backend was killed");

    /* ---- a GetJob from a worker seen < 2 s ago writes nothing to its row ----
     * (an ON CONFLICT DO UPDATE whose WHERE is false still locks the row:
     * xmax would name the GetJob's transaction) */
    {
        kf_lease lx[1];
        kf_queue_lease(db, &qc, "w-quiet", cls, 1, lx, err, sizeof(err)); /* creates the row */
        for (int i = 0; i < 3; i++) kf_queue_lease(db, &qc, "w-quiet", cls, 1, lx, err, sizeof(err));
        CHECK(q1(db, "SELECT count(*) FROM workers WHERE id = 'w-quiet' AND xmax::text = '0'") == 1,
              "GetJob left the worker's row unlocked and unwritten");
        exec_ok(db, "UPDATE workers SET last_seen = now() - interval '3 seconds' WHERE id = 'w-quiet'");
        long long seen0 = q1(db, "SELECT (extract(epoch FROM last_seen) * 1000)::bigint FROM workers WHERE id = 'w-quiet'");
        kf_queue_lease(db, &qc, "w-quiet", cls, 1, lx, err, sizeof(err));
        CHECK(q1(db, "SELECT (extract(epoch FROM last_seen) * 1000)::bigint FROM workers WHERE id = 'w-quiet'") > seen0,
              "a GetJob after 2 s refreshes last_seen");
    }

    /* ---- a prepared statement is planned again as its tables grow ----
     * planned on an empty table, the join below is a sequential scan; the
     * session's plan must be made again (db.c, KF_DB_REPLAN_FIRST_S) so that
     * at 50,000 rows it reads the index */
    kf_db *dp = kf_db_open(conninfo, err, sizeof(err));
    CHECK(dp != NULL, "%s", err);
    if (dp) {
        kf_db_set_prepare(dp, 1);
        exec_ok(dp, "CREATE TABLE replan_t (id bigint PRIMARY KEY, pad text)");
        exec_ok(dp, "ANALYZE replan_t");
        static const char *look = "SELECT count(*) FROM replan_t e JOIN unnest($1::bigint[]) AS q(id) ON e.id = q.id";
        const char *pl[1] = { "{7,70,700}" };
        for (int i = 0; i < 7; i++) {
            PGresult *r = kf_db_exec(dp, look, 1, pl, err, sizeof(err));
            CHECK(r && !strcmp(PQgetvalue(r, 0, 0), "0"), "lookup on the empty table: %s", r ? "" : err);
            if (r) PQclear(r);
        }
        CHECK(q1(dp, "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE '%replan_t e JOIN%'"
                     " AND generic_plans > 0") == 1, "the lookup runs a cached generic plan");
        long long t0 = q1(dp, "SELECT (extract(epoch FROM prepare_time) * 1000)::bigint FROM pg_prepared_statements"
                              " WHERE statement LIKE '%replan_t e JOIN%'");
        exec_ok(dp, "INSERT INTO replan_t SELECT g, repeat('x', 100) FROM generate_series(1, 50000) g");
        sleep_ms(4200);
        /* again inside a transaction, as the group commit's lookups run */
        exec_ok(dp, "BEGIN");
        for (int i = 0; i < 7; i++) {
            PGresult *r = kf_db_exec(dp, look, 1, pl, err, sizeof(err));
            CHECK(r && !strcmp(PQgetvalue(r, 0, 0), "3"), "lookup at 50,000 rows: %s", r ? "" : err);
            if (r) PQclear(r);
        }
        exec_ok(dp, "COMMIT");
        long long t1 = q1(dp, "SELECT (extract(epoch FROM prepare_time) * 1000)::bigint FROM pg_prepared_statements"
                              " WHERE statement LIKE '%replan_t e JOIN%'");
        CHECK(t1 > t0, "the statement was prepared again after the table grew (%lld -> %lld ms)", t0, t1);
        char ex[256] = "";
        PGresult *nm = kf_db_exec(dp, "SELECT 'EXPLAIN EXECUTE ' || name || '(''{7,70,700}'')' FROM pg_prepared_statements"
                                      " WHERE statement LIKE '%replan_t e JOIN%'", 0, NULL, err, sizeof(err));
        if (nm && PQntuples(nm) == 1) snprintf(ex, sizeof(ex), "%s", PQgetvalue(nm, 0, 0));
        if (nm) PQclear(nm);
        PGresult *plan = ex[0] ? kf_db_exec(dp, ex, 0, NULL, err, sizeof(err)) : NULL;
        int seq = 0, idx = 0;
        for (int i = 0; plan && i < PQntuples(plan); i++) {
            seq |= strstr(PQgetvalue(plan, i, 0), "Seq Scan on replan_t") != NULL;
            idx |= strstr(PQgetvalue(plan, i, 0), "Index") != NULL;
        }
        CHECK(plan && idx && !seq, "the plan made again reads the index, not the whole table");
        if (plan) PQclear(plan);
        kf_db_close(dp);
    }

    kf_db_close(db);
    kf_db_close(db2);
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
