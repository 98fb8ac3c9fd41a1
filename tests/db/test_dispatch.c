/*
 * test_dispatch.c -- dispatch at fleet scale (issue 13): leases of several
 * jobs at once, one heartbeat for all of them, and the group commit of
 * results, against a real PostgreSQL and the real coordinator.
 *
 * Needs the ctest `db` fixture and KFARM_BIN (the coordinator binary).
 * Part 1, the library (coordinator/queue.h), deterministic:
 *  - kf_queue_lease_many gives distinct jobs, each its own fencing token
 *    and lease token; a second worker's lease_many gets none of them;
 *  - kf_queue_heartbeat_many extends every lease it names correctly and
 *    refuses a wrong lease token, another worker's lease and a stale token;
 *  - kf_queue_result_group with good results, a stale one, a wrong lease
 *    token, another worker's, an unknown verdict, an unknown job, a second
 *    result for a job already in the group and an infra_error: each gets the
 *    status kf_queue_result would give it alone, only the good ones are
 *    stored, each job ends with exactly one final evaluation;
 *  - a group whose transaction fails (a trigger refuses one row) is stored
 *    result by result: the refused one is answered ERROR, the others OK.
 * Part 2, the real coordinator (8 serving threads): GetJob with max_jobs =
 * 5 grants 5 leases (job + more_jobs); an old-style GetJob one; a
 * heartbeat with Heartbeat.more extends them all and names a bogus lease in
 * cancel_jobs; three workers send their results at the same time (one of
 * them stale): every good one is acknowledged OK, the stale one STALE, and
 * the database holds exactly one final evaluation per job; the results of a
 * lease in one message (Result.more, one stale) are answered one status
 * each (more_status) and only the good ones stored, a resend DUPLICATE.
 * Part 3, what a long campaign must not make slow (schema/006_counts.sql):
 * results stored through the group commit, one at a time and by the
 * reaper keep
 * campaign_counts equal to counting the rows, before and after
 * kf_campaign_compact_counts folds them (and a deleted campaign's go with
 * it); kf_bests, which now reads the top of an index, names the same best,
 * ties and overall best as reading every result in rank order -- with
 * repeated speedups, a disputed fastest result, confirmed slower ones and
 * intervals wide enough to tie the best with results of every speedup;
 * kf_bests_top(3) the first three of those ties and a mark that there are
 * more.
 * Part 4, leases that read the queue from a floor (kf_queue_floors): the
 * floor is the largest id leased; a job queued again below it is passed
 * over until the floor is refreshed, and leased before NO_JOB is answered
 * when nothing is left above the floor.
 * Part 5, the overall best of a campaign with several targets.
 * Part 6, a group stores each result exactly as the plain path stores it
 * alone (every column), with text that could garble an array literal, and
 * metrics with numbers jansson reads but jsonb refuses (1e-16384, 17,000
 * digits after the point): stored, printed by jansson, by both paths.
 * Prints "N passed, M failed"; exit status 1 on any failure.
 */
#define _GNU_SOURCE
#include <math.h>
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nanomsg/nn.h>
#include <nanomsg/reqrep.h>

#include "bests.h"
#include "noise.h"
#include "campaign.h"
#include "db.h"
#include "kf_wire.h"
#include "queue.h"

#include "db_test.h"

/* ---- part 1: the library ---- */

/* A migrated database at conninfo with campaign `name` of m queued jobs
 * and worker `w` registered on "cpu"; NULL (and a failed check) on error. */
static kf_db *open_queue(const char *conninfo, const char *name, int m, const char *w)
{
    char err[1024];
    kf_db *db = kf_db_open(conninfo, err, sizeof(err));
    CHECK(db != NULL, "%s", err);
    if (!db) return NULL;
    CHECK(kf_db_migrate(db, NULL, err, sizeof(err)) == 0, "%s", err);
    if (make_queue(db, name, m) < 0) {
        CHECK(0, "queue setup");
        kf_db_close(db);
        return NULL;
    }
    const char *cls[1] = { "cpu" };
    char dev[] = "[]";
    kf_queue_register_worker(db, w, "h", "cpu", dev, cls, 1, NULL, NULL, 1, err, sizeof(err));
    return db;
}

static void part_library(const char *conninfo)
{
    char err[1024];
    kf_db *db = open_queue(conninfo, "lib", 30, "wa");
    if (!db) return;
    kf_queue_config qc;
    kf_queue_config_default(&qc);
    const char *cls[1] = { "cpu" };
    char dev[] = "[]";
    kf_queue_register_worker(db, "wb", "h", "cpu", dev, cls, 1, NULL, NULL, 1, err, sizeof(err));

    /* leases of several jobs */
    kf_lease a[KF_QUEUE_MAX_LEASES], b[KF_QUEUE_MAX_LEASES];
    int na = 0, nb = 0;
    CHECK(kf_queue_lease_many(db, &qc, "wa", cls, 1, 8, a, &na, err, sizeof(err)) == KF_Q_OK && na == 8,
          "lease 8: got %d (%s)", na, err);
    CHECK(kf_queue_lease_many(db, &qc, "wb", cls, 1, 4, b, &nb, err, sizeof(err)) == KF_Q_OK && nb == 4,
          "lease 4: got %d (%s)", nb, err);
    int distinct = 1;
    for (int i = 0; i < na; i++) {
        for (int k = 0; k < na; k++)
            if (k != i && (a[k].job_id == a[i].job_id || a[k].fencing_token == a[i].fencing_token ||
                           !memcmp(a[k].lease_token, a[i].lease_token, KF_QUEUE_TOKEN_LEN)))
                distinct = 0;
        for (int k = 0; k < nb; k++)
            if (b[k].job_id == a[i].job_id) distinct = 0;
        if (i > 0 && a[i].job_id < a[i - 1].job_id) distinct = 0; /* oldest first */
    }
    CHECK(distinct, "every lease its own job, fencing token and lease token; none given twice");
    CHECK(q1(db, "SELECT count(*) FROM jobs WHERE state = 'leased' AND worker_id = 'wa'") == 8,
          "8 jobs leased to wa");
    kf_lease rest[KF_QUEUE_MAX_LEASES];
    int nrest = 0, more = 0;
    long long left = q1(db, "SELECT count(*) FROM jobs WHERE state = 'queued'");
    /* a short queue is shared: at most half of it to one worker */
    CHECK(kf_queue_lease_many(db, &qc, "wb", cls, 1, 1000, rest, &nrest, err, sizeof(err)) == KF_Q_OK &&
              nrest == (left + 1) / 2 && left > 1 && left <= KF_QUEUE_MAX_LEASES,
          "max_jobs beyond the cap, a short queue: half of it, %d of %lld", nrest, left);
    int total = nrest;
    while (kf_queue_lease_many(db, &qc, "wb", cls, 1, 1000, rest, &nrest, err, sizeof(err)) == KF_Q_OK) {
        CHECK(nrest >= 1, "at least one job while any is queued");
        total += nrest;
    }
    CHECK(total == left, "then the rest of the queue, half at a time, down to one: %d of %lld", total, left);
    CHECK(kf_queue_lease_many(db, &qc, "wb", cls, 1, 3, rest, &more, err, sizeof(err)) == KF_Q_NO_JOB &&
              more == 0, "an empty queue: NO_JOB");

    /* one heartbeat for every lease */
    kf_queue_hb hb[12];
    memset(hb, 0, sizeof(hb));
    uint8_t wrong[KF_QUEUE_TOKEN_LEN];
    memcpy(wrong, a[1].lease_token, sizeof(wrong));
    wrong[0] ^= 0x80;
    for (int i = 0; i < 8; i++) {
        hb[i].job_id = a[i].job_id;
        hb[i].token = a[i].fencing_token;
        hb[i].lease_token = a[i].lease_token;
        hb[i].lease_token_len = KF_QUEUE_TOKEN_LEN;
    }
    hb[1].lease_token = wrong;                  /* a guessed lease token */
    hb[8] = hb[0];
    hb[8].job_id = b[0].job_id;                 /* another worker's lease */
    hb[8].token = b[0].fencing_token;
    hb[8].lease_token = b[0].lease_token;
    hb[9] = hb[2];
    hb[9].token = a[2].fencing_token + 100000;  /* a stale fencing token */
    hb[10] = hb[3];
    hb[10].lease_token_len = 3;                 /* a malformed lease token */
    exec_ok(db, "UPDATE jobs SET lease_deadline = now() + interval '1 second' WHERE worker_id = 'wa'");
    hb[11] = hb[4];                             /* a lease named twice */
    int ext = kf_queue_heartbeat_many(db, &qc, "wa", hb, 12, err, sizeof(err));
    CHECK(ext == 8, "7 leases extended (one named twice), got %d (%s)", ext, err);
    CHECK(hb[0].alive && !hb[1].alive && hb[2].alive && !hb[8].alive && !hb[9].alive && !hb[10].alive &&
          hb[4].alive && hb[11].alive,
          "the refused ones: wrong token, another worker's, stale, malformed; the twice-named alive");
    CHECK(q1(db, "SELECT count(*) FROM jobs j JOIN lease_beats b ON b.job_id = j.id"
                 " AND b.fencing_token = j.fencing_token WHERE j.worker_id = 'wa' AND j.acked"
                 " AND b.deadline > now() + interval '20 seconds'") == 7,
          "7 leases acknowledged and pushed to now + lease (their beats, schema 018)");
    CHECK(q1(db, "SELECT count(*) FROM jobs WHERE worker_id = 'wa' AND lease_deadline > now() + interval '2 seconds'")
              == 0, "the jobs' deadlines not written by the heartbeat");
    CHECK(q1(db, "SELECT count(*) FROM jobs j LEFT JOIN lease_beats b ON b.job_id = j.id"
                 " WHERE j.worker_id = 'wb' AND (j.acked OR b.job_id IS NOT NULL)") == 0,
          "wb's leases untouched");

    /* group commit: good, stale, guessed, another worker's, bad verdict,
     * unknown job, a job twice, an infra_error */
    kf_result good = ok_result(1.2), good2 = ok_result(1.1), infra = ok_result(0);
    kf_result badv = ok_result(1);
    badv.verdict = "excellent";
    infra.verdict = "infra_error";
    infra.detail = "gpu fell off the bus";
    kf_queue_item it[10];
    item(&it[0], "wa", &a[0], &good);
    item(&it[1], "wa", &a[1], &good2);
    item(&it[2], "wa", &a[2], &good);
    it[2].token += 100000;                      /* stale */
    item(&it[3], "wa", &a[3], &good);
    it[3].lease_token = wrong;                  /* guessed lease token */
    item(&it[4], "wa", &b[1], &good);           /* another worker's job */
    it[4].lease_token = b[1].lease_token;
    item(&it[5], "wa", &a[4], &badv);           /* unknown verdict */
    item(&it[6], "wa", &a[5], &good);
    it[6].job_id = 987654321;                   /* no such job */
    item(&it[7], "wa", &a[0], &good);           /* job a[0] a second time: a resend */
    item(&it[8], "wa", &a[6], &infra);          /* infra_error: stored on its own, requeued */
    item(&it[9], "wa", &a[7], &good);
    int stored = kf_queue_result_group(db, &qc, it, 10);
    CHECK(stored == 3, "3 results stored by the group itself, got %d", stored);
    CHECK(it[0].st == KF_Q_OK && it[1].st == KF_Q_OK && it[9].st == KF_Q_OK, "good ones OK: %d %d %d",
          it[0].st, it[1].st, it[9].st);
    CHECK(it[2].st == KF_Q_STALE, "stale: %d %s", it[2].st, it[2].err);
    CHECK(it[3].st == KF_Q_REJECTED && strstr(it[3].err, "wrong lease token"), "guessed: %d %s", it[3].st,
          it[3].err);
    CHECK(it[4].st == KF_Q_REJECTED && strstr(it[4].err, "another worker"), "another's: %d %s",
          it[4].st, it[4].err);
    CHECK(it[5].st == KF_Q_REJECTED && strstr(it[5].err, "unknown verdict"), "verdict: %d %s",
          it[5].st, it[5].err);
    CHECK(it[6].st == KF_Q_REJECTED && strstr(it[6].err, "no job"), "unknown job: %d %s", it[6].st,
          it[6].err);
    CHECK(it[7].st == KF_Q_DUPLICATE, "second result for a job in the group: %d %s", it[7].st, it[7].err);
    CHECK(it[8].st == KF_Q_OK && it[8].requeued, "infra_error stored and requeued: %d %d", it[8].st,
          it[8].requeued);
    char sql[512];
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM evaluations WHERE is_final AND reported AND job_id IN (%lld, %lld, %lld)"
             " AND worker_id = 'wa' AND verdict = 'ok'",
             (long long)a[0].job_id, (long long)a[1].job_id, (long long)a[7].job_id);
    CHECK(q1(db, sql) == 3, "the 3 good results stored final");
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM jobs WHERE state = 'leased' AND id IN (%lld, %lld, %lld, %lld, %lld)",
             (long long)a[2].job_id, (long long)a[3].job_id, (long long)a[4].job_id, (long long)a[5].job_id,
             (long long)b[1].job_id);
    CHECK(q1(db, sql) == 5, "the refused results changed nothing: their jobs still leased");
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM evaluations WHERE job_id IN (%lld, %lld, %lld, %lld, %lld)",
             (long long)a[2].job_id, (long long)a[3].job_id, (long long)a[4].job_id, (long long)a[5].job_id,
             (long long)b[1].job_id);
    CHECK(q1(db, sql) == 0, "and stored nothing");
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM jobs WHERE state = 'queued' AND id = %lld",
             (long long)a[6].job_id);
    CHECK(q1(db, sql) == 1, "the infra_error's job is queued again");
    CHECK(q1(db, "SELECT jobs_done FROM workers WHERE id = 'wa'") == 3, "wa's jobs_done counts the 3");
    /* the same results again (a resend after a lost reply): acknowledged, nothing stored */
    kf_queue_item again[2];
    item(&again[0], "wa", &a[0], &good);
    item(&again[1], "wa", &a[1], &good2);
    kf_queue_result_group(db, &qc, again, 2);
    CHECK(again[0].st == KF_Q_DUPLICATE && again[1].st == KF_Q_DUPLICATE, "resent group: DUPLICATE %d %d",
          again[0].st, again[1].st);
    CHECK(q1(db, "SELECT count(*) FROM evaluations WHERE worker_id = 'wa' AND reported") == 4,
          "no second evaluation");

    /* no lease token with a token's length (a caller's mistake; the wire
     * never gives it): refused as the plain path refuses it, the job still
     * leased (an ASan build of this test caught the group reading 16 bytes
     * from a 1-byte string here) */
    kf_queue_item nt[2];
    item(&nt[0], "wa", &a[3], &good);
    nt[0].lease_token = NULL;
    nt[0].lease_token_len = KF_QUEUE_TOKEN_LEN;
    item(&nt[1], "wa", &b[1], &good);
    nt[1].lease_token = b[1].lease_token;
    CHECK(kf_queue_result_group(db, &qc, nt, 2) == 0, "a group of no token and another's lease stores nothing");
    CHECK(nt[0].st == KF_Q_REJECTED && strstr(nt[0].err, "wrong lease token"), "no token: %d %s", nt[0].st,
          nt[0].err);
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM jobs WHERE state = 'leased' AND id = %lld",
             (long long)a[3].job_id);
    CHECK(q1(db, sql) == 1, "its job still leased");

    /* a group whose transaction fails: every result on its own, the bad one
     * ERROR, the others stored */
    exec_ok(db, "CREATE FUNCTION kft_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                " IF NEW.detail = 'refuse me' THEN RAISE EXCEPTION 'refused by the test'; END IF;"
                " RETURN NEW; END $$");
    exec_ok(db, "CREATE TRIGGER kft_refuse BEFORE INSERT ON evaluations FOR EACH ROW EXECUTE FUNCTION kft_refuse()");
    kf_result refused = ok_result(1.3);
    refused.detail = "refuse me";
    kf_queue_item f[3];
    item(&f[0], "wa", &a[4], &good);
    item(&f[1], "wa", &a[5], &refused);
    item(&f[2], "wa", &a[2], &good);
    stored = kf_queue_result_group(db, &qc, f, 3);
    CHECK(stored == 0, "the group's transaction failed: %d", stored);
    CHECK(f[0].st == KF_Q_OK && f[2].st == KF_Q_OK, "the others stored on their own: %d %d", f[0].st, f[2].st);
    CHECK(f[1].st == KF_Q_ERROR && strstr(f[1].err, "refused by the test"), "the refused one ERROR: %d %s",
          f[1].st, f[1].err);
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM evaluations WHERE is_final AND job_id IN (%lld, %lld)",
             (long long)a[4].job_id, (long long)a[2].job_id);
    CHECK(q1(db, sql) == 2, "both stored");
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM jobs WHERE state = 'leased' AND id = %lld",
             (long long)a[5].job_id);
    CHECK(q1(db, sql) == 1, "the refused one's job still leased (the worker retries)");
    exec_ok(db, "DROP TRIGGER kft_refuse ON evaluations");
    CHECK(q1(db, "SELECT count(*) FROM (SELECT job_id FROM evaluations WHERE is_final"
                 " GROUP BY job_id HAVING count(*) > 1) x") == 0, "never two final evaluations of a job");
    kf_db_close(db);
}

