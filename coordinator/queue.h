/*
 * queue.h -- the job queue in PostgreSQL (prefix kf_queue_).
 *
 * Design. A job is one candidate on one target routing class. Its life:
 *
 *   queued --lease--> leased --result--> done            (final evaluation)
 *                       |  \--result infra_error--> queued (non-final; retried)
 *                       \--lease expired (reaper)--> queued (non-final "lease expired")
 *   attempts exhausted (max_attempts leases): done with a final evaluation,
 *   runtime_error "lost N workers ..." or the last infra_error.
 *
 * Leasing is one UPDATE of the jobs picked by a SELECT ... FOR UPDATE SKIP
 * LOCKED LIMIT n (n = 1, or up to KF_QUEUE_MAX_LEASES for a worker that asks
 * for several): concurrent coordinators/connections never hand out the same
 * job and never wait on each other. Each lease draws a new fencing token from a
 * fleet-wide sequence (the public lease number) and a 128-bit random lease
 * token (the secret, RAND_bytes); heartbeats and results must come from the
 * worker holding the lease and carry both, the token compared in constant
 * time (CRYPTO_memcmp), so a lease cannot be guessed or taken over.
 * Heartbeats extend a lease in lease_beats (schema 018: unlogged, rebuilt
 * with a grace period after a database crash), never in the job's row.
 * A lease that expires is recorded as an evaluation (reported = false) that
 * owns its token, so a late result with that token is refused as STALE.
 *
 * Exactly-once results: the job row is locked (FOR UPDATE) while a result is
 * checked and stored (one at a time, or many in one transaction: the group
 * commit of kf_queue_result_group, same checks); an evaluation already stored for (job, token) makes the
 * resend a DUPLICATE (acknowledged, nothing stored), and the unique indexes
 * (job, token) and (job) WHERE is_final back this up in the database itself.
 *
 * Workers: every reported infra_error increments the worker's consecutive
 * counter (any other verdict resets it); at quarantine_after the worker is
 * quarantined, with the reason, and gets no more jobs until released
 * (kfarm worker release NAME); every refused lease tells it why.
 *
 * Task faults: an infra_error whose metrics blame "task" (the judge proved
 * the task's own reference or baseline broken) is nobody's health problem:
 * the job goes back to the queue without counting the attempt and the
 * campaign is paused with the reason (campaigns.pause_reason).
 *
 * Fair scheduling: a lease goes to the running campaign with the fewest
 * leased jobs per unit of campaigns.share (1 by default: equal shares),
 * oldest job first within the campaign.
 */
#ifndef KF_QUEUE_H
#define KF_QUEUE_H

#include <stddef.h>
#include <stdint.h>
#include "db.h"

#define KF_QUEUE_TOKEN_LEN 16 /* bytes of a lease token (128 bits) */
/* A worker not heard from (lease, heartbeat, result) for this long is shown
 * offline and counts as no live worker for a target (s). */
#define KF_QUEUE_OFFLINE_S 60

typedef struct {
    int lease_ms;           /* lease length, ms (default 30000) */
    int quarantine_after;   /* consecutive infra_errors before quarantine (default 5) */
} kf_queue_config;

/* Fill cfg with the defaults. */
void kf_queue_config_default(kf_queue_config *cfg);

typedef enum {
    KF_Q_OK = 0,
    KF_Q_NO_JOB,     /* lease: nothing to do (or worker quarantined: see err) */
    KF_Q_STALE,      /* heartbeat/result: token not current */
    KF_Q_DUPLICATE,  /* result already stored for this token */
    KF_Q_REJECTED,   /* bad request (unknown job, unknown verdict) */
    KF_Q_ERROR       /* database failure: retry later */
} kf_queue_status;

typedef struct {
    int64_t job_id;
    int64_t fencing_token;
    int64_t candidate_id;
    int64_t campaign_id;
    int64_t seed;            /* input RNG seed (job id unless set) */
    int attempt;             /* 1-based lease count of this job */
    char target[128];
    uint8_t lease_token[KF_QUEUE_TOKEN_LEN]; /* random secret of this lease */
    int verify;              /* a verification job (re-evaluates a would-be best) */
} kf_lease;

/* Lease the oldest queued job of a running campaign whose target is one of
 * classes[0..n) (n == 0: the classes the worker registered). Also records the
 * worker as seen. Returns KF_Q_OK with *out filled, KF_Q_NO_JOB (err says
 * "quarantined" when that is why), or KF_Q_ERROR with reason. */
kf_queue_status kf_queue_lease(kf_db *db, const kf_queue_config *cfg, const char *worker_id,
                               const char *const *classes, int n, kf_lease *out,
                               char *err, size_t errlen);

#define KF_QUEUE_MAX_LEASES 64 /* jobs leased by one kf_queue_lease_many at most */

