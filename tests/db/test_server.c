/*
 * test_server.c -- the real kfarm-coordinator binary, spoken to by a fake
 * worker over nanomsg (ipc), with a real PostgreSQL.
 *
 * Covers: start with migrations; Register; GetJob after the coordinator
 * expands a tune campaign by itself (job carries task, files, source,
 * defines, seed, lease); Heartbeat (stale token -> STALE + cancel; a wrong
 * lease token or another worker's lease -> REJECTED); Result stored once (a
 * byte-identical resend is answered from the replay cache with the same
 * reply bytes, a fresh resend is DUPLICATE, the same bytes after the cache
 * are refused by the counter); hostile input (garbage bytes, an unknown
 * credential: notices; unknown verdict: REJECTED) without killing the daemon; an expired lease re-queued by the reaper; the
 * database connection killed under the daemon (next request still served);
 * SIGTERM -> clean exit 0. Prints "N passed, M failed".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nanomsg/nn.h>
#include <nanomsg/reqrep.h>

#include "campaign.h"
#include "db.h"
#include "kf_wire.h"

#include "db_test.h"

/* Send raw bytes, receive raw bytes (malloc'ed copy into *out). */
static int raw_call(int sock, const void *msg, size_t len, uint8_t **out, size_t *outlen)
{
    if (nn_send(sock, msg, len, 0) < 0) return -1;
    void *buf = NULL;
    int n = nn_recv(sock, &buf, NN_MSG, 0);
    if (n < 0) return -1;
    *out = malloc((size_t)n);
    memcpy(*out, buf, (size_t)n);
    *outlen = (size_t)n;
    nn_freemsg(buf);
    return 0;
}

static Kfarm__Reply *open_reply(const kf_wire_client *c, const uint8_t *msg, size_t len)
{
    kf_frame f;
    char err[256];
    if (kf_frame_parse(msg, len, KF_WIRE_MAX_MSG, &f, err, sizeof(err)) < 0 ||
        f.kind != KF_FRAME_REPLY || kf_frame_check_header(&f, c->key.down) < 0 ||
        kf_frame_check_body(&f, c->key.down) < 0)
        return NULL;
    return kfarm__reply__unpack(NULL, f.body_len, f.body);
}

/* Is msg a notice frame containing text? */
static int is_notice(const uint8_t *msg, size_t len, const char *text)
{
    kf_frame f;
    char err[256];
    return msg && kf_frame_parse(msg, len, KF_WIRE_MAX_MSG, &f, err, sizeof(err)) == 0 &&
           f.kind == KF_FRAME_NOTICE && memmem(f.notice, f.notice_len, text, strlen(text)) != NULL;
}

static Kfarm__Reply *do_register(kf_wire_client *c)
{
    Kfarm__Device dev = KFARM__DEVICE__INIT;
    dev.name = "Test CPU";
    dev.arch = "x86_64";
    Kfarm__Device *devs[1] = { &dev };
    char *cls[1] = { "cpu" };
    Kfarm__Register reg = KFARM__REGISTER__INIT;
    reg.worker_id = c->id;
    reg.hostname = "testhost";
    reg.backend = "cpu";
    reg.n_devices = 1;
    reg.devices = devs;
    reg.n_classes = 1;
    reg.classes = cls;
    Kfarm__Request req = KFARM__REQUEST__INIT;
    req.msg_case = KFARM__REQUEST__MSG_REGISTER;
    req.register_ = &reg;
    return call(c, &req);
}

/* GetJob for the cpu class, asking for up to max_jobs leases (0: one, the
 * field left out); tasks_once with the task hashes have[0..nhave) held
 * (tasks_once 0: the field left out); sources_once (0: left out). */
static Kfarm__Reply *get_jobs_t(kf_wire_client *k, const char *worker, uint32_t max_jobs, int tasks_once,
                                char **have, size_t nhave, int sources_once)
{
    Kfarm__GetJob g = KFARM__GET_JOB__INIT;
    char *cls[1] = { "cpu" };
    g.worker_id = (char *)worker;
    g.n_classes = 1;
    g.classes = cls;
    g.has_max_jobs = max_jobs > 0;
    g.max_jobs = max_jobs;
    g.has_tasks_once = tasks_once;
    g.tasks_once = tasks_once;
    g.n_have_tasks = nhave;
    g.have_tasks = have;
    g.has_sources_once = sources_once;
    g.sources_once = sources_once;
    Kfarm__Request req = KFARM__REQUEST__INIT;
    req.msg_case = KFARM__REQUEST__MSG_GET_JOB;
    req.get_job = &g;
    return call(k, &req);
}

