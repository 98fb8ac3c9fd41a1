/*
 * queue.c -- leasing, heartbeats, exactly-once results, the reaper.
 * See queue.h for the state machine and the guarantees.
 *
 * All values travel as text parameters; int64 ids are formatted with %lld.
 * Timestamps are the database's now(): coordinators and the CLI may run on
 * different hosts, the database clock is the one clock they share.
 */
#define _GNU_SOURCE /* asprintf */
#include "queue.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "kf_util.h"
#include "kf_verdict.h"
#include "kf_wire.h"
#include "log.h"
#include "noise.h"
#include "verify.h"

void kf_queue_config_default(kf_queue_config *cfg)
{
    cfg->lease_ms = 30000;
    cfg->quarantine_after = 5;
}

static void i64s(char buf[24], int64_t v) { snprintf(buf, 24, "%lld", (long long)v); }

/* A queued job j this worker ($1; $3: the lease in ms) may take. infra_error
 * is the worker's fault: retry elsewhere while another live, unquarantined
 * worker that has not failed this job serves the target (else here again,
 * until the attempts run out); a verification job avoids the worker it
 * verifies the same way. */
#define KF_QUEUE_TAKEABLE \
    "j.target = ANY($2::text[]) AND (j.not_before IS NULL OR j.not_before <= now())" \
    " AND NOT ((COALESCE(j.avoid_worker = $1, false) OR EXISTS (SELECT 1 FROM evaluations e" \
    "             WHERE e.job_id = j.id AND e.worker_id = $1 AND e.verdict = 'infra_error'" \
    "               AND e.reported))" \
    "      AND EXISTS (SELECT 1 FROM workers w WHERE w.id <> $1 AND NOT w.quarantined" \
    "                    AND j.target = ANY(w.classes)" \
    "                    AND w.last_seen > now() - $3::bigint * interval '1 millisecond'" \
    "                    AND NOT EXISTS (SELECT 1 FROM evaluations e2 WHERE e2.job_id = j.id" \
    "                      AND e2.worker_id = w.id AND e2.verdict = 'infra_error'" \
    "                      AND e2.reported)))"

/* The beat of each row of CTE `rows` (id, fencing_token, acked: current
 * leases whose holder just heartbeat them): alive until now + $5 ms
 * (schema 018); and, for a lease's first heartbeat only, its job's row
 * marked acknowledged (durable: it decides whether a lost lease is an
 * attempt, and must survive a crash that empties lease_beats). Two
 * ", name AS (...)" to append to a WITH list; data-modifying, so they run
 * whether or not the statement reads them. */
#define KF_QUEUE_BEAT(rows) \
    ", ack AS (UPDATE jobs SET acked = true FROM " rows " r WHERE jobs.id = r.id AND NOT r.acked" \
    "  AND jobs.fencing_token = r.fencing_token AND NOT jobs.acked)" \
    ", b AS (INSERT INTO lease_beats (job_id, fencing_token, deadline)" \
    "  SELECT id, fencing_token, now() + $5::bigint * interval '1 millisecond' FROM " rows \
    "  ON CONFLICT (job_id) DO UPDATE SET fencing_token = EXCLUDED.fencing_token," \
    "    deadline = EXCLUDED.deadline)"

kf_queue_status kf_queue_lease(kf_db *db, const kf_queue_config *cfg, const char *worker_id,
                               const char *const *classes, int n, kf_lease *out,
                               char *err, size_t errlen)
{
    int got = 0;
    return kf_queue_lease_many(db, cfg, worker_id, classes, n, 1, out, &got, err, errlen);
}

static int lease_cmp(const void *a, const void *b)
{
    const kf_lease *x = a, *y = b;
    if (x->verify != y->verify) return y->verify - x->verify;
    return (x->job_id > y->job_id) - (x->job_id < y->job_id);
}

void kf_queue_floors_init(kf_queue_floors *fl)
{
    memset(fl, 0, sizeof(*fl));
    fl->refresh_s = 2.0;
}

kf_queue_status kf_queue_lease_many(kf_db *db, const kf_queue_config *cfg, const char *worker_id,
                                    const char *const *classes, int n, int max, kf_lease *out,
                                    int *got, char *err, size_t errlen)
{
    return kf_queue_lease_floors(db, cfg, NULL, worker_id, classes, n, max, out, got, NULL, err, errlen);
}

/* The floors to use now, as two PostgreSQL array literals ({campaign ids},
 * {floors}); a floor older than refresh_s is not used (read from 0) and
 * restarts its clock. Returns how many floors are in use. */
static int floors_arrays(kf_queue_floors *fl, char *ids, char *vals, size_t cap)
{
    size_t il = 0, vl = 0;
    int used = 0;
    ids[il++] = '{';
    vals[vl++] = '{';
    double now = kf_util_now_s();
    for (int i = 0; fl && i < KF_QUEUE_FLOORS; i++) {
        if (!fl->f[i].campaign_id || fl->f[i].floor <= 0) continue;
        if (now - fl->f[i].set_at > fl->refresh_s) { /* a full read this time */
            fl->f[i].floor = 0;
            fl->f[i].set_at = now;
            continue;
        }
        if (il + 48 > cap || vl + 48 > cap) break;
        il += (size_t)snprintf(ids + il, cap - il, "%s%lld", used ? "," : "", (long long)fl->f[i].campaign_id);
        vl += (size_t)snprintf(vals + vl, cap - vl, "%s%lld", used ? "," : "", (long long)fl->f[i].floor);
        used++;
    }
    ids[il++] = '}';
    ids[il] = 0;
    vals[vl++] = '}';
    vals[vl] = 0;
    return used;
}

/* Raise campaign c's floor to id (a slot is taken for a new campaign; the
 * oldest is given up when all are taken). */
static void floor_raise(kf_queue_floors *fl, int64_t c, int64_t id)
{
    int slot = -1, oldest = 0;
    for (int i = 0; i < KF_QUEUE_FLOORS; i++) {
        if (fl->f[i].campaign_id == c) {
            slot = i;
            break;
        }
        if (slot < 0 && !fl->f[i].campaign_id) slot = i;
        if (fl->f[i].set_at < fl->f[oldest].set_at) oldest = i;
    }
    if (slot < 0) slot = oldest;
    if (fl->f[slot].campaign_id != c) {
        fl->f[slot].campaign_id = c;
        fl->f[slot].floor = 0;
        fl->f[slot].set_at = kf_util_now_s();
    }
    if (id > fl->f[slot].floor) fl->f[slot].floor = id;
}