/* ---- part 2: the real coordinator ---- */

static Kfarm__Reply *do_register(kf_wire_client *c)
{
    char *cls[1] = { "cpu" };
    Kfarm__Register reg = KFARM__REGISTER__INIT;
    reg.worker_id = c->id;
    reg.backend = "cpu";
    reg.n_classes = 1;
    reg.classes = cls;
    Kfarm__Request req = KFARM__REQUEST__INIT;
    req.msg_case = KFARM__REQUEST__MSG_REGISTER;
    req.register_ = &reg;
    return call(c, &req);
}

static Kfarm__Reply *get_jobs(kf_wire_client *c, int max)
{
    char *cls[1] = { "cpu" };
    Kfarm__GetJob g = KFARM__GET_JOB__INIT;
    g.worker_id = c->id;
    g.n_classes = 1;
    g.classes = cls;
    if (max > 0) {
        g.has_max_jobs = 1;
        g.max_jobs = (uint32_t)max;
    }
    Kfarm__Request req = KFARM__REQUEST__INIT;
    req.msg_case = KFARM__REQUEST__MSG_GET_JOB;
    req.get_job = &g;
    return call(c, &req);
}

static const Kfarm__Job *nth(const Kfarm__Reply *r, size_t i)
{
    return i == 0 ? r->job : r->more_jobs[i - 1];
}

/* Seal a Result for job j of worker c (token_delta shifts the fencing token). */
static int send_result(kf_wire_client *c, const Kfarm__Job *j, int64_t token_delta)
{
    char err[256];
    Kfarm__Result r = KFARM__RESULT__INIT;
    r.worker_id = c->id;
    r.job_id = j->job_id;
    r.fencing_token = (uint64_t)((int64_t)j->fencing_token + token_delta);
    r.has_lease_token = j->has_lease_token;
    r.lease_token = j->lease_token;
    r.verdict = "ok";
    r.metrics_json = "{\"cv\": 0.01}";
    r.has_candidate_us = r.has_baseline_us = r.has_speedup = 1;
    r.candidate_us = 10;
    r.baseline_us = 10;
    r.speedup = 1.0;
    Kfarm__Request req = KFARM__REQUEST__INIT;
    req.msg_case = KFARM__REQUEST__MSG_RESULT;
    req.result = &r;
    uint8_t *frame;
    size_t flen;
    if (kf_wire_client_seal(c, &req, &frame, &flen, err, sizeof(err)) < 0) return -1;
    int rc = nn_send(c->sock, frame, flen, 0);
    free(frame);
    return rc < 0 ? -1 : 0;
}

/* The status of the reply waiting on c's socket (-1: none or unreadable). */
static int recv_status(kf_wire_client *c)
{
    void *buf = NULL;
    int n = nn_recv(c->sock, &buf, NN_MSG, 0);
    if (n < 0) return -1;
    kf_frame f;
    char err[256];
    int st = -1;
    if (kf_frame_parse(buf, (size_t)n, KF_WIRE_MAX_MSG, &f, err, sizeof(err)) == 0 &&
        f.kind == KF_FRAME_REPLY && kf_frame_check_header(&f, c->key.down) == 0 &&
        kf_frame_check_body(&f, c->key.down) == 0) {
        Kfarm__Reply *r = kfarm__reply__unpack(NULL, f.body_len, f.body);
        if (r) st = (int)r->status;
        if (r) kfarm__reply__free_unpacked(r, NULL);
    }
    nn_freemsg(buf);
    return st;
}

