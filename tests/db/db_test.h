/*
 * db_test.h -- what the database tests (tests/db/test_*.c) share: the
 * CHECK harness (g_pass/g_fail, "N passed, M failed"), a fresh database from
 * tools/devdb, one-value queries, a fake worker's identity and calls over
 * the real wire library, and a queued campaign with results to store.
 * Header-only: each test is one program.
 */
#ifndef KF_DB_TEST_H
#define KF_DB_TEST_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "campaign.h"
#include "db.h"
#include "kf_wire.h"
#include "queue.h"

static int g_pass, g_fail;

#define CHECK(cond, ...)                                                          \
    do {                                                                          \
        if (cond) {                                                               \
            g_pass++;                                                             \
        } else {                                                                  \
            g_fail++;                                                             \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);       \
            fprintf(stderr, __VA_ARGS__);                                         \
            fputc('\n', stderr);                                                  \
        }                                                                         \
    } while (0)

/* $name when set and not empty, else dflt. */
static inline const char *env_or(const char *name, const char *dflt)
{
    const char *s = getenv(name);
    return s && *s ? s : dflt;
}

/* The source tree: $KFARM_SRC, else the one this test was built from. */
static inline const char *src_dir(void) { return env_or("KFARM_SRC", KFARM_SOURCE_DIR); }

/* Create a fresh database with tools/devdb; its conninfo in out, or NULL. */
static inline const char *fresh_db(const char *name, char *out, size_t cap)
{
    char cmd[4096];
    snprintf(cmd, sizeof(cmd), "'%s/tools/devdb' createdb %s 2>/dev/null", src_dir(), name);
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    if (!fgets(out, (int)cap, p)) out[0] = 0;
    int rc = pclose(p);
    out[strcspn(out, "\n")] = 0;
    return rc == 0 && out[0] ? out : NULL;
}

/* First column of the first row of a query as a number (-1 on error). */
static inline long long q1(kf_db *db, const char *sql)
{
    char err[512];
    PGresult *r = kf_db_exec(db, sql, 0, NULL, err, sizeof(err));
    if (!r) {
        fprintf(stderr, "query failed: %s: %s\n", sql, err);
        return -1;
    }
    long long v = PQntuples(r) ? kf_db_i64(r, 0, 0, -1) : -1;
    PQclear(r);
    return v;
}

/* A statement whose failure is only reported (the checks that follow say
 * what it broke). */
static inline void exec_ok(kf_db *db, const char *sql)
{
    char err[512];
    if (kf_db_cmd(db, sql, 0, NULL, err, sizeof(err)) < 0)
        fprintf(stderr, "statement failed: %s: %s\n", sql, err);
}

static inline void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* A fake worker `name` on REQ socket sock: its key derived from a fixed
 * secret, enrolled in worker_credentials (db NULL: not enrolled, an
 * intruder), and its wire client in *c. */
static inline void enroll(kf_db *db, int sock, const char *name, kf_wire_client *c)
{
    uint8_t secret[KF_WIRE_SECRET_LEN];
    char err[256], hex[2 * KF_WIRE_KEY_LEN + 1];
    memset(secret, 0x5a, sizeof(secret));
    secret[0] = (uint8_t)name[strlen(name) - 1];
    kf_wire_key k;
    kf_cred_derive(name, secret, sizeof(secret), &k, err, sizeof(err));
    kf_wire_hex(k.k, KF_WIRE_KEY_LEN, hex);
    const char *p[2] = { name, hex };
    if (db) kf_db_cmd(db, "INSERT INTO worker_credentials (name, mac_key) VALUES ($1, decode($2, 'hex'))",
                      2, p, err, sizeof(err));
    kf_wire_client_init(c, sock, name, &k);
}

/* One request/reply over the REQ socket (NULL on failure, said on stderr). */
static inline Kfarm__Reply *call(kf_wire_client *c, Kfarm__Request *req)
{
    Kfarm__Reply *rep = NULL;
    char err[512];
    if (kf_wire_call(c, req, &rep, err, sizeof(err)) < 0) {
        fprintf(stderr, "call failed: %s\n", err);
        return NULL;
    }
    return rep;
}

/* A tune campaign `name` of tests/tasks/farm_axpy_f32 on "cpu", not
 * started: its id into *cid. Returns 0, or -1 with reason in err. */
static inline int new_campaign(kf_db *db, const char *name, int64_t *cid, char *err, size_t errlen)
{
    char task[4096];
    snprintf(task, sizeof(task), "%s/tests/tasks/farm_axpy_f32", src_dir());
    kf_campaign_spec spec;
    memset(&spec, 0, sizeof(spec));
    spec.name = name;
    spec.task_dir = task;
    spec.strategy = "tune";
    spec.targets[0] = "cpu";
    spec.n_targets = 1;
    *cid = 0;
    return kf_campaign_create(db, &spec, cid, err, errlen) < 0 ? -1 : 0;
}

/* A running campaign `name` with m queued jobs on "cpu" (as loadgen sets
 * one up). Returns 0 or -1. */
static inline int make_queue(kf_db *db, const char *name, int m)
{
    char err[512], id[32], n[32];
    int64_t cid;
    if (new_campaign(db, name, &cid, err, sizeof(err)) < 0) {
        fprintf(stderr, "campaign: %s\n", err);
        return -1;
    }
    snprintf(id, sizeof(id), "%lld", (long long)cid);
    snprintf(n, sizeof(n), "%d", m);
    const char *p[2] = { id, n };
    if (kf_db_cmd(db,
            "INSERT INTO candidates (campaign_id, source, sha256, defines, parent_id, proposer) "
            "SELECT s.campaign_id, s.source, s.sha256, jsonb_build_object('T', g::text), s.id, 'human' "
            "FROM candidates s, generate_series(1, $2::int) g "
            "WHERE s.campaign_id = $1::bigint AND s.proposer = 'seed'", 2, p, err, sizeof(err)) < 0 ||
        kf_db_cmd(db,
            "INSERT INTO jobs (candidate_id, campaign_id, target, max_attempts, purpose) "
            "SELECT id, campaign_id, 'cpu', 3, 'eval' FROM candidates "
            "WHERE campaign_id = $1::bigint AND proposer = 'human' ORDER BY id", 1, p, err, sizeof(err)) < 0 ||
        kf_campaign_start(db, name, err, sizeof(err)) < 0) {
        fprintf(stderr, "queue: %s\n", err);
        return -1;
    }
    return 0;
}

static inline kf_result ok_result(double speedup)
{
    kf_result r = { .verdict = "ok", .detail = "passed", .metrics_json = "{\"cv\": 0.01}",
                    .compile_log = "", .candidate_us = 10, .baseline_us = 10 * speedup,
                    .speedup = speedup };
    return r;
}

static inline void item(kf_queue_item *it, const char *w, const kf_lease *l, const kf_result *r)
{
    memset(it, 0, sizeof(*it));
    it->worker_id = w;
    it->job_id = l->job_id;
    it->token = l->fencing_token;
    it->lease_token = l->lease_token;
    it->lease_token_len = KF_QUEUE_TOKEN_LEN;
    it->res = r;
}
#endif