kf_queue_status kf_queue_lease_floors(kf_db *db, const kf_queue_config *cfg, kf_queue_floors *fl,
                                      const char *worker_id, const char *const *classes, int n, int max,
                                      kf_lease *out, int *got, PGresult **payload, char *err, size_t errlen)
{
    *got = 0;
    if (payload) *payload = NULL;
    if (max < 1) max = 1;
    if (max > KF_QUEUE_MAX_LEASES) max = KF_QUEUE_MAX_LEASES;
    memset(out, 0, sizeof(*out) * (size_t)max);
    char *arr = kf_db_text_array(classes, n);
    char lease[24];
    i64s(lease, cfg->lease_ms);
    if (!arr) {
        snprintf(err, errlen, "out of memory");
        return KF_Q_ERROR;
    }
    /* Seen: record the worker (creating a minimal row if it never
     * registered, e.g. after the database was rebuilt). */
    const char *p1[2] = { worker_id, arr };
    /* No write per request: last_seen is refreshed at most every 2 s (the
     * liveness window is >= 15 s) or when the classes change. The row is
     * read first and the INSERT runs only when it must: an ON CONFLICT DO
     * UPDATE whose WHERE is false still locks the row (a heap write, a WAL
     * record, a transaction id and a commit per GetJob). */
    PGresult *w = kf_db_exec(db,
        "WITH cur AS (SELECT quarantined, classes, COALESCE(quarantine_reason, 'repeated infra_error') AS why,"
        "    last_seen >= now() - interval '2 seconds' AND NOT (cardinality($2::text[]) > 0"
        "      AND classes IS DISTINCT FROM $2::text[]) AS fresh FROM workers WHERE id = $1),"
        " ins AS (INSERT INTO workers (id, classes) SELECT $1, $2::text[]"
        "  WHERE NOT EXISTS (SELECT 1 FROM cur WHERE cur.fresh)"
        "  ON CONFLICT (id) DO UPDATE SET last_seen = now(), "
        "    classes = CASE WHEN cardinality($2::text[]) > 0 THEN $2::text[] ELSE workers.classes END "
        "  WHERE workers.last_seen < now() - interval '2 seconds' OR "
        "    (cardinality($2::text[]) > 0 AND workers.classes IS DISTINCT FROM $2::text[]) "
        "  RETURNING quarantined, classes, COALESCE(quarantine_reason, 'repeated infra_error')) "
        "SELECT * FROM ins UNION ALL "
        "SELECT quarantined, classes, why FROM cur WHERE NOT EXISTS (SELECT 1 FROM ins)",
        2, p1, err, errlen);
    if (w && PQntuples(w) != 1) {
        PQclear(w);
        snprintf(err, errlen, "worker %s: no row after upsert", worker_id);
        w = NULL;
    }
    if (!w) {
        free(arr);
        return KF_Q_ERROR;
    }
    int quarantined = strcmp(PQgetvalue(w, 0, 0), "t") == 0;
    char qreason[384];
    snprintf(qreason, sizeof(qreason), "%s", PQgetvalue(w, 0, 2));
    char *use = strdup(PQgetvalue(w, 0, 1));
    PQclear(w);
    free(arr);
    if (!use) {
        snprintf(err, errlen, "out of memory");
        return KF_Q_ERROR;
    }
    if (quarantined) {
        free(use);
        snprintf(err, errlen, "worker %s is quarantined: %s (lift with: kfarm worker release %s)",
                 worker_id, qreason, worker_id);
        return KF_Q_NO_JOB;
    }
    /* one random lease token per job that may be leased: {hex,hex,...},
     * drawn in one call (each RAND_bytes call costs OpenSSL's fork check,
     * a getpid(2): one system call per leased job) */
    char toks[KF_QUEUE_MAX_LEASES * (2 * KF_QUEUE_TOKEN_LEN + 1) + 2];
    uint8_t t[KF_QUEUE_MAX_LEASES * KF_QUEUE_TOKEN_LEN];
    size_t tl = 0;
    if (RAND_bytes(t, max * KF_QUEUE_TOKEN_LEN) != 1) {
        free(use);
        snprintf(err, errlen, "RAND_bytes failed");
        return KF_Q_ERROR;
    }
    toks[tl++] = '{';
    for (int i = 0; i < max; i++) {
        if (i) toks[tl++] = ',';
        kf_wire_hex(t + (size_t)i * KF_QUEUE_TOKEN_LEN, KF_QUEUE_TOKEN_LEN, toks + tl);
        tl += 2 * KF_QUEUE_TOKEN_LEN;
    }
    OPENSSL_cleanse(t, sizeof(t));
    toks[tl++] = '}';
    toks[tl] = 0;
    const char *p[7] = { worker_id, use, lease, toks, NULL, NULL, NULL };
    /* Fair share: running campaigns are tried in order of their leased jobs
     * per unit of share (fewest first), and within a campaign verification
     * jobs first, then the oldest job (jobs_queued_verify, jobs_queued_next,
     * from the caller's floor: kf_queue_floors); the
     * LATERAL probe stops at the first campaign with a job this worker may
     * take, so a huge queue is never sorted. The leased jobs are counted
     * only when more than one campaign runs (counting costs a scan of every
     * lease in the fleet: 0.45 ms of a 0.6 ms lease at 1,000 workers). */
    /* The limit is written into the statement, rounded up to a power of two
     * (at most seven prepared statements, whatever workers ask), and the
     * exact count is a parameter filtering the picked rows: as a parameter,
     * the limit left the cached generic plan blind, PostgreSQL judged it
     * dearer than a custom plan and planned this statement anew on every
     * lease. Rows picked beyond max are locked for this statement only. */
    int bucket = 1;
    while (bucket < max) bucket *= 2;
    /* Several jobs: the worker takes at most half of the jobs it can see
     * (at least one), so that a short queue -- the last jobs of a campaign,
     * an LLM round of four candidates -- is shared by the idle workers
     * instead of going whole to the first that asks for a batch (a worker
     * batching ~4 s of evaluation would hold the round while another GPU
     * waits). The statement locks up to `bucket` jobs and counts, without
     * locking, up to as many queued after the last of them in its campaign
     * (depth): a deep queue gives all it locked, and jobs are locked and
     * left behind only in a short one. (Locking twice the rows instead left
     * half of every lease's locked jobs to be stepped over by the leases
     * running beside it.) */
    char depth[640];
    if (max > 1)
        snprintf(depth, sizeof(depth),
                 ", depth AS (SELECT (SELECT count(*) FROM pick) + (SELECT count(*) FROM"
                 "  (SELECT 1 FROM jobs q WHERE q.state = 'queued' AND q.purpose <> 'verify'"
                 "     AND q.campaign_id = (SELECT p.cid FROM pick p ORDER BY p.id DESC LIMIT 1)"
                 "     AND q.id > (SELECT max(p.id) FROM pick p) ORDER BY q.id LIMIT %d) a) AS n) ",
                 bucket);
    else
        snprintf(depth, sizeof(depth), ", depth AS (SELECT 1 AS n) ");
    char mx[24];
    i64s(mx, max);
    p[4] = mx;
    /* The queue is read per campaign in two parts: its verification jobs
     * (few; partial index jobs_queued_verify), then the others from the
     * caller's floor for that campaign on (jobs_queued_next: campaign, id),
     * so a lease no longer steps over every job leased since the last
     * VACUUM (kf_queue_floors). Each part is a sub-SELECT of its own with
     * FOR UPDATE SKIP LOCKED (a locking clause may not sit on a UNION). */
    char *sql = NULL;
    if (asprintf(&sql,
        /* MATERIALIZED: pick runs once; an inlined pick (one reference when
         * max == 1) that the plan ran again would lock the next job */
        "WITH pick AS MATERIALIZED (SELECT x.id, x.cid, x.tid, x.sha, pk.source, pk.defines::text AS defines,"
        "  row_number() OVER () AS rn FROM"
        "  (SELECT c.id AS cid, c.task_id AS tid, t.sha256 AS sha, COALESCE(f.floor, 0) AS floor"
        "   FROM campaigns c JOIN tasks t ON t.id = c.task_id"
        "   LEFT JOIN unnest($6::bigint[], $7::bigint[]) AS f(cid, floor) ON f.cid = c.id"
        "   WHERE c.state = 'running'"
        "   ORDER BY CASE WHEN (SELECT count(*) FROM campaigns r WHERE r.state = 'running') > 1"
        "            THEN (SELECT count(*) FROM jobs l WHERE l.campaign_id = c.id"
        "                  AND l.state = 'leased') / c.share END, c.id) k"
        "  CROSS JOIN LATERAL"
        "  (SELECT v.id, v.cand, k.cid, k.tid, k.sha FROM (SELECT j.id, j.candidate_id AS cand FROM jobs j"
        "     WHERE j.campaign_id = k.cid AND j.state = 'queued'"
        "     AND j.purpose = 'verify' AND " KF_QUEUE_TAKEABLE
        "     ORDER BY j.id LIMIT %d FOR UPDATE OF j SKIP LOCKED) v"
        "   UNION ALL"
        "   SELECT e.id, e.cand, k.cid, k.tid, k.sha FROM (SELECT j.id, j.candidate_id AS cand FROM jobs j"
        "     WHERE j.campaign_id = k.cid AND j.state = 'queued'"
        "     AND j.purpose <> 'verify' AND j.id >= k.floor AND " KF_QUEUE_TAKEABLE
        "     ORDER BY j.id LIMIT %d FOR UPDATE OF j SKIP LOCKED) e"
        "   LIMIT %d) x"
        "  JOIN candidates pk ON pk.id = x.cand"
        "  LIMIT %d)%s"
        "UPDATE jobs SET state = 'leased', fencing_token = nextval('fencing_seq'),"
        "  lease_token = decode(($4::text[])[pick.rn], 'hex'), acked = false,"
        "  attempts = jobs.attempts + 1, worker_id = $1, leased_at = now(),"
        "  lease_deadline = now() + $3::bigint * interval '1 millisecond' "
        "FROM pick, depth WHERE jobs.id = pick.id AND pick.rn <= LEAST($5::int, GREATEST(1, (depth.n + 1) / 2)) "
        /* the payload (KF_QUEUE_PL_*): one statement per lease instead of
         * two (the second read 72 us of statement time per job at 5,000
         * jobs/s, docs/benchmarks.md). The candidate's source and defines
         * come with the picked row (one probe of its primary key; two
         * sub-selects per returned row read it twice, and joined in the
         * UPDATE's FROM it cost ~1 ms more per lease of 16), the task's id
         * and hash with the campaign it was picked from (once per lease:
         * docs/benchmarks.md, 2026-12-07 morning). */
        "RETURNING jobs.id, jobs.fencing_token, jobs.candidate_id, jobs.campaign_id, COALESCE(jobs.seed, jobs.id),"
        "  jobs.attempts, jobs.target, jobs.purpose = 'verify', jobs.lease_token,"
        "  pick.source, pick.defines,"
        "  pick.tid, pick.sha",
        bucket, bucket, bucket, bucket, depth) < 0) {
        free(use);
        snprintf(err, errlen, "out of memory");
        return KF_Q_ERROR;
    }
    char fids[KF_QUEUE_FLOORS * 24 + 4], fvals[KF_QUEUE_FLOORS * 24 + 4];
    int nfl = floors_arrays(fl, fids, fvals, sizeof(fids));
    p[5] = fids;
    p[6] = fvals;
    PGresult *r = kf_db_exec(db, sql, 7, p, err, errlen);
    if (r && PQntuples(r) == 0 && nfl > 0) {
        /* nothing above the floors: read from the heads before saying NO_JOB */
        PQclear(r);
        for (int i = 0; i < KF_QUEUE_FLOORS; i++) fl->f[i].floor = 0;
        floors_arrays(fl, fids, fvals, sizeof(fids));
        r = kf_db_exec(db, sql, 7, p, err, errlen);
    }

    free(sql);
    OPENSSL_cleanse(toks, sizeof(toks));
    free(use);
    if (!r) return KF_Q_ERROR;
    int nr = PQntuples(r);
    if (nr == 0) {
        PQclear(r);
        snprintf(err, errlen, "no job");
        return KF_Q_NO_JOB;
    }
    for (int i = 0; i < nr && i < max; i++) {
        kf_lease *o = &out[i];
        o->job_id = kf_db_i64(r, i, 0, 0);
        o->fencing_token = kf_db_i64(r, i, 1, 0);
        o->candidate_id = kf_db_i64(r, i, 2, 0);
        o->campaign_id = kf_db_i64(r, i, 3, 0);
        o->seed = kf_db_i64(r, i, 4, 0);
        o->attempt = (int)kf_db_i64(r, i, 5, 0);
        o->verify = strcmp(PQgetvalue(r, i, 7), "t") == 0;
        snprintf(o->target, sizeof(o->target), "%s", PQgetvalue(r, i, 6));
        const char *lt = PQgetvalue(r, i, 8);
        if (strncmp(lt, "\\x", 2) != 0 || kf_wire_unhex(lt + 2, o->lease_token, KF_QUEUE_TOKEN_LEN) < 0) {
            PQclear(r);
            snprintf(err, errlen, "lease token of job %lld unreadable", (long long)o->job_id);
            return KF_Q_ERROR; /* the leases expire unacknowledged: no attempt counted */
        }
        *got = i + 1;
        if (fl && !o->verify) floor_raise(fl, o->campaign_id, o->job_id);
    }
    if (payload) *payload = r;
    else PQclear(r);
    /* verification jobs first, then the oldest (RETURNING has no order) */
    qsort(out, (size_t)*got, sizeof(*out), lease_cmp);
    return KF_Q_OK;
}