static void part_server(const char *conninfo)
{
    char err[1024];
    const char *bin = env_or("KFARM_BIN", NULL);
    CHECK(bin != NULL, "KFARM_BIN");
    if (!bin) return;
    char dir[] = "/tmp/kft-dispatch.XXXXXX";
    if (!mkdtemp(dir)) return;
    char addr[256], logpath[256], coord[4096];
    snprintf(addr, sizeof(addr), "ipc://%s/coord.ipc", dir);
    snprintf(logpath, sizeof(logpath), "%s/coordinator.log", dir);
    snprintf(coord, sizeof(coord), "%s/kfarm-coordinator", bin);
    kf_db *db = NULL;
    kf_embedded_file mig[32];
    int nmig = kf_db_embedded_schema(mig, 32);
    pid_t pid = fork();
    if (pid == 0) {
        FILE *lf = freopen(logpath, "w", stderr);
        (void)lf;
        execl(coord, coord, "--db", conninfo, "--listen", addr, "--threads", "8", (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 50 && !db; i++) {
        sleep_ms(200);
        kf_db *d = kf_db_open(conninfo, err, sizeof(err));
        if (d && q1(d, "SELECT count(*) FROM schema_version") >= nmig) db = d;
        else kf_db_close(d);
    }
    CHECK(db != NULL, "coordinator did not migrate the database");
    if (!db || make_queue(db, "srv", 20) < 0) goto end;

    kf_wire_client w[3];
    int socks[3];
    const char *names[3] = { "multi-1", "multi-2", "multi-3" };
    for (int i = 0; i < 3; i++) {
        socks[i] = nn_socket(AF_SP, NN_REQ);
        kf_wire_socket_setup(socks[i], KF_WIRE_MAX_MSG, 5000, 5000, err, sizeof(err));
        nn_connect(socks[i], addr);
        enroll(db, socks[i], names[i], &w[i]);
        Kfarm__Reply *r = do_register(&w[i]);
        CHECK(r && r->status == KFARM__STATUS__OK, "register %s", names[i]);
        if (r) kfarm__reply__free_unpacked(r, NULL);
    }
    Kfarm__Reply *ra = get_jobs(&w[0], 5), *rb = get_jobs(&w[1], 0), *rc = get_jobs(&w[2], 3);
    CHECK(ra && ra->status == KFARM__STATUS__OK && ra->job && ra->n_more_jobs == 4,
          "max_jobs 5: job + 4 more (%zu)", ra ? ra->n_more_jobs : 0);
    CHECK(rb && rb->status == KFARM__STATUS__OK && rb->job && rb->n_more_jobs == 0,
          "an old-style GetJob (no max_jobs): one job");
    CHECK(rc && rc->status == KFARM__STATUS__OK && rc->job && rc->n_more_jobs == 2, "max_jobs 3: 3 jobs");
    if (!ra || !rb || !rc || !ra->job || !rb->job || !rc->job || ra->n_more_jobs != 4 || rc->n_more_jobs != 2)
        goto done;
    int fine = 1;
    for (size_t i = 0; i < 5; i++) {
        const Kfarm__Job *j = nth(ra, i);
        fine &= j->has_lease_token && j->lease_token.len == 16 && j->source.len > 0 && j->n_task_files > 0;
    }
    CHECK(fine, "every job of the lease carries its source, task files and lease token");
    snprintf(err, sizeof(err), "SELECT count(*) FROM jobs WHERE state = 'leased' AND worker_id = 'multi-1'");
    CHECK(q1(db, err) == 5, "5 jobs leased to multi-1");

    /* one heartbeat for the five, plus a bogus lease */
    Kfarm__Heartbeat hb = KFARM__HEARTBEAT__INIT;
    Kfarm__LeaseRef refs[5], *refp[5];
    hb.worker_id = (char *)names[0];
    hb.job_id = ra->job->job_id;
    hb.fencing_token = ra->job->fencing_token;
    hb.has_lease_token = 1;
    hb.lease_token = ra->job->lease_token;
    for (size_t i = 0; i < 4; i++) {
        Kfarm__LeaseRef lr = KFARM__LEASE_REF__INIT;
        lr.job_id = ra->more_jobs[i]->job_id;
        lr.fencing_token = ra->more_jobs[i]->fencing_token;
        lr.has_lease_token = 1;
        lr.lease_token = ra->more_jobs[i]->lease_token;
        refs[i] = lr;
        refp[i] = &refs[i];
    }
    Kfarm__LeaseRef bogus = KFARM__LEASE_REF__INIT;
    bogus.job_id = rb->job->job_id; /* another worker's job */
    bogus.fencing_token = rb->job->fencing_token;
    bogus.has_lease_token = 1;
    bogus.lease_token = rb->job->lease_token;
    refs[4] = bogus;
    refp[4] = &refs[4];
    hb.n_more = 5;
    hb.more = refp;
    Kfarm__Request req = KFARM__REQUEST__INIT;
    req.msg_case = KFARM__REQUEST__MSG_HEARTBEAT;
    req.heartbeat = &hb;
    Kfarm__Reply *hr = call(&w[0], &req);
    CHECK(hr && hr->status == KFARM__STATUS__OK && hr->has_lease_ms, "heartbeat of 5 leases OK");
    CHECK(hr && hr->n_cancel_jobs == 1 && hr->cancel_jobs[0] == rb->job->job_id,
          "the other worker's lease named in cancel_jobs (%zu)", hr ? hr->n_cancel_jobs : 0);
    if (hr) kfarm__reply__free_unpacked(hr, NULL);
    CHECK(q1(db, "SELECT count(*) FROM jobs j JOIN lease_beats b ON b.job_id = j.id"
                 " AND b.fencing_token = j.fencing_token WHERE j.state = 'leased'"
                 " AND j.worker_id = 'multi-1' AND j.acked") == 5,
          "all 5 acknowledged by the one heartbeat");
    CHECK(q1(db, "SELECT count(*) FROM jobs j LEFT JOIN lease_beats b ON b.job_id = j.id"
                 " WHERE j.worker_id = 'multi-2' AND (j.acked OR b.job_id IS NOT NULL)") == 0,
          "multi-2's lease not touched by multi-1's heartbeat");

    /* results at the same time from the three workers, one of them stale;
     * every job's results one by one (a worker has one request in flight) */
    int ok = 0, stale = 0, other = 0;
    size_t ia = 0, ic = 0;
    int rb_sent = 0;
    while (ia < 5 || ic < 3 || !rb_sent) {
        int sent[3] = { 0, 0, 0 };
        if (ia < 5) sent[0] = send_result(&w[0], nth(ra, ia++), 0) == 0;
        if (!rb_sent) sent[1] = send_result(&w[1], rb->job, -1) == 0, rb_sent = 1; /* stale token */
        if (ic < 3) sent[2] = send_result(&w[2], nth(rc, ic++), 0) == 0;
        for (int i = 0; i < 3; i++) {
            if (!sent[i]) continue;
            int st = recv_status(&w[i]);
            if (st == KFARM__STATUS__OK) ok++;
            else if (st == KFARM__STATUS__STALE && i == 1) stale++;
            else other++;
        }
    }
    CHECK(ok == 8 && stale == 1 && other == 0, "8 acknowledged OK, the stale one STALE: %d %d %d", ok, stale,
          other);
    CHECK(q1(db, "SELECT count(*) FROM evaluations WHERE is_final AND reported AND verdict = 'ok'"
                 " AND worker_id IN ('multi-1', 'multi-3')") == 8, "8 final evaluations stored");
    CHECK(q1(db, "SELECT count(*) FROM evaluations WHERE worker_id = 'multi-2'") == 0,
          "nothing stored for the stale result");
    CHECK(q1(db, "SELECT count(*) FROM jobs WHERE state = 'leased' AND worker_id = 'multi-2'") == 1,
          "its job still leased to multi-2");

    /* the results of a lease in one message (Result.more), one of them stale */
    Kfarm__Reply *rd = get_jobs(&w[0], 3);
    CHECK(rd && rd->status == KFARM__STATUS__OK && rd->job && rd->n_more_jobs == 2, "a second lease of 3");
    if (rd && rd->job && rd->n_more_jobs == 2) {
        Kfarm__Result r[1] = { KFARM__RESULT__INIT };
        Kfarm__ResultItem ri[3], *rp[2];
        for (int i = 0; i < 3; i++) {
            const Kfarm__Job *j = nth(rd, (size_t)i);
            Kfarm__ResultItem x = KFARM__RESULT_ITEM__INIT;
            x.worker_id = (char *)names[0];
            x.job_id = j->job_id;
            x.fencing_token = j->fencing_token + (i == 1 ? 7 : 0); /* the middle one stale */
            x.has_lease_token = 1;
            x.lease_token = j->lease_token;
            x.verdict = "ok";
            x.has_speedup = 1;
            x.speedup = 1.0;
            ri[i] = x;
        }
        r[0].worker_id = ri[0].worker_id;
        r[0].job_id = ri[0].job_id;
        r[0].fencing_token = ri[0].fencing_token;
        r[0].has_lease_token = 1;
        r[0].lease_token = ri[0].lease_token;
        r[0].verdict = "ok";
        r[0].has_speedup = 1;
        r[0].speedup = 1.0;
        rp[0] = &ri[1];
        rp[1] = &ri[2];
        r[0].n_more = 2;
        r[0].more = rp;
        req.msg_case = KFARM__REQUEST__MSG_RESULT;
        req.result = &r[0];
        Kfarm__Reply *rr = call(&w[0], &req);
        CHECK(rr && rr->status == KFARM__STATUS__OK && rr->n_more_status == 2 &&
                  rr->more_status[0] == KFARM__STATUS__STALE && rr->more_status[1] == KFARM__STATUS__OK,
              "Result.more: OK, then STALE and OK in more_status");
        if (rr) kfarm__reply__free_unpacked(rr, NULL);
        snprintf(err, sizeof(err), "SELECT count(*) FROM evaluations WHERE is_final AND job_id IN (%llu, %llu)",
                 (unsigned long long)rd->job->job_id, (unsigned long long)rd->more_jobs[1]->job_id);
        CHECK(q1(db, err) == 2, "the two good results of the message stored");
        snprintf(err, sizeof(err), "SELECT count(*) FROM jobs WHERE state = 'leased' AND id = %llu",
                 (unsigned long long)rd->more_jobs[0]->job_id);
        CHECK(q1(db, err) == 1, "the stale one's job untouched");
        rr = call(&w[0], &req); /* the same results again, sealed anew: acknowledged, nothing stored */
        CHECK(rr && rr->status == KFARM__STATUS__DUPLICATE && rr->n_more_status == 2 &&
                  rr->more_status[1] == KFARM__STATUS__DUPLICATE, "Result.more resent: DUPLICATE");
        if (rr) kfarm__reply__free_unpacked(rr, NULL);
    }
    if (rd) kfarm__reply__free_unpacked(rd, NULL);
    CHECK(q1(db, "SELECT count(*) FROM (SELECT job_id FROM evaluations WHERE is_final"
                 " GROUP BY job_id HAVING count(*) > 1) x") == 0, "never two final evaluations of a job");
done:
    if (ra) kfarm__reply__free_unpacked(ra, NULL);
    if (rb) kfarm__reply__free_unpacked(rb, NULL);
    if (rc) kfarm__reply__free_unpacked(rc, NULL);
    for (int i = 0; i < 3; i++) nn_close(socks[i]);
end:
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "coordinator exits cleanly on SIGTERM");
    if (g_fail) {
        char cmd[600];
        snprintf(cmd, sizeof(cmd), "tail -30 %s >&2", logpath);
        if (system(cmd) != 0) fprintf(stderr, "(no coordinator log)\n");
    }
    snprintf(err, sizeof(err), "rm -rf '%s'", dir);
    if (system(err) != 0) fprintf(stderr, "cannot remove %s\n", dir);
    kf_db_close(db);
}

/* ---- part 3: counts and bests that do not read the history ---- */

/* Rows (candidate, lo, hi) in rank order: the first is the best (into
 * *best), the others tied with it where their interval overlaps its own
 * (kf_noise_tie), into ties[0..*nt) (at most cap). */
static void rank_ties(PGresult *r, long long *best, long long *ties, int *nt, int cap)
{
    double lo = 0, hi = 0;
    for (int i = 0; i < PQntuples(r); i++) {
        double l = kf_db_f64(r, i, 1, 0), h = kf_db_f64(r, i, 2, 0);
        if (i == 0) {
            *best = kf_db_i64(r, i, 0, 0);
            lo = l;
            hi = h;
        } else if (kf_noise_tie(l, h, lo, hi) && *nt < cap) {
            ties[(*nt)++] = kf_db_i64(r, i, 0, 0);
        }
    }
}

/* The bests of campaign cid as the old code found them: every final ok
 * result of the target read in rank order, the first the best, the rest
 * tied when their interval overlaps the best's (kf_noise_tie). The best's
 * candidate into *best (0: none), the tied candidates into ties[0..*nt). */
static void bests_by_scan(kf_db *db, const char *cid, long long *best, long long *ties, int *nt, int cap)
{
    char err[512];
    const char *p[1] = { cid };
    *best = 0;
    *nt = 0;
    PGresult *r = kf_db_exec(db,
        "SELECT k.id, COALESCE(e.speedup_lo, e.speedup), COALESCE(e.speedup_hi, e.speedup) "
        "FROM jobs j JOIN evaluations e ON e.job_id = j.id AND e.is_final AND e.verdict = 'ok'"
        "  AND e.speedup > 0 AND e.confirmation <> 'disputed' JOIN candidates k ON k.id = e.candidate_id "
        "WHERE j.campaign_id = $1::bigint AND j.purpose = 'eval' "
        "ORDER BY e.confirmation = 'confirmed' DESC, e.speedup DESC, k.id", 1, p, err, sizeof(err));
    if (!r) {
        fprintf(stderr, "bests by scan: %s\n", err);
        return;
    }
    rank_ties(r, best, ties, nt, cap);
    PQclear(r);
}

/* kf_bests of campaign cid equals bests_by_scan, per target and overall
 * (one target). */
static void check_bests(kf_db *db, int64_t cid, const char *when)
{
    char err[512], ids[24];
    snprintf(ids, sizeof(ids), "%lld", (long long)cid);
    long long best, ties[512];
    int nt;
    bests_by_scan(db, ids, &best, ties, &nt, 512);
    json_t *b = kf_bests(db, cid, err, sizeof(err));
    CHECK(b != NULL, "%s: kf_bests: %s", when, err);
    if (!b) return;
    json_t *t0 = json_array_get(json_object_get(b, "targets"), 0);
    json_t *jb = json_object_get(t0, "best"), *jt = json_object_get(t0, "ties");
    long long got = json_is_null(jb) ? 0 : (long long)json_integer_value(json_object_get(jb, "candidate"));
    int same = got == best && (int)json_array_size(jt) == nt;
    for (int i = 0; same && i < nt; i++)
        same = json_integer_value(json_object_get(json_array_get(jt, (size_t)i), "candidate")) == ties[i];
    CHECK(same, "%s: best %lld with %zu ties, the full scan says %lld with %d", when, got,
          json_array_size(jt), best, nt);
    json_t *ov = json_object_get(b, "overall");
    long long og = json_is_null(ov) ? 0 : (long long)json_integer_value(json_object_get(ov, "candidate"));
    int osame = og == best && (best == 0 || (int)json_array_size(json_object_get(ov, "ties")) == nt);
    for (int i = 0; osame && best && i < nt; i++)
        osame = json_integer_value(json_array_get(json_object_get(ov, "ties"), (size_t)i)) == ties[i];
    CHECK(osame, "%s: overall best %lld (ties alike), the full scan says %lld", when, og, best);
    json_decref(b);
    /* the first three ties only (campaign status): the same three, and a
     * mark that there are more */
    b = kf_bests_top(db, cid, 3, err, sizeof(err));
    CHECK(b != NULL, "%s: kf_bests_top: %s", when, err);
    if (!b) return;
    t0 = json_array_get(json_object_get(b, "targets"), 0);
    jt = json_object_get(t0, "ties");
    int cut = nt > 3 ? 3 : nt;
    same = (int)json_array_size(jt) == cut && json_is_true(json_object_get(t0, "ties_more")) == (nt > 3);
    for (int i = 0; same && i < cut; i++)
        same = json_integer_value(json_object_get(json_array_get(jt, (size_t)i), "candidate")) == ties[i];
    CHECK(same, "%s: the first 3 of %d ties, and more marked: got %zu", when, nt, json_array_size(jt));
    json_decref(b);
}

/* job_keys (schema 015) holds exactly one row per job, with the job's own
 * campaign, candidate, target and verified evaluation. */
static void check_job_keys(kf_db *db, const char *when)
{
    long long bad = q1(db, "SELECT count(*) FROM jobs j FULL JOIN job_keys k ON k.job_id = j.id"
                           " WHERE j.id IS NULL OR k.job_id IS NULL"
                           " OR (k.campaign_id, k.candidate_id, k.target) IS DISTINCT FROM"
                           "    (j.campaign_id, j.candidate_id, j.target)"
                           " OR k.verifies IS DISTINCT FROM j.verifies");
    CHECK(bad == 0, "%s: %lld job(s) without their keys or keys without their job", when, bad);
}

/* campaign_counts summed equals counting the rows themselves. */
static void check_counts(kf_db *db, int64_t cid, const char *when)
{
    char sql[1024];
    snprintf(sql, sizeof(sql),
        "SELECT count(*) FROM ("
        " SELECT j.target, j.purpose, e.verdict, e.is_final, count(*) n FROM evaluations e"
        "   JOIN jobs j ON j.id = e.job_id WHERE j.campaign_id = %lld GROUP BY 1, 2, 3, 4"
        " UNION ALL SELECT '', 'candidate', proposer, false, count(*) FROM candidates"
        "   WHERE campaign_id = %lld GROUP BY 3) f FULL JOIN ("
        " SELECT target, CASE WHEN what = 'candidate' THEN 'candidate' ELSE purpose END AS purpose,"
        "   CASE WHEN what = 'candidate' THEN proposer ELSE verdict END AS verdict, is_final, sum(n) n"
        "   FROM campaign_counts WHERE campaign_id = %lld AND what <> 'proposal' GROUP BY 1, 2, 3, 4) c"
        " USING (target, purpose, verdict, is_final) WHERE f.n IS DISTINCT FROM c.n",
        (long long)cid, (long long)cid, (long long)cid);
    CHECK(q1(db, sql) == 0, "%s: campaign_counts agrees with counting the rows", when);
    /* the proposals by state, with their tokens (schema 011) */
    snprintf(sql, sizeof(sql),
        "SELECT count(*) FROM (SELECT state, count(*) n, COALESCE(sum(prompt_tokens), 0) pt,"
        "   COALESCE(sum(completion_tokens), 0) ct FROM proposals WHERE campaign_id = %lld GROUP BY 1) f"
        " FULL JOIN (SELECT proposal_state state, sum(n) n, sum(proposal_prompt_tokens) pt,"
        "   sum(proposal_completion_tokens) ct FROM campaign_counts WHERE campaign_id = %lld"
        "   AND what = 'proposal' GROUP BY 1 HAVING sum(n) <> 0 OR sum(proposal_prompt_tokens) <> 0"
        "   OR sum(proposal_completion_tokens) <> 0) c USING (state)"
        " WHERE (f.n, f.pt, f.ct) IS DISTINCT FROM (c.n, c.pt, c.ct)",
        (long long)cid, (long long)cid);
    CHECK(q1(db, sql) == 0, "%s: the proposal counts agree with the proposals", when);
}

/* Proposals written the ways the LLM service, the strategy and review
 * write them: inserted in several states, moved from state to state with
 * their tokens filled in, a lease renewal that changes nothing counted,
 * deleted; the counts follow each statement. */
static void write_proposals(kf_db *db, int64_t cid)
{
    char sql[1024];
    long long before = q1(db, "SELECT count(*) FROM campaign_counts");
    snprintf(sql, sizeof(sql),
        "INSERT INTO proposals (campaign_id, round, state, prompt_tokens, completion_tokens)"
        " SELECT %lld, g / 10, CASE WHEN g %% 3 = 0 THEN 'requested' WHEN g %% 3 = 1 THEN 'answered'"
        "  ELSE 'failed' END, CASE WHEN g %% 3 = 0 THEN NULL ELSE 100 + g END,"
        "  CASE WHEN g %% 3 = 0 THEN NULL ELSE 2 * g END FROM generate_series(1, 30) g", (long long)cid);
    exec_ok(db, sql);
    check_counts(db, cid, "30 proposals inserted");
    snprintf(sql, sizeof(sql),
        "UPDATE proposals SET state = 'answered', prompt_tokens = 1000, completion_tokens = 7"
        " WHERE campaign_id = %lld AND state = 'requested' AND round < 2", (long long)cid);
    exec_ok(db, sql);
    snprintf(sql, sizeof(sql), "UPDATE proposals SET state = 'review' WHERE campaign_id = %lld"
                               " AND state = 'answered' AND round = 1", (long long)cid);
    exec_ok(db, sql);
    check_counts(db, cid, "proposals answered and sent to review");
    long long rows = q1(db, "SELECT count(*) FROM campaign_counts");
    snprintf(sql, sizeof(sql), "UPDATE proposals SET claimed_until = now(), attempts = attempts + 1"
                               " WHERE campaign_id = %lld", (long long)cid);
    exec_ok(db, sql);
    CHECK(q1(db, "SELECT count(*) FROM campaign_counts") == rows,
          "a renewal that changes no state or tokens adds no counts row");
    snprintf(sql, sizeof(sql), "DELETE FROM proposals WHERE campaign_id = %lld AND state = 'failed'"
                               " AND round = 2", (long long)cid);
    exec_ok(db, sql);
    check_counts(db, cid, "proposals deleted");
    CHECK(q1(db, "SELECT count(*) FROM campaign_counts") > before, "proposals are counted");
    /* one statement over the proposals of two campaigns, then the other
     * campaign deleted with its proposals */
    char err[512];
    int64_t other = 0;
    CHECK(new_campaign(db, "hist_other", &other, err, sizeof(err)) == 0, "second campaign: %s", err);
    snprintf(sql, sizeof(sql),
        "INSERT INTO proposals (campaign_id, round, state, prompt_tokens, completion_tokens)"
        " SELECT %lld, g, 'answered', 10 * g, g FROM generate_series(1, 5) g", (long long)other);
    exec_ok(db, sql);
    snprintf(sql, sizeof(sql), "UPDATE proposals SET state = 'failed', completion_tokens = completion_tokens + 1"
                               " WHERE state = 'answered' AND campaign_id IN (%lld, %lld)",
             (long long)cid, (long long)other);
    exec_ok(db, sql);
    check_counts(db, cid, "one statement over two campaigns' proposals (this one)");
    check_counts(db, other, "one statement over two campaigns' proposals (the other)");
    CHECK(kf_campaign_delete(db, "hist_other", err, sizeof(err)) == 0, "delete: %s", err);
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM campaign_counts WHERE campaign_id = %lld", (long long)other);
    CHECK(q1(db, sql) == 0, "the other campaign's counts are gone with it");
    check_counts(db, cid, "the other campaign deleted");
}

static void part_history(const char *conninfo)
{
    char err[1024];
    kf_db *db = kf_db_open(conninfo, err, sizeof(err));
    CHECK(db != NULL, "%s", err);
    if (!db) return;
    CHECK(kf_db_migrate(db, NULL, err, sizeof(err)) == 0, "%s", err);
    if (make_queue(db, "hist", 300) < 0) {
        CHECK(0, "queue setup");
        kf_db_close(db);
        return;
    }
    int64_t cid = q1(db, "SELECT id FROM campaigns WHERE name = 'hist'");
    check_bests(db, cid, "no result yet");
    kf_queue_config qc;
    kf_queue_config_default(&qc);
    const char *cls[1] = { "cpu" };
    char dev[] = "[]";
    kf_queue_register_worker(db, "wh", "h", "cpu", dev, cls, 1, NULL, NULL, 1, err, sizeof(err));
    /* results through both paths: groups of up to 40, and one at a time
     * (each statement adds its own counts rows: more than 64 to fold);
     * speedups repeat, so that ranks are decided by candidate id; a
     * quarter fails */
    static const double sp[] = { 1.0, 1.25, 1.25, 1.5, 0.8, 1.52, 1.5, 2.0, 1.97 };
    kf_result res[9], fail = ok_result(0);
    fail.verdict = "compile_error";
    for (int i = 0; i < 9; i++) res[i] = ok_result(sp[i]);
    int done = 0, stored_ok = 1;
    for (int round = 0; round < 40; round++) {
        kf_lease l[KF_QUEUE_MAX_LEASES];
        int n = 0;
        int want = round < 5 ? 40 : 2;
        if (kf_queue_lease_many(db, &qc, "wh", cls, 1, want, l, &n, err, sizeof(err)) != KF_Q_OK) break;
        kf_queue_item it[KF_QUEUE_MAX_LEASES];
        for (int i = 0; i < n; i++) {
            int k = done + i;
            item(&it[i], "wh", &l[i], k % 4 == 3 ? &fail : &res[k % 9]);
        }
        if (round < 5) {
            kf_queue_result_group(db, &qc, it, n);
        } else {
            for (int i = 0; i < n; i++)
                it[i].st = kf_queue_result(db, &qc, "wh", it[i].job_id, it[i].token, it[i].lease_token,
                                           KF_QUEUE_TOKEN_LEN, it[i].res, NULL, it[i].err, sizeof(it[i].err));
        }
        for (int i = 0; i < n; i++) stored_ok &= it[i].st == KF_Q_OK;
        done += n;
    }
    CHECK(stored_ok && done >= 270, "%d results stored through both paths", done);
    /* and through the reaper: one lease expires acknowledged on its last
     * attempt (a final runtime_error), one unacknowledged (requeued) */
    kf_lease lx[2];
    int nx = 0;
    CHECK(kf_queue_lease_many(db, &qc, "wh", cls, 1, 2, lx, &nx, err, sizeof(err)) == KF_Q_OK && nx == 2,
          "two more leases (%s)", err);
    if (nx == 2) {
        char sql[256];
        snprintf(sql, sizeof(sql), "UPDATE jobs SET lease_deadline = now() - interval '1 s', acked = (id = %lld),"
                 " attempts = max_attempts WHERE id IN (%lld, %lld)", (long long)lx[0].job_id,
                 (long long)lx[0].job_id, (long long)lx[1].job_id);
        exec_ok(db, sql);
        int rq = 0, ex = 0;
        CHECK(kf_queue_reap(db, &qc, &rq, &ex, err, sizeof(err)) == 0 && rq == 1 && ex == 1,
              "reaper: 1 requeued, 1 exhausted (got %d, %d: %s)", rq, ex, err);
    }
    check_counts(db, cid, "after results");
    write_proposals(db, cid);
    check_bests(db, cid, "after results");
    /* a confirmed result ranks first, a disputed one is never named */
    exec_ok(db, "UPDATE evaluations SET confirmation = 'disputed' WHERE id = (SELECT e.id FROM evaluations e"
                " JOIN jobs j ON j.id = e.job_id WHERE j.purpose = 'eval' AND e.is_final AND e.verdict = 'ok'"
                " ORDER BY e.speedup DESC, e.candidate_id LIMIT 1)");
    check_bests(db, cid, "the fastest disputed");
    exec_ok(db, "UPDATE evaluations SET confirmation = 'confirmed' WHERE id IN (SELECT e.id FROM evaluations e"
                " JOIN jobs j ON j.id = e.job_id WHERE j.purpose = 'eval' AND e.is_final AND e.verdict = 'ok'"
                " AND e.speedup = 1.25 ORDER BY e.candidate_id DESC LIMIT 2)");
    check_bests(db, cid, "two slower ones confirmed");
    /* wide intervals: the best (a confirmed 1.25x) now ties with results
     * of every speedup, so after the other confirmed one the first ties
     * are the fastest of many (kf_bests_top cuts them on the index before
     * reading the rows) */
    exec_ok(db, "UPDATE evaluations SET speedup_lo = speedup * 0.5, speedup_hi = speedup * 1.5"
                " WHERE is_final AND verdict = 'ok' AND speedup > 0 AND job_purpose = 'eval'");
    check_bests(db, cid, "wide intervals: ties of many speedups");
    /* and more confirmed ties than the cut, of different speedups: the
     * confirmed part is ordered and cut on its own */
    exec_ok(db, "UPDATE evaluations SET confirmation = 'confirmed' WHERE id IN (SELECT DISTINCT ON (e.speedup)"
                " e.id FROM evaluations e WHERE e.job_purpose = 'eval' AND e.is_final AND e.verdict = 'ok'"
                " AND e.speedup IN (0.8, 1.0, 1.5, 1.52) ORDER BY e.speedup, e.candidate_id DESC)");
    check_bests(db, cid, "wide intervals, five confirmed ties");
    long long rows = q1(db, "SELECT count(*) FROM campaign_counts");
    long folded = 0;
    CHECK(kf_campaign_compact_counts(db, &folded, err, sizeof(err)) == 0, "%s", err);
    long long after = q1(db, "SELECT count(*) FROM campaign_counts");
    CHECK(rows > 64 && folded == rows && after < 16,
          "%lld counts rows folded into %lld (folded %ld)", rows, after, folded);
    check_counts(db, cid, "after folding");
    CHECK(kf_campaign_compact_counts(db, &folded, err, sizeof(err)) == 0 && folded == 0,
          "a campaign with few rows is left alone (folded %ld)", folded);
    /* a verification of the best result, its own evaluation confirming it
     * (jobs.verifies, evaluations.confirmed_by), and another campaign's
     * result: deleting the campaign takes all of its evaluations (schema
     * 012: a statement trigger, no foreign key) and none of the other's */
    exec_ok(db, "WITH v AS (INSERT INTO jobs (campaign_id, candidate_id, target, purpose, verifies, state)"
                " SELECT j.campaign_id, j.candidate_id, j.target, 'verify', e.id, 'done' FROM evaluations e"
                " JOIN jobs j ON j.id = e.job_id WHERE e.is_final AND e.verdict = 'ok' AND NOT EXISTS (SELECT 1"
                " FROM jobs x WHERE x.verifies = e.id) ORDER BY e.speedup DESC, e.id LIMIT 1"
                " RETURNING id, candidate_id, verifies),"
                " c AS (INSERT INTO evaluations (job_id, candidate_id, attempt, worker_id, fencing_token, verdict,"
                " speedup, is_final) SELECT id, candidate_id, 1, 'wh', -77, 'ok', 1.3, true FROM v RETURNING id)"
                " UPDATE evaluations SET confirmation = 'confirmed', confirmed_by = c.id FROM c, v"
                " WHERE evaluations.id = v.verifies");
    CHECK(q1(db, "SELECT count(*) FROM evaluations WHERE confirmed_by IS NOT NULL") == 1, "a confirmed result");
    exec_ok(db, "UPDATE campaigns SET state = 'paused' WHERE id = (SELECT id FROM campaigns WHERE name = 'hist')");
    if (make_queue(db, "keep", 3) == 0) {
        kf_lease lk[3];
        int nk = 0;
        if (kf_queue_lease_many(db, &qc, "wh", cls, 1, 3, lk, &nk, err, sizeof(err)) == KF_Q_OK) {
            kf_queue_item ik[3];
            for (int i = 0; i < nk; i++) item(&ik[i], "wh", &lk[i], &res[i]);
            kf_queue_result_group(db, &qc, ik, nk);
        }
    }
    long long kept = q1(db, "SELECT count(*) FROM evaluations e JOIN jobs j ON j.id = e.job_id"
                            " JOIN campaigns c ON c.id = j.campaign_id WHERE c.name = 'keep'");
    CHECK(kept >= 1, "another campaign's results stored (%lld)", kept);
    CHECK(q1(db, "SELECT count(*) FROM jobs WHERE purpose = 'verify' AND campaign_id = (SELECT id FROM campaigns"
                 " WHERE name = 'hist')") >= 2, "the campaign holds verifications");
    CHECK(kf_campaign_delete(db, "hist", err, sizeof(err)) == 0, "delete: %s", err);
    CHECK(q1(db, "SELECT count(*) FROM campaign_counts WHERE campaign_id = (SELECT id FROM campaigns"
                 " WHERE name = 'keep') OR campaign_id NOT IN (SELECT id FROM campaigns)") ==
              q1(db, "SELECT count(*) FROM campaign_counts"),
          "a deleted campaign's counts are gone, its proposals' too (deleted with it)");
    CHECK(q1(db, "SELECT count(*) FROM campaign_counts WHERE campaign_id NOT IN (SELECT id FROM campaigns)") == 0,
          "no counts left of the deleted campaign");
    CHECK(q1(db, "SELECT count(*) FROM evaluations e WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = e.job_id)"
                 " OR NOT EXISTS (SELECT 1 FROM candidates k WHERE k.id = e.candidate_id)") == 0,
          "no evaluation left without its job or candidate (results, the reaper's, a verification's)");
    CHECK(q1(db, "SELECT count(*) FROM evaluations") == kept, "the other campaign's %lld results untouched", kept);
    check_job_keys(db, "the campaign deleted");
    CHECK(q1(db, "SELECT count(*) FROM jobs WHERE campaign_id NOT IN (SELECT id FROM campaigns)") == 0,
          "no job left of the deleted campaign");
    /* schema 015: a candidate deleted takes its jobs (through job_keys and
     * its trigger) and their evaluations; a job deleted on its own takes
     * its keys, so the candidate can have that job again */
    long long jobs0 = q1(db, "SELECT count(*) FROM jobs");
    long long gone = q1(db, "SELECT count(*) FROM jobs WHERE candidate_id = (SELECT min(candidate_id) FROM jobs"
                            " WHERE campaign_id = (SELECT id FROM campaigns WHERE name = 'keep'))");
    exec_ok(db, "DELETE FROM candidates WHERE id = (SELECT min(candidate_id) FROM jobs"
                " WHERE campaign_id = (SELECT id FROM campaigns WHERE name = 'keep'))");
    CHECK(gone >= 1 && q1(db, "SELECT count(*) FROM jobs") == jobs0 - gone,
          "a deleted candidate's %lld job(s) deleted with it", gone);
    CHECK(q1(db, "SELECT count(*) FROM evaluations e WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = e.job_id)")
              == 0, "no evaluation left of the deleted candidate's jobs");
    check_job_keys(db, "a candidate deleted");
    long long one = q1(db, "SELECT min(id) FROM jobs WHERE campaign_id = (SELECT id FROM campaigns WHERE name = 'keep')");
    CHECK(one > 0, "a job of 'keep' left");
    char sql[512];
    snprintf(sql, sizeof(sql), "SELECT candidate_id FROM jobs WHERE id = %lld", one);
    long long kcand = q1(db, sql);
    snprintf(sql, sizeof(sql), "DELETE FROM jobs WHERE id = %lld", one);
    exec_ok(db, sql);
    check_job_keys(db, "a job deleted on its own");
    snprintf(sql, sizeof(sql),
             "INSERT INTO jobs (candidate_id, campaign_id, target) SELECT id, campaign_id, 'cpu' FROM candidates"
             " WHERE id = %lld", kcand);
    char e2[512];
    CHECK(kf_db_cmd(db, sql, 0, NULL, e2, sizeof(e2)) == 0, "the job made again after its deletion: %s", e2);
    CHECK(kf_db_cmd(db, sql, 0, NULL, e2, sizeof(e2)) < 0 && strstr(e2, "job_keys_candidate"),
          "but not twice: %s", e2);
    check_job_keys(db, "a job made again");
    /* schema 016: a non-final evaluation is unique by (job, token) through
     * evaluations_job_token, which a final one no longer enters */
    snprintf(sql, sizeof(sql),
             "INSERT INTO evaluations (job_id, candidate_id, attempt, worker_id, fencing_token, verdict, is_final)"
             " SELECT id, candidate_id, 1, 'wh', 4242, 'infra_error', false FROM jobs WHERE candidate_id = %lld",
             kcand);
    CHECK(kf_db_cmd(db, sql, 0, NULL, e2, sizeof(e2)) == 0, "a non-final evaluation: %s", e2);
    CHECK(kf_db_cmd(db, sql, 0, NULL, e2, sizeof(e2)) < 0 && strstr(e2, "evaluations_job_token"),
          "a second non-final evaluation of one lease refused: %s", e2);
    kf_db_close(db);
}

/* ---- part 4: leases read the queue from a floor (kf_queue_floors) ---- */

static void part_floors(const char *conninfo)
{
    char err[1024];
    kf_db *db = open_queue(conninfo, "floors", 20, "fa");
    if (!db) return;
    kf_queue_config qc;
    kf_queue_config_default(&qc);
    const char *cls[1] = { "cpu" };
    kf_queue_floors fl;
    kf_queue_floors_init(&fl);
    fl.refresh_s = 3600; /* no time-based full read unless the test asks */
    kf_lease l[KF_QUEUE_MAX_LEASES];
    int n = 0;
    PGresult *pl = NULL;
    CHECK(kf_queue_lease_floors(db, &qc, &fl, "fa", cls, 1, 5, l, &n, &pl, err, sizeof(err)) == KF_Q_OK && n == 5,
          "floors: 5 leased (%s)", err);
    /* the lease's own rows carry each job's payload: its candidate's source
     * and defines, its task's id and sha256 */
    int pl_ok = pl && PQntuples(pl) == n;
    for (int i = 0; pl_ok && i < n; i++) {
        int row = -1;
        for (int k = 0; k < PQntuples(pl); k++)
            if (kf_db_i64(pl, k, KF_QUEUE_PL_JOB, -1) == l[i].job_id) row = k;
        char jid[24], cid[24];
        snprintf(jid, sizeof(jid), "%lld", (long long)l[i].job_id);
        snprintf(cid, sizeof(cid), "%lld", (long long)l[i].candidate_id);
        const char *pp[6] = { jid, cid, row < 0 ? "-1" : PQgetvalue(pl, row, KF_QUEUE_PL_TASK),
                              row < 0 ? "" : PQgetvalue(pl, row, KF_QUEUE_PL_TASK_SHA),
                              row < 0 ? "{}" : PQgetvalue(pl, row, KF_QUEUE_PL_DEFINES),
                              row < 0 ? "" : PQgetvalue(pl, row, KF_QUEUE_PL_SOURCE) };
        PGresult *m = kf_db_exec(db,
            "SELECT count(*) FROM jobs j JOIN candidates k ON k.id = j.candidate_id JOIN campaigns c"
            " ON c.id = j.campaign_id JOIN tasks t ON t.id = c.task_id WHERE j.id = $1::bigint AND k.id = $2::bigint"
            " AND t.id = $3::bigint AND t.sha256 = $4 AND k.defines = $5::jsonb AND k.source = $6", 6, pp, err,
            sizeof(err));
        pl_ok = row >= 0 && m && kf_db_i64(m, 0, 0, 0) == 1;
        if (m) PQclear(m);
    }
    CHECK(pl_ok, "each lease's payload row is its job's source, defines and task (%d rows for %d leases)",
          pl ? PQntuples(pl) : -1, n);
    if (pl) PQclear(pl);
    long long first = n > 0 ? l[0].job_id : 0, fifth = n > 4 ? l[4].job_id : 0;
    CHECK(fl.f[0].campaign_id == l[0].campaign_id && fl.f[0].floor == fifth,
          "the floor is the largest id leased (%lld, want %lld)", (long long)fl.f[0].floor, fifth);
    /* the first job's lease expires and it is queued again: below the floor */
    char q[256];
    snprintf(q, sizeof(q), "UPDATE jobs SET state = 'queued', lease_deadline = NULL WHERE id = %lld", first);
    exec_ok(db, q);
    CHECK(kf_queue_lease_floors(db, &qc, &fl, "fa", cls, 1, 1, l, &n, NULL, err, sizeof(err)) == KF_Q_OK && n == 1 &&
              l[0].job_id > fifth,
          "a lease reads from the floor: job %lld after %lld", n ? (long long)l[0].job_id : 0LL, fifth);
    /* the floor refreshed (older than refresh_s): read from the head */
    fl.refresh_s = 0;
    fl.f[0].set_at -= 1.0;
    CHECK(kf_queue_lease_floors(db, &qc, &fl, "fa", cls, 1, 1, l, &n, NULL, err, sizeof(err)) == KF_Q_OK && n == 1 &&
              l[0].job_id == first,
          "a refreshed floor reads from the head: job %lld, want the requeued %lld", n ? (long long)l[0].job_id : 0LL,
          first);
    fl.refresh_s = 3600;
    /* take the rest, then queue the first again: nothing above the floor,
     * so the lease reads from the head before answering NO_JOB */
    int total = 0;
    while (kf_queue_lease_floors(db, &qc, &fl, "fa", cls, 1, 8, l, &n, NULL, err, sizeof(err)) == KF_Q_OK) total += n;
    CHECK(total == 14, "the other 14 jobs leased (%d)", total);
    exec_ok(db, q);
    CHECK(kf_queue_lease_floors(db, &qc, &fl, "fa", cls, 1, 1, l, &n, NULL, err, sizeof(err)) == KF_Q_OK && n == 1 &&
              l[0].job_id == first,
          "nothing above the floor: the requeued job %lld below it is leased, not NO_JOB (got %lld)", first,
          n ? (long long)l[0].job_id : 0LL);
    CHECK(kf_queue_lease_floors(db, &qc, &fl, "fa", cls, 1, 1, l, &n, NULL, err, sizeof(err)) == KF_Q_NO_JOB,
          "an empty queue: NO_JOB");
    CHECK(q1(db, "SELECT count(*) FROM jobs WHERE state = 'queued'") == 0, "every job leased");
    kf_db_close(db);
}

/* ---- part 6: a group stores each result as the plain path does ---- */

/* A database at conninfo with campaign `name` of 2*nv jobs, all leased to
 * worker "wr" into l; the results v stored once in a group (the first nv
 * leases) and once alone (the others), and every stored column compared.
 * Returns the open database (NULL and a failed check on error). */
static kf_db *store_twice(const char *conninfo, const char *name, kf_lease *l, kf_result *v, int nv)
{
    char err[1024];
    kf_db *db = open_queue(conninfo, name, 2 * nv, "wr");
    if (!db) return NULL;
    kf_queue_config qc;
    kf_queue_config_default(&qc);
    const char *cls[1] = { "cpu" };
    int nl = 0;
    while (nl < 2 * nv) {
        int got = 0;
        if (kf_queue_lease_many(db, &qc, "wr", cls, 1, 2 * nv - nl, l + nl, &got, err, sizeof(err)) != KF_Q_OK) break;
        nl += got;
    }
    CHECK(nl == 2 * nv, "%s: %d jobs leased (%s)", name, nl, err);
    if (nl != 2 * nv) {
        kf_db_close(db);
        return NULL;
    }
    kf_queue_item it[16];
    for (int i = 0; i < nv; i++) item(&it[i], "wr", &l[i], &v[i]);
    int stored = kf_queue_result_group(db, &qc, it, nv);
    CHECK(stored == nv, "%s: the group stored all %d (%d; %s)", name, nv, stored, it[0].err);
    for (int i = 0; i < nv; i++) {
        int requeued = 0;
        kf_queue_status st = kf_queue_result(db, &qc, "wr", l[nv + i].job_id, l[nv + i].fencing_token,
                                             l[nv + i].lease_token, KF_QUEUE_TOKEN_LEN, &v[i], &requeued, err,
                                             sizeof(err));
        CHECK(st == KF_Q_OK, "%s: result %d stored alone (%s)", name, i, err);
    }
    for (int i = 0; i < nv; i++) {
        char sql[2048];
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM evaluations g, evaluations a WHERE g.job_id = %lld AND a.job_id = %lld"
                 " AND g.verdict = a.verdict AND g.detail IS NOT DISTINCT FROM a.detail"
                 " AND g.metrics IS NOT DISTINCT FROM a.metrics"
                 " AND g.candidate_us IS NOT DISTINCT FROM a.candidate_us"
                 " AND g.baseline_us IS NOT DISTINCT FROM a.baseline_us"
                 " AND g.speedup IS NOT DISTINCT FROM a.speedup AND g.compile_log IS NOT DISTINCT FROM a.compile_log"
                 " AND g.cv IS NOT DISTINCT FROM a.cv AND g.speedup_lo IS NOT DISTINCT FROM a.speedup_lo"
                 " AND g.speedup_hi IS NOT DISTINCT FROM a.speedup_hi AND g.is_final AND a.is_final"
                 " AND g.worker_id = a.worker_id AND g.attempt = a.attempt"
                 " AND g.job_campaign_id = a.job_campaign_id AND g.job_target = a.job_target"
                 " AND g.job_purpose = a.job_purpose",
                 (long long)l[i].job_id, (long long)l[nv + i].job_id);
        CHECK(q1(db, sql) == 1, "%s: result %d stored by the group as the plain path stores it", name, i);
    }
    return db;
}