/* Where a lease starts reading a campaign's queue (kf_queue_lease_floors).
 * A leased job leaves a dead entry at the head of the queue's index until
 * VACUUM, and every lease from the head stepped over all of them: 1.3 ms
 * after 16,000 leases (44 index pages), linear in the leases since the last
 * vacuum. A floor is the largest id this caller leased from a campaign:
 * the next lease reads from there. Jobs below a floor (a lease that expired
 * and was queued again, a retry, jobs committed late by a slower
 * transaction) are found by the full read done when a floor is older than
 * refresh_s, or when nothing is found above the floors: a job below a
 * floor waits at most refresh_s more, and NO_JOB is never answered while
 * one is queued. One per serving thread (no locking). */
#define KF_QUEUE_FLOORS 16
typedef struct {
    struct {
        int64_t campaign_id;  /* 0: free slot */
        int64_t floor;        /* read this campaign's non-verification jobs from this id on */
        double set_at;        /* when the floor was last read from 0 (kf_util_now_s) */
    } f[KF_QUEUE_FLOORS];
    double refresh_s;         /* read from 0 again after this long (default 2 s) */
} kf_queue_floors;

/* Empty floors with the default refresh (2 s). */
void kf_queue_floors_init(kf_queue_floors *fl);

/* Lease up to max (1..KF_QUEUE_MAX_LEASES) jobs at once, as kf_queue_lease
 * leases one, in one statement: out[0..*got) receive them (verification
 * jobs first, then oldest first), each with its own fencing token and
 * random lease token. With max > 1 the worker gets at most half of the
 * queued jobs the statement sees (the ones it locks, up to max rounded up
 * to a power of two, and as many again counted past them without locks),
 * at least one: a short queue is shared by the workers that ask, not taken
 * whole by the first. Returns KF_Q_OK (*got >= 1), KF_Q_NO_JOB or
 * KF_Q_ERROR with reason. */
kf_queue_status kf_queue_lease_many(kf_db *db, const kf_queue_config *cfg, const char *worker_id,
                                    const char *const *classes, int n, int max, kf_lease *out,
                                    int *got, char *err, size_t errlen);

/* kf_queue_lease_many reading each campaign's queue from its floor in fl
 * (see kf_queue_floors; NULL: from the head, as kf_queue_lease_many) and
 * raising the floors to what it leased. Same results and errors.
 *
 * payload (NULL: not wanted): on KF_Q_OK, the result of the lease statement
 * itself, which also returned what the worker needs of each leased job, so
 * that no second statement reads it: one row per lease in no order, with
 * columns KF_QUEUE_PL_JOB (job id), _SOURCE (the candidate's source),
 * _DEFINES (its defines, JSON object text), _TASK (task id) and _TASK_SHA
 * (the task's sha256, which names its content: tasks never change). The
 * caller PQclear()s it. */
#define KF_QUEUE_PL_JOB 0
#define KF_QUEUE_PL_SOURCE 9
#define KF_QUEUE_PL_DEFINES 10
#define KF_QUEUE_PL_TASK 11
#define KF_QUEUE_PL_TASK_SHA 12
kf_queue_status kf_queue_lease_floors(kf_db *db, const kf_queue_config *cfg, kf_queue_floors *fl,
                                      const char *worker_id, const char *const *classes, int n, int max,
                                      kf_lease *out, int *got, PGresult **payload, char *err, size_t errlen);

/* Extend the lease of (job, token) to now + lease_ms: its beat in
 * lease_beats (schema 018, unlogged); the job's row is written only by a
 * lease's first heartbeat (acknowledged). KF_Q_OK, KF_Q_STALE, KF_Q_REJECTED (another worker's,
 * wrong lease token) or KF_Q_ERROR. */
kf_queue_status kf_queue_heartbeat(kf_db *db, const kf_queue_config *cfg, const char *worker_id,
                                   int64_t job_id, int64_t token, const uint8_t *lease_token,
                                   size_t lease_token_len, char *err, size_t errlen);

/* One lease of a heartbeat that covers several (kf_queue_heartbeat_many). */
typedef struct {
    int64_t job_id, token;
    const uint8_t *lease_token;
    size_t lease_token_len;
    int alive;                 /* out: 1 extended, 0 not current or not this worker's */
} kf_queue_hb;

/* Extend every lease of hb[0..n) held by worker_id in one statement (as
 * kf_queue_heartbeat, each checked alike: current, this worker's, lease
 * token equal). hb[i].alive says which were extended. Returns the number
 * extended, or -1 with reason (database; none extended). */
int kf_queue_heartbeat_many(kf_db *db, const kf_queue_config *cfg, const char *worker_id,
                            kf_queue_hb *hb, int n, char *err, size_t errlen);

/* A worker's report. Strings may be NULL; times in µs, <= 0 or non-finite
 * means "not measured" (stored as NULL). */