/* Create and start campaign `name` on tests/tasks/TASK whose seed is the
 * task's baseline under a `// kfarm:tune TUNE` line (written into dir),
 * with up to max_candidates variants. */
static void start_seeded(kf_db *db, const char *dir, const char *name, const char *task, const char *tune,
                         int max_candidates)
{
    char td[4096], seedp[600], basep[4200], line[1024], err[512];
    snprintf(td, sizeof(td), "%s/tests/tasks/%s", src_dir(), task);
    snprintf(seedp, sizeof(seedp), "%s/seed_%s.c", dir, name);
    snprintf(basep, sizeof(basep), "%s/baseline.c", td);
    FILE *in = fopen(basep, "r"), *out = fopen(seedp, "w");
    if (out) fprintf(out, "// kfarm:tune %s\n", tune);
    while (in && out && fgets(line, sizeof(line), in)) fputs(line, out);
    if (in) fclose(in);
    if (out) fclose(out);
    kf_campaign_spec sp;
    memset(&sp, 0, sizeof(sp));
    sp.name = name;
    sp.task_dir = td;
    sp.seed_path = seedp;
    sp.max_candidates = max_candidates;
    CHECK(kf_campaign_create(db, &sp, NULL, err, sizeof(err)) == 0, "%s", err);
    CHECK(kf_campaign_start(db, name, err, sizeof(err)) == 0, "%s", err);
}

static Kfarm__Reply *get_jobs(kf_wire_client *k, const char *worker, uint32_t max_jobs)
{
    return get_jobs_t(k, worker, max_jobs, 0, NULL, 0, 0);
}

static Kfarm__Reply *get_job(kf_wire_client *k, const char *worker) { return get_jobs(k, worker, 0); }

/* Does job jb name (task_sha256) the task of its campaign? */
static int names_its_task(kf_db *db, const Kfarm__Job *jb)
{
    char jid[24], err[256];
    snprintf(jid, sizeof(jid), "%llu", (unsigned long long)jb->job_id);
    const char *pp[2] = { jid, jb->task_sha256 ? jb->task_sha256 : "" };
    PGresult *m = kf_db_exec(db,
        "SELECT count(*) FROM jobs j JOIN campaigns c ON c.id = j.campaign_id JOIN tasks t ON t.id = c.task_id"
        " WHERE j.id = $1::bigint AND t.sha256 = $2", 2, pp, err, sizeof(err));
    int ok = m && kf_db_i64(m, 0, 0, 0) == 1;
    if (m) PQclear(m);
    return ok;
}