/* Each result twice, on two jobs: once in a group (kf_queue_result_group,
 * whose rows travel as one array per column) and once alone
 * (kf_queue_result); every stored column must be the same. The results
 * carry what an array literal or a JSON document could garble: quotes,
 * backslashes, braces and commas, the text "NULL", an empty string against
 * an absent one, invalid UTF-8, control characters, metrics that are not
 * an object or not JSON, times that are not measured (0, NaN, infinite). */
static void part_group_rows(const char *conninfo)
{
    enum { NV = 8 };
    static const char shapes[] =
        "{\"timing\":{\"shapes\":[{\"weight\":2,\"candidate\":{\"median_us\":10,\"cv\":0.05},"
        "\"baseline\":{\"median_us\":15,\"cv\":0.02}},{\"candidate\":{\"cv\":0.01},\"baseline\":{\"cv\":0.03}}]},"
        "\"note\":\"a \\\"quoted\\\" \\\\ {x,y} \\u00e9\",\"list\":[1,2.5,null,true]}";
    kf_result v[NV];
    for (int i = 0; i < NV; i++) v[i] = ok_result(1.5 + i);
    v[0].metrics_json = shapes;                              /* a noise interval */
    v[1].detail = "a \"quoted\" \\ back {x,y} NULL, \"\"";   /* array-literal syntax */
    v[1].compile_log = "NULL";                               /* the text, not SQL NULL */
    v[1].metrics_json = "{\"k\": \"NULL\", \"q\": \"\\\"}{,\"}";
    v[2].verdict = "incorrect";                              /* nothing measured */
    v[2].detail = NULL;
    v[2].compile_log = NULL;
    v[2].metrics_json = NULL;
    v[2].candidate_us = v[2].baseline_us = v[2].speedup = 0;
    v[3].detail = "";                                        /* empty, not absent */
    v[3].compile_log = "bad \xff\xfe utf-8\tand\na newline\r";
    v[3].metrics_json = "[1, 2]";                            /* not an object */
    v[4].metrics_json = "{bad json";
    v[4].speedup = NAN;
    v[4].candidate_us = INFINITY;
    v[4].baseline_us = -3;
    v[5].verdict = "compile_error";
    v[5].compile_log = "error: expected ';' before '}' token\n  { a, b }\\n";
    v[5].speedup = 0;
    v[6].metrics_json = "{\"timing\":{\"shapes\":[]}}";      /* no shapes: no interval */
    v[7].metrics_json = "";                                  /* empty: absent */
    v[7].speedup = 1e-300;
    kf_lease l[2 * NV];
    kf_db *db = store_twice(conninfo, "rows", l, v, NV);
    if (!db) return;
    /* and what they hold, spelled out for the cases an encoding could lose */
    char sql[512];
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM evaluations WHERE job_id = %lld AND detail = 'a \"quoted\" \\ back {x,y} NULL, \"\"'"
             " AND compile_log = 'NULL' AND metrics->>'q' = '\"}{,'",
             (long long)l[1].job_id);
    CHECK(q1(db, sql) == 1, "rows: quotes, backslashes, braces and the text NULL kept");
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM evaluations WHERE job_id = %lld AND detail IS NULL AND compile_log IS NULL"
             " AND metrics IS NULL AND candidate_us IS NULL AND speedup IS NULL AND cv IS NULL",
             (long long)l[2].job_id);
    CHECK(q1(db, sql) == 1, "rows: absent fields and unmeasured times stored NULL");
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM evaluations WHERE job_id = %lld AND detail = '' AND metrics IS NULL"
             " AND compile_log = 'bad ?? utf-8' || chr(9) || 'and' || chr(10) || 'a newline' || chr(13)",
             (long long)l[3].job_id);
    CHECK(q1(db, sql) == 1, "rows: empty kept empty, invalid UTF-8 replaced, a JSON array not stored as metrics");
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM evaluations WHERE job_id = %lld AND abs(cv - 0.13 / 3) < 1e-12"
             " AND speedup_lo < speedup AND metrics @> '{\"timing\": {\"shapes\": [{\"candidate\": {\"cv\": 0.05}}]}}'"
             " AND speedup_hi > speedup AND metrics->'list' = '[1, 2.5, null, true]'::jsonb"
             " AND metrics->>'note' = 'a \"quoted\" \\ {x,y} ' || chr(233)",
             (long long)l[0].job_id);
    CHECK(q1(db, sql) == 1, "rows: the metrics as sent and the noise interval from them");
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM evaluations WHERE job_id = %lld AND metrics IS NULL AND speedup IS NULL"
             " AND candidate_us IS NULL AND baseline_us IS NULL", (long long)l[4].job_id);
    CHECK(q1(db, sql) == 1, "rows: metrics that are not JSON and times not finite or negative stored NULL");
    kf_db_close(db);
}