typedef struct {
    const char *verdict;       /* kf_verdict name */
    const char *detail;
    const char *metrics_json;  /* JSON object; invalid JSON is stored as NULL */
    const char *compile_log;
    double candidate_us, baseline_us, speedup;
} kf_result;

/* Store a result for (job, token) exactly once (see the header comment).
 * Returns KF_Q_OK (stored), KF_Q_DUPLICATE (already stored: acknowledge),
 * KF_Q_STALE (token not current / lease lost), KF_Q_REJECTED (unknown job or
 * verdict) or KF_Q_ERROR (database; nothing stored, the worker retries).
 * *requeued (optional) is set when an infra_error put the job back. */
kf_queue_status kf_queue_result(kf_db *db, const kf_queue_config *cfg, const char *worker_id,
                                int64_t job_id, int64_t token, const uint8_t *lease_token,
                                size_t lease_token_len, const kf_result *res,
                                int *requeued, char *err, size_t errlen);

/* One result of a group (kf_queue_result_group): the request's fields in,
 * the outcome out. */
typedef struct {
    const char *worker_id;
    int64_t job_id, token;
    const uint8_t *lease_token;
    size_t lease_token_len;
    const kf_result *res;
    kf_queue_status st;        /* out: as kf_queue_result would return for it alone */
    int requeued;              /* out: an infra_error put the job back */
    char err[512];             /* out: the reason of any status but KF_Q_OK */
} kf_queue_item;

/* Group commit: store the n results of items in one transaction, committed
 * durably once, each item's outcome exactly the one kf_queue_result gives
 * (same checks: job locked, exactly once per (job, token), fencing token and
 * lease token current and the worker's). The results whose jobs are leased
 * to their worker under the current tokens are stored by one statement for
 * the whole group (jobs done, evaluations, counts, workers); every other
 * item -- stale, duplicate, another worker's, an infra_error, a
 * verification's result, a second result for a job already in the group --
 * is decided after the group commits, each by kf_queue_result. When the
 * group's transaction fails (database error, deadlock, lost connection) it
 * is rolled back and every item is stored on its own by kf_queue_result,
 * so one bad result never decides another's acknowledgement. A verdict
 * check of an ok result against the campaign's verification bar is made
 * once per (campaign, target) with the group's best speedup. A group of
 * one is stored by kf_queue_result. Returns the number of items stored in
 * the group transaction itself (0 after a fallback); every item's st is
 * set. */
int kf_queue_result_group(kf_db *db, const kf_queue_config *cfg, kf_queue_item *items, int n);

/* Undo a lease that never reached the worker (the reply could not be built
 * or sent): back to queued, the attempt not counted. Only if (job, token) is
 * still the current lease. Returns 0 or -1 with reason. */
int kf_queue_release(kf_db *db, int64_t job_id, int64_t token, char *err, size_t errlen);

/* Record the coordinator's pulse; when the previous one is more than
 * gap_s seconds old (the coordinator was frozen or down, or the database
 * was), first extend every current lease by the gap, so the reaper never
 * charges an outage as an attempt. *extended (optional): leases extended.
 * Returns 0 or -1 with reason. */
int kf_queue_pulse(kf_db *db, double gap_s, int *extended, char *err, size_t errlen);

/* Return expired leases (their row's and their beat's deadline passed) to
 * the queue, or finish jobs whose attempts are exhausted with a final
 * runtime_error (infra_error when never acknowledged). First, when a
 * database crash emptied lease_beats (its marker row is gone), every leased
 * job gets a beat of one lease length (cfg->lease_ms) from now (the grace
 * period), and nothing is reaped before; every 30 s, expired beats of
 * leases that ended elsewhere are swept. Counts are optional outputs.
 * Returns 0 or -1 with reason. */
int kf_queue_reap(kf_db *db, const kf_queue_config *cfg, int *requeued, int *exhausted, char *err,
                  size_t errlen);

/* Register (or re-register) a worker. devices_json is a JSON array (NULL:
 * []). Returns 0 or -1 with reason. */
int kf_queue_register_worker(kf_db *db, const char *worker_id, const char *hostname,
                             const char *backend, const char *devices_json,
                             const char *const *classes, int n_classes,
                             const char *driver_version, const char *toolkit_version,
                             int slots, char *err, size_t errlen);

/* Lift (quarantined = 0) or set the quarantine of a worker. Returns 0, or -1
 * with reason (unknown worker, database). */
int kf_queue_set_quarantine(kf_db *db, const char *worker_id, int quarantined,
                            char *err, size_t errlen);

/* Record a worker's clock skew (its message timestamp minus the
 * coordinator's clock, ms; shown by `kfarm workers`). Liveness never uses
 * the worker's clock. Returns 0 or -1 with reason. */
int kf_queue_note_clock(kf_db *db, const char *worker_id, int64_t skew_ms, char *err,
                        size_t errlen);

#endif