/* Does the stored lease token (bytea as returned in text form "\x..") match
 * token? Constant time in the token. */
static int token_matches(const char *stored_text, const uint8_t *token, size_t len)
{
    uint8_t stored[KF_QUEUE_TOKEN_LEN];
    if (!token || len != KF_QUEUE_TOKEN_LEN || !stored_text || strncmp(stored_text, "\\x", 2) != 0 ||
        kf_wire_unhex(stored_text + 2, stored, sizeof(stored)) < 0)
        return 0;
    return CRYPTO_memcmp(stored, token, KF_QUEUE_TOKEN_LEN) == 0;
}

kf_queue_status kf_queue_heartbeat(kf_db *db, const kf_queue_config *cfg, const char *worker_id,
                                   int64_t job_id, int64_t token, const uint8_t *lease_token,
                                   size_t lease_token_len, char *err, size_t errlen)
{
    char job[24], tok[24], lease[24], tokhex[2 * KF_QUEUE_TOKEN_LEN + 1];
    i64s(job, job_id);
    i64s(tok, token);
    i64s(lease, cfg->lease_ms);
    if (!lease_token || lease_token_len != KF_QUEUE_TOKEN_LEN) {
        snprintf(err, errlen, "job %lld: wrong lease token", (long long)job_id);
        return KF_Q_REJECTED;
    }
    kf_wire_hex(lease_token, KF_QUEUE_TOKEN_LEN, tokhex);
    /* One statement in the common case: extend the lease when it is current,
     * this worker's and its token matches, and refresh the worker's
     * last_seen at most every 2 s. The extension is written to lease_beats
     * (schema 018: unlogged, a HOT update), not to the job's row, which only
     * a lease's first heartbeat writes (acked, KF_QUEUE_BEAT). A heartbeat
     * does not lock the row: one that arrives while the reaper is taking
     * the lease (both deadlines already passed) is answered OK, and the
     * worker learns at its next heartbeat or result (STALE), as if the
     * heartbeat had come a moment later. The token is compared through
     * SHA-256 of both sides: a comparison that stops at the first differing
     * byte then tells a guesser nothing about the token's bytes. The state
     * test is written "IS TRUE" so that no plan reaches the row through the
     * partial index jobs_leased (its predicate would match "state =
     * 'leased'"): a cached generic plan did, and then scanned every lease of
     * the fleet per heartbeat (0.5 ms at 1,000 workers) instead of one
     * primary-key probe. */
    const char *p[5] = { job, tok, worker_id, tokhex, lease };
    PGresult *r = kf_db_exec(db,
        "WITH w AS (UPDATE workers SET last_seen = now() WHERE id = $3"
        "           AND last_seen < now() - interval '2 seconds' RETURNING 1),"
        " j AS (SELECT id, fencing_token, acked FROM jobs"
        "  WHERE id = $1::bigint AND fencing_token = $2::bigint AND (state = 'leased') IS TRUE AND worker_id = $3"
        "   AND sha256(lease_token) = sha256(decode($4, 'hex')))"
        " " KF_QUEUE_BEAT("j")
        " SELECT (SELECT count(*) FROM w) FROM j",
        5, p, err, errlen);
    if (!r) return KF_Q_ERROR;
    int ok = PQntuples(r) == 1;
    PQclear(r);
    if (ok) return KF_Q_OK;
    /* refused: say why (not current, another worker's, wrong token) */
    const char *pq[3] = { job, tok, worker_id };
    r = kf_db_exec(db, "SELECT worker_id = $3 FROM jobs WHERE id = $1::bigint AND fencing_token = $2::bigint"
                       " AND state = 'leased'", 3, pq, err, errlen);
    if (!r) return KF_Q_ERROR;
    int current = PQntuples(r) == 1;
    int mine = current && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    PQclear(r);
    if (!current)
        snprintf(err, errlen, "lease of job %lld with token %lld is not current", (long long)job_id,
                 (long long)token);
    else
        snprintf(err, errlen, "job %lld: %s", (long long)job_id,
                 !mine ? "leased to another worker" : "wrong lease token");
    return current ? KF_Q_REJECTED : KF_Q_STALE;
}

int kf_queue_heartbeat_many(kf_db *db, const kf_queue_config *cfg, const char *worker_id,
                            kf_queue_hb *hb, int n, char *err, size_t errlen)
{
    /* {job,...}, {token,...}, {hex,...}: a lease token of the wrong size
     * becomes an empty string, which matches no stored token */
    size_t cap = (size_t)n * (2 * KF_QUEUE_TOKEN_LEN + 48) + 8;
    char *jobs = malloc(cap), *toks = malloc(cap), *lts = malloc(cap);
    int extended = -1;
    if (!jobs || !toks || !lts) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    size_t jl = 0, tl = 0, ll = 0;
    jobs[jl++] = toks[tl++] = lts[ll++] = '{';
    for (int i = 0; i < n; i++) {
        hb[i].alive = 0;
        jl += (size_t)snprintf(jobs + jl, cap - jl, "%s%lld", i ? "," : "", (long long)hb[i].job_id);
        tl += (size_t)snprintf(toks + tl, cap - tl, "%s%lld", i ? "," : "", (long long)hb[i].token);
        if (i) lts[ll++] = ',';
        lts[ll++] = '"';
        if (hb[i].lease_token && hb[i].lease_token_len == KF_QUEUE_TOKEN_LEN) {
            kf_wire_hex(hb[i].lease_token, KF_QUEUE_TOKEN_LEN, lts + ll);
            ll += 2 * KF_QUEUE_TOKEN_LEN;
        }
        lts[ll++] = '"';
    }
    snprintf(jobs + jl, cap - jl, "}");
    snprintf(toks + tl, cap - tl, "}");
    snprintf(lts + ll, cap - ll, "}");
    char lease[24];
    i64s(lease, cfg->lease_ms);
    const char *p[5] = { worker_id, jobs, toks, lts, lease };
    /* the statement of kf_queue_heartbeat, over the list (see there for the
     * beats, the token comparison and the "IS TRUE"); a job named twice is
     * written once (an upsert may not touch a row twice) */
    PGresult *r = kf_db_exec(db,
        "WITH w AS (UPDATE workers SET last_seen = now() WHERE id = $1"
        "           AND last_seen < now() - interval '2 seconds' RETURNING 1),"
        " j AS (SELECT DISTINCT ON (jobs.id) jobs.id, jobs.fencing_token, jobs.acked, q.i FROM jobs"
        "  JOIN unnest($2::bigint[], $3::bigint[], $4::text[]) WITH ORDINALITY AS q(job, tok, lt, i)"
        "   ON jobs.id = q.job AND jobs.fencing_token = q.tok AND (jobs.state = 'leased') IS TRUE"
        "   AND jobs.worker_id = $1 AND sha256(jobs.lease_token) = sha256(decode(q.lt, 'hex'))"
        "  ORDER BY jobs.id, q.i)"
        " " KF_QUEUE_BEAT("j")
        " SELECT i, (SELECT count(*) FROM w) FROM j", 5, p, err, errlen);
    if (!r) goto out;
    extended = 0;
    for (int k = 0; k < PQntuples(r); k++) {
        int64_t i = kf_db_i64(r, k, 0, 0) - 1;
        if (i >= 0 && i < n && !hb[i].alive) {
            hb[i].alive = 1;
            extended++;
        }
    }
    /* a lease named twice, identically, is extended once: both alive */
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n && !hb[i].alive; k++)
            if (hb[k].alive && hb[k].job_id == hb[i].job_id && hb[k].token == hb[i].token &&
                hb[i].lease_token && hb[i].lease_token_len == KF_QUEUE_TOKEN_LEN &&
                CRYPTO_memcmp(hb[k].lease_token, hb[i].lease_token, KF_QUEUE_TOKEN_LEN) == 0) {
                hb[i].alive = 1;
                extended++;
            }
    PQclear(r);