/* Numbers that jansson reads (as doubles) but jsonb, reading numeric,
 * refuses ("value overflows numeric format"): a worker's metrics with one
 * must still be stored, by the group and alone alike, printed by jansson
 * instead of as sent; numbers jansson refuses leave the metrics out; and
 * numbers that fit are kept exactly as sent. */
static void part_group_numbers(const char *conninfo)
{
    enum { NV = 9 };
    static char longfrac[17100], deep[4200];
    size_t k = 0;
    k += (size_t)snprintf(longfrac, sizeof(longfrac), "{\"x\": 0.");
    for (int i = 0; i < 17000; i++) longfrac[k++] = '0';
    snprintf(longfrac + k, sizeof(longfrac) - k, "1, \"cv\": 0.01}");
    k = (size_t)snprintf(deep, sizeof(deep), "{\"a\": ");
    for (int i = 0; i < 2000; i++) deep[k++] = '[';
    deep[k++] = '1';
    for (int i = 0; i < 2000; i++) deep[k++] = ']';
    snprintf(deep + k, sizeof(deep) - k, "}");
    kf_result v[NV];
    for (int i = 0; i < NV; i++) v[i] = ok_result(1.5 + i);
    v[0].metrics_json = "{\"x\": 1e-16384}";                   /* jansson: 0 */
    v[1].metrics_json = longfrac;                              /* 17,000 digits after the point */
    v[2].metrics_json = "{\"x\": -1E-99999, \"y\": 0.05}";
    v[3].metrics_json = "{\"s\": \"1e-99999 \\\" 1e99999\", \"y\": 0.05}"; /* only in a string */
    v[4].metrics_json = "{\"x\": 5e-324, \"y\": 1.7976931348623157e308}";   /* double's ends */
    v[5].metrics_json = deep;                                  /* 2,000 levels deep */
    v[6].metrics_json = "{\"x\": 123456789012345678901234567890}"; /* jansson: too big */
    v[7].metrics_json = "{\"x\": 1e400}";                      /* jansson: overflow */
    v[8].metrics_json = "{\"x\": 1e-16384, \"blame\": \"task\"}";
    v[8].verdict = "incorrect";
    kf_lease l[2 * NV];
    kf_db *db = store_twice(conninfo, "numbers", l, v, NV);
    if (!db) return;
    char sql[512];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM evaluations WHERE job_id IN (%lld, %lld)"
             " AND metrics - 'blame' = '{\"x\": 0.0}'::jsonb", (long long)l[0].job_id, (long long)l[8].job_id);
    CHECK(q1(db, sql) == 2, "numbers: 1e-16384 stored as jansson read it (0.0)");
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM evaluations WHERE job_id = %lld"
             " AND metrics = '{\"x\": 0.0, \"cv\": 0.01}'::jsonb", (long long)l[1].job_id);
    CHECK(q1(db, sql) == 1, "numbers: 17,000 digits after the point stored as jansson read them");
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM evaluations WHERE job_id = %lld"
             " AND metrics->>'x' = '0.0' AND metrics->>'y' = '0.050000000000000003'", (long long)l[2].job_id);
    CHECK(q1(db, sql) == 1, "numbers: -1E-99999 stored as jansson read it, with the rest as jansson prints it");
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM evaluations WHERE job_id = %lld"
             " AND metrics->>'s' = '1e-99999 \" 1e99999' AND metrics->>'y' = '0.05'", (long long)l[3].job_id);
    CHECK(q1(db, sql) == 1, "numbers: a huge exponent inside a string keeps the metrics as sent");
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM evaluations WHERE job_id = %lld"
             " AND (metrics->>'x')::float8 = 5e-324 AND (metrics->>'y')::float8 = 1.7976931348623157e308",
             (long long)l[4].job_id);
    CHECK(q1(db, sql) == 1, "numbers: the smallest and largest doubles kept");
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM evaluations WHERE job_id = %lld"
             " AND jsonb_typeof(metrics->'a') = 'array'", (long long)l[5].job_id);
    CHECK(q1(db, sql) == 1, "numbers: 2,000 levels of arrays stored");
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM evaluations WHERE job_id IN (%lld, %lld)"
             " AND metrics IS NULL", (long long)l[6].job_id, (long long)l[7].job_id);
    CHECK(q1(db, sql) == 2, "numbers: numbers jansson refuses leave the metrics out");
    kf_db_close(db);
}

