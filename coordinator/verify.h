/*
 * verify.h -- redundant verification of winners (prefix kf_verify_).
 *
 * Design. No single worker's `ok` is called a campaign's best on a target.
 * When a final `ok` result of an eval job would become the best on its
 * target (its speedup beats every confirmed or pending result there), its
 * evaluation turns `pending` and a *verification job* is queued: the same
 * candidate, the same target, fresh inputs (its own seed), preferring any
 * live worker other than the one that reported the result (the lease query
 * gives it to that worker only when no other serves the target, and not
 * before a short delay: re-timed later, as BOINC re-runs on one host when it
 * has no other). When the verification's result arrives it is compared:
 *
 *   both ok and |ln(s1/s2)| <= max(ln 1.5, 4 * sqrt(2) * cv)          -> confirmed
 *   the verifier says it fails (incorrect, cheat, crash, timeout ...) -> disputed
 *   speedups further apart than the measured noise allows            -> disputed
 *   the verifier could not evaluate (infra_error, unsupported)        -> inconclusive
 *
 * (s = speedup; per evaluation, its largest coefficient of variation of any
 * benchmark shape and side, from the judge's metrics; cv = the smaller of the
 * two when two workers took part, so that a liar cannot widen the allowance
 * by claiming a noisy run, the larger when one worker re-timed itself.) A
 * dispute between two workers adds one to both workers' `disputes`, an
 * agreement to both `agreements` (a worker re-timed alone changes neither); a
 * worker is quarantined when its disputes reach KF_VERIFY_QUARANTINE_DISPUTES,
 * outnumber its agreements, and at least KF_VERIFY_QUARANTINE_OTHERS of them
 * came from others than the worker that disputed it most (per-peer counts
 * in workers.dispute_counts, schema/013_dispute_peers.sql). A dispute says
 * that two workers disagree, not which one is wrong: two workers that only
 * contradict each other (two honest ones timing on a loaded host, or one
 * liar and the only honest peer) both stay in service, their disputed
 * results never named best; one liar accusing an honest worker again and
 * again, plus one dispute from timing noise, cannot quarantine it; the odd
 * one out among three or more is caught once its disputes beyond those of
 * its most frequent accuser reach two (two each from two workers, or one
 * each from three). After every conclusion the next would-be
 * best is considered, so a disputed winner hands the title down.
 * A confirmed result's speedup interval widens to cover the verification's
 * (noise.h). State lives in evaluations.confirmation (schema/003_trust.sql).
 */
#ifndef KF_VERIFY_H
#define KF_VERIFY_H

#include <stddef.h>
#include "db.h"
#include "queue.h"

#define KF_VERIFY_QUARANTINE_DISPUTES 3
#define KF_VERIFY_QUARANTINE_OTHERS 2

/* Inside the caller's transaction: if the best unverified `ok` result of
 * (campaign, target) would become the best there, mark it pending and queue
 * its verification job. new_speedup: the speedup of the result just stored
 * (> 0: nothing is done unless it beats the best confirmed or pending one,
 * one indexed probe); <= 0: a full pass (after a verification concluded).
 * Ids as decimal text. 0, or -1 with reason. */
int kf_verify_consider(kf_db *db, const char *campaign_id, const char *target, double new_speedup,
                       char *err, size_t errlen);

/* Inside the caller's transaction: the final evaluation of verification job
 * verify_job_id has been stored; compare it with the evaluation it verifies
 * (orig_eval_id) and record confirmed / disputed / inconclusive, update both
 * workers' reputations. 0, or -1 with reason. */
int kf_verify_conclude(kf_db *db, const kf_queue_config *cfg, const char *orig_eval_id,
                       const char *verify_job_id, char *err, size_t errlen);

#endif