out:
    free(jobs);
    free(toks);
    free(lts);
    return extended;
}

/* A double as a text parameter, or NULL when "not measured". */
static const char *num_param(char buf[32], double v)
{
    if (!isfinite(v) || v <= 0) return NULL;
    snprintf(buf, 32, "%.17g", v);
    return buf;
}

/* Copy of s with invalid UTF-8 replaced (NULL stays NULL). */
static char *clean_text(const char *s, size_t cap)
{
    if (!s) return NULL;
    size_t n = strlen(s);
    if (n > cap) n = cap;
    char *c = malloc(n + 1);
    if (!c) return NULL;
    memcpy(c, s, n);
    c[n] = 0;
    return kf_db_utf8_sanitize(c);
}

/* Whether every number outside the strings of JSON text s is one that
 * PostgreSQL's jsonb takes: at most 64 characters and a decimal exponent of
 * at most 300 either way. jsonb reads numbers as numeric, which refuses more
 * than 16,383 digits after the point ("value overflows numeric format"),
 * while jansson reads them as doubles and takes 1e-16384 (as 0) or 0.000...1
 * with 17,000 zeros. A number jansson prints (%.17g) is at most 24 characters
 * with an exponent within +-324, so an honest worker's metrics always fit. */
static int json_numbers_fit(const char *s)
{
    for (const char *c = s; *c; c++) {
        if (*c == '"') { /* skip a string, escapes included */
            for (c++; *c && *c != '"'; c++)
                if (*c == '\\' && c[1]) c++;
            if (!*c) return 1; /* unterminated: jansson refused it already */
            continue;
        }
        if (*c != '-' && (*c < '0' || *c > '9')) continue;
        const char *b = c;
        long ex = 0;
        while (*c == '-' || *c == '+' || *c == '.' || (*c >= '0' && *c <= '9')) c++;
        if (*c == 'e' || *c == 'E') {
            c++;
            int neg = *c == '-';
            if (*c == '-' || *c == '+') c++;
            for (; *c >= '0' && *c <= '9'; c++)
                if (ex < 100000) ex = ex * 10 + (*c - '0');
            if (neg) ex = -ex;
        }
        if (c - b > 64 || ex > 300 || ex < -300) return 0;
        c--;
    }
    return 1;
}

/* A result's metrics, parsed once for both result paths: the text as the
 * worker sent it (s itself) when it parses as a JSON object (jansson: valid
 * UTF-8, no NUL), with the object in *obj (the caller json_decref's it);
 * NULL and *obj NULL if absent or not one. Stored as sent, not printed
 * again: jansson's "%.17g" turned a sent 0.05 into 0.050000000000000003.
 * Only an object with a number jsonb would refuse (json_numbers_fit) is
 * stored as jansson prints it, in *owned (the caller frees it): a result
 * PostgreSQL cannot store would fail its whole group, then itself. */
static const char *metrics_object(const char *s, json_t **obj, char **owned)
{
    *owned = NULL;
    *obj = s && *s ? json_loads(s, 0, NULL) : NULL;
    if (json_is_object(*obj)) {
        if (json_numbers_fit(s)) return s;
        *owned = json_dumps(*obj, JSON_COMPACT | JSON_REAL_PRECISION(17));
        return *owned;
    }
    json_decref(*obj);
    *obj = NULL;
    return NULL;
}

/* Whether a result's metrics (metrics_object's) blame the task itself (the
 * judge proved the task's own reference or baseline failed): not the
 * worker's fault. */
static int blames_task(const json_t *metrics)
{
    const char *b = json_string_value(json_object_get(metrics, "blame"));
    return b && !strcmp(b, "task");
}