/* ---- part 5: the overall best of a campaign with several targets ---- */

/* The overall best and its ties as grouping every ok result of the
 * campaign finds them (the rule of bests.h: ok on every target, confirmed
 * everywhere first, then the geometric mean, then the id; ties: the
 * intervals overlap, kf_noise_tie): best into *best (0: none), ties into
 * ties[0..*nt). */
static void overall_by_grouping(kf_db *db, int64_t cid, long long *best, long long *ties, int *nt, int cap)
{
    char sql[2048], err[512];
    snprintf(sql, sizeof(sql),
        "WITH g AS (SELECT e.candidate_id id, exp(avg(ln(e.speedup) ORDER BY j.target)) sp,"
        "  exp(avg(ln(CASE WHEN COALESCE(e.speedup_lo, e.speedup) > 0 THEN COALESCE(e.speedup_lo, e.speedup) END)"
        "   ORDER BY j.target)) lo,"
        "  exp(avg(ln(CASE WHEN COALESCE(e.speedup_hi, e.speedup) > 0 THEN COALESCE(e.speedup_hi, e.speedup) END)"
        "   ORDER BY j.target)) hi,"
        "  bool_and(e.confirmation = 'confirmed') conf"
        " FROM evaluations e JOIN jobs j ON j.id = e.job_id"
        " WHERE j.campaign_id = %lld AND j.purpose = 'eval' AND e.is_final AND e.verdict = 'ok'"
        "  AND e.speedup > 0 AND e.confirmation <> 'disputed'"
        " GROUP BY e.candidate_id HAVING count(*) = (SELECT cardinality(targets) FROM campaigns WHERE id = %lld))"
        " SELECT id, COALESCE(lo, 0), COALESCE(hi, 0) FROM g ORDER BY conf DESC, sp DESC, id",
        (long long)cid, (long long)cid);
    *best = 0;
    *nt = 0;
    PGresult *r = kf_db_exec(db, sql, 0, NULL, err, sizeof(err));
    if (!r) {
        fprintf(stderr, "overall by grouping: %s\n", err);
        return;
    }
    rank_ties(r, best, ties, nt, cap);
    PQclear(r);
}

