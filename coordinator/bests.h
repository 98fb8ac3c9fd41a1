/*
 * bests.h -- the best candidates of a campaign, per target and overall,
 * with their noise (prefix kf_bests_).
 *
 * Design. A speedup is measured per target routing class; a candidate can
 * be fast on one GPU model and incorrect on another. So:
 *   - per target: the candidate with the highest ok speedup there, and the
 *     candidates tied with it (speedup intervals overlap, noise.h);
 *   - overall: only candidates that are ok on *every* target of the
 *     campaign qualify, ranked by the geometric mean of their speedups;
 *     a per-target best that does not qualify is listed with the targets
 *     where it is not ok, and its verdict there.
 * Shared by `kfarm best`, `kfarm campaign status` and the export, so all of
 * them name the same winner.
 */
#ifndef KF_BESTS_H
#define KF_BESTS_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "db.h"

/* The bests of campaign_id as a new JSON object:
 *   {"targets": [{"target": T, "best": R | null, "ties": [R...]}...],
 *    "overall": {"candidate": id, "speedup": geomean, "lo", "hi", "cv",
 *                "defines", "per_target": [R...], "ties": [id...]} | null,
 *    "not_everywhere": [{"candidate": id, "fast_on": T, "speedup": x,
 *                        "not_ok": [{"target": T, "verdict": v | "none yet"}]}]}
 * where R = {"candidate", "speedup", "lo", "hi", "cv", "candidate_us",
 * "baseline_us", "worker", "defines", "confirmation", "confirmed_by"}; the
 * overall best has "confirmed" (on every target). Disputed results are never
 * named; confirmed ones rank first (coordinator/verify.h). NULL with reason
 * on errors. */
json_t *kf_bests(kf_db *db, int64_t campaign_id, char *err, size_t errlen);

/* kf_bests with at most max_ties ties per target (max_ties <= 0: all, as
 * kf_bests): the first max_ties in rank order, and "ties_more": true on a
 * target that has more. For callers that show a count, not the list
 * (`kfarm campaign status`): a long campaign's best can be tied with
 * thousands of results, and reading them all costs far more than the rest
 * of the status. With one target, the overall best's "ties" are cut alike. */
json_t *kf_bests_top(kf_db *db, int64_t campaign_id, int max_ties, char *err, size_t errlen);

/* How many candidates the overall ranking of campaign_id reads (bests.c's
 * threshold walk, for a campaign with several targets): the size of the
 * set it groups, or -1 where it groups the whole campaign (one target, or
 * the walk's bound does not hold); -2 with reason on errors. For tests and
 * benchmarks: the ranking is the same either way. */
int kf_bests_overall_read(kf_db *db, int64_t campaign_id, char *err, size_t errlen);

#endif