kf_queue_status kf_queue_result(kf_db *db, const kf_queue_config *cfg, const char *worker_id,
                                int64_t job_id, int64_t token, const uint8_t *lease_token,
                                size_t lease_token_len, const kf_result *res,
                                int *requeued, char *err, size_t errlen)
{
    if (requeued) *requeued = 0;
    int v = kf_verdict_parse(res->verdict);
    if (v < 0) {
        snprintf(err, errlen, "unknown verdict '%.40s'", res->verdict ? res->verdict : "");
        return KF_Q_REJECTED;
    }
    char job[24], tok[24];
    i64s(job, job_id);
    i64s(tok, token);
    kf_queue_status st = KF_Q_ERROR;
    char *detail = clean_text(res->detail, 4096);
    char *log = clean_text(res->compile_log, 1u << 20);
    json_t *mobj;
    char *mown;
    const char *metrics = metrics_object(res->metrics_json, &mobj, &mown);

    if (kf_db_begin(db, err, errlen) < 0) goto out;
    /* a result is durable before it is acknowledged, whatever the session's
     * default (the coordinator's serving connections commit their
     * bookkeeping asynchronously: message counters, lease extensions) */
    if (kf_db_cmd(db, "SET LOCAL synchronous_commit = on", 0, NULL, err, errlen) < 0) {
        kf_db_rollback(db);
        goto out;
    }
    const char *pj[1] = { job };
    PGresult *r = kf_db_exec(db,
        "SELECT state, fencing_token, attempts, max_attempts, candidate_id, worker_id,"
        " lease_token, purpose, verifies, campaign_id, target "
        "FROM jobs WHERE id = $1::bigint FOR UPDATE", 1, pj, err, errlen);
    if (!r) goto fail;
    if (PQntuples(r) == 0) {
        PQclear(r);
        snprintf(err, errlen, "no job %lld", (long long)job_id);
        st = KF_Q_REJECTED;
        goto fail;
    }
    char state[16], cand[24];
    snprintf(state, sizeof(state), "%s", PQgetvalue(r, 0, 0));
    int64_t cur = kf_db_i64(r, 0, 1, 0);
    int attempts = (int)kf_db_i64(r, 0, 2, 0);
    int max_attempts = (int)kf_db_i64(r, 0, 3, 0);
    snprintf(cand, sizeof(cand), "%s", PQgetvalue(r, 0, 4));
    int holder = !PQgetisnull(r, 0, 5) && strcmp(PQgetvalue(r, 0, 5), worker_id) == 0;
    int token_ok = token_matches(PQgetvalue(r, 0, 6), lease_token, lease_token_len);
    int is_verify = strcmp(PQgetvalue(r, 0, 7), "verify") == 0;
    char verifies[24], campaign[24], target[160];
    snprintf(verifies, sizeof(verifies), "%s", PQgetvalue(r, 0, 8));
    snprintf(campaign, sizeof(campaign), "%s", PQgetvalue(r, 0, 9));
    snprintf(target, sizeof(target), "%s", PQgetvalue(r, 0, 10));
    PQclear(r);

    const char *pe[2] = { job, tok };
    /* the final one by evaluations_one_final, the others by
     * evaluations_job_token (schema 016: it holds the non-final ones) */
    r = kf_db_exec(db, "SELECT reported, worker_id FROM evaluations WHERE job_id = $1::bigint "
                       "AND fencing_token = $2::bigint AND is_final UNION ALL "
                       "SELECT reported, worker_id FROM evaluations WHERE job_id = $1::bigint "
                       "AND fencing_token = $2::bigint AND NOT is_final", 2, pe, err, errlen);
    if (!r) goto fail;
    if (PQntuples(r) > 0) {
        int reported = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
        int own = !PQgetisnull(r, 0, 1) && strcmp(PQgetvalue(r, 0, 1), worker_id) == 0;
        PQclear(r);
        if (!own) {
            snprintf(err, errlen, "lease %lld of job %lld belonged to another worker",
                     (long long)token, (long long)job_id);
            st = KF_Q_REJECTED;
        } else if (reported) {
            snprintf(err, errlen, "result for job %lld token %lld already stored",
                     (long long)job_id, (long long)token);
            st = KF_Q_DUPLICATE;
        } else {
            snprintf(err, errlen, "lease of job %lld token %lld expired before the result",
                     (long long)job_id, (long long)token);
            st = KF_Q_STALE;
        }
        goto fail;
    }
    PQclear(r);
    if (cur != token || strcmp(state, "leased") != 0) {
        snprintf(err, errlen, "token %lld of job %lld is not current (job %s, token %lld)",
                 (long long)token, (long long)job_id, state, (long long)cur);
        st = KF_Q_STALE;
        goto fail;
    }
    if (!holder || !token_ok) {
        snprintf(err, errlen, "job %lld: %s", (long long)job_id,
                 !holder ? "leased to another worker" : "wrong lease token");
        st = KF_Q_REJECTED;
        goto fail;
    }

    /* infra_error blamed on the task (its reference failed or was too slow
     * here) is retried elsewhere but never counts against this worker */
    int task_fault = v == KF_INFRA_ERROR && blames_task(mobj);
    int infra = v == KF_INFRA_ERROR && !task_fault;
    int retry = v == KF_INFRA_ERROR && (task_fault || attempts < max_attempts);
    char att[24], b1[32], b2[32], b3[32], b4[32], b5[32], b6[32];
    i64s(att, attempts);
    /* the noise of an ok result: CV and speedup interval (noise.h) */
    double cv = 0, lo = 0, hi = 0;
    int has_noise = v == KF_OK && kf_noise_of_metrics_obj(mobj, res->speedup, &cv, &lo, &hi) == 0;
    const char *pi[19] = {
        job, cand, att, worker_id, tok, kf_verdict_name((kf_verdict)v), detail, metrics,
        num_param(b1, res->candidate_us), num_param(b2, res->baseline_us),
        num_param(b3, res->speedup), log, retry ? "false" : "true",
        has_noise && isfinite(cv) ? (snprintf(b4, sizeof(b4), "%.17g", cv), b4) : NULL,
        has_noise ? num_param(b5, lo) : NULL, has_noise ? num_param(b6, hi) : NULL,
        campaign, target, is_verify ? "verify" : "eval",
    };
    /* the evaluation, and its count in campaign_counts (schema 006) */
    if (kf_db_cmd(db,
            "WITH ins AS (INSERT INTO evaluations (job_id, candidate_id, attempt, worker_id, fencing_token,"
            "  verdict, detail, metrics, candidate_us, baseline_us, speedup, compile_log, is_final,"
            "  cv, speedup_lo, speedup_hi, job_campaign_id, job_target, job_purpose)"
            " VALUES ($1::bigint, $2::bigint, $3::int, $4, $5::bigint, $6, $7, $8::jsonb,"
            "  $9::float8, $10::float8, $11::float8, $12, $13::boolean, $14::float8, $15::float8,"
            "  $16::float8, $17::bigint, $18, $19) RETURNING verdict, is_final)"
            " INSERT INTO campaign_counts (campaign_id, what, target, purpose, verdict, is_final, n)"
            " SELECT $17::bigint, 'evaluation', $18, $19, verdict, is_final, 1 FROM ins",
            19, pi, err, errlen) < 0)
        goto fail;
    if (!retry && is_verify && kf_verify_conclude(db, cfg, verifies, job, err, errlen) < 0) goto fail;
    if (!retry && (is_verify || (v == KF_OK && res->speedup > 0)) &&
        kf_verify_consider(db, campaign, target, is_verify ? 0 : res->speedup, err, errlen) < 0)
        goto fail;
    /* the lease ends: its job leaves 'leased', its beat (schema 018) goes */
#define UNBEAT_JOB "WITH bt AS (DELETE FROM lease_beats WHERE job_id = $1::bigint) "
    if (kf_db_cmd(db, task_fault
            /* the task's fault: the attempt is not the job's either */
            ? UNBEAT_JOB "UPDATE jobs SET state = 'queued', lease_deadline = NULL,"
              "  attempts = GREATEST(attempts - 1, 0) WHERE id = $1::bigint"
            : retry
            ? UNBEAT_JOB "UPDATE jobs SET state = 'queued', lease_deadline = NULL WHERE id = $1::bigint"
            : UNBEAT_JOB "UPDATE jobs SET state = 'done', lease_deadline = NULL, finished_at = now() "
              "WHERE id = $1::bigint", 1, pj, err, errlen) < 0)
        goto fail;
#undef UNBEAT_JOB
    /* A task fault pauses the campaign with the reason (every worker would
     * fail the same way; quarantining them would stop every campaign). */
    char paused[256] = "";
    if (task_fault) {
        char why[700];
        snprintf(why, sizeof(why), "task fault on worker %.100s: %.560s", worker_id,
                 detail ? detail : "the task's reference or baseline failed");
        const char *pp[2] = { job, why };
        r = kf_db_exec(db,
            "UPDATE campaigns SET state = 'paused', pause_reason = $2, updated_at = now() "
            "WHERE id = (SELECT campaign_id FROM jobs WHERE id = $1::bigint) AND state = 'running' "
            "RETURNING name", 2, pp, err, errlen);
        if (!r) goto fail;
        if (PQntuples(r) == 1) snprintf(paused, sizeof(paused), "%s", PQgetvalue(r, 0, 0));
        PQclear(r);
    }
    /* Worker health: consecutive infra_errors quarantine it (with the reason). */
    char qa[24];
    i64s(qa, cfg->quarantine_after);
    const char *pw[3] = { worker_id, qa, detail ? detail : "" };
    r = kf_db_exec(db, infra
        ? "UPDATE workers SET last_seen = now(), infra_errors = infra_errors + 1,"
          "  quarantine_reason = CASE WHEN NOT quarantined AND infra_errors + 1 >= $2::int THEN"
          "    format('%s consecutive infra_error results, the last: %s', infra_errors + 1,"
          "           left($3, 300)) ELSE quarantine_reason END,"
          "  quarantined = quarantined OR infra_errors + 1 >= $2::int "
          "WHERE id = $1 RETURNING quarantined, infra_errors"
        : "UPDATE workers SET last_seen = now(), infra_errors = 0, jobs_done = jobs_done + 1 "
          "WHERE id = $1 AND $2::int IS NOT NULL AND $3::text IS NOT NULL "
          "RETURNING quarantined, infra_errors",
        3, pw, err, errlen);
    if (!r) goto fail;
    int newly_quarantined = infra && PQntuples(r) == 1 &&
        strcmp(PQgetvalue(r, 0, 0), "t") == 0 &&
        kf_db_i64(r, 0, 1, 0) == cfg->quarantine_after;
    PQclear(r);
    if (kf_db_commit(db, err, errlen) < 0) goto fail;
    st = KF_Q_OK;
    if (requeued) *requeued = retry;
    if (newly_quarantined)
        kf_log("worker %s quarantined after %d consecutive infra_error results (last: %s)",
               worker_id, cfg->quarantine_after, detail ? detail : "-");
    if (paused[0])
        kf_log("campaign %s paused: the task failed on worker %s (%s); no worker blamed",
               paused, worker_id, detail ? detail : "-");
    goto out;

fail:
    kf_db_rollback(db);
out:
    free(detail);
    free(log);
    free(mown);
    json_decref(mobj);
    return st;
}

/* ---- group commit (queue.h: kf_queue_result_group) ---- */

/* What the group learned about one item. */
typedef struct {
    int v;              /* the parsed verdict */
    int decided;        /* st is final: answered without storing */
    int defer;          /* stored after the group, on its own (kf_queue_result) */
    int accept;         /* stored by the group's statements */
    int64_t campaign;   /* accepted: its job's campaign and target */
    char target[160];
} grp_item;