/* One generated campaign (3 targets, n candidates) whose results follow
 * `shape`, written in random order (a candidate's results are not stored
 * in target order); kf_bests' overall best and ties must equal grouping
 * them all. expect: how the ranking reads them (kf_bests_overall_read):
 * 'W' a walk over fewer than half of the candidates, 'w' a walk, 'X' the
 * whole campaign (the walk's bound does not hold). */
static void check_overall(kf_db *db, const char *name, int n, double seed, const char *shape, char expect)
{
    char err[1024], sql[4096];
    int64_t cid;
    if (new_campaign(db, name, &cid, err, sizeof(err)) < 0) {
        CHECK(0, "%s: campaign: %s", name, err);
        return;
    }
    /* three targets: routing classes only (a cpu task, as no GPU runs here) */
    snprintf(sql, sizeof(sql), "UPDATE campaigns SET targets = ARRAY['cpu','sm_80','sm_90'] WHERE id = %lld",
             (long long)cid);
    exec_ok(db, sql);
    /* x, y, z: three uniform draws per candidate and target (u1, u2, u3);
     * `shape` makes the speedup sp, the interval's half width w (NULL: no
     * interval), the verdict ok (o) and the confirmation (cf) of them */
    char st[6][1024];
    snprintf(st[0], sizeof(st[0]), "SELECT setseed(%g)", seed);
    snprintf(st[1], sizeof(st[1]),
        "INSERT INTO candidates (campaign_id, source, sha256, defines, proposer)"
        " SELECT %lld, 'x', 'x', jsonb_build_object('T', g::text), 'human' FROM generate_series(1, %d) g",
        (long long)cid, n);
    snprintf(st[2], sizeof(st[2]),
        "INSERT INTO jobs (candidate_id, campaign_id, target, purpose, state)"
        " SELECT k.id, k.campaign_id, t, 'eval', 'done' FROM candidates k, unnest(ARRAY['cpu','sm_80','sm_90']) t"
        " WHERE k.campaign_id = %lld AND k.proposer = 'human' ORDER BY random()", (long long)cid);
    snprintf(st[3], sizeof(st[3]),
        "CREATE TEMP TABLE gen AS SELECT j.id job, j.candidate_id cand, j.target t, random() u1, random() u2,"
        " random() u3, random() u4 FROM jobs j WHERE j.campaign_id = %lld ORDER BY j.id", (long long)cid);
    snprintf(sql, sizeof(sql),
        "INSERT INTO evaluations (job_id, candidate_id, attempt, worker_id, verdict, speedup, speedup_lo,"
        " speedup_hi, cv, confirmation, is_final)"
        " SELECT job, cand, 1, 'w', CASE WHEN o THEN 'ok' ELSE 'incorrect' END, sp,"
        "  CASE WHEN w IS NOT NULL THEN sp * (1 - w) END, CASE WHEN w IS NOT NULL THEN sp * (1 + w) END, 0.01, cf, true"
        " FROM (SELECT job, cand, %s FROM (SELECT g.*, c.u1 cu FROM gen g JOIN gen c ON c.cand = g.cand"
        "   AND c.t = 'cpu') y) x ORDER BY random()", shape);
    snprintf(st[4], sizeof(st[4]), "DROP TABLE gen");
    for (int i = 0; i < 5; i++) {
        if (kf_db_cmd(db, st[i], 0, NULL, err, sizeof(err)) < 0 ||
            (i == 3 && kf_db_cmd(db, sql, 0, NULL, err, sizeof(err)) < 0)) {
            CHECK(0, "%s: generate: %s", name, err);
            return;
        }
    }
    long long best, ties[4096];
    int nt;
    overall_by_grouping(db, cid, &best, ties, &nt, 4096);
    json_t *b = kf_bests(db, cid, err, sizeof(err));
    CHECK(b != NULL, "%s: kf_bests: %s", name, err);
    if (!b) return;
    json_t *ov = json_object_get(b, "overall"), *jt = json_object_get(ov, "ties");
    long long got = json_is_null(ov) ? 0 : (long long)json_integer_value(json_object_get(ov, "candidate"));
    int same = got == best && (best == 0 || (int)json_array_size(jt) == nt);
    for (int i = 0; same && best && i < nt; i++) same = json_integer_value(json_array_get(jt, (size_t)i)) == ties[i];
    CHECK(same, "%s: overall best %lld with %zu ties; grouping every result: %lld with %d", name, got,
          best ? json_array_size(jt) : 0, best, nt);
    json_decref(b);
    int read = kf_bests_overall_read(db, cid, err, sizeof(err));
    CHECK(read > -2, "%s: %s", name, err);
    CHECK(expect == 'W' ? read >= 0 && read < n / 2 : expect == 'w' ? read >= 0 : read == -1,
          "%s: the ranking read %d of %d candidates (%s)", name, read, n,
          expect == 'X' ? "expected the whole campaign" : "expected a walk");
}