int main(void)
{
    char conninfo[1024], err[1024];
    const char *bin = env_or("KFARM_BIN", NULL);
    if (!bin || !fresh_db("kft_server", conninfo, sizeof(conninfo))) {
        fprintf(stderr, "needs KFARM_BIN and a running devdb cluster (KFARM_DEVDB_DIR)\n");
        printf("0 passed, 1 failed\n");
        return 1;
    }
    kf_wire_client w1, w2, w3, intruder;

    char dir[] = "/tmp/kft-server.XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char addr[256], logpath[256], coord[4096];
    snprintf(addr, sizeof(addr), "ipc://%s/coord.ipc", dir);
    snprintf(logpath, sizeof(logpath), "%s/coordinator.log", dir);
    snprintf(coord, sizeof(coord), "%s/kfarm-coordinator", bin);

    pid_t pid = fork();
    if (pid == 0) {
        FILE *lf = freopen(logpath, "w", stderr);
        (void)lf;
        execl(coord, coord, "--db", conninfo, "--listen", addr, "--lease-ms", "1500",
              "--export-dir", dir, "--export-interval", "1", (char *)NULL);
        _exit(127);
    }
    int sock = nn_socket(AF_SP, NN_REQ);
    kf_wire_socket_setup(sock, KF_WIRE_MAX_MSG, 5000, 5000, err, sizeof(err));
    nn_connect(sock, addr);

    kf_db *db = NULL;
    kf_embedded_file mig[32];
    int nmig = kf_db_embedded_schema(mig, 32);
    for (int i = 0; i < 50 && !db; i++) { /* wait for every migration (each is its own transaction) */
        sleep_ms(200);
        kf_db *d = kf_db_open(conninfo, err, sizeof(err));
        if (d && q1(d, "SELECT count(*) FROM schema_version") >= nmig) db = d;
        else kf_db_close(d);
    }
    CHECK(db != NULL, "coordinator did not migrate the database");
    if (!db) goto end;
    enroll(db, sock, "fake-1", &w1);
    enroll(db, sock, "fake-2", &w2);
    enroll(db, sock, "fake-3", &w3);
    enroll(NULL, sock, "intruder", &intruder); /* not enrolled */

    /* Register. */
    Kfarm__Request req = KFARM__REQUEST__INIT;
    Kfarm__Reply *rep = do_register(&w1);
    CHECK(rep && rep->status == KFARM__STATUS__OK, "register");
    if (rep) kfarm__reply__free_unpacked(rep, NULL);
    rep = do_register(&w2);
    CHECK(rep && rep->status == KFARM__STATUS__OK, "register fake-2");
    if (rep) kfarm__reply__free_unpacked(rep, NULL);
    rep = do_register(&w3);
    CHECK(rep && rep->status == KFARM__STATUS__OK, "register fake-3");
    if (rep) kfarm__reply__free_unpacked(rep, NULL);
    CHECK(q1(db, "SELECT jsonb_array_length(devices) FROM workers WHERE id = 'fake-1'") == 1,
          "devices stored");

    rep = get_job(&w1, "fake-1");
    CHECK(rep && rep->status == KFARM__STATUS__NO_JOB, "no job before a campaign");
    if (rep) kfarm__reply__free_unpacked(rep, NULL);

    /* A campaign: the running coordinator expands it within a second. */
    char task[4096];
    snprintf(task, sizeof(task), "%s/tests/tasks/farm_axpy_f32", src_dir());
    kf_campaign_spec spec;
    memset(&spec, 0, sizeof(spec));
    spec.name = "srv";
    spec.task_dir = task;
    spec.max_candidates = 2;
    CHECK(kf_campaign_create(db, &spec, NULL, err, sizeof(err)) == 0, "%s", err);
    CHECK(kf_campaign_start(db, "srv", err, sizeof(err)) == 0, "%s", err);
    rep = NULL;
    for (int i = 0; i < 30; i++) {
        rep = get_job(&w1, "fake-1");
        if (rep && rep->status == KFARM__STATUS__OK) break;
        if (rep) kfarm__reply__free_unpacked(rep, NULL);
        rep = NULL;
        sleep_ms(200);
    }
    CHECK(rep && rep->job, "a job after start");
    if (!rep || !rep->job) goto end;
    Kfarm__Job *job = rep->job;
    uint64_t job_id = job->job_id, token = job->fencing_token;
    uint8_t ltok[16] = { 0 };
    CHECK(job->has_lease_token && job->lease_token.len == 16, "job carries a 128-bit lease token");
    if (job->has_lease_token && job->lease_token.len == 16) memcpy(ltok, job->lease_token.data, 16);
    int has_files = 0;
    for (size_t i = 0; i < job->n_task_files; i++)
        if (strcmp(job->task_files[i]->name, "reference.c") == 0 && job->task_files[i]->content.len > 0)
            has_files = 1;
    CHECK(has_files, "job carries the task files");
    CHECK(job->task_json && strstr(job->task_json, "farm_axpy_f32"), "job carries task.json");
    CHECK(job->source.len > 0 && strstr((const char *)job->source.data, "kf_entry") != NULL,
          "job carries the source");
    CHECK(job->n_defines == 2, "two defines (DELAY_MS, UNROLL), got %zu", job->n_defines);
    CHECK(job->has_seed && job->seed == job_id, "seed = job id");
    CHECK(job->lease_ms == 1500, "lease_ms %u", job->lease_ms);
    CHECK(job->target && strcmp(job->target, "cpu") == 0, "target cpu");
    kfarm__reply__free_unpacked(rep, NULL);

    /* Heartbeats. */
    Kfarm__Heartbeat hb = KFARM__HEARTBEAT__INIT;
    hb.worker_id = "fake-1";
    hb.job_id = job_id;
    hb.fencing_token = token;
    hb.has_lease_token = 1;
    hb.lease_token.data = ltok;
    hb.lease_token.len = 16;
    req.msg_case = KFARM__REQUEST__MSG_HEARTBEAT;
    req.heartbeat = &hb;
    rep = call(&w1, &req);
    CHECK(rep && rep->status == KFARM__STATUS__OK && rep->lease_ms == 1500, "heartbeat ok");
    if (rep) kfarm__reply__free_unpacked(rep, NULL);
    hb.worker_id = "fake-2"; /* another worker, right lease and token */
    rep = call(&w2, &req);
    CHECK(rep && rep->status == KFARM__STATUS__REJECTED, "heartbeat for another worker's lease refused");
    if (rep) kfarm__reply__free_unpacked(rep, NULL);
    hb.worker_id = "fake-1";
    uint8_t guess[16];
    memcpy(guess, ltok, 16);
    guess[15] ^= 1;
    hb.lease_token.data = guess;
    rep = call(&w1, &req);
    CHECK(rep && rep->status == KFARM__STATUS__REJECTED, "heartbeat with a guessed lease token refused");
    if (rep) kfarm__reply__free_unpacked(rep, NULL);
    hb.lease_token.data = ltok;
    hb.fencing_token = token + 1000;
    rep = call(&w1, &req);
    CHECK(rep && rep->status == KFARM__STATUS__STALE && rep->cancel, "stale heartbeat cancels");
    if (rep) kfarm__reply__free_unpacked(rep, NULL);

    /* Result, sealed once and sent twice byte for byte (a REQ resend). */
    Kfarm__Result res = KFARM__RESULT__INIT;
    res.worker_id = "fake-1";
    res.job_id = job_id;
    res.fencing_token = token;
    res.verdict = "ok";
    res.detail = "passed";
    res.metrics_json = "{\"timing\": {\"shapes\": [{\"weight\": 1, \"baseline\": {\"cv\": 0.02},"
                       " \"candidate\": {\"cv\": 0.02}}]}}";
    res.has_candidate_us = res.has_baseline_us = res.has_speedup = 1;
    res.candidate_us = 50;
    res.baseline_us = 75;
    res.speedup = 1.5;
    res.has_lease_token = 1;
    res.lease_token.data = guess;
    res.lease_token.len = 16;
    req.msg_case = KFARM__REQUEST__MSG_RESULT;
    req.result = &res;
    rep = call(&w1, &req);
    CHECK(rep && rep->status == KFARM__STATUS__REJECTED, "result with a guessed lease token refused");
    if (rep) kfarm__reply__free_unpacked(rep, NULL);
    res.lease_token.data = ltok;
    res.worker_id = "fake-2";
    rep = call(&w2, &req);
    CHECK(rep && rep->status == KFARM__STATUS__REJECTED, "result for another worker's lease refused");
    if (rep) kfarm__reply__free_unpacked(rep, NULL);
    res.worker_id = "fake-1";
    uint8_t *body = NULL, *sealed = NULL, *r1 = NULL, *r2 = NULL;
    size_t slen = 0, l1 = 0, l2 = 0;
    kf_wire_client_seal(&w1, &req, &sealed, &slen, err, sizeof(err));
    CHECK(raw_call(sock, sealed, slen, &r1, &l1) == 0, "send result");
    CHECK(raw_call(sock, sealed, slen, &r2, &l2) == 0, "resend result");
    CHECK(l1 == l2 && r1 && r2 && memcmp(r1, r2, l1) == 0, "resend answered with the cached reply");
    rep = r1 ? open_reply(&w1, r1, l1) : NULL;
    CHECK(rep && rep->status == KFARM__STATUS__OK, "result stored");
    if (rep) kfarm__reply__free_unpacked(rep, NULL);
    free(body);
    free(r1);
    free(r2);
    rep = call(&w1, &req); /* fresh frame, same result */
    CHECK(rep && rep->status == KFARM__STATUS__DUPLICATE, "fresh resend is DUPLICATE");
    if (rep) kfarm__reply__free_unpacked(rep, NULL);
    char sql[512];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM evaluations WHERE job_id = %llu",
             (unsigned long long)job_id);
    CHECK(q1(db, sql) == 1, "stored exactly once");

    /* A Result carrying the next GetJob: the reply's status is the result's,
     * its job the next lease (one round trip less per job); a GetJob that
     * names another worker gets nothing. */
    {
        char *ncls[1] = { "cpu" };
        Kfarm__GetJob nj = KFARM__GET_JOB__INIT;
        nj.worker_id = "fake-2";
        nj.n_classes = 1;
        nj.classes = ncls;
        res.next = &nj;
        rep = call(&w1, &req);
        CHECK(rep && rep->status == KFARM__STATUS__DUPLICATE && !rep->job,
              "a next GetJob naming another worker gets no job");
        if (rep) kfarm__reply__free_unpacked(rep, NULL);
        long queued = q1(db, "SELECT count(*) FROM jobs WHERE state = 'queued'");
        nj.worker_id = "fake-1";
        rep = call(&w1, &req);
        CHECK(rep && rep->status == KFARM__STATUS__DUPLICATE, "result with next: status is the result's");
        CHECK(rep && (queued > 0) == (rep->job != NULL), "result with next: a job exactly when one is queued (%ld)",
              queued);
        if (rep && rep->job) {
            snprintf(sql, sizeof(sql), "SELECT count(*) FROM jobs WHERE id = %llu AND state = 'leased' AND "
                     "worker_id = 'fake-1'", (unsigned long long)rep->job->job_id);
            CHECK(q1(db, sql) == 1, "the next job is leased to the sender");
            /* give it back so the rest of the test sees the queue as before */
            snprintf(sql, sizeof(sql), "UPDATE jobs SET state = 'queued', worker_id = NULL WHERE id = %llu",
                     (unsigned long long)rep->job->job_id);
            kf_db_cmd(db, sql, 0, NULL, err, sizeof(err));
        }
        if (rep) kfarm__reply__free_unpacked(rep, NULL);
        res.next = NULL;
    }

    /* Hostile input. */
    uint8_t *g = NULL;
    size_t gl = 0;
    CHECK(raw_call(sock, "garbage!", 8, &g, &gl) == 0, "garbage answered");
    CHECK(is_notice(g, gl, "not a kfarm v2 frame"), "garbage -> notice");
    free(g);
    /* the sealed result again, once the replay cache no longer answers it
     * (a coordinator restart empties it): the stored counter refuses it */
    kf_db_cmd(db, "SELECT 1", 0, NULL, err, sizeof(err));
    req.msg_case = KFARM__REQUEST__MSG_GET_JOB;
    Kfarm__GetJob gj = KFARM__GET_JOB__INIT;
    gj.worker_id = "intruder";
    req.get_job = &gj;
    rep = NULL;
    kf_wire_client_seal(&intruder, &req, &body, &slen, err, sizeof(err));
    CHECK(raw_call(sock, body, slen, &g, &gl) == 0, "unknown credential answered");
    CHECK(is_notice(g, gl, "authentication failed"), "unknown credential -> notice");
    free(g);
    free(body);
    free(sealed);
    CHECK(q1(db, "SELECT count(*) FROM workers WHERE id = 'intruder'") == 0, "intruder not recorded");

    /* Expired lease: take the second job and go silent. */
    rep = get_job(&w2, "fake-2");
    CHECK(rep && rep->status == KFARM__STATUS__OK && rep->job, "second job");
    uint64_t job2 = rep && rep->job ? rep->job->job_id : 0, tok2 = rep && rep->job ? rep->job->fencing_token : 0;
    if (rep) kfarm__reply__free_unpacked(rep, NULL);
    snprintf(sql, sizeof(sql), "SELECT (state = 'queued')::int FROM jobs WHERE id = %llu",
             (unsigned long long)job2);
    int requeued = 0;
    for (int i = 0; i < 40 && !requeued; i++) {
        sleep_ms(200);
        requeued = q1(db, sql) == 1;
    }
    CHECK(requeued, "expired lease re-queued by the reaper");
    res.verdict = "excellent";
    res.job_id = job2;
    res.fencing_token = tok2;
    res.worker_id = "fake-2";
    req.msg_case = KFARM__REQUEST__MSG_RESULT;
    req.result = &res;
    rep = call(&w2, &req);
    CHECK(rep && rep->status == KFARM__STATUS__REJECTED, "unknown verdict rejected");
    if (rep) kfarm__reply__free_unpacked(rep, NULL);

    /* Kill the coordinator's database connection: the next request works. */
    kf_db_cmd(db, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                  "WHERE pid <> pg_backend_pid() AND datname = current_database()", 0, NULL, err,
              sizeof(err));
    sleep_ms(300);
    rep = get_job(&w3, "fake-3");
    CHECK(rep && rep->status == KFARM__STATUS__OK, "served after the connection was killed (%d)",
          rep ? (int)rep->status : -1);
    uint64_t job3 = rep && rep->job ? rep->job->job_id : 0, tok3 = rep && rep->job ? rep->job->fencing_token : 0;
    uint8_t ltok3[16] = { 0 };
    if (rep && rep->job && rep->job->lease_token.len == 16) memcpy(ltok3, rep->job->lease_token.data, 16);
    if (rep) kfarm__reply__free_unpacked(rep, NULL);
    res.verdict = "ok";
    res.worker_id = "fake-3";
    res.job_id = job3;
    res.fencing_token = tok3;
    res.lease_token.data = ltok3;
    rep = call(&w3, &req);
    CHECK(rep && rep->status == KFARM__STATUS__OK, "result for the re-leased job");
    if (rep) kfarm__reply__free_unpacked(rep, NULL);
    /* serve the verification jobs the results asked for (as fake-2, which
     * reported nothing that is verified) until the campaign is done */
    int finished = 0, served = 0;
    for (int i = 0; i < 150 && !finished; i++) {
        rep = get_job(&w2, "fake-2");
        if (rep && rep->job) {
            res.worker_id = "fake-2";
            /* each a little faster than the last: within the noise
             * allowance (1.5x), outside the previous one's interval */
            res.speedup = 1.8 + 0.1 * served++;
            res.job_id = rep->job->job_id;
            res.fencing_token = rep->job->fencing_token;
            uint8_t lt[16];
            memcpy(lt, rep->job->lease_token.data, 16);
            res.lease_token.data = lt;
            kfarm__reply__free_unpacked(rep, NULL);
            req.msg_case = KFARM__REQUEST__MSG_RESULT;
            req.result = &res;
            rep = call(&w2, &req);
        }
        if (rep) kfarm__reply__free_unpacked(rep, NULL);
        sleep_ms(200);
        finished = q1(db, "SELECT count(*) FROM campaigns WHERE name = 'srv' AND state = 'done'") == 1;
    }
    CHECK(q1(db, "SELECT count(*) FROM evaluations WHERE confirmation = 'confirmed'") >= 1,
          "the best result was confirmed by a second worker");
    /* a confirmed result's interval covers its verification's (verify.c) */
    CHECK(q1(db, "SELECT count(*) FROM evaluations o JOIN evaluations v ON v.id = o.confirmed_by"
                 " WHERE o.confirmation = 'confirmed' AND v.speedup > o.speedup * 1.01") >= 1 &&
          q1(db, "SELECT count(*) FROM evaluations o JOIN evaluations v ON v.id = o.confirmed_by"
                 " WHERE o.confirmation = 'confirmed' AND v.speedup > o.speedup * 1.01 AND NOT ("
                 " o.speedup_lo < o.speedup AND o.speedup_hi >= v.speedup_hi AND v.speedup_hi > v.speedup)") == 0,
          "a confirmed result's interval covers both runs");
    CHECK(finished, "campaign done");
    char datajs[512];
    snprintf(datajs, sizeof(datajs), "%s/data/index.js", dir);
    sleep_ms(1500);
    FILE *f = fopen(datajs, "r");
    char head[64] = "";
    if (f) {
        if (!fgets(head, sizeof(head), f)) head[0] = 0;
        fclose(f);
    }
    CHECK(strncmp(head, "kfarmData(\"index\"", 17) == 0, "periodic export wrote data/index.js");

    /* Two more campaigns of two other tasks, leased side by side: every job
     * carries its own task (the coordinator keeps the tasks it sent per
     * serving thread, keyed by id and sha256): name, task.json and files
     * as stored, whichever task the reply before it carried. */
    const char *tdirs[2] = { "axpy_f32", "softmax_rows_f32" };
    for (int c = 0; c < 2; c++) {
        char nm[32];
        snprintf(nm, sizeof(nm), "srv_t%d", c);
        /* the task's baseline as a seed of four variants (a tunable it never reads) */
        start_seeded(db, dir, nm, tdirs[c], "UNUSED_T=1,2,3,4", 4);
    }
    int seen_jobs = 0, right = 0, tasks_seen = 0;
    char last_task[128] = "";
    for (int i = 0; i < 60 && seen_jobs < 8; i++) {
        Kfarm__Reply *rp = get_jobs(&w3, "fake-3", 3);
        if (!rp || rp->status != KFARM__STATUS__OK) {
            if (rp) kfarm__reply__free_unpacked(rp, NULL);
            sleep_ms(200);
            continue;
        }
        for (size_t k = 0; k <= rp->n_more_jobs; k++) {
            Kfarm__Job *jb = k == 0 ? rp->job : rp->more_jobs[k - 1];
            if (!jb) continue;
            seen_jobs++;
            char jid[24];
            snprintf(jid, sizeof(jid), "%llu", (unsigned long long)jb->job_id);
            size_t nref = 0;
            const char *ref = "";
            for (size_t f2 = 0; f2 < jb->n_task_files; f2++)
                if (!strcmp(jb->task_files[f2]->name, "reference.c")) {
                    ref = (const char *)jb->task_files[f2]->content.data;
                    nref = jb->task_files[f2]->content.len;
                }
            char *refz = strndup(ref, nref);
            const char *pp[4] = { jid, jb->task_name, jb->task_json, refz ? refz : "" };
            PGresult *m = kf_db_exec(db,
                "SELECT count(*) FROM jobs j JOIN campaigns c ON c.id = j.campaign_id JOIN tasks t ON t.id = c.task_id"
                " WHERE j.id = $1::bigint AND t.name = $2 AND t.spec_text = $3 AND t.files->>'reference.c' = $4",
                4, pp, err, sizeof(err));
            right += m && kf_db_i64(m, 0, 0, 0) == 1;
            if (m) PQclear(m);
            free(refz);
            if (strcmp(last_task, jb->task_name) != 0) tasks_seen++;
            snprintf(last_task, sizeof(last_task), "%s", jb->task_name);
        }
        kfarm__reply__free_unpacked(rp, NULL);
    }
    CHECK(seen_jobs >= 8 && right == seen_jobs, "each of %d jobs of three tasks carries its own task (%d right)",
          seen_jobs, right);
    CHECK(tasks_seen >= 2, "the jobs came from more than one task (%d changes)", tasks_seen);

    /* GetJob.tasks_once: a task's files come with the first job of it in a
     * reply and never for a task the worker names in have_tasks; every job
     * names its task (task_sha256). A worker that holds nothing, then one
     * that holds what it was sent, then one that names hashes it does not
     * hold (or hostile ones) gets the files of those. */
    char held[8][72];
    char *havep[80];
    char junk[70][80];
    int nheld = 0, full = 0, abbrev = 0, bad = 0, named = 0, seen2 = 0;
    for (int round = 0; round < 40 && seen2 < 18; round++) {
        size_t nh = 0;
        for (int h = 0; h < nheld; h++) havep[nh++] = held[h];
        if (round % 3 == 2) { /* 70 hashes it does not hold (64 read), the held ones unnamed */
            nh = 0;
            for (int h = 0; h < 70; h++) {
                snprintf(junk[h], sizeof(junk[h]), "%064x", h);
                havep[nh++] = junk[h];
            }
        }
        Kfarm__Reply *rp = get_jobs_t(&w3, "fake-3", 6, 1, nh ? havep : NULL, nh, 0);
        if (!rp || rp->status != KFARM__STATUS__OK) {
            if (rp) kfarm__reply__free_unpacked(rp, NULL);
            sleep_ms(200);
            continue;
        }
        char sent[KF_QUEUE_MAX_LEASES][72];
        int nsent = 0;
        for (size_t k = 0; k <= rp->n_more_jobs; k++) {
            Kfarm__Job *jb = k == 0 ? rp->job : rp->more_jobs[k - 1];
            if (!jb) continue;
            seen2++;
            named += names_its_task(db, jb);
            const char *sha = jb->task_sha256 ? jb->task_sha256 : "";
            int in_full = jb->task_json[0] && jb->n_task_files > 0;
            int known = 0; /* held (as named in this GetJob) or sent earlier in this reply */
            for (size_t h = 0; h < nh && !known; h++) known = !strcmp(havep[h], sha);
            for (int h = 0; h < nsent && !known; h++) known = !strcmp(sent[h], sha);
            if (in_full) {
                full++;
                bad += known; /* sent again although known */
                if (nsent < KF_QUEUE_MAX_LEASES) snprintf(sent[nsent++], sizeof(sent[0]), "%s", sha);
                int have_it = 0;
                for (int h = 0; h < nheld && !have_it; h++) have_it = !strcmp(held[h], sha);
                if (!have_it && nheld < 8) snprintf(held[nheld++], sizeof(held[0]), "%s", sha);
            } else {
                abbrev++;
                bad += !known || jb->task_json[0] || jb->n_task_files > 0; /* not known: a job it cannot run */
            }
        }
        kfarm__reply__free_unpacked(rp, NULL);
    }
    CHECK(seen2 >= 12 && named == seen2, "tasks_once: each of %d jobs names its own task (%d right)", seen2,
          named);
    CHECK(bad == 0 && full > 0 && abbrev > full,
          "tasks_once: files only where the worker lacks them (%d in full, %d by name, %d wrong)", full,
          abbrev, bad);

    /* GetJob.sources_once: a job whose source is an earlier job's of the
     * same reply names that job (Job.source_job) and carries no bytes;
     * every job's source, its own or the one it names, is its candidate's.
     * Without it, every job carries its own. Two tune campaigns of 8
     * variants each (one source per campaign, two sources in all). */
    for (int c = 0; c < 2; c++) {
        char nm[32], tune[64];
        snprintf(nm, sizeof(nm), "srv_src%d", c);
        snprintf(tune, sizeof(tune), "UNUSED_S%d=1,2,3,4,5,6,7,8", c);
        start_seeded(db, dir, nm, "farm_axpy_f32", tune, 8);
    }
    int sj = 0, byref = 0, own = 0, wrong = 0;
    for (int round = 0; round < 40 && sj < 24; round++) {
        int once = round % 4 != 3; /* every fourth GetJob without sources_once */
        Kfarm__Reply *rp = get_jobs_t(&w3, "fake-3", 8, 0, NULL, 0, once);
        if (!rp || rp->status != KFARM__STATUS__OK) {
            if (rp) kfarm__reply__free_unpacked(rp, NULL);
            sleep_ms(200);
            continue;
        }
        for (size_t k = 0; k <= rp->n_more_jobs; k++) {
            Kfarm__Job *jb = k == 0 ? rp->job : rp->more_jobs[k - 1];
            if (!jb) continue;
            sj++;
            const ProtobufCBinaryData *src = &jb->source;
            if (jb->has_source_job) {
                byref++;
                src = NULL;
                wrong += !once || jb->source.len > 0; /* named without being asked, or bytes as well */
                for (size_t e = 0; e < k && !src; e++) {
                    Kfarm__Job *o = e == 0 ? rp->job : rp->more_jobs[e - 1];
                    if (o->job_id == jb->source_job && !o->has_source_job) src = &o->source;
                }
            } else {
                own++;
                for (size_t e = 0; e < k && once; e++) { /* an earlier job carried the same bytes */
                    Kfarm__Job *o = e == 0 ? rp->job : rp->more_jobs[e - 1];
                    wrong += !o->has_source_job && o->source.len == jb->source.len &&
                             memcmp(o->source.data, jb->source.data, jb->source.len) == 0;
                }
            }
            char cid[24];
            snprintf(cid, sizeof(cid), "%llu", (unsigned long long)jb->candidate_id);
            const char *pc[1] = { cid };
            PGresult *m = kf_db_exec(db, "SELECT source FROM candidates WHERE id = $1::bigint", 1, pc, err,
                                     sizeof(err));
            int same = m && PQntuples(m) == 1 && src && (size_t)PQgetlength(m, 0, 0) == src->len &&
                       memcmp(PQgetvalue(m, 0, 0), src->data, src->len) == 0;
            if (m) PQclear(m);
            wrong += !same;
        }
        kfarm__reply__free_unpacked(rp, NULL);
    }
    CHECK(sj >= 16 && byref > 0 && own > 0 && wrong == 0,
          "sources_once: each of %d jobs has its candidate's source, %d by an earlier job of its reply,"
          " %d of its own (%d wrong)", sj, byref, own, wrong);

end:
    kill(pid, SIGTERM);
    int status = 0, exited = 0;
    for (int i = 0; i < 50; i++) {
        if (waitpid(pid, &status, WNOHANG) == pid) {
            exited = 1;
            break;
        }
        sleep_ms(100);
    }
    if (!exited) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    CHECK(exited && WIFEXITED(status) && WEXITSTATUS(status) == 0, "SIGTERM -> clean exit 0");
    nn_close(sock);
    kf_db_close(db);
    if (g_fail) {
        fprintf(stderr, "coordinator log kept: %s\n", logpath);
    } else {
        char cmd[512];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "cleanup failed\n");
    }
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