static void grp_decide(kf_queue_item *it, grp_item *g, kf_queue_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void grp_decide(kf_queue_item *it, grp_item *g, kf_queue_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(it->err, sizeof(it->err), fmt, ap);
    va_end(ap);
    it->st = st;
    g->decided = 1;
}

/* The group's transaction: one statement marks the jobs done, stores their
 * evaluations and counts and credits the workers; then the verification
 * bar, then one commit. A job is marked done only where the result is
 * acceptable as it stands: leased, its fencing token current, leased to
 * this worker, not a verification. Every other item (stale, a duplicate, a
 * resend of a stored result, another worker's job, a verification) is
 * left to kf_queue_result after the group (g->defer), which decides it
 * with its exact reason: they are rare, and checking them here cost every
 * group a locking read of all its rows and an evaluation lookup (one
 * statement each, a WAL record per row lock: docs/benchmarks.md,
 * 2026-12-07). The lease token is part of the statement's match (after the
 * worker's id: only the lease's holder reaches that comparison, for a
 * token it was given), so a wrong one is left to kf_queue_result's
 * constant-time check and refusal; the tokens of the rows marked done are
 * compared again here, in constant time, and a mismatch rolls the group
 * back (returns -1: the caller stores each item on its own). A leased job
 * with its current token has no evaluation of that token (every path that
 * stores one moves the job off 'leased' in the same transaction, and a new
 * lease draws a new token); the unique index evaluations_one_final (one
 * final evaluation per job) backs this for the group's results, all final,
 * and a violation fails the group into the same fallback. Returns the
 * number of items stored, or -1 (rolled back; err). */
static int grp_store(kf_db *db, kf_queue_item *it, grp_item *g, int n, char *err, size_t errlen)
{
    enum { C_JOB, C_WORKER, C_TOKEN, C_VERDICT, C_DETAIL, C_METRICS, C_CUS, C_BUS, C_SPEEDUP, C_LOG,
           C_CV, C_LO, C_HI, C_LEASE, C_N };
    /* each column one binary array (kf_db_bin) */
    static const unsigned col_type[C_N] = { [C_JOB] = KF_DB_INT8, [C_WORKER] = KF_DB_TEXT, [C_TOKEN] = KF_DB_INT8,
                                            [C_VERDICT] = KF_DB_TEXT, [C_DETAIL] = KF_DB_TEXT,
                                            [C_METRICS] = KF_DB_TEXT, [C_CUS] = KF_DB_FLOAT8,
                                            [C_BUS] = KF_DB_FLOAT8, [C_SPEEDUP] = KF_DB_FLOAT8,
                                            [C_LOG] = KF_DB_TEXT, [C_CV] = KF_DB_FLOAT8, [C_LO] = KF_DB_FLOAT8,
                                            [C_HI] = KF_DB_FLOAT8, [C_LEASE] = KF_DB_BYTEA };
    kf_db_bin col[C_N];
    memset(col, 0, sizeof(col));
    for (int c = 0; c < C_N; c++) col[c].oid = col_type[c];
    int stored = -1, nsub = 0;
    int *ord = malloc(sizeof(*ord) * (size_t)(n > 0 ? n : 1)); /* submitted items, by job id */
    if (!ord) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (!g[i].decided && !g[i].defer) {
            int k = nsub++;
            /* insertion sort: n <= KF_SERVER_GROUP_MAX, mostly in order */
            while (k > 0 && it[ord[k - 1]].job_id > it[i].job_id) {
                ord[k] = ord[k - 1];
                k--;
            }
            ord[k] = i;
        }
    if (!nsub) {
        stored = 0;
        goto out;
    }
    for (int k = 0; k < nsub; k++) {
        int i = ord[k];
        const kf_result *res = it[i].res;
        char *detail = clean_text(res->detail, 4096), *log = clean_text(res->compile_log, 1u << 20);
        char *mown = NULL;
        const char *mt = res->metrics_json;
        double cv = 0, lo = 0, hi = 0;
        int has_noise = 0;
        /* the metrics as sent and their noise by the scanner where it takes
         * them whole (an honest worker's always), else by a full parse */
        if (!mt || !kf_noise_scan(mt, strlen(mt), res->speedup, &has_noise, &cv, &lo, &hi)) {
            json_t *mj;
            mt = metrics_object(res->metrics_json, &mj, &mown);
            has_noise = kf_noise_of_metrics_obj(mj, res->speedup, &cv, &lo, &hi) == 0;
            json_decref(mj);
        }
        has_noise = has_noise && g[i].v == KF_OK;
        kf_db_bin_i64(&col[C_JOB], it[i].job_id);
        kf_db_bin_str(&col[C_WORKER], it[i].worker_id);
        kf_db_bin_i64(&col[C_TOKEN], it[i].token);
        kf_db_bin_str(&col[C_VERDICT], kf_verdict_name((kf_verdict)g[i].v));
        kf_db_bin_str(&col[C_DETAIL], detail);
        kf_db_bin_str(&col[C_METRICS], mt);
        /* times and speedups: NULL when not measured (not finite or <= 0) */
        kf_db_bin_f64(&col[C_CUS], res->candidate_us > 0 ? res->candidate_us : NAN);
        kf_db_bin_f64(&col[C_BUS], res->baseline_us > 0 ? res->baseline_us : NAN);
        kf_db_bin_f64(&col[C_SPEEDUP], res->speedup > 0 ? res->speedup : NAN);
        kf_db_bin_str(&col[C_LOG], log);
        kf_db_bin_f64(&col[C_CV], has_noise ? cv : NAN);
        kf_db_bin_f64(&col[C_LO], has_noise && lo > 0 ? lo : NAN);
        kf_db_bin_f64(&col[C_HI], has_noise && hi > 0 ? hi : NAN);
        /* no token, or one of another length, never matches: sent empty */
        int has_token = it[i].lease_token && it[i].lease_token_len == KF_QUEUE_TOKEN_LEN;
        kf_db_bin_bytes(&col[C_LEASE], has_token ? it[i].lease_token : (const uint8_t *)"",
                        has_token ? KF_QUEUE_TOKEN_LEN : 0);
        free(detail);
        free(log);
        free(mown);
    }
    const char *pi[C_N];
    int plen[C_N], pfmt[C_N];
    for (int c = 0; c < C_N; c++) {
        pfmt[c] = 1;
        if (!(pi[c] = kf_db_bin_data(&col[c], &plen[c]))) {
            snprintf(err, errlen, "out of memory");
            goto out;
        }
    }
    if (kf_db_begin(db, err, errlen) < 0) goto out;
    if (kf_db_cmd(db, "SET LOCAL synchronous_commit = on", 0, NULL, err, errlen) < 0) goto fail;
    /* The rows' columns as array parameters (a JSON document of rows cost
     * a parse and a print of every metrics object: docs/benchmarks.md,
     * 2026-12-06 evening); x is in job id order, and so are the row locks
     * of upd (a nested loop over x by the primary key), so two groups
     * never wait on each other in a cycle. The state is compared with x's
     * column `want`, not the constant 'leased': with the constant, the plan
     * could read every leased job through the partial index jobs_leased
     * (planned while few were leased; 64,000 rows per group at 1,000
     * workers with leases of 64, a group transaction of 55 ms instead of
     * 23: docs/benchmarks.md, 2026-12-07 morning). The evaluations' counts
     * go to campaign_counts (schema 006): the group stores only eval jobs'
     * results, all final. */
    PGresult *r = kf_db_exec_fmt(db,
        "WITH x AS MATERIALIZED (SELECT *, 'leased'::text AS want FROM unnest($1::bigint[], $2::text[],"
        "  $3::bigint[], $4::text[],"
        "  $5::text[], $6::text[], $7::float8[], $8::float8[], $9::float8[], $10::text[], $11::float8[],"
        "  $12::float8[], $13::float8[], $14::bytea[]) AS x(job_id, worker_id, fencing_token, verdict, detail,"
        "  metrics, candidate_us, baseline_us, speedup, compile_log, cv, speedup_lo, speedup_hi, lease_token)),"
        " upd AS (UPDATE jobs j SET state = 'done', lease_deadline = NULL, finished_at = now() FROM x"
        "  WHERE j.id = x.job_id AND j.state = x.want AND j.fencing_token = x.fencing_token"
        "    AND j.worker_id = x.worker_id AND j.purpose <> 'verify'"
        "    AND j.lease_token = x.lease_token"
        "  RETURNING j.id, j.attempts, j.candidate_id, j.campaign_id, j.target, j.lease_token),"
        " bt AS (DELETE FROM lease_beats b USING upd WHERE b.job_id = upd.id),"
        " ins AS (INSERT INTO evaluations (job_id, candidate_id, attempt, worker_id, fencing_token,"
        "  verdict, detail, metrics, candidate_us, baseline_us, speedup, compile_log, is_final,"
        "  cv, speedup_lo, speedup_hi, job_campaign_id, job_target, job_purpose)"
        " SELECT x.job_id, u.candidate_id, u.attempts, x.worker_id, x.fencing_token, x.verdict,"
        "  x.detail, x.metrics::jsonb, x.candidate_us, x.baseline_us, x.speedup, x.compile_log,"
        "  true, x.cv, x.speedup_lo, x.speedup_hi, u.campaign_id, u.target, 'eval'"
        "  FROM x JOIN upd u ON u.id = x.job_id RETURNING job_campaign_id, job_target, verdict, worker_id),"
        " cnt AS (INSERT INTO campaign_counts (campaign_id, what, target, purpose, verdict, is_final, n)"
        "  SELECT job_campaign_id, 'evaluation', job_target, 'eval', verdict, true, count(*) FROM ins"
        "  GROUP BY job_campaign_id, job_target, verdict),"
        /* worker health: any verdict but infra_error resets the count */
        " wk AS (UPDATE workers w SET last_seen = now(), infra_errors = 0, jobs_done = w.jobs_done + c.n"
        "  FROM (SELECT worker_id, count(*) AS n FROM ins GROUP BY worker_id) c WHERE w.id = c.worker_id)"
        " SELECT id, lease_token, campaign_id, target FROM upd",
        C_N, pi, plen, pfmt, err, errlen);
    if (!r) goto fail;
    int bad = 0, nr = PQntuples(r);
    for (int k = 0; k < nr; k++) {
        int64_t job = kf_db_i64(r, k, 0, -1);
        int lo = 0, hi = nsub - 1, at = -1; /* binary search in ord */
        while (lo <= hi && at < 0) {
            int mid = (lo + hi) / 2;
            int64_t v = it[ord[mid]].job_id;
            if (v == job) at = ord[mid];
            else if (v < job) lo = mid + 1;
            else hi = mid - 1;
        }
        if (at < 0 || g[at].accept) {
            bad = 1; /* cannot happen: a row for a job not in the group, or twice */
            snprintf(err, errlen, "job %lld marked done without its result in the group", (long long)job);
            continue;
        }
        if (!token_matches(PQgetvalue(r, k, 1), it[at].lease_token, it[at].lease_token_len)) {
            bad = 1;
            snprintf(err, errlen, "job %lld: wrong lease token", (long long)job);
            continue;
        }
        g[at].accept = 1;
        g[at].campaign = kf_db_i64(r, k, 2, 0);
        snprintf(g[at].target, sizeof(g[at].target), "%s", PQgetvalue(r, k, 3));
    }
    PQclear(r);
    if (bad) goto fail;
    int nacc = 0;
    for (int k = 0; k < nsub; k++) {
        int i = ord[k];
        if (g[i].accept) nacc++;
        else g[i].defer = 1; /* decided by kf_queue_result, after the group */
    }
    /* a verification candidate: checked once per (campaign, target) with
     * the group's best speedup (the bar test of kf_verify_consider picks
     * the best unverified result of all stored anyway) */
    for (int i = 0; i < n; i++) {
        if (!g[i].accept || g[i].v != KF_OK || !(it[i].res->speedup > 0)) continue;
        int seen = 0;
        for (int k = 0; k < i && !seen; k++)
            seen = g[k].accept && g[k].v == KF_OK && it[k].res->speedup > 0 &&
                   g[k].campaign == g[i].campaign && !strcmp(g[k].target, g[i].target);
        if (seen) continue;
        double best = it[i].res->speedup;
        for (int k = i + 1; k < n; k++)
            if (g[k].accept && g[k].v == KF_OK && g[k].campaign == g[i].campaign &&
                !strcmp(g[k].target, g[i].target) && it[k].res->speedup > best)
                best = it[k].res->speedup;
        char camp[24];
        i64s(camp, g[i].campaign);
        if (kf_verify_consider(db, camp, g[i].target, best, err, errlen) < 0) goto fail;
    }
    if (kf_db_commit(db, err, errlen) < 0) goto fail;
    for (int i = 0; i < n; i++)
        if (g[i].accept) {
            it[i].st = KF_Q_OK;
            it[i].err[0] = 0;
        }
    stored = nacc;
    goto out;
fail:
    kf_db_rollback(db);
    for (int i = 0; i < n; i++) g[i].accept = 0;
    stored = -1;
out:
    for (int c = 0; c < C_N; c++) kf_db_bin_free(&col[c]);
    free(ord);
    return stored;
}

int kf_queue_result_group(kf_db *db, const kf_queue_config *cfg, kf_queue_item *it, int n)
{
    if (n == 1) { /* a group of one: the plain path (fewer, simpler statements) */
        char err[512];
        it->st = kf_queue_result(db, cfg, it->worker_id, it->job_id, it->token, it->lease_token,
                                 it->lease_token_len, it->res, &it->requeued, err, sizeof(err));
        snprintf(it->err, sizeof(it->err), "%s", it->st == KF_Q_OK ? "" : err);
        return it->st == KF_Q_OK;
    }
    grp_item *g = n > 0 ? calloc((size_t)n, sizeof(*g)) : NULL;
    int stored = 0;
    for (int i = 0; i < n; i++) {
        it[i].st = KF_Q_ERROR;
        it[i].requeued = 0;
        it[i].err[0] = 0;
        if (!g) continue;
        g[i].v = kf_verdict_parse(it[i].res->verdict);
        if (g[i].v < 0) {
            grp_decide(&it[i], &g[i], KF_Q_REJECTED, "unknown verdict '%.40s'",
                       it[i].res->verdict ? it[i].res->verdict : "");
            continue;
        }
        /* an infra_error may requeue, quarantine or pause: on its own */
        g[i].defer = g[i].v == KF_INFRA_ERROR;
        /* one result per job in a group; a second waits for the first */
        for (int k = 0; k < i && !g[i].defer; k++)
            if (!g[k].decided && !g[k].defer && it[k].job_id == it[i].job_id) g[i].defer = 1;
    }
    if (g) {
        char err[512];
        stored = grp_store(db, it, g, n, err, sizeof(err));
        if (stored < 0) {
            kf_log("group commit of %d results failed (%s): storing each on its own", n, err);
            stored = 0;
            for (int i = 0; i < n; i++)
                if (!(g[i].decided && g[i].v < 0)) { /* all but bad verdicts, from scratch */
                    g[i].decided = g[i].accept = 0;
                    g[i].defer = 1;
                }
        }
    }
    for (int i = 0; i < n; i++) {
        if (g && !g[i].defer) continue;
        char err[512];
        it[i].st = kf_queue_result(db, cfg, it[i].worker_id, it[i].job_id, it[i].token,
                                   it[i].lease_token, it[i].lease_token_len, it[i].res,
                                   &it[i].requeued, err, sizeof(err));
        snprintf(it[i].err, sizeof(it[i].err), "%s", it[i].st == KF_Q_OK ? "" : err);
    }
    free(g);
    return stored;
}

int kf_queue_release(kf_db *db, int64_t job_id, int64_t token, char *err, size_t errlen)
{
    char job[24], tok[24];
    i64s(job, job_id);
    i64s(tok, token);
    const char *p[2] = { job, tok };
    return kf_db_cmd(db,
        "WITH bt AS (DELETE FROM lease_beats WHERE job_id = $1::bigint AND fencing_token = $2::bigint)"
        " UPDATE jobs SET state = 'queued', lease_deadline = NULL, attempts = attempts - 1 "
        "WHERE id = $1::bigint AND fencing_token = $2::bigint AND state = 'leased'",
        2, p, err, errlen);
}

int kf_queue_pulse(kf_db *db, double gap_s, int *extended, char *err, size_t errlen)
{
    if (extended) *extended = 0;
    char gap[32];
    snprintf(gap, sizeof(gap), "%.3f", gap_s);
    const char *p[1] = { gap };
    /* One statement: the gap since the last pulse (row locked), the leases
     * pushed back by it when it is an outage, the new pulse. */
    PGresult *r = kf_db_exec(db,
        "WITH prev AS (SELECT now() - last_alive AS gap FROM coordinator_pulse WHERE id = 1"
        "              FOR UPDATE),"
        " ext AS (UPDATE jobs SET lease_deadline = lease_deadline + prev.gap FROM prev"
        "         WHERE jobs.state = 'leased' AND prev.gap > $1::float8 * interval '1 second'"
        "         RETURNING jobs.id),"
        " extb AS (UPDATE lease_beats SET deadline = deadline + prev.gap FROM prev"
        "         WHERE job_id <> 0 AND prev.gap > $1::float8 * interval '1 second'),"
        " upd AS (UPDATE coordinator_pulse SET last_alive = now() WHERE id = 1 RETURNING 1)"
        " SELECT (SELECT count(*) FROM ext), (SELECT extract(epoch FROM gap)::float8 FROM prev),"
        "        (SELECT count(*) FROM upd)", 1, p, err, errlen);
    if (!r) return -1;
    int n = (int)kf_db_i64(r, 0, 0, 0);
    double g = kf_db_f64(r, 0, 1, 0);
    PQclear(r);
    if (g > gap_s)
        kf_log("coordinator or database away for %.1f s: %d lease(s) extended by the gap "
               "(an outage is not the candidate's attempt)", g, n);
    if (extended) *extended = n;
    return 0;
}

int kf_queue_reap(kf_db *db, const kf_queue_config *cfg, int *requeued, int *exhausted, char *err,
                  size_t errlen)
{
    if (requeued) *requeued = 0;
    if (exhausted) *exhausted = 0;
    /* The beats first (schema 018). A database crash empties lease_beats,
     * its marker row (job_id 0) with it: then every leased job gets a beat
     * of one lease length (cfg->lease_ms) from now -- the grace period: its
     * worker, if alive, heartbeats again within it -- and the marker is
     * written back. The marker's deadline is the last sweep: every 30 s the
     * expired beats of leases that ended without deleting theirs (a
     * campaign deleted, an operator's edit) go, in one pass over the table
     * (expired only: a sweep that met a beat a new lease of the same job
     * had just written would otherwise delete it on its stale check). */
    char lease[24];
    i64s(lease, cfg->lease_ms);
    const char *pl[1] = { lease };
    PGresult *r = kf_db_exec(db,
        "WITH m AS (SELECT deadline < now() - interval '30 seconds' AS sweep FROM lease_beats WHERE job_id = 0),"
        " rb AS (INSERT INTO lease_beats (job_id, fencing_token, deadline)"
        "  SELECT id, fencing_token, now() + $1::bigint * interval '1 millisecond'"
        "  FROM jobs WHERE state = 'leased' AND NOT EXISTS (SELECT 1 FROM m)"
        "  ON CONFLICT (job_id) DO NOTHING RETURNING 1),"
        " sw AS (DELETE FROM lease_beats b WHERE b.job_id <> 0 AND (SELECT sweep FROM m) AND b.deadline < now()"
        "  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = b.job_id AND j.state = 'leased'"
        "                  AND j.fencing_token = b.fencing_token) RETURNING 1),"
        " mk AS (INSERT INTO lease_beats (job_id, fencing_token, deadline)"
        "  SELECT 0, 0, now() WHERE COALESCE((SELECT sweep FROM m), true)"
        "  ON CONFLICT (job_id) DO UPDATE SET deadline = now())"
        " SELECT NOT EXISTS (SELECT 1 FROM m), (SELECT count(*) FROM rb)", 1, pl, err, errlen);
    if (!r) return -1;
    if (strcmp(PQgetvalue(r, 0, 0), "t") == 0)
        kf_log("lease heartbeats lost (database crash or failover): %s lease(s) given one lease length "
               "of grace from now", PQgetvalue(r, 0, 1));
    PQclear(r);
    /* One statement: lock the expired leases (skipping rows a result is
     * being stored for right now), requeue or finish them, and record the
     * lost attempt as an evaluation owning the expired token. A lease is
     * expired when both its row's deadline (set when leased) and its
     * beat's (its heartbeats) have passed; nothing is reaped while the
     * beats' marker is missing. Its worker acknowledged it when it
     * heartbeat it (jobs.acked). A lease its worker never acknowledged
     * (the job's reply was most likely lost) does not consume an attempt;
     * five such expiries end the job as infra_error, never as the
     * candidate's runtime_error. A lease heartbeat past its row's deadline
     * is looked at by every pass (a primary-key probe of lease_beats each)
     * until it ends. */
    r = kf_db_exec(db,
        "WITH exp AS ("
        "  SELECT j.id FROM jobs j"
        "  LEFT JOIN lease_beats b ON b.job_id = j.id AND b.fencing_token = j.fencing_token"
        "  WHERE j.state = 'leased' AND j.lease_deadline < now() AND (b.deadline IS NULL OR b.deadline < now())"
        "    AND EXISTS (SELECT 1 FROM lease_beats mk WHERE mk.job_id = 0)"
        "  FOR UPDATE OF j SKIP LOCKED),"
        " upd AS ("
        "  UPDATE jobs j SET lease_deadline = NULL,"
        "    lost = j.lost + CASE WHEN j.acked THEN 1 ELSE 0 END,"
        "    unacked_lost = j.unacked_lost + CASE WHEN j.acked THEN 0 ELSE 1 END,"
        "    attempts = j.attempts - CASE WHEN j.acked THEN 0 ELSE 1 END,"
        "    state = CASE WHEN (j.acked AND j.attempts >= j.max_attempts) OR"
        "                      (NOT j.acked AND j.unacked_lost + 1 >= 5) THEN 'done' ELSE 'queued' END,"
        "    finished_at = CASE WHEN (j.acked AND j.attempts >= j.max_attempts) OR"
        "                            (NOT j.acked AND j.unacked_lost + 1 >= 5) THEN now() END"
        "  FROM exp WHERE j.id = exp.id"
        "  RETURNING j.id, j.candidate_id, j.attempts, j.lost, j.worker_id, j.fencing_token,"
        "    j.state, j.acked, j.unacked_lost, j.campaign_id, j.target, j.purpose),"
        " bt AS (DELETE FROM lease_beats b USING upd WHERE b.job_id = upd.id),"
        /* their counts in campaign_counts (schema 006) */
        " cnt AS (INSERT INTO campaign_counts (campaign_id, what, target, purpose, verdict, is_final, n)"
        "  SELECT campaign_id, 'evaluation', target, purpose,"
        "    CASE WHEN state = 'done' AND acked THEN 'runtime_error' ELSE 'infra_error' END, state = 'done',"
        "    count(*) FROM upd GROUP BY 1, 3, 4, 5, 6)"
        " INSERT INTO evaluations (job_id, candidate_id, attempt, worker_id, fencing_token,"
        "   reported, verdict, detail, is_final, job_campaign_id, job_target, job_purpose)"
        " SELECT id, candidate_id, attempts + CASE WHEN acked THEN 0 ELSE 1 END, worker_id, fencing_token, false,"
        "   CASE WHEN state = 'done' AND acked THEN 'runtime_error' ELSE 'infra_error' END,"
        "   CASE WHEN NOT acked AND state = 'done' THEN"
        "          format('the job''s lease expired unacknowledged %s times (its reply never reached a"
        " worker, or the worker died before starting): the farm''s fault, not the candidate''s',"
        " unacked_lost)"
        "        WHEN NOT acked THEN"
        "          format('lease expired before worker %s acknowledged it (reply lost?); not counted"
        " as an attempt', worker_id)"
        "        WHEN state <> 'done' THEN"
        "          format('lease expired (worker %s stopped answering)', worker_id)"
        "        WHEN lost = attempts THEN"
        "          format('lost %s workers while evaluating (lease expired each time)', lost)"
        "        ELSE format('lost %s workers while evaluating (lease expired on %s of %s"
        " attempts, the others ended in infra_error)', lost, lost, attempts) END,"
        "   state = 'done', campaign_id, target, purpose"
        " FROM upd RETURNING job_id, is_final, worker_id, attempt, verdict",
        0, NULL, err, errlen);
    if (!r) return -1;
    for (int i = 0; i < PQntuples(r); i++) {
        int fin = strcmp(PQgetvalue(r, i, 1), "t") == 0;
        if (fin) {
            if (exhausted) (*exhausted)++;
            kf_log("job %s: lease of worker %s expired, attempts exhausted (%s): %s",
                   PQgetvalue(r, i, 0), PQgetvalue(r, i, 2), PQgetvalue(r, i, 3), PQgetvalue(r, i, 4));
        } else {
            if (requeued) (*requeued)++;
            kf_log("job %s: lease of worker %s expired, requeued (attempt %s)",
                   PQgetvalue(r, i, 0), PQgetvalue(r, i, 2), PQgetvalue(r, i, 3));
        }
    }
    PQclear(r);
    /* a verification that lost all its workers decides nothing */
    if (kf_db_cmd(db,
            "UPDATE evaluations e SET confirmation = 'inconclusive', confirmed_at = now(),"
            " confirmation_detail = 'inconclusive: the verification job ended without a result'"
            " FROM jobs j WHERE j.purpose = 'verify' AND j.state = 'done' AND j.verifies = e.id"
            "   AND e.confirmation = 'pending'", 0, NULL, err, errlen) < 0)
        return -1;
    return 0;
}

int kf_queue_register_worker(kf_db *db, const char *worker_id, const char *hostname,
                             const char *backend, const char *devices_json,
                             const char *const *classes, int n_classes,
                             const char *driver_version, const char *toolkit_version,
                             int slots, char *err, size_t errlen)
{
    char *arr = kf_db_text_array(classes, n_classes);
    char *dev = clean_text(devices_json ? devices_json : "[]", 1u << 20);
    char *host = clean_text(hostname, 256), *be = clean_text(backend, 32);
    char *drv = clean_text(driver_version, 128), *tk = clean_text(toolkit_version, 128);
    char sl[24];
    i64s(sl, slots > 0 ? slots : 1);
    int rc = -1;
    if (!arr || !dev) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    const char *p[8] = { worker_id, host, be, dev, arr, drv, tk, sl };
    rc = kf_db_cmd(db,
        "INSERT INTO workers (id, hostname, backend, devices, classes, driver_version,"
        "  toolkit_version, slots) VALUES ($1, $2, $3, $4::jsonb, $5::text[], $6, $7, $8::int) "
        "ON CONFLICT (id) DO UPDATE SET hostname = EXCLUDED.hostname,"
        "  backend = EXCLUDED.backend, devices = EXCLUDED.devices, classes = EXCLUDED.classes,"
        "  driver_version = EXCLUDED.driver_version, toolkit_version = EXCLUDED.toolkit_version,"
        "  slots = EXCLUDED.slots, registered = now(), last_seen = now()",
        8, p, err, errlen);
out:
    free(arr);
    free(dev);
    free(host);
    free(be);
    free(drv);
    free(tk);
    return rc;
}

int kf_queue_set_quarantine(kf_db *db, const char *worker_id, int quarantined,
                            char *err, size_t errlen)
{
    const char *p[2] = { worker_id, quarantined ? "true" : "false" };
    PGresult *r = kf_db_exec(db,
        "UPDATE workers SET quarantined = $2::boolean, infra_errors = 0,"
        "  quarantine_reason = CASE WHEN $2::boolean THEN 'quarantined by an operator' END "
        "WHERE id = $1 RETURNING id", 2, p, err, errlen);
    if (!r) return -1;
    int n = PQntuples(r);
    PQclear(r);
    if (n == 0) {
        snprintf(err, errlen, "no worker '%s'", worker_id);
        return -1;
    }
    return 0;
}

int kf_queue_note_clock(kf_db *db, const char *worker_id, int64_t skew_ms, char *err,
                        size_t errlen)
{
    char sk[24];
    i64s(sk, skew_ms);
    const char *p[2] = { worker_id, sk };
    /* written only when it moved by half a second: no churn per poll */
    return kf_db_cmd(db,
        "UPDATE workers SET clock_skew_ms = $2::bigint WHERE id = $1 AND"
        "  (clock_skew_ms IS NULL OR abs(clock_skew_ms - $2::bigint) >= 500)",
        2, p, err, errlen);
}