static void part_overall(const char *conninfo)
{
    char err[1024];
    kf_db *db = kf_db_open(conninfo, err, sizeof(err));
    CHECK(db != NULL, "%s", err);
    if (!db) return;
    CHECK(kf_db_migrate(db, NULL, err, sizeof(err)) == 0, "%s", err);
    /* the migrator says when a database holds another text of a migration
     * than this build's (edited since, or a branch's), and changes nothing */
    char drift[1024];
    CHECK(kf_db_schema_drift(db, drift, sizeof(drift), err, sizeof(err)) == 0,
          "a fresh schema is this build's: %s %s", drift, err);
    exec_ok(db, "UPDATE schema_version SET sha256 = repeat('0', 64) WHERE version = 7");
    exec_ok(db, "UPDATE schema_version SET name = '010_other.sql' WHERE version = 10");
    exec_ok(db, "INSERT INTO schema_version (version, name, sha256) VALUES (999, '999_future.sql', 'x')");
    int nd = kf_db_schema_drift(db, drift, sizeof(drift), err, sizeof(err));
    CHECK(nd == 3 && strstr(drift, "007_cover.sql applied with sha256 000000000000") &&
              strstr(drift, "010 applied as 010_other.sql") && strstr(drift, "999 (999_future.sql) is not among"),
          "three migrations differ, each named: %d: %s", nd, drift);
    CHECK(kf_db_migrate(db, NULL, err, sizeof(err)) == 0 &&
              q1(db, "SELECT count(*) FROM schema_version WHERE version = 7 AND sha256 = repeat('0', 64)") == 1,
          "migrate leaves an applied migration as it is (%s)", err);
    exec_ok(db, "DELETE FROM schema_version WHERE version = 999");
    /* correlated targets, narrow intervals, a tenth not ok somewhere */
    static const char corr[] =
        "0.5 + 3 * cu + 0.3 * u2 AS sp, 0.01 + 0.05 * u3 AS w, u4 > 0.1 AS o, 'none' AS cf";
    /* independent targets, wide intervals: many ties, a deep walk */
    static const char indep[] =
        "0.2 + 4 * u2 AS sp, 0.4 * u3 AS w, u4 > 0.05 AS o, 'none' AS cf";
    /* fast on one target, slow on another (anti-correlated): the best by
     * the mean lies deep in every target's list */
    static const char anti[] =
        "CASE t WHEN 'cpu' THEN 0.5 + 4 * cu WHEN 'sm_80' THEN 4.5 - 4 * cu ELSE 1 + u2 END AS sp,"
        " 0.02 * u3 AS w, true AS o, 'none' AS cf";
    /* repeated speedups, no intervals, disputes: ranks by id, points tie */
    static const char rep[] =
        "round((1 + 2 * u2)::numeric, 1)::float8 AS sp, NULL::float8 AS w, true AS o,"
        " CASE WHEN u4 < 0.05 THEN 'disputed' ELSE 'none' END AS cf";
    /* a few confirmed candidates (some confirmed on every target, slower
     * than the unconfirmed best), some pending */
    static const char conf[] =
        "0.5 + 3 * cu + 0.3 * u2 AS sp, 0.03 * u3 AS w, true AS o,"
        " CASE WHEN cu < 0.03 THEN 'confirmed' WHEN cu > 0.99 AND u4 < 0.5 THEN 'confirmed'"
        "  WHEN u4 < 0.02 THEN 'pending' ELSE 'none' END AS cf";
    /* confirmed results, but no candidate confirmed on every target */
    static const char conf_part[] =
        "0.5 + 3 * cu + 0.3 * u2 AS sp, 0.03 * u3 AS w, true AS o,"
        " CASE WHEN t = 'cpu' AND u4 < 0.2 THEN 'confirmed' ELSE 'none' END AS cf";
    /* upper ends below 0 here and there (ln() skips them: the walk's bound
     * does not hold), the fastest candidates' lower ends at 0 (every
     * candidate ties with such a best): the whole campaign is grouped */
    static const char odd[] =
        "0.5 + 3 * cu AS sp, CASE WHEN cu > 0.995 THEN 1.0 WHEN u4 < 0.01 THEN -1.5 ELSE 0.05 END AS w,"
        " true AS o, 'none' AS cf";
    static const char odd_hi[] =
        "0.5 + 3 * cu AS sp, CASE WHEN u4 < 0.01 THEN -1.5 ELSE 0.05 END AS w, true AS o, 'none' AS cf";
    /* equal candidates: the same speedups on every target for one in ten,
     * ranked by id whatever order their results were stored in */
    static const char same[] =
        "CASE t WHEN 'cpu' THEN 1.1 WHEN 'sm_80' THEN 2.3 ELSE 0.7 END * (1 + round(cu::numeric, 1)::float8) AS sp,"
        " 0.01 AS w, true AS o, 'none' AS cf";
    /* a speedup or an upper end that is not a number, or infinite */
    static const char nan[] =
        "CASE WHEN u4 < 0.01 THEN 'NaN'::float8 ELSE 0.5 + 3 * cu END AS sp, 0.02 AS w, true AS o, 'none' AS cf";
    static const char inf[] =
        "0.5 + 3 * cu AS sp, CASE WHEN u4 < 0.01 THEN 'Infinity'::float8 ELSE 0.02 END AS w, true AS o,"
        " 'none' AS cf";
    /* intervals whose upper end lies below the speedup (a worker's bad
     * report): the upper-end walk alone would not find the fastest */
    static const char inverted[] =
        "CASE t WHEN 'cpu' THEN 0.5 + 4 * cu WHEN 'sm_80' THEN 4.5 - 4 * cu ELSE 1 END AS sp,"
        " -0.3 - 0.1 * u3 AS w, true AS o, 'none' AS cf";
    /* a target where almost nothing is ok: few candidates qualify */
    static const char sparse[] =
        "0.5 + 3 * u2 AS sp, 0.02 AS w, (t <> 'sm_90' OR u4 < 0.02) AS o, 'none' AS cf";
    struct { const char *name, *shape; int n; char expect; } gen[] = {
        { "ov_corr", corr, 3000, 'W' },  { "ov_indep", indep, 3000, 'w' },   { "ov_anti", anti, 3000, 'w' },
        { "ov_rep", rep, 2000, 'w' },    { "ov_conf", conf, 2000, 'W' },     { "ov_conf_part", conf_part, 2000, 'W' },
        { "ov_same", same, 2000, 'w' },  { "ov_odd", odd, 2000, 'X' },       { "ov_odd_hi", odd_hi, 2000, 'X' },
        { "ov_nan", nan, 2000, 'X' },    { "ov_inf", inf, 2000, 'X' },       { "ov_sparse", sparse, 2000, 'w' },
        { "ov_inverted", inverted, 2000, 'w' }, { "ov_none", sparse, 3, 'w' },
    };
    for (size_t i = 0; i < sizeof(gen) / sizeof(gen[0]); i++)
        for (int k = 0; k < 2; k++) {
            char name[64];
            snprintf(name, sizeof(name), "%s_%d", gen[i].name, k);
            check_overall(db, name, gen[i].n, 0.1 + 0.3 * k + 0.01 * (double)i, gen[i].shape, gen[i].expect);
        }
    kf_db_close(db);
}

/* ---- a campaign's deletion holds its campaign row (kf_campaign_delete) ---- */

typedef struct {
    const char *conninfo, *name;
    int rc;
    char err[512];
} del_arg;

static void *del_thread(void *p)
{
    del_arg *a = p;
    kf_db *db = kf_db_open(a->conninfo, a->err, sizeof(a->err));
    a->rc = db ? kf_campaign_delete(db, a->name, a->err, sizeof(a->err)) : -1;
    kf_db_close(db);
    return NULL;
}

/* A `campaign start` that comes while the deletion deletes the campaign's
 * jobs must not get in between (the deletion first deleted every job and
 * result, then found the campaign running and left it so, with nothing
 * in it, and said it was deleted): it waits on the campaign row, which
 * the deletion holds. Here the deletion is held on one of the campaign's
 * job rows, locked by another session. */
static void part_delete_race(const char *conninfo)
{
    char err[512];
    kf_db *db = kf_db_open(conninfo, err, sizeof(err)), *lk = kf_db_open(conninfo, err, sizeof(err)),
          *st = kf_db_open(conninfo, err, sizeof(err));
    CHECK(db && lk && st, "%s", err);
    if (!db || !lk || !st || kf_db_migrate(db, NULL, err, sizeof(err)) < 0 || make_queue(db, "dr", 20) < 0) {
        CHECK(0, "delete race setup");
        goto out;
    }
    exec_ok(db, "UPDATE campaigns SET state = 'paused' WHERE name = 'dr'");
    exec_ok(lk, "BEGIN");
    exec_ok(lk, "SELECT id FROM jobs WHERE campaign_id = (SELECT id FROM campaigns WHERE name = 'dr')"
                " ORDER BY id DESC LIMIT 1 FOR UPDATE");
    del_arg a = { conninfo, "dr", -2, "" };
    pthread_t t;
    int started = pthread_create(&t, NULL, del_thread, &a) == 0;
    CHECK(started, "deletion thread");
    usleep(400000); /* the deletion waits on the locked job row */
    exec_ok(st, "SET lock_timeout = '300ms'");
    int rc = kf_campaign_start(st, "dr", err, sizeof(err));
    CHECK(rc < 0, "a start while the campaign is being deleted waited on its row and gave up (rc %d: %s)", rc, err);
    exec_ok(lk, "ROLLBACK");
    if (started) pthread_join(t, NULL);
    CHECK(a.rc == 0, "the deletion finished: %s", a.err);
    CHECK(q1(db, "SELECT count(*) FROM campaigns WHERE name = 'dr'") == 0 &&
              q1(db, "SELECT count(*) FROM jobs") == 0 && q1(db, "SELECT count(*) FROM job_keys") == 0,
          "the campaign is gone with its jobs and keys");

    /* a campaign deleted while the tick folds its counts
     * (kf_compact_counts, in another session's open transaction): the
     * deletion waits for the fold and deletes the folded rows too (they
     * were left behind: invisible to the delete trigger's statement) */
    if (make_queue(db, "dc", 3) == 0) {
        exec_ok(db, "INSERT INTO campaign_counts (campaign_id, what, target, purpose, verdict, is_final, n)"
                    " SELECT id, 'evaluation', 'cpu', 'eval', 'ok', true, 1 FROM campaigns, generate_series(1, 70)"
                    " WHERE name = 'dc'");
        exec_ok(db, "UPDATE campaigns SET state = 'paused' WHERE name = 'dc'");
        exec_ok(lk, "BEGIN");
        CHECK(q1(lk, "SELECT kf_compact_counts()") >= 70, "the fold took the campaign's rows");
        del_arg d = { conninfo, "dc", -2, "" };
        started = pthread_create(&t, NULL, del_thread, &d) == 0;
        CHECK(started, "deletion thread");
        usleep(400000);
        exec_ok(lk, "COMMIT");
        if (started) pthread_join(t, NULL);
        CHECK(d.rc == 0, "the deletion finished: %s", d.err);
        CHECK(q1(db, "SELECT count(*) FROM campaign_counts WHERE campaign_id NOT IN (SELECT id FROM campaigns)") == 0,
              "no counts left of a campaign deleted during a fold");
    } else {
        CHECK(0, "second campaign");
    }
out:
    kf_db_close(st);
    kf_db_close(lk);
    kf_db_close(db);
}

int main(void)
{
    char c1[1024], c2[1024], c3[1024], c4[1024], c5[1024], c6[1024], c7[1024];
    if (!fresh_db("kft_dispatch_lib", c1, sizeof(c1)) || !fresh_db("kft_dispatch_srv", c2, sizeof(c2)) ||
        !fresh_db("kft_dispatch_hist", c3, sizeof(c3)) || !fresh_db("kft_dispatch_floor", c4, sizeof(c4)) ||
        !fresh_db("kft_dispatch_overall", c5, sizeof(c5)) || !fresh_db("kft_dispatch_rows", c6, sizeof(c6)) ||
        !fresh_db("kft_dispatch_delete", c7, sizeof(c7))) {
        fprintf(stderr, "cannot create a database: is the devdb cluster running (KFARM_DEVDB_DIR)?\n");
        printf("0 passed, 1 failed\n");
        return 1;
    }
    part_library(c1);
    part_server(c2);
    part_history(c3);
    part_floors(c4);
    part_overall(c5);
    part_group_rows(c6);
    part_group_numbers(c6);
    part_delete_race(c7);
    /* every evaluation carries its job's campaign, target and purpose
     * (schema 009: the coordinator writes them, a trigger fills them for
     * any other writer), and they are the job's */
    char err[256];
    kf_db *db = kf_db_open(c2, err, sizeof(err));
    CHECK(db && q1(db, "SELECT count(*) FROM evaluations") > 0 &&
              q1(db, "SELECT count(*) FROM evaluations e JOIN jobs j ON j.id = e.job_id"
                     " WHERE e.job_campaign_id IS DISTINCT FROM j.campaign_id OR e.job_target IS DISTINCT FROM j.target"
                     " OR e.job_purpose IS DISTINCT FROM j.purpose") == 0,
          "the coordinator's evaluations carry their job's campaign, target and purpose");
    CHECK(db && q1(db, "WITH i AS (INSERT INTO evaluations (job_id, candidate_id, attempt, worker_id, fencing_token,"
                       " verdict, is_final) SELECT id, candidate_id, 99, 'tool', -4242, 'infra_error', false"
                       " FROM jobs ORDER BY id LIMIT 1 RETURNING job_campaign_id, job_target, job_purpose)"
                       " SELECT count(*) FROM i, jobs j WHERE j.id = (SELECT min(id) FROM jobs)"
                       " AND i.job_campaign_id = j.campaign_id AND i.job_target = j.target AND i.job_purpose = j.purpose") == 1,
          "an evaluation written without them gets them from its job");
    kf_db_close(db);
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
